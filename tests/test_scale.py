"""Sharding, merge and the result cache (issue: sweep speed and scale)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.recipes import load_recipe
from harness.runner.matrix import expand, groups_of, shard
from harness.suites import load_suites

from .conftest import FIXTURES

VOLATILE = {"run_id", "worker_pid", "duration_s", "stages", "latency_ms", "times_ms", "load_ms", "peak_rss_mb", "memory_mb", "cached"}


def stable(path: Path) -> dict[str, dict]:
    lines = [json.loads(x) for x in path.read_text().splitlines()[1:]]
    return {r["id"]: {k: v for k, v in r.items() if k not in VOLATILE} for r in lines}


def test_shards_are_disjoint_complete_and_balanced() -> None:
    items = expand(load_suites(["ops"]), [load_recipe("portable"), load_recipe("xnnpack")])
    groups = groups_of(items)
    parts = [shard(groups, i, 4) for i in range(1, 5)]
    ids = [it.id for part in parts for g in part for it in g]
    assert sorted(ids) == sorted(it.id for it in items)  # complete and disjoint
    sizes = [sum(len(g) for g in part) for part in parts]
    assert max(sizes) - min(sizes) <= 2, sizes
    assert [it.id for g in shard(groups, 2, 4) for it in g] == [it.id for g in parts[1] for it in g]  # deterministic


def test_shards_balance_by_recorded_duration() -> None:
    items = expand(load_suites(["smoke"]), [load_recipe("portable")])
    groups = groups_of(items)
    slow = groups[0][0].id
    durations = {it.id: 1.0 for it in items} | {slow: 100.0}
    parts = [shard(groups, i, 2, durations) for i in (1, 2)]
    with_slow = next(p for p in parts if any(it.id == slow for g in p for it in g))
    assert sum(len(g) for g in with_slow) == 1  # the slow group gets a shard to itself


@pytest.mark.slow
def test_merged_shards_equal_an_unsharded_run(bti, tmp_path: Path) -> None:
    common = ["-s", "smoke", "-r", "portable", "-r", "xnnpack", "--no-reuse", "-j", "2"]
    assert bti("run", *common, "-o", str(tmp_path / "full")).code == 0
    for i in (1, 2):
        res = bti("run", *common, "--shard", f"{i}/2", "-o", str(tmp_path / f"s{i}"))
        assert res.code == 0, res.err
    res = bti("merge", str(tmp_path / "s1" / "results.jsonl"), str(tmp_path / "s2" / "results.jsonl"),
              "-o", str(tmp_path / "merged.jsonl"))
    assert res.code == 0, res.err
    s1, s2 = stable(tmp_path / "s1" / "results.jsonl"), stable(tmp_path / "s2" / "results.jsonl")
    assert s1 and s2 and not set(s1) & set(s2)
    assert stable(tmp_path / "merged.jsonl") == stable(tmp_path / "full" / "results.jsonl")
    merged_header = json.loads((tmp_path / "merged.jsonl").read_text().splitlines()[0])
    assert merged_header["shard"] is None and [m["shard"] for m in merged_header["merged_from"]] == ["1/2", "2/2"]
    overlap = bti("merge", str(tmp_path / "s1" / "results.jsonl"), str(tmp_path / "full" / "results.jsonl"),
                  "-o", str(tmp_path / "bad.jsonl"))
    assert overlap.code == 2 and "shards must be disjoint" in overlap.err
    lone = bti("merge", str(tmp_path / "s1" / "results.jsonl"), "-o", str(tmp_path / "bad.jsonl"))
    assert lone.code == 2 and lone.err.strip().startswith("bti: error: missing shard(s) 2/2: got 1 of 2"), lone.err
    assert len(lone.err.strip().splitlines()) == 1 and not (tmp_path / "bad.jsonl").exists()
    twice = tmp_path / "again.jsonl"
    twice.write_text((tmp_path / "s1" / "results.jsonl").read_text().replace('"id":"', '"id":"x'))
    dup = bti("merge", str(tmp_path / "s1" / "results.jsonl"), str(twice), "-o", str(tmp_path / "bad.jsonl"))
    assert dup.code == 2 and "shard 1/2 is also in" in dup.err, dup.err


@pytest.mark.slow
def test_cache_reuses_unchanged_items_and_reruns_a_changed_recipe(bti, tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    shutil.copy(FIXTURES.parent.parent / "recipes" / "xnnpack.yaml", recipes / "mine.yaml")
    (recipes / "mine.yaml").write_text((recipes / "mine.yaml").read_text().replace("name: xnnpack", "name: mine"))
    env = {"BTI_RECIPE_PATH": str(recipes), "BTI_CACHE_DIR": str(tmp_path / "cache")}
    args = ["run", "-s", "smoke", "-r", "portable", "-r", "mine", "--reuse", "-o", str(tmp_path / "out")]
    first = bti(*args, env=env)
    assert first.code == 0 and "(16 executed, 0 reused)" in first.err, first.err
    cold = stable(tmp_path / "out" / "results.jsonl")
    second = bti(*args, env=env)
    assert second.code == 0 and "(0 executed, 16 reused)" in second.err, second.err
    assert stable(tmp_path / "out" / "results.jsonl") == cold
    text = (recipes / "mine.yaml").read_text().replace("float32: {atol: 1.0e-4", "float32: {atol: 2.0e-4")
    (recipes / "mine.yaml").write_text(text)
    third = bti(*args, env=env)
    assert third.code == 0 and "(8 executed, 8 reused)" in third.err, third.err
    recs = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()[1:]]
    assert {r["recipe"] for r in recs if not r.get("cached")} == {"mine"}


@pytest.mark.slow
def test_workers_are_recycled_and_results_stay_intact(bti, tmp_path: Path) -> None:
    res = bti("run", "-s", "smoke", "-r", "portable", "--no-reuse", "-j", "1", "--max-items-per-worker", "2",
              "-o", str(tmp_path))
    assert res.code == 0, res.err
    recs = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()[1:]]
    assert len(recs) == 8 and all(r["status"] == "PASS" for r in recs)
    assert len({r["worker_pid"] for r in recs}) >= 4  # a fresh worker at least every 2 items
