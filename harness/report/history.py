"""What the runs of one column say over time (torch-free): pass rate, regressions between consecutive
runs, how long each failing item has failed (against the 72-hour rule), and flips at the same versions
(an item whose outcome changed at least twice across runs of the same software, recipe and case spec: it went
and came back).

The failure age is measured from the first run of the item's current failing streak to the newest run
in the portal's inputs (not the wall clock, so a portal rebuilt later says the same), and names the
software of that first failing run and of the last run where the item passed.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from harness.report.runs import Column, Run
from harness.results import Record, status_of

FIX_WITHIN = timedelta(hours=72)  # the out-of-tree accelerator proposal: a broken test is fixed within 72 hours


@dataclass
class Point:
    run: Run
    passed: int
    ran: int
    failed: int

    @property
    def rate(self) -> float:
        return 100.0 * self.passed / self.ran if self.ran else 0.0


@dataclass
class Age:
    row: str
    since: Run  # the first run of the current failing streak
    last_pass: Run | None
    age: timedelta
    streak: int  # consecutive failing runs

    @property
    def overdue(self) -> bool:
        return self.age > FIX_WITHIN

    def describe(self) -> str:
        text = f"failing for {human(self.age)} ({self.streak} run{'s' * (self.streak != 1)}), since {self.since.under_test}"
        if self.last_pass is not None:
            text += f"; last passed with {self.last_pass.under_test}"
        return text


@dataclass
class ColumnHistory:
    column: Column
    points: list[Point] = field(default_factory=list)
    # (previous run, run, rows that went passing → failing, rows that went failing → passing), oldest first
    changes: list[tuple[Run, Run, list[str], list[str]]] = field(default_factory=list)
    ages: dict[str, Age] = field(default_factory=dict)  # rows whose newest record fails
    flaky: dict[str, list[str]] = field(default_factory=dict)  # row -> the statuses it flipped between

    @property
    def overdue(self) -> list[Age]:
        return sorted((a for a in self.ages.values() if a.overdue), key=lambda a: -a.age)


def human(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    if hours < 1:
        return f"{max(0, round(delta.total_seconds() / 60))} min"
    if hours < 48:
        return f"{hours:.0f} h"
    return f"{hours / 24:.0f} days"


def _outcome(rec: Record | None) -> str:
    """``pass``, ``fail`` or ``other`` (skipped, unavailable, expected failures, absent)."""
    return "other" if rec is None else status_of(rec).group.outcome


def latest(runs: list[tuple[Run, dict[str, Record]]]) -> dict[str, tuple[Run, Record]]:
    """Each row's newest record in a column, with its run: runs of different suites or subsets add up, a newer
    run of the same item supersedes an older one."""
    out: dict[str, tuple[Run, Record]] = {}
    for run, recs in runs:
        for row, rec in recs.items():
            out[row] = (run, rec)
    return out


def column_history(column: Column, runs: list[tuple[Run, dict[str, Record]]], now: datetime) -> ColumnHistory:
    h = ColumnHistory(column)
    for run, recs in runs:
        st = [status_of(r) for r in recs.values()]
        h.points.append(Point(run, sum(s.is_pass for s in st), sum(not s.did_not_run for s in st),
                              sum(s.is_failure for s in st)))
    # a regression or a fix: an item's outcome against its own previous pass or fail in the column, wherever that
    # was (runs of other suites or subsets in between neither hide nor fake one)
    last: dict[str, str] = {}
    for i, (run, recs) in enumerate(runs):
        now_out = {r: _outcome(rec) for r, rec in recs.items()}
        if i:
            broke = sorted(r for r, o in now_out.items() if o == "fail" and last.get(r) == "pass")
            fixed = sorted(r for r, o in now_out.items() if o == "pass" and last.get(r) == "fail")
            h.changes.append((runs[i - 1][0], run, broke, fixed))
        last.update({r: o for r, o in now_out.items() if o != "other"})
    for row, (newest, rec) in latest(runs).items():  # a run of other suites does not hide an item's failure
        if _outcome(rec) != "fail":
            continue
        since, streak, last_pass = newest, 0, None
        for run, recs in reversed(runs):
            outcome = _outcome(recs.get(row))
            if outcome == "fail":
                since, streak = run, streak + 1
            elif outcome == "pass":
                last_pass = run
                break
            # skipped or absent in a run: neither ends nor extends the streak
        h.ages[row] = Age(row, since, last_pass, max(now - since.created, timedelta(0)), streak)
    # a flip counts only between records of the same software, the same recipe (its hash: a vendor's recipe file can
    # change while the versions do not) and the same case spec; runs are oldest first
    same: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for run, recs in runs:
        hashes = run.header.get("recipes") or {}
        for row, rec in recs.items():
            # as JSON: the hashes come from results files and may be any JSON value, hashable or not
            key = json.dumps([run.versions_key, hashes.get(str(rec.get("recipe"))), rec.get("spec_hash")])
            same[(row, key)].append(rec)
    for (row, _), group in same.items():
        seq = [o for o in map(_outcome, group) if o != "other"]
        if sum(a != b for a, b in itertools.pairwise(seq)) >= 2:  # it went and came back: one change alone is a break
            h.flaky[row] = sorted(set(h.flaky.get(row, [])) | {str(r["status"]) for r in group})
    return h


def summary(h: ColumnHistory) -> dict[str, Any]:
    """The JSON the portal keeps per column (history.json)."""
    return {
        "column": h.column.key,
        "points": [{"run_id": p.run.run_id, "created": p.run.created.isoformat(), "under_test": p.run.under_test,
                    "passed": p.passed, "ran": p.ran, "failed": p.failed, "rate": round(p.rate, 2)} for p in h.points],
        "regressions": [{"from": a.run_id, "to": b.run_id, "broke": broke, "fixed": fixed} for a, b, broke, fixed in h.changes],
        "failing": {row: {"since": a.since.run_id, "since_created": a.since.created.isoformat(), "hours": round(a.age.total_seconds() / 3600, 1),
                          "overdue": a.overdue, "streak": a.streak} for row, a in sorted(h.ages.items())},
        "flaky": h.flaky,
    }
