"""The model table: oota's ✓/✗ per accelerator, with the numbers oota lacks.

One row per model (the zoo's rows keep their list's names: TorchBench's, dynamo's), one column per recipe (in
``bti report --models``) or per portal column (a recipe on a machine with one stack: ``models.html``). A cell
holds the outcome (✅ passed, 🟡 passed undelegated, ❌ failed with its stage — ``❌ export`` is the model's failure,
before any backend — xfail, ⏭️ skipped, ⛔ unavailable), and where the model ran:

* its **agreement with the CPU reference**: token or top-1 agreement where the task has one, else the worst
  element-wise absolute error;
* its **latency ratio** to ``torch-cpu`` on the same machine and the same row (below 1: faster than eager CPU).

Under the table: each column's setup notes (the recipe's description and setup link, or why it is unavailable).
``models.csv`` holds the same cells, one line per model and column. Results text goes through
``harness.report.safe`` (Markdown) or Jinja's autoescape (the portal).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.report import safe
from harness.results import Record, as_float, status_of
from harness.status import Status

BASE_RECIPE = "torch-cpu"


@dataclass(frozen=True)
class Cell:
    status: str
    mark: str
    agreement: str  # "tokens 100%", "top-1 98%", "max|Δ| 3e-06" or ""
    ratio: float | None  # latency / torch-cpu's on the same machine
    detail: str
    link: str = ""

    @property
    def failing(self) -> bool:
        return Status(self.status).is_failure

    @property
    def text(self) -> str:
        figures = [f for f in (self.agreement, f"{self.ratio:.2g}× cpu" if self.ratio is not None else "") if f]
        return self.mark + (f" ({', '.join(figures)})" if figures else "")


PASSING = frozenset(s.value for s in Status if s.is_pass)  # a status a newer bti wrote counts as not passing


def _mark(st: Status) -> str:
    if st is Status.XFAIL:
        return "xfail"
    if st is Status.UNAVAILABLE:
        return "⛔"
    if st is Status.FAIL_EXPORT:
        return "❌ export"  # the model's failure: torch.export refused it, before any backend saw it
    if st.is_failure:
        return "❌ " + st.value.removeprefix("FAIL_").lower() if st.value.startswith("FAIL_") else "❌ " + st.value.lower()
    if st is Status.PASS:
        return "✅"
    if st.is_pass:
        return "🟡"
    return "⏭️"


def _latency(rec: Record) -> float | None:
    lat = rec.get("latency_ms")
    value = as_float(lat.get("median")) if isinstance(lat, dict) else None
    return value if value is not None and value > 0 and math.isfinite(value) else None


def _agreement(rec: Record) -> str:
    raw = rec.get("accuracy")
    acc: dict[str, Any] = raw if isinstance(raw, dict) else {}
    for key, name in (("next_token_agreement", "tokens"), ("top1_agreement", "top-1")):
        value = as_float(acc.get(key))
        if value is not None:
            return f"{name} {100 * value:.0f}%"
    worst = []
    for out in rec.get("outputs") or []:
        if isinstance(out, dict):
            v = as_float(out.get("max_abs"))
            if v is not None:
                worst.append(v)
    return f"max|Δ| {max(worst):.1g}" if worst else ""


def is_model(rec: Record) -> bool:
    """A whole model's record: one without an operator (the portal's and the README tables' rule)."""
    return not rec.get("op")


def cells(columns: list[tuple[str, str, list[Record]]], link: Callable[[str, Record], str] | None = None
          ) -> tuple[list[str], dict[str, dict[str, Cell]]]:
    """``columns``: (label, where, records); ``where`` names the machine and software stack, and a latency is divided
    by ``torch-cpu``'s of the same row in the same ``where`` only. Returns the model rows (by case id) and {row: {label: Cell}}. A row is a
    case (its dtype/shape variants are one model; the worst outcome stands for them)."""
    base: dict[tuple[str, str], float] = {}
    for _label, where, recs in columns:
        for rec in recs:
            if rec.get("recipe") == BASE_RECIPE and is_model(rec) and (lat := _latency(rec)) is not None:
                base[(where, str(rec.get("id")).rsplit("@", 1)[0])] = lat
    out: dict[str, dict[str, Cell]] = {}
    for label, where, recs in columns:
        for rec in recs:
            if not is_model(rec):
                continue
            row = str(rec.get("case") or rec["id"])
            st = status_of(rec)
            prev = out.setdefault(row, {}).get(label)
            if prev is not None and not (st.is_failure and not prev.failing):
                continue
            lat, ref = _latency(rec), base.get((where, str(rec.get("id")).rsplit("@", 1)[0]))
            ratio = lat / ref if lat is not None and ref and rec.get("recipe") != BASE_RECIPE else None
            ran = st.is_pass or st.is_failure or st is Status.XFAIL
            out[row][label] = Cell(st.value, _mark(st), _agreement(rec) if ran else "", ratio,
                                   str(rec.get("detail") or "")[:300], link(label, rec) if link else "")
    return sorted(out, key=lambda row: (row.lower(), row)), out  # by case id: a source's lists stay together


def setup_notes(info: dict[str, dict[str, Any]], labels: list[str]) -> list[str]:
    notes = []
    for label in labels:
        i = info.get(label) if isinstance(info, dict) else None
        i = i if isinstance(i, dict) else {}  # a results header is untrusted: a hostile one is ignored, never a traceback
        text = str((i.get("unavailable") and f"unavailable here: {i['unavailable']}") or i.get("description") or "")
        url = safe.md_url(i.get("setup"))
        notes.append(f"- {_name(label)}: {safe.inline(text, 400)}" + (f" ([setup]({url}))" if url else ""))
    return notes


LEGEND = ("✅ passed · 🟡 passed, not (fully) delegated · ❌ failed, with the stage (❌ export: torch.export refused the "
          "model, before any backend) · xfail: a known failure · ⏭️ skipped · ⛔ unavailable · —: not run. In brackets: "
          "agreement with the CPU reference (token or top-1 agreement, else the worst absolute error) and latency as a "
          f"multiple of `{BASE_RECIPE}`'s.")


def _name(text: str) -> str:
    """A model or recipe name in a cell: a code span, or escaped text when it holds ``<``/``>`` (a results file cannot
    write an HTML comment, such as a README's table marker, even inside a code span)."""
    return safe.inline(text, 120) if any(c in text for c in "<>") else safe.code(text, 120)


def _by_recipe(records: Sequence[Record]) -> tuple[list[str], list[str], dict[str, dict[str, Cell]]]:
    """One run's records as columns by recipe: the recipes, then ``cells``' rows and table."""
    mine = [r for r in records if is_model(r)]  # one pass; a sweep of operators holds none of them
    recipes = sorted({str(r.get("recipe")) for r in mine})
    return recipes, *cells([(r, "", [x for x in mine if x.get("recipe") == r]) for r in recipes])


def table_md(records: Sequence[Record], info: dict[str, dict[str, Any]] | None = None) -> str:
    """The table, its legend, the pass counts and each recipe's setup notes (``models.md``'s body; the README's
    ``bti:models`` block)."""
    recipes, rows, table = _by_recipe(records)
    if not rows:
        return "_No model results._"
    out = ["| model | " + " | ".join(_name(r) for r in recipes) + " |", "|---|" + "---|" * len(recipes)]
    for row in rows:
        out.append(f"| {_name(row)} | " + " | ".join(c.text if (c := table[row].get(r)) else "—" for r in recipes) + " |")
    passed = {r: sum(table[row][r].status in PASSING for row in rows if r in table[row]) for r in recipes}
    out += ["", LEGEND, "", "Passed: " + " · ".join(f"{_name(r)} {passed[r]}/{len(rows)}" for r in recipes), "",
            "Setup:", "", *setup_notes(info or {}, recipes)]
    return "\n".join(out)


def render_md(records: Sequence[Record], info: dict[str, dict[str, Any]] | None = None) -> str:
    return "\n".join(["# Models", "", "Per model and recipe.", "", table_md(records, info), ""])


def render_csv(records: Sequence[Record]) -> str:
    recipes, rows, table = _by_recipe(records)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["model", "recipe", "status", "agreement", "latency_ratio_to_cpu", "detail"])
    for row in rows:
        for r in recipes:
            if (c := table[row].get(r)) is not None:
                w.writerow([safe.csv_cell(x) for x in (row, r, c.status, c.agreement, "" if c.ratio is None else f"{c.ratio:.4g}",
                                                       c.detail.replace("\n", " "))])
    return buf.getvalue()


__all__ = ["Cell", "cells", "is_model", "render_csv", "render_md", "setup_notes"]
