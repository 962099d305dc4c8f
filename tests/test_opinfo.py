"""PyTorch's OpInfo sample inputs as a case source (issue: OpInfo on the device).

Expectations are read from OpInfo here, independently of bti's code, so the tests hold on whatever torch is
installed: the sample counts, the dtypes per device type, and the decorators for ``TestCommon.test_compare_cpu``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import DecorateInfo

from harness.cases.case import Axes, Case, Item
from harness.suites import opinfo


def _entry(name: str, variant: str = "") -> object:
    return next(o for o in op_db if o.name == name and o.variant_test_name == variant)


def test_every_sample_is_a_case_with_a_stable_id_and_opinfo_dtypes() -> None:
    cases = opinfo.discover(("add", "sort"))
    for name in ("add", "sort"):
        op = _entry(name)
        dtypes = [str(d).replace("torch.", "") for d in op.supported_dtypes("cpu") if d != torch.complex32]
        counts = {d: len(list(op.sample_inputs("cpu", getattr(torch, d)))) for d in dtypes}
        mine = [c for c in cases if c.id.startswith(f"opinfo.{name}.default.")]
        assert [c.id for c in mine] == [f"opinfo.{name}.default.{n}" for n in range(max(counts.values()))]
        for c in mine:  # a sample n exists at exactly the dtypes that give n + 1 samples or more
            assert set(c.dtypes) == {d for d, k in counts.items() if k > c.spec["sample"]}
        assert all(c.op == f"aten::{op.aten_name}" for c in mine)
    # the count is cached by torch version: a second discovery reads it
    from harness.settings import current

    assert (current().cache_dir / f"opinfo-samples-{torch.__version__}.json").is_file()


def test_a_k_filter_counts_only_the_entries_it_can_reach(monkeypatch) -> None:
    """`bti run -s opinfo -k opinfo.abs.*` counts abs's samples, not all 700 entries': the same cases as the whole
    source filtered, from a count of the entries whose ids the globs' literal prefixes reach."""
    from harness.cases.contract import could_match
    from harness.suites import sources

    counted: list[tuple[str, str]] = []
    real = opinfo._counts
    monkeypatch.setattr(opinfo, "_counts", lambda keys: (counted.extend(keys), real(keys))[1])
    got = sources()["opinfo"].discover_matching(("opinfo.abs.*", "opinfo.sort.default.1*"))
    assert sorted(set(counted)) == [("abs", "default"), ("sort", "default")]
    assert [c.id for c in got] == [c.id for c in opinfo.discover(("abs", "sort"))]
    # what may go: an id no literal prefix reaches; a glob that starts with a wildcard reaches everything
    assert not could_match("opinfo.absolute.default.", ("opinfo.abs.*",))
    assert could_match("opinfo.abs.default.", ("opinfo.abs*",)) and could_match("opinfo.absolute.default.", ("opinfo.abs*",))
    assert could_match("opinfo.x.default.", ("*.x.*",)) and could_match("opinfo.x.default.", ())
    assert not could_match("opinfo.x.default.", ("op.*", "zoo.*"))


def _active(op: object, device: str, dtype: torch.dtype) -> list[tuple[object, object]]:
    out = []
    for info in [*op.skips, *op.decorators]:  # type: ignore[attr-defined]
        info = info if isinstance(info, DecorateInfo) else DecorateInfo(info)
        if info.is_active("TestCommon", "test_compare_cpu", device, dtype, {}):
            out += [(info, dec) for dec in info.decorators]
    return out


def test_opinfo_decides_skips_expected_failures_and_tolerances_per_device_type() -> None:
    # a dtype OpInfo does not list for the device type is SKIP, naming it
    op = next(o for o in op_db if set(o.supported_dtypes("cpu")) - set(o.supported_dtypes("cuda")))
    missing = str(next(iter(set(op.supported_dtypes("cpu")) - set(op.supported_dtypes("cuda"))))).replace("torch.", "")
    j = opinfo.judge(op.name, op.variant_test_name or "default", "cuda", missing)
    assert j.skip and f"dtype {missing} is not supported on cuda" in j.skip
    # an expectedFailure active for test_compare_cpu: an expected failure, with its source
    found = next((o, d, dt) for o in op_db for d in ("cuda", "mps") for dt in o.supported_dtypes(d)
                 if any(getattr(dec, "__name__", "") == "expectedFailure" for _, dec in _active(o, d, dt))
                 and not any(getattr(dec, "__qualname__", "") == "skip.<locals>.decorator" for _, dec in _active(o, d, dt)))
    o, d, dt = found
    j = opinfo.judge(o.name, o.variant_test_name or "default", d, str(dt).replace("torch.", ""))
    assert j.xfail and j.xfail.startswith(f"OpInfo {o.name!r}: expectedFailure")
    # test_compare_cpu runs only off the CPU: on the CPU itself (torch-cpu, torch-compile) its expected failures do
    # not apply, its skips do (empty's output is non-deterministic everywhere), and so do device gates (onlyCUDA)
    assert opinfo.judge(o.name, o.variant_test_name or "default", "cpu", str(dt).replace("torch.", "")).xfail is None
    assert "output is non-deterministic" in (opinfo.judge("empty_like", "default", "cpu", "float32").skip or "")
    assert "onlyCUDA on cpu" in (opinfo.judge("jiterator_unary", "default", "cpu", "float32").skip or "")
    # a toleranceOverride active for it: the tolerance, as OpInfo gives it
    o, d, dt, tol = next((o, d, dt, dec.d[dt]) for o in op_db for d in ("cuda",) for dt in o.supported_dtypes(d)
                         for _, dec in _active(o, d, dt) if type(dec).__name__ == "toleranceOverride" and dt in dec.d
                         and not any(getattr(x, "__qualname__", "") == "skip.<locals>.decorator" for _, x in _active(o, d, dt)))
    j = opinfo.judge(o.name, o.variant_test_name or "default", d, str(dt).replace("torch.", ""))
    assert j.tolerance is not None and j.tolerance["atol"] >= tol.atol and j.tolerance["rtol"] >= tol.rtol


def _run(case: Case, dtype: str, recipe_name: str) -> dict:
    from harness.recipes import load_recipe
    from harness.stages import Group, run_item

    item = Item(case, recipe_name, Axes(dtype, "static"))
    rec, _, _ = run_item(item, load_recipe(recipe_name), Group(item), "t")
    return dict(rec)


def test_a_sample_that_cannot_be_built_is_fail_export_and_a_random_op_is_held_to_shapes() -> None:
    (case,) = [c for c in opinfo.discover(("add",)) if c.spec["sample"] == 0]
    ghost = Case(id="opinfo.add.default.100000", suite="opinfo", kind="opinfo", op=case.op,
                 spec={**case.spec, "sample": 100000}, dtypes=("float32",))
    rec = _run(ghost, "float32", "torch-cpu")
    assert rec["status"] == "FAIL_EXPORT" and "no sample 100000" in rec["detail"]  # the case's, never ERROR
    plain = _run(case, "float32", "torch-cpu")
    assert plain["status"] == "PASS" and "shape_only" not in plain["tolerance"]
    # OpInfo seeds its random ops itself (wrapper_set_seed); an op that still draws unseeded numbers is caught by
    # two runs under different seeds, and then only its shapes and dtypes are compared
    built = opinfo.build(case, Axes("float32", "static"), 7)
    assert opinfo._is_random(built.module, built.run) is False
    drawn = opinfo.OpInfoModule(lambda x: x + torch.rand(x.shape), None, [], [], lambda y: y)
    drawn.forward = lambda *t: t[0] + torch.rand(t[0].shape)  # type: ignore[method-assign]
    assert opinfo._is_random(drawn, (torch.zeros(3),)) is True
    from harness.judge import tolerance
    from harness.recipes import load_recipe
    from harness.stages import Group

    item = Item(case, "torch-cpu", Axes("float32", "static"))
    group = Group(item, prebuilt=dataclasses.replace(built, random_outputs=True))
    assert tolerance(item, load_recipe("torch-cpu"), group)["shape_only"] is True


def test_the_ci_sample_runs_and_the_support_table_says_what_passed(bti, tmp_path: Path) -> None:
    out = tmp_path / "o"
    res = bti("run", "-s", "opinfo-ci", "-r", "torch-cpu", "-r", "torch-compile", "-k", "opinfo.add.default.0", "-k", "opinfo.add.default.1", "-k", "opinfo.sort.default.0",
              "-o", str(out), "--no-reuse", "-j", "2")
    assert res.code == 0, res.err[-2000:]
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()[1:]]
    by = {r["id"]: r for r in recs}
    assert by["opinfo.add.default.0[float32,static]@torch-compile"]["status"] == "PASS"
    assert by["opinfo.add.default.0[float64,static]@torch-compile"]["status"] == "SKIP"  # the recipe runs float32
    assert sum(r["status"] == "PASS" for r in recs if r["recipe"] == "torch-cpu") == sum(1 for r in recs if r["recipe"] == "torch-cpu")
    rep = bti("report", str(out / "results.jsonl"), "-o", str(out), "--support", "--format", "md")
    assert rep.code == 0, rep.err
    rows = (out / "support.csv").read_text().splitlines()
    assert rows[0] == "op,recipe,dtype,state,items,first_failure,detail"
    assert "aten::add,torch-cpu,float32,pass," in "\n".join(rows)
    assert "aten::add,torch-compile,float64,skip," in "\n".join(rows)
    md = (out / "support.md").read_text()
    assert "| `aten::add` |" in md and "✅" in md


def test_listing_and_the_op_filter(inproc) -> None:
    res = inproc("list", "-s", "opinfo-ci", "--op", "add", "-r", "torch-cpu")
    assert res.code == 0 and res.out and all(line.startswith("opinfo.add.") for line in res.out.splitlines())


def test_the_periodic_workflow_runs_opinfo_on_every_eager_device_recipe_for_the_portal() -> None:
    """OpInfo on the schedule: the whole source, sharded, on every shipped eager-device recipe (the PrivateUse1 template
    is copied, not run), and the portal job builds from its results too (the per-device support view)."""
    import yaml

    from tests.conftest import ROOT

    jobs = yaml.safe_load((ROOT / ".github/workflows/periodic.yml").read_text())["jobs"]
    job = jobs["opinfo"]["with"]
    eager = {p.stem for p in (ROOT / "recipes").glob("*.yaml")
             if yaml.safe_load(p.read_text()).get("backend") == "torch-eager"} - {"torch-privateuse1"}
    assert job["suites"] == "opinfo" and set(job["recipes"].split(",")) == eager
    assert int(re.fullmatch(r"\$\{\{ fromJSON\(inputs\.shards \|\| '(\d+)'\) \}\}", job["shards"]).group(1)) > 1  # a trial may ask fewer
    portal = jobs["portal"]
    assert "opinfo" in portal["needs"]
    build = next(s["run"] for s in portal["steps"] if s.get("name", "").startswith("Build the portal"))
    assert "--support-results opinfo/results.jsonl" in build  # the support page only: not the matrix or the history


def test_a_device_whose_package_is_missing_is_unavailable_not_a_traceback(bti, tmp_path: Path) -> None:
    """torch-npu without bti_example_npu on the path: torch has never heard of ``npu``, so OpInfo cannot be asked about
    it; the items are UNAVAILABLE with the reason and the run says nothing was verified (this was a traceback)."""
    from .conftest import ROOT, TESTS

    res = bti("run", "-s", "opinfo-ci", "-r", "torch-npu", "-k", "opinfo.abs.default.0", "-o", str(tmp_path), "--no-reuse",
              env={"PYTHONPATH": f"{TESTS}:{ROOT}"}, fresh=True)
    assert res.code == 1 and "Traceback" not in res.err, res.err[-2000:]
    assert "nothing verified on torch-npu" in res.err and "bti_example_npu" in res.err
    recs = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()[1:]]
    assert recs and {r["status"] for r in recs} == {"UNAVAILABLE"}
