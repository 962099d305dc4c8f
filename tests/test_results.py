from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from harness.errors import ResultsError
from harness.results import ResultsWriter, as_float, read_results, repair_tail

HEADER = {"kind": "header", "schema": 1, "run_id": "r", "recipes": {"portable": "h"}}


def rec(i: int, status: str = "PASS") -> dict:
    return {"kind": "result", "id": f"op.x.{i}[float32,static]@portable", "recipe": "portable", "status": status,
            "outputs": [{"name": "output[0]", "sqnr_db": math.inf}]}


def test_roundtrip_keeps_strict_json(tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    with ResultsWriter(p, HEADER) as w:  # type: ignore[arg-type]
        w.write(rec(1))  # type: ignore[arg-type]
    for line in p.read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    header, records = read_results(p)
    assert header["run_id"] == "r"
    assert as_float(records[0]["outputs"][0]["sqnr_db"]) == math.inf


def test_truncated_line_is_a_results_error_naming_the_line(tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    with ResultsWriter(p, HEADER) as w:  # type: ignore[arg-type]
        w.write(rec(1))  # type: ignore[arg-type]
    with p.open("a") as fh:
        fh.write('{"kind": "result", "id": "op.x')
    with pytest.raises(ResultsError, match=r"r\.jsonl:3: unreadable JSONL line \(truncated line\)"):
        read_results(p)
    assert repair_tail(p) > 0
    _, records = read_results(p)
    assert len(records) == 1


def test_unknown_status_and_missing_header(tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(HEADER) + "\n" + json.dumps(rec(1, "GREAT")) + "\n")
    with pytest.raises(ResultsError, match="unknown status 'GREAT'"):
        read_results(p)
    p.write_text(json.dumps(rec(1)) + "\n")
    with pytest.raises(ResultsError, match="no header line"):
        read_results(p)
