"""What the judge's extra references (fp64, the quantized program) cost `make run`: the default job at HEAD and at an
earlier commit (before harness/judge.py), alternated in one session so both share the machine's load.

    .venv/bin/python benchmarks/judge_cost.py [--ref 3696793] [--rounds 2] [-- extra bti run arguments]

Each round runs `python -m harness run --no-reuse` (the default suites on portable and xnnpack: what `make run`
runs) from a `git worktree` of REF, then from this checkout, with the same venv. Prints each wall time, the ratio of
the medians, and the summed `compare` stage seconds of each side (where the references are computed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(tree: Path, out: Path, extra: list[str]) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "--no-reuse", "-o", str(out), *extra], cwd=tree,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        sys.exit(f"bti run in {tree} exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()[1:]]
    return wall, sum(float((r.get("stages") or {}).get("compare", 0.0)) for r in recs), len(recs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default="3696793", help="The commit to compare with (default: before harness/judge.py).")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("extra", nargs="*", help="More `bti run` arguments (after --).")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bti-judge-cost-") as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "worktree", "add", "--detach", str(old), ns.ref], cwd=ROOT, check=True, capture_output=True)
        try:
            walls: dict[str, list[float]] = {"before": [], "after": []}
            compare: dict[str, float] = {}
            for i in range(ns.rounds):
                for side, tree in (("before", old), ("after", ROOT)):
                    wall, cmp_s, n = _run(tree, Path(tmp) / f"{side}-{i}", ns.extra)
                    walls[side].append(wall)
                    compare[side] = cmp_s
                    print(f"round {i + 1} {side:6s}: {wall:6.1f} s wall, {n} items, compare stage {cmp_s:.2f} s in total", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, capture_output=True)
    before, after = statistics.median(walls["before"]), statistics.median(walls["after"])
    print(f"median wall: before {before:.1f} s, after {after:.1f} s: after / before = {after / before:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
