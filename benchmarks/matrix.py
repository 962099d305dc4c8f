"""The shipped matrix's outcomes per recipe, from one or more results files (later files replace a recipe's earlier
records, item by item): items, statuses, the unexpected ones, and apart from them the case's own failures
(FAIL_EXPORT: the eager model or torch.export failed, before any backend), with the cases whose FAIL_EXPORT is not on
every recipe alike (a backend-specific export failure is not the case's own). Prints Markdown; measures nothing itself.

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
    own: dict[str, int] = Counter()
    export_by_item: dict[str, set[str]] = defaultdict(set)  # item id without its recipe -> recipes where it failed to export
    seen_by_item: dict[str, set[str]] = defaultdict(set)  # ... -> recipes that ran it
    for rec in items.values():
        st = status_of(rec)
        recipe = str(rec["recipe"])
        by_recipe[recipe][st.value] += 1
        key = str(rec["id"]).rsplit("@", 1)[0]
        if not st.did_not_run:  # a recipe that skips the item (its dtypes) says nothing about whose failure it is
            seen_by_item[key].add(recipe)
        if st.value == "FAIL_EXPORT":
            own[recipe] += 1
            export_by_item[key].add(recipe)
        elif st.is_failure:
            unexpected[recipe] += 1
    print(f"{len(items)} items ({'; '.join(sorted(set(versions)))})\n")
    print("| recipe | items | unexpected | the case's own (FAIL_EXPORT) | statuses |\n|---|---:|---:|---:|---|")
    for recipe in sorted(by_recipe):
        counts = by_recipe[recipe]
        text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        print(f"| `{recipe}` | {sum(counts.values())} | {unexpected[recipe]} | {own[recipe]} | {text} |")
    print(f"| **all** | {len(items)} | {sum(unexpected.values())} | {sum(own.values())} | |")
    uneven = sorted(item for item, recipes in export_by_item.items() if recipes != seen_by_item[item])
    if uneven:
        print(f"\nFAIL_EXPORT on some recipes only ({len(uneven)}: not the case's own, triage them as failures):\n")
        for item in uneven[:40]:
            print(f"- `{item}`: {', '.join(sorted(export_by_item[item]))} of {', '.join(sorted(seen_by_item[item]))}")


if __name__ == "__main__":
    main(sys.argv[1:])
