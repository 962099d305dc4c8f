"""A small stateful GitHub REST API served over real HTTP by pytest-httpserver (loopback).

It implements just the endpoints bti's publishers call, keeps state (comments, check runs,
statuses, dispatches, files) and can inject faults (403 with Retry-After, 5xx, 404) so PyGithub's
real retry and error paths run. It is a test peer, not a mock: PyGithub and urllib3 run unmodified.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from werkzeug import Request, Response


@dataclass
class Fault:
    method: str
    pattern: str
    status: int
    times: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=lambda: {"message": "injected"})


class FakeGitHub:
    def __init__(self, base: str, repo: str = "octo-org/octo-repo", checks_allowed: bool = True) -> None:
        self.base = base.rstrip("/")
        self.repo = repo
        self.checks_allowed = checks_allowed
        self.ids = itertools.count(1000)
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.statuses: list[dict[str, Any]] = []
        self.dispatches: list[tuple[str, dict[str, Any]]] = []
        self.files: dict[tuple[str, str], bytes] = {}
        self.pulls: list[dict[str, Any]] = []
        self.log: list[tuple[str, str, dict[str, str]]] = []
        self.faults: list[Fault] = []

    # ------------------------------------------------------------------ helpers
    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def repo_json(self, name: str) -> dict[str, Any]:
        owner, repo = name.split("/")
        return {"id": 1, "name": repo, "full_name": name, "owner": {"login": owner, "type": "Organization"},
                "url": self.url(f"/repos/{name}"), "private": False}

    def comment_json(self, number: int, cid: int, body: str) -> dict[str, Any]:
        return {"id": cid, "body": body, "user": {"login": "github-actions[bot]", "type": "Bot"},
                "url": self.url(f"/repos/{self.repo}/issues/comments/{cid}"),
                "html_url": f"https://github.com/{self.repo}/pull/{number}#issuecomment-{cid}"}

    def inject(self, method: str, pattern: str, status: int, times: int = 1, **headers: str) -> None:
        self.faults.append(Fault(method, pattern, status, times, headers))

    # ------------------------------------------------------------------ dispatch
    def __call__(self, request: Request) -> Response:
        path = request.path
        self.log.append((request.method, path, dict(request.headers)))
        for fault in self.faults:
            if fault.times > 0 and fault.method == request.method and re.fullmatch(fault.pattern, path):
                fault.times -= 1
                return self.json(fault.body, fault.status, fault.headers)
        body = request.get_json(silent=True) or {}
        routes = [
            ("GET", r"/repos/([^/]+/[^/]+)", self.get_repo),
            ("GET", r"/repos/([^/]+/[^/]+)/issues/(\d+)", self.get_issue),
            ("GET", r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments", self.list_comments),
            ("POST", r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments", self.create_comment),
            ("PATCH", r"/repos/([^/]+/[^/]+)/issues/comments/(\d+)", self.edit_comment),
            ("POST", r"/repos/([^/]+/[^/]+)/check-runs", self.create_check_run),
            ("PATCH", r"/repos/([^/]+/[^/]+)/check-runs/(\d+)", self.edit_check_run),
            ("GET", r"/repos/([^/]+/[^/]+)/commits/([0-9a-f]{40})", self.get_commit),
            ("POST", r"/repos/([^/]+/[^/]+)/statuses/([0-9a-f]{40})", self.create_status),
            ("POST", r"/repos/([^/]+/[^/]+)/dispatches", self.create_dispatch),
            ("GET", r"/repos/([^/]+/[^/]+)/pulls", self.list_pulls),
            ("GET", r"/repos/([^/]+/[^/]+)/contents/(.+)", self.get_contents),
            ("PUT", r"/repos/([^/]+/[^/]+)/contents/(.+)", self.put_contents),
        ]
        for method, pattern, handler in routes:
            m = re.fullmatch(pattern, path)
            if m and method == request.method:
                return handler(request, body, *m.groups())
        return self.json({"message": "Not Found"}, 404)

    @staticmethod
    def json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(json.dumps(obj), status=status, headers=headers or {}, content_type="application/json")

    # ------------------------------------------------------------------ endpoints
    def get_repo(self, req: Request, body: Any, name: str) -> Response:
        if name != self.repo and not name.startswith("vendor"):
            return self.json({"message": "Not Found"}, 404)
        return self.json(self.repo_json(name))

    def get_issue(self, req: Request, body: Any, name: str, number: str) -> Response:
        n = int(number)
        return self.json({"id": n, "number": n, "url": self.url(f"/repos/{name}/issues/{n}"), "title": "PR",
                          "pull_request": {"url": self.url(f"/repos/{name}/pulls/{n}")}})

    def list_comments(self, req: Request, body: Any, name: str, number: str) -> Response:
        n = int(number)
        items = self.comments.get(n, [])
        per_page = int(req.args.get("per_page", 30))
        page = int(req.args.get("page", 1))
        chunk = items[(page - 1) * per_page: page * per_page]
        headers = {}
        if page * per_page < len(items):
            headers["Link"] = f'<{self.url(f"/repos/{name}/issues/{n}/comments")}?per_page={per_page}&page={page + 1}>; rel="next"'
        return self.json([self.comment_json(n, c["id"], c["body"]) for c in chunk], headers=headers)

    def create_comment(self, req: Request, body: Any, name: str, number: str) -> Response:
        n = int(number)
        c = {"id": next(self.ids), "body": body["body"]}
        self.comments.setdefault(n, []).append(c)
        return self.json(self.comment_json(n, c["id"], c["body"]), 201)

    def edit_comment(self, req: Request, body: Any, name: str, cid: str) -> Response:
        for n, items in self.comments.items():
            for c in items:
                if c["id"] == int(cid):
                    c["body"] = body["body"]
                    return self.json(self.comment_json(n, c["id"], c["body"]))
        return self.json({"message": "Not Found"}, 404)

    def create_check_run(self, req: Request, body: Any, name: str) -> Response:
        if not self.checks_allowed:
            return self.json({"message": "You must authenticate via a GitHub App."}, 403)
        rid = next(self.ids)
        self.check_runs[rid] = {**body, "annotations_batches": [len((body.get("output") or {}).get("annotations") or [])]}
        return self.json({"id": rid, "url": self.url(f"/repos/{name}/check-runs/{rid}"), "name": body["name"],
                          "head_sha": body["head_sha"], "status": body.get("status"), "conclusion": body.get("conclusion")}, 201)

    def edit_check_run(self, req: Request, body: Any, name: str, rid: str) -> Response:
        run = self.check_runs[int(rid)]
        run["annotations_batches"].append(len((body.get("output") or {}).get("annotations") or []))
        return self.json({"id": int(rid), "url": self.url(f"/repos/{name}/check-runs/{rid}"), "name": run["name"],
                          "head_sha": run["head_sha"]})

    def get_commit(self, req: Request, body: Any, name: str, sha: str) -> Response:
        return self.json({"sha": sha, "url": self.url(f"/repos/{name}/commits/{sha}"), "commit": {"message": "x"}})

    def create_status(self, req: Request, body: Any, name: str, sha: str) -> Response:
        self.statuses.append({**body, "sha": sha})
        return self.json({"id": next(self.ids), "state": body["state"], "context": body.get("context")}, 201)

    def create_dispatch(self, req: Request, body: Any, name: str) -> Response:
        self.dispatches.append((name, body))
        return Response(status=204)

    def list_pulls(self, req: Request, body: Any, name: str) -> Response:
        head = req.args.get("head")
        return self.json([p for p in self.pulls if head is None or f"{p['head']['repo_owner']}:{p['head']['ref']}" == head])

    def get_contents(self, req: Request, body: Any, name: str, path: str) -> Response:
        ref = req.args.get("ref", "main")
        data = self.files.get((ref, path))
        if data is None:
            return self.json({"message": "Not Found"}, 404)
        return self.json({"type": "file", "encoding": "base64", "content": base64.b64encode(data).decode(), "sha": f"sha-{len(data)}",
                          "path": path, "name": path, "url": self.url(f"/repos/{name}/contents/{path}")})

    def put_contents(self, req: Request, body: Any, name: str, path: str) -> Response:
        self.files[(body.get("branch", "main"), path)] = base64.b64decode(body["content"])
        return self.json({"content": {"path": path, "sha": "new"}, "commit": {"sha": "c" * 40}}, 201)
