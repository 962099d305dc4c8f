"""The supported torch / executorch matrix, and the check every ``bti run`` and ``bti bench`` makes at start-up.

bti is tested on two pairs (``MATRIX``): executorch 1.5.x with torch 2.14 (the default; ``make`` installs it with
``constraints/executorch-1.5.txt``) and executorch 1.4.x with torch 2.13. ``check_stack`` reads what is installed
(package metadata first, then the imports a run needs) and answers in one line:

- **exit 2** where the combination is known to break: torch or executorch missing; a requirement that the installed
  executorch declares (torchao, and torch where it names one) unmet; torch failing to import (a device extension that
  auto-loads through the ``torch.backends`` entry point and raises is the usual cause); executorch's runtime extension
  (``_portable_lib`` on 1.4, ``_C`` on 1.5) missing or failing to load;
- **a warning** where it runs, untested: a pair outside the matrix (executorch 1.5 with torch 2.13 imports and runs,
  for example), or a development build.

Versions are compared with ``packaging`` (PEP 440): a local label (``2.14.1+cu130``, ``2.13.0+cpu``) belongs to its
release, and a ``.dev`` build of the next release is outside the matrix.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.errors import UserError


@dataclass(frozen=True)
class Pair:
    """One tested combination: an executorch series with the torch series it pairs with."""

    executorch: str  # a specifier, e.g. "==1.5.*"
    torch: str
    default: bool = False

    def holds(self, executorch: str, torch: str) -> bool:
        return in_spec(executorch, self.executorch) and in_spec(torch, self.torch)

    def describe(self) -> str:
        return f"executorch {self.executorch.lstrip('=')} + torch {self.torch.lstrip('=')}"


MATRIX = (
    Pair(executorch="==1.5.*", torch="==2.14.*", default=True),
    Pair(executorch="==1.4.*", torch="==2.13.*"),
)
# Packages whose versions decide whether the stack works; the header records them with the backends' own.
STACK = ("torch", "executorch", "torchao")


def base_version(text: str) -> Version | None:
    try:
        return Version(Version(text).base_version)  # 2.14.1+cu130 -> 2.14.1; 1.6.0.dev20261101 -> 1.6.0
    except InvalidVersion:
        return None


def release(version: str | None) -> str:
    """A version's release line, major.minor (1.4.1 -> "1.4"); "?" where there is none."""
    v = base_version(version or "")
    return f"{v.major}.{v.minor}" if v else "?"


@functools.lru_cache(maxsize=4096)
def in_spec(version: str, spec: str) -> bool:
    """Whether ``version`` (its release: local labels dropped) satisfies ``spec``; pre-releases count as their release."""
    try:
        specifiers = SpecifierSet(spec)
    except InvalidSpecifier:
        return False
    try:
        v = Version(version)
    except InvalidVersion:
        return False
    return specifiers.contains(Version(v.public), prereleases=True) or specifiers.contains(Version(v.base_version), prereleases=True)


def installed_version(package: str) -> str | None:
    try:
        return distribution(package).version
    except PackageNotFoundError:
        return None


@functools.cache
def cached_version(package: str) -> str | None:
    """``installed_version``, read once per process (rules ask it for every item)."""
    return installed_version(package)


def stack_versions() -> dict[str, str | None]:
    """torch, executorch and torchao as installed (None where absent), read from metadata: nothing is imported."""
    return {name: installed_version(name) for name in STACK}


def matrix_text() -> str:
    return "; ".join(p.describe() + (" (default)" if p.default else "") for p in MATRIX)


def _declared(package: str) -> list[Requirement]:
    """The requirements ``package`` declares on the stack's other packages (those without an extra marker)."""
    try:
        requires = distribution(package).requires or []
    except PackageNotFoundError:
        return []
    out = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.name.lower() in STACK and (req.marker is None or req.marker.evaluate({"extra": ""})):
            out.append(req)
    return out


@dataclass(frozen=True)
class StackReport:
    versions: dict[str, str | None]
    warnings: tuple[str, ...]


def check_metadata(versions: dict[str, str | None] | None = None,
                   declared: dict[str, list[Requirement]] | None = None) -> StackReport:
    """The metadata half of the check (no imports): raises ``UserError`` where the combination is known to
    break, and returns the warnings for one that runs untested. ``versions``/``declared`` default to what is
    installed (tests pass their own)."""
    v = stack_versions() if versions is None else versions
    torch, executorch = v.get("torch"), v.get("executorch")
    default = next(p for p in MATRIX if p.default)
    if torch is None:
        raise UserError(f"torch is not installed: install a supported pair ({matrix_text()}), e.g. "
                        f"pip install 'torch{default.torch}' 'executorch{default.executorch}'")
    if executorch is None:
        raise UserError(f"executorch is not installed (torch {torch} is): install the executorch that pairs with it "
                        f"({matrix_text()})")
    reqs = {"executorch": _declared("executorch")} if declared is None else declared
    for owner, requirements in reqs.items():
        for req in requirements:
            have = v.get(req.name.lower())
            if have is None:
                raise UserError(f"{owner} {v.get(owner)} requires {req}, which is not installed: pip install '{req}'")
            if req.specifier and not in_spec(have, str(req.specifier)):
                raise UserError(f"{owner} {v.get(owner)} requires {req}, but {req.name} {have} is installed: "
                                f"pip install '{req}' (or the executorch that pairs with {req.name} {have})")
    warnings = []
    if not any(p.holds(executorch, torch) for p in MATRIX):
        warnings.append(f"executorch {executorch} with torch {torch} is outside the tested matrix ({matrix_text()}): "
                        "running untested")
    return StackReport(dict(v), tuple(warnings))


def _last_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def check_imports() -> None:
    """The import half: torch (with any auto-loaded device extension) and executorch's runtime extension."""
    try:
        import torch  # noqa: F401
    except Exception as exc:
        hint = ""
        if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "0":
            from importlib.metadata import entry_points

            names = [f"{ep.name} ({ep.value})" for ep in entry_points(group="torch.backends")]
            if names:
                hint = (f"; the device extension(s) torch auto-loads: {', '.join(names)}: fix or uninstall it, or set "
                        "TORCH_DEVICE_BACKEND_AUTOLOAD=0 to run without it")
        raise UserError(f"torch {installed_version('torch')} failed to import: {_last_line(exc)}{hint}") from None
    try:
        from executorch.extension.pybindings import portable_lib  # noqa: F401
    except Exception as exc:
        raise UserError(f"executorch {installed_version('executorch')}'s runtime extension failed to load "
                        f"({_last_line(exc)}): reinstall it with pip install --force-reinstall "
                        f"'executorch=={installed_version('executorch')}'") from None


def check_stack(imports: bool = True) -> StackReport:
    """The start-up check (module docstring): ``UserError`` (exit 2) or the warnings to print."""
    report = check_metadata()
    if imports:
        check_imports()
    return report


def header_versions() -> dict[str, Any]:
    """torch, executorch, torchao and every backend package a verdict can depend on, for the results header."""
    from harness.env import verdict_versions

    return dict(verdict_versions())
