"""The model zoo (dynamo's three lists), the worker memory limit and the model table (``bti report --models``,
the portal's ``models.html``). The zoo's models run end to end in ``tests/test_e2e.py`` (both version pairs)."""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib.util
import json
import os
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cases.contract import REPRO_ON_REQUEST
from harness.status import Status
from harness.suites import load_suites, zoo
from tests.conftest import ROOT
from tests.test_portal import INJECTED, _header, _rec, _write

VISION = all(importlib.util.find_spec(m) is not None for m in ("timm", "torchvision"))


def test_the_zoo_holds_every_row_of_the_three_lists_under_their_own_names() -> None:
    cases = load_suites(["zoo"])
    assert Counter(c.spec["list"] for c in cases) == {"huggingface": 55, "timm": 18, "torchbench": 104}
    assert len({c.id for c in cases}) == len(cases)
    # real-size weights: `bti run --repro` writes no script for a row by itself (harness.repro), `bti repro ITEM` does
    assert all(REPRO_ON_REQUEST in c.tags for c in cases)
    names = {c.spec["list"]: set() for c in cases}
    for c in cases:
        names[c.spec["list"]].add(c.spec["model"])
    assert {"meta-llama/Llama-3.2-1B", "T5Small", "YituTechConvBert", "openai/gpt-oss-20b"} <= names["huggingface"]
    assert {"vit_base_patch14_dinov2.lvd142m", "adv_inception_v3"} <= names["timm"]
    assert {"vision_maskrcnn", "detectron2_maskrcnn", "hf_T5_generate", "yolov3", "timm_vovnet"} <= names["torchbench"]
    sizes = zoo.sizes()
    for c in cases:
        assert c.spec["task"] is not None and c.spec["check"] and c.spec["cost"] > 0, c.id
        if "unavailable" in c.spec:  # a row bti cannot build says why, naming the model
            assert c.spec["unavailable"].startswith(c.spec["model"] + ": ") and "requires" not in c.spec, c.id
        else:  # a buildable row declares what it imports, its size and the memory it needs
            assert c.spec["requires"] and c.spec["params"] == sizes[c.id]["params"] and c.spec["memory_gb"] >= zoo.MEMORY_BASE_GB, c.id
    buildable = Counter(c.spec["list"] for c in cases if "unavailable" not in c.spec)
    assert buildable["huggingface"] == 55 and buildable["timm"] == 18 and buildable["torchbench"] >= 40
    parts = [c.id for name in ("huggingface", "timm", "torchbench") for c in load_suites([f"zoo-{name}"])]
    assert sorted(parts) == sorted(c.id for c in cases)
    ci = load_suites(["models-ci"])
    assert sorted(c.spec["list"] for c in ci) == ["huggingface", "timm", "torchbench"]


def test_declared_memory_follows_the_parameter_count() -> None:
    by_id = {c.id: c for c in load_suites(["zoo"])}
    small, big = by_id["zoo.torchbench.resnet18"], by_id["zoo.huggingface.openai_gpt-oss-20b"]
    assert small.spec["memory_gb"] < 3 < 100 < big.spec["memory_gb"]
    assert zoo.memory_gb(2**30 / 4) == zoo.MEMORY_BASE_GB + zoo.MEMORY_FACTOR[0]  # 1 GiB of fp32 weights
    assert zoo.memory_gb(0, 2**30 / 4) == zoo.MEMORY_BASE_GB + zoo.MEMORY_FACTOR[1]  # 1 GiB of fp32 logits
    assert small.spec["memory_gb_without_export"] < small.spec["memory_gb"]  # eager holds fewer copies


@pytest.mark.skipif(not VISION, reason="timm and torchvision (the vision extra) are not installed in this venv")
def test_the_sizes_file_is_what_the_meta_device_measures() -> None:
    """``python -m harness.suites.zoo --sizes`` wrote it; building every model again on the meta device gives it back."""
    recorded = {k: {x: v[x] for x in ("params", "input", "outputs") if x in v} for k, v in zoo.sizes().items()}
    assert zoo.measure_sizes() == recorded


def test_a_model_declaring_more_memory_than_a_worker_may_use_is_skip_with_both_figures(bti, tmp_path: Path) -> None:
    res = bti("run", "-s", "zoo", "-r", "torch-cpu", "-r", "xnnpack", "-k", "zoo.huggingface.openai_gpt-oss-20b",
              "-k", "zoo.torchbench.yolov3", "--worker-memory", "20", "-o", str(tmp_path), "--no-reuse", "--no-report",
              "--allow-unverified")
    assert res.code == 0, res.err  # every item SKIP: nothing verified, allowed
    all_recs = list(map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines()[1:]))
    need = load_suites(["zoo"])
    lowered = next(r for r in all_recs if r["recipe"] == "xnnpack" and r["case"] == "zoo.huggingface.openai_gpt-oss-20b")
    declared = next(c.spec["memory_gb"] for c in need if c.id == lowered["case"])  # a lowering backend: the larger figure
    assert lowered["status"] == "SKIP" and f"needs about {declared:g} GB per worker (declared: memory_gb for executorch)" in lowered["detail"]
    recs = {r["case"]: r for r in all_recs if r["recipe"] == "torch-cpu"}
    big = recs["zoo.huggingface.openai_gpt-oss-20b"]
    declared = next(c.spec["memory_gb_without_export"] for c in need if c.id == big["case"])
    assert big["status"] == "SKIP" and f"needs about {declared:g} GB per worker (declared: memory_gb_without_export for torch-eager)" in big["detail"]
    assert "limit of 20 GB" in big["detail"]
    yolo = recs["zoo.torchbench.yolov3"]
    assert yolo["status"] == "UNAVAILABLE" and yolo["detail"].startswith("yolov3: TorchBench's own model code")


def test_a_worker_past_the_memory_limit_is_killed_and_its_item_says_out_of_memory(bti, tmp_path: Path) -> None:
    """A forked worker's RSS starts near the parent's (torch and executorch imported): a 0.2 GB limit is passed at once."""
    res = bti("run", "-s", "smoke", "-r", "portable", "-k", "op.add.*", "-j", "1", "--worker-memory", "0.2",
              "-o", str(tmp_path), "--no-reuse", "--no-report")
    recs = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()[1:]]
    assert recs and res.code == 1
    assert all(r["status"] == "CRASH" and "out of memory: the worker's RSS reached" in r["detail"]
               and "limit of 0.2 GB" in r["detail"] for r in recs), [r["detail"] for r in recs]
    assert all(zoo._OUT_OF_MEMORY.match(r["detail"]) for r in recs)  # the pool's words, as --peaks reads them


def test_the_default_worker_memory_limit_shares_90_percent_of_ram_among_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.env
    from harness.settings import resolve

    monkeypatch.setattr(harness.env, "total_memory_gb", lambda: 24.0)
    assert resolve({}).worker_memory_limit_gb(2) == 10.8 and resolve({}).worker_memory_limit_gb(1) == 21.6
    assert resolve({"BTI_WORKER_MEMORY_GB": "5"}).worker_memory_limit_gb(4) == 5.0  # the setting, whatever the jobs
    assert resolve({}, worker_memory_gb=3.0).worker_memory_limit_gb(1) == 3.0  # the flag wins


def test_settings_refuse_a_bad_worker_memory_in_one_line(bti) -> None:
    res = bti("run", "-s", "smoke", "-r", "portable", env={"BTI_WORKER_MEMORY_GB": "lots"})
    assert res.code == 2 and "BTI_WORKER_MEMORY_GB='lots': expected gigabytes" in res.err and "Traceback" not in res.err
    for value in ("nan", "0"):
        res = bti("run", "-s", "smoke", "-r", "portable", "--worker-memory", value)
        assert res.code == 2 and "--worker-memory" in res.err and "Traceback" not in res.err, res.err


def test_shard_costs_are_measured_seconds_else_a_capped_estimate_and_nothing_for_rows_not_built() -> None:
    by_id = {c.id: c for c in load_suites(["zoo"])}
    sizes = zoo.sizes()
    timed = next(i for i, v in sizes.items() if "seconds" in v)
    assert by_id[timed].spec["cost"] == sizes[timed]["seconds"]
    assert by_id["zoo.torchbench.yolov3"].spec["cost"] == 0.1  # UNAVAILABLE: settled at once
    untimed = [c for i, c in by_id.items() if i in sizes and "seconds" not in sizes[i]]
    assert untimed and all(0 < c.spec["cost"] <= zoo.ESTIMATE_CAP for c in untimed)
    assert by_id["zoo.huggingface.openai_gpt-oss-20b"].spec["cost"] == zoo.ESTIMATE_CAP


def test_a_row_s_own_timeout_follows_its_work_from_ten_minutes_to_an_hour() -> None:
    """10 s per million parameters times the input against 512 tokens or a 224-pixel image, within 600 s and an hour.
    An audio row's 3,000 frames are 1,500 tokens after Whisper's strided convolution, not a 3,000-pixel image's side:
    ``hf_Whisper`` (8 M parameters, 62 s on the portable kernels) had been given an hour."""
    timeout = {c.id: c.spec["timeout_s"] for c in load_suites(["zoo"])}
    assert timeout["zoo.torchbench.hf_Bert_large"] == 2848.0  # 285 M parameters at 512 tokens
    assert timeout["zoo.torchbench.resnet18"] == 600.0 and timeout["zoo.timm.vit_base_patch14_dinov2.lvd142m"] == 3600.0
    assert timeout["zoo.torchbench.hf_Whisper"] == 600.0  # 8.3 M x 1,500 / 512: 24 units
    assert timeout["zoo.torchbench.hf_distil_whisper"] == 3600.0  # 307 M x 1,500 / 512: 901 units


def test_a_row_costs_what_it_took_on_each_recipe_so_the_slow_recipes_weigh_in_the_shard_balance(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The weekly sweep balances its shards by cost before any duration is recorded. One figure per row counted
    BERT-large as 31 s on every recipe, where the portable kernels take most of an hour. A sweep's seconds per row and
    recipe (``--sizes --costs``, repeatable, the later sweep's kept) become the row's cost there; a recipe measured on
    three rows or more costs the others their base times the ratio of its sums; no cost passes the row's own timeout; a
    SKIP or UNAVAILABLE item took no time, a TIMEOUT its whole, and one that failed before its program ran (expected or
    not) says nothing of the row's cost there, where a program lowered for a runtime not here took its lowering; the shard balance reads each item's recipe. A row with
    no measured base (it SKIPs for its memory where measured) gets no factor, which would add phantom hours; its base is
    measured once it runs on torch-cpu or xnnpack. A figure that is not a finite number of seconds is none. The figures
    are scheduling, not the case's identity: ``spec_hash`` leaves them out."""
    from harness.cases.case import Axes, Item
    from harness.runner.matrix import shard
    from harness.suites import case_cost

    alexnet, resnet18, resnet50, mobilenet, vgg, squeeze, big = (f"zoo.torchbench.{n}" for n in (
        "alexnet", "resnet18", "resnet50", "mobilenet_v2", "vgg16", "squeezenet1_1", "resnet152"))
    header = _header("r", 29, executorch="1.5.1")
    first = _write(tmp_path / "first.jsonl", header, [
        _rec(alexnet, "portable", "PASS", op=None, duration_s=20.0), _rec(alexnet, "xnnpack", "PASS", op=None, duration_s=2.0),
        _rec(resnet18, "portable", "TIMEOUT", op=None, duration_s=30.0), _rec(resnet18, "arm-vgf-fp", "LOWERED", op=None, duration_s=7.0),
        _rec(resnet50, "portable", "PASS", op=None, duration_s=90.0), _rec(resnet50, "torch-cpu", "SKIP", op=None, duration_s=0.0),
        _rec(mobilenet, "qnn", "UNAVAILABLE", op=None, duration_s=0.0), _rec(squeeze, "xnnpack", "PASS", op=None, duration_s=4.0),
        _rec(squeeze, None, "PASS", op=None, duration_s=9.0), _rec(big, "portable", "PASS", op=None, duration_s=float("nan")),
        _rec(big, "arm-tosa-int", "XFAIL", op=None, duration_s=40.0, xfail={"status": "FAIL_QUANTIZE"}),
        _rec(big, "xnnpack-int8-static-per-tensor", "FAIL_LOWER", op=None, duration_s=3.0)])
    later = _write(tmp_path / "later.jsonl", header, [_rec(alexnet, "portable", "PASS", op=None, duration_s=40.0)])
    assert zoo.measured_costs(first) == {alexnet: {"portable": 20.0, "xnnpack": 2.0}, resnet18: {"portable": 30.0, "arm-vgf-fp": 7.0},
                                         resnet50: {"portable": 90.0}, squeeze: {"xnnpack": 4.0}}

    written = tmp_path / "sizes.json"
    image = {"input": [3, 224, 224]}
    written.write_text(json.dumps({alexnet: {"params": 1, "seconds": 2.0}, resnet18: {"params": 1, "seconds": 3.0},
                                   resnet50: {"params": 1, "seconds": 3.0}, mobilenet: {"params": 1, "seconds": 5.0},
                                   vgg: {"params": 1, "seconds": 1000.0}, squeeze: {"params": 1},
                                   big: {"params": 1, "recipe_seconds": {"portable": True, "xnnpack": -1.0}}}))
    monkeypatch.setattr(zoo, "SIZES", written)
    monkeypatch.setattr(zoo, "measure_sizes", lambda: {alexnet: {"params": 61_000_000, **image}, resnet18: {"params": 11_000_000, **image},
                                                       resnet50: {"params": 25_000_000, **image}, mobilenet: {"params": 3_500_000, **image},
                                                       vgg: {"params": 138_000_000, **image}, squeeze: {"params": 1_200_000, **image},
                                                       big: {"params": 60_000_000, **image}})
    assert zoo.main(["--sizes", "--costs", str(first), "--costs", str(later)]) == 0
    kept = json.loads(written.read_text())
    assert kept[alexnet]["recipe_seconds"] == {"portable": 40.0, "xnnpack": 2.0} and kept[alexnet]["seconds"] == 2.0
    assert "recipe_seconds" not in kept[mobilenet] and kept[mobilenet]["seconds"] == 5.0
    assert kept[squeeze] == {"params": 1_200_000, **image, "recipe_seconds": {"xnnpack": 4.0}, "seconds": 4.0}
    assert "seconds" not in kept[big]  # nothing measured: True and -1 are no figures

    assert zoo.recipe_factors(kept) == {"portable": 20.0}  # (40 + 30 + 90) / (2 + 3 + 3); xnnpack on two rows only
    cases = {c.id: c for c in zoo.zoo_cases(only=(alexnet, resnet18, resnet50, mobilenet, vgg, big))}
    assert "costs" not in cases[big].spec and case_cost(cases[big], "portable") == cases[big].spec["cost"]  # the estimate
    assert cases[alexnet].spec_hash == dataclasses.replace(cases[alexnet], spec={**cases[alexnet].spec, "costs": {}}).spec_hash
    # VGG's 1,000 s x 20 would take 20,000 s on portable, past any timeout: it keeps the row's, which bounds its cost
    assert cases[vgg].spec["timeout_s"] == 1380.0 and "timeouts" not in cases[vgg].spec
    assert cases[vgg].spec["costs"] == {"portable": 1380.0}
    assert "timeouts" not in cases[alexnet].spec  # 3 x 40 s on portable is within the row's own 600 s
    assert cases[vgg].spec_hash == dataclasses.replace(cases[vgg], spec={**cases[vgg].spec, "timeouts": {"x": 1.0}}).spec_hash
    assert cases[mobilenet].spec["costs"] == {"portable": 100.0}
    assert cases[alexnet].spec["costs"] == {"portable": 40.0, "xnnpack": 2.0}
    assert case_cost(cases[alexnet], "portable") == 40.0 and case_cost(cases[alexnet], "torch-cpu") == 2.0 == case_cost(cases[alexnet])

    # on portable and torch-cpu: mobilenet 105 s, resnet50 93, alexnet 42, resnet18 33 (one figure a row: 10, 6, 4, 6)
    axes = Axes("float32", "static")
    groups = [[Item(cases[i], r, axes) for r in ("portable", "torch-cpu")] for i in (alexnet, resnet18, resnet50, mobilenet)]
    shards = [{g[0].case.id for g in shard(groups, i, 2)} for i in (1, 2)]
    assert shards == [{mobilenet, resnet18}, {resnet50, alexnet}]  # 138 s and 135 s (one figure a row: 147 and 126)


def test_a_row_slow_on_one_recipe_has_three_times_its_seconds_there_within_the_hour() -> None:
    """ELECTRA's QA took 287 s alone on the TOSA reference model against the row's 600 s, and timed out beside three
    other processes: its time there is three times its seconds. A recipe within a tenth of the row's keeps the row's,
    and so does one whose seconds reach the hour (it would time out anyway); none passes the hour."""
    seconds = {"arm-tosa-int": 287.4, "xnnpack": 5.0, "close": 210.0, "hour": 3600.0, "past": 4000.0, "long": 1500.0}
    assert zoo._recipe_timeouts(600.0, seconds) == {"arm-tosa-int": 862.0, "long": 3600.0}
    assert zoo._recipe_timeouts(3600.0, seconds) == {}  # a row of an hour has no more anywhere
    electra = next(c for c in load_suites(["zoo"]) if c.id == "zoo.huggingface.ElectraForQuestionAnswering")
    assert electra.spec["timeout_s"] == 600.0 and electra.spec["timeouts"]["arm-tosa-int"] >= 3 * 287.0
    assert electra.spec["costs"]["arm-tosa-int"] == zoo.sizes()[electra.id]["recipe_seconds"]["arm-tosa-int"]


def test_the_weekly_sweep_fits_its_shards_by_the_shipped_estimates() -> None:
    """The Saturday sweep runs the operator and model suites and the zoo on 20 recipes, one worker per shard, each job
    stopped at 6 hours. By the shipped estimates (each zoo row's cost per recipe where a sweep measured it; the recipes
    not measured yet at the row's base), the plan's largest shard stays under 70 % of that limit: the estimates leave
    recipes out (the TOSA reference model's), and a busier machine takes longer. 24 shards no longer did (2026-11-29)."""
    from benchmarks.zoo_shards import weekly_plan
    from harness.recipes import load_recipe
    from harness.runner.matrix import expand, groups_of, shard_loads

    suites, recipes, shards, limit_s = weekly_plan()
    groups = groups_of(expand(load_suites(suites), [load_recipe(r) for r in recipes]))
    loads = shard_loads(groups, shards)
    assert len(recipes) == 20 and "zoo" in suites and limit_s == 6 * 3600
    assert max(loads) < 0.7 * limit_s, (shards, round(max(loads) / 3600, 2), round(sum(loads) / 3600, 1))


def test_a_row_killed_out_of_memory_declares_a_floor_for_that_recipe_and_version_pair_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate from parameters and outputs missed ALBERT (xxlarge), whose worker passed 21.5 GB on 1.4.1's XNNPACK
    against 7.0 declared, where 1.5.1's dynamic int8 recipe runs it in 13.2 GB. A sweep's out-of-memory kills become a
    floor for that recipe on that version pair, named by its executorch release (``--sizes --peaks``), above the limit
    the kill passed; the next sweep there on a worker as small skips the row saying so, and every other recipe and
    release keeps the estimate. An eager recipe's kill (MT5 on ONNX Runtime, killed at 9.1 GB every week) is a floor
    like any other; other crashes and other statuses add nothing; the file keeps its floors and only raises them."""
    from harness.recipes import load_recipe
    from harness.runner.run import _memory_skip
    from harness.versions import installed_version, release

    oom = "out of memory: the worker's RSS reached {} GB, above the worker memory limit of {} GB (--worker-memory, ...)"
    header = _header("r", 29, executorch="1.4.1")
    albert = "zoo.huggingface.AlbertForMaskedLM"
    results = _write(tmp_path / "r.jsonl", header, [
        _rec(albert, "xnnpack", "CRASH", op=None, detail=oom.format(9.0, 9.0)),  # rounded: more than the limit
        _rec(albert, "xnnpack-int8-static-per-channel", "CRASH", op=None, detail=oom.format(13.2, 13.0)),
        _rec("zoo.huggingface.T5Small", "torch-cpu", "CRASH", op=None, detail=oom.format(30.0, 29.0), backend="torch-eager"),
        _rec("zoo.huggingface.T5Small", "xnnpack", "CRASH", op=None, detail="worker died with SIGABRT"),
        _rec("zoo.timm.mobilenetv2_100", "xnnpack", "FAIL_RUN", op=None, detail=oom.format(40.0, 39.0)),
    ])
    assert zoo.measured_peaks(results) == {albert: {"xnnpack@1.4": 9.1, "xnnpack-int8-static-per-channel@1.4": 13.3},
                                           "zoo.huggingface.T5Small": {"torch-cpu@1.4": 30.1}}

    # the sizes file: floors kept, raised by new evidence, never lowered
    written = tmp_path / "sizes.json"
    written.write_text(json.dumps({albert: {"params": 1, "floors": {"xnnpack@1.4": 21.6, "portable@1.5": 3.0}}}))
    monkeypatch.setattr(zoo, "SIZES", written)
    monkeypatch.setattr(zoo, "measure_sizes", lambda: {albert: {"params": 206_000_000, "input": [512]},
                                                       "zoo.torchbench.alexnet": {"params": 61_000_000, "input": [224]}})
    assert zoo.main(["--sizes", "--peaks", str(results)]) == 0
    kept = json.loads(written.read_text())
    assert kept[albert]["floors"] == {"portable@1.5": 3.0, "xnnpack-int8-static-per-channel@1.4": 13.3, "xnnpack@1.4": 21.6}
    assert "floors" not in kept["zoo.torchbench.alexnet"]
    before = written.read_text()
    assert zoo.main(["--sizes", "--peaks", str(tmp_path / "missing.jsonl")]) == 2  # one line (stderr), the file untouched
    assert written.read_text() == before

    # the spec carries them; the skip reads the one for its recipe and the installed release
    here = release(installed_version("executorch"))
    sizes = {albert: {"params": 206_000_000, "input": [512], "floors": {f"xnnpack@{here}": 21.6, "xnnpack@0.1": 99.0}}}
    monkeypatch.setattr(zoo, "sizes", lambda: sizes)
    case = next(c for c in zoo.zoo_cases() if c.id == albert)
    assert case.spec["memory_gb"] == zoo.memory_gb(206_000_000) < 13.0
    item = SimpleNamespace(case=case)
    said = _memory_skip(item, load_recipe("xnnpack"), 13.0)
    assert said and said.startswith(f"needs about 21.6 GB per worker (measured: a worker killed past it on xnnpack with "
                                    f"executorch {here}), above the worker memory limit of 13 GB"), said
    assert _memory_skip(item, load_recipe("xnnpack-int8-dynamic-per-channel"), 13.0) is None  # the estimate there
    assert _memory_skip(item, load_recipe("xnnpack"), 22.0) is None
    sizes[albert]["floors"] = {f"onnxruntime@{here}": 21.6, f"torch-cpu@{here}": 21.6}  # eager recipes' own floors
    item = SimpleNamespace(case=next(c for c in zoo.zoo_cases() if c.id == albert))
    for name in ("onnxruntime", "torch-cpu"):
        said = _memory_skip(item, load_recipe(name), 13.0)
        torch_here = release(installed_version("torch"))
        assert said and said.startswith(f"needs about 21.6 GB per worker (measured: a worker killed past it on {name} "
                                        f"with the executorch {here} pair (torch {torch_here} here)), above"), said
    assert _memory_skip(item, load_recipe("xnnpack"), 13.0) is None
    sizes[albert]["floors"] = {"xnnpack@0.1": 99.0}  # another release's floor: the estimate here
    assert _memory_skip(SimpleNamespace(case=next(c for c in zoo.zoo_cases() if c.id == albert)), load_recipe("xnnpack"), 13.0) is None


def _model_records() -> list[dict]:
    lat = {"latency_ms": {"median": 10.0}}
    return [
        _rec("zoo.timm.a", "torch-cpu", "PASS", op=None, accuracy={"top1_agreement": 1.0}, **lat),
        _rec("zoo.timm.a", "xnnpack", "PASS", op=None, accuracy={"top1_agreement": 0.5}, latency_ms={"median": 2.5}),
        _rec("zoo.torchbench.b", "torch-cpu", "PASS", op=None, outputs=[{"max_abs": 3e-6}], **lat),
        _rec("zoo.torchbench.b", "xnnpack", "FAIL_EXPORT", op=None, detail=INJECTED),
        _rec("zoo.torchbench.c", "xnnpack", "UNAVAILABLE", op=None, detail="c: TorchBench's own model code"),
        _rec("op.add.a", "xnnpack", "PASS"),  # an operator: not a row of the model table
    ]


def test_the_model_table_has_agreement_latency_ratio_and_setup_notes(tmp_path: Path, bti) -> None:
    from harness.report import models

    header = _header("r1", 20, recipes=("torch-cpu", "xnnpack"))
    header["recipe_info"]["torch-cpu"] = "not a mapping"  # a hostile header: ignored, never a traceback
    header["recipe_info"]["onnxruntime"] = {"setup": "https://ok)<img src=https://evil/ping>[Approve](https://evil"}
    recs = [*_model_records(), _rec("zoo.timm.a", "onnxruntime", "FAIL_RUN", op=None, detail="=HYPERLINK(\"https://evil\")")]
    path = _write(tmp_path / "run" / "results.jsonl", header, recs)
    res = bti("report", str(path), "-o", str(tmp_path / "rep"), "--models", "--format", "md")
    assert res.code == 0, res.err
    md = (tmp_path / "rep" / "models.md").read_text()
    assert "| model | `onnxruntime` | `torch-cpu` | `xnnpack` |" in md
    assert "| `zoo.timm.a` | ❌ run | ✅ (top-1 100%) | ✅ (top-1 50%, 0.25× cpu) |" in md
    assert "| `zoo.torchbench.b` | — | ✅ (max|Δ| 3e-06) | ❌ export |" in md and "| `zoo.torchbench.c` | — | — | ⛔ |" in md
    assert "op.add" not in md and "<script>" not in md and "https://example.com/xnnpack-setup" in md
    assert "javascript:" not in md and "evil" not in md and "<img" not in md  # hostile setup links are dropped
    rows = (tmp_path / "rep" / "models.csv").read_text().splitlines()
    assert "zoo.timm.a,xnnpack,PASS,top-1 50%,0.25," in rows
    assert "zoo.timm.a,onnxruntime,FAIL_RUN,,,\"'=HYPERLINK(\"\"https://evil\"\")\"" in rows  # no formula for a spreadsheet
    order, _ = models.cells([("x", "m", list(reversed(_model_records())))])
    assert order == ["zoo.timm.a", "zoo.torchbench.b", "zoo.torchbench.c"]  # by case id: each list's rows together


def test_the_portal_models_page_links_each_cell_to_its_item(tmp_path: Path, bti) -> None:
    path = _write(tmp_path / "run" / "results.jsonl", _header("r1", 20, recipes=("torch-cpu", "xnnpack")), _model_records())
    res = bti("portal", str(path), "-o", str(tmp_path / "site"))
    assert res.code == 0, res.err
    page = (tmp_path / "site" / "models.html").read_text()
    assert "<script>document.title" not in page and "&lt;script&gt;" in page  # the detail is text in a title attribute
    links = [ln.split("#")[0] for ln in re.findall(r'href="(items/[^"]+)"', page)]
    assert len(links) == 5 and all((tmp_path / "site" / link).is_file() for link in links)
    assert "0.25× cpu" in page and 'href="https://example.com/xnnpack-setup"' in page


def test_a_killed_workers_scratch_directory_is_removed_by_pid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed mid-lowering (out of memory, timeout) never runs its own clean-up: its scratch directory is named
    by its pid, and the pool removes it when it reaps the worker (``Pool._remove`` calls ``remove_scratch``)."""
    import multiprocessing as mp
    import os
    import signal
    import tempfile

    from harness.backends.executorch import scratch_tempdir
    from harness.env import remove_scratch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def child(conn) -> None:  # lowering, as far as the temp directory can tell
        with scratch_tempdir() as scratch:
            (scratch / "model.mlpackage").write_text("x" * 1000)
            conn.send(str(scratch))
            signal.pause()

    parent, end = mp.get_context("fork").Pipe()
    proc = mp.get_context("fork").Process(target=child, args=(end,))
    proc.start()
    scratch = Path(parent.recv())
    other = tmp_path / f"bti-lower-{os.getpid()}-keep"  # another live process's scratch stays
    other.mkdir()
    proc.kill()
    proc.join()
    assert scratch.is_dir() and scratch.name.startswith(f"bti-lower-{proc.pid}-")  # the kill left it behind
    remove_scratch(proc.pid)
    assert not scratch.exists() and other.is_dir()


def test_the_zoo_s_known_failures_name_real_cases_owners_and_recipes() -> None:
    """zoo_expected.yaml parses as recipe xfail rules; every rule names a zoo case that exists, an owner, and where it
    holds; the judge gives each recipe only its own rules (eager CPU none: it passes them all)."""
    from harness.recipes import load_recipe

    ids = {c.id for c in load_suites(["zoo"])}
    entries = zoo._expected()
    assert len(entries) >= 10
    shipped = {p.stem for p in (ROOT / "recipes").glob("*.yaml")}
    for recipes, backends, excepted, rule in entries:
        assert any(fnmatch.fnmatchcase(i + "[float32,static]", rule.match) for i in ids), rule.match
        assert rule.statuses and ("Owner:" in rule.reason or "found by bti" in rule.reason), rule.match
        assert recipes != ("*",) or backends, rule.match  # never every recipe: eager CPU passes these
        assert all(any(fnmatch.fnmatchcase(r, e) for r in shipped) for e in excepted), (rule.match, excepted)
    case = next(c for c in load_suites(["zoo"]) if c.id == "zoo.huggingface.GoogleFnet")
    on_xnnpack = zoo.judge(case, "float32", load_recipe("xnnpack")).rules
    assert [r.describe() for r in on_xnnpack] == ["FAIL_LOWER matching /_fft_c2c/"]
    (on_ort,) = zoo.judge(case, "float32", load_recipe("onnxruntime")).rules
    assert on_ort.expects(Status.FAIL_MISMATCH, "output[0]: max_abs 0.0005499 against fp64 exceeds atol 0.0001")
    assert not on_ort.expects(Status.FAIL_MISMATCH, "output[0]: max_abs 0.01 against fp64 exceeds atol 0.0001")  # a change
    assert zoo.judge(case, "float32", load_recipe("torch-cpu")).rules == ()
    # the Arm TOSA flow lowers with IR validity off, as upstream's ArmTester: the FFT stays on the CPU and the row passes
    # there (2026-11-29), so the rule of the other ExecuTorch recipes excepts it; the int8 recipe has its rounding's
    assert zoo.judge(case, "float32", load_recipe("arm-tosa-fp")).rules == ()
    assert [r.describe() for r in zoo.judge(case, "float32", load_recipe("arm-tosa-int")).rules] == [
        "FAIL_MISMATCH matching /max_abs 0[.][0-4][0-9]* against the quantized program exceeds [(]a model[)](?!.*; and )/"]


def test_a_zoo_rule_s_recipe_keys_are_lists_or_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`recipes`, `backends` and `except_recipes` are lists of names: a bare string or a number is one line that names
    the rule and the key, not a traceback or a string taken letter by letter."""
    from harness.errors import SpecError

    for bad in ("arm-tosa-fp", 3):
        path = tmp_path / f"expected-{bad}.yaml"
        path.write_text(f'- {{match: "zoo.huggingface.GoogleFnet[[]*", except_recipes: {bad}, status: FAIL_LOWER, '
                        'message: x, reason: "Owner: x"}\n')
        monkeypatch.setattr(zoo, "EXPECTED", path)
        with pytest.raises(SpecError, match=r"GoogleFnet.*`except_recipes` must be a list of names or globs$"):
            zoo._expected.__wrapped__()  # past the cache: this file, not the shipped one


def test_a_known_zoo_failure_is_xfail_and_another_failure_is_not(tmp_path: Path) -> None:
    from harness.cases.case import Axes, Item
    from harness.recipes import load_recipe
    from harness.verdict import _source_xfail

    case = next(c for c in load_suites(["zoo"]) if c.id == "zoo.huggingface.GoogleFnet")
    item = Item(case, "xnnpack", Axes("float32", "static"))
    rules = _source_xfail(item, load_recipe("xnnpack"))
    assert any(r.expects(Status.FAIL_LOWER, "lower: ... aten._fft_c2c.default is not in the Core ATen opset") for r in rules)
    assert not any(r.expects(Status.FAIL_LOWER, "lower: RuntimeError: something else") for r in rules)
    assert not any(r.expects(Status.CRASH, "_fft_c2c") for r in rules)


@pytest.mark.parametrize("row", ["zoo.torchbench.hf_distil_whisper", "zoo.huggingface.AlbertForQuestionAnswering",
                                 "zoo.huggingface.AlbertForMaskedLM"])
def test_a_row_past_its_time_on_the_portable_kernels_is_expected_there_only(row: str) -> None:
    """One call of distil-Whisper took more than 40 CPU-minutes on ``portable`` (the weekly sweep's two cannot fit the
    row's hour); ALBERT QA had no result within its 2,058 s (2.5 TFLOP a pass, its weights shared by 12 layers): the
    pool's TIMEOUT is XFAIL there, and on XNNPACK (minutes) it would be a change. BERT's, as slow, would be a change."""
    from harness.cases.case import Axes, Item
    from harness.recipes import load_recipe
    from harness.verdict import Outcome, decide

    cases = {c.id: c for c in load_suites(["zoo"])}
    for case_id, recipe, status in ((row, "portable", "XFAIL"), (row, "xnnpack", "TIMEOUT"),
                                    ("zoo.huggingface.BertForMaskedLM", "portable", "TIMEOUT")):
        case = cases[case_id]
        said = f"no result within {case.spec['timeout_s']:g}s (the case's timeout_s, longer than --timeout)"
        rec = decide(Item(case, recipe, Axes("float32", "static")), load_recipe(recipe),
                     Outcome(fixed=Status.TIMEOUT, fixed_detail=said), "r", 1, None)
        assert rec["status"] == status, (case_id, recipe, rec["status"], rec.get("detail"))


def test_batch_norm_statistics_are_estimated_on_seeded_batches_so_random_logits_stay_in_range() -> None:
    """A deep random network with untrained statistics (mean 0, variance 1: batch norm is an identity) grows its
    activations layer by layer; estimated on seeded batches, the same weights give outputs of a trained network's
    range. The estimate is a cumulative average (momentum None while estimating, restored after), nothing else is put
    in train mode (dropout stays off), and a model without batch norm is left alone."""
    import torch

    from harness.suites.zoo_builders import estimate_batch_norm

    def net() -> torch.nn.Module:
        torch.manual_seed(0)
        layers: list[torch.nn.Module] = []
        for _ in range(12):
            layers += [torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8, momentum=0.3), torch.nn.Dropout(0.5)]
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), *layers).eval()
        with torch.no_grad():  # weights that grow the activations ×3 a layer, as untrained deep networks do
            for conv in model[1::3]:
                conv.weight.mul_(5)
        return model

    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    batches = [(torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(s)),) for s in (2, 3)]
    untrained, estimated = net(), net()
    last = estimated[-2]
    seen: list[torch.Tensor] = []
    hook = last.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach().clone()))
    assert estimate_batch_norm(estimated, batches) == 12
    hook.remove()
    with torch.no_grad():
        before, after = untrained(x), estimated(x)
    assert before.abs().max() > 1e3 * after.abs().max()  # the untrained statistics let the outputs grow
    assert 0.1 < after.std() < 10
    assert isinstance(last, torch.nn.BatchNorm2d) and last.momentum == 0.3 and not last.training
    assert len(seen) == len(batches) and int(last.num_batches_tracked) == len(batches)
    # a cumulative average of what the layer saw in both batches (momentum 0.3 would weigh the second batch more)
    torch.testing.assert_close(last.running_mean, torch.stack([t.mean((0, 2, 3)) for t in seen]).mean(0))
    torch.testing.assert_close(last.running_var, torch.stack([t.var((0, 2, 3)) for t in seen]).mean(0))
    assert not estimated.training and not estimated[3].training  # dropout stayed off: the outputs are deterministic
    with torch.no_grad():
        torch.testing.assert_close(estimated(x), after)
    plain = torch.nn.Linear(4, 4)
    assert estimate_batch_norm(plain, [(torch.randn(2, 4),)]) == 0


@pytest.mark.skipif(not VISION, reason="the vision extra (timm, torchvision) is not installed")
def test_a_zoo_row_with_batch_norm_is_built_with_estimated_statistics_the_same_every_time() -> None:
    import torch

    from harness.cases.case import Axes

    case = next(c for c in load_suites(["zoo"]) if c.id == "zoo.timm.mobilenetv2_100")
    one, two = zoo.build(case, Axes("float32", "static"), 0), zoo.build(case, Axes("float32", "static"), 0)
    norms = [m for m in one.module.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and all(int(m.num_batches_tracked) == 2 for m in norms)
    assert not torch.equal(norms[-1].running_var, torch.ones_like(norms[-1].running_var))
    for a, b in zip(one.module.state_dict().values(), two.module.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with torch.no_grad():
        logits = one.module(*one.example)
    assert logits.shape == (1, 1000) and 0.05 < float(logits.std()) < 20


def test_rejudge_holds_a_zoo_record_to_the_zoo_s_own_rules_on_its_unwrapped_message(tmp_path: Path) -> None:
    """``benchmarks/rejudge.py`` judges as the verdict does: a recipe with no rule for the item falls back to the case
    source's (the zoo's) rules, matched against the stage's own detail and error message, not the verdict's wrapping."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    fnet = "zoo.huggingface.GoogleFnet[float32,static]@xnnpack"
    reason = "FNet lowers _fft_c2c"  # the wrapping names the rule's message: only the unwrapped detail is judged
    # as a run records them: the item's case and axes beside its id
    where = {"recipe": "xnnpack", "suite": "zoo", "case": "zoo.huggingface.GoogleFnet", "axes": {"dtype": "float32", "shape": "static"}}
    records = [
        {"kind": "header"},
        {"id": fnet, **where, "status": "FAIL_LOWER",
         "detail": "lower: SpecViolationError", "error": {"message": "aten._fft_c2c.default is not in the Core ATen opset"}},
        {"id": fnet, **where, "status": "XFAIL",
         "detail": f"FAIL_LOWER: lower: RuntimeError: something else [xfail: {reason}]",
         "xfail": {"status": "FAIL_LOWER", "reason": reason, "expects": "FAIL_LOWER matching /_fft_c2c/"}},
    ]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rejudge.py"), str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    # the first is held by the zoo's FNet rule through its error message; the second's own message (the rule's name
    # for the failure only in the verdict's wrapping) no longer matches it
    assert out.stdout.splitlines()[-1] == "xnnpack: 1 unexpected (1 XFAIL, 1 FAIL_LOWER)"
    assert "unexpected: FAIL_LOWER " + fnet + " 'lower: RuntimeError: something else'" in out.stdout


def test_rejudge_without_a_header_judges_a_zoo_record_by_its_own_facts(tmp_path: Path) -> None:
    """A file with no header (records cut from a run) still judges a zoo rule's ``when:`` by the facts each record kept
    (``facts``), not by this machine's: TorchBench's MobileNetV3-large on `openvino-int8` is expected where torch's
    oneDNN ran AMX only, so the same record is held on an `amx` record and unexpected on an `avx2` one, on any machine."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    item = "zoo.torchbench.mobilenet_v3_large[float32,static]@openvino-int8"
    where = {"recipe": "openvino-int8", "suite": "zoo", "case": "zoo.torchbench.mobilenet_v3_large",
             "axes": {"dtype": "float32", "shape": "static"}, "status": "FAIL_MISMATCH",
             "detail": "quantizer: output[0]: the quantized program's SQNR against fp32 9.74 dB < floor 10 dB (the delegate "
                       "matches its quantized program)"}
    lines = {}
    for isa in ("amx", "avx2"):
        path = tmp_path / f"{isa}.jsonl"
        path.write_text(json.dumps({"id": item, **where, "facts": {"torch-onednn-isa": isa}}) + "\n")
        out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rejudge.py"), str(path)], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        lines[isa] = (out.returncode, out.stdout.splitlines()[-1] if out.stdout else out.stderr)
    assert lines == {"amx": (0, "openvino-int8: 0 unexpected (1 XFAIL)"),
                     "avx2": (1, "openvino-int8: 1 unexpected (1 FAIL_MISMATCH)")}, lines


def test_rejudge_says_bad_input_in_one_line(tmp_path: Path) -> None:
    """A results file that is not JSON lines, or a recipe whose rules file does not load: one line and exit 2."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    def rejudge(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rejudge.py"), str(path)], cwd=ROOT,
                              capture_output=True, text=True, timeout=300, env={**os.environ, **env})

    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"kind": "header"}\n{"id": "op.add\n')
    mine = tmp_path / "recipes"
    mine.mkdir()
    (mine / "mine.yaml").write_text("name: mine\nbackend: executorch\nxfail:\n  - include: broken\n")
    (mine / "rules").mkdir()
    (mine / "rules" / "broken.yaml").write_text('xfail:\n  - {match: "op.*", status: FAIL_RUN, reason: "x "y"}\n')
    record = {"id": "op.add.base[float32,static]@mine", "recipe": "mine", "suite": "ops", "status": "PASS"}
    good = tmp_path / "results.jsonl"
    good.write_text(json.dumps({"kind": "header"}) + "\n" + json.dumps(record) + "\n")
    for path, env in ((torn, {}), (tmp_path / "missing.jsonl", {}), (good, {"BTI_RECIPE_PATH": str(mine)})):
        out = rejudge(path, **env)
        assert out.returncode == 2 and out.stderr.startswith("rejudge: "), (path, out.stderr)
        assert len(out.stderr.splitlines()) == 1 and "Traceback" not in out.stderr, out.stderr
    assert "broken.yaml" in out.stderr  # the last: the rules file that does not load is named


def test_rejudge_finds_a_stale_rule_on_a_lowered_item(tmp_path: Path) -> None:
    """A LOWERED item (not run here) under a rule that expects lowering to fail is an XPASS to rejudge as to the verdict,
    whether it was recorded LOWERED (before the rule went stale) or XPASS; a rule that leaves the recipe out says
    nothing of it. FNet lowers on Core ML only to fail there, and lowers on Ethos-U, which its FFT rule leaves out."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    def record(recipe: str, status: str, **more: object) -> dict[str, object]:
        return {"id": f"zoo.huggingface.GoogleFnet[float32,static]@{recipe}", "recipe": recipe, "suite": "zoo",
                "case": "zoo.huggingface.GoogleFnet", "axes": {"dtype": "float32", "shape": "static"}, "status": status,
                "detail": "lowered and serialized; not run here: no runtime", **more}

    stale = {"status": None, "reason": "r", "expects": "FAIL_LOWER", "lowered": "no runtime"}
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"kind": "header", "packages": {"executorch": "1.5.1", "coremltools": "9.0", "torch": "2.14.1"}},
        record("coreml", "LOWERED"), record("coreml", "XPASS", xfail=stale), record("arm-ethos-u55", "LOWERED")]))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rejudge.py"), str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    assert "arm-ethos-u55: 0 unexpected (1 LOWERED)" in out.stdout.splitlines(), out.stdout
    assert "coreml: 2 unexpected (2 XPASS)" in out.stdout.splitlines(), out.stdout


def test_rejudge_holds_a_crash_to_the_stage_its_rule_names(tmp_path: Path) -> None:
    """Vela's crash on MobileViT-S is expected in the lowering (``stage: lower``): rejudge holds a recorded crash there
    and not one recorded in the run, nor one whose record does not say (written before ``died_in``), as the verdict
    does; and the row lowered on the U55 would be the rule gone stale."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    def record(status: str, **more: object) -> dict[str, object]:
        return {"id": "zoo.timm.mobilevit_s[float32,static]@arm-ethos-u55", "recipe": "arm-ethos-u55", "suite": "zoo",
                "case": "zoo.timm.mobilevit_s", "axes": {"dtype": "float32", "shape": "static"}, "status": status, **more}

    crash = "worker died with SIGSEGV (in ethosu/vela/vela.py:137 in process_regor) (worker log: w.log)"
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"kind": "header", "packages": {"executorch": "1.5.1", "ethos-u-vela": "5.2.0", "torch": "2.14.1"}},
        record("CRASH", detail=crash, died_in="lower"), record("CRASH", detail=crash, died_in="run"),
        record("CRASH", detail=crash), record("LOWERED", detail="lowered and serialized; not run here: no FVP")]))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rejudge.py"), str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    assert out.stdout.splitlines()[-1] == "arm-ethos-u55: 3 unexpected (2 CRASH, 1 XFAIL, 1 XPASS)", out.stdout
    # the record from before ``died_in`` says why it is not held (once: the crash in the run gets no such line)
    assert out.stdout.count("the record does not say the stage it died in; the rule for a crash in lower would hold it") == 1


@pytest.mark.parametrize("precision, last", [("bf16", "openvino: 0 unexpected (1 XFAIL)"),
                                             ("f32", "openvino: 1 unexpected (1 FAIL_MISMATCH)"),
                                             (None, "")])
def test_rejudge_holds_a_machine_limited_rule_to_the_facts_the_run_recorded(tmp_path: Path, precision: str | None,
                                                                            last: str) -> None:
    """A run from a machine whose OpenVINO computes at bf16 keeps its bf16 xfail wherever it is judged again; the same
    record from an f32 machine is a failure (``when:``, recipe_info.<recipe>.facts). A run that did not record the fact
    (written before a rule named it) is judged by this machine's, and rejudge says so."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    facts = {"openvino-cpu-precision": precision} if precision else {}
    header = {"kind": "header", "recipe_info": {"openvino": {"facts": facts}}}
    rec = {"id": "op.mm.square[float32,static]@openvino", "recipe": "openvino", "suite": "ops", "status": "FAIL_MISMATCH",
           "detail": "output[0]: max_abs 0.026 against fp64 exceeds", "partition": {"partitioned": True, "delegated_nodes": 1}}
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(header) + "\n" + json.dumps(rec) + "\n")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rejudge.py"), str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    said = "the run did not record the machine fact openvino-cpu-precision: judged by this machine's"
    assert (said in out.stderr) == (precision is None), out.stderr
    if last:
        assert out.stdout.splitlines()[-1] == last, out.stdout + out.stderr


@pytest.mark.parametrize("executorch, last", [("1.4.1", "xnnpack-int8-dynamic-per-channel: 0 unexpected (1 XFAIL)"),
                                              ("1.5.1", "xnnpack-int8-dynamic-per-channel: 1 unexpected (1 FAIL_LOWER)")])
def test_rejudge_holds_a_version_limited_rule_to_the_versions_the_run_recorded(tmp_path: Path, executorch: str,
                                                                               last: str) -> None:
    """A run on executorch 1.4.1 keeps its 1.4 rules wherever it is judged again (``versions:``, the header's
    ``packages``): max_pool2d without a stride fails to lower there and is fixed in 1.5.1, whichever is installed (the
    1.4.1 case fails from the 1.5 venv without it; the 1.5.1 case is its control). A package the header does not name
    is this install's, and rejudge says so."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    header = {"kind": "header", "packages": {"executorch": executorch}}
    rec = {"id": "op.max_pool2d.no_stride_regression[float32,static]@xnnpack-int8-dynamic-per-channel",
           "recipe": "xnnpack-int8-dynamic-per-channel", "suite": "ops", "status": "FAIL_LOWER",
           "detail": "lower: IndexError: tuple index out of range (raised at generic_node_configs.py:352 in check_constraints)"}
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(header) + "\n" + json.dumps(rec) + "\n")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rejudge.py"), str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.stdout.splitlines()[-1] == last, out.stdout + out.stderr
    assert "rejudge: the run did not record the package executorch" not in out.stderr
    header["packages"] = {}
    path.write_text(json.dumps(header) + "\n" + json.dumps(rec) + "\n")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rejudge.py"), str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert "rejudge: the run did not record the package executorch: judged by this install's" in out.stderr, out.stderr
