"""One settings object: everything bti reads from its flags and the environment, resolved once.

Order: a command's flags, then the environment, then the defaults. The CLI resolves it at the start of a
command (``resolve``) and installs it for the command's lifetime (``use``); layers below read it with
``current()`` and never read or write the environment for one another. Workers are forked from the parent,
so they see the parent's settings.

Every setting, its flag, its variable and its default: ``docs/settings.md`` (a test keeps the two in step).

A bad value (``BTI_GITHUB_MAX_WAIT=soon``) is a ``UserError``: one line, exit 2.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.errors import UserError

DEFAULT_API = "https://api.github.com"


@dataclass(frozen=True, kw_only=True)
class Settings:
    cache_dir: Path
    reuse: bool = True
    speedups: bool = True
    force_speedups: bool = False
    item_timeout_s: float = 600.0  # the pool kills an item's worker at this; a runtime provider gives up at 0.9 of it
    recipe_path: tuple[Path, ...] = ()
    runner: tuple[str, ...] = ()
    github_api_url: str = DEFAULT_API
    github_max_wait_s: float = 60.0
    github_backoff_s: float = 1.0
    github_throttle: bool = True
    machine: str = ""  # this machine's name in the portal's columns (default: a hash of /etc/machine-id)
    worker_memory_gb: float = 0.0  # a worker above this RSS is killed (CRASH, out of memory); 0: 90% of RAM / --jobs

    def worker_memory_limit_gb(self, jobs: int) -> float:
        """The memory one worker may use: the setting, or 90% of this machine's RAM shared by ``jobs`` workers."""
        if self.worker_memory_gb:
            return self.worker_memory_gb
        from harness.env import total_memory_gb

        return round(0.9 * total_memory_gb() / max(1, jobs), 1)

    @property
    def provider_timeout_s(self) -> float:
        """A runtime provider's subprocess gives up before the pool would kill the worker that waits for it."""
        return max(1.0, self.item_timeout_s * 0.9)

    def for_case(self, spec: Mapping[str, Any], recipe: str | None = None) -> Settings:
        """These settings for one case's items (on ``recipe``): its timeout (``case_timeout``) in place of ``--timeout``."""
        seconds = case_timeout(self.item_timeout_s, spec, recipe)
        return self if seconds == self.item_timeout_s else replace(self, item_timeout_s=seconds)

    def with_flags(self, **flags: Any) -> Settings:
        """These settings with a command's flags on top (a flag left at None keeps the environment's value)."""
        given = {k: v for k, v in flags.items() if v is not None}
        if "cache_dir" in given:
            given["cache_dir"] = Path(given["cache_dir"]).absolute()
        return replace(self, **given)


def seconds_or_none(value: Any) -> float | None:
    """A figure of seconds from a file or a spec: a finite number, not negative, not a bool; else None (no figure)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        return None
    return float(value)


def case_timeout(timeout_s: float, spec: Mapping[str, Any], recipe: str | None = None) -> float:
    """An item's timeout: the longer of ``--timeout`` and the time its case declares it needs (``timeout_s``, a finite
    number of seconds: the zoo's large rows, which take 20 minutes on the TOSA reference model or the portable kernels),
    or on the item's recipe (``timeouts``, recipe -> seconds: the zoo's, from each recipe's seconds on the row), so a row
    that is only slow is not a TIMEOUT that says nothing about the backend. Anything else declares nothing."""
    needs = [seconds_or_none(spec.get("timeout_s")), recipe_timeout(spec, recipe)]
    return max([timeout_s, *(n for n in needs if n is not None)])


def recipe_timeout(spec: Mapping[str, Any], recipe: str | None) -> float | None:
    """The time a case declares it needs on ``recipe`` (``timeouts``), None where it declares none."""
    per = spec.get("timeouts")
    return seconds_or_none(per.get(recipe)) if recipe and isinstance(per, Mapping) else None


def _seconds(environ: Mapping[str, str], name: str, default: float, unit: str = "seconds") -> float:
    text = environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{name}={text!r}: expected {unit}") from None
    if value < 0 or value != value:
        raise UserError(f"{name}={text!r}: expected {unit}, not a negative number")
    return value


def _gigabytes(environ: Mapping[str, str], name: str) -> float:
    return _seconds(environ, name, 0.0, unit="gigabytes")


def resolve(environ: Mapping[str, str] | None = None, **flags: Any) -> Settings:
    """Flags (None: not given) over the environment over the defaults."""
    env = os.environ if environ is None else environ
    try:
        runner = tuple(shlex.split(env.get("BTI_RUNNER") or ""))
    except ValueError as exc:
        raise UserError(f"BTI_RUNNER does not parse as a command line: {exc}") from None
    base = Settings(
        cache_dir=Path(env.get("BTI_CACHE_DIR") or ".bti-cache").absolute(),
        reuse=not env.get("CI"),
        speedups=not env.get("BTI_NO_SPEEDUPS"),
        recipe_path=tuple(Path(p) for p in env.get("BTI_RECIPE_PATH", "").split(os.pathsep) if p),
        runner=runner,
        github_api_url=env.get("GITHUB_API_URL") or DEFAULT_API,
        github_max_wait_s=_seconds(env, "BTI_GITHUB_MAX_WAIT", 60.0),
        github_backoff_s=_seconds(env, "BTI_GITHUB_BACKOFF", 1.0),
        github_throttle=env.get("BTI_GITHUB_THROTTLE", "1") != "0",
        machine=env.get("BTI_MACHINE", "").strip()[:64],
        worker_memory_gb=_gigabytes(env, "BTI_WORKER_MEMORY_GB"),
    )
    return base.with_flags(**flags)


_installed: Settings | None = None


def current() -> Settings:
    """The command's settings; outside a command (a library call, a test), the environment's, read now."""
    return _installed if _installed is not None else resolve()


@contextlib.contextmanager
def use(settings: Settings) -> Iterator[Settings]:
    """Install ``settings`` for the block (a command's lifetime); the previous ones come back after it."""
    global _installed
    before, _installed = _installed, settings
    try:
        yield settings
    finally:
        _installed = before
