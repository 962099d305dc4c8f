"""Publishing to GitHub: sticky comment, check run (→ commit status fallback), dispatch, badge branch."""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import itertools
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from github import Github, GithubException, InputGitTreeElement

from harness.github.client import PublishError, call, write
from harness.report import safe
from harness.report.comment import marker

MAX_OUTPUT = 65_535  # check-run summary and text limits
ANNOTATION_BATCH = 50
MAX_ANNOTATIONS = 100  # 2 check-run writes; GitHub's secondary limit allows ~500 content writes an hour
COMMENTS_QUERY = """
query($owner: String!, $name: String!, $number: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    issueOrPullRequest(number: $number) {
      ... on PullRequest { comments(first: 100, after: $cursor) { nodes { databaseId viewerDidAuthor body }
                                                                  pageInfo { hasNextPage endCursor } } }
      ... on Issue { comments(first: 100, after: $cursor) { nodes { databaseId viewerDidAuthor body }
                                                             pageInfo { hasNextPage endCursor } } }
    }
  }
}"""
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
        """Title and message come from results: plain one-liners, mentions neutralised."""
        return {"path": self.path, "start_line": self.line, "end_line": self.line, "annotation_level": self.level,
                "message": safe.plain(self.message, 4_000), "title": safe.plain(self.title, 255)}


def check_requests(sha: str, name: str, conclusion: str, title: str, summary: str, text: str = "",
                   annotations: list[Annotation] | None = None, details_url: str | None = None
                   ) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    """What a check run sends: the create request's fields, and the annotation batches that follow it (at most
    ``MAX_ANNOTATIONS`` in all, ``ANNOTATION_BATCH`` a request; the summary notes the rest). ``bti publish check
    --dry-run`` prints exactly this."""
    annotations = annotations or []
    if len(annotations) > MAX_ANNOTATIONS:
        left_out = len(annotations) - MAX_ANNOTATIONS
        annotations = annotations[:MAX_ANNOTATIONS]
        note = f"\n\n_{left_out} more failure(s) have no annotation (capped at {MAX_ANNOTATIONS}); see the summary and the artifacts._"
        summary = summary[: MAX_OUTPUT - len(note)] + note
    output = {"title": title[:255], "summary": summary[:MAX_OUTPUT], "text": text[:MAX_OUTPUT]}
    apis = [a.as_api() for a in annotations]
    first = apis[:ANNOTATION_BATCH]
    kwargs: dict[str, Any] = {"name": name, "head_sha": sha, "status": "completed", "conclusion": conclusion,
                              "output": {**output, "annotations": first} if first else output}
    if details_url:
        kwargs["details_url"] = details_url
    return kwargs, [apis[i:i + ANNOTATION_BATCH] for i in range(ANNOTATION_BATCH, len(apis), ANNOTATION_BATCH)]


@dataclass(frozen=True)
class Comment:
    id: int
    body: str


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
    def find_comment(self, pr: int, key: str) -> Comment | None:
        """Our sticky comment: written by this token's own identity (GraphQL ``viewerDidAuthor``, which
        GITHUB_TOKEN may call, unlike ``GET /user``) and starting with the key's marker. A comment by anyone
        else, or one that merely contains the marker, is never taken."""
        tag = marker(key)
        _ = self.repo  # a missing repository fails here with REST's clear 404
        owner, name = self.repo_name.split("/")
        cursor: str | None = None
        while True:
            variables = {"owner": owner, "name": name, "number": pr, "cursor": cursor}
            # a read, sent as a POST: repeated by write() on 5xx and secondary rate limits
            _, data = write(f"list comments of #{pr}", functools.partial(self.gh.requester.graphql_query, COMMENTS_QUERY, variables))
            node = ((data.get("data") or {}).get("repository") or {}).get("issueOrPullRequest")
            if node is None:
                raise PublishError(f"GitHub API: #{pr} is not a pull request or issue of {self.repo_name}")
            page = node["comments"]
            for c in page["nodes"]:
                if c.get("viewerDidAuthor") and (c.get("body") or "").startswith(tag):
                    return Comment(int(c["databaseId"]), c["body"])
            if not page["pageInfo"]["hasNextPage"]:
                return None
            cursor = page["pageInfo"]["endCursor"]

    def upsert_comment(self, pr: int, key: str, body: str, create: bool = True) -> tuple[str, int | None]:
        """Edit our comment in place, or create it. Returns (action, comment id)."""
        if not body.startswith(marker(key)):
            raise ValueError("comment body must start with the marker of its key")
        existing = self.find_comment(pr, key)
        url = f"{self.gh.requester.base_url}/repos/{self.repo_name}/issues"
        if existing is not None:
            if existing.body == body:
                return "unchanged", existing.id
            write(f"edit comment {existing.id}", lambda: self.gh.requester.requestJsonAndCheck(
                "PATCH", f"{url}/comments/{existing.id}", input={"body": body}))
            return "updated", existing.id
        if not create:
            return "skipped", None
        # a create that GitHub stored but answered with a 5xx is found on the re-list, never posted twice
        _, made = write(f"create comment on #{pr}", lambda: self.gh.requester.requestJsonAndCheck(
            "POST", f"{url}/{pr}/comments", input={"body": body}),
            recheck=lambda: (lambda c: ({}, {"id": c.id}) if c else None)(self.find_comment(pr, key)))
        return "created", int(made["id"])

    # ------------------------------------------------------------------ checks
    def check(self, sha: str, name: str, conclusion: str, title: str, summary: str, text: str = "",
              annotations: list[Annotation] | None = None, details_url: str | None = None) -> str:
        """A completed check run with annotations in batches of 50; a commit status when the token
        cannot write check runs (a PAT gets 403/404 on the checks API)."""
        kwargs, batches = check_requests(sha, name, conclusion, title, summary, text, annotations, details_url)
        output = {k: v for k, v in kwargs["output"].items() if k != "annotations"}
        kwargs["external_id"] = marker_id = uuid.uuid4().hex  # finds this very run if a create landed but failed
        repo = self.repo

        def landed() -> Any:
            runs = repo.get_commit(sha).get_check_runs(check_name=name)
            return next((r for r in itertools.islice(runs, 100) if r.external_id == marker_id), None)

        try:
            run = write("create check run", lambda: repo.create_check_run(**kwargs), attempts=3, recheck=landed)
        except PublishError as exc:
            if exc.status not in (403, 404):  # a token that may not write check runs (a PAT) gets 403/404
                raise
            state = {"success": "success", "neutral": "success", "skipped": "success"}.get(conclusion, "failure")
            status: dict[str, Any] = {"state": state, "description": safe.plain(title, 140), "context": name}
            if details_url:
                status["target_url"] = details_url  # omitted, never "", when there is no URL
            write("create commit status", lambda: self.gh.requester.requestJsonAndCheck(
                "POST", f"{self.gh.requester.base_url}/repos/{self.repo_name}/statuses/{sha}", input=status))
            return "status"
        total = len(kwargs["output"].get("annotations") or [])
        for batch in batches:
            total += len(batch)  # GitHub appends annotations: a batch that landed must not be sent again
            write("add check-run annotations", functools.partial(run.edit, output={**output, "annotations": batch}),
                  recheck=functools.partial(_annotations_landed, repo, run.id, total))
        return "check_run"

    # ------------------------------------------------------------------ dispatch
    def dispatch(self, event_type: str, payload: dict[str, Any]) -> None:
        if not 0 < len(event_type) <= MAX_EVENT_TYPE:
            raise PublishError(f"event type must be 1-{MAX_EVENT_TYPE} characters, got {len(event_type)}")
        if len(payload) > MAX_DISPATCH_KEYS:
            raise PublishError(f"client_payload has {len(payload)} top-level keys; GitHub allows {MAX_DISPATCH_KEYS}")
        # requestJsonAndCheck, not create_repository_dispatch, which returns False on any error instead of raising
        url = f"{self.gh.requester.base_url}/repos/{self.repo_name}/dispatches"
        write(f"repository_dispatch to {self.repo_name}", lambda: self.gh.requester.requestJsonAndCheck(
            "POST", url, input={"event_type": event_type, "client_payload": payload}), repeat_5xx=False)

    # ------------------------------------------------------------------ badge branch
    def commit_files(self, branch: str, files: dict[str, bytes], message: str) -> str:
        """All ``files`` in one commit on ``branch``, through the git data API: blobs → tree → commit → ref. A branch
        that does not exist yet (a repository's first scheduled run) is created holding only ``files``, a commit without
        parents. Returns the commit sha, or "unchanged" when nothing differs."""
        repo = self.repo
        try:
            ref = call(f"GET branch {branch}", lambda: repo.get_git_ref(f"heads/{branch}"))
        except PublishError as exc:
            if exc.status != 404:
                raise
            ref = head = None
            current: dict[str, str] = {}
        else:
            head = call(f"GET commit {ref.object.sha[:12]}", lambda: repo.get_git_commit(ref.object.sha))
            current = {e.path: e.sha for e in call("GET tree", lambda: repo.get_git_tree(head.tree.sha, recursive=True)).tree}
        elements = []
        for path, content in sorted(files.items()):
            if current.get(path) == hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest():
                continue  # git's own blob id: unchanged files cost no write
            blob = write(f"create blob {path}", functools.partial(repo.create_git_blob, base64.b64encode(content).decode(), "base64"))
            elements.append(InputGitTreeElement(path, "100644", "blob", sha=blob.sha))
        if not elements:
            return "unchanged"
        if ref is None or head is None:
            tree = write("create tree", lambda: repo.create_git_tree(elements))
            commit = write("create commit", lambda: repo.create_git_commit(message, tree, []))
            def landed() -> Any:  # a create that landed before a 5xx: its repeat would be "Reference already exists"
                try:
                    made = repo.get_git_ref(f"heads/{branch}")
                except GithubException:
                    return None
                return made if made.object.sha == commit.sha else None

            write(f"create branch {branch}", lambda: repo.create_git_ref(f"refs/heads/{branch}", commit.sha), recheck=landed)
            return str(commit.sha)
        tree = write("create tree", lambda: repo.create_git_tree(elements, head.tree))
        commit = write("create commit", lambda: repo.create_git_commit(message, tree, [head]))
        write(f"move {branch}", lambda: ref.edit(commit.sha))
        return str(commit.sha)

    # ------------------------------------------------------------------ base results
    def _artifacts(self, name: str, branch: str) -> Iterator[tuple[Any, Any]]:
        """(artifact, run) for the unexpired artifacts ``name`` from runs on ``branch`` of this repository, newest
        first: a fork's branch of the same name is not the base."""
        repo = self.repo
        for art in call(f"list artifacts named {name}", lambda: list(itertools.islice(repo.get_artifacts(name=name), 500))):
            run = art.workflow_run
            if art.expired or run is None or run.head_branch != branch or run.head_repository_id != run.repository_id:
                continue
            yield art, run

    def _newest_artifact(self, name: str, branch: str, max_bytes: int) -> tuple[bytes | None, str, Any]:
        """The zip of the newest unexpired artifact ``name`` from a run on ``branch`` of this repository:
        (data, "", run) or (None, why there is none, None)."""
        for art, run in self._artifacts(name, branch):
            if art.size_in_bytes > max_bytes:
                return None, f"the newest {name} artifact on {branch} is {art.size_in_bytes} bytes, over {max_bytes}", None
            return self._download(art.archive_download_url), "", run
        return None, f"no unexpired {name} artifact from a run on {branch}", None

    def base_results(self, name: str, branch: str, dest: Path, max_bytes: int = 512 * 2**20) -> tuple[Path | None, str]:
        """The ``results.jsonl`` of the newest unexpired artifact ``name`` from a run on ``branch``,
        extracted to ``dest``: (path, "") or (None, why there is none)."""
        data, why, run = self._newest_artifact(name, branch, max_bytes)
        if data is None:
            return None, why
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                member = next((n for n in zf.namelist() if n.rsplit("/", 1)[-1] == "results.jsonl"), None)
                if member is None:
                    return None, f"artifact {name} of run {run.id} on {branch} has no results.jsonl"
                dest.mkdir(parents=True, exist_ok=True)
                out = dest / "results.jsonl"
                out.write_bytes(zf.read(member))
        except zipfile.BadZipFile:
            return None, f"artifact {name} of run {run.id} is not a zip archive"
        return out, ""

    def history_files(self, name: str, branch: str, dest: Path, max_bytes: int = 2 * 2**30,
                      tries: int = 5) -> tuple[list[Path], str]:
        """The portal's history copies (``<time>-<run id>.jsonl.gz``) in the newest usable artifact ``name`` from a
        run on ``branch``, extracted flat into ``dest``; any other member (or a path in a name) is ignored, and so is
        a copy that does not decompress to a results header. An unusable artifact (not a zip, no usable copy, too
        big) does not lose the history: the next older one is tried, up to ``tries``. Returns the files and a note
        (why there are none, or which newer artifacts were passed over)."""
        passed_over: list[str] = []
        for art, run in itertools.islice(self._artifacts(name, branch), tries):
            if art.size_in_bytes > max_bytes:
                passed_over.append(f"run {run.id}'s is {art.size_in_bytes} bytes, over {max_bytes}")
                continue
            out, why = _history_copies(self._download(art.archive_download_url), dest)
            if out:
                return out, ("passed over: " + "; ".join(passed_over)) if passed_over else ""
            passed_over.append(f"run {run.id}'s {why}")
        if not passed_over:
            return [], f"no unexpired {name} artifact from a run on {branch}"
        return [], f"no usable {name} artifact on {branch}: " + "; ".join(passed_over)

    def _download(self, url: str) -> bytes:
        """GitHub answers an artifact download with a redirect to storage; the token goes to GitHub only,
        never to the redirect target."""
        import requests

        token = getattr(self.gh.requester.auth, "token", "")
        try:
            resp = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=120, allow_redirects=False)
            if resp.status_code in (301, 302, 303, 307, 308) and resp.headers.get("Location"):
                resp = requests.get(resp.headers["Location"], timeout=300)
        except requests.RequestException as exc:
            raise PublishError(f"GitHub API: download artifact failed: {type(exc).__name__}") from None
        if resp.status_code != 200:
            raise PublishError(f"GitHub API: download artifact failed with {resp.status_code}", status=resp.status_code)
        return resp.content

    # ------------------------------------------------------------------ fork PRs
    def pr_for_workflow_run(self, run: dict[str, Any]) -> int | None:
        """The PR of a ``workflow_run`` event. Fork PRs leave ``pull_requests`` empty, so look the
        head branch up (``owner:branch``) among this repo's open PRs, matching the head sha."""
        sha = run.get("head_sha")
        for pr in run.get("pull_requests") or []:
            base_url = str(((pr.get("base") or {}).get("repo") or {}).get("url", ""))
            if base_url.lower().endswith(f"/repos/{self.repo_name.lower()}") and (pr.get("head") or {}).get("sha") == sha:
                return int(pr["number"])
        head_repo = (run.get("head_repository") or {}).get("owner", {}).get("login")
        branch = run.get("head_branch")
        if not (head_repo and branch):
            return None
        pulls = call("list pull requests", lambda: list(self.repo.get_pulls(state="open", head=f"{head_repo}:{branch}")))
        for found in pulls:  # only a PR of this repository whose head is the run's commit
            if found.head.sha == sha and found.base.repo.full_name.lower() == self.repo_name.lower():
                return int(found.number)
        return None


def _annotations_landed(repo: Any, run_id: int, total: int) -> bool | None:
    """Whether a check run already holds ``total`` annotations (a batch answered with 5xx had landed)."""
    return True if repo.get_check_run(run_id).output.annotations_count >= total else None


def _history_copies(data: bytes, dest: Path) -> tuple[list[Path], str]:
    """The usable history copies in an artifact's zip, written to ``dest`` (nothing else is written): (files, "") or
    ([], why none)."""
    import gzip
    import json
    import zlib

    from harness.report.runs import HISTORY_NAME

    out: list[Path] = []
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for member in zf.namelist():
                base = member.rsplit("/", 1)[-1]
                if not HISTORY_NAME.fullmatch(base):
                    continue
                try:
                    blob = zf.read(member)
                    header = json.loads(gzip.decompress(blob).split(b"\n", 1)[0])  # the whole copy: its CRC is checked
                except (OSError, EOFError, ValueError, zlib.error, NotImplementedError, RuntimeError):
                    continue  # truncated, bit-flipped, not gzip, or a compression zipfile cannot read: this copy only
                if not isinstance(header, dict) or header.get("kind") != "header":
                    continue
                dest.mkdir(parents=True, exist_ok=True)
                tmp = dest / f".{base}.part"
                tmp.write_bytes(blob)
                tmp.replace(dest / base)  # whole or not at all
                out.append(dest / base)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, zlib.error, NotImplementedError, RuntimeError):
        return [], "artifact is not a readable zip archive"
    return out, "" if out else "artifact holds no usable history copy"
