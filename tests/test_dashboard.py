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


def test_dashboard_is_complete_and_escaped(dashboard: Path) -> None:
    text = dashboard.read_text()
    parsed = _Rows()
    parsed.feed(text)
    assert len(parsed.rows) == 4 and parsed.cards == 2  # one row per case × axes, one card per recipe
    assert parsed.scripts == 1  # ours only: the injected <script> stayed text
    assert INJECTED not in text and "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in text
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
