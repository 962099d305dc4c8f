"""The model zoo's figures from a sweep's results: its size, and per recipe the outcomes, the worker time, the peak
memory per worker and the slowest models. Prints them (Markdown); measures nothing itself.

    bti run -s zoo -r torch-cpu -r xnnpack -j 2 --repeats 1 --warmup 0 --no-reuse -o sweep
    python benchmarks/zoo_figures.py sweep/results.jsonl
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.results import read_latest  # noqa: E402
from harness.suites import zoo  # noqa: E402


def main(path: str) -> None:
    header, records = read_latest(Path(path))
    sizes = zoo.sizes()
    lists = Counter(m.list for m in zoo.MODELS)
    print(f"zoo: {len(zoo.MODELS)} rows ({', '.join(f'{k} {v}' for k, v in lists.items())}), {len(sizes)} buildable, "
          f"{sum(v['params'] for v in sizes.values()) / 1e9:.1f} B parameters")
    by_recipe: dict[str, list[dict]] = defaultdict(list)
    for rec in records:
        if str(rec.get("case", "")).startswith("zoo."):
            by_recipe[str(rec["recipe"])].append(rec)
    print("\n| recipe | items | outcomes | worker time | slowest | peak RSS per worker |\n|---|---:|---|---:|---|---:|")
    for recipe, recs in sorted(by_recipe.items()):
        counts = Counter(r["status"] for r in recs)
        ran = [r for r in recs if isinstance(r.get("duration_s"), (int, float))]
        seconds = sum(r["duration_s"] for r in ran)
        slow = sorted(ran, key=lambda r: -r["duration_s"])[:3]
        peak = max((r.get("peak_rss_mb") or 0 for r in recs), default=0)
        print(f"| {recipe} | {len(recs)} | {', '.join(f'{n} {s}' for s, n in counts.most_common())} | {seconds / 60:.1f} min | "
              + ", ".join(f"{r['case'].split('.', 2)[2]} {r['duration_s']:.0f} s" for r in slow) + f" | {peak / 1024:.1f} GB |")
    print("\nFailures and kills:")
    for rec in sorted(records, key=lambda r: r["id"]):
        if rec.get("status") not in ("PASS", "PASS_UNDELEGATED", "SKIP", "UNAVAILABLE", "XFAIL"):
            print(f"- {rec['id']}: {rec['status']}: {str(rec.get('detail') or '')[:160]}")
    print(f"\nrun: {header.get('run_id')} · {header.get('created')} · {' '.join(header.get('argv') or [])}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "out/results.jsonl")
