"""Static checks run as tests, so .ci/run covers them."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT


def test_ruff_clean() -> None:
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "harness", "tests", "scripts", "benchmarks", "examples"],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_strict_clean() -> None:
    """harness/ type-checks under ``mypy --strict`` (configuration: ``[tool.mypy]`` in pyproject.toml)."""
    res = subprocess.run([sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "Success: no issues found" in res.stdout


def test_no_function_over_60_lines() -> None:
    """Functions fit on a screen (STYLE.md): a long one hides its steps; name them instead."""
    import ast

    long = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


def test_only_settings_reads_bti_variables() -> None:
    """One settings object (harness/settings.py): no other module reads or writes a BTI_* variable."""
    import re

    pattern = re.compile(r"""(?:(?:environ|\benv)(?:\.get\(|\[|\.setdefault\(|\.pop\()|getenv\()\s*["']BTI_""")
    offenders = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "harness").rglob("*.py"))
                 if p.name != "settings.py" and pattern.search(p.read_text(encoding="utf-8"))]
    assert not offenders, offenders
    assert pattern.search((ROOT / "harness" / "settings.py").read_text(encoding="utf-8"))  # the pattern does match


def test_no_module_but_status_lists_statuses() -> None:
    """Status groups and display maps live on Status and Group (harness/status.py): a tuple, set, list or dict of two
    or more Status members anywhere else is a second place that decides what a status means. A translation into
    another tool's words (opdiff's statuses) is a table of every status, so a new status cannot fall through it."""
    import ast

    from harness.status import Status

    every = {s.name for s in Status}
    found = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        if path.name == "status.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            elts = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else node.keys if isinstance(node, ast.Dict) else []
            members = [e for e in elts if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "Status"]
            if isinstance(node, ast.Dict) and {m.attr for m in members} == every == {ast.unparse(k).removeprefix("Status.") for k in elts}:
                continue  # a whole table
            if len(members) >= 2:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_every_package_of_harness_is_installed() -> None:
    """A non-editable install (the composite action's, a vendor's ``pip install``) ships every package of harness/:
    pyproject.toml lists each one, so a new package is not left out of the wheel."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "harness").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)


def test_longest_first_names_test_modules() -> None:
    """conftest's LONGEST_FIRST orders modules by name: a renamed or removed module would silently lose its place."""
    from .conftest import LONGEST_FIRST, TESTS

    missing = [name for name in LONGEST_FIRST if not (TESTS / name).is_file()]
    assert not missing and len(set(LONGEST_FIRST)) == len(LONGEST_FIRST), missing
