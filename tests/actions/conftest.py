"""What the act scenarios share (tests/actions/test_act*.py): the session's snapshot, tool cache and wheelhouse, the
fake GitHub, and a caller repository per scenario. The scenarios are split across modules so that pytest-xdist
(`--dist loadscope`, one module a unit) runs them on both workers."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from ..github_fake import FakeGitHub
from .act import HERE, ROOT, ActRun, build_toolcache, build_wheelhouse, commit_tree, git, run_act, snapshot_bti

CALLER = "vendor-a/npu-backend"
WEBHOOKS = ROOT / "tests" / "fixtures" / "github-webhooks"
GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(scope="session")
def act_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """repos/ (bti-org/bti snapshot of this tree, callers), toolcache/ and wheelhouse/, shared by the scenarios a
    worker runs; the wheelhouse is downloaded once for every worker of the session."""
    home = tmp_path_factory.mktemp("act")
    snapshot_bti(home / "repos")
    root = tmp_path_factory.getbasetemp()
    shared = build_wheelhouse((root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "act-wheelhouse")
    if shared is not None:
        (home / "wheelhouse").symlink_to(shared)
    build_toolcache(home / "toolcache", shared)
    return home


@pytest.fixture
def fake(httpserver) -> FakeGitHub:
    gh = FakeGitHub(httpserver.url_for("/"), repo=CALLER)
    httpserver.expect_request(re.compile(".*")).respond_with_handler(gh)
    return gh


class Scenario:
    def __init__(self, home: Path, tmp: Path, workflow: str, text: str | None = None) -> None:
        self.home, self.tmp = home, tmp
        bti_sha = git(home / "repos" / "bti-org" / "bti", "rev-parse", "HEAD")
        files = {p.relative_to(HERE / "caller"): p for p in (HERE / "caller").rglob("*") if p.is_file()}
        src = (text or (HERE / "workflows" / workflow).read_text()).replace("BTI_SHA", str(bti_sha))
        (tmp / "wf").mkdir(parents=True, exist_ok=True)
        (tmp / "wf" / workflow).write_text(src)
        files[Path(".github/workflows") / workflow] = tmp / "wf" / workflow
        self.repo = home / "repos" / CALLER
        self.sha = commit_tree(files, self.repo, CALLER)  # the PR head
        # as on GitHub, the run's github.sha is a merge commit on top of the PR head, not the head itself
        git(self.repo, "update-ref", "refs/pull/7/head", self.sha)
        git(self.repo, "commit", "-q", "--allow-empty", "-m", "Merge the PR head into main")
        self.merge_sha = git(self.repo, "rev-parse", "HEAD")
        self.workflow = workflow

    def pull_request_event(self, number: int = 7, fork: bool = False) -> dict[str, Any]:
        name = "pull_request.opened.fork.json" if fork else "pull_request.opened.payload.json"
        event = copy.deepcopy(json.loads((WEBHOOKS / name).read_text()))
        event["number"] = event["pull_request"]["number"] = number
        event["repository"]["full_name"] = CALLER
        event["pull_request"]["base"]["repo"]["full_name"] = CALLER
        event["pull_request"]["head"]["sha"] = self.sha
        if not fork:
            event["pull_request"]["head"]["repo"]["full_name"] = CALLER
        return event

    def run(self, event_name: str, event: dict[str, Any], fake: FakeGitHub, oidc: bool = True, **kw: Any) -> ActRun:
        """``oidc``: serve Actions' ID-token endpoint from the fake, saying this workflow was called at bti's sha."""
        if oidc:
            bti_sha = git(self.home / "repos" / "bti-org" / "bti", "rev-parse", "HEAD")
            fake.oidc_claims = {"job_workflow_ref": "bti-org/bti/.github/workflows/backend-suite.yml@refs/heads/main",
                                "job_workflow_sha": bti_sha, "repository": CALLER}
            kw["env"] = {"ACTIONS_ID_TOKEN_REQUEST_URL": f"{fake.base}/_oidc/token?api-version=2.0",
                         "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "oidc-request-token", **(kw.get("env") or {})}
        return run_act(self.repo, self.workflow, event_name, event, home=self.home, tmp=self.tmp, api_url=fake.base, **kw)


def _records(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [r for r in lines if r.get("kind") == "result"]


@pytest.fixture
def scenario(act_home: Path, tmp_path: Path):
    def make(workflow: str, text: str | None = None) -> Scenario:
        return Scenario(act_home, tmp_path, workflow, text)
    return make


def _call(scenario, fake: FakeGitHub, *, recipes: str, shards: int = 2, labels: str = '["self-hosted", "linux", "acme-npu"]',
          fork: bool = False, env: dict[str, str] | None = None, variables: dict[str, str] | None = None,
          labels_on_pr: tuple[str, ...] = (), oidc: bool = True) -> tuple[Scenario, ActRun]:
    sc = scenario("call.yml")
    event = sc.pull_request_event(fork=fork)
    event["pull_request"]["labels"] = [{"name": n, "id": i} for i, n in enumerate(labels_on_pr)]
    run = sc.run("pull_request", event, fake, env=env, oidc=oidc,
                 variables={"RECIPES": recipes, "SHARDS": str(shards), "RUNNER_LABELS": labels, **(variables or {})})
    return sc, run


def _job(run: ActRun, name: str, call: str = "bti") -> str:
    """act names a called job ``<caller job>/<called workflow's name>/<job>``."""
    return f"{call}/bti backend suite/{name}"
