"""A results file judged again offline by the recipes' current rules: the unexpected items per recipe, without running
anything (a triage checks its new xfail rules against the records that motivated them, then runs them for real).

    .venv/bin/python benchmarks/rejudge.py out/results.jsonl

Each record's own failure (an XFAIL's expected status, any other failure's status) and detail go through
``load_recipe(recipe).xfail_rules(group, suite, delegated)`` and ``Rule.expects`` as ``harness.verdict`` applies them: a
failure some rule names is XFAIL, a pass that a rule lists is XPASS. SKIP rules, capabilities and FAIL_EXPORT (the
case's own) are taken as recorded, and a case source's own expectations (the zoo's known failures, OpInfo's) are not
consulted: for those suites, run again. Prints each unexpected item, then per recipe its statuses and unexpected count.

With ``--any-version``, an unexpected failure that a rule limited to other versions would name is printed with that
rule's ``versions:`` and reason (``also on …``): the candidates for widening a rule to another release, each to be
checked against its evidence (``benchmarks/mismatch_evidence.py``) before the rule is widened.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

EXPECTED = {"XFAIL", "PASS", "PASS_UNDELEGATED", "SKIP", "FAIL_EXPORT", "UNAVAILABLE", "LOWERED"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--any-version", action="store_true",
                    help="name the rule, limited to other versions, that an unexpected failure would match")
    ns = ap.parse_args()

    from harness.recipes import Recipe, load_recipe
    from harness.status import Status

    recipes: dict[str, Recipe] = {}
    counts: Counter[tuple[str, str]] = Counter()
    unexpected: Counter[str] = Counter()
    with open(ns.results, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if "status" not in r or "recipe" not in r:
                continue  # the header
            recipe = recipes.setdefault(r["recipe"], load_recipe(r["recipe"]))
            status = Status(r["status"])
            own = Status(r["xfail"]["status"]) if status is Status.XFAIL else Status.PASS if status is Status.XPASS else status
            part = r.get("partition") or {}
            delegated = None if not part.get("partitioned") else part.get("delegated_nodes", 0) > 0
            rules = recipe.xfail_rules(r["id"].rsplit("@", 1)[0], r["suite"], delegated)
            detail = r.get("detail") or ""
            if own.is_pass:
                now = "XPASS" if rules else own.value
            elif own.is_failure and own is not Status.FAIL_EXPORT:
                now = "XFAIL" if any(rule.expects(own, detail) for rule in rules) else own.value
            else:
                now = own.value
            counts[(r["recipe"], now)] += 1
            if now not in EXPECTED:
                unexpected[r["recipe"]] += 1
                print(f"unexpected: {now} {r['id']} {detail[:160]}")
                if ns.any_version and own.is_failure:
                    for rule in _elsewhere(recipe, r, delegated):
                        if rule.expects(own, detail):
                            print(f"  also on {dict(rule.versions)}: {rule.match} ({rule.reason[:120]})")
    for name in sorted({n for n, _ in counts}):
        statuses = ", ".join(f"{n} {s}" for (rn, s), n in sorted(counts.items(), key=lambda kv: -kv[1]) if rn == name)
        print(f"{name}: {unexpected[name]} unexpected ({statuses})")
    return 1 if unexpected else 0


def _elsewhere(recipe, r, delegated):  # type: ignore[no-untyped-def]
    """The recipe's version-limited xfail rules that would list this record if their ``versions:`` held."""
    import dataclasses

    key = r["id"].rsplit("@", 1)[0]
    return [rule for rule in recipe.xfail
            if rule.versions and dataclasses.replace(rule, versions=()).applies(key, r["suite"], delegated)]


if __name__ == "__main__":
    raise SystemExit(main())
