"""Suite spec loading and expansion (no lowering)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cases.case import Item
from harness.cases.suite import load_suite
from harness.errors import SpecError, UserError
from harness.recipes import load_recipe
from harness.runner.matrix import Filters, _Globs, expand
from harness.suites import load_suites

from .conftest import FIXTURES


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_template_product_with_constraints_and_zipped_rows(tmp_path: Path) -> None:
    p = write(tmp_path, """
suite: t
dims: {N: 2}
presets: {r1: {shape: [N]}, r2: {shape: [N, 3]}}
cases:
  - template: {op: [aten::abs.default, aten::neg.default], rank: [1, 2]}
    id: "rank{rank}"
    op: "{op}"
    args: [{preset: "r{rank}"}]
    exclude: [{op: aten::neg.default, rank: 2}]
  - template:
      v: [{name: k2, k: [2, 2]}, {name: k3, k: [3, 3]}]
    id: "{v}"
    op: aten::max_pool2d.default
    args: [{shape: [1, 1, 6, 6]}, "{k}"]
    cases: [{v: k3}]
""")
    cases = load_suite(p)
    assert [c.id for c in cases] == ["op.abs.rank1", "op.abs.rank2", "op.neg.rank1", "op.max_pool2d.k3"]
    assert cases[-1].spec["args"][1] == [3, 3]  # whole-string placeholder keeps the list type
    assert cases[0].spec["args"][0]["tensor"]["shape"] == ["N"]


def test_dynamic_axis_and_dtypes_expand_into_item_ids(tmp_path: Path) -> None:
    p = write(tmp_path, """
dims: {N: 2, C: 4}
cases:
  - id: bcast
    op: aten::add.Tensor
    args: [{shape: [N, C]}, {shape: [C]}]
    dtypes: [float32, float16]
    dynamic: {N: [1, 8]}
""")
    (case,) = load_suite(p)
    assert case.shapes == ("static", "dynamic")
    assert case.spec["dynamic"] == {"N": {"min": 1, "max": 8, "run": 3}}
    items = expand([case], [load_recipe("portable")])
    assert [i.id for i in items] == [
        "op.add.bcast[float32,static]@portable", "op.add.bcast[float32,dynamic]@portable",
        "op.add.bcast[float16,static]@portable", "op.add.bcast[float16,dynamic]@portable",
    ]
    assert len({i.seed for i in items}) == 4  # a seed per (case, axes)


@pytest.mark.parametrize(("body", "message"), [
    ("cases:\n  - id: a\n    op: aten::nope\n    args: []\n", "unknown op 'aten::nope'"),
    ("cases:\n  - id: a\n    op: aten::add.NoSuchOverload\n    args: []\n", "overloads of aten::add are"),
    ("cases:\n  - id: a\n    op: aten::abs.default\n    args: [{shape: [Q]}]\n", "unknown dim 'Q'"),
    ("cases:\n  - id: a\n    op: aten::abs.default\n    bogus: 1\n", "unknown case key(s): bogus"),
    ("cases:\n  - id: a\n    op: aten::abs.default\n    dtypes: [float8]\n", "unknown dtype 'float8'"),
    *((f"cases:\n  - id: a\n    op: aten::abs.default\n    args: [{{shape: [2]}}]\n    timeout_s: {v}\n",
       "`timeout_s` must be a positive number of seconds") for v in ("0", "-5", ".nan", ".inf", "true", "soon")),
    *((f"cases:\n  - id: a\n    op: aten::abs.default\n    args: [{{shape: [2]}}]\n    timeouts: {v}\n",
       "`timeouts` must map recipe names to positive numbers of seconds") for v in ("600", "{}", "[portable]", "{portable: 0}",
                                                                                    "{portable: soon}", "{1: 60}", "{x: .inf}")),
    ("dims: {N: 2}\ncases:\n  - id: a\n    op: aten::abs.default\n    args: [{shape: [N]}]\n    dynamic: {N: [3, 8]}\n",
     "need ints min <= 2 <= max"),
])
def test_spec_errors_carry_file_and_line(tmp_path: Path, body: str, message: str) -> None:
    p = write(tmp_path, body)
    with pytest.raises(SpecError) as info:
        load_suite(p)
    text = info.value.one_line()
    assert message in text
    assert text.startswith(f"{p}:")  # file:line prefix
    assert "\n" not in text


def test_malformed_yaml_reports_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_suite(FIXTURES / "suites" / "bad_yaml.yaml")
    assert "bad_yaml.yaml:" in str(info.value)
    assert "invalid YAML" in str(info.value)


def test_duplicate_case_ids_rejected(tmp_path: Path) -> None:
    p = write(tmp_path, "cases:\n  - {id: a, op: aten::abs.default, args: [{shape: [2]}]}\n"
                        "  - {id: a, op: aten::abs.default, args: [{shape: [3]}]}\n")
    with pytest.raises(SpecError, match=r"duplicate case id op\.abs\.a"):
        load_suite(p)


def test_include_merges_dims_and_cases(tmp_path: Path) -> None:
    write(tmp_path, "dims: {N: 3}\ncases:\n  - {id: inc, op: aten::abs.default, args: [{shape: [N]}]}\n", "base.yaml")
    p = write(tmp_path, "include: [base.yaml]\ncases:\n  - {id: top, op: aten::neg.default, args: [{shape: [N, 2]}]}\n")
    cases = load_suite(p)
    assert [c.id for c in cases] == ["op.abs.inc", "op.neg.top"]
    assert cases[1].spec["dims"] == {"N": 3}


def test_starter_suite_size_and_coverage() -> None:
    cases = load_suites(["ops"])
    aten_ops = {c.op for c in cases if c.op and c.op.startswith("aten::")}
    assert len({op.split(".")[0] for op in aten_ops}) >= 60
    items = expand(cases, [load_recipe("portable"), load_recipe("xnnpack")])
    assert len(items) >= 250
    tags = {t for c in cases for t in c.tags}
    for family in ("elementwise", "reduction", "view", "conv", "pool", "linear", "matmul", "norm", "activation",
                   "indexing", "concat", "broadcast", "non-contiguous", "rank-sweep"):
        assert family in tags, family
    ranks = {len(c.spec["args"][0]["tensor"]["shape"]) for c in cases if "rank-sweep" in c.tags}
    assert ranks == {0, 1, 2, 3, 4, 5}


def test_model_suite_has_the_required_architectures() -> None:
    ids = {c.id for c in load_suites(["models"])}
    for name in ("mlp", "cnn", "dwpw_block", "gru", "lstm", "transformer_encoder"):
        assert f"model.{name}.base" in ids


def test_filters_select_by_op_tag_glob_and_dtype() -> None:
    cases = load_suites(["ops"])
    recipes = [load_recipe("portable")]
    by_op = expand(cases, recipes, Filters(ops=("aten::add",)))
    assert by_op and all(i.case.op.startswith("aten::add.") for i in by_op)
    by_tag = expand(cases, recipes, Filters(tags=("pool",)))
    assert by_tag and all("pool" in i.case.tags for i in by_tag)
    by_glob = expand(cases, recipes, Filters(patterns=("op.relu.*",), dtypes=("float32",)))
    assert {i.case.id for i in by_glob} == {f"op.relu.rank{r}" for r in range(6)}
    item = by_glob[0]  # an id pasted from a report matches itself, its brackets taken literally, and excludes itself
    assert [i.id for i in expand(cases, recipes, Filters(patterns=(item.id,)))] == [item.id]
    assert [i.id for i in expand(cases, recipes, Filters(patterns=(item.group,)))] == [item.id]
    assert item.id not in {i.id for i in expand(cases, recipes, Filters(patterns=("op.relu.*",), exclude=(item.id,)))}



def test_filters_index_keeps_every_glob_s_meaning() -> None:
    """The filter indexes its globs by literal prefix (``matrix._Globs``): it keeps exactly what trying each glob on each
    key keeps, for wildcards at the start, the middle and the end, character classes, ``?``, pasted ids and plain ids."""
    import fnmatch

    def by_hand(item: Item, globs: tuple[str, ...]) -> bool:
        keys = (item.case.id, item.group, item.id)
        return any(k == p or fnmatch.fnmatchcase(k, p) for p in globs for k in keys)

    cases = load_suites(["ops"])
    recipes = [load_recipe("portable"), load_recipe("xnnpack")]
    every = expand(cases, recipes)
    some = every[::37]
    patterns = ("*relu*", "op.add.*[[]float32,*", "op.?ul.*", "op.sub.[br]*@xnnpack", "*@portable",
                some[0].id, some[1].group, some[2].case.id, some[4].id + "*", "[o]p.max_pool2d.*", "nothing.like.this*")
    for pats, excl in ((patterns, ()), (tuple(i.id for i in some), ()), (("op.*",), (*patterns[:4], some[3].id))):
        want = [i.id for i in every if by_hand(i, pats) and not (excl and by_hand(i, excl))]
        got = [i.id for i in expand(cases, recipes, Filters(patterns=pats, exclude=excl))]
        assert got == want and want and len(want) < len(every)
    # a glob whose literal prefix is the whole key (its wildcard matching nothing)
    assert _Globs(("op.relu*",)).any(("op.relu",)) and not _Globs(("op.relu?",)).any(("op.relu",))

def test_unknown_suite_and_recipe_are_user_errors() -> None:
    with pytest.raises(UserError, match="unknown suite 'nosuch'"):
        load_suites(["nosuch"])
    with pytest.raises(UserError, match="unknown recipe 'nosuch'"):
        load_recipe("nosuch")
