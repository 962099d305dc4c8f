"""Model-level accuracy as the accelerator community judges it: dynamo's benchmark rule (allclose, else RMSE
against a float64 CPU reference), top-1 agreement gated by a recipe threshold, and "runs twice identically"."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.backends.torch_backends import TorchEagerBackend
from harness.errors import RecipeError
from harness.judge import dynamo_rule


class NoisyDevice(TorchEagerBackend):
    """An eager "device" that misbehaves as $BTI_TEST_NOISE says: ``random`` (fresh noise of 1e-7 each run: not
    deterministic, still allclose), ``scale`` (every output 0.2% larger: not allclose at 1e-4, its direction kept),
    ``negate`` (every output negated: top-1 changes) or ``flatten`` (the right values in the wrong shape)."""

    name = "noisy-device"

    def run(self, handle: Any, inputs: tuple[Any, ...]) -> list[Any]:
        import torch

        outs = super().run(handle, inputs)
        mode = os.environ.get("BTI_TEST_NOISE")
        if mode == "random":
            return [o + torch.randn_like(o) * 1e-7 if o.is_floating_point() else o for o in outs]
        if mode == "scale":
            return [o * 1.002 if o.is_floating_point() else o for o in outs]
        if mode == "negate":
            return [-o if o.is_floating_point() else o for o in outs]
        if mode == "flatten":
            return [o.flatten() for o in outs]
        return outs


def test_dynamo_rule_arms() -> None:
    rng = np.random.default_rng(0)
    fp64 = rng.standard_normal(4096)
    cpu = (fp64 + rng.standard_normal(4096) * 1e-3).astype(np.float32)  # the CPU's own float32 error: RMSE ~1e-3
    assert dynamo_rule(cpu.copy(), cpu, fp64, 1e-4, "float32") == {"pass": True, "rule": "allclose", "tol": 1e-4}
    near = (fp64 + rng.standard_normal(4096) * 1.5e-3).astype(np.float32)  # not allclose, RMSE 1.5× the CPU's
    r = dynamo_rule(near, cpu, fp64, 1e-4, "float32")
    assert r["pass"] and r["rule"] == "rmse" and r["multiplier"] == 2.0 and r["rmse"] < 2 * r["rmse_cpu"]
    far = (fp64 + rng.standard_normal(4096) * 3e-3).astype(np.float32)  # 3× the CPU's error: past 2×
    r = dynamo_rule(far, cpu, fp64, 1e-4, "float32")
    assert not r["pass"] and r["rule"] == "none" and "RMSE(device, fp64)" in r["why"]
    assert dynamo_rule(far, cpu, fp64, 1e-4, "bfloat16")["pass"]  # low precision: m = 3
    assert dynamo_rule(far[:999], cpu[:999], fp64[:999], 1e-4, "float32")["multiplier"] == 3.0  # small: m = 3
    assert not dynamo_rule(far, cpu, None, 1e-4, "float32")["pass"]  # no float64 reference: allclose only
    # the model gave no float64 reference: dynamo's harness falls back to cosine similarity >= 0.99
    r = dynamo_rule(far, cpu, None, 1e-4, "float32", cosine=True)
    assert r["pass"] and r["rule"] == "cosine" and 0.99 <= r["cosine"] < 1.0, r
    noise = rng.standard_normal(4096)
    noise -= noise @ cpu / (cpu @ cpu) * cpu  # orthogonal to the output: cosine = 1 / sqrt(1 + k**2 |n|**2 / |cpu|**2)
    unit = float(np.linalg.norm(noise) / np.linalg.norm(cpu))
    for want, passes in ((0.9905, True), (0.9895, False), (0.98, False)):
        k = np.sqrt(1 / want**2 - 1) / unit
        r = dynamo_rule((cpu + k * noise).astype(np.float32), cpu, None, 1e-4, "float32", cosine=True)
        assert r["pass"] is passes and abs(r["cosine"] - want) < 1e-4, (want, r)
        assert r["rule"] == ("cosine" if passes else "none") and (passes or "cosine" in r["why"]), r
    nan = np.array([1.0, np.nan, 3.0], dtype=np.float32)  # same()'s cosine branch: allclose with equal_nan
    assert dynamo_rule(nan, nan, None, 1e-4, "float32", cosine=True)["rule"] == "allclose"
    assert not dynamo_rule(nan, nan, None, 1e-4, "float32")["pass"]
    ints = np.arange(5)
    assert dynamo_rule(ints, ints, None, 1e-4, "int64") == {"pass": True, "rule": "equal"}
    assert not dynamo_rule(ints + 1, ints, None, 1e-4, "int64")["pass"]


def test_accuracy_recipe_key_is_checked(tmp_path: Path) -> None:
    from harness.recipes import load_recipe

    for bad, msg in (({"rule": "close-enough"}, "accuracy.rule is dynamo or allclose"), ({"top1": 2}, "between 0 and 1"),
                     ({"deterministic": "yes"}, "true or false"), ({"speed": 1}, "`accuracy` takes rule")):
        path = tmp_path / "r.yaml"
        path.write_text(json.dumps({"name": "r", "backend": "torch-eager", "device": "cpu", "accuracy": bad}))
        with pytest.raises(RecipeError, match=msg):
            load_recipe(str(path))


def _run(tmp_path: Path, recipe: dict[str, Any], noise: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from harness.cli import main

    path = tmp_path / f"{recipe['name']}.yaml"
    path.write_text(json.dumps(recipe))
    monkeypatch.setenv("BTI_TEST_NOISE", noise)
    out = tmp_path / recipe["name"]
    main(["run", "-s", "models", "-k", "model.mlp.base", "--shape", "static", "-r", str(path), "-o", str(out), "-j", "1",
          "--no-reuse", "--no-report"])
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2
    return lines[1]


@pytest.mark.slow
def test_model_checks_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = {"backend": "tests.test_accuracy:NoisyDevice", "device": "cpu", "runtime": {"warmup": 0, "repeats": 1}}
    clean = _run(tmp_path, {**base, "name": "clean"}, "", monkeypatch)
    assert clean["status"] == "PASS" and clean["tolerance"] == {"rule": "dynamo", "tol": 1e-4}
    assert clean["accuracy"]["rule"] == "allclose" and clean["accuracy"]["deterministic"] is True
    assert clean["accuracy"]["top1_agreement"] == 1.0 and "fp64_reference" not in clean["accuracy"]
    # a module with no float64 reference: allclose, then dynamo's cosine fallback (no RMSE arm), and the record says so, with why
    import harness.stages

    def no_fp64(self):  # type: ignore[no-untyped-def]
        self.fp64_error = "RuntimeError: cannot run in float64"
        return None

    monkeypatch.setattr(harness.stages.Group, "fp64_reference", no_fp64)
    no64 = _run(tmp_path, {**base, "name": "no64"}, "", monkeypatch)
    assert no64["status"] == "PASS" and no64["accuracy"]["rule"] == "allclose"
    assert no64["accuracy"]["fp64_reference"] == ("none (RuntimeError: cannot run in float64): allclose, then cosine >= 0.99 "
                                                  "as dynamo's harness falls back")
    scaled = _run(tmp_path, {**base, "name": "scaled"}, "scale", monkeypatch)  # not allclose; its direction is eager's
    assert scaled["status"] == "PASS" and scaled["accuracy"]["rule"] == "cosine", scaled.get("detail")
    assert scaled["accuracy"]["cosine"] > 0.99999
    monkeypatch.undo()
    # noise of 1e-7: allclose still holds, but two runs differ; recorded, and a failure only where the recipe asks
    noisy = _run(tmp_path, {**base, "name": "noisy"}, "random", monkeypatch)
    assert noisy["status"] == "PASS" and noisy["accuracy"]["deterministic"] is False
    strict = _run(tmp_path, {**base, "name": "strict", "accuracy": {"deterministic": True}}, "random", monkeypatch)
    assert strict["status"] == "FAIL_MISMATCH" and "two runs on the device gave different outputs" in strict["detail"]
    # negated logits: the dynamo rule fails and says why; with a loose allclose instead, the top-1 floor still catches it
    neg = _run(tmp_path, {**base, "name": "neg"}, "negate", monkeypatch)
    assert neg["status"] == "FAIL_MISMATCH" and neg["detail"].startswith("dynamo accuracy rule: output[0]: RMSE(device, fp64)")
    assert neg["accuracy"]["rule"] == "none"
    gated = _run(tmp_path, {**base, "name": "gated", "accuracy": {"rule": "allclose", "top1": 0.9},
                            "tolerances": {"float32": {"atol": 1.0e9, "rtol": 0}}}, "negate", monkeypatch)
    assert gated["status"] == "FAIL_MISMATCH" and "top-1 agreement 0 < 0.9 (accuracy.top1)" in gated["detail"]
    assert "rule" not in gated["accuracy"]  # the recipe's tolerances judged it
    # a structural miss (here a shape) is reported as such: no numeric rule is asked to judge it
    flat = _run(tmp_path, {**base, "name": "flat"}, "flatten", monkeypatch)
    assert flat["status"] == "FAIL_MISMATCH" and flat["detail"].startswith("output[0]: shape ["), flat["detail"]
    assert flat["tolerance"].get("rule") != "dynamo"


def test_a_module_that_cannot_run_in_float64_gives_no_reference_and_says_why() -> None:
    """The real branch behind `accuracy.fp64_reference`: a module with a float32 constant fails in float64."""
    from types import SimpleNamespace

    import torch

    from harness.stages import Group

    class Fixed32(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ torch.ones(4, 4, dtype=torch.float32)

    group = Group.__new__(Group)
    group.built, group._fp64, group.fp64_error = SimpleNamespace(module=Fixed32(), run=(torch.randn(2, 4),), fp64_ref=None), None, ""
    group.ref = [torch.zeros(2, 4)]
    assert group.fp64_reference() is None
    assert group.fp64_error.startswith("RuntimeError: ") and "same dtype" in group.fp64_error, group.fp64_error
