"""The portal's store (DuckDB) against a plain reading of the history's rules, on random runs: interleaved suites,
items that come and go, repeated ids and rows in a run, two version stacks and recipe hashes, hostile spec hashes."""

from __future__ import annotations

import itertools
import json
import random
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from harness.report.runs import load_runs
from harness.report.store import opened
from harness.status import Status

STATUSES = ["PASS", "PASS", "PASS_UNDELEGATED", "FAIL_RUN", "FAIL_MISMATCH", "XFAIL", "SKIP", "UNAVAILABLE", "CRASH"]


def _outcome(status: str | None) -> str:
    return "other" if status is None else Status(status).group.outcome


def _cells(run: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A run's record per row: a later record of an id replaces the earlier in its place, then a row's last wins."""
    by_id: dict[str, dict[str, Any]] = {}
    for r in run:
        by_id[r["id"]] = r
    return {r["id"].rsplit("@", 1)[0]: r for r in by_id.values()}


def _oracle(runs: list[list[dict[str, Any]]], created: list[Any], keys: list[str]) -> dict[str, Any]:
    """One column's history read from the rules as the docs state them: ``runs`` are the column's runs, oldest first,
    each its records in file order (a later record of a row replaces an earlier one)."""
    recs = [_cells(run) for run in runs]
    points = [(sum(Status(r["status"]).is_pass for r in rr.values()), sum(not Status(r["status"]).did_not_run for r in rr.values()),
               sum(Status(r["status"]).is_failure for r in rr.values())) for rr in recs]
    changes, last = [], {}
    for i, rr in enumerate(recs):
        now = {row: _outcome(r["status"]) for row, r in rr.items()}
        if i:
            changes.append((sorted(r for r, o in now.items() if o == "fail" and last.get(r) == "pass"),
                            sorted(r for r, o in now.items() if o == "pass" and last.get(r) == "fail")))
        last.update({r: o for r, o in now.items() if o != "other"})
    newest = {row: (i, r) for i, rr in enumerate(recs) for row, r in rr.items()}
    ages = {}
    for row, (i, r) in newest.items():
        if _outcome(r["status"]) != "fail":
            continue
        since, streak, last_pass = i, 0, None
        for j in range(len(recs) - 1, -1, -1):
            o = _outcome(recs[j][row]["status"]) if row in recs[j] else "other"
            if o == "fail":
                since, streak = j, streak + 1
            elif o == "pass":
                last_pass = j
                break
        ages[row] = (since, streak, last_pass, max(created[-1] - created[since], timedelta(0)))
    same: dict[tuple[str, str], list[str]] = defaultdict(list)
    for i, rr in enumerate(recs):
        for row, r in rr.items():
            same[(row, json.dumps([keys[i], r.get("spec_hash")]))].append(r["status"])
    flaky: dict[str, set[str]] = defaultdict(set)
    for (row, _), group in same.items():
        seq = [o for o in map(_outcome, group) if o != "other"]
        if sum(a != b for a, b in itertools.pairwise(seq)) >= 2:
            flaky[row] |= set(group)
    return {"points": points, "changes": changes, "ages": ages, "flaky": {r: sorted(s) for r, s in flaky.items()}}


@pytest.mark.parametrize("seed", range(6))
def test_the_stores_history_is_the_rules_history(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    stacks = ["1.4.1", "1.5.1"]
    written: dict[str, list[tuple[int, list[dict[str, Any]]]]] = defaultdict(list)  # stack -> (day, records)
    for day in range(1, 13):
        stack = rnd.choice(stacks)
        suite = rnd.choice(["ops", "models", "both"])
        header = {"kind": "header", "schema": 1, "run_id": f"r{day}", "created": f"2026-11-{day:02d}T03:00:00+00:00",
                  "versions": {"torch": "2.14.1", "executorch": stack, "cpu": "host"},
                  "recipes": {"xnnpack": rnd.choice(["h1", "h1", "h1", ["h", 2]])}, "suites": [suite]}
        recs = []
        for n in range(rnd.randint(3, 14)):
            case = f"op.c{n}" if suite == "ops" or (suite == "both" and n % 2) else f"model.m{n}"
            if rnd.random() < 0.2:
                continue  # the item is absent from this run
            spec = rnd.choice(["s", "s", "s", None, {"x": 1}, "\0null", "jnull"])  # no two of them one key
            recs.append({"kind": "result", "schema": 1, "id": f"{case}[float32,static]@xnnpack", "recipe": "xnnpack",
                         "status": rnd.choice(STATUSES), "spec_hash": spec})
            if rnd.random() < 0.15:  # a retried item: its later record replaces the first
                recs.append({**recs[-1], "status": rnd.choice(STATUSES)})
            if rnd.random() < 0.2:  # another id naming the same row and recipe (a hand-edited file)
                first = recs[-1]
                recs.append({**first, "id": f"{case}[float32,static]@alias", "status": rnd.choice(STATUSES)})
                if rnd.random() < 0.5:  # and the first id again: it keeps its place, before the alias
                    recs.append({**first, "status": rnd.choice(STATUSES)})
        (tmp_path / f"r{day}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [header, *recs]))
        written[stack].append((day, recs))
    runs = load_runs([tmp_path])
    with opened(runs) as store:
        for col, col_runs in store.columns.items():
            stack = col.stack.split("executorch ")[1]
            assert [r.created.day for r in col_runs] == [d for d, recs in written[stack] if recs]
            days = [d for d, recs in written[stack] if recs]
            by_day = {r.created.day: r for r in col_runs}
            want = _oracle([recs for _, recs in written[stack] if recs], [by_day[d].created for d in days],
                           [by_day[d].versions_key + json.dumps(by_day[d].header["recipes"]["xnnpack"]) for d in days])
            h = store.history(col)
            assert [(p.passed, p.ran, p.failed) for p in h.points] == want["points"]
            assert [(broke, fixed) for _, _, broke, fixed in h.changes] == want["changes"]
            assert {row: (col_runs.index(a.since), a.streak, None if a.last_pass is None else col_runs.index(a.last_pass), a.age)
                    for row, a in h.ages.items()} == want["ages"]
            assert h.flaky == want["flaky"]
            newest = store.newest()[col]
            latest = {row: r for _, recs in written[stack] for row, r in _cells(recs).items()}
            assert {row: rec["status"] for row, (_, rec) in newest.items()} == {row: r["status"] for row, r in latest.items()}
