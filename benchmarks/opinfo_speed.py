"""The OpInfo source's cost per item against its floor: a plain loop over the same samples.

    python benchmarks/opinfo_speed.py                 # opinfo-ci (34 entries), torch-cpu, 2 workers
    python benchmarks/opinfo_speed.py --suite opinfo  # every OpInfo entry of the installed torch

The floor builds each (entry, dtype, sample) as the suite does and runs the op twice on the CPU (the device and the
reference, for torch-cpu), comparing with torch.testing.assert_close: what a hand-written loop would do, with
neither isolation nor records. bti runs the same items with `bti run -r torch-cpu --no-reuse --no-report`.
Both run in this one invocation, one after the other, so the ratio is measured on the same machine load.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def floor(suite: str) -> tuple[int, float]:
    import torch

    from harness.cases.case import Axes
    from harness.suites import load_suites, opinfo

    cases = load_suites([suite])
    start = time.perf_counter()
    done = 0
    for case in cases:
        for dtype in case.dtypes:
            try:
                built = opinfo.build(case, Axes(dtype, "static"), 0)
                with torch.no_grad():
                    a = built.module(*[t.clone() for t in built.run])
                    b = built.module(*[t.clone() for t in built.run])
                torch.testing.assert_close(a, b, equal_nan=True, check_dtype=False)
            except Exception:
                pass  # a failure costs what it costs; the floor counts it like a pass
            done += 1
    return done, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="opinfo-ci")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="Keep bti's results in this directory (default: a temporary one).")
    args = ap.parse_args()
    n_floor, t_floor = floor(args.suite)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = str(args.keep or scratch)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "harness", "run", "-s", args.suite, "-r", "torch-cpu", "--no-reuse",
                               "--no-report", "-j", str(args.jobs), "-o", tmp], capture_output=True, text=True)
        t_bti = time.perf_counter() - start
        lines = (Path(tmp) / "results.jsonl").read_text().splitlines() if (Path(tmp) / "results.jsonl").exists() else []
    n_bti = max(len(lines) - 1, 0)
    print(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "")
    print(f"suite {args.suite}: floor {n_floor} items in {t_floor:.1f} s ({1000 * t_floor / max(n_floor, 1):.2f} ms/item, one process)")
    print(f"bti run -r torch-cpu -j {args.jobs}: {n_bti} items in {t_bti:.1f} s wall "
          f"({1000 * t_bti * args.jobs / max(n_bti, 1):.2f} ms/item per worker)")
    print(f"overhead per item over the floor: {1000 * (t_bti * args.jobs / max(n_bti, 1) - t_floor / max(n_floor, 1)):.2f} ms")


if __name__ == "__main__":
    main()
