"""The zoo's share of the weekly sweep's shards (the Saturday sweep shards the operator and model suites with it), as
bti balances them before any duration is recorded: each shard's estimated load (hours) over the periodic workflow's
recipes, judged by each row's cost per recipe (``costs``: measured seconds, or the row's measured base times the
recipe's factor), for the balance made with those costs and, side by side, the balance made with one figure per row on
every recipe (as before 2026-11-29). Estimates only: as good as ``zoo_sizes.json``'s measurements. Measures nothing.

    python -m harness.suites.zoo --sizes --costs sweep/results.jsonl   # per-recipe seconds from a sweep, repeatable
    python benchmarks/zoo_shards.py [--shards N]   # default: the Saturday sweep's count
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.cases.case import Axes, Item  # noqa: E402
from harness.runner.matrix import shards  # noqa: E402
from harness.suites import case_cost, zoo  # noqa: E402

WORKFLOW = ROOT / ".github" / "workflows" / "periodic.yml"


def weekly_plan() -> tuple[list[str], list[str], int, int]:
    """The periodic workflow's Saturday sweep (cron ``47 4 * * 6``): its suites, its default recipes, its shard count and
    its job limit in seconds, read from the workflow's own ``with:`` (``tests/test_zoo.py`` holds the plan to it)."""
    import yaml

    sweep = yaml.safe_load(WORKFLOW.read_text())["jobs"]["sweep"]["with"]

    def saturday(key: str) -> str:
        found = re.search(r"'47 4 \* \* 6' && '?([^' ]+)'?", str(sweep[key]))
        if not found:
            raise SystemExit(f"{WORKFLOW}: no Saturday value for {key}")
        return found.group(1)

    recipes = re.search(r"inputs\.recipes \|\| '([^']+)'", str(sweep["recipes"]))
    if not recipes:
        raise SystemExit(f"{WORKFLOW}: no default recipes list")
    return (saturday("suites").split(","), recipes.group(1).split(","), int(saturday("shards")),
            60 * int(saturday("timeout-minutes")))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shards", type=int, help="default: the Saturday sweep's")
    args = parser.parse_args()
    _, recipes, planned, _ = weekly_plan()
    args.shards, cases = args.shards or planned, zoo.zoo_cases()
    one_figure = [dataclasses.replace(c, spec={k: v for k, v in c.spec.items() if k != "costs"}) for c in cases]
    print(f"{len(cases)} rows x {len(recipes)} recipes over {args.shards} shards; recipe factors: "
          f"{zoo.recipe_factors(zoo.sizes()) or 'none measured'}")
    print("| estimate | largest shard (h) | smallest (h) | all (h) |\n|---|---:|---:|---:|")
    order, axes = {c.id: c for c in cases}, Axes("float32", "static")
    for name, rows in (("balanced per recipe (costs)", cases), ("balanced by one figure per row", one_figure)):
        # either balance judged by the per-recipe estimate: what its shards would take
        groups = [[Item(c, r, axes) for r in recipes] for c in rows]
        hours = sorted((sum(case_cost(order[it.case.id], it.recipe) for g in part for it in g) / 3600
                        for part in shards(groups, args.shards)), reverse=True)
        print(f"| {name} | {hours[0]:.2f} | {hours[-1]:.2f} | {sum(hours):.1f} |")


if __name__ == "__main__":
    main()
