"""Per-item stage times in one process, as a worker runs items (speedups on, warm-up first, heap
frozen, one collection per item), with an optional cProfile of the items.

    .venv/bin/python benchmarks/item_stages.py xnnpack-int8-dynamic-per-channel \\
        'upstream.add.*,upstream.mul.*,upstream.conv2d.*,upstream.linear.*' -n 40 [--profile]

Items are drawn from the suite (default executorch-upstream-ops) in a seeded shuffle; the first is also run
once, untimed, before the timed loop (first-use costs).

``--split module:qualname`` (repeatable) also times a function inside the stages, with a wall clock around each call
(no profiler's overhead), and prints its seconds per item: where a stage's time goes, e.g. XNNPACK's pass pipeline
inside the lowering::

    ... --split executorch.backends.xnnpack._passes:XNNPACKPassManager.transform \
        --split torch.export.exported_program:ExportedProgram.run_decompositions
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import random
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe")
    ap.add_argument("patterns", help="comma-separated item-id patterns")
    ap.add_argument("-n", type=int, default=30, help="items to time")
    ap.add_argument("--suite", default="executorch-upstream-ops")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions (cumulative, own time)")
    ap.add_argument("--dump", metavar="FILE", help="also write the profile's stats to FILE (pstats), for callers/callees queries")
    ap.add_argument("--split", action="append", default=[], metavar="MODULE:QUALNAME",
                    help="also time this function's calls (wall clock), seconds per item")
    ns = ap.parse_args()
    ns.profile = ns.profile or bool(ns.dump)

    from harness import stages
    from harness.runner.matrix import Filters
    from harness.runner.run import plan, warm_imports

    recipes, items = plan([ns.suite], [ns.recipe], Filters(patterns=tuple(ns.patterns.split(","))), check=False)
    recipe = recipes[0]
    warm_imports([recipe], True)
    stages.warm_up([recipe])
    splits = {spec: _timed(spec) for spec in ns.split}
    if not items:
        raise SystemExit(f"no items of {ns.suite} match {ns.patterns}")
    random.Random(0).shuffle(items)
    items = items[: ns.n]
    stages.run_item(items[0], recipe, stages.Group(items[0]), "warm")
    for spent in splits.values():
        spent[0], spent[1] = 0.0, 0  # the warm-up item's calls are not counted
    gc.disable()
    gc.collect()
    gc.freeze()
    profile = cProfile.Profile() if ns.profile else None
    sums: dict[str, float] = {}
    other = {"group": 0.0, "item": 0.0, "gc": 0.0}
    for it in items:
        t = time.perf_counter()
        group = stages.Group(it)
        other["group"] += time.perf_counter() - t
        t = time.perf_counter()
        if profile:
            profile.enable()
        rec = stages.run_item(it, recipe, group, "x")[0]
        if profile:
            profile.disable()
        other["item"] += time.perf_counter() - t
        for stage, seconds in (rec.get("stages") or {}).items():
            sums[stage] = sums.get(stage, 0.0) + seconds
        t = time.perf_counter()
        gc.collect()
        gc.freeze()
        other["gc"] += time.perf_counter() - t
    n = len(items)
    print(f"{n} items of {ns.recipe}; seconds per item:")
    print("  stages: " + ", ".join(f"{k} {v / n:.3f}" for k, v in sums.items()))
    print("  " + ", ".join(f"{k} {v / n:.3f}" for k, v in other.items()))
    for spec, spent in splits.items():
        print(f"  within the stages, {spec}: {spent[0] / n:.3f} ({spent[1]} calls)")
    if profile and ns.dump:
        profile.dump_stats(ns.dump)
    if profile:
        for key in ("cumulative", "tottime"):
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats(key).print_stats(40)
            print(out.getvalue())
    return 0


def _timed(spec: str) -> list:
    """Wrap ``module:Class.method`` (or ``module:function``) with a wall clock; returns [seconds, calls], updated in
    place. Nested calls of the same function are counted once (the outermost)."""
    import functools
    import importlib

    module, _, qualname = spec.partition(":")
    *owners, name = qualname.split(".")
    owner = importlib.import_module(module)
    for part in owners:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    spent: list = [0.0, 0]
    depth = [0]

    @functools.wraps(original)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        depth[0] += 1
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            depth[0] -= 1
            if not depth[0]:
                spent[0] += time.perf_counter() - t
                spent[1] += 1

    setattr(owner, name, wrapper)
    return spent


if __name__ == "__main__":
    raise SystemExit(main())
