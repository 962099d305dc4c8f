"""Arm TOSA on the real TOSA reference model; Ethos-U, VGF (and, in test_e2e, Core ML and Vulkan) lowered and
serialized for real, then stopped as LOWERED; ``run_requires`` and the LOWERED status through every report."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from junitparser import JUnitXml, Skipped

from .conftest import bad_recipe

pytestmark = pytest.mark.slow
tosa = pytest.importorskip("tosa_reference_model", reason="the arm extra (tosa-tools) is not installed")


def load(path: Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return lines[0], lines[1:]


def test_arm_tosa_recipes_run_on_the_reference_model_and_xfail_what_they_expect(bti, tmp_path: Path) -> None:
    res = bti("run", "-s", "smoke", "-r", "arm-tosa-fp", "-r", "arm-tosa-int", "-k", "op.add.*", "-k", "op.relu.*",
              "-k", "op.linear.*", "--shape", "static", "--dtype", "float32", "-o", str(tmp_path), "--no-reuse")
    assert res.code == 0, res.err
    _, records = load(tmp_path / "results.jsonl")
    by = {r["id"]: r for r in records}
    for recipe in ("arm-tosa-fp", "arm-tosa-int"):
        for case in ("op.add.bcast_rank4", "op.relu.basic"):
            rec = by[f"{case}[float32,static]@{recipe}"]
            assert rec["status"] == "PASS", rec
            assert rec["runtime"] == "tosa-reference-model"
            assert rec["partition"]["delegated_nodes"] >= 1 and rec["pte_bytes"] > 0
            assert [b["backend"] for b in rec["delegate_blobs"]] == ["TOSABackend"]
            assert {"lower", "serialize", "load", "run", "compare"} <= set(rec["stages"])
        # the recipe's own rule: the Arm partitioner takes a linear whose weight is a graph input, then fails
        linear = by[f"op.linear.fc[float32,static]@{recipe}"]
        assert linear["status"] == "XFAIL" and linear["xfail"]["status"] == "FAIL_LOWER", linear
    relu_fp = by["op.relu.basic[float32,static]@arm-tosa-fp"]["outputs"][0]
    add_int = by["op.add.bcast_rank4[float32,static]@arm-tosa-int"]["outputs"][0]
    assert relu_fp["max_abs"] == 0.0  # float TOSA relu is exact
    assert 0.0 < add_int["max_abs"] < 0.5 and add_int["sqnr_db"] > 10  # int8: the quantized program ran


def test_the_reference_model_computes_the_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """In process: the delegate's outputs come from the TOSA reference model (a reference model that answers
    zeros makes the run answer zeros), and the CPU parts of the program run around it."""
    import torch

    from harness.backends import arm
    from harness.backends.executorch import ExecuTorchBackend
    from harness.recipes import load_recipe

    recipe = load_recipe("arm-tosa-fp")
    backend = ExecuTorchBackend()
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    x = (torch.randn(2, 8),)
    lowered, stats = backend.lower(recipe, torch.export.export(module, x))
    assert stats["delegated_nodes"] >= 1
    handle = backend.load(recipe, lowered, b"unused")
    assert isinstance(handle, arm.ReferenceModel)
    real = tosa.run
    calls = []

    def spy(graph, inputs, **kw):
        calls.append(len(graph))
        return real(graph, inputs, **kw)

    monkeypatch.setattr(tosa, "run", spy)
    out = backend.run(handle, x)
    assert calls and torch.allclose(out[0], module(*x), atol=1e-5)

    def zeros(graph, inputs, **kw):
        outs, status = real(graph, inputs, **kw)
        return [o * 0 for o in outs], status

    monkeypatch.setattr(tosa, "run", zeros)
    assert float(backend.run(handle, x)[0].abs().max()) == 0.0


def test_ethos_u_and_vgf_lower_and_stop_as_lowered_with_vela_estimates(bti, tmp_path: Path) -> None:
    res = bti("run", "-s", "smoke", "-k", "op.relu.basic*", "--shape", "static", "-r", "arm-ethos-u55",
              "-r", "arm-ethos-u85", "-r", "arm-vgf-fp", "-o", str(tmp_path), "--no-reuse", "--bundle",
              env={"ARM_EXECUTOR_RUNNER": "", "VK_INSTANCE_LAYERS": ""})
    assert res.code == 1 and "nothing verified on arm-ethos-u55" in res.err, res.err  # LOWERED verified nothing
    res = bti("run", "-s", "smoke", "-k", "op.relu.basic*", "--shape", "static", "-r", "arm-ethos-u55",
              "-r", "arm-ethos-u85", "-r", "arm-vgf-fp", "-o", str(tmp_path), "--no-reuse", "--bundle", "--allow-unverified",
              env={"ARM_EXECUTOR_RUNNER": "", "VK_INSTANCE_LAYERS": ""})
    assert res.code == 0, res.err  # LOWERED fails no run where nothing verified is allowed
    _, records = load(tmp_path / "results.jsonl")
    by = {r["recipe"]: r for r in records if r["status"] != "SKIP"}
    assert {k: r["status"] for k, r in by.items()} == {"arm-ethos-u55": "LOWERED", "arm-ethos-u85": "LOWERED",
                                                       "arm-vgf-fp": "LOWERED"}
    assert "FVP_Corstone_SSE-300_Ethos-U55" in by["arm-ethos-u55"]["detail"]
    assert "FVP_Corstone_SSE-320" in by["arm-ethos-u85"]["detail"]
    assert "VK_INSTANCE_LAYERS is not set" in by["arm-vgf-fp"]["detail"]
    velas = {}
    for name in ("arm-ethos-u55", "arm-ethos-u85"):
        rec = by[name]
        vela = rec["partition"]["vela"]
        assert vela["partitions"] == 1 and vela["cycles_total"] > 0 and vela["inference_time_ms"] > 0
        assert vela["npu_operators"] >= 1 and vela["cpu_operators"] == 0 and vela["sram_kib"] > 0
        assert [b["backend"] for b in rec["delegate_blobs"]] == ["EthosUBackend"] and rec["pte_bytes"] > 0
        velas[name] = vela
    assert velas["arm-ethos-u55"]["config"].startswith("Ethos_U55_128")
    assert velas["arm-ethos-u85"]["config"].startswith("Ethos_U85_128")
    assert velas["arm-ethos-u55"]["cycles_total"] != velas["arm-ethos-u85"]["cycles_total"]
    # JUnit: skipped, with the reason; the device bundle is written for `bti verify` where the runtime is
    cases = [c for s in JUnitXml.fromfile(str(tmp_path / "junit.xml")) for c in s if c.name.endswith("@arm-ethos-u55")]
    skipped = [r for c in cases for r in c.result if isinstance(r, Skipped)]
    assert any(s.message.startswith("LOWERED: lowered and serialized; not run here: executable 'FVP_Corstone_SSE-300")
               for s in skipped)
    rec = by["arm-ethos-u55"]
    bpte = tmp_path / rec["artifacts"]["bpte"]
    assert bpte.stat().st_size > rec["pte_bytes"]
    card = json.loads(bpte.with_name(bpte.name + ".json").read_text())
    assert card["status"] == "LOWERED" and card["tolerance"] == {"sqnr_db": 10.0}  # what the device run is held to
    dashboard = (tmp_path / "dashboard.html").read_text()
    assert "vela: " in dashboard and "LOWERED" in dashboard
    badge = json.loads((tmp_path / "badge-arm-ethos-u55.json").read_text())
    assert badge["message"] == "nothing verified: 1 lowered, not run here" and badge["color"] == "lightgrey"
    from harness.report.comment import render

    header, all_records = load(tmp_path / "results.jsonl")
    comment = render("arm", header, all_records, None)
    assert "| recipe | passed | on the delegate | CPU fallback | ran | rate | vs base | 📦 lowered, not run here |" in comment
    assert "| `arm-ethos-u55` | 0 | 0 | 0 | 0 | **nothing verified** |  | 1 |" in comment
    assert "`arm-ethos-u55` verified nothing: 1 LOWERED" in comment
    site = tmp_path / "site"
    assert bti("portal", str(tmp_path / "results.jsonl"), "-o", str(site)).code == 0
    assert '<option value="lowered">' in (site / "index.html").read_text()
    assert '["LOWERED","lowered",' in (site / "matrix.json").read_text()


def test_run_requires_decides_between_lowered_and_a_real_run(bti, tmp_path: Path) -> None:
    """The same recipe stops as LOWERED without its runtime's tool and runs (and is judged: its xfail rule makes
    the pass an XPASS) once the tool is on PATH. A LOWERED item is never an XPASS."""
    args = ("run", "-s", "smoke", "-k", "op.relu.basic*", "--shape", "static", "--dtype", "float32",
            "-r", "portable-needs-device", "--no-reuse")
    res = bti(*args, "-o", str(tmp_path / "a"), "--bundle", "--allow-unverified")  # LOWERED verifies nothing
    assert res.code == 0, res.err
    (rec,) = load(tmp_path / "a" / "results.jsonl")[1]
    assert rec["status"] == "LOWERED" and "xfail" not in rec
    assert rec["detail"] == ("lowered and serialized; not run here: executable 'bti-test-device-tool' is not on PATH "
                             "(the test device's tool)")
    # where the runtime is (here: the portable runtime in process), the LOWERED item's bundle is checked for real
    res = bti("verify", str(tmp_path / "a" / "programs"), "--runtime", "pybind", "-o", str(tmp_path / "v"))
    assert res.code == 0, res.err
    (checked,) = load(tmp_path / "v" / "results.jsonl")[1]
    assert checked["status"] == "PASS" and checked["outputs"][0]["max_abs"] == 0.0
    tools = tmp_path / "bin"
    tools.mkdir()
    tool = tools / "bti-test-device-tool"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    res = bti(*args, "-o", str(tmp_path / "b"), env={"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"})
    assert res.code == 1  # XPASS: it ran, passed, and the rule expected a failure
    (rec,) = load(tmp_path / "b" / "results.jsonl")[1]
    assert rec["status"] == "XPASS" and rec["outputs"]


@pytest.mark.parametrize(("body", "message"), [
    ("run_requires: {executable: [x]}", "`run_requires` takes env, executables, modules, note, platforms, runtime_backends"),
    ("run_requires: {note: [1]}", "run_requires.note takes text"),
    ("requires: {note: why}", "`requires` takes env, executables, modules, platforms, runtime_backends"),
])
def test_bad_run_requires_is_one_line_and_exit_2(inproc, tmp_path: Path, body: str, message: str) -> None:
    bad_recipe(inproc, tmp_path, body, message)


def test_the_arm_extra_installs_cleanly_beside_the_others() -> None:
    """`pip check` on this environment (make installs every extra): the tosa-tools pins are met, nothing overridden."""
    proc = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_periodic_sweep_runs_every_shipped_recipe_with_the_arm_extra() -> None:
    import re

    import yaml

    from tests.conftest import ROOT

    job = yaml.safe_load((ROOT / ".github/workflows/periodic.yml").read_text())["jobs"]["sweep"]["with"]
    default = re.search(r"inputs\.recipes \|\| '([^']+)'", job["recipes"]).group(1).split(",")
    shipped = {p.stem for p in (ROOT / "recipes").glob("*.yaml")} - {"torch-privateuse1"}  # a template to copy
    assert shipped <= set(default), shipped - set(default)
    assert "arm" in job["extras"].split(",")


def test_where_an_fvp_is_installed_ethos_u_programs_go_to_it(bti, tmp_path: Path) -> None:
    """With the FVP on PATH and a runner ELF named, the item runs: upstream's run_corstone writes the program and the
    inputs and starts the FVP with the ELF. The FVP here is a stand-in that records its command line and produces no
    outputs, so the item is FAIL_RUN: what is tested is bti's path to a real FVP, not an FVP."""
    tools = tmp_path / "bin"
    tools.mkdir()
    fvp = tools / "FVP_Corstone_SSE-300_Ethos-U55"
    seen = tmp_path / "fvp-args.txt"
    fvp.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {seen}\nexit 0\n")
    fvp.chmod(fvp.stat().st_mode | stat.S_IXUSR)
    elf = tmp_path / "arm_executor_runner.elf"
    elf.write_bytes(b"\x7fELF")
    res = bti("run", "-s", "smoke", "-k", "op.relu.basic*", "--shape", "static", "-r", "arm-ethos-u55", "--no-reuse",
              "-o", str(tmp_path / "out"), env={"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
                                                 "ARM_EXECUTOR_RUNNER": str(elf)})
    assert res.code == 1, res.err
    (rec,) = [r for r in load(tmp_path / "out" / "results.jsonl")[1] if r["status"] != "SKIP"]
    assert rec["status"] == "FAIL_RUN" and rec["runtime"] == "corstone-fvp", rec
    args = seen.read_text().splitlines()
    assert args[args.index("-a") + 1] == str(elf) and "ethosu.num_macs=128" in args
    assert any("semihosting-cmd_line='executor_runner -m program.pte -o out -i i0.bin'" in a for a in args)


def test_the_arm_quantizer_runs_on_a_residual_in_place_add_whatever_the_calling_files_are_named(monkeypatch) -> None:
    """torchvision's ResNet adds its residual in place. The Arm quantizer's RewriteInplaceArithmeticPass cannot run the
    input guards' call_module that ``ep.module()`` inserts by default; torch leaves it out only where a calling file's
    path contains "executorch" or "torchao" (``_ok_to_generate_guards_fn``), which harness/backends/executorch.py's does by chance.
    With that heuristic off, bti's quantize stage still runs, because it asks for the module without the guards."""
    import torch
    import torch.export._unlift as unlift
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    from harness.backends import arm
    from harness.backends.executorch import ExecuTorchBackend
    from harness.recipes import load_recipe
    from tests.in_place import Residual

    monkeypatch.setattr(unlift, "_ok_to_generate_guards_fn", lambda: True)
    torch.manual_seed(0)
    example = (torch.randn(1, 3, 8, 8),)
    ep = torch.export.export(Residual().eval(), example, strict=False)
    assert any(str(n.target) == "aten.add_.Tensor" for n in ep.graph.nodes)
    with pytest.raises(Exception, match="RewriteInplaceArithmeticPass"):  # the control: the default module fails
        prepare_pt2e(ep.module(), arm.quantizer("tosa", {"tosa_spec": "TOSA-1.0+INT"}, per_channel=True, dynamic=False))

    built = SimpleNamespace(example=example, run=example, flat_dynamic_shapes=None)  # what the stage reads of a case
    quantized = ExecuTorchBackend().quantize(load_recipe("arm-tosa-int"), ep, built)
    assert any("quantize_per_tensor" in str(n.target) for n in quantized.graph.nodes)
