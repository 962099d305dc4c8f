"""A results file judged again offline by the recipes' current rules: the unexpected items per recipe, without running
anything (a triage checks its new xfail rules against the records that motivated them, then runs them for real).

    .venv/bin/python benchmarks/rejudge.py out/results.jsonl

Each record's own failure (an XFAIL's expected status, any other failure's status), message and crash stage go through
the rules by the verdict's own decision (``harness.verdict.held``): the recipe's xfail rules that list the item, else the case source's
own (the zoo's known failures, OpInfo's ``expectedFailure``); a failure some rule names is XFAIL, a pass that a rule
lists is XPASS, and so is a LOWERED item under a rule that expects only what lowering finds (a stale rule). The
message is the record's own detail (the ``[xfail: …]``/``[unexpected: …]`` the verdict added taken off) and its error
message, as the verdict matched them. SKIP rules, capabilities and FAIL_EXPORT (the case's own) are
taken as recorded. A rule limited to a kind of machine (``when:``) is judged by the facts the run's header recorded
(``recipe_info.<recipe>.facts``, and a record's own ``facts`` for the case source's rules: the zoo's), and one
limited to versions (``versions:``) by the packages it recorded (its ``packages``: a run on executorch 1.4.1 judged
from a 1.5.1 install keeps its 1.4 rules), not by this machine's and install's, unless ``--this-machine``. Prints each
unexpected item, then per recipe its statuses and unexpected count.

With ``--any-version``, an unexpected failure that a recipe's or its case source's (the zoo's) rule limited to
other versions would name is printed with that rule's ``versions:`` and reason (``also on …``): the candidates for
widening a rule to another release, each to be checked against its evidence (``benchmarks/mismatch_evidence.py``)
before the rule is widened.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

EXPECTED = {"XFAIL", "PASS", "PASS_UNDELEGATED", "SKIP", "FAIL_EXPORT", "UNAVAILABLE", "LOWERED"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--any-version", action="store_true",
                    help="name the rule, limited to other versions, that an unexpected failure would match")
    ap.add_argument("--this-machine", action="store_true",
                    help="judge `when:` and `versions:` rules by this machine's facts and installed packages, not by "
                         "those the run's header recorded")
    ns = ap.parse_args()

    from harness.recipes import Recipe, load_recipe
    from harness.results import lowered_xpass
    from harness.status import Stage, Status
    from harness.verdict import held, lowest_sqnr_db

    stage_names = {s.value for s in Stage}

    recipes: dict[str, Recipe] = {}
    cases = _Cases()
    counts: Counter[tuple[str, str]] = Counter()
    recorded: dict[str, Any] = {}
    unexpected: Counter[str] = Counter()
    judged_by_record = False  # whether `when:` rules read ``recorded`` (a header's facts, and records' own)
    with open(ns.results, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r.get("kind") == "header":
                if not ns.this_machine:
                    recorded = _use_run_facts(r)
                    _use_run_versions(r)
                    judged_by_record = True
                continue
            if not ns.this_machine and not judged_by_record:  # no header (a file cut from a run): the records' own facts
                recorded, judged_by_record = _use_run_facts({}), True  # still decide, and a fact none names is asked here
            if not ns.this_machine and isinstance(r.get("facts"), dict):  # the zoo's rules' facts, as the record kept them
                recorded.update(r["facts"])
            if "status" not in r or "recipe" not in r:
                continue
            if r["recipe"] not in recipes:
                recipes[r["recipe"]] = load_recipe(r["recipe"])
            recipe = recipes[r["recipe"]]
            status = Status(r["status"])
            own = (Status(r["xfail"]["status"]) if status is Status.XFAIL else Status.LOWERED if lowered_xpass(r)
                   else Status.PASS if status is Status.XPASS else status)
            part = r.get("partition") or {}
            delegated = None if not part.get("partitioned") else part.get("delegated_nodes", 0) > 0
            rules = recipe.xfail_rules(r["id"].rsplit("@", 1)[0], r["suite"], delegated) or cases.source_rules(r, recipe)
            message, died_in = own_message(r), (Stage(r["died_in"]) if r.get("died_in") in stage_names else None)
            db = lowest_sqnr_db(r.get("outputs") or [], recipe.quantized, message)
            now = own.value if own is Status.FAIL_EXPORT else held(rules, own, message, died_in, db)[0].value
            counts[(r["recipe"], now)] += 1
            if now not in EXPECTED:
                unexpected[r["recipe"]] += 1
                print(f"unexpected: {now} {r['id']} {message[:160]!r}")
                unsaid = [rule.stage.value for rule in rules if died_in is None and rule.stage is not None
                          and rule.expects(own, message, rule.stage, db)]
                if unsaid:  # written before records said where a crash came: the rule's stage cannot be checked
                    print(f"  the record does not say the stage it died in; the rule for a crash in {unsaid[0]} would hold it")
                if ns.any_version and own.is_failure:
                    for rule in [*_elsewhere(recipe, r, delegated), *cases.elsewhere(r, recipe)]:
                        if rule.expects(own, message, died_in, db):
                            print(f"  also on {dict(rule.versions)}: {rule.match} ({rule.reason[:120]})")
    for name in sorted({n for n, _ in counts}):
        statuses = ", ".join(f"{n} {s}" for (rn, s), n in sorted(counts.items(), key=lambda kv: -kv[1]) if rn == name)
        print(f"{name}: {unexpected[name]} unexpected ({statuses})")
    return 1 if unexpected else 0


def own_message(r: dict[str, Any]) -> str:
    """The message the verdict matched the rules against: the detail as the stage wrote it (without the verdict's
    ``STATUS: … [xfail: reason]`` or ``… [unexpected: …]`` wrapping) and, on a new line, the error's message."""
    detail = r.get("detail") or ""
    info = r.get("xfail") or {}
    if r["status"] == "XFAIL" and info.get("status"):
        # the verdict wrote prefix (a pair's "pair b (...): ") + "STATUS: " + detail + " [xfail: reason]"
        head, tail = f"{info['status']}: ", f" [xfail: {info.get('reason', '')}]"
        at = detail.find(head)
        if at >= 0 and detail.endswith(tail):
            detail = detail[:at] + detail[at + len(head):len(detail) - len(tail)]
    elif info.get("expects"):
        tail = f" [unexpected: the xfail rule expects {info['expects']}: {info.get('reason', '')}]"
        if detail.endswith(tail):
            detail = detail[:len(detail) - len(tail)]
    error = r.get("error") or {}
    return f"{detail}\n{error['message']}" if error.get("message") else detail


def _use_run_facts(header: dict[str, Any]) -> dict[str, Any]:
    """Judge ``when:`` rules by the machine facts the run recorded (a run from a machine of another kind is judged as
    it was there); a fact the header does not name (a run written before a rule named it) is asked here, and said so
    on stderr once: a run from a machine of another kind is then judged by this one's."""
    import sys

    import harness.facts

    recorded: dict[str, Any] = {}
    for info in (header.get("recipe_info") or {}).values():
        recorded.update(info.get("facts") or {})
    here, warned = harness.facts.fact, set()

    def fact(name: str) -> Any:
        if name in recorded:
            return recorded[name]
        value = here(name)
        if name not in warned:
            warned.add(name)
            print(f"rejudge: the run did not record the machine fact {name}: judged by this machine's ({value})", file=sys.stderr)
        return value

    harness.facts.fact = fact  # type: ignore[assignment]
    return recorded


def _use_run_versions(header: dict[str, Any]) -> None:
    """Judge ``versions:`` rules by the packages the run recorded (``packages``, as ``bti run`` writes them; "not
    installed" is absent); a package the header does not name is read from this install, and said so on stderr once."""
    import sys

    import harness.versions

    recorded = {k: None if v == "not installed" else v for k, v in (header.get("packages") or {}).items() if isinstance(v, str)}
    here, warned = harness.versions.cached_version, set()

    def version(package: str) -> str | None:
        if package in recorded:
            return recorded[package]
        if package not in warned:
            warned.add(package)
            print(f"rejudge: the run did not record the package {package}: judged by this install's ({here(package)})",
                  file=sys.stderr)
        return here(package)

    harness.versions.cached_version = version  # type: ignore[assignment]


class _Cases:
    """The records' cases, each suite discovered once, for the case source's own rules (``verdict._source_xfail``)."""

    def __init__(self) -> None:
        self.by_suite: dict[str, dict[str, Any]] = {}

    def source_rules(self, r: dict[str, Any], recipe: Any) -> list[Any]:
        from harness.verdict import _source_xfail

        item = self._item(r)
        return [] if item is None else _source_xfail(item, recipe)

    def elsewhere(self, r: dict[str, Any], recipe: Any) -> list[Any]:
        """The case source's version-limited rules (the zoo's) that would list this record if their ``versions:`` held."""
        from harness.suites import case_judgement

        item = self._item(r)
        if item is None:
            return []
        return _limited_elsewhere(case_judgement(item.case, item.axes.dtype, recipe).rules, item.group, item.case.suite)

    def _item(self, r: dict[str, Any]) -> Any:
        from harness.cases.case import Axes, Item
        from harness.suites import load_suites

        suite = r["suite"]
        if suite not in self.by_suite:
            try:
                self.by_suite[suite] = {c.id: c for c in load_suites([suite], check=False)}
            except Exception as exc:  # a suite file that moved: its records are judged by the recipe alone
                print(f"note: suite {suite} not loaded ({exc}); its case rules are not consulted")
                self.by_suite[suite] = {}
        case = self.by_suite[suite].get(r.get("case"))
        axes = r.get("axes") or {}
        if case is None or not axes:
            return None
        return Item(case, r["recipe"], Axes(axes["dtype"], axes["shape"]))


def _elsewhere(recipe, r, delegated):  # type: ignore[no-untyped-def]
    """The recipe's version-limited xfail rules that would list this record if their ``versions:`` held."""
    return _limited_elsewhere(recipe.xfail, r["id"].rsplit("@", 1)[0], r["suite"], delegated)


def _limited_elsewhere(rules, key, suite, delegated=None):  # type: ignore[no-untyped-def]
    """Those of ``rules`` limited by ``versions:`` that would list ``key`` if their versions held."""
    import dataclasses

    return [rule for rule in rules
            if rule.versions and dataclasses.replace(rule, versions=()).applies(key, suite, delegated)]


def _main() -> int:
    """``main``, with bad input (an unreadable or malformed results file, a recipe or rules file that does not load) as
    one line and exit 2, as bti's own commands give it."""
    import sys

    from harness.errors import UserError

    try:
        return main()
    except UserError as exc:  # bti's own family of bad input, rendered as bti renders it
        print(f"rejudge: {exc.one_line()}", file=sys.stderr)
        return 2
    except (OSError, json.JSONDecodeError) as exc:
        print(f"rejudge: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(_main())
