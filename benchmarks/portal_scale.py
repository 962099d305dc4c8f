"""How long ``bti portal`` takes on a large run: synthetic results (seeded), then the build, timed.

    .venv/bin/python benchmarks/portal_scale.py                    # 50,000 items: 16,667 cases × 3 recipes, 1 run
    .venv/bin/python benchmarks/portal_scale.py --cases 5000 --runs 10  # history: 10 daily runs
    .venv/bin/python benchmarks/portal_scale.py --runs 30 --stacks 2    # 30 runs alternating two version stacks

Each run's counts are then checked against the site: every column's cells are its newest run's JSONL statuses.

Prints the item count, the runs, the build time and the site's size (2 cores: one run of 50,000 items in 5.3 s,
2026-11-24; 30 runs over two stacks in 43.9 s with a 1.14 GB peak under ``/usr/bin/time -f %M``, 2026-11-26, where it
took 97.5 s and 7.0 GB before the portal held older records as their history fields: docs/portal.md). Synthetic
records carry what real ones do (outputs, stages, latency, partition, baseline ratio, a detail), in the mix of
statuses a sweep has.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RECIPES = ("portable", "xnnpack", "xnnpack-int8-static-per-channel")
STACKS = ({"torch": "2.14.1", "executorch": "1.5.1"}, {"torch": "2.13.0", "executorch": "1.4.1"})
STATUSES = ["PASS"] * 8 + ["FAIL_MISMATCH", "PASS_UNDELEGATED", "XFAIL", "SKIP", "FAIL_LOWER"]


def write_runs(out: Path, cases: int, runs: int, stacks: int = 1) -> None:
    rnd = random.Random(0)
    out.mkdir(parents=True, exist_ok=True)
    for d in range(runs):
        created = (datetime(2026, 1, 1, 3, tzinfo=UTC) + timedelta(days=d)).isoformat()  # a year of nightly runs fits
        header = {"kind": "header", "schema": 1, "run_id": f"run{d}", "created": created,
                  "versions": {**STACKS[d % stacks], "cpu": "bench host"}, "recipes": dict.fromkeys(RECIPES, "h"),
                  "suites": ["ops", "models"]}
        with (out / f"run{d}.jsonl").open("w") as fh:
            fh.write(json.dumps(header) + "\n")
            for i in range(cases):
                op = f"aten::op{i % 40}.default" if i % 10 else None
                case = f"op.op{i % 40}.c{i}" if op else f"model.m{i}"
                for r in RECIPES:
                    status = STATUSES[(i * 7 + d * (i % 3 == 0)) % len(STATUSES)] if i % 5 else "PASS"
                    fh.write(json.dumps({
                        "kind": "result", "schema": 1, "id": f"{case}[float32,static]@{r}", "case": case, "op": op,
                        "suite": "ops" if op else "models", "recipe": r, "backend": "executorch",
                        "axes": {"dtype": "float32", "shape": "static"}, "status": status, "detail": f"why {i}",
                        "outputs": [{"name": "output[0]", "max_abs": rnd.random() * 10 ** rnd.randint(-8, 0), "sqnr_db": rnd.uniform(10, 90)}],
                        "stages": {"export": 0.1, "lower": 0.3, "run": 0.01}, "latency_ms": {"median": rnd.random()},
                        "baseline": {"latency_ratio": rnd.uniform(0.2, 3)} if r != "portable" else {},
                        "partition": {"total_nodes": 10, "delegated_nodes": rnd.randint(0, 10)}}) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=16667)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--stacks", type=int, default=1, choices=(1, 2), help="version stacks the runs alternate between")
    ap.add_argument("--browser", action="store_true", help="also time the matrix's status filter in headless Chromium")
    args = ap.parse_args()
    from harness.report.portal import build

    tmp = Path(tempfile.mkdtemp(prefix="bti-portal-"))
    try:
        write_runs(tmp / "runs", args.cases, args.runs, args.stacks)
        t0 = time.perf_counter()
        site = build([tmp / "runs"], tmp / "site")
        wall = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in (tmp / "site").rglob("*") if p.is_file())
        print(f"portal: {site.items} items (newest per column), {site.runs} run(s), {site.columns} columns: {wall:.1f} s, "
              f"site {size / 2**20:.0f} MiB")
        check_counts(tmp / "runs", tmp / "site", args.runs, args.stacks)
        if args.browser:
            time_filter(tmp / "site", tmp / "profile")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def time_filter(site: Path, profile: Path) -> None:
    """The status filter over every row, in headless Chromium (tests/cdp.py): the median of five changes, ms."""
    from tests.cdp import Browser

    browser = Browser(profile)
    try:
        browser.goto(site.joinpath("index.html").as_uri(), settle=2.0)
        ms = []
        for want in ("failing", "all", "pass", "all", "xfail"):
            ms.append(browser.eval("(function(){var s=document.getElementById('status'); var t=performance.now(); s.value="
                                   f"'{want}'; s.dispatchEvent(new Event('change')); return performance.now()-t;}})()"))
        rows = browser.eval("document.getElementById('shown').textContent")
    finally:
        browser.close()
    print(f"browser: the status filter took {sorted(ms)[2]:.0f} ms (median of {len(ms)}; {rows})")


def check_counts(runs_dir: Path, site: Path, runs: int, stacks: int) -> None:
    """Each column's cells are exactly its newest run's statuses (by the JSONL), else exit 1."""
    from collections import Counter

    data = json.loads((site / "matrix.json").read_text())
    shown: dict[str, Counter[str]] = {c: Counter() for c in data["columns"]}
    for row in data["rows"]:
        for col, cell in zip(data["columns"], row[4], strict=True):
            if cell:
                shown[col][cell[0]] += 1
    for k in range(min(stacks, runs)):
        newest = max(d for d in range(runs) if d % stacks == k)
        want: dict[str, Counter[str]] = {r: Counter() for r in RECIPES}
        for line in (runs_dir / f"run{newest}.jsonl").read_text().splitlines()[1:]:
            rec = json.loads(line)
            want[rec["recipe"]][rec["status"]] += 1
        for recipe in RECIPES:
            (col,) = [c for c in shown if c.startswith(f"{recipe} @") and f"executorch {STACKS[k]['executorch']}" in c]
            if shown[col] != want[recipe]:
                raise SystemExit(f"portal_scale: column {col} shows {dict(shown[col])}, run{newest}.jsonl has {dict(want[recipe])}")
    print(f"counts: every column's cells equal its newest run's JSONL ({len(shown)} columns)")


if __name__ == "__main__":
    main()
