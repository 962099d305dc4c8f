"""The generated core-ATen CI sample runs for real on portable, XNNPACK and OpenVINO.

Every result is a pass or an expected failure listed (with its reason) in the recipe files; any
new failure fails this test with the items named.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_core_ops_ci_sample(bti, tmp_path: Path) -> None:
    res = bti("run", "-s", "core-ops-ci", "-r", "portable", "-r", "xnnpack", "-r", "openvino", "-o", str(tmp_path),
              "--no-reuse", "--timeout", "300", timeout=1500)
    assert (tmp_path / "results.jsonl").exists(), res.err
    records = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()[1:]]
    unexpected = [f"{r['id']}: {r['status']} {r.get('detail', '')[:160]}" for r in records
                  if r["status"] not in ("PASS", "PASS_UNDELEGATED", "XFAIL", "SKIP")]
    assert res.code == 0 and not unexpected, "\n".join(unexpected[:40]) or res.err
    ops = {r["op"] for r in records}
    assert len(ops) >= 160
    assert len(records) == 3 * 348
