"""What the runs of one column say over time (torch-free; ``store.Store.history`` works it out): pass rate,
regressions between consecutive runs, how long each failing item has failed (against the 72-hour rule), and flips at
the same versions (an item whose outcome changed at least twice across runs of the same software, recipe and case
spec: it went and came back).

The failure age is measured from the first run of the item's current failing streak to the column's newest run (not
the wall clock, so a portal rebuilt later says the same), and names the
software of that first failing run and of the last run where the item passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from harness.report.runs import Column, Run

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
