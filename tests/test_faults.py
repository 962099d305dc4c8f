"""Crash, timeout, mismatch and tolerance through a deliberately misbehaving backend (tests/fault_backend.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import FIXTURES

pytestmark = pytest.mark.slow


def test_fault_isolation(bti, tmp_path: Path) -> None:
    recipes = ["fault-segfault", "fault-abort", "fault-sleep", "fault-perturb", "fault-noise"]
    args = ["run", "-s", str(FIXTURES / "suites" / "tiny.yaml"), "-o", str(tmp_path), "--no-reuse", "--timeout", "20", "-j", "2"]
    for r in recipes:
        args += ["-r", r]
    res = bti(*args)
    assert res.code == 1, res.err  # unexpected failures
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    records = {r["id"]: r for r in lines[1:]}
    assert len(records) == len(lines) - 1 == 4 * len(recipes)  # every item exactly once
    mul = "op.mul.a[float32,static]@"
    assert records[mul + "fault-segfault"]["status"] == "CRASH"
    assert "SIGSEGV" in records[mul + "fault-segfault"]["detail"]
    assert records[mul + "fault-abort"]["status"] == "CRASH"
    assert "SIGABRT" in records[mul + "fault-abort"]["detail"]
    assert records[mul + "fault-sleep"]["status"] == "TIMEOUT"
    assert records[mul + "fault-perturb"]["status"] == "FAIL_MISMATCH"
    assert records[mul + "fault-perturb"]["detail"].startswith("output[0]: max_abs 1 against fp64 exceeds atol")
    noise = records[mul + "fault-noise"]
    assert noise["status"] == "PASS" and 0 < float(noise["outputs"][0]["max_abs"]) < 1e-4
    for item_id, rec in records.items():
        if not item_id.startswith(mul):
            assert rec["status"] == "PASS", (item_id, rec.get("detail"))
            assert rec["outputs"][0]["max_abs"] == 0.0
    md = (tmp_path / "summary.md").read_text()
    assert "| CRASH | worker crashed |" in md and "| TIMEOUT | timed out |" in md
