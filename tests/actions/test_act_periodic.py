"""The periodic workflow (periodic.yml), run by act on this host as a maintainer's manual trial of it (a filter and one
shard each): the sweep and the OpInfo sweep through the reusable workflow, the badge, and the portal built from both
with the history the last scheduled run kept. A trial publishes nothing: the badge is a dry run, the portal is not
deployed and the history it keeps goes under another name. The schedule's own expressions (its suites, 8 or 48 shards,
one worker on Saturday) are not evaluated here; test_opinfo and test_arm read them."""

from __future__ import annotations

import gzip
import json
import re
import tarfile
from pathlib import Path

import pytest

from ..github_fake import FakeGitHub
from .act import run_act
from .conftest import GOLDEN, _records

pytestmark = pytest.mark.act

REPO = "bti-org/bti"


@pytest.fixture
def bti_fake(httpserver) -> FakeGitHub:
    gh = FakeGitHub(httpserver.url_for("/"), repo=REPO)
    httpserver.expect_request(re.compile(".*")).respond_with_handler(gh)
    return gh


def test_the_periodic_trial_feeds_opinfo_to_the_portal_beside_the_kept_history(act_home: Path, bti_fake: FakeGitHub,
                                                                             tmp_path: Path) -> None:
    fake = bti_fake
    # the history the last scheduled run kept (its portal job's artifact on the default branch)
    golden = (GOLDEN / "results.jsonl").read_text().splitlines()
    header = json.loads(golden[0])
    before = [json.dumps({**header, "run_id": "lastnight", "created": "2026-11-26T03:17:00+00:00"}), *golden[1:]]
    fake.add_artifact("bti-portal-history", "main",
                      {"20261126T031700Z-lastnight.jsonl.gz": gzip.compress(("\n".join(before) + "\n").encode())})
    event = {"inputs": {"recipes": "portable", "filter": "op.add.same*,opinfo.add.default.0*", "shards": "1"},
             "ref": "refs/heads/main",
             "repository": {"full_name": REPO, "name": "bti", "owner": {"login": "bti-org"}, "default_branch": "main"}}
    run = run_act(act_home / "repos" / REPO, "periodic.yml", "workflow_dispatch", event, home=act_home, tmp=tmp_path,
                  api_url=fake.base)
    assert run.code == 0 and run.jobs and all(r == "success" for r in run.jobs.values()), (run.jobs, run.log[-3000:])
    # act names a called job "<caller job>/<called workflow>/<job>" and the others "<workflow>/<job>"; a trial is not
    # deployed
    called = {j.split("/")[0] for j in run.jobs if "/bti backend suite/" in j}
    own = {j.split("/", 1)[1].strip() for j in run.jobs if j.startswith("bti periodic sweep/")}
    assert called == {"sweep", "opinfo"} and own == {"badge", "portal"}, run.jobs

    # each sweep ran what the trial asked, on one shard: the sweep on portable, OpInfo on every eager-device recipe
    merged = {p.name.split("-")[1]: p for p in run.artifacts.iterdir() if p.name.endswith("-merged")}
    sweep = _records(merged["bti"] / "results.jsonl")
    assert [r["id"] for r in sweep] == ["op.add.same[float32,static]@portable"] and sweep[0]["status"] == "PASS"
    opinfo = _records(merged["opinfo"] / "results.jsonl")
    by_recipe: dict[str, set[str]] = {}
    for r in opinfo:
        assert r["case"] == "opinfo.add.default.0", r["id"]
        by_recipe.setdefault(r["recipe"], set()).add(r["status"])
    assert set(by_recipe) == {"torch-cpu", "torch-cpu-autocast-bf16", "torch-cuda"}
    assert "PASS" in by_recipe["torch-cpu"] and by_recipe["torch-cuda"] == {"UNAVAILABLE"}  # no GPU here: said, not run
    assert sum(1 for p in run.artifacts.iterdir() if "-shard-" in p.name) == 2

    # the badge is written, not committed
    assert "dry run: would commit badge-portable.json, badge-portable.svg, badge.json, badge.svg to badges of bti-org/bti" \
        in run.output("bti periodic sweep/badge "), run.output("bti periodic sweep/badge ")[-2000:]
    assert "badges" not in fake.refs and not any(m == "POST" for m, _, _ in fake.log)

    # the portal (the run's Pages artifact): the matrix and the history from the sweep (this run and the kept one), the
    # support page from OpInfo's records too, which are not in the matrix
    site = tmp_path / "site"
    site.mkdir()
    with tarfile.open(run.artifacts / "github-pages" / "artifact.tar") as tar:
        tar.extractall(site, filter="data")
    index = (site / "index.html").read_text()
    assert "2 run(s) · newest" in index, index[:2000]
    assert "opinfo.add" not in index
    support = (site / "support.html").read_text()
    torch_cpu = sorted(r["axes"]["dtype"] for r in opinfo if r["recipe"] == "torch-cpu" and r["status"] == "PASS")
    assert len(torch_cpu) > 1 and "<code>aten::add</code>" in support and "✅ " + ", ".join(torch_cpu) + "<br>" in support
    # and the history it kept holds both runs, apart from the one the next scheduled run starts from
    assert not (run.artifacts / "bti-portal-history").exists()
    kept = sorted(p.name for p in (run.artifacts / "bti-portal-history-trial").iterdir())
    assert len(kept) == 2 and kept[0] == "20261126T031700Z-lastnight.jsonl.gz", kept
