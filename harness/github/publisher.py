"""Publishing to GitHub: sticky comment, check run (→ commit status fallback), dispatch, badge branch."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from github import Github, GithubException

from harness.github.client import PublishError, call
from harness.report.comment import marker

MAX_OUTPUT = 65_535  # check-run summary and text limits
ANNOTATION_BATCH = 50
MAX_DISPATCH_KEYS = 10
MAX_EVENT_TYPE = 100


@dataclass(frozen=True)
class Annotation:
    path: str
    message: str
    title: str
    level: str = "failure"  # notice | warning | failure
    line: int = 1

    def as_api(self) -> dict[str, Any]:
        return {"path": self.path, "start_line": self.line, "end_line": self.line, "annotation_level": self.level,
                "message": self.message[:64_000], "title": self.title[:255]}


class Publisher:
    """Handed its client, so tests point it at a loopback server."""

    def __init__(self, gh: Github, repo: str) -> None:
        self.gh = gh
        self.repo_name = repo
        self._repo: Any = None

    @property
    def repo(self) -> Any:
        if self._repo is None:
            self._repo = call(f"GET repository {self.repo_name}", lambda: self.gh.get_repo(self.repo_name))
        return self._repo

    # ------------------------------------------------------------------ sticky comment
    def find_comment(self, pr: int, key: str) -> Any:
        """The comment carrying our hidden marker (no GET /user: GITHUB_TOKEN gets 403 there)."""
        tag = marker(key)
        issue = call(f"GET pull request #{pr}", lambda: self.repo.get_issue(pr))
        return call(f"list comments of #{pr}", lambda: next((c for c in issue.get_comments() if tag in (c.body or "")), None))

    def upsert_comment(self, pr: int, key: str, body: str, create: bool = True) -> tuple[str, int | None]:
        """Edit our comment in place, or create it. Returns (action, comment id)."""
        if marker(key) not in body:
            raise ValueError("comment body must carry the marker of its key")
        existing = self.find_comment(pr, key)
        if existing is not None:
            if existing.body == body:
                return "unchanged", existing.id
            call(f"edit comment {existing.id}", lambda: existing.edit(body))
            return "updated", existing.id
        if not create:
            return "skipped", None
        issue = call(f"GET pull request #{pr}", lambda: self.repo.get_issue(pr))
        made = call(f"create comment on #{pr}", lambda: issue.create_comment(body))
        return "created", made.id

    # ------------------------------------------------------------------ checks
    def check(self, sha: str, name: str, conclusion: str, title: str, summary: str, text: str = "",
              annotations: list[Annotation] | None = None, details_url: str | None = None) -> str:
        """A completed check run with annotations in batches of 50; a commit status when the token
        cannot write check runs (a PAT gets 403/404 on the checks API)."""
        annotations = annotations or []
        output = {"title": title[:255], "summary": summary[:MAX_OUTPUT], "text": text[:MAX_OUTPUT]}
        first = [a.as_api() for a in annotations[:ANNOTATION_BATCH]]
        kwargs: dict[str, Any] = {"name": name, "head_sha": sha, "status": "completed", "conclusion": conclusion,
                                  "output": {**output, "annotations": first} if first else output}
        if details_url:
            kwargs["details_url"] = details_url
        try:
            run = self.repo.create_check_run(**kwargs)
        except GithubException as exc:
            if exc.status not in (403, 404):
                raise PublishError(f"GitHub API: create check run failed with {exc.status}") from None
            state = {"success": "success", "neutral": "success", "skipped": "success"}.get(conclusion, "failure")
            commit = call(f"GET commit {sha[:12]}", lambda: self.repo.get_commit(sha))
            call("create commit status", lambda: commit.create_status(
                state=state, target_url=details_url or "", description=title[:140], context=name))
            return "status"
        for start in range(ANNOTATION_BATCH, len(annotations), ANNOTATION_BATCH):
            batch = [a.as_api() for a in annotations[start:start + ANNOTATION_BATCH]]
            call("add check-run annotations", lambda b=batch: run.edit(output={**output, "annotations": b}))
        return "check_run"

    # ------------------------------------------------------------------ dispatch
    def dispatch(self, event_type: str, payload: dict[str, Any]) -> None:
        if not 0 < len(event_type) <= MAX_EVENT_TYPE:
            raise PublishError(f"event type must be 1-{MAX_EVENT_TYPE} characters, got {len(event_type)}")
        if len(payload) > MAX_DISPATCH_KEYS:
            raise PublishError(f"client_payload has {len(payload)} top-level keys; GitHub allows {MAX_DISPATCH_KEYS}")
        call(f"repository_dispatch to {self.repo_name}", lambda: self.repo.create_repository_dispatch(event_type, payload))

    # ------------------------------------------------------------------ badge branch
    def commit_file(self, branch: str, path: str, content: bytes, message: str) -> str:
        """Create or update ``path`` on ``branch`` (the branch must exist)."""
        try:
            current = self.repo.get_contents(path, ref=branch)
        except GithubException as exc:
            if exc.status != 404:
                raise PublishError(f"GitHub API: GET {path}@{branch} failed with {exc.status}") from None
            current = None
        if current is not None:
            if base64.b64decode(current.content or "") == content:
                return "unchanged"
            call(f"update {path}", lambda: self.repo.update_file(path, message, content, current.sha, branch=branch))
            return "updated"
        call(f"create {path}", lambda: self.repo.create_file(path, message, content, branch=branch))
        return "created"

    # ------------------------------------------------------------------ fork PRs
    def pr_for_workflow_run(self, run: dict[str, Any]) -> int | None:
        """The PR of a ``workflow_run`` event. Fork PRs leave ``pull_requests`` empty, so look the
        head branch up (``owner:branch``) among this repo's open PRs, matching the head sha."""
        prs = run.get("pull_requests") or []
        if prs:
            return int(prs[0]["number"])
        head_repo = (run.get("head_repository") or {}).get("owner", {}).get("login")
        branch, sha = run.get("head_branch"), run.get("head_sha")
        if not (head_repo and branch):
            return None
        pulls = call("list pull requests", lambda: list(self.repo.get_pulls(state="open", head=f"{head_repo}:{branch}")))
        for pr in pulls:
            if pr.head.sha == sha:
                return int(pr.number)
        return int(pulls[0].number) if pulls else None
