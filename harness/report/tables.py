"""Markdown support tables for a README, from results (torch-free), as oota's bot and llama.cpp's ``ops.md`` do.

* the accelerator × model table: one row per model, one column per recipe, ✅ / ❌ / xfail with agreement with the CPU
  reference and latency relative to torch-cpu, and each recipe's setup notes (``harness.report.models``);
* the op × backend table: one row per operator, ✅ every item of the op passed delegated, 🟡 some
  passed (or ran, undelegated), ❌ none passed.

``bti report RESULTS --readme-table README.md`` replaces the text between each pair of markers it finds
(``<!-- bti:models:begin -->`` … ``<!-- bti:models:end -->``, likewise ``bti:ops``) and nothing else. Every
name from the results goes through ``harness.report.safe``, so a results file cannot write a marker,
markup or a mention into the README.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.report import safe
from harness.results import Record, atomic_write_text, status_of
from harness.status import Status

MARKERS = {"models": ("<!-- bti:models:begin -->", "<!-- bti:models:end -->"),
           "ops": ("<!-- bti:ops:begin -->", "<!-- bti:ops:end -->")}


def _table(records: Sequence[Record], head: str, key: Callable[[Record], str | None], cell: Callable[[list[Status]], str],
           empty: str, legend: str) -> str:
    """One row per ``key`` (records whose key is None are left out), one column per recipe; ``cell`` renders the
    statuses of a row's items on a recipe ("—" when it has none)."""
    recipes = sorted({str(r.get("recipe")) for r in records})
    cells: dict[str, dict[str, list[Status]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        k = key(rec)
        if k is not None:
            cells[k][str(rec.get("recipe"))].append(status_of(rec))
    if not cells:
        return empty
    lines = [f"| {head} | " + " | ".join(safe.inline(r, 60) for r in recipes) + " |", "|---|" + "---|" * len(recipes)]
    for name in sorted(cells):
        row = [cell(sts) if (sts := cells[name].get(r)) else "—" for r in recipes]
        lines.append(f"| {safe.inline(name, 80)} | " + " | ".join(row) + " |")
    return "\n".join([*lines, "", legend])


def _op_cell(sts: list[Status]) -> str:
    ran = [s for s in sts if not s.did_not_run]
    if not ran:
        return "—"
    full = sum(s is Status.PASS for s in ran)
    passed = sum(s.is_pass for s in ran)
    return f"{'✅' if full == len(ran) else '🟡' if passed else '❌'} {passed}/{len(ran)}"


def models_table(records: Sequence[Record], info: dict[str, Any] | None = None) -> str:
    """The model table of ``bti report --models`` (``harness.report.models``): outcomes with agreement with the CPU
    reference and latency relative to torch-cpu, and each recipe's setup notes."""
    from harness.report import models

    return models.table_md(records, info)


def ops_table(records: Sequence[Record]) -> str:
    return _table(records, "op", lambda r: str(r["op"]) if r.get("op") else None, _op_cell, "_No operator results._",
                  "✅ every item passed, delegated · 🟡 some passed or ran undelegated · ❌ none passed · —: not run (passed/items).")


def replace_between(text: str, begin: str, end: str, body: str) -> tuple[str, bool]:
    """``text`` with what lies between the first ``begin`` and the next ``end`` replaced by ``body``."""
    # markers count only on a line of their own (a marker quoted in prose or in `code` is left alone)
    m = re.search(r"(?m)^[ \t]*" + re.escape(begin) + r"[ \t]*\r?$.*?^[ \t]*" + re.escape(end) + r"[ \t]*(?=\r?$)", text, re.S)
    if m is None:
        return text, False
    nl = "\r\n" if "\r\n" in text else "\n"
    return text[: m.start()] + begin + nl + body.replace("\n", nl) + nl + end + text[m.end():], True


def update_readme(path: Path, records: Sequence[Record], info: dict[str, Any] | None = None) -> list[str]:
    """Fill every marker pair ``path`` holds; returns the tables written. One line (exit 2) when the file
    cannot be read or holds no marker pair."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:  # CRLF stays CRLF
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the README: {getattr(exc, 'strerror', None) or exc}") from None
    done = []
    for name, render in (("models", lambda recs: models_table(recs, info)), ("ops", ops_table)):
        begin, end = MARKERS[name]
        text, found = replace_between(text, begin, end, render(records))
        if found:
            done.append(name)
    if not done:
        pairs = "; ".join(f"{b} … {e}" for b, e in MARKERS.values())
        raise UserError(f"{path}: no table markers; add a pair where a table goes: {pairs}")
    try:
        atomic_write_text(path, text)
    except OSError as exc:
        raise UserError(f"{path}: cannot write the README: {exc.strerror}") from None
    return done
