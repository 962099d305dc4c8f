from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from .zygote import Zygote

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"
EXAMPLES = ROOT / "examples"
# the worked examples (examples/): importable and their recipes found, as if installed (tests/test_examples.py
# installs them for real)
EXAMPLE_PATHS = [str(EXAMPLES / "npu-device"), str(EXAMPLES / "delegate")]
# every bti a test starts keeps its result cache (and the runner it builds) in this process's own directory,
# never in the repository's .bti-cache: tests run in parallel (pytest-xdist), and a clone's cache is its user's
CACHE_DIR = Path(tempfile.mkdtemp(prefix="bti-test-cache-"))
atexit.register(shutil.rmtree, CACHE_DIR, True)
os.environ["BTI_CACHE_DIR"] = str(CACHE_DIR)  # what every subprocess a test starts inherits
RECIPE_PATH = os.pathsep.join([str(FIXTURES / "recipes"), str(EXAMPLES / "npu-device" / "recipes"), str(EXAMPLES / "delegate" / "recipes")])


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="Rewrite golden files from the current output.")


# The longest test modules, longest first (worker-seconds on the default pair: benchmarks/module_times.py). xdist
# hands out whole modules in collection order (`--dist loadscope --no-loadscope-reorder`), so these go first and the
# short ones fill in at the end. In collection order, a long module handed out last kept one worker busy while the
# other sat idle: 38 s at 816e37f, where test_verdicts (115 s) came last.
LONGEST_FIRST = (
    "test_docs_commands.py", "actions/test_act_reusable.py", "actions/test_act.py", "test_e2e.py", "test_verdicts.py",
    "actions/test_act_periodic.py",
    "test_repro.py", "test_core_ops_ci.py", "test_providers.py", "test_faults.py", "test_versions.py", "test_arm.py",
    "test_scale.py", "test_bench.py", "test_backends.py", "test_examples.py", "test_judge.py", "test_cli_errors.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules in LONGEST_FIRST's order, then the rest in collection order; a module's own tests keep their order."""
    rank = {str(TESTS / name): i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(str(item.path), len(rank)))  # stable: the rest keep collection order


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


PYTHONPATH = os.pathsep.join([str(TESTS), *EXAMPLE_PATHS, str(ROOT)])
ZYGOTE = Zygote(PYTHONPATH)


def run_bti(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600,
            fresh: bool = False) -> Result:
    """Run the real CLI in a process of its own (python -m harness): forked from this worker's warm process, which
    has imported torch and ExecuTorch once (tests/zygote.py), or a new interpreter where ``fresh``, where the
    environment changes what those imports read, or where there is no warm process."""
    full_env = {**os.environ, "PYTHONPATH": PYTHONPATH, "BTI_RECIPE_PATH": RECIPE_PATH, "BTI_CACHE_DIR": str(CACHE_DIR)}
    full_env.update(env or {})
    argv = [sys.executable, "-m", "harness", *args]
    return Result(*ZYGOTE.run_or_spawn(list(args), cwd or ROOT, full_env, timeout, argv, warm=not fresh))


@pytest.fixture(scope="session")
def installed_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The examples (examples/), installed for real (wheels built from their pyproject.toml) into a directory of their
    own, as a vendor's `pip install ./examples/...` would: put it on PYTHONPATH."""
    target, src = tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("examples")
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    for name in ("delegate", "npu-device", "case-source"):  # built from a copy: two workers building in examples/ at once would race
        shutil.copytree(EXAMPLES / name, src / name, ignore=ignore)
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--target", str(target), str(src / "delegate"), str(src / "npu-device"), str(src / "case-source")],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert all((target / p).is_dir() for p in ("bti_example_delegate", "bti_example_npu", "bti_example_cases"))
    return target


@pytest.fixture
def bti():
    return run_bti


@pytest.fixture
def inproc(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """The CLI in this process (errors that stop before any work: no interpreter start per call)."""
    from types import SimpleNamespace

    from harness.cli import main

    monkeypatch.setenv("BTI_RECIPE_PATH", RECIPE_PATH)
    monkeypatch.setenv("BTI_CACHE_DIR", str(CACHE_DIR))

    def call(*args: str, env: dict[str, str] | None = None) -> SimpleNamespace:
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        capsys.readouterr()
        code = main(list(args))
        out = capsys.readouterr()
        return SimpleNamespace(code=code, out=out.out, err=out.err)

    return call


def bad_recipe(inproc, tmp_path: Path, body: str, message: str) -> None:
    """A recipe file with ``body`` after its name and backend: `bti validate` refuses it in one line, exit 2."""
    path = tmp_path / "r.yaml"
    path.write_text(f"name: r\nbackend: executorch\n{body}\n")
    res = inproc("validate", str(path))
    assert res.code == 2 and message in res.err and len(res.err.strip().splitlines()) == 1, res.err
