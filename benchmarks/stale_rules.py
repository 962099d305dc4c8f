"""Which xfail rules no longer hold on the recipes that only lower here: runs, on those recipes, just the items a rule
expects to fail before the run (export, quantize, lower, serialize, the delegation check), so each stale rule shows as
an XPASS (``harness.verdict._apply_xfail``) without running every item. On a machine with each recipe's runtime the
items run as usual, and the rules are held to the run instead.

    .venv/bin/python benchmarks/stale_rules.py [-s SUITE ...] [-r RECIPE ...] -o OUT [--list] [-- BTI-RUN-FLAGS ...]

Defaults: the periodic workflow's suites without the zoo (whose rows take minutes each: run them with ``bti run -s
zoo``, or here with ``-s zoo -- -j 2 --worker-memory 9``), on the five recipes that lower here without running
(Ethos-U55, Ethos-U85, VGF, Core ML, Vulkan). Prints the count per recipe, then runs ``bti run`` on those items, with
``-j 1`` and any flags after ``--`` (``--list`` prints their ids instead); the exit code is bti's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SUITES = ["smoke", "ops", "models", "core-ops", "models-ci"]
LOWERED_HERE = ["arm-ethos-u55", "arm-ethos-u85", "arm-vgf-fp", "coreml", "vulkan"]


def items(suites: list[str], recipes: list[str]) -> list[str]:
    """The ids of the items some rule expects to fail only at stages a LOWERED item has passed."""
    from harness.recipes import load_recipe
    from harness.runner.matrix import expand
    from harness.suites import load_suites
    from harness.verdict import _source_xfail

    cases, out = load_suites(suites), []
    for name in recipes:
        recipe = load_recipe(name)
        for item in expand(cases, [recipe]):
            rules = recipe.xfail_rules(item.group, item.case.suite, None) or _source_xfail(item, recipe)
            if any(rule.stale_if_lowered for rule in rules):
                out.append(item.id)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-s", "--suite", action="append", help=f"default: {' '.join(SUITES)}")
    parser.add_argument("-r", "--recipe", action="append", help=f"default: {' '.join(LOWERED_HERE)}")
    parser.add_argument("-o", "--out-dir", default="out-stale")
    parser.add_argument("--list", action="store_true", help="print the item ids, run nothing")
    parser.add_argument("run_flags", nargs="*", metavar="-- BTI-RUN-FLAGS", help="passed to bti run, after its own")
    args = parser.parse_args()
    suites, recipes = args.suite or SUITES, args.recipe or LOWERED_HERE
    ids = items(suites, recipes)
    for recipe, n in sorted(Counter(i.rsplit("@", 1)[1] for i in ids).items()):
        print(f"{recipe}: {n} items under rules that expect a failure before the run", file=sys.stderr)
    if args.list or not ids:
        print("\n".join(ids))
        return 0
    argv = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", "run"]
    for flag, values in (("-s", suites), ("-r", recipes)):
        argv += [x for v in values for x in (flag, v)]
    argv += ["-j", "1", "--no-reuse", "--allow-unverified", "--no-report", "-o", args.out_dir, *args.run_flags]
    for item_id in ids:
        argv += ["-k", item_id.replace("[", "[[]")]  # an id's axes are a glob's character class
    return subprocess.call(argv, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
