"""``dashboard.html``: one self-contained page (no network, no external assets) from the JSONL.

Rendered on the server side, so it reads without JavaScript: per-recipe summary cards, the matrix
(one row per case × axes, one column per recipe, each cell the item's status with its detail and
numbers as a tooltip), and the failures with their one-line detail. A few lines of JavaScript add
filtering by text and by status; the filter state lives in the URL fragment
(``#q=conv&status=failing``), so a filtered view can be linked. Every string that comes from a
results file is HTML-escaped: a results artifact from a fork cannot inject markup.
"""

from __future__ import annotations

import html
from collections import defaultdict
from typing import Any

from harness.report.summary import by_recipe, fmt_num
from harness.results import Record, status_of
from harness.status import Status

_CLASS = {Status.PASS: "pass", Status.PASS_UNDELEGATED: "undel", Status.XFAIL: "xfail", Status.SKIP: "skip",
          Status.UNAVAILABLE: "skip", Status.XPASS: "fail"}
_SCRIPT = """
(function () {
  var q = document.getElementById('q'), st = document.getElementById('status');
  var rows = Array.prototype.slice.call(document.querySelectorAll('#matrix tbody tr'));
  var shown = document.getElementById('shown');
  function fromHash() {
    var params = new URLSearchParams(location.hash.slice(1));
    q.value = params.get('q') || ''; st.value = params.get('status') || 'all';
  }
  function apply() {
    var text = q.value.toLowerCase(), want = st.value, n = 0;
    rows.forEach(function (tr) {
      var ok = (!text || tr.dataset.key.indexOf(text) >= 0) &&
               (want === 'all' || (' ' + tr.dataset.tags + ' ').indexOf(' ' + want + ' ') >= 0);
      tr.hidden = !ok; if (ok) { n++; }
    });
    shown.textContent = n + ' of ' + rows.length + ' rows shown';
  }
  function update() {
    var params = new URLSearchParams();
    if (q.value) { params.set('q', q.value); }
    if (st.value !== 'all') { params.set('status', st.value); }
    history.replaceState(null, '', '#' + params.toString()); apply();
  }
  q.addEventListener('input', update); st.addEventListener('change', update);
  window.addEventListener('hashchange', function () { fromHash(); apply(); });
  fromHash(); apply();
})();
"""
_STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#1b1f24}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
.meta{color:#57606a}.cards{display:flex;flex-wrap:wrap;gap:.8em}.card{border:1px solid #d0d7de;border-radius:6px;padding:.6em .9em;min-width:12em}
.card b{font-size:1.3em}table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:2px 6px;text-align:left}
th{background:#f6f8fa;position:sticky;top:0}td.s{font-weight:600;font-size:12px;white-space:nowrap}
.pass{background:#dafbe1}.undel{background:#fff8c5}.xfail{background:#eaeef2}.skip{background:#f6f8fa;color:#57606a}
.fail{background:#ffebe9;color:#82071e}.none{background:#fff}.controls{margin:.6em 0}code{font-size:12px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _cell_class(status: Status) -> str:
    return _CLASS.get(status, "fail" if status.is_failure else "none")


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
    lat = rec.get("latency_ms") or {}
    if lat.get("median") is not None:
        bits.append(f"latency {fmt_num(lat['median'])} ms")
    return " · ".join(bits)


def render(header: dict[str, Any], records: list[Record]) -> str:
    recipes = list(by_recipe(header, records).values())
    names = [r.name for r in recipes]
    rows: dict[str, dict[str, Record]] = defaultdict(dict)
    for rec in records:
        rows[rec["id"].rsplit("@", 1)[0]][rec["recipe"]] = rec
    versions = header.get("versions") or {}
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>bti results {_e(header.get('run_id', ''))}</title><style>{_STYLE}</style></head><body>",
        f"<h1>bti results</h1><p class='meta'>run <code>{_e(header.get('run_id', ''))}</code> · {_e(header.get('created', ''))}"
        f" · suites {_e(', '.join(header.get('suites') or []))} · torch {_e(versions.get('torch', '?'))}"
        f" · executorch {_e(versions.get('executorch', '?'))}</p>",
        "<h2>Recipes</h2><div class='cards'>",
    ]
    for r in recipes:
        if r.unavailable:
            body = f"unavailable: {_e(r.unavailable)}"
        else:
            body = (f"<b>{r.passed}/{r.ran}</b> passed ({r.pass_rate:.1f}%)<br>{r.failed} failing · "
                    + " · ".join(f"{n} {_e(s.value)}" for s, n in sorted(r.counts.items(), key=lambda kv: kv[0].value)))
        out.append(f"<div class='card' data-recipe='{_e(r.name)}'><div>{_e(r.name)}</div>{body}</div>")
    out.append("</div>")
    out.append("<h2>Matrix</h2><div class='controls'><input id='q' type='search' placeholder='filter: case id, op, status'> "
               "<select id='status'><option value='all'>all</option><option value='failing'>failing</option>"
               "<option value='passing'>passing</option><option value='undelegated'>undelegated</option>"
               "<option value='flaky'>flaky</option><option value='expected'>xfail / skip</option></select> "
               "<span id='shown'></span></div>")
    out.append("<table id='matrix'><thead><tr><th>case × axes</th>" + "".join(f"<th>{_e(n)}</th>" for n in names)
               + "</tr></thead><tbody>")
    for group in sorted(rows):
        cells, tags = [], set()
        for name in names:
            cell = rows[group].get(name)
            if cell is None:
                cells.append("<td class='s none'></td>")
                continue
            rec = cell
            status = status_of(rec)
            tags.add("failing" if status.is_failure else "passing" if status.is_pass else "expected")
            if status == Status.PASS_UNDELEGATED:
                tags.add("undelegated")
            if rec.get("triage"):
                tags.add(f"triage-{rec['triage']}")
            tags.add(status.value.lower())
            cells.append(f"<td class='s {_cell_class(status)}' title='{_e(_tooltip(rec))}'>{_e(status.value)}</td>")
        key = " ".join([group, *(s for s in tags)]).lower()
        out.append(f"<tr data-key='{_e(key)}' data-tags='{_e(' '.join(sorted(tags)))}'><td><code>{_e(group)}</code></td>"
                   + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    fails = [r for r in records if status_of(r).is_failure]
    out.append(f"<h2>Failures ({len(fails)})</h2>")
    if fails:
        out.append("<table id='failures'><thead><tr><th>item</th><th>status</th><th>triage</th><th>detail</th></tr></thead><tbody>")
        out.extend(f"<tr><td><code>{_e(r['id'])}</code></td><td class='s fail'>{_e(r['status'])}</td>"
                   f"<td>{_e(r.get('triage') or '')}</td>"
                   f"<td>{_e(str(r.get('detail') or '')[:500])}</td></tr>" for r in sorted(fails, key=lambda r: r["id"]))
        out.append("</tbody></table>")
    else:
        out.append("<p>None.</p>")
    out.append(f"<script>{_SCRIPT}</script></body></html>")
    return "\n".join(out)
