"""Verdicts against misbehaving backends (tests/fault_backend.py), end to end through `bti run`:
inputs written in place, a non-tensor output, a hostile error message, a flaky delegate, a silent
fallback to the portable runtime, per-item memory, a full disk, and what bad input gets."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT, TESTS

pytestmark = pytest.mark.slow
TINY = str(FIXTURES / "suites" / "tiny.yaml")
MUL = "op.mul.a[float32,static]@"


def records(out: Path) -> dict[str, dict]:
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return {r["id"]: r for r in lines[1:]}


def one_line_error(res, *needles: str) -> None:
    assert res.code == 2, (res.code, res.err)
    lines = [x for x in res.err.splitlines() if x.strip()]
    errors = [x for x in res.err.splitlines() if x.startswith("bti: error")]
    assert "Traceback" not in res.err and len(errors) == 1, res.err
    for n in needles:
        assert n in errors[0], (n, errors[0])
    assert lines


def test_backend_faults_are_the_backends_and_never_reach_another_recipe(bti, tmp_path: Path) -> None:
    # the faulty recipes run before portable in each group (no control recipe reorders them): they
    # used to share the input tensors, so portable was blamed for what fault-write-inputs did
    res = bti("run", "-s", TINY, "-r", "fault-write-inputs", "-r", "fault-none", "-r", "portable", "--control", "",
              "-o", str(tmp_path), "--no-reuse", "-j", "1")
    assert res.code == 1, res.err
    recs = records(tmp_path)
    assert len(recs) == 12
    for item_id, rec in recs.items():
        if item_id.endswith("@portable") or not item_id.startswith(MUL):
            assert rec["status"] == "PASS", (item_id, rec.get("detail"))
    wrote = recs[MUL + "fault-write-inputs"]
    assert wrote["status"] == "FAIL_RUN" and wrote["triage"] == "backend"
    assert wrote["detail"] == "run: the backend's fault: the program wrote into its input tensor(s) input[0], input[1]"
    none = recs[MUL + "fault-none"]
    assert none["status"] == "FAIL_RUN", none  # not ERROR: that means a bti bug
    assert "the backend's fault: run returned NoneType, not a list of tensors" in none["detail"]
    assert none["error"]["type"] == "BackendContract"


def test_contract_breaks_in_lower_serialize_and_weights(bti, tmp_path: Path) -> None:
    res = bti("run", "-s", TINY, "-r", "fault-bad-lower", "-r", "fault-bad-serialize", "-o", str(tmp_path / "o"),
              "--no-reuse", "-j", "1")
    recs = records(tmp_path / "o")
    lower, ser = recs[MUL + "fault-bad-lower"], recs[MUL + "fault-bad-serialize"]
    assert lower["status"] == "FAIL_LOWER" and "the backend's fault: lower returned" in lower["detail"], lower
    assert ser["status"] == "FAIL_SERIALIZE", ser
    assert "the backend's fault: serialize returned (str, list), not (program bytes" in ser["detail"]
    assert ser["triage"] == "backend"
    assert res.code == 1
    # a backend that writes into the model's weights (shared with the eager reference and the next recipes): the
    # stage that wrote fails (this one's lower), not the run after it
    res = bti("run", "-s", "models", "-k", "model.mlp*", "-r", "fault-write-weights", "-r", "portable", "-r", "xnnpack",
              "--control", "", "-o", str(tmp_path / "w"), "--no-reuse", "-j", "1")
    recs = records(tmp_path / "w")
    for item_id, rec in recs.items():
        if item_id.endswith("@fault-write-weights"):
            assert rec["status"] == "FAIL_LOWER", rec
            assert rec["detail"].startswith("lower: the backend's fault: it wrote into the model's weights"), rec
        else:
            assert rec["status"] == "PASS", (item_id, rec.get("detail"))  # rebuilt for them


def test_a_real_quantizer_that_writes_into_the_weights_fails_its_quantize_stage(bti, tmp_path: Path) -> None:
    """In a recipe whose programs never run here: the Arm quantizer's FoldScalarMulIntoConvPass scales the caller's
    convolution weights in place (model.scale_conv); before the stage's own check the item said LOWERED."""
    pytest.importorskip("executorch.backends.arm.quantizer", reason="ExecuTorch's Arm backend is not installed")
    res = bti("run", "-s", "models", "-k", "model.scale_conv*", "-r", "arm-ethos-u55", "-r", "xnnpack", "--control", "",
              "-o", str(tmp_path / "a"), "--no-reuse", "-j", "1")
    assert res.code == 0, res.err  # an expected failure
    recs = records(tmp_path / "a")
    arm = recs["model.scale_conv.base[float32,static]@arm-ethos-u55"]
    assert arm["status"] == "XFAIL", arm  # recipes/rules/arm-int8-quantizer.yaml
    assert arm["detail"].startswith("FAIL_QUANTIZE: quantize: the backend's fault: it wrote into the model's weights"), arm
    assert all(r["status"] == "PASS" for i, r in recs.items() if i.endswith("@xnnpack")), recs  # a fresh build after it


def test_with_portable_as_control_a_shared_failure_is_upstream(bti, tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text("suite: s\ncases:\n  - id: a\n    op: aten::sort.default\n    args: [{shape: [4, 6]}]\n")
    res = bti("run", "-s", str(suite), "-r", "xnnpack", "-r", "portable", "-r", "fault-perturb", "-o", str(tmp_path / "o"),
              "--no-reuse", "-j", "1")
    recs = records(tmp_path / "o")
    # sort has no kernel in the pip runtime: the control recipe (portable) fails to load it too, so the
    # other recipes' failures are upstream's, not their backends'
    ctl = recs["op.sort.a[float32,static]@portable"]
    assert ctl["status"] == "FAIL_LOAD" and ctl["triage"] == "upstream"
    for name in ("xnnpack", "fault-perturb"):
        rec = recs[f"op.sort.a[float32,static]@{name}"]
        assert rec["status"] == "FAIL_LOAD" and rec["triage"] == "upstream", rec
    assert res.code == 1
    assert "| upstream |" in (tmp_path / "o" / "summary.md").read_text()


def test_hostile_error_message_and_every_report_is_written(bti, tmp_path: Path) -> None:
    from junitparser import JUnitXml

    res = bti("run", "-s", TINY, "-r", "fault-hostile", "-o", str(tmp_path), "--no-reuse", "-j", "1")
    assert res.code == 1, res.err  # an unexpected failure, not a report crash
    rec = records(tmp_path)[MUL + "fault-hostile"]
    assert rec["status"] == "FAIL_LOWER"
    for name in ("junit.xml", "summary.md", "results.csv", "dashboard.html", "badge.json"):
        assert (tmp_path / name).stat().st_size > 0, name
    xml = JUnitXml.fromfile(str(tmp_path / "junit.xml"))  # well-formed
    text = (tmp_path / "junit.xml").read_text()
    assert "\x00" not in text and "\x1b" not in text and "]]&gt;" in text
    assert len(text) < 200_000  # the 2 MB message is cut
    assert sum(s.failures for s in xml) == 1


def test_a_failing_report_writer_leaves_the_others(bti, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = bti("run", "-s", TINY, "-r", "portable", "-o", str(out), "--no-reuse", "-j", "1", "--no-report")
    assert res.code == 0, res.err
    (out / "dashboard.html").mkdir()  # the html writer cannot replace a directory
    res = bti("report", str(out / "results.jsonl"), "-o", str(out), "--step-summary", str(tmp_path / "summary"),
              "--github-output", str(tmp_path / "gh"))
    one_line_error(res, "report writer(s) failed: html:", "the JSONL is intact")
    assert "# bti results" in (tmp_path / "summary").read_text()  # the job summary still follows
    assert "passed=4" in (tmp_path / "gh").read_text()
    for name in ("junit.xml", "summary.md", "results.csv", "badge.json"):
        assert (out / name).exists(), name
    # JUnit is written in a forked child beside the others: its failure is reported the same way, and its parts go
    (out / "dashboard.html").rmdir()
    (out / "junit.xml").unlink()
    (out / "junit.xml").mkdir()
    res = bti("report", str(out / "results.jsonl"), "-o", str(out))
    one_line_error(res, "report writer(s) failed: junit: IsADirectoryError", "written: md, csv, badge.json")
    assert not list(out.glob(".junit*"))


def test_flaky_delegate_is_rerun_and_marked(bti, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    env = {"BTI_FAULT_STATE": str(state)}
    res = bti("run", "-s", TINY, "-r", "fault-flaky", "-o", str(tmp_path / "once"), "--no-reuse", "-j", "1", env=env)
    assert res.code == 1 and records(tmp_path / "once")[MUL + "fault-flaky"]["status"] == "FAIL_MISMATCH"
    for marker in state.iterdir():
        marker.unlink()
    res = bti("run", "-s", TINY, "-r", "fault-flaky", "-o", str(tmp_path / "re"), "--no-reuse", "-j", "1",
              "--rerun-failures", "2", env=env)
    assert res.code == 1, res.err  # FLAKY fails the run (the documented policy)
    lines = [json.loads(x) for x in (tmp_path / "re" / "results.jsonl").read_text().splitlines()[1:]]
    mine = [r for r in lines if r["id"] == MUL + "fault-flaky"]
    assert [r["status"] for r in mine] == ["FAIL_MISMATCH", "FLAKY"]  # every attempt is on record
    final = mine[-1]
    assert final["attempt"] == 2 and [a["status"] for a in final["attempts"]] == ["FAIL_MISMATCH", "PASS"]
    assert final["triage"] == "flake"
    assert all(r["status"] == "PASS" for r in lines if r["id"] != MUL + "fault-flaky")
    md = (tmp_path / "re" / "summary.md").read_text()
    assert "## Flaky items (1)" in md and "FAIL_MISMATCH → PASS" in md


def test_silent_fallback_fails_expected_delegation(bti, tmp_path: Path) -> None:
    expect = 'expect: [{match: "op.mul.*", delegated_ops: [aten.mul.Tensor]}]\n'
    (tmp_path / "xnn.yaml").write_text("name: xnn\nbackend: executorch\npartitioners: [xnnpack]\n" + expect)
    (tmp_path / "none.yaml").write_text("name: none\nbackend: executorch\npartitioners: []\n" + expect)
    res = bti("run", "-s", TINY, "-r", str(tmp_path / "xnn.yaml"), "-r", str(tmp_path / "none.yaml"),
              "-o", str(tmp_path / "o"), "--no-reuse", "-j", "1")
    recs = records(tmp_path / "o")
    assert recs[MUL + "xnn"]["status"] == "PASS"
    fell = recs[MUL + "none"]
    assert fell["status"] == "FAIL_DELEGATION" and "aten.mul.Tensor" in fell["detail"], fell
    assert recs["op.add.a[float32,static]@none"]["status"] == "PASS"  # no rule for add here
    assert res.code == 1


def test_memory_is_per_item(bti, tmp_path: Path) -> None:
    res = bti("run", "-s", TINY, "-r", "fault-alloc", "-o", str(tmp_path), "--no-reuse", "-j", "1")
    assert res.code == 0, res.err
    recs = records(tmp_path)
    big = recs[MUL + "fault-alloc"]
    assert big["memory_mb"]["run"] > 500 and big["memory_mb"]["run_growth"] > 450, big["memory_mb"]
    later = [r for i, r in recs.items() if not i.startswith(MUL) and r["worker_pid"] == big["worker_pid"]]
    assert later, "the other items ran in the same worker"
    for rec in later:
        assert rec["memory_mb"]["run"] < big["memory_mb"]["run"] - 400, rec["memory_mb"]
        assert rec["memory_mb"]["aot"] > 0 and rec["memory_mb"]["run_growth"] < 100
        assert rec["peak_rss_mb"] >= big["memory_mb"]["run"] - 1  # the worker's own high-water mark kept rising


@pytest.mark.parametrize(("recipe", "needle"), [
    ("name: b\nbackend: executorch\npartitioners: []\ntolerances: {float32: {atol: banana}}\n", "atol must be a number"),
    ("name: b\nbackend: executorch\npartitioners: [xnnpak]\n", "unknown partitioner 'xnnpak'"),
])
def test_bad_recipe_never_runs(bti, tmp_path: Path, recipe: str, needle: str) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(recipe)
    one_line_error(bti("validate", str(path)), needle, f"{path}:")
    res = bti("run", "-s", TINY, "-r", str(path), "-o", str(tmp_path / "o"), "-j", "1")
    one_line_error(res, needle)
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_cached_failures_run_again_with_reruns(bti, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    env = {"BTI_FAULT_STATE": str(state)}
    cache = str(tmp_path / "cache")
    res = bti("run", "-s", TINY, "-r", "fault-flaky", "-o", str(tmp_path / "a"), "--reuse", "--cache-dir", cache, "-j", "1", env=env)
    assert res.code == 1 and records(tmp_path / "a")[MUL + "fault-flaky"]["status"] == "FAIL_MISMATCH"
    res = bti("run", "-s", TINY, "-r", "fault-flaky", "-o", str(tmp_path / "b"), "--reuse", "--cache-dir", cache, "-j", "1",
              "--rerun-failures", "1", env=env)
    rec = records(tmp_path / "b")[MUL + "fault-flaky"]
    assert not rec.get("cached") and rec["status"] == "PASS", rec  # ran again (its second attempt ever passes)
    assert "1 executed, 3 reused" in res.err


def test_binary_suite_file(bti, tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"suite: x\n\xff\xfe\x00\x01binary")
    one_line_error(bti("run", "-s", str(path), "-o", str(tmp_path / "o")), "not UTF-8 text")
    path.write_bytes(b"suite: x\ncases: [\x00\x01]\n")
    one_line_error(bti("validate", str(path)), "invalid YAML")
    path.write_text("suite: x\ncases:\n  - {id: a, op: aten::neg.default, args: [{shape: [2]}], tolerance: {atol: banana}}\n")
    one_line_error(bti("validate", str(path)), "tolerance.atol must be a number")


def test_full_disk_keeps_earlier_records(tmp_path: Path) -> None:
    """The results file stops growing (RLIMIT_FSIZE, as a full disk would): one line, exit 2, the
    records already written intact, and `--resume` finishes the run."""
    import os

    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)]), "BTI_RECIPE_PATH": str(FIXTURES / "recipes")}
    cmd = [sys.executable, "-m", "harness", "run", "-s", TINY, "-r", "portable", "-r", "xnnpack", "-o", str(out),
           "--no-reuse", "-j", "1", "--no-report"]

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))

    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, preexec_fn=limit, cwd=ROOT, timeout=600)
    errors = [x for x in proc.stderr.splitlines() if x.startswith("bti: error")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(errors) == 1, proc.stderr[-2000:]
    assert "cannot write results" in errors[0] and "--resume" in errors[0]
    data = (out / "results.jsonl").read_bytes()
    assert data.endswith(b"\n") and len(data) <= 6000
    kept = [json.loads(x) for x in data.decode().splitlines()]  # every line whole
    assert kept[0]["kind"] == "header" and 1 <= len(kept) - 1 < 8
    proc = subprocess.run([*cmd, "--resume"], env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
    # items that ran under the limit may have failed writing their own files, as on a full disk: the
    # point is that nothing already recorded is lost or rewritten
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    after = (out / "results.jsonl").read_bytes()
    assert after.startswith(data) and len(records(out)) == 8


def test_the_judge_s_own_failure_is_error_not_the_backend_s_mismatch(monkeypatch) -> None:
    """A bug in bti's judge (it once raised KeyError 'max_abs' on a quantized recipe's integer output) is ERROR, triaged
    infra, with the judge's exception as the cause: never a FAIL_MISMATCH charged to the backend."""
    import harness.stages as stages
    from harness.cases.case import Axes, Item
    from harness.recipes import load_recipe
    from harness.suites import load_suites

    case = next(c for c in load_suites(["smoke"]) if c.id == "op.relu.basic")
    item = Item(case, "portable", Axes("float32", "static"))

    def broken(*args, **kwargs):
        raise KeyError("max_abs")

    monkeypatch.setattr(stages, "judge", broken)
    rec, _, _ = stages.run_item(item, load_recipe("portable"), stages.Group(item), "t")
    assert rec["status"] == "ERROR" and "KeyError" in rec["detail"] and "max_abs" in rec["detail"], rec["detail"]
    monkeypatch.undo()
    rec, _, _ = stages.run_item(item, load_recipe("portable"), stages.Group(item), "t")
    assert rec["status"] == "PASS"


def test_a_recipe_s_verdict_does_not_depend_on_the_recipes_before_it(tmp_path: Path) -> None:
    """ExecuTorch's lowering specializes a dynamic batch in the exported program it is given (s77 -> 2, in the nodes'
    values): the group shares that program, so ONNX Runtime after portable once ran a static GRU and failed on batch 3.
    Each recipe's verdict on the GRU with a dynamic batch is the same alone and after portable."""
    alone = _statuses(tmp_path, ["-s", "models", "-k", "model.gru.base*", "--shape", "dynamic"], "onnxruntime")
    after = _statuses(tmp_path, ["-s", "models", "-k", "model.gru.base*", "--shape", "dynamic"], "portable", "onnxruntime")
    assert alone["onnxruntime"] == after["onnxruntime"] == ("PASS", ""), (alone, after)
    assert after["portable"][0] == "XFAIL"  # portable's own program is planned at the example batch (its xfail)


def _statuses(tmp_path: Path, select: list[str], *recipes: str) -> dict[str, tuple[str, str]]:
    """Each recipe's (status, detail's first words) for one group, run with these recipes in this order."""
    from .conftest import run_bti

    out = tmp_path / "-".join(recipes)
    args = [a for r in recipes for a in ("-r", r)]
    res = run_bti("run", *select, *args, "-o", str(out), "--no-reuse", "--no-report", "--repro", "0", "-j", "1")
    assert res.code in (0, 1), res.err[-2000:]
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {r["recipe"]: (r["status"], r["detail"].split(":")[0]) for r in recs if r.get("kind") == "result"}


def test_a_data_dependent_program_lowers_after_another_recipe_as_alone(tmp_path: Path) -> None:
    """Lowering a program with a data-dependent size (nonzero) leaves pending unbacked symbols in the shared exported
    program's shape environment; XNNPACK's lowering after portable's then failed (PendingUnbackedSymbolNotFound,
    FAIL_LOWER) where alone it lowers and runs (its known nonzero mismatch). The program now counts as changed."""
    select = ["-s", "core-ops", "-k", "op.nonzero.default.transposed[[]float32*"]
    alone = _statuses(tmp_path, select, "xnnpack")
    after = _statuses(tmp_path, select, "portable", "xnnpack")
    assert alone["xnnpack"] == after["xnnpack"] == ("XFAIL", "FAIL_MISMATCH"), (alone, after)


def test_a_changed_exported_program_is_exported_again() -> None:
    from harness.cases.case import Axes, Item
    from harness.stages import Group
    from harness.suites import load_suites

    case = next(c for c in load_suites(["models"]) if c.id == "model.gru.base")
    group = Group(Item(case, "portable", Axes("float32", "dynamic")))
    first = group.outcomes(export=True)
    assert not first[0].failed and not group.program_changed()
    node = next(n for n in group.ep.graph.nodes if n.op == "placeholder" and "val" in n.meta and n.meta["val"].dim() == 3)
    node.meta["val"] = node.meta["val"][:1]  # as a backend that specializes a dimension in place would
    assert group.program_changed() and group.ep is None
    assert not group.weights_written()  # dropping the program is nobody's write into the weights (it once blamed torch-cpu)
    again = group.outcomes(export=True)
    assert not again[0].failed and group.ep is not None and not group.program_changed()


def test_a_program_that_lost_a_constant_is_exported_again() -> None:
    """A lowering that drops a buffer from the shared program (executorch 1.4.1 dropped RoBERTa's non-persistent
    token_type_ids; every later recipe's ep.module() then raised KeyError) changes the program, though no node did."""
    import torch

    from harness.cases.case import Axes, Item
    from harness.stages import Group
    from harness.suites import load_suites

    case = next(c for c in load_suites(["hf-models"]) if c.id == "model.roberta.tiny")
    group = Group(Item(case, "portable", Axes("float32", "static")))
    assert not group.outcomes(export=True)[0].failed and not group.program_changed()
    buffer = next(k for k in group.ep.constants if k.endswith("token_type_ids"))  # non-persistent: a constant
    del group.ep.constants[buffer]  # what 1.4.1's OpenVINO lowering left behind
    assert group.program_changed() and group.ep is None
    assert not group.outcomes(export=True)[0].failed and buffer in group.ep.constants and not group.program_changed()
    group.ep.constants["bti_probe"] = torch.zeros(1)  # a constant the program did not hold
    assert group.program_changed() and group.ep is None
    assert not group.outcomes(export=True)[0].failed and not group.program_changed()
    name = next(iter(group.ep.state_dict))
    del group.ep.state_dict[name]  # a parameter gone, as a lowering that takes the weights out would leave it
    assert group.program_changed()
