"""The composite action and the workflows, executed by act on this host (see tests/actions/act.py).

Each scenario asserts job conclusions, step outputs, the job summary, the artifacts and the API calls.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ..github_fake import FakeGitHub
from .act import HERE, ROOT, ActRun, build_toolcache, commit_tree, run_act, snapshot_bti

pytestmark = pytest.mark.act

CALLER = "vendor-a/npu-backend"
WEBHOOKS = ROOT / "tests" / "fixtures" / "github-webhooks"


@pytest.fixture(scope="session")
def act_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """repos/ (bti-org/bti snapshot of this tree, callers) and toolcache/, shared by the scenarios."""
    home = tmp_path_factory.mktemp("act")
    snapshot_bti(home / "repos")
    build_toolcache(home / "toolcache")
    return home


@pytest.fixture
def fake(httpserver) -> FakeGitHub:
    gh = FakeGitHub(httpserver.url_for("/"), repo=CALLER)
    httpserver.expect_request(re.compile(".*")).respond_with_handler(gh)
    return gh


class Scenario:
    def __init__(self, home: Path, tmp: Path, workflow: str) -> None:
        self.home, self.tmp = home, tmp
        bti_sha = (home / "repos" / "bti-org" / "bti" / ".git").exists() and _head(home / "repos" / "bti-org" / "bti")
        files = {p.relative_to(HERE / "caller"): p for p in (HERE / "caller").rglob("*") if p.is_file()}
        src = (HERE / "workflows" / workflow).read_text().replace("BTI_SHA", str(bti_sha))
        (tmp / "wf").mkdir(parents=True, exist_ok=True)
        (tmp / "wf" / workflow).write_text(src)
        files[Path(".github/workflows") / workflow] = tmp / "wf" / workflow
        self.repo = home / "repos" / CALLER
        self.sha = commit_tree(files, self.repo, CALLER)
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

    def run(self, event_name: str, event: dict[str, Any], fake: FakeGitHub, **kw: Any) -> ActRun:
        return run_act(self.repo, self.workflow, event_name, event, home=self.home, tmp=self.tmp, api_url=fake.base, **kw)


def _head(repo: Path) -> str:
    from .act import git

    return git(repo, "rev-parse", "HEAD")


def _records(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [r for r in lines if r.get("kind") == "result"]


@pytest.fixture
def scenario(act_home: Path, tmp_path: Path):
    def make(workflow: str) -> Scenario:
        return Scenario(act_home, tmp_path, workflow)
    return make


# ---------------------------------------------------------------------------------------------- (a) and (d)
@pytest.mark.parametrize(("recipes", "failing"), [("portable,fault-mul", True), ("portable", False)],
                         ids=["a-one-unexpected-failure", "d-all-pass"])
def test_composite_action(scenario, fake: FakeGitHub, recipes: str, failing: bool) -> None:
    sc = scenario("action.yml")
    run = sc.run("pull_request", sc.pull_request_event(), fake, variables={"RECIPES": recipes})
    job = "action/suite"
    assert run.jobs == {job: "failure" if failing else "success"}, run.log[-4000:]
    steps = run.steps(job)
    outputs = run.marked(job, "BTI-OUTPUTS")[0]
    n_recipes = len(recipes.split(","))
    assert int(outputs["total"]) == 4 * n_recipes
    assert outputs["exit-code"] == ("1" if failing else "0")
    assert int(outputs["failed"]) == (1 if failing else 0)
    assert int(outputs["passed"]) == 4 * n_recipes - int(outputs["failed"])
    assert run.marked(job, "BTI-OUTCOME") == ["failure" if failing else "success"]
    summary = run.summary(job)
    assert summary.startswith("# bti results: " + ("❌ 1 unexpected failure" if failing else "✅")), summary[:300]
    assert ("op.mul.a[float32,static]@fault-mul" in summary) == failing, summary[:3000]
    # the upload ran after the failure; its artifact holds every report
    art = run.artifacts / "bti-results-all"
    assert {"results.jsonl", "junit.xml", "summary.md", "dashboard.html"} <= {p.name for p in art.iterdir()}
    recs = _records(art / "results.jsonl")
    bad = [r["id"] for r in recs if r["status"] not in ("PASS", "PASS_UNDELEGATED")]
    assert bad == (["op.mul.a[float32,static]@fault-mul"] if failing else [])
    assert steps["Run bti"] == "success"  # bti exit 1 is recorded, not raised by bash -e
    assert steps["Job summary and counts"] == steps["Upload results"] == "success", steps
    assert steps.get("Fail on unexpected failures") == ("failure" if failing else None), steps
    assert not fake.log, "publish is off: no API call"
