"""Guarded speedups of pure recomputation inside torch.export, lowering and quantization, one module per patch.

Each module holds one ``Speedup`` (``harness.speedups.base``): its number and name, the stacks (torch, executorch,
torchao releases) on which its identity was verified, and ``enable`` / ``disable``. ``bti run`` makes a ``Plan``
(``plan``: off with ``--no-speedups`` or ``BTI_NO_SPEEDUPS=1``; a speedup not verified on the installed stack stays
off unless ``--force-speedups``), says once which are off and why, records the plan in the results header
(``speedups``) and in the result cache's key, and enables what the plan allows (``enable_all``; the GC schedule just
before the workers fork). ``benchmarks/verify_speedups.py`` checks that a suite yields identical ``.pte`` bytes,
statuses and outputs with and without them; ``tests/test_speedups_*.py`` check each mechanism, and turn each off
again with ``disable``.

| # | module | what it saves |
|---|---|---|
| 1 | ``cia_cache`` | the composite-implicit op table, rebuilt three times per lowering |
| 2 | ``typing_cache`` | ``Callable[...]`` aliases built 12,000 times per decomposition |
| 3 | ``gc_policy`` | full garbage collections over torch's heap (a schedule, not a memo) |
| 4 | ``fast_override`` | torch's per-op CIA override, recomputed on every entry |
| 5 | ``pattern_cache`` | pt2e's conv+bn pattern graphs, exported twelve times per ``prepare_pt2e`` |
| 6 | ``histogram_search`` | the HistogramObserver's bin search on 0-dim tensors |
| 7 | ``shared_provenance`` | deep copies of every node's provenance chain |
| 8 | ``lazy_recompile`` | ``GraphModule.recompile`` after every pass |
| 9 | ``xnnpack_pattern_guard`` | XNNPACK's SDPA and upsampling patterns on graphs that cannot match them |
| 10 | ``preservable_order`` | the expensive half of torch's preservable-CIA test first |
| 11 | ``philox_template`` | two fake placeholder tensors per rng-state reset |
| 12 | ``decomposition_skip`` | edge decompositions whose table holds no op of the graph (up to two of three per lowering) |
"""

from __future__ import annotations

from harness.speedups import (
    cia_cache,
    decomposition_skip,
    fast_override,
    gc_policy,
    histogram_search,
    lazy_recompile,
    pattern_cache,
    philox_template,
    preservable_order,
    shared_provenance,
    typing_cache,
    xnnpack_pattern_guard,
)
from harness.speedups.base import ANY_STACK, STACK_1_4, STACK_1_5, Plan, Speedup, configure, current_plan, plan
from harness.speedups.gc_policy import group_gc, parent_gc
from harness.speedups.xnnpack_pattern_guard import prebuild_xnnpack_patterns

SPEEDUPS: tuple[Speedup, ...] = (
    cia_cache.SPEEDUP, typing_cache.SPEEDUP, gc_policy.SPEEDUP, fast_override.SPEEDUP, pattern_cache.SPEEDUP,
    histogram_search.SPEEDUP, shared_provenance.SPEEDUP, lazy_recompile.SPEEDUP, xnnpack_pattern_guard.SPEEDUP,
    preservable_order.SPEEDUP, philox_template.SPEEDUP, decomposition_skip.SPEEDUP,
)

__all__ = ["ANY_STACK", "SPEEDUPS", "STACK_1_4", "STACK_1_5", "Plan", "Speedup", "configure", "current_plan",
           "disable_all", "enable_all", "group_gc", "named", "parent_gc", "plan",
           "prebuild_xnnpack_patterns"]


def named(name: str) -> Speedup:
    """The speedup called ``name`` (KeyError naming it otherwise)."""
    for s in SPEEDUPS:
        if s.name == name:
            return s
    raise KeyError(f"no speedup named {name!r}")


def enable_all() -> list[str]:
    """Every speedup the plan allows but the GC schedule (enabled just before workers fork); the names enabled."""
    return [s.name for s in SPEEDUPS if s.by_enable_all and s.enable()]


def disable_all() -> None:
    """Undo every installed speedup, in the reverse of the table's order."""
    for s in reversed(SPEEDUPS):
        s.disable()
