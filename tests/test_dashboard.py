"""dashboard.html: rendered from the JSONL alone, escaped, and filtered in a real (headless Chromium) browser."""

from __future__ import annotations

import json
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.cdp import chromium

INJECTED = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"


def _record(item_id: str, status: str, detail: str = "", **extra: object) -> dict:
    case, _, recipe = item_id.rpartition("@")
    return {"kind": "result", "schema": 1, "id": item_id, "case": case.split("[")[0], "recipe": recipe, "status": status,
            "detail": detail, "run_id": "r1", "suite": "ops", "axes": {"dtype": "float32", "shape": "static"}, **extra}


@pytest.fixture
def dashboard(bti, tmp_path: Path) -> Path:
    header = {"kind": "header", "schema": 1, "run_id": "r1", "created": "2026-11-22T00:00:00+00:00",
              "versions": {"torch": "2.13.0", "executorch": "1.4.1"}, "recipes": {"portable": "h1", "xnnpack": "h2"},
              "suites": ["ops"]}
    recs = [
        _record("op.add.a[float32,static]@portable", "PASS", outputs=[{"max_abs": 0.0, "sqnr_db": "inf"}]),
        _record("op.add.a[float32,static]@xnnpack", "PASS", partition={"total_nodes": 3, "delegated_nodes": 3}),
        _record("op.conv.b[float32,static]@portable", "PASS"),
        _record("op.conv.b[float32,static]@xnnpack", "FAIL_LOWER", INJECTED),
        _record("op.sum.c[float32,static]@portable", "PASS"),
        _record("op.sum.c[float32,static]@xnnpack", "PASS_UNDELEGATED", "correct, but nothing was delegated"),
        _record("op.pool.d[float32,static]@xnnpack", "XFAIL", "known bug"),
    ]
    jsonl = tmp_path / "results.jsonl"
    jsonl.write_text("".join(json.dumps(x) + "\n" for x in [header, *recs]))
    res = bti("report", str(jsonl), "--out-dir", str(tmp_path), "--format", "html")
    assert res.code == 0, res.err
    return tmp_path / "dashboard.html"


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str | None]] = []
        self.scripts = 0
        self.cards = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and "data-key" in a:
            self.rows.append(a)
        elif tag == "script":
            self.scripts += 1
        elif tag == "div" and a.get("class") == "card":
            self.cards += 1


def _data(text: str) -> dict:
    start = text.index('<script type="application/json" id="data">') + len('<script type="application/json" id="data">')
    return json.loads(text[start:text.index("</script>", start)])


def test_dashboard_is_complete_and_escaped(dashboard: Path) -> None:
    text = dashboard.read_text()
    parsed = _Rows()
    parsed.feed(text)
    data = _data(text)
    assert [r[0] for r in data["rows"]] == ["op.add.a[float32,static]", "op.conv.b[float32,static]",
                                          "op.pool.d[float32,static]", "op.sum.c[float32,static]"]  # one row per case × axes
    assert parsed.cards == 2  # one card per recipe
    assert parsed.scripts == 2  # the data and ours: the injected <script> stayed text (escaped in the JSON too)
    assert INJECTED not in text and "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in text
    assert "<img" not in text.split('id="data">', 1)[1].split("</script>", 1)[0]
    conv = data["rows"][1][1][1]  # op.conv.b on xnnpack: the status and its tooltip
    assert data["statuses"][conv[0]][0] == "FAIL_LOWER" and "pwned" in conv[1]
    assert "2/4</b> passed" in text and "1 failing" in text  # xnnpack: PASS + PASS_UNDELEGATED; XFAIL expected
    assert "Failures (1)" in text


def _dom(url: str, tmp_path: Path) -> str:
    args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=3000", "--dump-dom", url]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout


@pytest.mark.parametrize(("fragment", "shown", "visible"), [
    ("", "4 of 4 rows shown", {"op.add.a", "op.conv.b", "op.sum.c", "op.pool.d"}),
    ("#status=failing", "1 of 4 rows shown", {"op.conv.b"}),
    ("#status=undelegated", "1 of 4 rows shown", {"op.sum.c"}),
    ("#q=pool", "1 of 4 rows shown", {"op.pool.d"}),
])
def test_dashboard_filters_in_a_browser(dashboard: Path, tmp_path: Path, fragment: str, shown: str, visible: set[str]) -> None:
    dom = _dom(dashboard.as_uri() + fragment, tmp_path)
    assert f'<span id="shown">{shown}</span>' in dom  # the script ran and applied the filter
    parsed = _Rows()
    parsed.feed(dom)
    on_screen = {str(r["data-key"]).split("[")[0] for r in parsed.rows if "hidden" not in r}
    assert on_screen == visible
    assert "<title>bti results r1</title>" in dom  # the injected handlers never ran


def test_dashboard_pages_a_large_run_and_bounds_its_size(bti, tmp_path: Path, monkeypatch) -> None:
    """2,500 rows: 100 a page, the page in the URL; the tooltip budget drops tooltips, never statuses."""
    from harness.report import dashboard as dash

    header = {"kind": "header", "schema": 1, "run_id": "big", "recipes": {"portable": "h"}, "suites": ["ops"]}
    recs = [_record(f"op.k{i:05d}.a[float32,static]@portable", "FAIL_RUN" if i % 10 == 0 else "PASS", "why " * 20)
            for i in range(2500)]
    monkeypatch.setattr(dash, "TIP_BUDGET", 20_000)
    text = dash.render(header, recs)
    data = _data(text)
    assert len(data["rows"]) == 2500 and data["dropped"] > 0
    cells = [r[1][0] for r in data["rows"]]
    assert sum(isinstance(c, int) for c in cells) == data["dropped"]  # a status alone
    statuses = [data["statuses"][c if isinstance(c, int) else c[0]][0] for c in cells]
    assert statuses.count("FAIL_RUN") == 250  # every status kept
    assert sum(len(c[1]) for c in cells if not isinstance(c, int)) <= 2 * 20_000
    assert "Failures (250)" in text
    page = tmp_path / "big.html"
    page.write_text(text)
    dom = _dom(page.as_uri() + "#status=failing&page=2", tmp_path)
    assert '<span id="shown">250 of 2500 rows shown</span>' in dom and "page 3 of 3" in dom
    parsed = _Rows()
    parsed.feed(dom)
    assert [str(r["data-key"]).split("[")[0] for r in parsed.rows] == [f"op.k{i:05d}.a" for i in range(2000, 2500, 10)]


def test_a_hostile_triage_cannot_break_the_pages_json() -> None:
    """A results file's NaN where a triage string goes (the JSONL reader accepts the token): the page's data stays
    strict JSON, which the browser's JSON.parse reads."""
    from harness.report import dashboard as dash

    header = {"kind": "header", "schema": 1, "run_id": "h", "recipes": {"portable": "h"}}
    recs = [_record("op.a.a[float32,static]@portable", "FAIL_RUN", "x", triage=float("nan")),
            _record("op.b.b[float32,static]@portable", "FAIL_RUN", "x", triage={"a": [1]})]

    def refuse(token: str) -> None:
        raise ValueError(token)

    text = dash.render(header, recs)
    start = text.index('id="data">') + len('id="data">')
    data = json.loads(text[start:text.index("</script>", start)], parse_constant=refuse)
    assert [r[1][0][2] for r in data["rows"]] == ["nan", "{'a': [1]}"]
