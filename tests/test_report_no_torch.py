"""Reports come from the JSONL alone, in a process that cannot import torch or executorch."""

from __future__ import annotations

from pathlib import Path

from junitparser import JUnitXml

from .conftest import TESTS


def test_report_runs_without_torch(bti, tmp_path: Path) -> None:
    blocker = tmp_path / "blocked"
    for name in ("torch", "executorch", "torchao"):
        (blocker / name).mkdir(parents=True)
        (blocker / name / "__init__.py").write_text(f"raise ImportError('{name} must not be imported by reports')\n")
    golden_input = TESTS / "golden" / "results.jsonl"
    res = bti("report", str(golden_input), "-o", str(tmp_path / "out"),
              env={"PYTHONPATH": f"{blocker}:{TESTS.parent}"})
    assert res.code == 0, res.err
    assert (tmp_path / "out" / "summary.md").read_text().startswith("# bti results")
    assert len(list(JUnitXml.fromfile(str(tmp_path / "out" / "junit.xml")))) >= 1
    # the report venv's other commands: the upstream-bugs report, merge (which carries the repro scripts) and the portal
    env = {"PYTHONPATH": f"{blocker}:{TESTS.parent}"}
    res = bti("report", str(golden_input), "-o", str(tmp_path / "out"), "--format", "md", "--upstream-bugs", env=env)
    assert res.code == 0 and (tmp_path / "out" / "upstream-bugs.md").read_text().startswith("# Bugs found outside bti"), res.err
    res = bti("merge", str(golden_input), "-o", str(tmp_path / "merged" / "results.jsonl"), env=env)
    assert res.code == 0, res.err
    res = bti("portal", str(golden_input), "-o", str(tmp_path / "site"), env=env)
    assert res.code == 0 and (tmp_path / "site" / "index.html").is_file(), res.err
