"""The constraint-based core-op generator and coverage reporting."""

from __future__ import annotations

import json
from pathlib import Path

from harness.report.coverage import core_ops, normalize
from harness.suites import load_suites
from harness.suites.core_ops import ci_sample, core_cases, specs

from .conftest import TESTS


def test_generation_is_deterministic_and_large() -> None:
    a, b = core_cases(), core_cases()
    assert [c.id for c in a] == [c.id for c in b]
    assert [c.spec_hash for c in a] == [c.spec_hash for c in b]
    assert len({c.id for c in a}) == len(a)
    items = sum(len(c.dtypes) * len(c.shapes) for c in a)
    assert items >= 3000, items


def test_covers_most_of_the_core_opset() -> None:
    core = set(core_ops())
    assert len(core) == 193
    covered = {normalize(c.op) for c in core_cases()} & core
    assert covered == core, sorted(core - covered)


def test_variants_change_one_attribute_at_a_time() -> None:
    by_id = {c.id: c for c in core_cases()}
    base = by_id["op.abs.default.base"]
    assert set(base.dtypes) == {"float32", "float16", "bfloat16", "int8", "int32", "int64"}
    assert base.shapes == ("static", "dynamic")
    for rank in range(6):
        if rank == 3:
            continue
        variant = by_id[f"op.abs.default.rank{rank}"]
        shape = variant.spec["args"][0]["tensor"]["shape"]
        assert len(shape) == rank and variant.spec["args"][0]["tensor"]["layout"] == "contiguous"
    assert by_id["op.abs.default.transposed"].spec["args"][0]["tensor"]["layout"] == "transposed"
    assert by_id["op.abs.default.empty"].spec["args"][0]["tensor"]["shape"][0] == 0
    assert by_id["op.abs.default.nan_inf"].spec["args"][0]["tensor"]["init"] == "special"
    assert "op.add.Tensor.y_rank0" in by_id and "op.add.Scalar.base" in by_id  # broadcasting and scalar operands
    assert "op.sum.dim_IntList.keepdim_True" in by_id


def test_ci_sample_is_a_stable_subset() -> None:
    full = core_cases()
    ci = ci_sample(full)
    assert ci and len(ci) < len(full) / 4
    assert [c.id for c in ci] == [c.id for c in ci_sample(core_cases())]
    assert {c.id for c in ci} <= {c.id for c in full}
    assert {c.op for c in ci} == {c.op for c in full}  # every generated op stays in the sample
    assert [c.id for c in load_suites(["core-ops-ci"])] == [c.id for c in ci]


def test_every_spec_resolves() -> None:
    from harness.cases.ops import resolve_op

    for spec in specs():
        resolve_op(spec.op)


def test_coverage_cli(bti, tmp_path: Path) -> None:
    res = bti("list", "--coverage", "-s", "core-ops")
    assert res.code == 0, res.err
    assert res.out.startswith("# Core ATen coverage: ")
    assert "| `aten::abs.default` |" in res.out and "## Not yet covered" in res.out
    blocked = tmp_path / "blocked"
    (blocked / "torch").mkdir(parents=True)
    (blocked / "torch" / "__init__.py").write_text("raise ImportError('no torch in reports')\n")
    rep = bti("report", str(TESTS / "golden" / "results.jsonl"), "-o", str(tmp_path / "o"), "--coverage",
              env={"PYTHONPATH": f"{blocked}:{TESTS.parent}"})
    assert rep.code == 0, rep.err
    data = json.loads((tmp_path / "o" / "coverage.json").read_text())
    assert "aten::mul.Tensor" in data["covered"] and "aten::convolution.default" in data["missing"]
    assert data["core_total"] == 193
