"""Static checks run as tests, so .ci/run covers them."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT


def test_ruff_clean() -> None:
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "harness", "tests", "scripts", "benchmarks"],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
