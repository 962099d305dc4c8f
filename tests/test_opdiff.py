"""opdiff suites run unchanged (issue: opdiff suites and reports).

The fixture suite (``tests/fixtures/opdiff``) is written from opdiff's specification: an orchestrator with two
includes, every node type, both template forms, ``file:`` classes, every test field. Ids and inputs are checked
against the specification's rules, computed here independently of bti's builder; errors against opdiff's messages;
the report against opdiff's documented JSONL format.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from harness.cases.case import Axes
from harness.errors import SpecError, UserError
from harness.opdiff.suite import OpdiffOptions, load_opdiff

from .conftest import FIXTURES

SUITE = FIXTURES / "opdiff" / "all.yaml"
F32 = Axes("float32", "static")


def cases(**kw: object) -> dict:
    return {c.id: c for c in load_opdiff(SUITE, named=True, **kw)}  # type: ignore[arg-type]


def built(case_id: str, **kw: object):
    from harness.suites import build_case

    case = cases(**kw)[case_id]
    return build_case(case, F32, 12345)  # bti's own seed is ignored: opdiff's rules decide


def draws(seed: int, *fns):
    """What opdiff's InputGen draws under ``seed``: the given draws, in order, in one forked stream."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [f() for f in fns]


def x_node():  # preset x: normal, mean 0.5, std 2, shape [B, N] = [2, 4]
    return torch.empty(2, 4).normal_(0.5, 2.0)


def test_expanded_ids_are_opdiffs_own() -> None:
    ids = list(cases())
    # included files first, in order; templates: sorted variables, values as written (`N` stays `N`), cases rows
    # first then the open variables' product; a pair's id carries its variables; an id-less test is test_<n>
    assert ids[:3] == ["add_refs", "add_alpha_const", "mul_scalar_rank1"]
    assert "test_14" in ids
    assert [i for i in ids if i.startswith("lin_t")] == [
        "lin_t__bias=True__feat=N__out=2", "lin_t__bias=True__feat=N__out=6",
        "lin_t__bias=False__feat=N__out=2", "lin_t__bias=False__feat=N__out=6"]
    assert [i for i in ids if i.startswith("lin_cases")] == ["lin_cases__feat=4__inp=x4__out=3", "lin_cases__feat=8__inp=x8__out=3"]
    assert ids[-1] == "norm_pair__eps=0_001"
    pair = cases()["norm_pair__eps=0_001"]
    assert pair.kind == "opdiff-pair" and [pair.spec["test"][s]["id"] for s in "ab"] == ["norm_pair__eps=0_001__a", "norm_pair__eps=0_001__b"]
    # the template variable reaches the constructor resolved (N -> 4), b's kwargs merge over common's
    lin = cases()["lin_t__bias=False__feat=N__out=6"].spec["test"]["op"]
    assert lin["args"] == [4, 6] and lin["kwargs"] == {"bias": False}
    assert pair.spec["test"]["b"]["op"]["kwargs"] == {"eps": 0.001} and pair.spec["test"]["a"]["op"]["kwargs"] == {}


def test_inputs_are_opdiffs_draws() -> None:
    # two refs to the same preset: two draws of one stream under seed 0
    got = built("add_refs").run
    want = draws(0, x_node, x_node)
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    # --seed moves the stream; the second sampled set is seed + 1 (opdiff's sample_many_k)
    b = built("add_refs", seed=5, samples=2)
    assert torch.equal(b.run[0], draws(5, x_node)[0]) and torch.equal(b.more_runs[0][0], draws(6, x_node)[0])
    # a scalar: a rank-1 tensor input, drawn after x in the same stream: rand() * (high - low) + low
    got = built("mul_scalar_rank1").run
    x, r = draws(0, x_node, lambda: torch.rand(()).item())
    assert got[1].shape == (1,) and got[1].item() == pytest.approx(r * 4 - 2) and torch.equal(got[0], x)
    # scalar_tensor: rank 0
    assert built("mul_scalar_tensor_rank0").run[1].shape == () and built("mul_scalar_tensor_rank0").run[1].item() == 3.0
    # kwargs are drawn in their own stream under the same seed
    clamp = built("clamp_kw_scalar_tensor_sampled")
    assert torch.equal(clamp.run[1], draws(0, lambda: torch.empty(()).uniform_(-0.5, 0.5))[0])
    # optional with p_none 1: None (the clamp has no max)
    opt = built("clamp_optional_none")
    assert torch.equal(opt.module(*opt.run), torch.clamp(opt.run[0], min=-0.25))
    # a list of tensors: each element a graph input; ints where every overload takes a number stay Python values
    assert len(built("cat_list").run) == 3 and all(torch.equal(t, torch.ones(2, 4)) for t in built("cat_list").run)
    soft = built("softmax_int_scalar")
    assert len(soft.run) == 1 and torch.allclose(soft.module(*soft.run), torch.softmax(soft.run[0], 1))
    # randint's high is exclusive (torch.randint), a dim symbol as a bound
    idx = built("gather_randint").run[1]
    assert idx.dtype == torch.int64 and int(idx.min()) >= 0 and int(idx.max()) < 5


def test_pair_side_b_draws_at_seed_plus_one_and_shares_the_weights() -> None:
    b = built("norm_pair__eps=0_001")
    assert torch.equal(b.run[0], draws(0, lambda: torch.randn(2, 4))[0])
    assert torch.equal(b.pair_b.run[0], draws(1, lambda: torch.randn(2, 4))[0])
    assert b.pair_judged is False
    # both sides construct under opdiff's backend seed 0: the same Linear weights
    wa = b.module.target.mod.proj.weight
    wb = b.pair_b.module.target.mod.proj.weight
    assert torch.equal(wa, wb)


def test_complex_input0_is_packed_and_rebuilt_in_the_graph() -> None:
    b = built("fft_complex_input0")
    (packed,) = b.run
    assert packed.dtype == torch.float32 and packed.shape == (2, 4, 2)
    out = b.module(packed)
    assert torch.allclose(out, torch.view_as_real(torch.fft.fft(torch.view_as_complex(packed))))


def _validate(inproc, tmp_path: Path, text: str, name: str = "s.yaml", extra: dict | None = None):
    (tmp_path / name).write_text(textwrap.dedent(text))
    for rel, body in (extra or {}).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(body))
    return inproc("validate", str(tmp_path / name))


T = "tests:\n  - id: t\n    op: aten::add\n    in:\n"
ERRORS = [
    # (suite text, line, message) — opdiff's messages, at the line that is wrong
    ("tests: []\nmystery: 1\n", 2, "unknown top-level key(s): mystery"),
    ("tests:\n  - id: t\n    op: aten::add\n    in: []\n    kwarg: {}\n", 5, "unknown field 'kwarg' (did you mean 'kwargs'?)"),
    ("tests:\n  - id: t\n    in: []\n", 2, "tests.0.op: Field required"),
    (T + "      - {type: tensr, shape: [2], kind: float}\n", 5, "does not match any of the expected tags"),
    (T + "      - {type: tensor, shape: [2], kind: float, stdd: 2}\n", 5, "unknown field 'stdd'"),
    (T + "      - {type: tensor, shape: [], kind: float}\n", 5, "tests.0.in.0.tensor.shape: Value error, shape cannot be empty"),
    (T + "      - {type: tensor, shape: [-1], kind: float}\n", 5, "shape dims must be >= 0"),
    (T + "      - {type: tensor, shape: [Q], kind: float}\n", 5, "Unknown dim symbol: Q"),
    (T + "      - {type: tensor, shape: [2]}\n", 5, "must specify either 'dtype' or 'kind'"),
    (T + "      - {type: tensor, shape: [2], dtype: float8}\n", 5, "unsupported dtype 'float8'"),
    (T + "      - {type: tensor, shape: [2], kind: complex}\n", 5, "unsupported kind 'complex'"),
    (T + "      - {type: tensor, shape: [2], kind: float, init: gaussian}\n", 5, "unsupported init 'gaussian'"),
    (T + "      - {type: tensor, shape: [{var: n}], kind: float}\n", 5, "not permitted inside shape"),
    (T + "      - {type: tensor, shape: [2], kind: float, low: lots}\n", 5, "Unknown symbol (or non-numeric) range value: lots"),
    (T + "      - {type: scalar, kind: int, low: 1}\n", 5, "scalar must specify both low and high (or neither)"),
    (T + "      - {type: scalar, kind: int, low: 3, high: 1}\n", 5, "scalar.low must be < scalar.high"),
    (T + "      - {type: scalar, kind: bool, low: 0, high: 1, p: 2}\n", 5, "scalar.p must be in [0,1]"),
    (T + "      - {type: int_list, elems: []}\n", 5, "int_list.elems cannot be empty"),
    (T + "      - {type: list, len: -1, elem: {type: const, value: 1}}\n", 5, "list.len must be >= 0"),
    (T + "      - {type: optional, p_none: 1.5, elem: {type: const, value: 1}}\n", 5, "p_none must be in [0,1]"),
    (T + "      - {type: const}\n", 5, "Field required: value"),
    (T + "      - {type: const_tensor, shape: [2, 2], kind: float, value: [1, 2, 3]}\n", 5, "value has shape [3]"),
    (T + "      - {ref: nothing}\n", 5, "unknown preset ref 'nothing'"),
    (T + "      - {ref: {var: p}}\n", 5, "Unknown template var 'p'"),
    ("tests:\n  - id: t\n    op: aten::add\n    device: tpu\n    in: []\n", 4, "tests.0.device: Input should be 'cpu', 'gpu', 'cuda', 'mps'"),
    ("tests:\n  - id: t\n    op: aten::add\n    cast_input0_to_complex: maybe\n    in: []\n", 4, "Input should be a valid boolean"),
    ("dims: {N: -2}\ntests: []\n", 1, "dims.N must be >= 0"),
    ("dims: {N: two}\ntests: []\n", 1, "dims.N must be int"),
    ("tests:\n  - id: t\n    op: {type: template_module, path: torch.nn.Linear, vars: {a: []}}\n    in: []\n", 3,
     "template_module.vars['a'] must be a non-empty list"),
    ("tests:\n  - id: t\n    op:\n      type: template_module\n      path: torch.nn.Linear\n      vars: {a: [1]}\n"
     "      cases: [{b: 2}]\n    in: []\n", 7, "template_module.cases[0] has keys not declared in vars: ['b']"),
    ("tests:\n  - id: t\n    op:\n      type: template_module\n      path: torch.nn.Linear\n      vars: {a: [1]}\n"
     "      args: [{var: c}]\n    in: []\n", 7, "Unknown template var 'c'"),
    ("tests:\n  - id: t\n    op:\n      type: template_compare_pair\n      a: {type: module, path: torch.nn.ReLU}\n"
     "      b: {impl: y, type: module, path: torch.nn.ReLU}\n    in: []\n", 5, "tests.0.op.template_compare_pair.a.impl: Field required"),
    ("tests:\n  - id: t\n    op: {type: module, path: 'file:toy.py'}\n    in: []\n", 3, "Invalid file path spec: file:toy.py"),
    ("tests:\n  - id: t\n    op: {type: module, path: 'file:gone.py::X'}\n    in: []\n", 3, "file:gone.py::X: no such file"),
    ("tests:\n  - id: t\n    op: aten::nosuch\n    in: []\n", 3, "unknown op 'aten::nosuch': torch.ops.aten has no op 'nosuch'"),
    ("tests:\n  - id: t\n    op: aten::add\n    in: [\n", 5, "invalid YAML"),
]


@pytest.mark.parametrize(("text", "line", "message"), ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_a_wrong_suite_gets_opdiffs_message_in_one_line_at_its_line(inproc, tmp_path: Path, text: str, line: int, message: str) -> None:
    res = _validate(inproc, tmp_path, text)
    assert res.code == 2, res.out
    err = res.err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith(f"bti: error: {tmp_path / 's.yaml'}:{line}: "), err
    assert message in err


def test_includes_merge_and_their_errors(inproc, tmp_path: Path) -> None:
    cycle = _validate(inproc, tmp_path, "include: [b.yaml]\ntests: []\n", extra={"b.yaml": "include: s.yaml\ntests: []\n"})
    assert cycle.code == 2 and "include cycle detected" in cycle.err
    conflict = _validate(inproc, tmp_path, "include: b.yaml\ndims: {N: 3}\ntests: []\n", extra={"b.yaml": "dims: {N: 4}\ntests: []\n"})
    assert conflict.code == 2 and "s.yaml:2: conflict in dims.N: 4 vs 3" in conflict.err
    missing = _validate(inproc, tmp_path, "include: [nope.yaml]\n")
    assert missing.code == 2 and "include 'nope.yaml': no such file" in missing.err
    # an orchestrator that only includes is recognised by its first include; same values merge quietly
    ok = _validate(inproc, tmp_path, "include: [b.yaml]\n", extra={"b.yaml": "dims: {N: 4}\n" + T + "      - {type: tensor, shape: [N], kind: float}\n"})
    assert ok.code == 0 and "ok (opdiff suite), 1 tests" in ok.out


def test_file_code_runs_only_for_suites_the_user_named(inproc, tmp_path: Path) -> None:
    """A file: path is code. It runs for the suite named on the command line and what it includes from its own
    folder; a file reached otherwise (an include from elsewhere, a caller that did not name it) needs
    --allow-suite-code. Dispatch payloads cannot name suite files at all."""
    shutil.copytree(FIXTURES / "opdiff", tmp_path / "lib")
    (tmp_path / "mine").mkdir()
    orch = tmp_path / "mine" / "run.yaml"
    orch.write_text("include: [../lib/modules.yaml]\n")
    refused = inproc("list", "-s", str(orch), "-r", "portable")
    assert refused.code == 2 and "runs Python code from a file" in refused.err and "--allow-suite-code" in refused.err
    allowed = inproc("list", "-s", str(orch), "-r", "portable", "--allow-suite-code")
    assert allowed.code == 0 and "scaled_from_file[float32,static]@portable" in allowed.out
    named = inproc("list", "-s", str(tmp_path / "lib" / "all.yaml"), "-r", "portable")
    assert named.code == 0 and "act_t__mode=relu[float32,static]@portable" in named.out
    from harness.suites import load_suites

    with pytest.raises(SpecError, match="runs Python code from a file"):  # not named: refused before anything runs
        load_suites([str(tmp_path / "lib" / "all.yaml")])
    assert load_suites([str(tmp_path / "lib" / "all.yaml")], options=OpdiffOptions(allow_code=True))
    # the worker refuses a case whose file: paths were not allowed at load, whatever its spec says
    from harness.opdiff.build import resolve_path

    with pytest.raises(SpecError, match="may not run code"):
        resolve_path("file:toy.py::Scaled", {"code": False, "cwd": str(tmp_path), "base": str(tmp_path / "lib")})
    from harness.github.events import DispatchError, parse_dispatch

    with pytest.raises(DispatchError, match="is a file, not a suite"):
        parse_dispatch({"action": "nightly", "client_payload": {"repo": "pytorch/executorch", "sha": "a" * 40,
                                                                "suites": "ops,evil.yaml"}})


def test_code_reached_any_other_way_is_refused_and_edits_to_it_run_again(inproc, tmp_path: Path) -> None:
    """A file: path inside a template variable's value is checked like one written in place; a dotted path outside
    torch.nn is code too; the contents of a file: path key the result cache."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "mine").mkdir()
    (tmp_path / "lib" / "evil.py").write_text("import torch\nclass X(torch.nn.Module):\n    def forward(self, x):\n        return x\n")
    (tmp_path / "lib" / "inc.yaml").write_text(textwrap.dedent("""\
        tests:
          - id: t
            op:
              type: template_module
              path: torch.nn.Sequential
              vars: {m: [{type: construct, path: "file:evil.py::X"}]}
              args: [{var: m}]
            in: [{type: tensor, shape: [2], kind: float}]
        """))
    (tmp_path / "lib" / "sys.yaml").write_text(textwrap.dedent("""\
        tests:
          - id: s
            op: {type: module, path: os.system, args: ["true"]}
            in: []
        """))
    for inc in ("inc.yaml", "sys.yaml"):
        (tmp_path / "mine" / "run.yaml").write_text(f"include: [../lib/{inc}]\n")
        res = inproc("list", "-s", str(tmp_path / "mine" / "run.yaml"), "-r", "portable")
        assert res.code == 2 and ("runs Python code from a file" in res.err or "calls Python code outside torch.nn." in res.err), res.err
    # the suite named itself: allowed, and the file's contents are part of the case (an edit is a new cache key)
    named = load_opdiff(tmp_path / "lib" / "inc.yaml", named=True)
    before = named[0].spec_hash
    (tmp_path / "lib" / "evil.py").write_text((tmp_path / "lib" / "evil.py").read_text() + "# edited\n")
    assert load_opdiff(tmp_path / "lib" / "inc.yaml", named=True)[0].spec_hash != before
    assert list(named[0].spec["code"]) == ["file:evil.py::X"]


@pytest.mark.parametrize(("text", "ok"), [
    ("dims: {N: \"4\"}\n" + T + "      - {type: tensor, shape: [N], kind: float, mean: \"1.5\"}\n", True),
    (T + "      - {type: optional, p_none: \"0.5\", elem: {type: const, value: 1}}\n", True),
    (T + "      - {type: int_list, elems: [1.0]}\n    cast_input0_to_complex: \"true\"\n", True),
    ("presets:\n  bad: {type: tensor, shape: [], kind: float}\n" + T + "      - {type: tensor, shape: [2], kind: float}\n", False),
])
def test_what_opdiff_accepts_loose_or_refuses_unused(inproc, tmp_path: Path, text: str, ok: bool) -> None:
    """opdiff's models coerce numeric and boolean strings (pydantic's lax mode) and validate every preset."""
    res = _validate(inproc, tmp_path, text)
    assert (res.code == 0) is ok, res.err


def test_run_and_opdiff_report(bti, tmp_path: Path) -> None:
    """The suite on portable and XNNPACK with two sampled input sets and opdiff's skips; then opdiff's JSONL, checked
    against the format opdiff documents (README "Output Format" and measure/jsonl_writter.py)."""
    out = tmp_path / "out"
    res = bti("run", "-s", str(SUITE), "-r", "portable", "-r", "xnnpack", "-o", str(out), "--no-reuse", "-j", "2",
              "--sampled-inputs", "2", "--seed", "3", "--skips", "gather_randint:xnnpack;lin_t*:*", "--repeats", "4",
              timeout=900)
    assert res.code in (0, 1), res.err
    recs = {json.loads(line)["id"]: json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()[1:]}
    status = {k: r["status"] for k, r in recs.items()}
    assert status["gather_randint[float32,static]@xnnpack"] == "SKIP"
    assert recs["gather_randint[float32,static]@xnnpack"]["detail"] == "--skips gather_randint:xnnpack"
    assert all(status[f"{i}[float32,static]@{r}"] == "SKIP" for i in cases() if i.startswith("lin_t") for r in ("portable", "xnnpack"))
    for name in ("add_refs", "mul_scalar_rank1", "clamp_optional_none", "cat_list", "scaled_from_file", "act_t__mode=relu",
                 "lin_cases__feat=8__inp=x8__out=3", "norm_pair__eps=0_001", "test_14"):
        for recipe in ("portable", "xnnpack"):
            assert status[f"{name}[float32,static]@{recipe}"] in ("PASS", "PASS_UNDELEGATED"), recs[f"{name}[float32,static]@{recipe}"]
    two = recs["add_refs[float32,static]@portable"]["sampled_inputs"]
    assert len(two) == 2 and all(d["ok"] and d["max_abs"] == 0.0 for d in two)
    pair = recs["norm_pair__eps=0_001[float32,static]@xnnpack"]["baseline"]
    assert pair["judged"] is False and pair["diff"]["ok"] and pair["diff"]["max_abs"] > 0  # layer norm vs RMS norm
    rep = bti("report", str(out / "results.jsonl"), "-o", str(out), "--format", "opdiff")
    assert rep.code == 0, rep.err
    lines = [json.loads(x) for x in (out / "opdiff.jsonl").read_text().splitlines()]
    meta = lines[0]
    assert meta["type"] == "meta" and set(meta["meta"]) == {"format_name", "format_version", "created_at", "env", "extra"}
    assert meta["meta"]["format_name"] == "opdiff_run" and meta["meta"]["extra"]["params"]["seed"] == 3
    assert set(meta["meta"]["extra"]["params"]) >= {"seed", "repeats", "num_sampled_inputs", "mode"}
    items = {x["id"]: x for x in lines[1:]}
    assert len(items) == len(cases()) and all(x["type"] == "item" for x in items.values())
    for item in items.values():
        assert set(item) == {"type", "id", "test_type", "cases", "baseline", "backends"}
        assert item["test_type"] in ("single", "pair") and len(item["cases"]) == (2 if item["test_type"] == "pair" else 1)
        assert all(set(c) == {"yaml", "id", "op"} for c in item["cases"])
        for b in item["backends"]:
            assert set(b) == {"backend", "res", "times_all", "diff_all"} and b["backend"] in ("portable", "xnnpack")
            assert len(b["res"]) == len(item["cases"])
            assert all(set(r) == {"status", "err", "ms"} and r["status"] in
                       ("OK", "SKIPPED", "EXPORT_FAIL", "INFER_FAIL", "TIMED_ERROR", "ERROR") for r in b["res"])
            for d in b["diff_all"] or []:
                assert set(d) == {"ok", "mse", "max_abs", "mean_abs"} if d["ok"] else {"ok", "code", "msg"} <= set(d)
    single = items["add_refs"]["backends"][0]
    assert single["res"][0]["status"] == "OK" and single["res"][0]["ms"] > 0 and len(single["diff_all"]) == 2
    assert len(single["times_all"][0]) == 4 and items["add_refs"]["baseline"]["backend"] == "eager"  # --repeats 4
    assert meta["meta"]["extra"]["params"]["repeats"] == 4
    p = items["norm_pair__eps=0_001"]
    assert p["test_type"] == "pair" and p["baseline"] is None
    assert [c["id"] for c in p["cases"]] == ["norm_pair__eps=0_001__a", "norm_pair__eps=0_001__b"]
    assert p["cases"][1]["op"] == "file:toy.py::RMSNormed"
    assert p["backends"][0]["diff_all"][0]["max_abs"] == pytest.approx(pair["diff"]["max_abs"], rel=1e-3)
    skipped = items["gather_randint"]["backends"][1]
    assert skipped["backend"] == "xnnpack" and skipped["res"][0]["status"] == "SKIPPED"


def test_with_a_baseline_recipe_pairs_still_compare_their_sides_and_every_input_set_is_held(bti, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = bti("run", "-s", str(SUITE), "-r", "portable", "--baseline", "torch-cpu", "--sampled-inputs", "2",
              "-k", "norm_pair*", "-k", "add_refs", "-o", str(out), "--no-reuse", "-j", "2", timeout=900)
    assert res.code == 0, res.err
    recs = {json.loads(x)["id"]: json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()[1:]}
    pair = recs["norm_pair__eps=0_001[float32,static]@portable"]
    assert pair["status"] == "PASS" and pair["baseline"]["judged"] is False and pair["baseline"]["b_times_ms"]
    single = recs["add_refs[float32,static]@portable"]
    assert single["baseline"]["recipe"] == "torch-cpu" and len(single["sampled_inputs"]) == 2
    assert bti("report", str(out / "results.jsonl"), "-o", str(out), "--format", "opdiff").code == 0
    items = {json.loads(x)["id"]: json.loads(x) for x in (out / "opdiff.jsonl").read_text().splitlines()[1:]}
    assert items["norm_pair__eps=0_001"]["baseline"] is None and items["add_refs"]["baseline"]["backend"] == "torch-cpu"
    assert {b["backend"] for b in items["norm_pair__eps=0_001"]["backends"]} == {"torch-cpu", "portable"}
    assert all(t is not None for b in items["norm_pair__eps=0_001"]["backends"] for t in b["times_all"])


def test_a_bad_skip_is_one_line(inproc) -> None:
    res = inproc("run", "-s", str(SUITE), "--skips", "nocolon")
    assert res.code == 2 and "--skips 'nocolon': expected ID:RECIPE" in res.err


def test_opdiff_options_parse() -> None:
    from harness.cli.options import parse_skips

    assert parse_skips(["a:x;b*:*", " c:y "]) == (("a", "x"), ("b*", "*"), ("c", "y"))
    with pytest.raises(UserError):
        parse_skips([":x"])
