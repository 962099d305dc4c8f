"""Prove the guarded speedups in harness/speedups/ change nothing: run a suite with and
without it and compare every item's .pte hash, status and output statistics.

    .venv/bin/python benchmarks/verify_speedups.py [--suite ops] [--recipe portable --recipe xnnpack]
    .venv/bin/python benchmarks/verify_speedups.py --int8 --suite executorch-upstream-ops \
        -k 'upstream.add.*' -k 'upstream.conv2d.*' ...     # the three XNNPACK int8 recipes

Prints the per-run wall time and the number of identical / differing items; exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KEYS = ("status", "pte_sha256", "pte_bytes", "outputs", "partition", "delegate_blobs")


def run(out: Path, suites: list[str], recipes: list[str], extra: list[str]) -> tuple[float, dict[str, dict]]:
    args = [sys.executable, "-m", "harness", "run", "-o", str(out), "--no-reuse", "--no-report", *extra]
    for s in suites:
        args += ["-s", s]
    for r in recipes:
        args += ["-r", r]
    t0 = time.perf_counter()
    subprocess.run(args, check=False, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()[1:]]
    return wall, {r["id"]: {k: r.get(k) for k in KEYS} for r in recs}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", action="append", default=None)
    ap.add_argument("--recipe", action="append", default=None)
    ap.add_argument("--int8", action="store_true", help="the XNNPACK int8 recipes (static per-channel, per-tensor, dynamic)")
    ap.add_argument("-k", dest="filters", action="append", default=[], help="bti run -k filters (repeatable)")
    ap.add_argument("-j", "--jobs", default="2")
    ns = ap.parse_args()
    suites = ns.suite or ["ops"]
    recipes = ns.recipe or (["xnnpack-int8-static-per-channel", "xnnpack-int8-static-per-tensor",
                             "xnnpack-int8-dynamic-per-channel"] if ns.int8 else ["portable", "xnnpack"])
    extra = ["-j", ns.jobs, *(a for f in ns.filters for a in ("-k", f))]
    with tempfile.TemporaryDirectory() as tmp:
        t_on, on = run(Path(tmp) / "on", suites, recipes, extra)
        t_off, off = run(Path(tmp) / "off", suites, recipes, [*extra, "--no-speedups"])
    same = [k for k in on if on[k] == off.get(k)]
    diff = sorted(set(on) ^ set(off) | {k for k in on if k in off and on[k] != off[k]})
    print(f"suites={','.join(suites)} recipes={','.join(recipes)} items={len(on)}")
    print(f"wall with speedups: {t_on:.1f} s   without: {t_off:.1f} s   ratio: {t_off / t_on:.2f}x")
    print(f"identical items (pte sha256, status, outputs, partition): {len(same)}/{len(on)}   differing: {len(diff)}")
    for k in diff[:20]:
        print("  DIFF", k)
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main())
