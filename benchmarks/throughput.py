"""Sweep throughput: the upstream ExecuTorch backend suite vs bti on the same cases, bti cold vs
warm cache on the starter op suite, the floor, harness overhead and peak RSS. One run (or ``--repeat``), one table.

    .venv/bin/python benchmarks/throughput.py            # everything (about 11 minutes on 2 cores)
    .venv/bin/python benchmarks/throughput.py --upstream-files abs,add,conv2d   # a subset of the upstream files
    .venv/bin/python benchmarks/throughput.py --skip-upstream
    .venv/bin/python benchmarks/throughput.py --flows int8 --upstream-files add,mul,conv2d,linear,relu,sigmoid,cat,permute \
        --skip-ops    # the int8 flows (static per-channel, per-tensor, dynamic) side by side, one table
    ... --repeat 3    # upstream and bti alternate three times per flow; medians (for a machine whose speed drifts)

The upstream comparison runs the whole operator suite of the executorch wheel
(``executorch/backends/test/suite/operators``, every ``test_*.py``) with ``pytest -n 2 -m flow_xnnpack``,
and bti on the same (model, inputs) pairs: ``bti run -s executorch-upstream-ops -r xnnpack -j 2``.

The floor is the summed in-process cost of the unavoidable work of every executed item (build the
module and inputs, eager reference, torch.export — once per group — then quantize, lower,
serialize, load, run, compare), as timed inside the workers, divided by the worker count, plus the
one-time lazy initialisation the first lowering in any process pays (XNNPACK's pattern graphs and
the like; bti does it once in the parent before forking, ``harness.stages.warm_up``, timed here in a
separate process). Overhead is wall time above the floor: process start, imports, IPC, result
writing, garbage collection, reports.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bti(args: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env={**os.environ, **(env or {})},
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()[1:]]


def floor_seconds(recs: list[dict], workers: int) -> float:
    total, seen_groups = 0.0, set()
    for r in recs:
        if r.get("cached") or r["status"] in ("SKIP", "UNAVAILABLE"):
            continue
        stages = dict(r.get("stages") or {})
        group = r["id"].rsplit("@", 1)[0]
        export = stages.pop("export", 0.0)
        if group not in seen_groups:  # build + reference + export happen once per group
            total += export
            seen_groups.add(group)
        total += sum(stages.values())
    return total / workers


@functools.cache  # once per recipe: the ops floor and the upstream floor share xnnpack's
def warm_up_seconds(recipe: str) -> float:
    """The one-time initialisation cost, timed the way `bti run` does it (after the warm imports)."""
    code = ("import time, sys; from harness.recipes import load_recipe; from harness.runner.run import warm_imports; "
            "from harness.stages import warm_up; r = [load_recipe(sys.argv[1])]; warm_imports(r, True); "
            "t = time.perf_counter(); warm_up(r); print(time.perf_counter() - t)")
    res = subprocess.run([sys.executable, "-c", code, recipe], cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return float(res.stdout.strip().splitlines()[-1])


# upstream flow (its pytest marker is flow_<name>) -> the bti recipe of the same flow
FLOWS = {
    "xnnpack": "xnnpack",
    "xnnpack_static_int8_per_channel": "xnnpack-int8-static-per-channel",
    "xnnpack_static_int8_per_tensor": "xnnpack-int8-static-per-tensor",
    "xnnpack_dynamic_int8_per_channel": "xnnpack-int8-dynamic-per-channel",
}
INT8 = [f for f in FLOWS if "int8" in f]


def upstream(files: list[str] | None, jobs: int, flow: str = "xnnpack") -> tuple[int, float]:
    import importlib.util

    spec = importlib.util.find_spec("executorch.backends.test.suite.operators")
    assert spec and spec.submodule_search_locations, "executorch's backend test suite is not installed"
    suite = Path(next(iter(spec.submodule_search_locations)))
    paths = [str(suite / f"test_{f}.py") for f in files] if files else [str(suite)]
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "pytest", "-n", str(jobs), "-q", "-p", "no:cacheprovider", "-m", f"flow_{flow}",
                          "--rootdir", str(suite.parent), *paths], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    tail = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else res.stderr[-300:]
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|error)", tail)}
    executed = counts.get("passed", 0) + counts.get("failed", 0)
    print(f"  upstream pytest: {tail}", flush=True)
    return executed, wall


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--suite", default="ops")
    ap.add_argument("--recipe", default="xnnpack")
    ap.add_argument("--skip-upstream", action="store_true")
    ap.add_argument("--upstream-files", default="all", help="comma-separated operator file names (test_<name>.py), or all")
    ap.add_argument("--flows", default="xnnpack", help=f"upstream flows to compare, comma-separated; int8 stands for the three int8 flows ({', '.join(FLOWS)})")
    ap.add_argument("--skip-ops", action="store_true", help="only the upstream comparison (no cold/warm/floor on --suite)")
    ap.add_argument("--repeat", type=lambda v: max(1, int(v)), default=1,
                    help="run upstream and bti this many times, alternating, per flow; report medians (a noisy machine)")
    ns = ap.parse_args()
    flows = [] if ns.skip_upstream else list(dict.fromkeys(f for name in ns.flows.split(",") for f in (INT8 if name == "int8" else [name])))
    unknown = [f or repr(f) for f in flows if f not in FLOWS]
    if unknown:
        print(f"throughput.py: unknown flow {', '.join(unknown)} (known: int8, {', '.join(FLOWS)})", file=sys.stderr)
        return 2
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        files = None if ns.upstream_files == "all" else ns.upstream_files.split(",")
        up_recs: list[dict] = []
        wall = 0.0
        programs = 0
        for flow in flows:
            recipe = FLOWS[flow]
            filters = [a for f in files or [] for a in ("-k", f"upstream.{f}.*")]
            out = t / f"up-{flow}"
            # the unit is one lowered-and-run program (an upstream test may run several as subtests); with
            # --repeat, upstream and bti alternate, so each pair ran on the machine in the same state
            pairs = []
            for _ in range(ns.repeat):
                n_up, wall_up = upstream(files, ns.jobs, flow)
                wall = bti(["run", "-s", "executorch-upstream-ops", "-r", recipe, *filters, "-j", str(ns.jobs), "--no-reuse",
                            "--no-report", "-o", str(out)])
                pairs.append((wall_up, wall))
            wall_up, wall = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
            up_recs = [r for r in records(out / "results.jsonl") if r["status"] not in ("SKIP", "UNAVAILABLE")]
            programs = len(up_recs)
            quantize = [r["stages"]["quantize"] for r in up_recs if "quantize" in (r.get("stages") or {})]
            floor_up = floor_seconds(up_recs, ns.jobs) + warm_up_seconds(recipe)
            med = f" (median of {len(pairs)})" if len(pairs) > 1 else ""
            rows.append((f"upstream suite, flow {flow}", f"{60 * programs / wall_up:.1f}",
                         f"{programs} programs ({n_up} pytest tests) in {wall_up:.0f} s{med}: pytest -n {ns.jobs} -m flow_{flow} "
                         + (f"operators/test_{{{','.join(files)}}}.py" if files else "operators/")))
            rows.append((f"bti, same cases, {recipe} (cold)", f"{60 * programs / wall:.1f}",
                         f"{programs} items in {wall:.1f} s{med}: bti run -s executorch-upstream-ops -r {recipe} "
                         + ("-k 'upstream.<file>.*' " if files else "") + f"-j {ns.jobs} --no-reuse"))
            ratios = sorted(up / mine for up, mine in pairs)
            rows.append(("  ratio bti / upstream", f"{statistics.median(ratios):.1f}x",
                         "same cases, same flow, both with 2 workers" + (
                             f"; the median of the ratios of {len(pairs)} alternating pairs: " + ", ".join(f"{u:.0f} s / {b:.1f} s = {u / b:.2f}x"
                                                                                     for u, b in pairs)
                             if len(pairs) > 1 else "")))
            if quantize:
                rows.append(("  quantize stage per item (s)", f"{sum(quantize) / len(quantize):.3f}",
                             f"{len(quantize)} items, {sum(quantize):.1f} s in all"))
            rows.append((f"  floor ({recipe})", f"{60 * programs / floor_up:.1f}",
                         f"{floor_up:.1f} s; wall {wall:.1f} s; overhead {100 * (wall - floor_up) / floor_up:.0f}% of the floor"))
        if ns.skip_ops:
            return _print(rows)
        common = ["run", "-s", ns.suite, "-r", ns.recipe, "-j", str(ns.jobs)]
        wall_cold = bti([*common, "--no-reuse", "-o", str(t / "cold")])
        cold = records(t / "cold" / "results.jsonl")
        executed = [r for r in cold if r["status"] not in ("SKIP", "UNAVAILABLE")]
        rows.append((f"bti cold ({ns.suite} on {ns.recipe})", f"{60 * len(executed) / wall_cold:.1f}",
                     f"{len(executed)} items in {wall_cold:.1f} s: bti run -s {ns.suite} -r {ns.recipe} -j {ns.jobs} --no-reuse"))
        cache = {"BTI_CACHE_DIR": str(t / "cache")}
        bti([*common, "--reuse", "-o", str(t / "fill")], env=cache)
        wall_warm = bti([*common, "--reuse", "-o", str(t / "warm")], env=cache)
        warm = records(t / "warm" / "results.jsonl")
        reused = sum(bool(r.get("cached")) for r in warm)
        rows.append(("bti warm cache (same command, unchanged)", f"{60 * len(warm) / wall_warm:.1f}",
                     f"{reused}/{len(warm)} reused in {wall_warm:.1f} s ({wall_cold / wall_warm:.0f}x faster than cold): add --reuse"))
        warm_up = warm_up_seconds(ns.recipe)
        floor = floor_seconds(cold, ns.jobs) + warm_up
        rows.append((f"floor ({ns.suite} on {ns.recipe})", f"{60 * len(executed) / floor:.1f}",
                     f"{floor:.1f} s (in-worker work / {ns.jobs} + {warm_up:.1f} s one-time warm-up); wall {wall_cold:.1f} s; "
                     f"overhead {100 * (wall_cold - floor) / floor:.0f}% of the floor"))
        peaks: dict[int, float] = {}
        for r in cold:
            if r.get("worker_pid"):
                peaks[r["worker_pid"]] = max(peaks.get(r["worker_pid"], 0.0), r.get("peak_rss_mb") or 0.0)
        rows.append(("peak RSS per worker (MiB)", f"{max(peaks.values()):.0f}", "max over workers: " + ", ".join(f"{v:.0f}" for v in peaks.values())))
    return _print(rows)


def _print(rows: list[tuple[str, str, str]]) -> int:
    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure'.ljust(width)} | items/min | detail")
    for name, value, detail in rows:
        print(f"{name.ljust(width)} | {value:>9} | {detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
