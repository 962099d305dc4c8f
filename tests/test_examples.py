"""The worked examples (examples/), installed with pip as a vendor would, then run by bti: the out-of-tree delegate
found through its entry point, with its own recipe key; the eager PrivateUse1 device through its recipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends import get_backend
from harness.backends.executorch import ExecuTorchBackend
from harness.errors import RecipeError
from harness.recipes import parse_recipe

from .conftest import EXAMPLES, FIXTURES, ROOT


@pytest.fixture(scope="module")
def installed(installed_examples: Path) -> Path:
    return installed_examples


def _bti(target: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # nothing of tests/ or examples/ on the path: only what pip installed (and bti itself)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)]), "BTI_RECIPE_PATH": str(FIXTURES / "recipes")}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)


def _records(path: Path) -> dict[str, dict]:
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return {r["id"]: r for r in lines if r.get("kind") == "result"}


@pytest.mark.slow
def test_installed_examples_run(installed: Path, tmp_path: Path) -> None:
    delegate = EXAMPLES / "delegate" / "recipes" / "example-delegate.yaml"
    int8 = EXAMPLES / "delegate" / "recipes" / "example-delegate-int8.yaml"
    npu = EXAMPLES / "npu-device" / "recipes" / "torch-npu.yaml"
    listed = _bti(installed, "list", "--recipes", "-r", str(delegate), "-r", str(int8), "-r", str(npu), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "example-delegate\tavailable" in listed.stdout and "torch-npu\tavailable" in listed.stdout
    res = _bti(installed, "run", "-s", "smoke", "-k", "op.add.*", "-k", "op.linear.*", "-r", str(delegate), "-r", str(int8),
               "-r", str(npu), "-r", "torch-cpu", "--baseline", "torch-cpu", "--dtype", "float32", "-o", str(tmp_path / "o"),
               "--no-reuse", "--no-report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    recs = _records(tmp_path / "o" / "results.jsonl")
    ours = {i: r for i, r in recs.items() if i.endswith(("@example-delegate", "@example-delegate-int8", "@torch-npu"))}
    assert len(ours) == 9 and all(r["status"] == "PASS" for r in ours.values()), {i: r["status"] for i, r in ours.items()}
    linear = recs["op.linear.fc[float32,static]@example-delegate"]
    assert linear["partition"]["delegated_ops"] and linear["backend"] == "example-delegate"  # XNNPACK took it
    q = recs["op.linear.fc[float32,static]@example-delegate-int8"]  # the vendor's quantizer, judged against its program
    assert q["reference"] == "quantized" and q["outputs"][0]["quantized"] and q["partition"]["delegated_ops"]
    assert recs["op.linear.fc[float32,static]@torch-npu"]["baseline"]["recipe"] == "torch-cpu"


@pytest.mark.slow
def test_opinfo_samples_run_on_the_privateuse1_test_device(installed: Path, tmp_path: Path) -> None:
    """OpInfo's sample inputs end to end on an out-of-tree PrivateUse1 device: OpInfo is asked about the device's own
    type (``npu``), its dtypes come from OpInfo, and the device agrees with the CPU on these samples."""
    npu = EXAMPLES / "npu-device" / "recipes" / "torch-npu.yaml"
    res = _bti(installed, "run", "-s", "opinfo-ci", "-k", "opinfo.add.default.[01]", "-k", "opinfo.sort.default.0", "-k",
               "opinfo.matmul.default.0", "-r", str(npu), "-o", str(tmp_path / "o"), "--no-reuse", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    recs = _records(tmp_path / "o" / "results.jsonl")
    assert recs and all(r["status"] == "PASS" for r in recs.values()), {i: r["status"] for i, r in recs.items()}
    assert {r["axes"]["dtype"] for r in recs.values() if r["case"] == "opinfo.add.default.0"} >= {"float32", "int64", "bool"}
    assert all(r["recipe"] == "torch-npu" for r in recs.values())


def test_the_delegate_checks_its_own_key_with_file_and_line(installed: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nbackend: example-delegate\npartitioners: [xnnpack]\nvendor: {max_partitions: -1}\n")
    res = _bti(installed, "validate", str(bad), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{bad}:4" in res.stderr and "vendor.max_partitions takes a whole number >= 0, not -1" in res.stderr
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("name: unknown\nbackend: example-delegate\nvendor: {cores: 2}\n")
    res = _bti(installed, "validate", str(unknown), cwd=tmp_path)
    assert res.returncode == 2 and "unknown recipe key(s) for backend example-delegate (vendor): cores" in res.stderr


def test_a_subclass_returning_its_own_options_is_refused_not_run_without_partitioners(tmp_path: Path) -> None:
    path = tmp_path / "own.yaml"
    path.write_text("name: own\nbackend: tests.test_examples:OwnOptions\npartitioners: [xnnpack]\n")
    recipe = parse_recipe(path)
    assert recipe.options == {"partitioners": ["xnnpack"]}
    why = get_backend(recipe.backend).unavailable_reason(recipe)
    assert why is not None and "not an ExecuTorchOptions" in why and "without its partitioners and quantizer" in why
    with pytest.raises(RecipeError, match="not an ExecuTorchOptions"):
        get_backend(recipe.backend).lower(recipe, None, None)


class OwnOptions(ExecuTorchBackend):
    """A vendor subclass that returns an options object of its own: ExecuTorch would lose the partitioners."""

    name = "own-options"

    def parse_options(self, raw, where):  # type: ignore[no-untyped-def]
        super().parse_options(raw, where)
        return {"partitioners": raw.get("partitioners")}


def test_a_backend_lacking_part_of_the_protocol_is_refused_in_one_line() -> None:
    with pytest.raises(RecipeError) as err:
        get_backend("tests.test_examples:Incomplete")
    assert "lacks" in str(err.value) and "runs_programs" in str(err.value) and "execute" in str(err.value)
    assert "BaseBackend" in err.value.one_line()


class Incomplete:
    """A backend written against an older contract: no runs_programs, accuracy_rule or execute."""

    name = "incomplete"
    stages = frozenset()
    needs_export = True

    def parse_options(self, raw, where):  # type: ignore[no-untyped-def]
        return None


@pytest.mark.slow
def test_the_delegates_device_constraint_fails_lowering_with_its_message(installed: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear → cumsum (which XNNPACK does not take) → Linear is two delegated partitions; the example NPU takes one."""
    import torch

    monkeypatch.syspath_prepend(str(installed))  # the package pip installed
    from bti_example_delegate import ExampleDelegate

    path = tmp_path / "one.yaml"
    path.write_text("name: one\nbackend: bti_example_delegate:ExampleDelegate\npartitioners: [example-npu]\nvendor: {max_partitions: 1}\n")
    recipe = parse_recipe(path)

    class Split(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(torch.cumsum(self.a(x), dim=1))

    ep = torch.export.export(Split().eval(), (torch.randn(2, 8),))
    backend = ExampleDelegate()
    with pytest.raises(RuntimeError, match="2 delegated partitions: this NPU loads at most 1 per program"):
        backend.lower(recipe, ep)
    path.write_text(path.read_text().replace("max_partitions: 1", "max_partitions: 2"))
    _, stats = backend.lower(parse_recipe(path), ep)
    assert stats["delegated_subgraphs"] == 2 and "aten.cumsum.default" in stats["undelegated_ops"]


def test_run_is_called_warmup_plus_repeats_times_and_not_at_all_through_another_provider() -> None:
    """The vendor guide's promise: BaseBackend.execute calls run() warmup + repeats times; an ExecuTorch program
    handed to another runtime provider runs there, and run() is never called."""
    from harness.backends import BaseBackend
    from harness.backends.executorch import Deferred
    from harness.providers import Execution

    class Counting(BaseBackend):
        calls = 0

        def run(self, handle, inputs):  # type: ignore[no-untyped-def]
            Counting.calls += 1
            return [inputs[0] * 2]

    outs, samples, facts = Counting().execute(None, (1.5,), 2, 5)
    assert Counting.calls == 7 and len(samples) == 5 and outs == [3.0] and facts == {}

    class Elsewhere:
        name = "elsewhere"

        def execute(self, program, kind, inputs, opts):  # type: ignore[no-untyped-def]
            return Execution([7.0], 1.0, [0.5] * opts.repeats, "elsewhere", {"peak": 1.0})

    class NeverRun(ExecuTorchBackend):
        def run(self, handle, inputs):  # type: ignore[no-untyped-def]
            raise AssertionError("run() must not be called when the program runs elsewhere")

    outs, samples, facts = NeverRun().execute(Deferred(b"pte", Elsewhere()), (1.0,), 1, 3)
    assert outs == [7.0] and samples == [0.5, 0.5, 0.5] and facts["load_ms"] == 1.0


@pytest.mark.slow
def test_a_case_source_from_an_installed_package(installed: Path, tmp_path: Path) -> None:
    """examples/case-source: a vendor's own case source through the bti.case_sources entry point, nothing of bti's core
    touched: its cases listed and run, its further input sets each run on the same program, its own SKIP."""
    listed = _bti(installed, "list", "-s", "example-cases", "-r", "portable", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["model.example_convnet.narrow[float32,static]@portable",
                                     "model.example_convnet.wide[float32,static]@portable"]
    res = _bti(installed, "run", "-s", "example-cases", "-r", "portable", "-r", "xnnpack-int8-static-per-tensor",
               "-o", str(tmp_path / "o"), "--no-reuse", "--no-report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    recs = _records(tmp_path / "o" / "results.jsonl")
    narrow = recs["model.example_convnet.narrow[float32,static]@portable"]
    assert narrow["status"] == "PASS" and narrow["suite"] == "example-cases"
    assert len(narrow["sampled_inputs"]) == 3  # the first input set and the source's two more, each compared
    assert recs["model.example_convnet.narrow[float32,static]@xnnpack-int8-static-per-tensor"]["status"] == "PASS"
    wide = recs["model.example_convnet.wide[float32,static]@xnnpack-int8-static-per-tensor"]
    assert wide["status"] == "SKIP" and "not calibrated for int8 yet (bti_example_cases)" in wide["detail"]
