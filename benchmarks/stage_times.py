"""Per-item stage times per recipe, medians over the items that reached each stage, from results files.

    .venv/bin/bti run -s ops -s models -r xnnpack -r arm-tosa-fp -r arm-tosa-int -r arm-ethos-u55 -r arm-ethos-u85 \\
        -r arm-vgf-fp -r coreml -r vulkan -j 2 --no-reuse -o out-stages
    .venv/bin/python benchmarks/stage_times.py out-stages/results.jsonl

Run the recipes to compare in one run: they then share the machine's load, so their ratios hold on a busy machine.
Prints a Markdown table (milliseconds; the item count is the items that ran any stage past export).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

STAGES = ("export", "quantize", "lower", "serialize", "load", "run")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+", type=Path)
    ns = ap.parse_args()
    times: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    items: dict[str, int] = defaultdict(int)
    statuses: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for path in ns.results:
        for line in path.read_text().splitlines()[1:]:
            rec = json.loads(line)
            stages = rec.get("stages") or {}
            if rec.get("kind") != "result" or not set(stages) - {"export"}:
                continue
            items[rec["recipe"]] += 1
            statuses[rec["recipe"]][rec["status"]] += 1
            for stage, seconds in stages.items():
                times[rec["recipe"]][stage].append(float(seconds) * 1000.0)
    print("| recipe | items | " + " | ".join(STAGES) + " | statuses |")
    print("|---|---:|" + "---:|" * len(STAGES) + "---|")
    for recipe in sorted(times):
        cells = [f"{statistics.median(times[recipe][s]):.1f}" if times[recipe].get(s) else "—" for s in STAGES]
        status = ", ".join(f"{n} {s}" for s, n in sorted(statuses[recipe].items(), key=lambda kv: -kv[1]))
        print(f"| `{recipe}` | {items[recipe]} | " + " | ".join(cells) + f" | {status} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
