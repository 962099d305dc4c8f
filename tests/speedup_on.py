"""One speedup on for a block of a test, and off after it (tests use ``disable``, not private names)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from harness.speedups import named
from harness.speedups.base import Speedup

OFF = "speedups are off here (BTI_NO_SPEEDUPS, or a stack they were not verified on)"


@contextlib.contextmanager
def speedup_on(name: str) -> Iterator[Speedup]:
    """Speedup ``name`` on for the block (the test is skipped where the plan keeps it off), and off after it: torch's
    own code is back (a later ``bti run`` in this process enables it again)."""
    s = named(name)
    if not s.enable():
        pytest.skip(OFF)
    try:
        yield s
    finally:
        s.disable()


def all_off() -> Iterator[None]:
    """Every speedup off for a test, as it was after (an autouse fixture's body): a `bti run` in this process, an
    earlier test's, leaves the plan's speedups on, and a test that reads torch's own code first would read a patch."""
    from harness.speedups import SPEEDUPS

    were_on = [s for s in SPEEDUPS if s.installed]
    for s in were_on:
        s.disable()
    try:
        yield
    finally:
        for s in were_on:
            s.enable()
