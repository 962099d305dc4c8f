"""A dynamically quantized program's reference as XNNPACK's ``qd8`` kernels compute it: each dynamically quantized
activation quantized per row (a matrix product's input) or per image (a convolution's) instead of per tensor.

pt2e's dynamic quantizers write ``choose_qparams -> quantize_per_tensor -> dequantize_per_tensor``: one scale for the
whole tensor. XNNPACK's dynamically quantized matrix products and convolutions ignore that choice and quantize their
input per batch row (``xnn_compute_f32_qd8_convert``: ``xnn_f32_qd8_asymmetric_quantization_params`` on the row's
minimum and maximum). The per-tensor program is therefore not what the delegate implements: it differs from it by up
to an activation step times the weights (measured: ``nn.Linear`` 44.9 dB, ``nn.Conv2d`` 40.0 dB), where the same
program with ``per_row_program`` is within 1e-7 of the delegate (141.8 and 138.2 dB: float summation order).

Both functions are self-contained (torch only): ``bti repro`` copies their source into its scripts.
"""

from __future__ import annotations

from typing import Any


def qd8_fake_quantize(x: Any, per_image: bool = False) -> Any:
    """``x`` quantized to int8 and back as XNNPACK's f32 -> qd8 convert does it, in float32: per row of its last
    dimension (per element of the first with ``per_image``), the range widened to hold 0, multiplier
    255 / (max - min), the zero point from the nearer end rounded to even, ``rint(x * multiplier) + zero_point``
    clamped to int8, and back through the scale XNNPACK keeps (1 / multiplier)."""
    import torch

    if x.dim() == 0:
        rows = x.float().reshape(1, 1)
    else:
        rows = x.float().reshape(x.shape[0], -1) if per_image else x.float().reshape(-1, x.shape[-1])
    lo = rows.amin(1, keepdim=True).clamp(max=0.0)
    hi = rows.amax(1, keepdim=True).clamp(min=0.0)
    mult = torch.where(lo == hi, torch.ones_like(lo), 255.0 / (hi - lo))
    dlo, dhi = lo * mult, hi * mult
    zp = torch.where((-128.0 + dlo) + (127.0 + dhi) > 0, -128.0 - dlo, 127.0 - dhi).clamp(-128.0, 127.0).round()
    q = (torch.round(rows * mult) + zp).clamp(-128.0, 127.0)
    return ((q - zp) * (1.0 / mult)).reshape(x.shape).to(x.dtype)


def per_row_program(module: Any) -> int:
    """Rewrite ``module`` (a quantized ``fx.GraphModule``, in place) so that each dequantize of a dynamically quantized
    activation (its scale computed by ``choose_qparams`` from the tensor itself) is ``qd8_fake_quantize`` of the
    quantize's input, per image where a convolution takes it. Returns how many it rewrote."""
    import torch

    qd = torch.ops.quantized_decomposed
    chooses = {qd.choose_qparams.tensor}
    if hasattr(qd, "choose_qparams_symmetric"):
        chooses.add(qd.choose_qparams_symmetric.tensor)
    quantize = qd.quantize_per_tensor.tensor
    dequantize = {qd.dequantize_per_tensor.tensor, qd.dequantize_per_tensor.default}

    def dynamic(q: Any) -> bool:  # quantize_per_tensor.tensor(x, getitem(choose_qparams(x), 0), ...)
        scale = q.args[1] if len(q.args) > 1 else None
        return (getattr(q, "target", None) == quantize and isinstance(scale, torch.fx.Node)
                and bool(scale.args) and getattr(scale.args[0], "target", None) in chooses)

    count = 0
    for node in list(module.graph.nodes):
        if node.op == "call_function" and node.target in dequantize and node.args and dynamic(node.args[0]):
            per_image = any("conv" in str(user.target) for user in node.users)
            with module.graph.inserting_before(node):
                new = module.graph.call_function(qd8_fake_quantize, (node.args[0].args[0], per_image))
            node.replace_all_uses_with(new)
            module.graph.erase_node(node)
            count += 1
    if count:
        module.graph.eliminate_dead_code()
        module.recompile()
    return count
