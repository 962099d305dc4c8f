"""``bti portal RUNS... -o site/``: a static site over many runs (no server, no network; GitHub Pages ready).

* ``index.html``: per column (a recipe on a machine) the newest run's counts, the plots, the failures
  past the 72-hour rule, and the matrix: suites and cases down, columns across. The matrix is data in
  the page (JSON) drawn a page of rows at a time, so 50,000 items stay usable; filters (status, recipe,
  op, model, text) live in the URL fragment.
* ``history.html``: pass rate over time, regressions and fixes between consecutive runs, failure ages,
  flips at the same versions.
* ``items/<hash>.html``: one page per item of each column's newest run, everything its record holds
  and the command that reproduces it.
* ``history.json``, ``matrix.json``: the same data for other tools.

Every page comes from a Jinja2 template with autoescape on; results text never becomes markup.
"""

from __future__ import annotations

import hashlib
import json
import math
import shlex
import shutil
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from harness.errors import UserError
from harness.report import history as hist
from harness.report import plots
from harness.report.runs import Column, Held, Run, compact, load_runs, prune, slim_record
from harness.report.safe import http_url
from harness.report.store import Store, opened
from harness.report.templating import render
from harness.results import Record, as_float, atomic_write_text, clean, status_of
from harness.status import Group, Status

STATUS_GROUPS = tuple(g.value for g in Group)
T = TypeVar("T")


# item pages: a column's items go to 256 files by their key's first byte (each page draws the item the URL fragment
# names from the JSON in it), so an item's link depends on its column and row only, never on what else is in the site
BUCKET_HEX = 2


def item_key(column: Column, row: str) -> str:
    return hashlib.sha1(f"{column.key}\0{row}".encode("utf-8", "replace")).hexdigest()[:16]


def _glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def reproduce(run: Run, rec: Record) -> str:
    """The command that runs this one item again (every value shell-quoted: ids come from results)."""
    axes = _dict(rec.get("axes"))
    cmd = ["bti", "run", "-s", str(rec.get("suite") or "ops"), "-r", str(rec.get("recipe")), "-k", _glob_escape(str(rec.get("case") or rec["id"]))]
    if axes.get("dtype"):
        cmd += ["--dtype", str(axes["dtype"])]
    if axes.get("shape"):
        cmd += ["--shape", str(axes["shape"])]
    up = run.header.get("upstream") or {}
    if up.get("sha"):
        cmd += ["--upstream-repo", str(up.get("repo") or ""), "--upstream-sha", str(up["sha"])]
    return " ".join(shlex.quote(c) for c in cmd)


def install_line(run: Run) -> str:
    v = run.header.get("versions") or {}
    pins = [f"{p}=={v[p]}" for p in ("torch", "executorch") if v.get(p) and v[p] != "?"]
    return "pip install " + " ".join(shlex.quote(p) for p in pins) if pins else ""


@dataclass
class Site:
    index: Path
    items: int
    runs: int
    columns: int
    seconds: float


def _stat(rec: Record, key: str) -> list[float]:
    """``key`` of each output of ``rec`` that holds a number (a hostile file's other values are skipped)."""
    vals = []
    for o in _list(rec.get("outputs")):
        if not isinstance(o, dict):
            continue
        try:
            v = as_float(o.get(key))
        except (TypeError, ValueError):
            continue
        if v is not None:
            vals.append(v)
    return vals


def _worst_abs(rec: Record) -> float | None:
    vals = [v if not math.isnan(v) else math.inf for v in _stat(rec, "max_abs")]
    return max(vals) if vals else None


def build(inputs: list[Path], out_dir: Path, keep_history: Path | None = None, title: str = "bti portal",
          history_days: float = 90.0, support_inputs: list[Path] | None = None) -> Site:
    """The site from ``inputs``; ``support_inputs`` (an OpInfo sweep's results) feed the operator support page only:
    not the matrix, the item pages or the history."""
    t0 = time.perf_counter()
    runs = load_runs(inputs)
    if not runs:
        raise UserError("no runs in the inputs")
    support_only: dict[Column, dict[str, tuple[Run, Record]]] = {}
    if support_inputs:
        with opened(load_runs(support_inputs)) as support_store:
            support_only = support_store.newest(_for_support)
    prune_history = _keep_history(runs, keep_history, history_days) if keep_history is not None else None
    with opened(runs) as store:
        for run in runs:  # the store holds every record now (and the history copies are written)
            run.held = Held()
        m = _Matrix(store, _recipe_info(runs))
        for ci, col in enumerate(m.cols):
            m.add_column(ci, col)
        now = max(r.created for r in runs)
        pending = _start(_plots, m.plot_args())  # matplotlib draws in a forked child while the pages render
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "items").mkdir(exist_ok=True)
        except OSError as exc:
            raise UserError(f"{out_dir}: cannot create the site directory: {exc.strerror}") from None
        common: dict[str, Any] = {"title": title, "generated": now.strftime("%Y-%m-%d %H:%M UTC"), "nruns": len(runs)}
        try:
            _write_site(out_dir, m, common, pending)
            _write_support(out_dir, m, common, support_only)
        except OSError as exc:
            raise UserError(f"{out_dir}: cannot write the site: {exc.strerror} (the inputs are untouched)") from None
    if prune_history is not None:  # last: the site's records were read from these files (an input may be a copy)
        prune_history()
    return Site(out_dir / "index.html", m.nitems, len(runs), len(m.cols), time.perf_counter() - t0)


def _for_support(rec: Record) -> Record:
    """What the operator support page reads of a record given with ``--support-results`` (never shown whole)."""
    whole = cast(dict[str, Any], rec)
    held: dict[str, Any] = {k: whole[k] for k in ("id", "recipe", "status", "device", "op") if k in whole}
    axes = rec.get("axes")
    held["axes"] = {"dtype": str(axes.get("dtype"))} if isinstance(axes, dict) else {}
    held["detail"] = str(rec.get("detail") or "")[:200]
    return cast(Record, held)


def _keep_history(runs: list[Run], keep_history: Path, history_days: float) -> Callable[[], None]:
    """A compact copy of every input run in ``keep_history``; returns what drops the copies older than
    ``history_days``, for after the site is built (a cell's record is read again from its file, which may be one)."""
    try:
        keep_history.mkdir(parents=True, exist_ok=True)
        before = set(keep_history.glob("*.jsonl.gz"))
        kept = {compact(run, keep_history) for run in runs} - before  # the copies this build wrote
    except OSError as exc:
        raise UserError(f"{keep_history}: cannot write the history copies: {exc.strerror}") from None
    # the cutoff never runs ahead of the wall clock (a runner with a skewed clock cannot wipe the history),
    # and the copies this build wrote stay (a run without a date is not dropped the moment it is kept)
    latest_run = min(max(r.created for r in runs), datetime.now(UTC))

    def drop() -> None:
        try:
            prune(keep_history, latest_run - timedelta(days=history_days), keep=kept)
        except OSError as exc:
            raise UserError(f"{keep_history}: cannot prune the history copies: {exc.strerror}") from None
    return drop


def _recipe_info(runs: list[Run]) -> dict[str, dict[str, Any]]:
    info: dict[str, dict[str, Any]] = {}
    for run in runs:
        for name, i in (run.header.get("recipe_info") or {}).items():
            if isinstance(i, dict):
                info[name] = {**info.get(name, {}), **i}
    return info


class _Matrix:
    """The matrix: one row per (suite, case[axes]); one cell per column, the row's newest record in that column
    (runs of other suites or subsets add up); with the figures the plots draw."""

    def __init__(self, store: Store, info: dict[str, dict[str, Any]]) -> None:
        self.store, self.info = store, info
        self.cols = store.columns  # each column's runs, oldest first
        self.histories = {c: store.history(c) for c in self.cols}
        self.rows: dict[str, dict[str, Any]] = {}
        self.cells: dict[str, list[Any]] = defaultdict(lambda: [None] * len(self.cols))
        self.col_meta: list[dict[str, Any]] = []
        self.sqnr: list[float] = []
        self.buckets: Counter[str] = Counter()
        self.ratios: dict[str, list[float]] = defaultdict(list)
        self.delegated: dict[str, float] = {}
        self.links: dict[tuple[Column, str], str] = {}
        self.chunks: dict[str, tuple[Column, list[tuple[str, Run, Record]]]] = {}
        self.newest = store.newest()  # the cells' records whole; the older ones stay in the store's columns
        self.nitems = sum(len(n) for n in self.newest.values())
        for col in self.cols:
            prefix = col.id
            for row in sorted(self.newest[col]):
                key = item_key(col, row)
                name = f"{prefix}-{key[:BUCKET_HEX]}.html"
                self.chunks.setdefault(name, (col, []))[1].append((row, *self.newest[col][row]))
                self.links[(col, row)] = f"items/{name}#{key}"

    def add_column(self, ci: int, col: Column) -> None:
        h = self.histories[col]
        run = self.cols[col][-1]  # the column's newest run
        counts: Counter[str] = Counter()
        stale = 0
        for row, (cell_run, rec) in self.newest[col].items():
            st = status_of(rec)
            counts[st.value] += 1
            meta = self.rows.setdefault(row, {"suite": str(rec.get("suite") or ""), "op": str(rec.get("op") or ""),
                                              "model": "" if rec.get("op") else str(rec.get("case") or row.split("[")[0])})
            flags = (["overdue"] if row in h.ages and h.ages[row].overdue else []) + (["flaky"] if row in h.flaky or st is Status.FLAKY else [])
            where = f"{st.value} · run {cell_run.run_id} · {cell_run.created.strftime('%Y-%m-%d %H:%M UTC')} · {cell_run.under_test}"
            if staleness := _stale(cell_run, run):  # an older run of this column holds the row: a newer run did not include it
                flags.append("stale")
                stale += 1
                where += f" · stale: {staleness}"
            self.cells[row][ci] = [st.value, st.group.value, self.links[(col, row)], " ".join(flags), where]
            self._figures(col, row, rec, bool(meta["model"]))
        i = self.info.get(col.recipe, {})
        self.col_meta.append({
            "key": col.key, "id": col.id,
            "recipe": col.recipe, "machine": col.machine, "stack": col.stack, "run": run.run_id,
            "created": run.created.strftime("%Y-%m-%d %H:%M UTC"), "under_test": run.under_test,
            "setup": http_url(i.get("setup")), "unavailable": i.get("unavailable") or "",
            "description": str(i.get("description") or ""), "runs": len(self.cols[col]),
            "counts": dict(sorted(counts.items())), "groups": dict(Counter(Status(s).group.value for s in counts.elements())),
            "passed": sum(n for s, n in counts.items() if Status(s).is_pass),
            "failing": sum(n for s, n in counts.items() if Status(s).is_failure),
            "total": sum(counts.values()), "overdue": len(h.overdue), "stale": stale})

    def _figures(self, col: Column, row: str, rec: Record, model: bool) -> None:
        worst = _worst_abs(rec)
        if worst is not None:
            self.buckets[plots.bucket_of(worst)] += 1
        self.sqnr.extend(v for v in _stat(rec, "sqnr_db") if not math.isnan(v))
        ratio = _dict(rec.get("baseline")).get("latency_ratio")
        if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and ratio > 0 and math.isfinite(ratio):
            self.ratios[col.key].append(float(ratio))
        part = _dict(rec.get("partition"))
        total = part.get("total_nodes")
        if model and isinstance(total, int) and total > 0 and isinstance(part.get("delegated_nodes"), int):
            self.delegated[f"{row} · {col.key}"] = 100.0 * min(max(part["delegated_nodes"], 0), total) / total

    def data(self) -> dict[str, Any]:
        order = sorted(self.rows, key=lambda r: (self.rows[r]["suite"], r))
        return {"columns": [c["key"] for c in self.col_meta], "ids": [c["id"] for c in self.col_meta],
                "rows": [[r, self.rows[r]["suite"], self.rows[r]["op"], self.rows[r]["model"], self.cells[r]] for r in order]}

    def plot_args(self) -> tuple[Any, ...]:
        return ({c["key"]: c["groups"] for c in self.col_meta}, dict(self.ratios), dict(self.buckets), self.sqnr,
                dict(sorted(self.delegated.items())),
                {c.key: [(p.run.created, p.rate) for p in h.points] for c, h in self.histories.items()})


def _write_site(out_dir: Path, m: _Matrix, common: dict[str, Any], pending: Callable[[], dict[str, str | None]]) -> None:
    data = m.data()
    overdue = [{"column": c.key, "row": a.row, "text": a.describe(), "page": m.links[(c, a.row)]}
               for c, h in m.histories.items() for a in h.overdue]
    ops = sorted({r["op"] for r in m.rows.values() if r["op"]})
    models = sorted({r["model"] for r in m.rows.values() if r["model"]})
    atomic_write_text(out_dir / "history.json", json.dumps([hist.summary(h) for h in m.histories.values()], indent=1))
    atomic_write_text(out_dir / "matrix.json", json.dumps(data, separators=(",", ":")))
    trails: dict[Column, dict[str, list[list[Any]]]] = {}
    for name, (col, items) in m.chunks.items():
        if col not in trails:  # the chunks come column by column
            trails = {col: m.store.trails(col)}
        atomic_write_text(out_dir / "items" / name, render("portal/item.html.j2", js="item.js", **common, col=col, data=clean(
            _chunk(col, items, m.cols[col], trails[col], m.histories[col], out_dir))))
    svg = pending()
    atomic_write_text(out_dir / "index.html", render(
        "portal/index.html.j2", js="portal.js", **common, columns=clean(m.col_meta), data=clean(data), svg=svg, overdue=overdue,
        ops=ops, models=models, fix_hours=int(hist.FIX_WITHIN.total_seconds() // 3600), nitems=m.nitems))
    _write_models(out_dir, m, common)
    atomic_write_text(out_dir / "history.html", render(
        "portal/history.html.j2", **common, histories=[_history_view(c, h, m.links) for c, h in m.histories.items()], svg=svg))


def _write_models(out_dir: Path, m: _Matrix, common: dict[str, Any]) -> None:
    """``models.html``: model × column (oota's table), each cell a link to the item's page, with agreement with the CPU
    reference, latency relative to torch-cpu on the same machine, and each column's setup notes."""
    from harness.report import models as mod

    links: dict[tuple[str, str], str] = {}
    cols = []
    for col, newest in m.newest.items():
        recs = []
        for row, (_, rec) in newest.items():
            links[(col.key, str(rec.get("id")))] = m.links[(col, row)]
            recs.append(rec)
        # torch-cpu's latency divides the latencies of the same machine and the same torch, executorch and torchao
        # (a stack's first parts; the rest names each recipe's own backend packages)
        cols.append((col.key, f"{col.machine}\0{col.device}\0{' · '.join(col.stack.split(' · ')[:3])}", recs))
    rows, cells = mod.cells(cols, lambda label, rec: links.get((label, str(rec.get("id"))), ""))
    meta = [c for c in m.col_meta if any(c["key"] in cells[r] for r in rows)]
    atomic_write_text(out_dir / "models.html", render("portal/models.html.j2", **common, rows=rows, cells=cells, columns=meta))


def _write_support(out_dir: Path, m: _Matrix, common: dict[str, Any],
                   more: dict[Column, dict[str, tuple[Run, Record]]]) -> None:
    """``support.html``: operator × column (a device's recipe on one machine and stack), the dtypes that pass, fail,
    are expected to fail or are skipped, and the first failing sample, linked to its item's page where it has one
    (``bti report --support``'s table, from the columns' newest records and ``more``: an OpInfo sweep's per-device
    view)."""
    from harness.report import support

    ops: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    keys = []
    for col in sorted({*m.newest, *more}, key=lambda c: c.key):
        newest = {**more.get(col, {}), **m.newest.get(col, {})}
        recs = [rec for _, rec in newest.values() if rec.get("op")]
        if not recs:
            continue
        keys.append(col.key)
        for (op, _), dtypes in support.table(recs).items():
            states = {state: sorted(d for d, c in dtypes.items() if c["state"] == state) for state in support.ORDER}
            first = next((c for _, c in sorted(dtypes.items()) if c["first_failure"]), None)
            link = m.links.get((col, str(first["first_failure"]).rsplit("@", 1)[0]), "") if first else ""
            ops[op][col.key] = {"states": {s: d for s, d in states.items() if d}, "first": first, "link": link}
    meta = [c for c in m.col_meta if c["key"] in keys]
    meta += [{"key": c.key, "recipe": c.recipe, "machine": c.machine, "stack": c.stack}
             for c in more if c.key in keys and c not in m.newest]
    atomic_write_text(out_dir / "support.html", render("portal/support.html.j2", **common, columns=meta,
                                                       ops=sorted(ops.items()), marks=SUPPORT_MARKS))


SUPPORT_MARKS = {"pass": "✅", "fail": "❌", "xfail": "⚠️", "skip": "⏭️"}


def _plots(args: tuple[Any, ...]) -> dict[str, str | None]:
    outcomes, ratios, buckets, sqnr, delegated, rate = args
    return {"outcomes": plots.outcomes(outcomes), "latency": plots.latency_cdf(ratios), "errors": plots.errors(buckets, sqnr),
            "delegated": plots.delegated(delegated), "rate": plots.pass_rate(rate)}


def _start(fn: Callable[[Any], T], arg: Any) -> Callable[[], T]:
    """Run ``fn(arg)`` in a forked child (the second core draws while this one renders); in process when
    a child cannot be had. The returned callable waits for the result."""
    import concurrent.futures
    import multiprocessing

    try:
        pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
        future = pool.submit(fn, arg)
    except (OSError, ValueError):
        result = fn(arg)
        return lambda: result

    def wait() -> T:
        try:
            return future.result()
        except concurrent.futures.process.BrokenProcessPool:
            return fn(arg)  # the child died (out of memory, killed): draw here instead
        finally:
            pool.shutdown()
    return wait


def _chunk(col: Column, items: list[tuple[str, Run, Record]], history: list[Run], trails: dict[str, list[list[Any]]],
           h: hist.ColumnHistory, site: Path) -> dict[str, Any]:
    """One item page's data: its items' records (the fields the portal shows, the trace cut to its tail)
    with their reproduce command, failure age and status in each run of the column."""
    runs = [[r.run_id, r.created.strftime("%Y-%m-%d %H:%M"), r.under_test] for r in history]
    newest = history[-1]
    out: dict[str, Any] = {}
    for row, run, rec in items:
        st = status_of(rec)
        slim = slim_record(rec, 4000, mark="…")
        slim["delegate_blobs"] = _list(rec.get("delegate_blobs"))
        age = h.ages.get(row)
        out[item_key(col, row)] = {
            "row": row, "status": st.value, "group": st.group.value, "rec": slim, "command": reproduce(run, rec), "install": install_line(run),
            "run": run.run_id, "under_test": run.under_test, "when": run.created.strftime("%Y-%m-%d %H:%M"),
            "stale": _stale(run, newest),
            "age": age.describe() if age else "", "overdue": bool(age and age.overdue), "flaky": h.flaky.get(row),
            "trail": trails.get(row, []),
            **(_repro(site, run, rec) if st.is_failure else {}),
        }
    return {"column": col.key, "runs": runs, "items": out}


def _repro(site: Path, run: Run, rec: Record) -> dict[str, str]:
    """A failure's standalone reproduction (``bti repro``, ExecuTorch's flows): its command, and the script ``bti run``
    wrote beside the run's results where there is one, copied into the site under a directory named by a hash of the
    run id and linked from the item page. Results are untrusted: a link is never followed, and only a file that starts
    as bti's scripts start, under the size cap, is copied."""
    from harness.repro import is_script, reproduced_status, script_name

    if rec.get("backend") != "executorch" or reproduced_status(rec) is None:
        return {}
    item = str(rec.get("id"))
    out = {"repro_command": f"bti repro {shlex.quote(item)} --results results.jsonl"}
    name = script_name(item)
    for source in run.sources:
        script = Path(source).parent / "repro" / name
        if not is_script(script):
            continue
        folder = hashlib.sha256(run.run_id.encode()).hexdigest()[:12]
        dest = site / "repro" / folder / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(script, dest)
        out["repro"] = f"../repro/{folder}/{name}"
        break
    return out


def _stale(run: Run, newest: Run) -> str:
    """How much older ``run`` is than its column's ``newest`` run ("" when it is not older): a stale cell's note."""
    if run.created >= newest.created:
        return ""
    return f"{hist.human(newest.created - run.created)} older than the column's newest run {newest.run_id}"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _history_view(col: Column, h: hist.ColumnHistory, links: dict[tuple[Column, str], str]) -> dict[str, Any]:
    return {
        "key": col.key,
        "points": [{"created": p.run.created.strftime("%Y-%m-%d %H:%M"), "run": p.run.run_id, "under_test": p.run.under_test,
                    "passed": p.passed, "ran": p.ran, "failed": p.failed, "rate": p.rate} for p in reversed(h.points)],
        "changes": [{"from": a.run_id, "to": b.run_id, "when": b.created.strftime("%Y-%m-%d %H:%M"), "under_test": b.under_test,
                     "broke": [(r, links.get((col, r), "")) for r in broke], "fixed": fixed}
                    for a, b, broke, fixed in reversed(h.changes)],
        "ages": [{"row": a.row, "text": a.describe(), "overdue": a.overdue, "page": links[(col, a.row)]}
                 for a in sorted(h.ages.values(), key=lambda a: -a.age)],
        "flaky": sorted(h.flaky.items()),
    }
