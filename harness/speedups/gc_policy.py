"""Speedup 3: garbage-collector scheduling (not a memoization: nothing is computed differently).

With torch, executorch and their dependencies imported, the heap holds millions of objects, and lowering
allocates enough containers (closures, partials, FX nodes) to set off full collections that walk all of them:
measured on a tiny graph, GC was ~45% of an XNNPACK lowering (0.46 s → 0.25 s per item with lowering,
``to_executorch`` and one collection; portable 0.25 s → 0.11 s). So the parent runs without automatic collection
(``parent_gc``: it imports, warms up and relays records), freezes its heap (``gc.freeze``, ``SPEEDUP.enable()``) just
before forking workers (which also keeps copy-on-write pages shared), and a worker runs each group with automatic
collection off, then collects once and freezes what survived (``group_gc``). Garbage cycles are still collected,
once per group, and between two items of a group where the first grew the worker by more than ``ITEM_GROWTH_MB``
(``ItemMemory``): a zoo row's group holds one item per recipe, and each item's exported and lowered programs are cycles
of FX nodes as large as the model, so without it one item's garbage lived on through the next (DeBERTa-v2's QA: a
static int8 item ended its worker at 21.5 GB, and the torch-cpu-autocast-bf16 item after it was killed 9 s in by the
worker memory limit, its own need 14.6 GB). Anything a group leaves reachable is frozen, which worker recycling
(``--max-items`` / ``--max-growth-mb``) bounds.

The parent also lowers a tiny model once per recipe before it forks (``harness.stages.warm_up``), so the lazily
built state is built once rather than in every new worker; torch runs with one thread there, so no OpenMP pool
exists when the parent forks.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
from collections.abc import Iterator
from typing import Any

from harness.env import rss_mb
from harness.speedups.base import ANY_STACK, Speedup


class GcPolicy(Speedup):
    number, name, verified_on = 3, "gc-policy", ANY_STACK
    by_enable_all = False  # the runner enables it just before the workers fork

    def enable(self) -> bool:
        """Freeze the heap now, on every call the plan allows (each pool, reruns too, forks from a frozen heap)."""
        if not self.allowed:
            return False
        gc.freeze()
        if not self.installed:
            self.on_undo(gc.unfreeze)  # disable unfreezes everything frozen, this speedup's only freezer
        return True


SPEEDUP = GcPolicy()


@contextlib.contextmanager
def parent_gc(enabled: bool) -> Iterator[None]:
    """The parent side: no automatic collection while ``bti run`` imports torch and executorch and warms up (the
    growing heap set off full collections: 1.1 s of a 4.6 s import), nor while it only relays records; the previous
    state is restored on exit."""
    if not enabled or not SPEEDUP.allowed:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def group_gc() -> Iterator[None]:
    """Run one group with automatic collection off; then collect once and freeze the survivors."""
    if not SPEEDUP.installed:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()


ITEM_GROWTH_MB = 256.0  # an op item grows a worker by far less: their groups keep one collection each


class ItemMemory:
    """Between two items of one group: collect the garbage cycles the first left, and hand glibc's freed heap back
    to the system, where the worker grew by more than ``ITEM_GROWTH_MB`` since the group started or since the last
    collection, so the next item's memory (what the pool's limit reads, what its record reports) is its own."""

    def __init__(self) -> None:
        self.since = rss_mb()

    def after_item(self) -> bool:
        """Collect if the worker grew past the threshold; whether it did."""
        if rss_mb() - self.since <= ITEM_GROWTH_MB:
            return False
        gc.collect()
        _malloc_trim()
        self.since = rss_mb()
        return True


def _malloc_trim() -> None:
    """glibc's ``malloc_trim(0)``: the arenas' free pages back to the system (nothing where the C library is not
    glibc). Large arrays are mapped and unmapped on their own; this is for the many small blocks FX graphs free."""
    trim = _trim_function()
    if trim is not None:
        trim(0)


@functools.cache
def _trim_function() -> Any:
    """glibc's ``malloc_trim``, loaded once (the process's own symbols, where the C library is already mapped), or
    None where there is none."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
