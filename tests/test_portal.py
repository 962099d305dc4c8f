"""``bti portal`` and ``bti report --readme-table``: many runs → a static site, checked from the files and in
a real headless Chromium (DevTools protocol: network requests, console, real clicks, a screenshot)."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.report.runs import load_runs
from harness.report.store import opened

INJECTED = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"
MACHINE_A, MACHINE_B = "Vendor NPU host", "Other host"
S141, S150 = "torch 2.13.0 · executorch 1.4.1", "torch 2.13.0 · executorch 1.5.0"


def _key(recipe: str, machine: str = MACHINE_A, stack: str = S141) -> str:
    """A column: one recipe on one machine with one software stack."""
    return f"{recipe} @ {machine} · {stack}"


def _header(run_id: str, day: int, executorch: str = "1.4.1", cpu: str = MACHINE_A, shard: str | None = None,
            recipes: tuple[str, ...] = ("portable", "xnnpack")) -> dict:
    return {"kind": "header", "schema": 1, "run_id": run_id, "created": f"2026-11-{day:02d}T03:00:00+00:00",
            "versions": {"torch": "2.13.0", "executorch": executorch, "bti": "0.1.0", "cpu": cpu},
            "recipes": {r: "h" for r in recipes}, "suites": ["ops", "models"], "shard": shard, "argv": ["run"],
            "recipe_info": {"xnnpack": {"backend": "executorch", "setup": "https://example.com/xnnpack-setup"},
                            "portable": {"backend": "executorch", "setup": "javascript:alert(1)"}}}


def _rec(case: str, recipe: str, status: str, op: str | None = "aten::add.Tensor", **extra: object) -> dict:
    return {"kind": "result", "schema": 1, "id": f"{case}[float32,static]@{recipe}", "case": case, "recipe": recipe,
            "suite": "ops" if op else "models", "op": op, "status": status, "axes": {"dtype": "float32", "shape": "static"},
            "detail": "", "backend": "executorch", **extra}


def _write(path: Path, header: dict, recs: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in [header, *recs]))
    return path


def _day(day: int, add_status: str, conv_status: str, flip: str = "PASS", executorch: str = "1.4.1") -> list[dict]:
    return [
        _rec("op.add.a", "xnnpack", add_status, outputs=[{"name": "output[0]", "max_abs": 1e-7, "sqnr_db": 80.0}],
             partition={"total_nodes": 3, "delegated_nodes": 3}, baseline={"latency_ratio": 0.5}, stages={"lower": 0.2}),
        _rec("op.add.a", "portable", "PASS"),
        _rec("op.conv.b", "xnnpack", conv_status, op="aten::convolution.default", detail=INJECTED,
             error={"type": "RuntimeError", "message": INJECTED, "trace": "Traceback …\n" + "x" * 9000}),
        _rec("op.conv.b", "portable", "PASS", op="aten::convolution.default"),
        _rec("op.flip.c", "xnnpack", flip, op="aten::flip.default"),
        _rec("model.mlp", "xnnpack", "PASS", op=None, partition={"total_nodes": 10, "delegated_nodes": 7},
             accuracy={"top1_agreement": 1.0}),
    ]


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("runs")
    # day 10: all pass; day 11 (two shards of one CI run): conv breaks, flip fails; day 14: conv still broken, flip
    # passes again at the same versions (flaky); day 15: add fails too (a regression). A newer executorch on day 16,
    # where everything passes: columns of its own, never mixed into the 1.4.1 columns' cells or history
    _write(d / "d10.jsonl", _header("r10", 10), _day(10, "PASS", "PASS"))
    recs11 = _day(11, "PASS", "FAIL_LOWER", flip="FAIL_MISMATCH")
    _write(d / "d11" / "shard1.jsonl", _header("r11a", 11, shard="1/2"), recs11[:3])
    _write(d / "d11" / "shard2.jsonl", _header("r11b", 11, shard="2/2"), recs11[3:])
    _write(d / "d14.jsonl", _header("r14", 14), _day(14, "PASS", "FAIL_LOWER"))
    _write(d / "d15.jsonl", _header("r15", 15), _day(15, "FAIL_MISMATCH", "FAIL_LOWER"))
    _write(d / "d16.jsonl", _header("r16", 16, executorch="1.5.0"), _day(16, "PASS", "PASS"))
    # another machine: its own columns, never mixed with the first machine's history
    _write(d / "other.jsonl", _header("o15", 15, cpu=MACHINE_B, recipes=("xnnpack",)), [_rec("op.add.a", "xnnpack", "XFAIL")])
    return d


@pytest.fixture(scope="module")
def site(runs_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from harness.cli import main

    out = tmp_path_factory.mktemp("site")
    assert main(["portal", str(runs_dir), "-o", str(out), "--keep-history", str(out.parent / "history")]) == 0
    return out


def _json_in(page: Path) -> dict:
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', page.read_text(), re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_runs_shards_machines_and_history(runs_dir: Path) -> None:
    runs = load_runs([runs_dir])
    assert [r.run_id for r in runs][:3] == ["r10", "r11a", "r14"] and {r.run_id for r in runs[3:5]} == {"o15", "r15"}
    assert runs[-1].run_id == "r16"
    day11 = next(r for r in runs if r.run_id == "r11a")
    assert len(day11.held) == 6 and len(day11.sources) == 2  # the two shards are one run
    with opened(runs) as store:
        cols = store.columns
        assert sorted(c.key for c in cols) == [_key("portable"), _key("portable", stack=S150), _key("xnnpack", MACHINE_B),
                                               _key("xnnpack"), _key("xnnpack", stack=S150)]
        assert [r.run_id for r in cols[next(c for c in cols if c.key == _key("xnnpack", stack=S150))]] == ["r16"]
        xnn = next(c for c in cols if c.key == _key("xnnpack"))
        h = store.history(xnn)  # its ages to the column's newest run
    assert [round(p.rate) for p in h.points] == [100, 50, 75, 50]
    broke, fixed = [c[2] for c in h.changes], [c[3] for c in h.changes]
    assert broke == [["op.conv.b[float32,static]", "op.flip.c[float32,static]"], [], ["op.add.a[float32,static]"]]
    assert fixed == [[], ["op.flip.c[float32,static]"], []]
    conv = h.ages["op.conv.b[float32,static]"]
    assert conv.since.run_id == "r11a" and conv.streak == 3 and conv.overdue and conv.last_pass.run_id == "r10"
    assert "failing for 4 days (3 runs), since executorch 1.4.1" in conv.describe()  # to the column's newest run (day 15)
    add = h.ages["op.add.a[float32,static]"]
    assert not add.overdue and add.since.run_id == "r15"  # r16 (executorch 1.5.0, add passes) is another column
    # r10, r11, r14: same versions; conv broke once and stayed broken (not a flip back)
    assert h.flaky == {"op.flip.c[float32,static]": ["FAIL_MISMATCH", "PASS"]}


def test_portal_pages_counts_and_escaping(site: Path, runs_dir: Path) -> None:
    index = (site / "index.html").read_text()
    data = _json_in(site / "index.html")
    assert data["columns"] == [_key("portable"), _key("portable", stack=S150), _key("xnnpack", MACHINE_B), _key("xnnpack"),
                               _key("xnnpack", stack=S150)]
    # a cell is its column's record: the 1.4.1 column keeps add's failure; 1.5.0's pass is in its own column
    add = next(r for r in data["rows"] if r[0] == "op.add.a[float32,static]")[4]
    assert add[3][0] == "FAIL_MISMATCH" and add[4][0] == "PASS"
    assert "run r15" in add[3][4] and "executorch 1.4.1" in add[3][4] and "stale" not in add[3][3]
    # the cards' counts are the newest run's JSONL counts per column
    newest = [json.loads(x) for x in (runs_dir / "d15.jsonl").read_text().splitlines()[1:]]
    want = Counter(r["recipe"] for r in newest)
    for recipe in ("portable", "xnnpack"):
        m = re.search(rf'data-column="{_key(recipe)}" data-total="(\d+)" data-passed="(\d+)" data-failing="(\d+)"', index)
        assert m is not None
        recs = [r for r in newest if r["recipe"] == recipe]
        assert int(m.group(1)) == want[recipe] and int(m.group(3)) == sum(r["status"].startswith("FAIL") for r in recs)
    assert 'href="https://example.com/xnnpack-setup"' in index and "javascript:" not in index  # only http(s) setup links
    assert "Failing past 72 hours (1)" in index
    for page in [site / "index.html", site / "history.html", *sorted((site / "items").iterdir())]:
        text = page.read_text()
        assert INJECTED not in text and "<img src=x" not in text  # the JSON in a page escapes < and >
        assert "Content-Security-Policy" in text and "'unsafe-inline'" not in text.split("script-src")[1].split(";")[0]
    for key in ("outcomes", "rate", "latency", "errors", "delegated"):
        assert re.search(rf'<figure id="plot-{key}"><svg', index), key  # each plot drawn inline, no data: none missing
    hist = json.loads((site / "history.json").read_text())
    xnn = next(h for h in hist if h["column"] == _key("xnnpack"))
    # the history's counts per run are the JSONL's: passed, ran (attempted) and failed, run by run
    per_run = {"r10": [runs_dir / "d10.jsonl"], "r11a": [runs_dir / "d11" / "shard1.jsonl", runs_dir / "d11" / "shard2.jsonl"],
               "r14": [runs_dir / "d14.jsonl"], "r15": [runs_dir / "d15.jsonl"]}
    for point in xnn["points"]:
        recs = [json.loads(x) for f in per_run[point["run_id"]] for x in f.read_text().splitlines()[1:]]
        sts = [r["status"] for r in recs if r["recipe"] == "xnnpack"]
        want = (sum(s in ("PASS", "PASS_UNDELEGATED") for s in sts), len(sts), sum(s.startswith("FAIL") for s in sts))
        assert (point["passed"], point["ran"], point["failed"]) == want, point
    assert xnn["failing"]["op.conv.b[float32,static]"]["overdue"] is True and xnn["regressions"][-1]["broke"] == ["op.add.a[float32,static]"]
    assert list(xnn["flaky"]) == ["op.flip.c[float32,static]"]
    item = next(p for p in (site / "items").iterdir() if "op.conv.b" in p.read_text() and _json_in(p)["column"] == _key("xnnpack"))
    rec = next(v for v in _json_in(item)["items"].values() if v["row"] == "op.conv.b[float32,static]")
    assert rec["status"] == "FAIL_LOWER" and len(rec["rec"]["error"]["trace"]) <= 4001 and rec["rec"]["error"]["trace"].endswith("x")
    assert rec["command"] == "bti run -s ops -r xnnpack -k op.conv.b --dtype float32 --shape static"
    assert [t[1] for t in rec["trail"]] == ["PASS", "FAIL_LOWER", "FAIL_LOWER", "FAIL_LOWER"]


def test_history_copies_rebuild_the_same_site(site: Path, tmp_path: Path) -> None:
    from harness.cli import main

    copies = sorted((site.parent / "history").iterdir())
    assert len(copies) == 6 and all(p.name.endswith(".jsonl.gz") for p in copies)  # the two shards: one copy
    assert main(["portal", str(site.parent / "history"), "-o", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "matrix.json").read_text() == (site / "matrix.json").read_text()
    assert json.loads((tmp_path / "again" / "history.json").read_text()) == json.loads((site / "history.json").read_text())


def test_portal_bad_inputs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    bad_gz = tmp_path / "bad.jsonl.gz"
    bad_gz.write_bytes(gzip.compress(b'{"kind": "header"}\n')[:20])
    other = tmp_path / "notes.jsonl"
    other.write_text('{"hello": 1}\n')
    for args in (["portal", str(tmp_path / "missing")], ["portal", str(bad_gz)], ["portal", str(other)], ["portal", str(tmp_path / "empty")]):
        (tmp_path / "empty").mkdir(exist_ok=True)
        assert main([*args, "-o", str(tmp_path / "site")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("bti: error: ") and len(err.strip().splitlines()) <= 2 and "Traceback" not in err


def test_readme_tables(tmp_path: Path, runs_dir: Path) -> None:
    from harness.cli import main

    hostile = _rec("model.<!-- bti:models:end -->@x", "xnnpack", "FAIL_RUN", op=None)
    results = _write(tmp_path / "r.jsonl", _header("r", 15), [*_day(15, "FAIL_MISMATCH", "FAIL_LOWER"), hostile])
    readme = tmp_path / "README.md"
    readme.write_text("# Vendor\nkeep me: `<!-- bti:models:begin -->` quoted\n<!-- bti:models:begin -->\nold\n<!-- bti:models:end -->\n"
                      "middle\n<!-- bti:ops:begin -->\n<!-- bti:ops:end -->\ntail\n")
    for _ in range(2):  # idempotent: a second run finds the same markers
        assert main(["report", str(results), "-o", str(tmp_path / "out"), "--format", "md", "--readme-table", str(readme), "--quiet"]) == 0
    text = readme.read_text()
    assert text.startswith("# Vendor\nkeep me: `<!-- bti:models:begin -->` quoted\n") and "\nmiddle\n" in text
    assert text.endswith("tail\n") and "old" not in text  # the quoted marker is prose, left alone
    assert text.count("<!-- bti:models:end -->") == 1 and text.count("<!-- bti:models:begin -->") == 2
    assert "| model | `xnnpack` |" in text and "| `model.mlp` | ✅ (top-1 100%) |" in text  # portable ran no model: no column
    assert "- `xnnpack`:  ([setup](https://example.com/xnnpack-setup))" in text  # the setup notes under the table
    assert "| aten::convolution.default | ✅ 1/1 | ❌ 0/1 |" in text and "| aten::add.Tensor | ✅ 1/1 | ❌ 0/1 |" in text
    crlf = tmp_path / "crlf.md"
    crlf.write_bytes(b"a\r\n<!-- bti:ops:begin -->\r\n<!-- bti:ops:end -->\r\nb\r\n")
    assert main(["report", str(results), "-o", str(tmp_path / "out"), "--format", "md", "--readme-table", str(crlf), "--quiet"]) == 0
    raw = crlf.read_bytes()
    assert raw.startswith(b"a\r\n") and raw.endswith(b"<!-- bti:ops:end -->\r\nb\r\n") and raw.count(b"\n") == raw.count(b"\r\n")
    plain = tmp_path / "plain.md"
    plain.write_text("no markers\n")
    assert main(["report", str(results), "-o", str(tmp_path / "out"), "--format", "md", "--readme-table", str(plain), "--quiet"]) == 2
    assert plain.read_text() == "no markers\n"


@pytest.mark.slow
def test_portal_in_a_browser(site: Path, tmp_path: Path, record_property: Any) -> None:
    from tests.cdp import Browser

    browser = Browser(tmp_path / "profile")
    try:
        browser.goto(site.joinpath("index.html").as_uri())
        data = _json_in(site / "index.html")
        assert browser.eval("document.getElementById('shown').textContent") == f"{len(data['rows'])} of {len(data['rows'])} rows match"
        assert browser.eval("document.querySelectorAll('#matrix tbody tr').length") == len(data["rows"])
        # the cards show the JSONL's counts; the plots are inline SVG
        assert browser.eval("document.querySelectorAll('.plots svg').length") == 5
        browser.screenshot(tmp_path / "portal.png")
        assert (tmp_path / "portal.png").stat().st_size > 10_000
        # filtering hides rows, and the filter lands in the URL; its time is recorded (the JUnit property filter_ms;
        # benchmarks/portal_scale.py --browser measures it on 50,000 items)
        ms = browser.eval("(function(){var s=document.getElementById('status'); var t=performance.now(); s.value='failing';"
                          " s.dispatchEvent(new Event('change')); return performance.now()-t;})()")
        assert isinstance(ms, (int, float)) and ms >= 0
        record_property("filter_ms", round(ms, 2))
        rows = browser.eval("Array.from(document.querySelectorAll('#matrix tbody tr')).map(function(r){return r.dataset.row})")
        assert sorted(rows) == ["op.add.a[float32,static]", "op.conv.b[float32,static]"]
        assert "status=failing" in browser.eval("location.hash")
        browser.goto(site.joinpath("index.html").as_uri() + "#q=mlp")
        assert browser.eval("document.getElementById('shown').textContent").startswith("1 of ")
        import hashlib

        xnn_id = hashlib.sha1(_key("xnnpack").encode()).hexdigest()[:12]  # a column is named by its key's hash
        browser.goto(site.joinpath("index.html").as_uri() + f"#status=failing&recipe={xnn_id}")
        assert browser.eval("document.querySelectorAll('#matrix thead th.col:not([hidden])').length") == 1
        # every cell says where it came from (its tooltip: run, date, software)
        tip = browser.eval("document.querySelector(\"#matrix tbody tr[data-row='op.conv.b[float32,static]'] td.s\").title")
        assert tip.startswith("FAIL_LOWER · run r15 · 2026-11-15") and tip.endswith("executorch 1.4.1 · torch 2.13.0"), tip
        # a real click on the conv cell opens its page, which shows the record
        browser.click("#matrix tbody tr[data-row='op.conv.b[float32,static]'] a")
        browser.wait_for("location.pathname.indexOf('/items/') >= 0 && !!document.getElementById('status')")
        browser.pump(0.5)
        assert browser.eval("document.getElementById('status').textContent") == "FAIL_LOWER"
        assert browser.eval("document.getElementById('command').textContent").endswith("-k op.conv.b --dtype float32 --shape static")
        # a failure's page gives the standalone script's command (bti repro); no script was written for this run
        assert browser.eval("document.getElementById('repro-command').textContent").startswith("bti repro 'op.conv.b[float32,static]@")
        assert browser.eval("document.getElementById('repro')") is None
        assert browser.eval("document.title") != "pwned" and browser.eval("document.querySelectorAll('img').length") == 0
        browser.screenshot(tmp_path / "item.png")
        browser.goto(site.joinpath("history.html").as_uri())
        assert "failing for 4 days" in browser.eval("document.body.textContent")
    finally:
        browser.close()
    assert not browser.exceptions, browser.exceptions
    assert not [c for c in browser.console if c[0] in ("error", "warning")], browser.console
    assert browser.requests and all(u.startswith("file://") for u in browser.requests), browser.requests


def test_runs_of_other_suites_add_up_in_a_column(tmp_path: Path) -> None:
    """A newer run of another suite does not hide the older run's items (or their failures) in the same column."""
    from harness.cli import main

    _write(tmp_path / "runs" / "ops.jsonl", _header("ops1", 10), [_rec("op.add.a", "xnnpack", "FAIL_LOWER")])
    _write(tmp_path / "runs" / "models.jsonl", _header("mod1", 15), [_rec("model.mlp", "xnnpack", "PASS", op=None)])
    assert main(["portal", str(tmp_path / "runs"), "-o", str(tmp_path / "site")]) == 0
    data = _json_in(tmp_path / "site" / "index.html")
    assert sorted(r[0] for r in data["rows"]) == ["model.mlp[float32,static]", "op.add.a[float32,static]"]
    hist = json.loads((tmp_path / "site" / "history.json").read_text())[0]
    assert hist["failing"]["op.add.a[float32,static]"]["overdue"] is True  # failing since day 10, newest input day 15
    # the ops cell is stale: the column's newest run (mod1) did not include it; it says so, with its age
    add = next(r for r in data["rows"] if r[0] == "op.add.a[float32,static]")[4][0]
    mlp = next(r for r in data["rows"] if r[0] == "model.mlp[float32,static]")[4][0]
    assert "stale" in add[3].split() and "run ops1" in add[4] and "stale: 5 days older than the column's newest run mod1" in add[4]
    assert "stale" not in mlp[3].split() and "run mod1" in mlp[4]
    index = (tmp_path / "site" / "index.html").read_text()
    assert "· 1 stale</span>" in index
    item = _json_in(next(p for p in (tmp_path / "site" / "items").iterdir() if "op.add.a" in p.read_text()))
    (entry,) = [v for v in item["items"].values() if v["row"] == "op.add.a[float32,static]"]
    assert entry["stale"] == "5 days older than the column's newest run mod1"


def test_hostile_headers_and_records_do_not_break_the_build(tmp_path: Path) -> None:
    from harness.cli import main

    header = {**_header("h1", 12), "versions": "x", "upstream": ["no"], "recipe_info": [1], "recipes": 5, "shard": ["1/2"],
              "argv": "run", "created": "0001-01-01T00:00:00+00:00", "run_id": {"a": 1}}
    recs = [_rec("op.add.a", "xnnpack", "FAIL_RUN", outputs="x", partition=[1], stages={"lower": "slow"}, error="boom",
                 baseline={"latency_ratio": "inf"}, accuracy=[1], xfail="y", attempts={"a": 1}),
            _rec("op.add.b", "xnnpack", "PASS", outputs=[None, {"max_abs": "nan", "sqnr_db": {}}], axes="x"),
            _rec("model.m", "xnnpack", "PASS", op=None, partition={"total_nodes": 1, "delegated_nodes": 10**400}),
            _rec("model.x$\\foo{$", "xnnpack", "PASS", op=None, partition={"total_nodes": 2, "delegated_nodes": 1}),  # mathtext
            {k: v for k, v in _rec("op.add.c", "xnnpack", "FAIL_RUN", detail=["no"]).items() if k != "recipe"}]  # support
    _write(tmp_path / "runs" / "h.jsonl", header, recs)
    assert main(["portal", str(tmp_path / "runs"), "-o", str(tmp_path / "site"), "--keep-history", str(tmp_path / "hist")]) == 0
    assert len(_json_in(tmp_path / "site" / "index.html")["rows"]) == 5
    assert "op.add.c" in (tmp_path / "site" / "support.html").read_text()


def test_a_flip_across_a_recipe_or_spec_change_is_not_flaky(tmp_path: Path) -> None:
    """Same software, but the recipe file (its hash) or the case spec changed between runs: pass → fail → pass is
    then two edits, not flakiness. With both unchanged the same sequence is flaky."""
    def run(d: Path, day: int, status: str, recipe_hash: str, spec: str) -> None:
        header = _header(f"r{day}", day, recipes=("xnnpack",))
        header["recipes"] = {"xnnpack": recipe_hash}
        _write(d / f"d{day}.jsonl", header, [_rec("op.flip.c", "xnnpack", status, op="aten::flip.default", spec_hash=spec)])

    def flaky(d: Path) -> dict[str, list[str]]:
        with opened(load_runs([d])) as store:
            (col,) = store.columns
            return store.history(col).flaky

    for name, hashes, specs, expect in [
        ("steady", ("h1", "h1", "h1"), ("s", "s", "s"), {"op.flip.c[float32,static]": ["FAIL_MISMATCH", "PASS"]}),
        ("recipe-edited", ("h1", "h2", "h1"), ("s", "s", "s"), {}),
        ("spec-edited", ("h1", "h1", "h1"), ("s1", "s2", "s1"), {}),
    ]:
        d = tmp_path / name
        for day, status, h, s in zip((10, 11, 12), ("PASS", "FAIL_MISMATCH", "PASS"), hashes, specs, strict=True):
            run(d, day, status, h, s)
        assert flaky(d) == expect, name
    # the hashes come from results files: any JSON value, a list included, is a key like any other
    d = tmp_path / "hostile"
    for day, status in zip((10, 11, 12), ("PASS", "FAIL_MISMATCH", "PASS"), strict=True):
        run(d, day, status, ["h"], {"s": [1]})  # type: ignore[arg-type]
    assert flaky(d) == {"op.flip.c[float32,static]": ["FAIL_MISMATCH", "PASS"]}


def test_two_runs_sharing_a_run_id_are_both_kept(tmp_path: Path) -> None:
    """Runs are told apart by what they are (id, date, machine, what they recorded), not by the run id alone: a copied
    or colliding run id does not hide a run; a history copy of the same run is still one run."""
    _write(tmp_path / "a.jsonl", _header("same", 10), [_rec("op.add.a", "xnnpack", "PASS")])
    _write(tmp_path / "b.jsonl", _header("same", 12), [_rec("op.add.a", "xnnpack", "FAIL_RUN")])
    _write(tmp_path / "a-copy.jsonl", _header("same", 10), [_rec("op.add.a", "xnnpack", "PASS")])
    runs = load_runs([tmp_path])
    assert [(r.run_id, r.created.day, r.held.status) for r in runs] == [("same", 10, ["PASS"]), ("same", 12, ["FAIL_RUN"])]


def test_item_links_depend_on_their_column_and_row_only(runs_dir: Path, tmp_path: Path) -> None:
    """Adding a run of another machine (a new column, new rows) does not move any existing item's page."""
    import shutil

    from harness.cli import main

    assert main(["portal", str(runs_dir), "-o", str(tmp_path / "one")]) == 0
    more = tmp_path / "more"
    shutil.copytree(runs_dir, more)
    _write(more / "extra.jsonl", _header("x1", 16, cpu="A third host"), [_rec("op.aaa.first", "portable", "PASS")])
    assert main(["portal", str(more), "-o", str(tmp_path / "two")]) == 0

    def links(site: Path) -> dict[str, str]:
        data = _json_in(site / "index.html")
        return {f"{col} {r[0]}": c[2] for r in data["rows"] for col, c in zip(data["columns"], r[4], strict=True) if c}

    one, two = links(tmp_path / "one"), links(tmp_path / "two")
    assert one and all(two[k] == v for k, v in one.items()) and len(two) == len(one) + 1
    for link in one.values():  # and each link opens a page holding that item
        page, key = link.split("#")
        assert key in _json_in(tmp_path / "one" / page)["items"]


def test_a_regression_is_found_across_interleaved_suites(tmp_path: Path) -> None:
    """ops on day 10 (add passes), models on day 11, ops on day 12 (add fails): a regression, though the run just before
    day 12 never ran add; and models' runs in between do not fake a fix."""
    _write(tmp_path / "a.jsonl", _header("o10", 10), [_rec("op.add.a", "xnnpack", "PASS")])
    _write(tmp_path / "b.jsonl", _header("m11", 11), [_rec("model.mlp", "xnnpack", "PASS", op=None)])
    _write(tmp_path / "c.jsonl", _header("o12", 12), [_rec("op.add.a", "xnnpack", "FAIL_RUN")])
    _write(tmp_path / "d.jsonl", _header("m13", 13), [_rec("model.mlp", "xnnpack", "PASS", op=None)])
    with opened(load_runs([tmp_path])) as store:
        (col,) = store.columns
        h = store.history(col)
    assert [(a.run_id, b.run_id, broke, fixed) for a, b, broke, fixed in h.changes] == [
        ("o10", "m11", [], []), ("m11", "o12", ["op.add.a[float32,static]"], []), ("o12", "m13", [], [])]


def test_two_machines_with_the_same_cpu_are_two_columns(tmp_path: Path) -> None:
    from harness.env import machine_id

    for run_id, machine in (("m1", "aaaa1111"), ("m2", "bbbb2222")):
        header = _header(run_id, 10)
        header["versions"]["machine"] = machine
        _write(tmp_path / f"{run_id}.jsonl", header, [_rec("op.add.a", "xnnpack", "PASS")])
    with opened(load_runs([tmp_path])) as store:
        keys = sorted(c.key for c in store.columns)
    assert keys == [_key("xnnpack", f"{MACHINE_A} #aaaa1111"), _key("xnnpack", f"{MACHINE_A} #bbbb2222")]
    assert re.fullmatch(r"[0-9a-f]{8}", machine_id()) and machine_id() == machine_id()  # stable, and no host name


def test_shards_of_one_run_join_across_the_runners_of_a_pool(tmp_path: Path) -> None:
    for shard, machine in (("1/2", "aaaa1111"), ("2/2", "bbbb2222")):
        header = _header(f"s{shard[0]}", 10, shard=shard)
        header["versions"]["machine"] = machine
        _write(tmp_path / f"s{shard[0]}.jsonl", header, [_rec(f"op.add.{shard[0]}", "xnnpack", "PASS")])
    (run,) = load_runs([tmp_path])
    assert len(run.held) == 2 and len(run.sources) == 2


def test_nightly_builds_and_dispatched_commits_stay_in_their_releases_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import settings
    from harness.env import machine_id

    for run_id, day, version, sha in (("n1", 10, "1.6.0.dev20261110+git1a2b3c", None), ("n2", 11, "1.6.0.dev20261111+git4d5e6f", "ab" * 20)):
        header = _header(run_id, day, executorch=version)
        if sha:
            header["upstream"] = {"repo": "pytorch/executorch", "sha": sha}
        _write(tmp_path / f"{run_id}.jsonl", header, [_rec("op.add.a", "xnnpack", "PASS")])
    runs = load_runs([tmp_path])
    with opened(runs) as store:
        (col,) = store.columns
    assert col.key == _key("xnnpack", stack="torch 2.13.0 · executorch 1.6.0") and runs[1].under_test == "executorch@abababababab"
    # the machine: BTI_MACHINE names it; a GitHub-hosted runner (a fresh VM each job) gets none
    monkeypatch.setenv("BTI_MACHINE", "acme-npu-pool")
    assert machine_id() == "acme-npu-pool"
    monkeypatch.delenv("BTI_MACHINE")
    monkeypatch.setenv("RUNNER_ENVIRONMENT", "github-hosted")
    assert machine_id() == ""
    monkeypatch.setenv("RUNNER_ENVIRONMENT", "self-hosted")
    assert re.fullmatch(r"[0-9a-f]{8}", machine_id())
    assert settings.resolve({"BTI_MACHINE": " pool "}).machine == "pool"


def test_history_keeps_a_copy_of_each_of_two_runs_sharing_an_id_and_a_time(tmp_path: Path) -> None:
    from harness.cli import main

    a = _header("same", 10)
    b = {**_header("same", 10), "suites": ["models"]}  # another run: same id, same time, another header
    _write(tmp_path / "runs" / "a.jsonl", a, [_rec("op.add.a", "xnnpack", "PASS")])
    _write(tmp_path / "runs" / "b.jsonl", b, [_rec("model.mlp", "xnnpack", "FAIL_RUN", op=None)])
    for _ in range(2):  # a second build keeps the same two copies, and writes no third
        assert main(["portal", str(tmp_path / "runs"), "-o", str(tmp_path / "site"), "--keep-history", str(tmp_path / "hist")]) == 0
    copies = sorted(p.name for p in (tmp_path / "hist").iterdir())
    assert len(copies) == 2 and copies[0] == "20261110T030000Z-same.jsonl.gz", copies
    assert len(load_runs([tmp_path / "hist"])) == 2


def test_older_runs_are_held_as_their_history_fields_and_cells_read_whole(tmp_path: Path) -> None:
    """Bounded memory (1.5 M records): every record of every run is held as the few fields the history reads and its
    line; the cells' records, a stale one from an older run included, are read whole again, and so are history copies."""
    from harness.cli import main
    from harness.report.runs import Held

    _write(tmp_path / "runs" / "a.jsonl", _header("o10", 10), [
        _rec("op.add.a", "xnnpack", "FAIL_RUN", detail="old day's detail", spec_hash="s1", stages={"lower": 0.2}),
        _rec("op.mul.m", "xnnpack", "FAIL_RUN", detail="only on day 10", outputs=[{"name": "output[0]", "max_abs": 0.5}])])
    _write(tmp_path / "runs" / "b.jsonl", _header("o12", 12), [_rec("op.add.a", "xnnpack", "PASS", detail="newest")])
    runs = load_runs([tmp_path / "runs"])
    assert [len(run.held) for run in runs] == [2, 1] and all(set(vars(run.held)) == set(Held.FIELDS) for run in runs)
    assert runs[0].held.line.tolist() == [2, 3] and runs[0].held.status == ["FAIL_RUN", "FAIL_RUN"]
    assert main(["portal", str(tmp_path / "runs"), "-o", str(tmp_path / "site"), "--keep-history", str(tmp_path / "h")]) == 0
    items = {}
    for page in (tmp_path / "site" / "items").glob("*.html"):
        items.update({v["row"]: v for v in _json_in(page)["items"].values()})
    assert items["op.add.a[float32,static]"]["rec"]["detail"] == "newest"
    stale = items["op.mul.m[float32,static]"]  # a cell from the older run: read whole from its file
    assert stale["stale"] and stale["rec"]["detail"] == "only on day 10" and stale["rec"]["outputs"][0]["max_abs"] == 0.5
    copies = sorted((tmp_path / "h").glob("*.jsonl.gz"))
    day10 = [json.loads(x) for x in gzip.decompress(copies[0].read_bytes()).decode().splitlines()[1:]]
    assert [(r["id"], r["detail"], r.get("stages")) for r in day10] == [
        ("op.add.a[float32,static]@xnnpack", "old day's detail", {"lower": 0.2}),
        ("op.mul.m[float32,static]@xnnpack", "only on day 10", None)]


def test_support_page_is_op_by_device_with_the_first_failing_sample(site: Path) -> None:
    """support.html: operator × column from the newest records (OpInfo's per-device view), the first failing sample
    linked to its item page, text from the results escaped."""
    page = (site / "support.html").read_text()
    assert INJECTED not in page and "&lt;script&gt;" in page  # conv's detail, in the link's title
    rows = dict(re.findall(r"<tr><td><code>([^<]+)</code></td>(.*?)</tr>", page, re.S))
    assert set(rows) == {"aten::add.Tensor", "aten::convolution.default", "aten::flip.default"}  # ops only, no model
    cells = re.findall(r"<td[^>]*>(.*?)</td>", rows["aten::convolution.default"], re.S)
    heads = re.findall(r'<th title="([^"]+)">', page)
    conv = cells[heads.index(_key("xnnpack"))]
    assert conv.startswith("❌ float32") and "first failure:" in conv
    link = re.search(r'href="([^"]+)"', conv).group(1)
    target, key = link.split("#")
    assert _json_in(site / target)["items"][key]["row"] == "op.conv.b[float32,static]"
    assert cells[heads.index(_key("portable"))].startswith("✅ float32")
    assert '<a href="support.html">Operator support</a>' in (site / "index.html").read_text()


def test_a_column_whose_newest_run_is_pruned_from_the_history_still_builds(tmp_path: Path) -> None:
    """The history directory is an input and the --keep-history directory: a column of a stack nothing runs any more has
    its newest run past --history-days. Its cells are read whole from that copy before the copy is pruned."""
    from harness.cli import main

    hist = tmp_path / "history"
    hist.mkdir()
    old = [_header("old", 1, executorch="1.3.0"), _rec("op.add.a", "xnnpack", "FAIL_RUN", detail="from the old stack")]
    old[0]["created"] = "2026-01-01T03:00:00+00:00"
    (hist / "20260101T030000Z-old.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(x) + "\n" for x in old).encode()))
    now = _write(tmp_path / "now.jsonl", _header("now", 21, executorch="1.5.0"), [_rec("op.add.a", "xnnpack", "PASS")])
    assert main(["portal", str(hist), str(now), "-o", str(tmp_path / "site"), "--keep-history", str(hist)]) == 0
    assert sorted(p.name for p in hist.iterdir()) == ["20261121T030000Z-now.jsonl.gz"]  # pruned, after the build
    items = [v for page in (tmp_path / "site" / "items").glob("*.html") for v in _json_in(page)["items"].values()]
    assert sorted(v["rec"]["detail"] for v in items) == ["", "from the old stack"]


def test_support_results_feed_the_support_page_only(runs_dir: Path, tmp_path: Path) -> None:
    """--support-results (the nightly OpInfo sweep): its operators and devices reach support.html, never the matrix,
    the item pages or the history copies."""
    from harness.cli import main

    header = _header("oi", 15, recipes=("torch-cpu",))
    half = {**_rec("opinfo.sin.s0", "torch-cpu", "FAIL_MISMATCH", op="opinfo:sin", axes={"dtype": "float16"},
                   detail=INJECTED), "id": "opinfo.sin.s0[float16,static]@torch-cpu"}
    sweep = _write(tmp_path / "opinfo" / "results.jsonl", header, [_rec("opinfo.sin.s0", "torch-cpu", "PASS", op="opinfo:sin"), half])
    site, hist = tmp_path / "site", tmp_path / "hist"
    assert main(["portal", str(runs_dir), "--support-results", str(sweep), "-o", str(site), "--keep-history", str(hist)]) == 0
    page = (site / "support.html").read_text()
    row = re.search(r"<tr><td><code>opinfo:sin</code></td>(.*?)</tr>", page, re.S).group(1)
    assert "✅ float32" in row and "❌ float16" in row and "opinfo.sin.s0[float16,static]@torch-cpu" in row
    assert INJECTED not in page and _key("torch-cpu") in page
    assert "opinfo" not in (site / "index.html").read_text() and "oi" not in {
        json.loads(gzip.decompress(p.read_bytes()).decode().splitlines()[0])["run_id"] for p in hist.glob("*.gz")}
