"""The shipped matrix's outcomes per recipe, from one or more results files (later files replace a recipe's earlier
records, item by item): items, statuses, and the unexpected ones. Prints Markdown; measures nothing itself.

    bti run -s smoke -s ops -s models -r RECIPE … --no-reuse --allow-unverified -o before
    python benchmarks/matrix.py before/results.jsonl [after/results.jsonl]
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.results import read_latest, status_of  # noqa: E402


def main(paths: list[str]) -> None:
    items: dict[str, dict] = {}
    versions = []
    for path in paths:
        header, records = read_latest(Path(path))
        pk = header.get("packages") or {}
        versions.append(f"executorch {pk.get('executorch', '?')}, torch {pk.get('torch', '?')}")
        items.update({str(r["id"]): r for r in records})
    by_recipe: dict[str, Counter[str]] = defaultdict(Counter)
    unexpected: dict[str, int] = Counter()
    for rec in items.values():
        st = status_of(rec)
        by_recipe[str(rec["recipe"])][st.value] += 1
        if st.is_failure:
            unexpected[str(rec["recipe"])] += 1
    print(f"{len(items)} items ({'; '.join(sorted(set(versions)))})\n")
    print("| recipe | items | unexpected | statuses |\n|---|---:|---:|---|")
    for recipe in sorted(by_recipe):
        counts = by_recipe[recipe]
        text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        print(f"| `{recipe}` | {sum(counts.values())} | {unexpected[recipe]} | {text} |")
    print(f"| **all** | {len(items)} | {sum(unexpected.values())} | |")


if __name__ == "__main__":
    main(sys.argv[1:])
