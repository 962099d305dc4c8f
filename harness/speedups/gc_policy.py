"""Speedup 3: garbage-collector scheduling (not a memoization: nothing is computed differently).

With torch, executorch and their dependencies imported, the heap holds millions of objects, and lowering
allocates enough containers (closures, partials, FX nodes) to set off full collections that walk all of them:
measured on a tiny graph, GC was ~45% of an XNNPACK lowering (0.46 s → 0.25 s per item with lowering,
``to_executorch`` and one collection; portable 0.25 s → 0.11 s). So the parent runs without automatic collection
(``parent_gc``: it imports, warms up and relays records), freezes its heap (``gc.freeze``, ``SPEEDUP.enable()``) just
before forking workers (which also keeps copy-on-write pages shared), and a worker runs each group with automatic
collection off, then collects once and freezes what survived (``group_gc``). Garbage cycles are still collected,
once per group; anything a group leaves reachable is frozen, which worker recycling (``--max-items`` /
``--max-growth-mb``) bounds.

The parent also lowers a tiny model once per recipe before it forks (``harness.stages.warm_up``), so the lazily
built state is built once rather than in every new worker; torch runs with one thread there, so no OpenMP pool
exists when the parent forks.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

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
