"""``dashboard.html``: one self-contained page (no network, no external assets) from the JSONL.

Rendered from ``templates/dashboard.html.j2``: per-recipe summary cards and the failures with their one-line
detail read without JavaScript; the matrix (one row per case × axes, one column per recipe, each cell the
item's status with its detail and numbers as a tooltip) is JSON data that ``templates/dashboard.js`` filters by
text and by status and shows 100 rows at a time, so 134,000 items stay a page a browser opens and filters at
once. The filter state and the page live in the URL fragment (``#q=conv&status=failing&page=2``), so a view can
be linked. Every string that comes from a
results file is HTML-escaped by Jinja2's autoescape, and the page's CSP runs only its own script: a
results artifact from a fork cannot inject markup. ``bti portal`` uses the same templates.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from harness.report.summary import by_recipe, fmt_num, headline
from harness.report.templating import render as render_page
from harness.results import Record, status_of
from harness.status import Status


def _tooltip(rec: Record) -> str:
    bits = [rec["status"] + (f" (triage: {rec['triage']})" if rec.get("triage") else "")]
    if rec.get("detail"):
        bits.append(str(rec["detail"])[:300])
    outs = rec.get("outputs") or []
    if outs:
        worst = max(outs, key=lambda o: float(o.get("max_abs") or 0) if not isinstance(o.get("max_abs"), str) else float("inf"))
        bits.append(f"max_abs {fmt_num(worst.get('max_abs'))}, sqnr {fmt_num(worst.get('sqnr_db'))} dB")
    part = rec.get("partition") or {}
    if part.get("total_nodes"):
        bits.append(f"delegated {part.get('delegated_nodes', 0)}/{part['total_nodes']} nodes")
    vela = part.get("vela")
    if isinstance(vela, dict) and vela:  # the Ethos-U compiler's estimates: a LOWERED item's numbers
        bits.append(f"vela: {fmt_num(vela.get('cycles_total'))} cycles, {fmt_num(vela.get('inference_time_ms'))} ms, "
                    f"SRAM {fmt_num(vela.get('sram_kib'))} KiB, flash {fmt_num(vela.get('flash_kib'))} KiB, "
                    f"{vela.get('npu_operators', '?')} NPU / {vela.get('cpu_operators', '?')} CPU ops")
    if rec.get("pte_bytes"):
        bits.append(f".pte {rec['pte_bytes']} bytes")
    acc = rec.get("accuracy")
    if isinstance(acc, dict) and acc:
        bits.append(", ".join(f"{k} {fmt_num(v, 4) if not isinstance(v, (bool, str)) else v}" for k, v in sorted(acc.items())))
    lat = rec.get("latency_ms") or {}
    if lat.get("median") is not None:
        bits.append(f"latency {fmt_num(lat['median'])} ms")
    return " · ".join(bits)


TIP_BUDGET = 8 << 20  # bytes of tooltip text for passing items, and again for the others: past it, the status alone
FAILURES_SHOWN = 1000  # rows of the failures table; results.csv and junit.xml hold every one


def _matrix(records: Iterable[Record], names: list[str]) -> dict[str, Any]:
    """The matrix as the page's data, in one pass holding one record at a time: per row its case × axes and per
    recipe ``[status index, tooltip]`` (or the index alone once the tooltip budget is spent)."""
    col = {name: i for i, name in enumerate(names)}
    statuses: dict[Status, int] = {}
    rows: dict[str, list[Any]] = {}
    spent = {True: 0, False: 0}
    dropped = 0
    for rec in records:
        status = status_of(rec)
        index = statuses.setdefault(status, len(statuses))
        tip = _tooltip(rec)
        passing = status.is_pass
        cell: Any = index
        size = _encoded(tip)
        if spent[passing] + size <= TIP_BUDGET:
            spent[passing] += size
            cell = [index, tip, str(rec.get("triage") or "")[:40]]  # whatever a hostile file holds there: text
        else:
            dropped += 1
        row = rows.setdefault(rec["id"].rsplit("@", 1)[0], [None] * len(names))
        if rec["recipe"] in col:
            row[col[rec["recipe"]]] = cell
    return {"statuses": [[s.value, s.group.css, " ".join(_tags(s))] for s in statuses],
            "rows": [[group, cells] for group, cells in sorted(rows.items())], "dropped": dropped}


def _encoded(text: str) -> int:
    """The bytes ``text`` takes in the page's JSON (``|tojson``: non-ASCII as ``\\uXXXX``, ``<>&'`` escaped too)."""
    return len(json.dumps(text)) + 5 * sum(text.count(c) for c in "<>&'")


def _tags(status: Status) -> list[str]:
    """The filter groups a status belongs to (the status select's values, and the status itself)."""
    tags = ["failing" if status.is_failure else "passing" if status.is_pass else "expected", status.value.lower()]
    return [*tags, "undelegated"] if status == Status.PASS_UNDELEGATED else tags


def render(header: dict[str, Any], records: Sequence[Record]) -> str:
    """The page, at any size: the matrix is data the page's script shows a page at a time (``dashboard.js``);
    the page holds every item's status, tooltips up to ``TIP_BUDGET`` twice, and the first ``FAILURES_SHOWN``
    failures. Bounded: about 2 × 8 MiB + 60 bytes per row + 4 per item."""
    summaries = by_recipe(header, records)
    recipes = list(summaries.values())
    names = [r.name for r in recipes]
    cards = [{"name": r.name, "unverified": None if r.verified else r.unverified_reason(), "passed": r.passed, "ran": r.ran,
              "pass_rate": r.pass_rate, "pass_text": r.pass_text(),
              "failed": r.failed, "counts_text": " · ".join(f"{n} {s.value}" for s, n in sorted(r.counts.items(), key=lambda kv: kv[0].value))}
             for r in recipes]
    fails: list[Record] = sorted((cast(Record, {"id": r["id"], "status": r["status"], "triage": r.get("triage"),
                                                "detail": str(r.get("detail") or "")[:500]})
                                  for r in records if status_of(r).is_failure), key=lambda r: str(r["id"]))
    return render_page("dashboard.html.j2", js="dashboard.js", title="bti results", header=header,
                       versions={"torch": "?", "executorch": "?", **(header.get("versions") or {})},
                       suites=", ".join(map(str, header.get("suites") or [])), recipes=cards, names=names,
                       data=_matrix(records, names), fails=fails[:FAILURES_SHOWN], nfails=len(fails),
                       headline=headline(header, fails, summaries))  # the failures are all it reads beside summaries
