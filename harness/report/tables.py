"""Markdown support tables for a README, from results (torch-free), as oota's bot and llama.cpp's ``ops.md`` do.

* the accelerator × model table: one row per model, one column per recipe, ✅ / ❌ / xfail;
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
from pathlib import Path

from harness.errors import UserError
from harness.report import safe
from harness.results import Record, atomic_write_text, status_of
from harness.status import Status

MARKERS = {"models": ("<!-- bti:models:begin -->", "<!-- bti:models:end -->"),
           "ops": ("<!-- bti:ops:begin -->", "<!-- bti:ops:end -->")}


def _symbol(status: Status) -> str:
    if status is Status.XFAIL:
        return "xfail"
    if status.is_failure:
        return "❌"
    if status.is_pass:
        return "✅" if status is Status.PASS else "🟡"
    return "—"


def models_table(records: list[Record]) -> str:
    recipes = sorted({str(r.get("recipe")) for r in records})
    cells: dict[str, dict[str, list[Status]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        if rec.get("op"):
            continue
        cells[str(rec.get("case") or rec["id"])][str(rec.get("recipe"))].append(status_of(rec))
    if not cells:
        return "_No model results._"
    lines = ["| model | " + " | ".join(safe.inline(r, 60) for r in recipes) + " |", "|---|" + "---|" * len(recipes)]
    for model in sorted(cells):
        row = []
        for r in recipes:
            sts = cells[model].get(r)
            if not sts:
                row.append("—")
                continue
            worst = next((s for s in sts if s.is_failure), None) or next((s for s in sts if s is Status.XFAIL), None) or sts[0]
            row.append(_symbol(worst) + (f" {sum(s.is_pass for s in sts)}/{len(sts)}" if len(sts) > 1 else ""))
        lines.append(f"| {safe.inline(model, 80)} | " + " | ".join(row) + " |")
    lines.append("")
    lines.append("✅ passed · 🟡 passed, not (fully) delegated · ❌ failed · xfail: a known failure · —: not run. "
                 "With several dtype/shape variants: passed/total.")
    return "\n".join(lines)


def ops_table(records: list[Record]) -> str:
    recipes = sorted({str(r.get("recipe")) for r in records})
    cells: dict[str, dict[str, list[Status]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        if rec.get("op"):
            cells[str(rec["op"])][str(rec.get("recipe"))].append(status_of(rec))
    if not cells:
        return "_No operator results._"
    lines = ["| op | " + " | ".join(safe.inline(r, 60) for r in recipes) + " |", "|---|" + "---|" * len(recipes)]
    for op in sorted(cells):
        row = []
        for r in recipes:
            sts = [s for s in cells[op].get(r, []) if s not in (Status.SKIP, Status.UNAVAILABLE, Status.BLOCKED)]
            if not sts:
                row.append("—")
                continue
            full = sum(s is Status.PASS for s in sts)
            passed = sum(s.is_pass and s is not Status.XFAIL for s in sts)
            mark = "✅" if full == len(sts) else "🟡" if passed else "❌"
            row.append(f"{mark} {passed}/{len(sts)}")
        lines.append(f"| {safe.inline(op, 80)} | " + " | ".join(row) + " |")
    lines.append("")
    lines.append("✅ every item passed, delegated · 🟡 some passed or ran undelegated · ❌ none passed · —: not run (passed/items).")
    return "\n".join(lines)


def replace_between(text: str, begin: str, end: str, body: str) -> tuple[str, bool]:
    """``text`` with what lies between the first ``begin`` and the next ``end`` replaced by ``body``."""
    # markers count only on a line of their own (a marker quoted in prose or in `code` is left alone)
    m = re.search(r"(?m)^[ \t]*" + re.escape(begin) + r"[ \t]*\r?$.*?^[ \t]*" + re.escape(end) + r"[ \t]*(?=\r?$)", text, re.S)
    if m is None:
        return text, False
    nl = "\r\n" if "\r\n" in text else "\n"
    return text[: m.start()] + begin + nl + body.replace("\n", nl) + nl + end + text[m.end():], True


def update_readme(path: Path, records: list[Record]) -> list[str]:
    """Fill every marker pair ``path`` holds; returns the tables written. One line (exit 2) when the file
    cannot be read or holds no marker pair."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:  # CRLF stays CRLF
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the README: {getattr(exc, 'strerror', None) or exc}") from None
    done = []
    for name, render in (("models", models_table), ("ops", ops_table)):
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
