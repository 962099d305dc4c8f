from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="Rewrite golden files from the current output.")


@pytest.fixture(scope="session")
def httpserver_listen_address() -> tuple[str, int]:
    return ("127.0.0.1", 0)  # loopback by address: no resolver round trip for "localhost"


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_bti(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600) -> Result:
    """Run the real CLI in a subprocess (python -m harness)."""
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS / "devices"), str(ROOT)]),
                "BTI_RECIPE_PATH": str(FIXTURES / "recipes")}
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd or ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def bti():
    return run_bti


@pytest.fixture
def inproc(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """The CLI in this process (errors that stop before any work: no interpreter start per call)."""
    from types import SimpleNamespace

    from harness.cli import main

    monkeypatch.setenv("BTI_RECIPE_PATH", str(FIXTURES / "recipes"))

    def call(*args: str, env: dict[str, str] | None = None) -> SimpleNamespace:
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        capsys.readouterr()
        code = main(list(args))
        out = capsys.readouterr()
        return SimpleNamespace(code=code, out=out.out, err=out.err)

    return call
