"""How ``bti report`` and ``bti merge`` scale with the number of records: a real run's records, replicated.

    .venv/bin/python benchmarks/report_scale.py                       # out/results.jsonl (``make run``) × 2, 20, 180
    .venv/bin/python benchmarks/report_scale.py --results R.jsonl --factors 1,10,100
    .venv/bin/python benchmarks/report_scale.py --profile 20          # cProfile of the report at ×20, top 25

Each factor writes a results file whose records are the real ones, each repeated with its case renamed
(``case~j``), so ids stay unique and every field a report reads is a real one. Then, each in a fresh process:
``bti report`` with every format plus ``--coverage --support --models``, and ``bti merge`` of the file cut into
4 shards. Printed per size: records, wall time, peak memory (the summed RSS of the command's processes, sampled), and
the time ratio to the size before, against the records' ratio: linear means the two ratios agree.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BTI = [sys.executable, "-m", "harness"]


def replicate(src: Path, dst: Path, factor: int, shards: int = 0) -> int:
    """Write ``factor`` copies of ``src``'s records into ``dst`` (or into ``shards`` files beside it)."""
    lines = src.read_text(encoding="utf-8").splitlines()
    header, recs = json.loads(lines[0]), [json.loads(x) for x in lines[1:] if x.strip()]
    outs = [dst] if not shards else [dst.with_name(f"{dst.stem}.shard{i}.jsonl") for i in range(shards)]
    handles = [p.open("w", encoding="utf-8") for p in outs]
    n = 0
    try:
        for i, fh in enumerate(handles):
            h = dict(header, shard=f"{i + 1}/{len(handles)}", run_id=f"{header.get('run_id', 'run')}-{i}") if shards else header
            fh.write(json.dumps(h) + "\n")
        for j in range(factor):
            for rec in recs:
                case = f"{rec['case']}~{j}" if j else rec["case"]
                new = dict(rec, case=case, id=rec["id"].replace(rec["case"], case, 1))
                handles[n % len(handles)].write(json.dumps(new) + "\n")
                n += 1
    finally:
        for fh in handles:
            fh.close()
    return n


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and the peak memory (GB) of one command: the RSS of its process and every child it forked (the
    JUnit writer runs beside the others), summed, sampled every 20 ms. Pages a fork shares count in each process, so
    the figure is an upper bound."""
    import psutil

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    top, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):  # a child that ended between the listing and the reading
            peak = max(peak, sum(p.memory_info().rss for p in [top, *top.children(recursive=True)]))
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd[2:])}: exit {proc.returncode}: {err.strip()[-500:]}")
    return wall, peak / 2**30


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=ROOT / "out" / "results.jsonl")
    ap.add_argument("--factors", default="2,20,180")
    ap.add_argument("--profile", type=int, default=0, help="profile the report at this factor instead")
    ap.add_argument("--browser", action="store_true", help="also time the largest dashboard in headless Chromium: "
                    "load, then the text and status filters and a page turn")
    args = ap.parse_args()
    if not args.results.is_file():
        raise SystemExit(f"{args.results}: no results; run `make run` first or pass --results")
    tmp = Path(tempfile.mkdtemp(prefix="bti-report-scale-"))
    try:
        if args.profile:
            profile(args.results, tmp, args.profile)
            return
        before: tuple[int, float, float] | None = None
        print(f"{'records':>9} {'report s':>9} {'GB':>5} {'merge s':>8} {'GB':>5}  time ratio vs records ratio")
        for factor in (int(f) for f in args.factors.split(",")):
            jsonl = tmp / f"x{factor}.jsonl"
            n = replicate(args.results, jsonl, factor)
            replicate(args.results, tmp / f"m{factor}.jsonl", factor, shards=4)
            rep, rep_gb = timed([*BTI, "report", str(jsonl), "-o", str(tmp / f"r{factor}"), "--coverage", "--support",
                                 "--models", "--quiet", "--format", "junit,md,csv,badge,html,opdiff"])
            shards = sorted(str(p) for p in tmp.glob(f"m{factor}.shard*.jsonl"))
            mrg, mrg_gb = timed([*BTI, "merge", *shards, "-o", str(tmp / f"merged{factor}.jsonl")])
            ratio = f"{rep / before[1]:.1f}× report, {mrg / before[2]:.1f}× merge vs {n / before[0]:.1f}×" if before else ""
            print(f"{n:>9,} {rep:>9.1f} {rep_gb:>5.2f} {mrg:>8.1f} {mrg_gb:>5.2f}  {ratio}", flush=True)
            before = (n, rep, mrg)
            dash = tmp / f"r{factor}" / "dashboard.html"
            print(f"{'':>9} dashboard {dash.stat().st_size / 2**20:.1f} MiB", flush=True)
            if args.browser and factor == max(int(f) for f in args.factors.split(",")):
                time_browser(dash, tmp / "profile")
            for p in tmp.iterdir():
                if p.name.startswith(("m", "r")) and p.is_file():
                    p.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def time_browser(page: Path, profile: Path) -> None:
    """Headless Chromium (tests/cdp.py): the page's load to its first drawn page, then each interaction, ms."""
    sys.path.insert(0, str(ROOT))
    from tests.cdp import Browser

    browser = Browser(profile)
    try:
        browser.goto(page.as_uri(), settle=0.0)  # the page's script runs before its load event
        load = browser.eval("performance.getEntriesByType('navigation')[0].loadEventEnd")
        steps = {"text 'conv'": "q.value='conv'; q.dispatchEvent(new Event('input'));",
                 "text ''": "q.value=''; q.dispatchEvent(new Event('input'));",
                 "status=undelegated": "s.value='undelegated'; s.dispatchEvent(new Event('change'));",
                 "status=failing": "s.value='failing'; s.dispatchEvent(new Event('change'));",
                 "status=all": "s.value='all'; s.dispatchEvent(new Event('change'));",
                 "next page": "document.getElementById('next').click();"}
        print(f"{'':>9} browser: parsed, data read, first page drawn: load event at {load:.0f} ms", flush=True)
        for name, js in steps.items():
            ms = browser.eval("(function(){var s=document.getElementById('status'), q=document.getElementById('q');"
                              f"var t=performance.now(); {js} return performance.now()-t;}})()")
            shown = browser.eval("document.getElementById('shown').textContent")
            print(f"{'':>9} browser: {name}: {ms:.0f} ms ({shown})", flush=True)
    finally:
        browser.close()


def profile(src: Path, tmp: Path, factor: int) -> None:
    import cProfile
    import pstats

    sys.path.insert(0, str(ROOT))
    from harness.cli import cli

    jsonl = tmp / "p.jsonl"
    print(f"{replicate(src, jsonl, factor):,} records")
    prof = cProfile.Profile()
    prof.enable()
    try:
        cli.main(["report", str(jsonl), "-o", str(tmp / "r"), "--coverage", "--support", "--models", "--quiet", "--format", "junit,md,csv,badge,html,opdiff"],
                 standalone_mode=False)
    finally:
        prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
