"""A small stateful GitHub REST API served over real HTTP by pytest-httpserver (loopback).

It implements just the endpoints bti's publishers call, keeps state (comments, check runs,
statuses, dispatches, files) and can inject faults (403 with Retry-After, 5xx, 404) so PyGithub's
real retry and error paths run. It is a test peer, not a mock: PyGithub and urllib3 run unmodified.
"""

from __future__ import annotations

import base64
import hashlib
import io
import itertools
import json
import re
import zipfile
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
        # identity: who a token is (GITHUB_TOKEN acts as github-actions[bot]); comments record their author
        self.identities: dict[str, str] = {}
        self.default_identity = "github-actions[bot]"
        self.stored_faults: list[Fault] = []  # applied after the request was handled: "stored, then 502"
        self.oidc_claims: dict[str, Any] = {}  # what the Actions OIDC endpoint puts in its token
        self.relay: list[dict[str, Any]] = []  # cross-repo CI relay callbacks received
        self.blob_auth: str | None = None  # the Authorization header the storage redirect target saw
        self.artifacts: list[dict[str, Any]] = []  # {name, branch, files: {path: bytes}, expired}; newest first
        # git data: branch -> commit sha; commit sha -> (tree sha, parents); tree sha -> {path: blob sha}; blob sha -> bytes
        self.refs: dict[str, str] = {}
        self.commits: dict[str, tuple[str, list[str], str]] = {}
        self.trees: dict[str, dict[str, str]] = {}
        self.blobs: dict[str, bytes] = {}

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

    def inject_after(self, method: str, pattern: str, status: int, times: int = 1) -> None:
        """The request is carried out, then answered with ``status`` (GitHub stored it, the proxy said 502)."""
        self.stored_faults.append(Fault(method, pattern, status, times))

    def who(self, request: Request) -> str:
        token = request.headers.get("Authorization", "").removeprefix("token ").removeprefix("Bearer ")
        return self.identities.get(token, self.default_identity)

    def branch(self, name: str, files: dict[str, bytes]) -> str:
        """Create ``name`` with one commit holding ``files``; returns the commit sha."""
        tree = self._tree(dict.fromkeys(files, "") | {p: self._blob(d) for p, d in files.items()})
        return self._commit(name, tree, [], "initial")

    def _blob(self, data: bytes) -> str:
        sha = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        self.blobs[sha] = data
        return sha

    def _tree(self, entries: dict[str, str]) -> str:
        sha = hashlib.sha1(json.dumps(sorted(entries.items())).encode()).hexdigest()
        self.trees[sha] = dict(entries)
        return sha

    def _commit(self, branch: str | None, tree: str, parents: list[str], message: str) -> str:
        sha = hashlib.sha1(json.dumps([tree, parents, message, len(self.commits)]).encode()).hexdigest()
        self.commits[sha] = (tree, parents, message)
        if branch:
            self.refs[branch] = sha
        return sha

    def files_on(self, branch: str) -> dict[str, bytes]:
        tree = self.commits[self.refs[branch]][0]
        return {p: self.blobs[b] for p, b in self.trees[tree].items()}

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
            ("GET", r"/repos/([^/]+/[^/]+)/check-runs/(\d+)", self.get_check_run),
            ("GET", r"/repos/([^/]+/[^/]+)/commits/([0-9a-f]{40})/check-runs", self.list_check_runs),
            ("GET", r"/repos/([^/]+/[^/]+)/commits/([0-9a-f]{40})", self.get_commit),
            ("POST", r"/repos/([^/]+/[^/]+)/statuses/([0-9a-f]{40})", self.create_status),
            ("POST", r"/repos/([^/]+/[^/]+)/dispatches", self.create_dispatch),
            ("GET", r"/repos/([^/]+/[^/]+)/pulls", self.list_pulls),
            ("GET", r"/repos/([^/]+/[^/]+)/contents/(.+)", self.get_contents),
            ("PUT", r"/repos/([^/]+/[^/]+)/contents/(.+)", self.put_contents),
            ("POST", r"/graphql", self.graphql),
            ("GET", r"/_oidc/token", self.oidc_token),
            ("POST", r"/_relay/callback", self.relay_callback),
            ("GET", r"/repos/([^/]+/[^/]+)/actions/artifacts", self.list_artifacts),
            ("GET", r"/repos/([^/]+/[^/]+)/actions/artifacts/(\d+)/zip", self.artifact_zip),
            ("GET", r"/_blob/(\d+)", self.artifact_blob),
            ("GET", r"/repos/([^/]+/[^/]+)/git/ref/heads/(.+)", self.get_ref),
            ("PATCH", r"/repos/([^/]+/[^/]+)/git/refs/heads/(.+)", self.update_ref),
            ("POST", r"/repos/([^/]+/[^/]+)/git/refs", self.create_ref),
            ("GET", r"/repos/([^/]+/[^/]+)/git/commits/([0-9a-f]{40})", self.get_git_commit),
            ("GET", r"/repos/([^/]+/[^/]+)/git/trees/([0-9a-f]{40})", self.get_tree),
            ("POST", r"/repos/([^/]+/[^/]+)/git/blobs", self.create_blob),
            ("POST", r"/repos/([^/]+/[^/]+)/git/trees", self.create_tree),
            ("POST", r"/repos/([^/]+/[^/]+)/git/commits", self.create_git_commit),
        ]
        for method, pattern, handler in routes:
            m = re.fullmatch(pattern, path)
            if m and method == request.method:
                response = handler(request, body, *m.groups())
                for fault in self.stored_faults:
                    if fault.times > 0 and fault.method == request.method and re.fullmatch(fault.pattern, path):
                        fault.times -= 1
                        return self.json({"message": "Bad Gateway"}, fault.status)
                return response
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

    def add_artifact(self, name: str, branch: str, files: dict[str, bytes], expired: bool = False, fork: bool = False) -> int:
        aid = next(self.ids)
        self.artifacts.insert(0, {"id": aid, "name": name, "branch": branch, "files": files, "expired": expired, "fork": fork})
        return aid

    def list_artifacts(self, req: Request, body: Any, name: str) -> Response:
        wanted = req.args.get("name")
        arts = [{"id": a["id"], "node_id": "x", "name": a["name"], "size_in_bytes": sum(map(len, a["files"].values())),
                 "url": self.url(f"/repos/{name}/actions/artifacts/{a['id']}"), "expired": a["expired"],
                 "archive_download_url": self.url(f"/repos/{name}/actions/artifacts/{a['id']}/zip"),
                 "created_at": "2026-11-01T00:00:00Z", "expires_at": "2026-12-01T00:00:00Z", "updated_at": "2026-11-01T00:00:00Z",
                 "workflow_run": {"id": a["id"] + 1, "repository_id": 1, "head_repository_id": 2 if a["fork"] else 1,
                                  "head_branch": a["branch"],
                                  "head_sha": "0" * 40}}
                for a in self.artifacts if wanted in (None, a["name"])]
        return self.json({"total_count": len(arts), "artifacts": arts})

    def artifact_zip(self, req: Request, body: Any, name: str, aid: str) -> Response:
        """As GitHub does: a redirect to storage (where the token must not go)."""
        if not req.headers.get("Authorization"):
            return self.json({"message": "Requires authentication"}, 401)
        return Response(status=302, headers={"Location": self.url(f"/_blob/{aid}")})

    def artifact_blob(self, req: Request, body: Any, aid: str) -> Response:
        art = next(a for a in self.artifacts if a["id"] == int(aid))
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for path, data in art["files"].items():
                zf.writestr(path, data)
        self.blob_auth = req.headers.get("Authorization")
        return Response(buf.getvalue(), content_type="application/zip")

    def relay_callback(self, req: Request, body: Any) -> Response:
        self.relay.append(body)
        return self.json({"ok": True})

    def oidc_token(self, req: Request, body: Any) -> Response:
        """Actions' ID-token endpoint (ACTIONS_ID_TOKEN_REQUEST_URL): an unsigned JWT with ``oidc_claims``."""
        if not req.headers.get("Authorization", "").startswith("Bearer ") or not self.oidc_claims:
            return self.json({"message": "Unauthorized"}, 401)

        def part(obj: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

        claims = {**self.oidc_claims, "aud": req.args.get("audience", "")}
        return self.json({"value": f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.sig"})

    def graphql(self, req: Request, body: Any) -> Response:
        """The one query bti sends: a PR's comments with ``viewerDidAuthor``, 100 a page."""
        v = body.get("variables") or {}
        if "viewerDidAuthor" not in body.get("query", "") or f"{v.get('owner')}/{v.get('name')}" != self.repo:
            return self.json({"errors": [{"message": "unsupported query"}]}, 200)
        me, items = self.who(req), self.comments.get(int(v["number"]), [])
        start = int(v.get("cursor") or 0)
        chunk = items[start:start + 100]
        nodes = [{"databaseId": c["id"], "viewerDidAuthor": c.get("author") == me, "body": c["body"]} for c in chunk]
        more = start + 100 < len(items)
        page = {"nodes": nodes, "pageInfo": {"hasNextPage": more, "endCursor": str(start + 100) if more else None}}
        return self.json({"data": {"repository": {"issueOrPullRequest": {"comments": page}}}})

    def get_ref(self, req: Request, body: Any, name: str, branch: str) -> Response:
        if branch not in self.refs:
            return self.json({"message": "Not Found"}, 404)
        return self.json({"ref": f"refs/heads/{branch}", "url": self.url(f"/repos/{name}/git/refs/heads/{branch}"),
                          "object": {"sha": self.refs[branch], "type": "commit"}})

    def update_ref(self, req: Request, body: Any, name: str, branch: str) -> Response:
        if body["sha"] not in self.commits or self.refs.get(branch) not in self.commits[body["sha"]][1]:
            return self.json({"message": "Update is not a fast forward"}, 422)
        self.refs[branch] = body["sha"]
        return self.get_ref(req, body, name, branch)

    def create_ref(self, req: Request, body: Any, name: str) -> Response:
        branch = str(body["ref"]).removeprefix("refs/heads/")
        if branch in self.refs:
            return self.json({"message": "Reference already exists"}, 422)
        if body["sha"] not in self.commits:
            return self.json({"message": "Object does not exist"}, 422)
        self.refs[branch] = body["sha"]
        return self.get_ref(req, body, name, branch)

    def _commit_json(self, name: str, sha: str) -> dict[str, Any]:
        tree, parents, message = self.commits[sha]
        return {"sha": sha, "url": self.url(f"/repos/{name}/git/commits/{sha}"), "message": message,
                "tree": {"sha": tree, "url": self.url(f"/repos/{name}/git/trees/{tree}")},
                "parents": [{"sha": p, "url": self.url(f"/repos/{name}/git/commits/{p}")} for p in parents]}

    def get_git_commit(self, req: Request, body: Any, name: str, sha: str) -> Response:
        return self.json(self._commit_json(name, sha)) if sha in self.commits else self.json({"message": "Not Found"}, 404)

    def get_tree(self, req: Request, body: Any, name: str, sha: str) -> Response:
        entries = [{"path": p, "mode": "100644", "type": "blob", "sha": b} for p, b in sorted(self.trees[sha].items())]
        return self.json({"sha": sha, "url": self.url(f"/repos/{name}/git/trees/{sha}"), "tree": entries, "truncated": False})

    def create_blob(self, req: Request, body: Any, name: str) -> Response:
        data = base64.b64decode(body["content"]) if body.get("encoding") == "base64" else body["content"].encode()
        sha = self._blob(data)
        return self.json({"sha": sha, "url": self.url(f"/repos/{name}/git/blobs/{sha}")}, 201)

    def create_tree(self, req: Request, body: Any, name: str) -> Response:
        entries = dict(self.trees.get(body.get("base_tree") or "", {}))
        entries.update({e["path"]: e["sha"] for e in body["tree"]})
        sha = self._tree(entries)
        return self.json({"sha": sha, "url": self.url(f"/repos/{name}/git/trees/{sha}"), "tree": []}, 201)

    def create_git_commit(self, req: Request, body: Any, name: str) -> Response:
        sha = self._commit(None, body["tree"], list(body.get("parents") or []), body["message"])
        return self.json(self._commit_json(name, sha), 201)

    def create_comment(self, req: Request, body: Any, name: str, number: str) -> Response:
        n = int(number)
        c = {"id": next(self.ids), "body": body["body"], "author": self.who(req)}
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

    def _check_json(self, name: str, rid: int) -> dict[str, Any]:
        run = self.check_runs[rid]
        return {"id": rid, "url": self.url(f"/repos/{name}/check-runs/{rid}"), "name": run["name"], "head_sha": run["head_sha"],
                "external_id": run.get("external_id"), "status": run.get("status"), "conclusion": run.get("conclusion"),
                "output": {"annotations_count": sum(run["annotations_batches"]), "title": None, "summary": None}}

    def get_check_run(self, req: Request, body: Any, name: str, rid: str) -> Response:
        return self.json(self._check_json(name, int(rid)))

    def list_check_runs(self, req: Request, body: Any, name: str, sha: str) -> Response:
        wanted = req.args.get("check_name")
        runs = [self._check_json(name, rid) for rid, r in self.check_runs.items()
                if r["head_sha"] == sha and wanted in (None, r["name"])]
        return self.json({"total_count": len(runs), "check_runs": runs})

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
        pulls = [{"base": {"repo": {"full_name": name}, "ref": "main", "sha": "0" * 40}, **p} for p in self.pulls]
        return self.json([p for p in pulls if head is None or f"{p['head']['repo_owner']}:{p['head']['ref']}" == head])

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
