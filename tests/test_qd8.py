"""harness/qd8.py against a line-by-line transcription of XNNPACK's C (``xnn_qd8_asymmetric_quantization_params`` and
the f32 -> qs8 convert: ``lrintf(x * multiplier) + zero_point``, clamped), in scalar float32 arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.qd8 import qd8_fake_quantize


def _xnnpack_row(row: np.ndarray) -> np.ndarray:
    f = np.float32
    rmin, rmax = min(f(0), f(row.min())), max(f(0), f(row.max()))
    scale = f(1) if rmin == rmax else f(255) / (rmax - rmin)  # XNNPACK's "scale" is the multiplier
    dmin, dmax = rmin * scale, rmax * scale
    zp = (f(-128) - dmin) if (f(-128) + dmin) + (f(127) + dmax) > 0 else (f(127) - dmax)
    zp = int(np.rint(min(max(zp, f(-128)), f(127))))  # lrintf: ties to even
    inv = f(1) / scale
    q = np.clip(np.rint(row * scale).astype(np.int64) + zp, -128, 127)
    return ((q - zp).astype(np.float32) * inv).astype(np.float32)


@pytest.mark.parametrize("name, rows", [
    ("mixed signs, zero point from the minimum", [[-1.0, 0.25, 2.0, 3.5]]),
    ("mixed signs, zero point from the maximum", [[-3.5, -0.25, 0.5, 1.0]]),
    ("all positive: the range widened to 0", [[0.5, 1.0, 7.0, 2.25]]),
    ("all negative", [[-0.5, -1.0, -7.0, -2.25]]),
    ("all zero: multiplier 1", [[0.0, 0.0, 0.0, 0.0]]),
    ("a tie at k + 0.5 after scaling", [[0.0, 1.0, 255.0 / 255.0 * 0.5, -0.0]]),
    ("rows with their own ranges", [[-1.0, 1.0, 0.5, 0.25], [100.0, -3.0, 2.0, 0.0], [1e-3, 2e-3, -1e-3, 0.0]]),
])
def test_rows_match_xnnpacks_arithmetic(name: str, rows: list[list[float]]) -> None:
    x = torch.tensor(rows, dtype=torch.float32)
    got = qd8_fake_quantize(x).numpy()
    want = np.stack([_xnnpack_row(r) for r in x.numpy()])
    np.testing.assert_array_equal(got, want, err_msg=name)


def test_random_rows_and_images() -> None:
    """Per row of the last dimension for a matrix product's input, per image (the last three) for a convolution's:
    the same rows either way as the transcription, and not the same as one range for the whole tensor."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 16, generator=g) * torch.tensor([0.01, 1.0, 30.0])[:, None, None]
    got = qd8_fake_quantize(x, 1).numpy()
    want = np.stack([_xnnpack_row(r) for r in x.reshape(-1, 16).numpy()]).reshape(x.shape)
    np.testing.assert_array_equal(got, want)
    img = torch.randn(2, 3, 4, 4, generator=g) * torch.tensor([0.1, 10.0])[:, None, None, None]
    got = qd8_fake_quantize(img, 3).numpy()
    want = np.stack([_xnnpack_row(r) for r in img.reshape(2, -1).numpy()]).reshape(img.shape)
    np.testing.assert_array_equal(got, want)
    whole = _xnnpack_row(x.reshape(-1).numpy()).reshape(x.shape)
    assert not np.array_equal(qd8_fake_quantize(x, 1).numpy(), whole)


def test_a_dynamic_quantization_left_outside_the_delegate_is_held_to_the_program_as_written(tmp_path) -> None:
    """XNNPACK takes no dynamically quantized linear with per-tensor weights: the portable kernels run it per tensor,
    as the program is written. A per-row recipe's item is then held to that program (within 1e-5), not to the per-row
    one (0.0085 away on this item), and the record counts what stayed outside."""
    from .conftest import run_bti

    recipe = tmp_path / "dynpt.yaml"
    recipe.write_text("name: dyn-per-tensor-weights\ndescription: a test recipe\nbackend: executorch\npartitioners: [xnnpack]\n"
                      "quantize: {quantizer: xnnpack, per_channel: false, dynamic: true, reference: per-row}\ndtypes: [float32]\n")
    res = run_bti("run", "-s", "ops", "-k", "op.linear.module[[]float32,static]", "-r", str(recipe), "-o", str(tmp_path / "out"),
                  "--no-reuse", "--no-report")
    assert res.code == 0, res.err[-2000:]
    import json

    (rec,) = [r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines()) if r.get("kind") == "result"]
    assert rec["status"] == "PASS", rec.get("detail")
    assert rec["partition"]["dynamic_quantization_outside_delegate"] == 1
    assert rec["outputs"][0]["quantized"]["max_abs"] <= 1e-5


@pytest.mark.parametrize("pointwise_first", [True, False])
def test_each_convolution_reading_one_dynamic_activation_gets_its_own_quantization(pointwise_first: bool) -> None:
    """One activation, dynamically quantized once, read by a 1x1 and a 3x3 convolution: the 1x1's input is per pixel and
    the 3x3's per image, whichever of the two XNNPACK's walk reaches first (graph order decides that)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from harness.qd8 import per_row_program

    class Two(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pointwise, self.spatial = torch.nn.Conv2d(16, 8, 1), torch.nn.Conv2d(16, 8, 3, padding=1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return (self.pointwise(x), self.spatial(x)) if pointwise_first else (self.spatial(x), self.pointwise(x))

    x = torch.randn(1, 16, 8, 8)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
    prepared = prepare_pt2e(torch.export.export(Two().eval(), (x,)).module(), quantizer)
    prepared(x)
    module = convert_pt2e(prepared)
    assert per_row_program(module) == 1
    convs = [n for n in module.graph.nodes if n.op == "call_function" and "conv2d" in str(n.target)]
    padded = {("3x3" if len(c.args) > 4 and list(c.args[4]) != [0, 0] else "1x1"): c for c in convs}  # conv2d(x, w, b, stride, padding)
    assert {k: (c.args[0].target.__name__, *c.args[0].args[1:]) for k, c in padded.items()} == {
        "1x1": ("qd8_fake_quantize", 3, True), "3x3": ("qd8_fake_quantize", 3, False)}
