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


def test_readme_cli_reference_is_current() -> None:
    import subprocess
    import sys

    res = subprocess.run([sys.executable, str(TESTS.parent / "scripts" / "gen_cli_reference.py"), "--check"])
    assert res.returncode == 0, "README CLI reference is stale: run python scripts/gen_cli_reference.py"
