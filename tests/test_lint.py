"""Static checks run as tests, so .ci/run covers them."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT


def test_ruff_clean() -> None:
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "harness", "tests", "scripts", "benchmarks"],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_strict_clean() -> None:
    """harness/ type-checks under ``mypy --strict`` (configuration: ``[tool.mypy]`` in pyproject.toml)."""
    res = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "Success: no issues found" in res.stdout
