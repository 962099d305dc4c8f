"""Every record of every run in the portal's inputs, as columns in DuckDB (torch-free): the matrix's cells and each
column's history (pass rate, regressions, failure ages, flips) are queries over them.

A year of nightly sweeps is tens of millions of records. Python objects per record grow with every run; here a record
is one row of a table of integers (its strings, repeated in every run, are coded once: ``_Codes``), and the history
is a handful of window-function queries that run in C++ on every core. Only the newest record of each
cell is read again whole, from its file (``newest``); the JSONL stays the contract and the artifact.

Why DuckDB rather than pyarrow: both hold columns; the history is grouping and ``lag`` over each item's runs, which
DuckDB states in SQL and pyarrow's compute functions do not have (it would leave the loops to Python). The database is
in memory; past its memory limit it spills to a private temporary directory, removed on ``close``.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from harness.report.history import Age, ColumnHistory, Point
from harness.report.runs import Column, Run, stack_of
from harness.results import Record, records_at
from harness.status import Status

# a record's status as the history reads it: its outcome (pass, fail or other) and what it counts towards
STATUSES = [(s.value, s.group.outcome, s.is_pass, not s.did_not_run, s.is_failure) for s in Status]
STATUS_NAME = [s.value for s in Status]
STATUS_CODE = {name: i for i, name in enumerate(STATUS_NAME)}
TRAIL = 30  # an item page shows its status in the column's last 30 runs


class _Codes:
    """Strings as integer codes, so that DuckDB holds integers (1.5 M records: ~0.1 GB, against ~0.7 GB as strings)."""

    def __init__(self) -> None:
        self.code: dict[str, int] = {}
        self.text: list[str] = []

    def of(self, values: list[str]) -> Any:
        code = self.code
        out = np.fromiter((code.setdefault(v, len(code)) for v in values), np.int32, len(values))
        self.text.extend(itertools.islice(code, len(self.text), None))  # the new ones, in the order they were coded
        return out


class Store:
    """The records of ``runs`` (``load_runs``'s, oldest first) by column (``Column``: a recipe on a machine and a
    software stack), one record per row and run (the run's last)."""

    def __init__(self, runs: list[Run], memory_limit: str = "2GB") -> None:
        import duckdb

        self.runs = runs
        self._tmp = tempfile.TemporaryDirectory(prefix="bti-store-")
        self.db = duckdb.connect(":memory:", config={
            "memory_limit": memory_limit, "temp_directory": self._tmp.name,
            "autoinstall_known_extensions": False, "autoload_known_extensions": False})  # no network, ever
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    def _load(self) -> None:
        runs = self.runs
        self.rows, self.ids, self.srcs, self._specs, self._vkeys = _Codes(), _Codes(), _Codes(), _Codes(), _Codes()
        self._col: dict[Column, int] = {}
        self._col_runs: dict[int, list[int]] = defaultdict(list)
        self.db.execute("CREATE TABLE statuses (status INTEGER, outcome VARCHAR, passed BOOLEAN, ran BOOLEAN, failed BOOLEAN)")
        self.db.executemany("INSERT INTO statuses VALUES (?, ?, ?, ?, ?)", [(STATUS_CODE[s], *rest) for s, *rest in STATUSES])
        # c: one record per column, row and run, with its outcome and the run's place among its column's runs (ci)
        self.db.execute("CREATE TABLE c (col INTEGER, run INTEGER, ci INTEGER, row INTEGER, id INTEGER, status INTEGER, "
                        "spec INTEGER, src INTEGER, line BIGINT, vkey INTEGER, outcome VARCHAR, passed BOOLEAN, ran BOOLEAN, "
                        "failed BOOLEAN)")
        for i, run in enumerate(runs):  # oldest first
            if len(run.held):
                self._insert(i, run)
        order = sorted(self._col, key=lambda c: c.key)
        self.columns = {col: [runs[i] for i in self._col_runs[self._col[col]]] for col in order}  # oldest first
        self.db.execute("""
            CREATE TABLE newest AS
            SELECT col, row, max(run) AS run, arg_max(id, run) AS id, arg_max(src, run) AS src,
                   arg_max(line, run) AS line, arg_max(outcome, run) AS outcome
            FROM c GROUP BY col, row""")

    def _insert(self, i: int, run: Run) -> None:
        """Run ``i``'s records into ``c``: one per column and row (the run's last: two ids may name one row)."""
        held = run.held
        # each (recipe, device) of the run: its column, and the key a flip is counted within (the software and the
        # recipe's hash, as JSON: the hashes come from results files and may be any JSON value)
        pairs: dict[tuple[str, str], int] = {}
        local = np.fromiter((pairs.setdefault(p, len(pairs)) for p in zip(held.recipe, held.device, strict=True)),
                            np.int32, len(held))
        cols, places, keys = [], [], []
        for recipe, device in pairs:
            col = self._col.setdefault(Column(recipe, run.machine, device, stack_of(run, recipe)), len(self._col))
            if not self._col_runs[col] or self._col_runs[col][-1] != i:
                self._col_runs[col].append(i)
            cols.append(col)
            places.append(len(self._col_runs[col]) - 1)
            keys.append(json.dumps([run.versions_key, (run.header.get("recipes") or {}).get(recipe)], default=str))
        col_of, row_of = np.array(cols, np.int32)[local], self.rows.of(held.row)
        _, last = np.unique(((col_of.astype(np.int64) << 32) | row_of)[::-1], return_index=True)
        keep = np.sort(len(held) - 1 - last)
        line = np.frombuffer(held.line, np.int64) if len(held) else np.zeros(0, np.int64)
        self.db.register("data", {  # DuckDB reads a dict of numpy arrays in place
            "col": col_of[keep], "ci": np.array(places, np.int32)[local][keep], "row": row_of[keep],
            "id": self.ids.of(held.id)[keep], "spec": self._specs.of(held.spec)[keep], "src": self.srcs.of(held.src)[keep],
            "line": line[keep], "vkey": self._vkeys.of(keys)[local][keep],
            "status": np.fromiter((STATUS_CODE[s] for s in held.status), np.int32, len(held))[keep]})
        self.db.execute("INSERT INTO c SELECT col, ?, ci, row, id, status, spec, src, line, vkey, s.outcome, s.passed, "
                        "s.ran, s.failed FROM data JOIN statuses s USING (status)", [i])
        self.db.unregister("data")

    def close(self) -> None:
        self.db.close()
        self._tmp.cleanup()

    def history(self, column: Column) -> ColumnHistory:
        """What the column's runs say over time, its failures' ages measured to its own newest run."""
        col, runs, rows = self._col[column], self.columns[column], self.rows.text
        h = ColumnHistory(column)
        for run, passed, ran, failed in self.db.execute(
                "SELECT run, count(*) FILTER (passed), count(*) FILTER (ran), count(*) FILTER (failed) FROM c WHERE col = ? "
                "GROUP BY run ORDER BY run", [col]).fetchall():
            h.points.append(Point(self.runs[run], passed, ran, failed))
        h.changes = self._changes(col, runs)
        now = runs[-1].created
        for row, last_pass, since, streak in self.db.execute("""
                WITH lp AS (SELECT row, max(run) FILTER (outcome = 'pass') AS last_pass FROM c WHERE col = $1 GROUP BY row)
                SELECT n.row, lp.last_pass, min(c.run), count(*)
                FROM newest n JOIN lp USING (row) JOIN c ON c.col = n.col AND c.row = n.row
                WHERE n.col = $1 AND n.outcome = 'fail' AND c.outcome = 'fail' AND c.run > coalesce(lp.last_pass, -1)
                GROUP BY n.row, lp.last_pass""", [col]).fetchall():
            first = self.runs[since]
            h.ages[rows[row]] = Age(rows[row], first, None if last_pass is None else self.runs[last_pass],
                              max(now - first.created, timedelta(0)), streak)
        h.ages = dict(sorted(h.ages.items()))
        # a flip: the outcome changed at least twice between records of the same software, recipe and case spec
        h.flaky = {rows[row]: sorted(STATUS_NAME[s] for s in statuses) for row, statuses in self.db.execute("""
                WITH seq AS (SELECT row, vkey, spec, outcome <> lag(outcome) OVER (PARTITION BY row, vkey, spec ORDER BY run) AS flip
                             FROM c WHERE col = $1 AND outcome <> 'other'),
                     g AS (SELECT row, vkey, spec FROM seq GROUP BY ALL HAVING count(*) FILTER (flip) >= 2)
                SELECT row, list(DISTINCT status) FROM c JOIN g USING (row, vkey, spec) WHERE col = $1 GROUP BY row""",
                [col]).fetchall()}
        h.flaky = dict(sorted(h.flaky.items()))
        return h

    def _changes(self, col: int, runs: list[Run]) -> list[tuple[Run, Run, list[str], list[str]]]:
        """Between each two consecutive runs of the column, the rows that went passing → failing and failing → passing,
        each against its own previous pass or fail in the column, wherever that was (runs of other suites or subsets in
        between neither hide nor fake one)."""
        broke: dict[int, list[int]] = defaultdict(list)
        fixed: dict[int, list[int]] = defaultdict(list)
        for ci, row, outcome in self.db.execute("""
                SELECT ci, row, outcome FROM (
                    SELECT ci, row, outcome, lag(outcome) OVER (PARTITION BY row ORDER BY run) AS prev
                    FROM c WHERE col = ? AND outcome <> 'other')
                WHERE outcome <> prev ORDER BY ci, row""", [col]).fetchall():
            (broke if outcome == "fail" else fixed)[ci].append(row)

        def text(codes: list[int]) -> list[str]:  # sorted by the rows' text, as the pages list them
            return sorted(self.rows.text[r] for r in codes)
        return [(runs[i - 1], runs[i], text(broke[i]), text(fixed[i])) for i in range(1, len(runs))]

    def trails(self, column: Column) -> dict[str, list[list[Any]]]:
        """Each row's status in the column's last ``TRAIL`` runs that hold it: [the run's place in the column, status]."""
        out: dict[str, list[list[Any]]] = {}
        for row, places, statuses in self.db.execute(f"""
                SELECT row, list(ci ORDER BY ci), list(status ORDER BY ci) FROM (
                    SELECT row, ci, status FROM c WHERE col = ?
                    QUALIFY row_number() OVER (PARTITION BY row ORDER BY ci DESC) <= {TRAIL})
                GROUP BY row""",
                [self._col[column]]).fetchall():
            out[self.rows.text[row]] = [[i, STATUS_NAME[s]] for i, s in zip(places, statuses, strict=True)]
        return out

    def newest(self, keep: Callable[[Record], Record] | None = None) -> dict[Column, dict[str, tuple[Run, Record]]]:
        """Each column's cells: every row's newest record in the column (runs of other suites or subsets add up, a newer
        run of the same item supersedes an older one) with its run, read whole again from its file, each file once;
        ``keep``: what to hold of each."""
        wanted: dict[int, dict[int, list[tuple[int, int, int]]]] = defaultdict(lambda: defaultdict(list))
        ids: dict[int, dict[int, str]] = defaultdict(dict)
        for col, row, run, rid, src, line in self.db.execute("SELECT col, row, run, id, src, line FROM newest").fetchall():
            wanted[src][line].append((col, row, run))
            ids[src][line] = self.ids.text[rid]
        by_code = list(self._col)
        out: dict[Column, dict[str, tuple[Run, Record]]] = {c: {} for c in self.columns}
        for src, lines in wanted.items():
            for lineno, rec in records_at(Path(self.srcs.text[src]), ids[src]):
                held = rec if keep is None else keep(rec)
                for col, row, run in lines[lineno]:
                    out[by_code[col]][self.rows.text[row]] = (self.runs[run], held)
        return {col: dict(sorted(cells.items())) for col, cells in out.items()}  # by row: the same whatever the files' order


@contextmanager
def opened(runs: list[Run]) -> Iterator[Store]:
    store = Store(runs)
    try:
        yield store
    finally:
        store.close()
