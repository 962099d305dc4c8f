"""Golden files for the renderers. Regenerate with `pytest tests/test_golden.py --update-golden`."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report import csvout, junit, markdown
from harness.results import read_results

from .conftest import TESTS

GOLDEN = TESTS / "golden"


def check(name: str, text: str, update: bool) -> None:
    path = GOLDEN / name
    if update:
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with --update-golden"
    assert text == path.read_text(), f"{name} differs from its golden file (run with --update-golden if intended)"


@pytest.fixture(scope="module")
def results():
    return read_results(GOLDEN / "results.jsonl")


def test_markdown_golden(results, update_golden: bool) -> None:
    check("summary.md", markdown.render(*results), update_golden)


def test_junit_golden(results, tmp_path: Path, update_golden: bool) -> None:
    out = tmp_path / "junit.xml"
    junit.write(*results, out)
    check("junit.xml", out.read_text(), update_golden)


def test_csv_golden(results, update_golden: bool) -> None:
    check("results.csv", csvout.render(results[1]), update_golden)


def test_markdown_stays_under_its_limit(results) -> None:
    header, records = results
    many = [dict(r, id=f"{r['id']}#{i}", status="FAIL_RUN", detail="x" * 300) for i in range(5000) for r in records[:1]]
    text = markdown.render(header, many, limit=64 * 1024)
    assert len(text.encode()) <= 64 * 1024
    assert "more; see the JUnit/CSV reports" in text


def _base(records):
    """A base run where the fault-perturb failure still passed and one item did not exist yet."""
    out = [dict(r, status="PASS", detail="") if r["recipe"] == "fault-perturb" else r for r in records]
    return [r for r in out if r["id"] != "op.neg.a[float32,static]@portable"]


def test_comment_golden(results, update_golden: bool) -> None:
    from harness.report import comment
    from harness.report.compare import compare

    header, records = results
    body = comment.render("xnnpack", header, records, compare(_base(records), records),
                          comment.Links("https://github.com/o/r/actions/runs/1", "https://github.com/o/r/actions/runs/1#artifacts"),
                          base_records=_base(records))
    check("comment.md", body, update_golden)


def test_badge_json_golden(results, tmp_path: Path, update_golden: bool) -> None:
    from harness.report import badge

    paths = badge.write(*results, tmp_path)
    check("badge.json", paths["badge.json"].read_text(), update_golden)
    check("badge-portable.json", paths["badge-portable.json"].read_text(), update_golden)
    assert "<svg" in paths["badge.svg"].read_text()


def test_compare_cli_exit_codes(bti, tmp_path: Path, results) -> None:
    import json

    header, records = results
    base = tmp_path / "base.jsonl"
    base.write_text("\n".join(json.dumps(x) for x in [header, *_base(records)]) + "\n")
    head = GOLDEN / "results.jsonl"
    res = bti("compare", str(base), str(head), "--json", str(tmp_path / "c.json"))
    assert res.code == 1 and "new_failures\t1" in res.out and "added\t1" in res.out
    assert bti("compare", str(head), str(head)).code == 0
    assert bti("compare", str(head), str(base)).code == 0  # the reverse only fixes things and removes one
