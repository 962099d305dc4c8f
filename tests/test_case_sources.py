"""Case sources register like backends: built-ins, a vendor's through the ``bti.case_sources`` entry point
(a real installed distribution, found by importlib.metadata), clashes refused, and shards balanced by the
source's cost."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.cases.case import Axes, Case, Item
from harness.runner.matrix import shard
from harness.suites import BUILTIN, case_cost, load_suites, sources

VENDOR = '''
from harness.cases.case import Case
from harness.cases.contract import BaseCaseSource, Built, Judgement


def render(header, records):  # the vendor's own results format: one line per item
    return "".join(f"{r['case']},{r['recipe']},{r['status']}\\n" for r in records)


class VendorModels(BaseCaseSource):  # the defaults: requires (), no warm discovery, no prefetch, cost 1
    name = "vendor-models"
    description = "a vendor's own model list"
    kinds = ("vendor",)
    whole_models = True
    report_formats = {"vendor-csv": ("vendor.csv", "vendor_pkg.bti:render")}

    def discover(self):
        return [Case(id=f"model.vendor_mlp.{v}", suite=self.name, kind="vendor", spec={"hidden": h}, op=None,
                     tags=("vendor",), source="vendor_pkg") for v, h in (("v1", 8), ("wide", 128))]

    def build(self, case, axes, seed):
        import torch

        torch.manual_seed(seed)
        module = torch.nn.Sequential(torch.nn.Linear(4, case.spec["hidden"]), torch.nn.ReLU()).eval()
        x = (torch.randn(2, 4, generator=torch.Generator().manual_seed(seed)),)
        return Built(module, x, x, None)

    def judge(self, case, dtype, recipe):  # the source's own word on an item, without touching bti's core
        if case.spec["hidden"] > 64 and recipe.backend != "vendor":
            return Judgement(skip="the wide MLP needs the vendor's NPU memory (vendor_pkg)")
        return None

    def cost(self, case):
        return 42.0


class VendorFormat:  # a suite file format of the vendor's own: a top-level `vendor_models:` list of hidden sizes
    def reads(self, doc, path):
        return isinstance(doc, dict) and "vendor_models" in doc

    def load(self, path, options):
        import yaml

        return [Case(id=f"model.vendor_mlp.h{h}", suite=path.stem, kind="vendor", spec={"hidden": h}, op=None,
                     tags=("vendor",), source=str(path)) for h in yaml.safe_load(path.read_text())["vendor_models"]]

    def summary(self, cases):
        return f"ok (vendor models), {len(cases)} models"


class Clash(VendorModels):
    name = "clash"
    kinds = ("op",)


class NoJudge:  # written before judge() was part of the Protocol
    name, description, kinds, requires, warm_discovery, whole_models = "no-judge", "", ("nj",), (), False, False

    def prefetch(self):
        pass

    def discover(self):
        return []

    def build(self, case, axes, seed):
        raise NotImplementedError

    def cost(self, case):
        return 1.0


class NoBuild:  # no build(): not a case source at all
    name, description, kinds, requires, warm_discovery, whole_models = "no-build", "", ("nb",), (), False, False

    def prefetch(self):
        pass

    def discover(self):
        return []

    def cost(self, case):
        return 1.0
'''


def _dist(root: Path, entries: str) -> Path:
    """A minimal installed distribution (a dist-info with entry_points.txt) under ``root``."""
    (root / "vendor_pkg").mkdir(parents=True)
    (root / "vendor_pkg" / "__init__.py").write_text("")
    (root / "vendor_pkg" / "bti.py").write_text(VENDOR)
    info = root / "vendor_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[bti.case_sources]\n{entries}\n")
    return root


def _bti(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, env=env, timeout=600)


def test_builtin_sources_and_real_size_hf_suite() -> None:
    reg = sources()
    assert {s.name for s in BUILTIN} <= set(reg)
    kinds = [k for s in reg.values() for k in s.kinds]
    assert len(kinds) == len(set(kinds))  # a kind belongs to one source
    full = load_suites(["hf-models-full"])
    names = {c.spec["model"] for c in full}
    assert {"BertForMaskedLM", "GPT2ForSequenceClassification", "T5Small", "DistilBertForMaskedLM", "RobertaForCausalLM",
            "AlbertForMaskedLM", "BartForConditionalGeneration", "ElectraForQuestionAnswering", "LayoutLMForMaskedLM",
            "MobileBertForMaskedLM"} <= names
    assert all(c.spec["task"] in ("lm", "classifier") and c.spec["check"] for c in full)  # each states its task and check
    bart = next(c for c in full if c.spec["model"] == "BartForConditionalGeneration")
    assert bart.spec["seq"] == 1024 and case_cost(bart) > 100 * case_cost(load_suites(["smoke"])[0])


def test_hf_models_full_is_a_view_of_the_zoo_under_its_former_ids(capfd: pytest.CaptureFixture[str]) -> None:
    """hf-models-full's cases are zoo rows under aliases: built and judged as the row they stand for."""
    from harness.recipes import load_recipe
    from harness.suites import case_judgement, zoo

    full = {c.id: c for c in load_suites(["hf-models-full"])}
    assert capfd.readouterr().err.count("aliases of the zoo's zoo.huggingface.<name> until 2027-06-01") == 1  # said once
    rows = {c.id: c for c in zoo.zoo_cases()}
    assert len(full) == 11
    for alias, case in full.items():
        row = rows[case.spec["zoo"]]
        assert alias == f"model.{row.spec['model']}.full" and case.kind == row.kind == "zoo"
        assert {k: v for k, v in case.spec.items() if k != "zoo"} == row.spec  # the zoo's spec, nothing of its own
    fnet = zoo.zoo_cases(only=("zoo.huggingface.GoogleFnet",))[0]  # a row with known failures, seen through an alias
    alias = dataclasses.replace(fnet, id="model.GoogleFnet.full", spec={**fnet.spec, "zoo": fnet.id})
    recipe = load_recipe("xnnpack")
    want = case_judgement(fnet, "float32", recipe)
    assert want.rules and len(case_judgement(alias, "float32", recipe).rules) == len(want.rules)
    from harness.cases.case import Item
    from harness.verdict import _source_xfail

    for case in (fnet, alias):  # the rules hold the alias's own items, as they hold the row's
        held = _source_xfail(Item(case, "xnnpack", Axes("float32", "static")), recipe)
        assert [r.reason for r in held] == [r.reason for r in want.rules], case.id


@pytest.mark.slow
def test_an_alias_builds_the_zoo_row() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from harness.suites import build_case

    alias = next(c for c in load_suites(["hf-models-full"]) if c.spec["model"] == "ElectraForQuestionAnswering")
    row = next(c for c in load_suites(["zoo"]) if c.id == alias.spec["zoo"])
    a, b = build_case(alias, Axes("float32", "static"), 0), build_case(row, Axes("float32", "static"), 0)
    assert all(torch.equal(x, y) for x, y in zip(a.example, b.example, strict=True))
    sa, sb = a.module.state_dict(), b.module.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_harness_cases_is_torch_free() -> None:
    code = "import sys, harness.cases.case, harness.cases.suite, harness.cases.generate, harness.cases.yamlload; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def test_shards_balance_by_source_cost() -> None:
    ops = load_suites(["smoke"])
    big = next(c for c in load_suites(["hf-models-full"]) if c.spec["model"] == "BartForConditionalGeneration")
    cases: list[Case] = [big, *ops]
    groups = [[Item(c, "portable", Axes("float32", "static"))] for c in cases]
    a, b = shard(groups, 1, 2), shard(groups, 2, 2)
    assert [g[0].case.id for g in a] == [big.id]  # the real-size model is a shard's whole load, the ops the other's
    assert len(b) == len(ops)


def test_a_group_heavier_than_a_shard_s_share_is_split_into_its_items() -> None:
    """A group (one case on every recipe) runs in one worker, which exports once. A large zoo row on 20 recipes came to
    6.25 hours by the measured costs, past a weekly job's 6: a group costing more than a shard's fair share is split
    into its items, each item once, so the shards even out; lighter groups stay whole, and the parts that land on one
    shard run as one group. A run with a baseline does not split (each item compares with the baseline's outputs)."""
    from harness.runner.matrix import shard_loads

    ops = load_suites(["smoke"])
    big = next(c for c in load_suites(["zoo"]) if c.id == "zoo.huggingface.BartForConditionalGeneration")
    recipes = ("portable", "xnnpack", "torch-cpu", "onnxruntime")
    groups = [[Item(c, r, Axes("float32", "static")) for r in recipes] for c in (big, *ops)]
    parts = [shard(groups, i, 2) for i in (1, 2)]
    ids = [it.id for part in parts for g in part for it in g]
    assert sorted(ids) == sorted(it.id for g in groups for it in g)  # each item once
    assert all(len([g for g in part if g[0].case.id == big.id]) == 1 for part in parts)  # on both shards, whole on each
    assert all(len(g) == len(recipes) for part in parts for g in part if g[0].case.id != big.id)  # the others whole
    loads = shard_loads(groups, 2)
    assert max(loads) - min(loads) <= case_cost(big, "portable")
    assert [len(g) for g in shard(groups, 1, 1)] == [len(recipes)] * len(groups)  # one shard: nothing to split
    kept = [shard(groups, i, 2, split=False) for i in (1, 2)]
    assert sorted(len(g) for part in kept for g in part) == [len(recipes)] * len(groups)  # --baseline: whole


@pytest.mark.slow
def test_vendor_source_through_an_entry_point(tmp_path: Path) -> None:
    """A vendor's package adds a case source (its loader, builder, judge and results format) and a suite file format
    of its own, through entry points, and bti runs both without naming them."""
    root = _dist(tmp_path / "site", "vendor-models = vendor_pkg.bti:VendorModels\n[bti.suite_formats]\nvendor = vendor_pkg.bti:VendorFormat")
    (tmp_path / "mine.yaml").write_text("vendor_models: [4, 16]\n")
    valid = _bti(root, "validate", str(tmp_path / "mine.yaml"))
    assert valid.returncode == 0 and valid.stdout.strip() == f"{tmp_path / 'mine.yaml'}: ok (vendor models), 2 models", valid.stderr
    listed = _bti(root, "list", "-s", "vendor-models", "-r", "portable")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["model.vendor_mlp.v1[float32,static]@portable", "model.vendor_mlp.wide[float32,static]@portable"]
    out = tmp_path / "out"
    run = _bti(root, "run", "-s", "vendor-models", "-s", str(tmp_path / "mine.yaml"), "-r", "portable", "-o", str(out), "-j", "1",
               "--no-reuse", "--no-report")
    assert run.returncode == 0, run.stderr
    recs = {r["case"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines()[1:])}
    assert recs["model.vendor_mlp.h16"]["status"] == "PASS" and recs["model.vendor_mlp.h16"]["suite"] == "mine"  # its own file format
    v1, wide = recs["model.vendor_mlp.v1"], recs["model.vendor_mlp.wide"]
    assert v1["status"] == "PASS" and v1["suite"] == "vendor-models"  # built in the worker by the vendor's build()
    assert wide["status"] == "SKIP" and "needs the vendor's NPU memory" in wide["detail"]  # the vendor's judge()
    rep = _bti(root, "report", str(out / "results.jsonl"), "-o", str(out), "--format", "md,vendor-csv")
    assert rep.returncode == 0, rep.stderr  # the vendor's own results format, beside bti's
    assert sorted((out / "vendor.csv").read_text().splitlines()) == [
        "model.vendor_mlp.h16,portable,PASS", "model.vendor_mlp.h4,portable,PASS", "model.vendor_mlp.v1,portable,PASS",
        "model.vendor_mlp.wide,portable,SKIP"]


def test_clashing_or_broken_sources_are_one_line(tmp_path: Path) -> None:
    root = _dist(tmp_path / "a", "clash = vendor_pkg.bti:Clash")
    res = _bti(root, "list", "-s", "ops")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "bti: error: case source entry point clash (vendor_pkg.bti:Clash): kind(s) op already built by ops"]
    root = _dist(tmp_path / "c", "no-judge = vendor_pkg.bti:NoJudge")  # written before judge(): one warning, it runs
    res = _bti(root, "list", "-s", "ops", "-r", "portable", "-k", "op.add.*")
    assert res.returncode == 0 and res.stdout.strip() and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "lacks judge, report_formats, discover_matching" in res.stderr and "until 2027-06-01" in res.stderr and "BaseCaseSource" in res.stderr
    root = _dist(tmp_path / "d", "no-build = vendor_pkg.bti:NoBuild")  # lacking more than those: refused in one line
    res = _bti(root, "list", "-s", "ops")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "not a CaseSource" in res.stderr and "judge()" in res.stderr and "BaseCaseSource" in res.stderr
    root = _dist(tmp_path / "b", textwrap.dedent("broken = vendor_pkg.nothere:X"))
    res = _bti(root, "list", "-s", "ops")
    assert res.returncode == 2 and res.stderr.startswith("bti: error: case source broken (vendor_pkg.nothere:X): cannot load: ")
    assert "Traceback" not in res.stderr
    root = _dist(tmp_path / "e", "[bti.suite_formats]\nnot-a-format = vendor_pkg.bti:NoBuild")  # a suite format lacking load()
    (tmp_path / "s.yaml").write_text("cases: []\n")
    res = _bti(root, "list", "-s", str(tmp_path / "s.yaml"))
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "bti: error: suite format not-a-format (vendor_pkg.bti:NoBuild): not a SuiteFileFormat (needs reads(doc, path), load(path, options) and summary(cases))"]


def test_every_hf_model_s_reference_says_something() -> None:
    """A case whose reference outputs vanish verifies nothing: MobileNetV2's logits were 1e-25 (batch norm's untrained
    statistics under random weights), so a backend returning zeros passed. Every tiny Hugging Face model's eager
    output now reaches at least 1e-2 (its batch norm statistics estimated on seeded batches where it has any).

    Nor does a case keep at zero a weight that a checkpoint fills: DeiT's class token, left at zero by transformers,
    entered the encoder empty (static int8 then failed on bti's case, not on the scheme), and Swin's relative position
    bias at zero verified nothing of its gather. Gemma's norm weights are the one zero left: its RMSNorm scales by
    1 + weight."""
    import torch

    from harness.cases.case import Axes
    from harness.suites import load_suites
    from harness.suites.hf_models import build_hf

    small, zero = {}, {}
    for case in load_suites(["hf-models"]):
        built = build_hf(case, Axes("float32", "static"), 1234)
        with torch.no_grad():
            out = built.module(*built.example)
        small[case.id] = float(out.abs().max())
        zero[case.id] = {name for name, p in built.module.named_parameters()
                         if p.numel() > 1 and not name.endswith("bias") and not p.detach().any()}
    assert len(small) == 23 and min(small.values()) >= 1e-2, sorted(small.items(), key=lambda kv: kv[1])[:3]
    gemma = zero.pop("model.gemma.tiny")
    assert len(gemma) == 5 and all(name.endswith("norm.weight") for name in gemma), gemma  # 2 layers x 2 norms + the last
    assert not any(zero.values()), {k: v for k, v in zero.items() if v}


@pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("timm", "torchvision")),
                    reason="timm and torchvision (the vision extra) are not installed in this venv")
def test_every_tv_model_s_reference_says_something() -> None:
    """The same for tv-models: torchvision's EfficientNet-B0 gave logits of 2e-13 and MobileNetV3-Small 9e-10 with
    batch norm's untrained statistics, which int8 quantizes to zero (the program's SQNR 0 dB: bti's case failed, not
    the scheme). Estimated on seeded batches, every row's logits reach at least 1e-2, as hf-models' do."""
    import torch

    from harness.cases.case import Axes
    from harness.suites import load_suites
    from harness.suites.tv_models import build_tv

    small = {}
    for case in load_suites(["tv-models"]):
        built = build_tv(case, Axes("float32", "static"), 1234)
        with torch.no_grad():
            out = built.module(*built.example)
        small[case.id] = float(out.abs().max())
    assert len(small) == 5 and min(small.values()) >= 1e-2, sorted(small.items(), key=lambda kv: kv[1])[:3]
