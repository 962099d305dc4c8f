"""Aggregations shared by every renderer (one place, so Markdown, JUnit, badges and the PR comment agree)."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from harness.env import LOAD_NOTE_STARTS
from harness.results import Record, as_float, status_of
from harness.status import Status
from harness.verdict import TRIAGE


@dataclass
class RecipeSummary:
    name: str
    counts: Counter[Status] = field(default_factory=Counter)
    unavailable: str | None = None
    detail: str = ""  # the first not-run item's detail (why nothing was verified, where that is so)
    delegating: bool = False  # a partitioner ran on some item: its passes are on the delegate or fell back to the CPU

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def passed(self) -> int:
        return sum(n for s, n in self.counts.items() if s.is_pass)

    @property
    def failed(self) -> int:
        return sum(n for s, n in self.counts.items() if s.is_failure)

    @property
    def ran(self) -> int:
        """Items that were attempted (``Status.did_not_run`` excluded)."""
        return sum(n for s, n in self.counts.items() if not s.did_not_run)

    @property
    def pass_rate(self) -> float:
        return 100.0 * self.passed / self.ran if self.ran else 0.0

    @property
    def fallback(self) -> int:
        """Passes where the partitioner took nothing: the program ran on the CPU (portable), not the delegate."""
        return self.counts[Status.PASS_UNDELEGATED]

    @property
    def verified(self) -> bool:
        """Whether any item ran and was judged: every item UNAVAILABLE, LOWERED, SKIP or BLOCKED verifies nothing."""
        return self.ran > 0

    @property
    def delegated(self) -> int | None:
        """Passes on the delegate; None for a recipe without a partitioner (portable, an eager device)."""
        return self.passed - self.fallback if self.delegating else None

    def pass_text(self) -> str:
        """``41 passed: 21 on the delegate, 20 fell back to the CPU`` (the second half only when some fell back)."""
        if not self.fallback:
            return f"{self.passed} passed"
        return f"{self.passed} passed: {self.passed - self.fallback} on the delegate, {self.fallback} fell back to the CPU"

    def unverified_reason(self) -> str:
        """Why nothing was verified: the recipe's unavailability, else its items' statuses and the first one's detail."""
        if self.unavailable:
            return f"unavailable: {self.unavailable}"
        if not self.total:
            return "no items"
        counts = ", ".join(f"{n} {st.value}" for st, n in sorted(self.counts.items(), key=lambda kv: -kv[1]))
        return f"{counts}{': ' + self.detail if self.detail else ''}"


def by_recipe(header: dict[str, Any], records: Iterable[Record]) -> dict[str, RecipeSummary]:
    out: dict[str, RecipeSummary] = {}
    raw = header.get("recipe_info")
    info: dict[str, Any] = raw if isinstance(raw, dict) else {}
    for name in header.get("recipes") or {}:
        entry = info.get(name)  # an untrusted header: an entry that is not a mapping says nothing
        out[name] = RecipeSummary(name, unavailable=entry.get("unavailable") if isinstance(entry, dict) else None)
    for rec in records:
        summary = out.setdefault(rec["recipe"], RecipeSummary(rec["recipe"]))
        status = status_of(rec)
        summary.counts[status] += 1
        part = rec.get("partition")
        if isinstance(part, dict) and part.get("partitioned"):
            summary.delegating = True
        if status.did_not_run and not summary.detail:
            summary.detail = str(rec.get("detail") or "")[:200]
    return out


def unverified(header: dict[str, Any], records: Iterable[Record]) -> list[RecipeSummary]:
    """The recipes of a run that verified nothing (every item UNAVAILABLE, LOWERED, SKIP or BLOCKED, or none)."""
    return [s for s in by_recipe(header, records).values() if not s.verified]


def headline(header: dict[str, Any], records: Iterable[Record], summaries: dict[str, RecipeSummary] | None = None) -> str:
    """The one-line verdict every report leads with: unexpected failures; else what verified nothing (never a
    green mark); else all passed or expected. ``summaries``: ``by_recipe``'s, where the caller has them already."""
    fails = failures(records)
    summaries = by_recipe(header, records) if summaries is None else summaries
    empty = [s for s in summaries.values() if not s.verified]
    nothing = "; ".join(f"{s.name}: {s.unverified_reason()}" for s in empty[:5]) + (" …" if len(empty) > 5 else "")
    if fails:
        return f"❌ {len(fails)} unexpected failure(s)" + (f" · ⚠️ nothing verified on {nothing}" if empty else "")
    if not summaries:
        return "⚠️ nothing verified (no items)"
    if len(empty) == len(summaries):
        return f"⚠️ nothing verified ({nothing})"
    if empty:
        return f"⚠️ nothing verified on {nothing}"
    return "✅ all items passed or were expected"


def failures(records: Iterable[Record]) -> list[Record]:
    """Unexpected outcomes, FLAKY included (it fails the run; reports also list it apart)."""
    return [r for r in records if status_of(r).is_failure]


def flaky(records: Iterable[Record]) -> list[Record]:
    return [r for r in records if status_of(r) is Status.FLAKY]


TRIAGE_ORDER = TRIAGE  # the hints in the order reports list them


def triage_counts(records: Iterable[Record]) -> dict[str, Counter[str]]:
    """Failures per triage hint, per recipe: {hint: Counter(recipe)} in ``TRIAGE_ORDER``."""
    out: dict[str, Counter[str]] = {}
    for rec in failures(records):
        hint = str(rec.get("triage") or "unknown")
        out.setdefault(hint, Counter())[rec["recipe"]] += 1
    return {k: out[k] for k in (*TRIAGE_ORDER, "unknown") if k in out}


def triage_line(records: Iterable[Record]) -> str:
    counts = triage_counts(records)
    return " · ".join(f"{sum(c.values())} {hint}" for hint, c in counts.items())


def blocking_ops(records: Iterable[Record]) -> list[tuple[str, int, list[str]]]:
    """Undelegated ops ranked by how many partitioned items they appear in: (op, items, recipes)."""
    items: Counter[str] = Counter()
    recipes: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        part = rec.get("partition") or {}
        if not part.get("partitioned"):
            continue
        for op in part.get("undelegated_ops") or {}:
            items[op] += 1
            recipes[op].add(rec["recipe"])
    return [(op, n, sorted(recipes[op])) for op, n in sorted(items.items(), key=lambda kv: (-kv[1], kv[0]))]


def worst_sqnr(records: Iterable[Record], limit: int = 10) -> list[tuple[float, Record]]:
    """Items with the lowest SQNR over their outputs (exact matches, SQNR = ∞, are left out)."""
    import heapq

    def scored() -> Iterator[tuple[float, Record]]:
        for rec in records:
            raw = [as_float(o.get("sqnr_db")) for o in rec.get("outputs") or [] if o.get("sqnr_db") is not None]
            vals = [v for v in raw if v is not None and not (math.isinf(v) and v > 0)]
            if vals:
                yield min(vals), rec

    # the lowest ``limit`` held, not every scored record
    return heapq.nsmallest(limit, scored(), key=lambda t: (t[0] if not math.isnan(t[0]) else -math.inf, t[1]["id"]))


def fmt_num(value: Any, digits: int = 3) -> str:
    try:
        v = as_float(value)
    except (TypeError, ValueError, OverflowError):  # a hostile file's list, dict or word where a number goes
        return "—" if not isinstance(value, str) else value[:40]
    if v is None:
        return "—"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if math.isnan(v):
        return "NaN"
    return f"{v:.{digits}g}"


def baseline_latency(records: Iterable[Record]) -> dict[str, tuple[int, float, float]]:
    """Per recipe, against the baseline: (items, median and p90 of the per-item latency ratios)."""
    import numpy as np

    ratios: dict[str, list[float]] = defaultdict(list)
    for rec in records:
        ratio = (rec.get("baseline") or {}).get("latency_ratio")
        if isinstance(ratio, (int, float)) and ratio > 0:
            ratios[rec["recipe"]].append(float(ratio))
    return {name: (len(v), float(np.median(v)), float(np.percentile(v, 90))) for name, v in sorted(ratios.items())}


def attempts_line(rec: Record) -> str:
    """``FAIL_MISMATCH → PASS``: the statuses of an item's attempts (whatever a hostile file holds there)."""
    attempts = rec.get("attempts")
    items = attempts if isinstance(attempts, list) else []
    return " → ".join(str(a.get("status", "?")) if isinstance(a, dict) else "?" for a in items)


# where a TIMEOUT's detail goes on to say what the item had of the machine (harness.env.load_note)
_LOAD_NOTE = re.compile(": (?:" + "|".join(map(re.escape, LOAD_NOTE_STARTS)) + ") .*", re.DOTALL)


def root_cause(rec: Record) -> str:
    """The key of a failure's root cause (``harness.causes.signature``): the record's own, or one made from its
    status and detail (a mismatch, a delegation failure), numbers blanked."""
    from harness.causes import signature

    key = (rec.get("error") or {}).get("signature")
    detail = str(rec.get("detail") or "")
    if rec.get("load"):  # a TIMEOUT's load note (harness.env.load_note) is the machine's state, not the cause
        detail = _LOAD_NOTE.sub("", detail)
    return str(key) if key else signature(str(rec.get("status")), detail)


def root_causes(fails: list[Record]) -> list[tuple[str, list[Record]]]:
    """Failures grouped by root cause, the largest group first: one upstream bug is one group across ops and recipes."""
    groups: dict[str, list[Record]] = {}
    for rec in fails:
        groups.setdefault(root_cause(rec), []).append(rec)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
