"""The ExecuTorch backend suite's operator tests as bti cases (``-s executorch-upstream-ops``), and the
warm parent the speed work relies on (discovery forked from it, a warm-up lowering before workers fork)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def records(path: Path) -> dict[str, dict]:
    return {r["id"]: r for r in (json.loads(x) for x in path.read_text().splitlines()[1:])}


def test_upstream_tests_run_as_bti_cases(bti, tmp_path: Path) -> None:
    # `bti list` discovers in a fresh interpreter; `bti run` forks discovery from its warm parent:
    # both must see the same cases.
    listed = bti("list", "-s", "executorch-upstream-ops", "-r", "xnnpack", "-k", "upstream.abs.*", "-k", "upstream.linear.*")
    assert listed.code == 0, listed.err
    res = bti("run", "-s", "executorch-upstream-ops", "-r", "xnnpack", "-k", "upstream.abs.*", "-k", "upstream.linear.*",
              "--no-reuse", "-j", "2", "-o", str(tmp_path))
    recs = records(tmp_path / "results.jsonl")
    assert recs and all(item_id in listed.out for item_id in recs)
    abs_items = {k: r for k, r in recs.items() if k.startswith("upstream.abs.")}
    assert len(abs_items) == 4
    for item_id, rec in abs_items.items():  # upstream's test_abs_* calls, really lowered and run on XNNPACK
        assert rec["status"] == "PASS", (item_id, rec.get("detail"))
        assert rec["partition"]["delegated_nodes"] >= 1 and rec["pte_bytes"] > 0
    # upstream's test_linear_* feed 64 features to Linear(67, 43): the test itself is broken
    broken = [r for k, r in recs.items() if k.startswith("upstream.linear.") and r["status"] == "FAIL_EXPORT"]
    assert broken and all("mat1 and mat2 shapes cannot be multiplied" in r["detail"] for r in broken)
    assert res.code == 1  # those are unexpected failures


def test_warm_parent_forks_workers_that_use_several_threads(bti, tmp_path: Path) -> None:
    # The parent lowers a tiny model before forking (harness.stages.warm_up). Workers with two torch
    # threads must still run (a fork after an OpenMP pool existed would hang them: TIMEOUT here).
    res = bti("run", "-s", "smoke", "-r", "portable", "-r", "xnnpack", "--threads", "2", "--timeout", "60",
              "--no-reuse", "-j", "2", "-o", str(tmp_path))
    assert res.code == 0, res.err
    recs = records(tmp_path / "results.jsonl")
    assert len(recs) == 16 and {r["status"] for r in recs.values()} <= {"PASS", "PASS_UNDELEGATED"}


def test_discovery_started_early_sees_the_same_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    # `bti run` forks upstream discovery before its warm-up lowering and receives the cases after it
    pytest.importorskip("executorch")
    import executorch.exir  # noqa: F401  (a warm parent: discovery forks from it)

    from harness.suites import prefetch
    from harness.suites import upstream as up

    up._descriptors.cache_clear()
    monkeypatch.setattr(up, "_STARTED", None)
    prefetch(["ops", "executorch-upstream-ops"])
    started = up._STARTED
    assert started is not None  # forked now, received below
    early = up._descriptors()
    assert up._STARTED is None and started[0].exitcode == 0  # received and joined
    prefetch(["executorch-upstream-ops"])  # discovered already: nothing more is forked
    assert up._STARTED is None
    assert early == up._descriptors_forked() and len(early) > 100


def test_warm_up_lowers_once_per_backend_and_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import stages
    from harness.backends.executorch import ExecuTorchBackend
    from harness.recipes import load_recipe

    calls: list[str] = []
    monkeypatch.setattr(ExecuTorchBackend, "warm", lambda self, recipe, lower: calls.append(recipe.name))
    monkeypatch.setattr(stages, "_WARMED", set())
    import torch

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # warm_up's one thread must not leak to later tests
    xnn, portable = load_recipe("xnnpack"), load_recipe("portable")
    stages.warm_up([xnn, portable])
    stages.warm_up([xnn, portable, xnn])
    assert calls == ["xnnpack", "portable"]


def test_tests_that_read_their_flow_get_a_float_flow() -> None:
    """Upstream's test_lstm builds its model from ``test_runner._flow.quantize``: the collector's flow answers (the
    float model), so its cases build instead of failing as the test's own (found by comparing with upstream's Arm
    flows, benchmarks/arm_agreement.py)."""
    from harness.suites.upstream import upstream_cases

    lstm = [c for c in upstream_cases() if c.id.startswith("upstream.lstm.")]
    assert len(lstm) >= 10 and not [c.id for c in lstm if c.spec.get("broken")]
