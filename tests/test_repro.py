"""`bti repro`: a real failure of each stage, and a crash, written out as a standalone script and run without bti.

One `bti run` over tests/fixtures/suites/repro.yaml (a real failure per stage on the shipped recipes) and the models
suite's GRU (a model case: its script carries the exported program). Each script runs where ``import harness``
fails, and must end as bti recorded it: the crash's in a fresh interpreter, the others forked from one that has
imported torch and ``executorch.exir`` (``_run_warm``).
"""

from __future__ import annotations

import ast
import json
import re
import runpy
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT, run_bti
from .zygote import Zygote

SUITE = FIXTURES / "suites" / "repro.yaml"
POINTWISE = FIXTURES / "suites" / "pointwise.yaml"
INT8 = "xnnpack-int8-static-per-channel"
# item -> (the status bti records, the stage line its script ends on)
CASES = {
    "op.add.eager_fails[float32,static]@portable": ("FAIL_EXPORT", "the export stage failed (RuntimeError)"),
    "op.native_layer_norm.layer_norm[float32,static]@openvino-int8": ("FAIL_QUANTIZE", "the quantize stage failed (TypeError)"),
    f"op.mul.rank0_rank4[float32,static]@{INT8}": ("XFAIL", "the lower stage failed (IndexError)"),
    "op._local_scalar_dense.scalar_out[float32,static]@portable": ("FAIL_SERIALIZE", "the serialize stage failed (AssertionError)"),
    "op.sort.no_kernel[float32,static]@portable": ("FAIL_LOAD", "the load stage failed (RuntimeError)"),
    # the recipe's rule is limited to the ops suite it was measured on: here, in the fixture suite, it is unexpected
    "op.mul.rank0_rank4[float32,static]@openvino-int8": ("FAIL_RUN", "the run stage failed (RuntimeError)"),
    "op.split_with_sizes.split_dynamic[float32,dynamic]@portable": ("FAIL_RUN", "the run stage failed (RuntimeError)"),
    "op.nonzero.nonzero[float32,static]@portable": ("FAIL_MISMATCH", "the outputs are out of tolerance"),
    f"op.nonzero.nonzero[float32,static]@{INT8}": ("FAIL_MISMATCH", "the outputs are out of tolerance"),
    f"model.gru.base[float32,dynamic]@{INT8}": ("XFAIL", "the run stage failed (RuntimeError)"),
}
CRASH = f"op.linear.linear_fc[float32,static]@{INT8}"
BLOCK_BTI = "import runpy, sys; sys.modules['harness'] = None; runpy.run_path(sys.argv[1], run_name='__main__')"
SCRIPT_ENV = {"PATH": "/usr/bin:/bin"}
WARM = Zygote("", plain_env={**SCRIPT_ENV, "HOME": tempfile.gettempdir()})


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("repro")
    res = run_bti("run", "-s", str(SUITE), "-s", "models", "-k", "op.*", "-k", "model.gru.base*", "-r", "portable", "-r", INT8,
                  "-r", "openvino-int8", "-o", str(out), "--no-reuse", "--no-report", "--repro", "3")
    assert res.code == 1, res.err[-3000:]
    return out


def _records(out: Path) -> dict[str, dict]:
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {r["id"]: r for r in recs if r.get("kind") == "result"}


def _script(out: Path, item: str, name: str) -> Path:
    res = run_bti("repro", item, "--results", str(out / "results.jsonl"), "-o", str(out / name), "-s", str(SUITE))
    assert res.code == 0, res.err
    assert Path(res.out.strip()) == out / name
    return out / name


def _run_alone(script: Path) -> subprocess.CompletedProcess[str]:
    """The script in a fresh interpreter (not the tests' warm process: it must import what it uses itself), outside the
    repository, where importing bti fails."""
    return subprocess.run([sys.executable, "-c", BLOCK_BTI, str(script)], cwd=script.parent, capture_output=True, text=True,
                          timeout=600, env={**SCRIPT_ENV, "HOME": str(script.parent)})


def _run_warm(script: Path) -> subprocess.CompletedProcess[str]:
    """The script as ``_run_alone`` runs it, but forked from a process that has imported torch and ``executorch.exir``
    and nothing of bti's (``WARM``), which a new interpreter would import again (about 5 s of CPU a script). Every
    other import is the script's own, and the template's imports are proven in a new interpreter by
    ``test_a_crash_reproduces_as_a_crash``."""
    env = {**SCRIPT_ENV, "HOME": str(script.parent)}
    got = WARM.run_script(script, env, 600) if WARM.usable(env) else None
    if got is None:
        return _run_alone(script)
    return subprocess.CompletedProcess([str(script)], *got)


def test_each_stage_s_failure_reproduces_without_bti(run: Path) -> None:
    recs = _records(run)
    for item, (status, _) in CASES.items():
        assert recs[item]["status"] == status, (item, recs[item]["status"], recs[item].get("detail"))
    scripts = {item: _script(run, item, f"case{i}.py") for i, item in enumerate(CASES)}
    for path in scripts.values():
        text = path.read_text()
        assert "harness" not in text.replace("harness/judge.py", "") and "import bti" not in text
    with ThreadPoolExecutor(2) as pool:
        done = dict(zip(scripts, pool.map(_run_warm, scripts.values()), strict=True))
    for item, proc in done.items():
        last = proc.stdout.strip().splitlines()[-1]
        assert proc.returncode == 1 and last == f"REPRODUCED: {CASES[item][1]}", (item, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "bti recorded:" in proc.stdout and "torch 2." in proc.stdout  # the versions it ran on, and bti's verdict


def test_a_model_case_carries_its_exported_program(run: Path) -> None:
    text = _script(run, f"model.gru.base[float32,dynamic]@{INT8}", "gru.py").read_text()
    assert "PROGRAM = (" in text and "torch.export.load" in text and "#   def forward(self" in text
    assert "Dim('" in text and "DYNAMIC_SHAPES = " in text  # the dynamic batch it failed on


def _script_tolerance(text: str) -> dict:
    line = next(line for line in text.splitlines() if line.startswith("TOLERANCE = "))
    return ast.literal_eval(line.split("=", 1)[1].split("#", 1)[0].strip())


def test_an_item_that_failed_before_comparing_carries_the_tolerance_bti_would_judge_it_by(run: Path) -> None:
    """Its record names no tolerance; a script that gets past the failure on a fixed version must judge as bti
    would: a model under an int8 recipe by the model bound (not the operators' 1e-3), an operator by the recipe's."""
    recs = _records(run)
    gru, op = f"model.gru.base[float32,dynamic]@{INT8}", f"op.mul.rank0_rank4[float32,static]@{INT8}"
    assert not recs[gru].get("tolerance") and not recs[op].get("tolerance")  # both failed before the comparison
    model = _script_tolerance(_script(run, gru, "gru_tol.py").read_text())
    assert model == {"atol": 0.1, "rtol": 0.04, "qtol": 0.0, "sqnr_db": 10.0, "rule": "model"}, model
    judged = [r["tolerance"] for r in recs.values() if r["recipe"] == INT8 and r["id"].startswith("op.")
              and r.get("tolerance") and r["tolerance"].get("rule") != "model"]
    assert judged, "no judged int8 operator in the run to compare with"
    opt = _script_tolerance(_script(run, op, "op_tol.py").read_text())
    import harness.repro as repro

    assert opt == repro._tolerance({"tolerance": judged[0]}), (opt, judged[0])  # as the judge records an int8 op's


def test_a_program_too_large_for_its_script_is_written_beside_it(run: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A real-size model's program (ALBERT's 825 MB) is not carried in the script: `bti repro` saves it beside the
    script, which loads it from there and reproduces as before; without it, the script says so in one line (exit 2).
    The run's own scripts do not write such a file (one line, no script). The cap is lowered to the GRU's size here."""
    import harness.repro as repro

    monkeypatch.setattr(repro, "MAX_PROGRAM_BYTES", 1000)
    item = f"model.gru.base[float32,dynamic]@{INT8}"
    script = repro.write(run / "results.jsonl", item, tmp_path / "big.py")
    text = script.read_text()
    assert "PROGRAM = (" not in text and "PROGRAM_FILE = 'big.pt2'" in text and (tmp_path / "big.pt2").stat().st_size > 1000
    assert not repro.is_script(script)  # bti merge and the portal do not copy it without its program
    assert repro.program_beside(script) == tmp_path / "big.pt2"  # the upstream report names it beside the script
    with pytest.raises(repro.UserError, match="a script's name, not a program's"):
        repro.write(run / "results.jsonl", item, tmp_path / "other.pt2")
    assert not (tmp_path / "other.pt2").exists()
    proc = _run_warm(script)
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.stdout.strip().splitlines()[-1] == f"REPRODUCED: {CASES[item][1]}"
    (tmp_path / "big.pt2").rename(tmp_path / "elsewhere.pt2")
    proc = _run_warm(script)
    assert proc.returncode == 2 and "big.pt2: not found beside this script" in proc.stderr, (proc.stdout, proc.stderr)
    found = repro.find_record(run / "results.jsonl", item)
    with pytest.raises(repro.Unsupported, match="writes it beside its script"):
        repro._write(found.record, found.header, tmp_path / "auto.py", (), beside=False)
    assert not (tmp_path / "auto.py").exists() and not (tmp_path / "auto.pt2").exists()
    # through the run's own path (`bti run --repro`): the same item as an unexpected failure gets no script, and a line
    failing = tmp_path / "failing.jsonl"
    failing.write_text("".join(  # the run's header and this one record
        json.dumps({**rec, "status": "FAIL_RUN", "xfail": None}) + "\n" if rec.get("id") == item else line + "\n"
        for line in (run / "results.jsonl").read_text().splitlines() for rec in [json.loads(line)]
        if rec.get("id") == item or rec.get("kind") != "result"))
    written, skipped = repro.write_failures(failing, tmp_path / "auto", 10, (str(SUITE),))
    assert written == [] and len(skipped) == 1 and skipped[0].startswith(item), skipped
    assert "writes it beside its script" in skipped[0], skipped
    assert not list((tmp_path / "auto").glob("*.pt2"))


def test_the_rounding_probe_runs_a_scripts_quantized_program(run: Path) -> None:
    """benchmarks/rounding.py reads a repro script's own export and quantize (no bti import) and reruns its program
    with ties rounded the other way: where no element changed, the program must not have moved."""
    script = _script(run, CRASH, "probe.py")
    block = "import runpy, sys; sys.modules['harness'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    proc = subprocess.run([sys.executable, "-c", block, str(ROOT / "benchmarks" / "rounding.py"), str(script)], cwd=script.parent,
                          capture_output=True, text=True, timeout=600, env={**SCRIPT_ENV, "HOME": str(script.parent)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    nodes = re.search(r"^(\d+) quantize nodes, (\d+) calls; .* max (\d+[.]\d+)%$", proc.stdout, re.M)
    moved = re.search(r"^output\[0\]: ties away from zero moves the program (\S+) dB from itself", proc.stdout, re.M)
    assert nodes and int(nodes[1]) >= 1 and int(nodes[2]) == int(nodes[1]) and moved, proc.stdout  # each node replaced, run once
    assert float(nodes[3]) > 0 or moved[1] == "inf", proc.stdout
    # its rounding: ties away from zero, everything else as torch.round (0.49999997 is no tie)
    import torch

    half_away = runpy.run_path(str(ROOT / "benchmarks" / "rounding.py"))["half_away"]
    v = torch.tensor([0.5, 1.5, 2.5, -2.5, -0.5, 0.49999997, -1.4999999, 2.4, 3.0])
    assert half_away(v).tolist() == [1.0, 2.0, 3.0, -3.0, -1.0, 0.0, -1.0, 2.0, 3.0]
    # --near: values within EPS of a tie go to their other neighbour; --steps: one node's elements one step off, per node
    proc = subprocess.run([sys.executable, "-c", block, str(ROOT / "benchmarks" / "rounding.py"), "--near", "0.001", "--steps",
                           "0.05", "--nodes", "1", str(script)], cwd=script.parent, capture_output=True, text=True, timeout=600,
                          env={**SCRIPT_ENV, "HOME": str(script.parent)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    stepped = re.search(r"^quantize node 0 \(\S+, \((\d+), (\d+)\)\): 5.00% of its elements one step off moves output\[0\] "
                        r"(\S+), (\S+), (\S+) dB from the program \(3 draws\)$", proc.stdout, re.M)
    assert stepped and all(float(v) < 200 for v in stepped.groups()[2:]), proc.stdout  # a step moved: a finite SQNR
    assert len(re.findall(r"^quantize node ", proc.stdout, re.M)) == 1, proc.stdout  # --nodes 1
    assert re.search(r"^output\[0\]: values within 0.001 step of a tie the other way moves the program \S+ dB from itself",
                     proc.stdout, re.M), proc.stdout
    near_other_way = runpy.run_path(str(ROOT / "benchmarks" / "rounding.py"))["near_other_way"]
    assert near_other_way(torch.tensor([2.5004, 2.4996, 2.6, 3.5, -0.5003]), 1e-3).tolist() == [2.0, 3.0, 3.0, 3.0, 0.0]


def test_an_operator_case_is_readable_source(run: Path) -> None:
    text = _script(run, f"op.mul.rank0_rank4[float32,static]@{INT8}", "mul.py").read_text()
    assert "return torch.ops.aten.mul.Tensor(t[0], t[1])" in text and "PROGRAM" not in text
    assert "XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=False))" in text
    assert "XnnpackPartitioner()" in text and "recorded: XFAIL" in text


def test_a_crash_reproduces_as_a_crash(run: Path) -> None:
    assert _records(run)[CRASH]["status"] == "CRASH"
    proc = _run_alone(_script(run, CRASH, "crash.py"))
    assert proc.returncode == -signal.SIGABRT, (proc.returncode, proc.stdout[-1000:], proc.stderr[-2000:])
    assert "[run] ..." in proc.stdout and "quantize_per_channel_out(), assert failed" in proc.stderr
    assert "Fatal Python error: Aborted" in proc.stderr  # faulthandler names where


def test_a_crash_s_expected_stage_is_taken_only_from_a_known_stage_name() -> None:
    """``died_in`` is text from the results (a fork's code wrote them): only a stage's name becomes the expectation."""
    from harness.repro import _expected

    def stage(died_in: object) -> str:
        return _expected({"status": "CRASH", "died_in": died_in, "error": {"type": "CRASH"}})["stage"]

    assert [stage(v) for v in ("lower", "compare", "export")] == ["lower", "compare", "export"]
    assert [stage(v) for v in ("run\nx", "Lower", ["run"], None, "")] == [""] * 5
    assert _expected({"status": "FAIL_LOWER", "died_in": "run"})["stage"] == "lower"  # a stage's failure names its own


def test_a_crash_script_knows_the_stage_the_worker_died_in_and_says_when_that_stage_passes(run: Path) -> None:
    """The record's ``died_in`` is the script's expected stage: a crash recorded in the run that does not come there (a
    fixed runtime, or, as here, the expectation moved to the quantize stage before it) is NOT REPRODUCED once that
    stage passes, rather than a run to the end (or, for a program bti only lowered, NOT RUN). On executorch 1.4.1 the
    script of Vela's crash on `model.qkv_unbind` ends so: the U55 lowers it there."""
    assert _records(run)[CRASH]["died_in"] == "run"
    script = _script(run, CRASH, "crash-stage.py")
    text = script.read_text()
    assert "EXPECTED = {'status': 'CRASH', 'stage': 'run', 'type': 'CRASH', " in text
    script.write_text(text.replace("'stage': 'run', 'type': 'CRASH'", "'stage': 'quantize', 'type': 'CRASH'", 1))
    proc = _run_warm(script)
    assert proc.returncode == 0, (proc.stdout[-1000:], proc.stderr[-2000:])
    assert proc.stdout.rstrip().endswith("[quantize] ok\nNOT REPRODUCED: bti's worker died in the quantize stage; here it passed")
    assert "[lower] ..." not in proc.stdout


def test_bti_run_writes_the_first_failures_scripts_one_per_root_cause(run: Path) -> None:
    from harness.repro import script_name

    by_name = {script_name(item): rec for item, rec in _records(run).items()}
    written = [by_name[p.name] for p in (run / "repro").glob("*.py")]
    assert len(written) == 3  # --repro 3
    assert len({(r["status"], (r.get("error") or {}).get("signature")) for r in written}) == 3  # three different bugs


def test_a_passing_item_is_written_as_a_control_on_request(run: Path) -> None:
    """`bti repro --passing`: a passing int8 item's script runs every stage and the comparison against its quantized
    program, and ends PASSED AS RECORDED (exit 0); the same script with the delegate's outputs scaled by 1.5 does not."""
    recs = _records(run)
    item = next(i for i, r in sorted(recs.items()) if i.endswith(f"@{INT8}") and r["status"] == "PASS")
    script = run / "control.py"
    res = run_bti("repro", item, "--results", str(run / "results.jsonl"), "-o", str(script), "-s", str(SUITE), "--passing")
    assert res.code == 0, res.err
    proc = _run_warm(script)
    assert proc.returncode == 0 and proc.stdout.rstrip().splitlines()[-1].startswith("PASSED AS RECORDED"), proc.stdout[-2000:]
    assert "[quantize] ok" in proc.stdout and "[compare] ok" in proc.stdout
    strict = run / "control_scaled.py"
    text = script.read_text()
    assert text.count("problem = compare(outs, eager, program_outputs)") == 1
    strict.write_text(text.replace("problem = compare(outs, eager, program_outputs)", "problem = compare([o * 1.5 for o in outs], eager, program_outputs)"))
    proc = _run_warm(strict)
    assert proc.returncode == 3 and "DIFFERENT: the outputs are out of tolerance" in proc.stdout, proc.stdout[-2000:]


def test_a_dynamic_recipe_s_per_row_reference_is_what_xnnpack_computes(tmp_path: Path) -> None:
    """`quantize.reference: per-row` (harness/qd8.py, copied into the script): the dynamic recipe's delegate is within
    1e-5 of the per-row program on an MLP and of the per-image program on a convolution, where the per-tensor program
    is not (each script with its reference switched back, and the same tolerance, fails), nor rows of the
    convolution's last dimension (its script with XNNPACK's per-image choice switched off fails). A 1x1 convolution
    is XNNPACK's matrix product over each pixel's channels: per pixel, and per image fails. A 1x1 convolution with a
    stride, padding or groups is a convolution again: within 1e-5 of the per-image program (per pixel is 41 dB off).
    One input read by a 1x1 and a 3x3 convolution (`model.shared_pointwise`): the 1x1's output is per pixel as before,
    and the 3x3's is XNNPACK's bug (it reads image n's per-pixel integers through the n-th pixel's parameters), which
    the verdict (an XFAIL by the recipe's rule) and its repro show. One input read by a linear layer and a 3x3
    convolution (`model.shared_linear_conv`): the convolution's output is per image, and the linear's is the
    delegate's channels-last bug (it reads the convolution's NHWC copy), shown the same way."""
    dyn = "xnnpack-int8-dynamic-per-channel"
    items = {f"model.mlp.base[float32,static]@{dyn}": "mlp", f"op.conv2d.nn_conv[float32,static]@{dyn}": "conv",
             f"op.conv2d.nn_conv_1x1[float32,static]@{dyn}": "pointwise"}
    # the models suite's reproducers of the two bugs: {item: (the output the bug spoils, the right one)}
    shared = {f"model.shared_pointwise.base[float32,static]@{dyn}": (1, 0),
              f"model.shared_linear_conv.base[float32,static]@{dyn}": (0, 1)}
    res = run_bti("run", "-s", "models", "-s", "ops", "-s", str(POINTWISE), "-k", "model.mlp.base[[]float32,static]",
                  "-k", "op.conv2d.nn_conv[[]float32,static]", "-k", "op.conv2d.nn_conv_1x1*[[]float32,static]",
                  "-k", "model.shared_*.base[[]float32,static]", "-r", dyn, "-o", str(tmp_path), "--no-reuse",
                  "--no-report")
    recs = _records(tmp_path)
    assert res.code == 0 and {i for i, r in recs.items() if r["status"] != "PASS"} == set(shared), res.err[-2000:]
    others = [f"op.conv2d.nn_conv_1x1_{k}[float32,static]@{dyn}" for k in ("stride2", "padded", "grouped")]
    for item in [*items, *others]:
        rec = recs[item]
        assert rec["outputs"][0]["quantized"]["max_abs"] <= 1e-5, (item, rec["outputs"])
    for n, (item, (wrong, right)) in enumerate(shared.items()):
        bug = recs[item]  # the recipe's rule names it: XFAIL, its own failure a FAIL_MISMATCH on the spoilt output
        assert bug["status"] == "XFAIL" and bug["xfail"]["status"] == "FAIL_MISMATCH" \
            and bug["detail"].startswith(f"FAIL_MISMATCH: output[{wrong}]: ") \
            and bug["outputs"][wrong]["quantized"]["max_abs"] > 0.1 \
            and bug["outputs"][right]["quantized"]["max_abs"] <= 1e-5, bug
        res = run_bti("repro", item, "--results", str(tmp_path / "results.jsonl"), "-o", str(tmp_path / f"shared{n}.py"))
        assert res.code == 0, res.err
        proc = _run_warm(tmp_path / f"shared{n}.py")
        assert proc.returncode == 1 and f"[compare] failed: output[{wrong}]: " in proc.stdout \
            and proc.stdout.strip().splitlines()[-1] == "REPRODUCED: the outputs are out of tolerance", proc.stdout[-2000:]
        # the program's own sensitivity, drawn as bti draws it: the same figure as the record's detail
        moved = re.search(r"the program itself, its inputs moved one float step: (unchanged|-?[0-9.]+ dB) from its own output",
                          bug["detail"])
        assert moved and f"[compare] output[{wrong}]: {moved.group(0)}" in proc.stdout, (bug["detail"], proc.stdout[-2000:])
    for item, name in items.items():
        res = run_bti("repro", item, "--results", str(tmp_path / "results.jsonl"), "-o", str(tmp_path / f"{name}.py"), "--passing",
                      "-s", str(POINTWISE))
        assert res.code == 0, res.err
        text = (tmp_path / f"{name}.py").read_text()
        assert "\nPER_ROW_REFERENCE = True" in text and "def qd8_fake_quantize(" in text
        tol = {"atol": 1e-5, "rtol": 0.0, "qtol": 0.0, **({"rule": "model"} if name == "mlp" else {})}
        tight = re.sub(r"\nTOLERANCE = .*", f"\nTOLERANCE = {tol!r}", text, count=1)
        variants = {"tight": (tight, 0), "per_tensor": (tight.replace("\nPER_ROW_REFERENCE = True", "\nPER_ROW_REFERENCE = False", 1), 3)}
        if name == "conv":
            assert tight.count("nonbatch = 3 if conv is not None else 1") == 1
            variants["rows"] = (tight.replace("nonbatch = 3 if conv is not None else 1", "nonbatch = 1"), 3)
        if name == "pointwise":
            assert tight.count("own is not None and pointwise(own)") == 1
            variants["per_image"] = (tight.replace("own is not None and pointwise(own)", "False"), 3)
        for variant, (body, code) in variants.items():
            (tmp_path / f"{name}_{variant}.py").write_text(body)
            proc = _run_warm(tmp_path / f"{name}_{variant}.py")
            want = "PASSED AS RECORDED" if code == 0 else "exceeds the budget"
            assert proc.returncode == code and want in proc.stdout, (name, variant, proc.stdout[-2000:])


@pytest.mark.parametrize("item, words", [
    ("op.mul.rank0_rank4[float32,static]@portable", "is PASS: there is no failure to reproduce"),
    ("op.nothing[float32,static]@portable", "is not in"),
])
def test_what_cannot_be_reproduced_is_one_line(run: Path, item: str, words: str) -> None:
    res = run_bti("repro", item, "--results", str(run / "results.jsonl"), "-o", str(run / "x.py"))
    assert res.code == 2 and words in res.err and len(res.err.strip().splitlines()) <= 2, res.err
    assert "Traceback" not in res.err and not (run / "x.py").exists()


def test_upstream_bugs_one_section_per_root_cause(run: Path, tmp_path: Path) -> None:
    """`bti report --upstream-bugs`: the run's bugs grouped by root cause across recipes, each with its owner, versions,
    items and repro; another version's results where the same items pass name the version that no longer fails."""
    lines = (run / "results.jsonl").read_text().splitlines()
    other = []
    for line in lines:  # the same items on a later executorch, where nonzero was fixed
        rec = json.loads(line)
        if rec.get("kind") == "header":
            rec["packages"] = {**rec.get("packages", {}), "executorch": "9.9.9"}
        elif rec["id"].startswith("op.nonzero."):
            rec.update(status="PASS", detail="")
        other.append(json.dumps(rec))
    (tmp_path / "later.jsonl").write_text("\n".join(other) + "\n")
    res = run_bti("report", str(run / "results.jsonl"), "-o", str(run), "--format", "md", "--upstream-bugs",
                  "--other-results", str(tmp_path / "later.jsonl"), "--quiet")
    assert res.code == 0, res.err
    text = (run / "upstream-bugs.md").read_text()
    sections = text.split("\n## ")[1:]
    nonzero = [s for s in sections if "wrong results from aten::nonzero.default" in s]
    assert len(nonzero) == 1 and nonzero[0].count("@") >= 3  # one bug, three recipes
    n = nonzero[0].split("**items (")[1].split(")")[0]
    assert re.search(rf"no longer fails on:\*\* executorch 9\.9\.9 \(torch [^)]+\) \(its {n} item\(s\) there pass\) "
                     r"\(first: executorch 9\.9\.9", nonzero[0]), nonzero[0]
    lower = [s for s in sections if "channels_last_tagged_reshape_pass.py" in s]
    assert len(lower) == 1 and "**rule:** XNNPACK ChannelsLastTaggedReshapePass" in lower[0]  # an xfail naming a bug
    assert all("**repro:**" in s for s in sections)
    linked = re.findall(r"\]\((repro/[^)]+)\)", text)
    assert linked and all((run / link).is_file() for link in linked)  # the scripts bti run wrote
    assert not any("PASS" in s.split("**items")[1].split("\n")[0] for s in sections)


def test_the_portal_s_item_page_links_the_script(run: Path, tmp_path: Path) -> None:
    res = run_bti("portal", str(run / "results.jsonl"), "-o", str(tmp_path / "site"))
    assert res.code == 0, res.err
    copied = sorted((tmp_path / "site" / "repro").rglob("*.py"))
    written = sorted(p.name for p in (run / "repro").glob("*.py"))
    assert [p.name for p in copied] == written and len(written) == 3
    pages = "".join(p.read_text() for p in (tmp_path / "site" / "items").iterdir())
    for name in written:  # the link, relative to the item page, and the command for any failure
        assert f'"repro":"../repro/{copied[0].parent.name}/{name}"' in pages
    assert "bti repro \\u0027op.add.eager_fails[float32,static]@portable\\u0027 --results results.jsonl" in pages
    assert pages.count('"repro_command"') == sum(1 for r in _records(run).values() if r["status"] not in
                                                 ("PASS", "PASS_UNDELEGATED", "XFAIL", "SKIP"))  # failures only


def test_an_arm_tosa_item_runs_on_the_tosa_reference_model_and_its_quantizer_verdict_reproduces(tmp_path: Path) -> None:
    """arm-tosa-int: the script lowers with the Arm quantizer and partitioner for TOSA-1.0+INT and runs the program on the
    TOSA reference model; topk's indices fail the quantizer's SQNR floor (an expected failure), as bti recorded."""
    item = "op.topk.k3[float32,static]@arm-tosa-int"
    res = run_bti("run", "-s", "ops", "-s", "models", "-k", "op.topk.k3*", "-k", "model.scale_conv*", "--shape", "static",
                  "-r", "arm-tosa-int", "-o", str(tmp_path), "--no-reuse", "--no-report", "--repro", "0")
    assert res.code == 0, res.err[-2000:]
    assert "quantizer: output[1]" in _records(tmp_path)[item]["detail"]
    script = _script(tmp_path, item, "topk.py")
    assert "TosaCompileSpec('TOSA-1.0+INT')" in script.read_text() and "RUNS_ON = 'tosa-reference-model'" in script.read_text()
    proc = _run_warm(script)
    assert proc.returncode == 1 and proc.stdout.strip().splitlines()[-1] == "REPRODUCED: the outputs are out of tolerance", \
        proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "[compare] failed: quantizer: output[1]" in proc.stdout
    # a quantizer that writes into the caller's weights (FoldScalarMulIntoConvPass, model.scale_conv): bti's quantize
    # stage fails on it, and so does the script's, which checks the exported program's weights after the stage
    item = "model.scale_conv.base[float32,static]@arm-tosa-int"
    assert "quantize: the backend's fault: it wrote into the model's weights" in _records(tmp_path)[item]["detail"]
    proc = _run_warm(_script(tmp_path, item, "scale_conv.py"))
    assert proc.returncode == 1 and proc.stdout.strip().splitlines()[-1] == "REPRODUCED: the quantize stage failed (BackendContract)", \
        proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "[quantize] failed: it wrote into the model's weights (first.weight, first.bias; values changed: first.weight, first.bias)" in proc.stdout


def test_hostile_results_give_one_line_or_an_inert_script(run: Path, tmp_path: Path) -> None:
    """Results are untrusted (a fork PR's code wrote them): malformed fields are one line and exit 2, text cannot leave
    the script's comment, numbers are finite, and a suite file named by the results is never read."""
    recs = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    item = "op.nonzero.nonzero[float32,static]@portable"
    evil = tmp_path / "evil.yaml"
    evil.write_text("suite: evil\ncases:\n  - {id: x, op: os.system, args: ['touch pwned']}\n")

    def results(**change: object) -> Path:
        out = []
        for rec in recs:
            rec = dict(rec)
            if rec.get("id") == item:
                rec.update(change)
            elif rec.get("kind") == "header":
                rec.update(packages=["not", "a", "mapping"], argv=["run", "-s", str(evil)])
            out.append(json.dumps(rec))
        path = tmp_path / f"r{len(list(tmp_path.glob('r*.jsonl')))}.jsonl"
        path.write_text("\n".join(out) + "\n")
        return path

    hostile = results(detail="x\nimport os; os.system('touch pwned')\r\u2028\x00", axes={"dtype": "float32", "shape": "static", "x": 1},
                      xfail=["a"], tolerance={"atol": float("inf"), "rtol": 1e-5}, runtime="evil\nimport os")
    res = run_bti("repro", item, "--results", str(hostile), "-o", str(tmp_path / "s.py"), "-s", str(SUITE))
    assert res.code == 0, res.err
    text = (tmp_path / "s.py").read_text()
    compile(text, "s.py", "exec")  # a valid script whose results text stayed inside comments and literals
    assert not any(line.startswith("import os") for line in text.splitlines()) and "inf" not in text.split("TOLERANCE = ")[1].split("\n")[0]
    for bad in (results(suite=str(evil), case="op.system.x"), results(axes="static")):
        res = run_bti("repro", item.replace("op.nonzero.nonzero", "op.system.x"), "--results", str(bad), "-o", str(tmp_path / "e.py"))
        assert res.code == 2 and "Traceback" not in res.err and len(res.err.strip().splitlines()) <= 2, res.err
    assert not (tmp_path / "pwned").exists() and not (ROOT / "pwned").exists() and not (tmp_path / "e.py").exists()


def test_bti_merge_takes_the_shards_scripts_with_their_results(tmp_path: Path) -> None:
    """In CI each shard writes its own repro/; the merged results (what the comment, the portal and --upstream-bugs
    read) keep them."""
    outs = []
    for shard in ("1/2", "2/2"):
        out = tmp_path / shard.replace("/", "of")
        res = run_bti("run", "-s", str(SUITE), "-k", "op.nonzero*", "-k", "op.add*", "-k", "op._local_scalar_dense*",
                      "-r", "portable", "--shard", shard, "-o", str(out), "--no-reuse", "--no-report", "-j", "1")
        assert res.code == 1, res.err[-2000:]
        outs.append(out)
    written = sorted(p.name for out in outs for p in (out / "repro").glob("*.py"))
    assert len(written) == 3 and all((out / "repro").is_dir() for out in outs)  # each shard has at least one failure
    (outs[0] / "repro" / "stray.py").write_text("print('not bti')\n")  # not bti's: never carried along
    res = run_bti("merge", *(str(o / "results.jsonl") for o in outs), "-o", str(tmp_path / "merged" / "results.jsonl"))
    assert res.code == 0 and "3 repro script(s)" in res.out, res.out + res.err
    assert sorted(p.name for p in (tmp_path / "merged" / "repro").glob("*.py")) == written


def _exported_source(module: object, example: tuple[object, ...]) -> str:
    """A model case's module as `bti repro` writes it: its exported program, saved into the script."""
    from types import SimpleNamespace

    import harness.repro as repro

    built = SimpleNamespace(module=module, example=example, dynamic_shapes=None)
    return repro._module_source(SimpleNamespace(id="model.block"), built, 0, "float32")[0]


def test_a_program_torch_cannot_load_back_is_not_written_out() -> None:
    """torch 2.13 and 2.14 save an empty `with torch.no_grad():` block (TorchBench's Reformer has them) as a
    wrap_with_set_grad_enabled node that torch.export.load then rejects: a script starting from that load would fail
    at export, not where bti's run failed, so `bti repro` says so in one line instead. The control (the same module
    without the empty block) is written out."""
    import torch

    import harness.repro as repro

    class Block(torch.nn.Module):
        def __init__(self, empty: bool) -> None:
            super().__init__()
            self.empty = empty

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.empty:
                with torch.no_grad():
                    pass
            return x * 2 + 1

    assert "PROGRAM = (" in _exported_source(Block(False), (torch.randn(2, 4),))
    with pytest.raises(repro.Unsupported, match=r"^model\.block: .*torch\.export\.load cannot read back .*"
                                                r"SpecViolationError.*reproduce with `bti run`$"):
        _exported_source(Block(True), (torch.randn(2, 4),))


def test_a_scripts_quantize_leaves_out_the_input_guards_the_arm_passes_cannot_run(monkeypatch) -> None:
    """`ep.module()` calls the input guards as a submodule, which the Arm quantizer's RewriteInplaceArithmeticPass
    cannot run where the graph has an in-place op ("call_module is not supported": TorchBench's RepVGG on
    arm-tosa-int). The script's quantize asks for the module without them; the same program with them fails (the
    control). torch leaves them out by itself where a calling file's path contains "executorch" or "torchao"; that heuristic is
    off here, so the control holds wherever the checkout lives."""
    import base64
    import io
    import zlib

    import torch
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    import harness.repro as repro
    from harness.backends import arm
    from tests.in_place import Residual

    monkeypatch.setattr("torch.export._unlift._ok_to_generate_guards_fn", lambda: True)

    example = (torch.randn(1, 3, 8, 8),)
    scope: dict = {"torch": torch, "io": io, "zlib": zlib, "base64": base64}
    exec(_exported_source(Residual().eval(), example), scope)
    ep = torch.export.export(scope["module"](), example, strict=False)  # the script's export()

    def quantizer() -> object:  # arm-tosa-int's
        return arm.quantizer("tosa", {"tosa_spec": "TOSA-1.0+INT"}, per_channel=True, dynamic=False)

    assert "prepared = prepare_pt2e(ep.module(check_guards=False), quantizer())" in repro._SCRIPT
    prepare_pt2e(ep.module(check_guards=False), quantizer())
    with pytest.raises(Exception, match="RewriteInplaceArithmeticPass"):
        prepare_pt2e(ep.module(), quantizer())
