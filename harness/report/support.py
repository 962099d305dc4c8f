"""The support table: operator × recipe (device), the dtypes that pass, fail, are expected to fail or are skipped,
with the first failing sample. ``bti report --support`` writes ``support.md`` and ``support.csv`` (one row per
operator, recipe and dtype, for committing to a vendor's repository, as ggml's ``docs/ops/*.csv``).

Operators are the records' ``op`` (an OpInfo entry is ``opinfo:<name>``; a variant is part of the case id).
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from harness.report import safe
from harness.results import Record
from harness.status import Status

ORDER = ("fail", "xfail", "pass", "skip")


def _bucket(status: Status) -> str:
    if status is Status.XFAIL:
        return "xfail"
    if status.is_failure:
        return "fail"
    if status.is_pass:
        return "pass"
    return "skip"


def table(records: Sequence[Record]) -> dict[tuple[str, str], dict[str, Any]]:
    """(op, recipe) → {dtype: {"state", "items", "first_failure", "detail"}}: a dtype fails if any of its items fails,
    else passes if any passes, else is expected to fail, else is skipped."""
    cells: dict[tuple[str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for rec in records:
        op = str(rec.get("op") or rec.get("case"))
        axes = rec.get("axes")  # whatever a hostile file holds there: a mapping or nothing
        dtype = str(axes.get("dtype") if isinstance(axes, dict) else None)
        cell = cells[(op, str(rec.get("recipe")))].setdefault(dtype, {"state": "skip", "items": 0, "first_failure": None, "detail": ""})
        cell["items"] += 1
        bucket = _bucket(Status(rec["status"]))
        if ORDER.index(bucket) < ORDER.index(cell["state"]):
            cell["state"] = bucket
        if bucket == "fail" and cell["first_failure"] is None:
            cell["first_failure"], cell["detail"] = rec["id"], str(rec.get("detail") or "")[:200]
        elif cell["state"] == "skip" and bucket == "skip" and not cell["detail"]:
            cell["detail"] = str(rec.get("detail") or "")[:200]
    return dict(cells)


def render_csv(records: Sequence[Record]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["op", "recipe", "dtype", "state", "items", "first_failure", "detail"])
    for (op, recipe), dtypes in sorted(table(records).items()):
        for dtype, c in sorted(dtypes.items()):
            w.writerow([op, recipe, dtype, c["state"], c["items"], c["first_failure"] or "", c["detail"].replace("\n", " ")])
    return buf.getvalue()


def render_md(records: Sequence[Record]) -> str:
    cells = table(records)
    recipes = sorted({r for _, r in cells})
    ops = sorted({o for o, _ in cells})
    out = ["# Operator support", "",
           "Per operator and recipe: the dtypes that pass ✅, fail ❌ (with the first failing sample), are expected to "
           "fail ⚠️, or are skipped ⏭️ (for example, not listed by OpInfo for the device type).", "",
           "| op | " + " | ".join(safe.code(r) for r in recipes) + " |", "|---|" + "---|" * len(recipes)]
    for op in ops:
        row = [safe.code(op)]
        for recipe in recipes:
            by = cells.get((op, recipe), {})
            parts = []
            for state, mark in (("pass", "✅"), ("fail", "❌"), ("xfail", "⚠️"), ("skip", "⏭️")):
                names = sorted(d for d, c in by.items() if c["state"] == state)
                if names:
                    parts.append(f"{mark} {', '.join(names)}")
            first = next((c["first_failure"] for _, c in sorted(by.items()) if c["first_failure"]), None)
            if first:
                parts.append(f"first failure: {safe.code(first)}")
            row.append("<br>".join(parts) or "—")
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


__all__ = ["render_csv", "render_md", "table"]
