"""The reusable workflow (backend-suite.yml) called by a vendor's caller, executed by act on this host: shards,
a shard that dies, runner labels (a JSON list in test_e, a plain string in test_g), two calls in one run, a fork's
read-only token."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml

from ..github_fake import FakeGitHub
from .act import HERE, git
from .conftest import GOLDEN, _call, _job, _records

pytestmark = pytest.mark.act


# ---------------------------------------------------------------------------------------------- the reusable workflow
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


def test_e_runner_labels_as_json(scenario, fake: FakeGitHub) -> None:
    """Runner labels as a JSON list; a plain string label is test_g's (both calls of twice.yml pass ``self-hosted``)."""
    labels = '["self-hosted", "linux", "acme-npu"]'
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
    """Also the runner labels as a plain string (test_e has them as a JSON list)."""
    sc = scenario("twice.yml")
    assert [job["with"]["runner-labels"] for job in yaml.safe_load((HERE / "workflows" / "twice.yml").read_text())["jobs"].values()] \
        == ["self-hosted", "self-hosted"]
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
