"""``dashboard.html``: one self-contained page (no network, no external assets) from the JSONL.

Rendered on the server side from ``templates/dashboard.html.j2``, so it reads without JavaScript:
per-recipe summary cards, the matrix (one row per case × axes, one column per recipe, each cell the
item's status with its detail and numbers as a tooltip), and the failures with their one-line detail.
``templates/dashboard.js`` adds filtering by text and by status; the filter state lives in the URL
fragment (``#q=conv&status=failing``), so a filtered view can be linked. Every string that comes from a
results file is HTML-escaped by Jinja2's autoescape, and the page's CSP runs only its own script: a
results artifact from a fork cannot inject markup. ``bti portal`` uses the same templates.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

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


def render(header: dict[str, Any], records: list[Record]) -> str:
    summaries = by_recipe(header, records)
    recipes = list(summaries.values())
    names = [r.name for r in recipes]
    grouped: dict[str, dict[str, Record]] = defaultdict(dict)
    for rec in records:
        grouped[rec["id"].rsplit("@", 1)[0]][rec["recipe"]] = rec
    rows = []
    for group in sorted(grouped):
        cells: list[dict[str, str] | None] = []
        tags: set[str] = set()
        for name in names:
            found = grouped[group].get(name)
            if found is None:
                cells.append(None)
                continue
            rec = found
            status = status_of(rec)
            tags.add("failing" if status.is_failure else "passing" if status.is_pass else "expected")
            if status == Status.PASS_UNDELEGATED:
                tags.add("undelegated")
            if rec.get("triage"):
                tags.add(f"triage-{rec['triage']}")
            tags.add(status.value.lower())
            cells.append({"cls": status.group.css, "tip": _tooltip(rec), "status": status.value})
        rows.append({"group": group, "cells": cells, "key": " ".join([group, *tags]).lower(), "tags": " ".join(sorted(tags))})
    cards = [{"name": r.name, "unverified": None if r.verified else r.unverified_reason(), "passed": r.passed, "ran": r.ran,
              "pass_rate": r.pass_rate, "pass_text": r.pass_text(),
              "failed": r.failed, "counts_text": " · ".join(f"{n} {s.value}" for s, n in sorted(r.counts.items(), key=lambda kv: kv[0].value))}
             for r in recipes]
    fails = sorted((r for r in records if status_of(r).is_failure), key=lambda r: r["id"])
    return render_page("dashboard.html.j2", js="dashboard.js", title="bti results", header=header,
                       versions={"torch": "?", "executorch": "?", **(header.get("versions") or {})},
                       suites=", ".join(map(str, header.get("suites") or [])), recipes=cards, names=names, rows=rows, fails=fails,
                       headline=headline(header, records, summaries))
