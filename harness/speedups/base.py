"""What every speedup is (``Speedup``), the stacks they were verified on, and which of them this process runs (``Plan``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

Stack = Mapping[str, str]

# The stacks (torch, executorch, torchao releases) on which ``benchmarks/verify_speedups.py`` gave identical
# programs and outputs with and without the speedups (fp32: ops + models on portable and xnnpack; int8: the
# three XNNPACK int8 recipes), and the mechanism tests in tests/test_speedups_*.py passed.
STACK_1_4: Stack = {"torch": "2.13.0", "executorch": "1.4.1", "torchao": "0.18.0"}
STACK_1_5: Stack = {"torch": "2.14.1", "executorch": "1.5.1", "torchao": "0.18.0"}
VERIFIED = (STACK_1_4, STACK_1_5)
ANY_STACK = None  # not a memoization of anyone's code (the GC schedule computes nothing differently)


def _release(version: str | None) -> str | None:
    """``2.14.1+cu130`` -> ``2.14.1``: a local build label names the same release."""
    return version.split("+", 1)[0] if version else None


class Speedup:
    """One process-wide patch: its number and name (the results header's), the stacks its identity was verified on,
    and ``enable`` / ``disable``. ``enable`` installs it when the plan allows (``--no-speedups``, the stack, and
    ``--force-speedups`` decide) and says whether it may run; ``disable`` undoes every change ``enable`` made.
    A subclass writes ``install`` with ``patch`` and ``rebind_everywhere``, which remember how to undo."""

    number: ClassVar[int]
    name: ClassVar[str]
    verified_on: ClassVar[tuple[Stack, ...] | None]  # ANY_STACK: valid whatever the versions
    by_enable_all: ClassVar[bool] = True  # False: its caller enables it at the right moment (the GC schedule)

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []
        self.patched: list[tuple[Any, str, Any]] = []  # (owner, attribute, what was there) of every patch in place

    def __repr__(self) -> str:
        return f"<speedup {self.number} {self.name}{' installed' if self.installed else ''}>"

    def verified(self, versions: Mapping[str, str | None]) -> bool:
        if self.verified_on is None:
            return True
        return any(all(_release(versions.get(k)) == v for k, v in stack.items()) for stack in self.verified_on)

    @property
    def allowed(self) -> bool:
        """Whether the plan lets this speedup run here."""
        return self.name in current_plan().active

    @property
    def installed(self) -> bool:
        return bool(self._undo)

    def enable(self) -> bool:
        """Install the patch if the plan allows it and it is not installed yet; False when the plan keeps it off.
        A patch of a module that is not imported yet installs nothing and still answers True (see each speedup)."""
        if not self.allowed:
            return False
        if not self._undo:
            self.install()
        return True

    def disable(self) -> None:
        """Undo every change, last first; the speedup may be enabled again."""
        while self._undo:
            self._undo.pop()()
        self.patched.clear()
        self.uninstalled()

    def install(self) -> None:
        raise NotImplementedError

    def uninstalled(self) -> None:
        """Forget state kept while installed (memos)."""

    def patch(self, owner: Any, attr: str, replacement: Any) -> Any:
        """Set ``owner.attr`` to ``replacement``, remembering how to undo it; returns what was there."""
        own = attr in vars(owner)
        original = vars(owner)[attr] if own else getattr(owner, attr)

        def undo() -> None:
            if own:
                setattr(owner, attr, original)
            else:
                delattr(owner, attr)

        setattr(owner, attr, replacement)
        self._undo.append(undo)
        self.patched.append((owner, attr, original))
        return original

    def on_undo(self, undo: Callable[[], None]) -> None:
        self._undo.append(undo)

    def rebind_everywhere(self, name: str, original: Any, replacement: Any) -> None:
        """Point every loaded module's ``name`` that is ``original`` at ``replacement`` (torch imports its helpers
        by name into the modules that use them)."""
        for mod in list(sys.modules.values()):
            if mod is not None and getattr(mod, name, None) is original:
                self.patch(mod, name, replacement)


@dataclass(frozen=True)
class Plan:
    """Which speedups this process runs: ``active`` names, and each inactive one's reason (the header's ``speedups``)."""

    active: tuple[str, ...]
    off: dict[str, str]
    forced: bool = False

    def header(self) -> dict[str, Any]:
        return {"active": list(self.active), "off": dict(self.off), "forced": self.forced}

    def notice(self) -> str | None:
        """The one line a run prints when speedups are off for want of verification (None otherwise)."""
        unverified = [n for n, why in self.off.items() if why.startswith("not verified")]
        if not unverified:
            return None
        return (f"speedups {', '.join(unverified)} are off: {self.off[unverified[0]]} "
                "(--force-speedups turns them on)")


def plan(enabled: bool | None = None, force: bool | None = None, versions: Mapping[str, str | None] | None = None) -> Plan:
    """The speedups to run on ``versions`` (default: the installed torch, executorch and torchao, from metadata);
    ``enabled`` and ``force`` default to the settings' (``--no-speedups``, ``--force-speedups``)."""
    from harness.settings import current
    from harness.speedups import SPEEDUPS

    enabled = current().speedups if enabled is None else enabled
    force = current().force_speedups if force is None else force
    if versions is None:
        from harness.versions import stack_versions

        versions = stack_versions()
    if not enabled:
        return Plan((), {s.name: "--no-speedups" for s in SPEEDUPS})
    have = " + ".join(f"{k} {versions.get(k) or 'not installed'}" for k in ("torch", "executorch", "torchao"))
    active, off = [], {}
    for s in SPEEDUPS:
        if s.verified(versions) or force:
            active.append(s.name)
        else:
            stacks = "; ".join(" + ".join(f"{k} {v}" for k, v in st.items()) for st in s.verified_on or ())
            off[s.name] = f"not verified on {have} (verified on {stacks})"
    return Plan(tuple(active), off, force and any(not s.verified(versions) for s in SPEEDUPS))


class _Configured:
    plan: Plan | None = None


def configure(p: Plan) -> None:
    """Set the speedups this process may enable (``bti run`` does, before it enables any)."""
    _Configured.plan = p


def current_plan() -> Plan:
    if _Configured.plan is None:
        _Configured.plan = plan()
    return _Configured.plan
