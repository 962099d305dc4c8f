"""A dynamically quantized program's reference as XNNPACK's ``qd8`` kernels compute it: each dynamically quantized
activation quantized per row (a matrix product's input) or per image (a convolution's) instead of per tensor.

pt2e's dynamic quantizers write ``choose_qparams -> quantize_per_tensor -> dequantize_per_tensor``: one scale for the
whole tensor. XNNPACK's dynamically quantized matrix products and convolutions ignore that choice and quantize their
input per batch row (``xnn_compute_f32_qd8_convert``: ``xnn_f32_qd8_asymmetric_quantization_params`` on the row's
minimum and maximum). The per-tensor program is therefore not what the delegate implements: it differs from it by up
to an activation step times the weights (measured: ``nn.Linear`` 44.9 dB, ``nn.Conv2d`` 40.0 dB), where the same
program with ``per_row_program`` is within 1e-7 of the delegate (141.8 and 138.2 dB: float summation order).

A 1x1 convolution with stride 1, no padding and one group is a matrix product over each pixel's channels, and XNNPACK
runs it as one: its input is quantized per pixel (measured on executorch 1.5.1: such a convolution's delegate is 141 dB
from the per-pixel program and 41 dB from the per-image one; a strided, padded, grouped or 1x3 one the reverse).

``qd8_fake_quantize``, ``feeds_into_conv``, ``pointwise`` and ``per_row_program`` are self-contained (torch only):
``bti repro`` copies their source into its scripts.
"""

from __future__ import annotations

from typing import Any


def qd8_fake_quantize(x: Any, nonbatch_dims: int = 1, per_pixel: bool = False) -> Any:
    """``x`` quantized to int8 and back as XNNPACK's f32 -> qd8 convert does it, in float32: per row of its last
    ``nonbatch_dims`` dimensions (1 for a matrix product's input, 3 for a convolution's: per image; ``per_pixel``: per
    pixel of an NCHW tensor, over its channels, a pointwise convolution's input), the range widened
    to hold 0, multiplier 255 / (max - min), the zero point from the nearer end rounded to even,
    ``rint(x * multiplier) + zero_point`` clamped to int8, and back through the scale XNNPACK keeps (1 / multiplier)."""
    import math

    import torch

    if per_pixel:  # an (N)CHW tensor, per row of its channels (a pointwise convolution's input)
        return qd8_fake_quantize(x.movedim(-3, -1), 1).movedim(-1, -3)
    keep = min(nonbatch_dims, x.dim())
    rows = x.float().reshape(-1, math.prod(x.shape[x.dim() - keep:]) if keep else 1)
    lo = rows.amin(1, keepdim=True).clamp(max=0.0)
    hi = rows.amax(1, keepdim=True).clamp(min=0.0)
    one = torch.ones_like(lo)  # tensor / tensor divides exactly; `255.0 / t` is t.reciprocal() * 255 in torch
    mult = torch.where(lo == hi, one, torch.full_like(lo, 255.0) / (hi - lo))
    dlo, dhi = lo * mult, hi * mult
    zp = torch.where((-128.0 + dlo) + (127.0 + dhi) > 0, -128.0 - dlo, 127.0 - dhi).clamp(-128.0, 127.0).round()
    q = (torch.round(rows * mult) + zp).clamp(-128.0, 127.0)
    return ((q - zp) * (one / mult)).reshape(x.shape).to(x.dtype)


def is_conv(node: Any) -> bool:
    """Whether the node is a convolution: pt2e's graph names it ``conv1d``/``conv2d``/``conv_transpose2d``…, the edge
    graph XNNPACK walks ``convolution``."""
    import re

    return re.search(r"[.]conv(olution|_transpose\d?d?|\dd)[.]", f".{str(node.target).split('::')[-1]}.") is not None


def feeds_into_conv(node: Any) -> Any:
    """XNNPACK's own choice (``QuantParams._feeds_into_conv``): walking the users depth first from the quantize node,
    a linear before a convolution means per row, a convolution first per image. Returns that convolution's node
    (true), or None."""
    pending = [node]
    while pending:
        current = pending.pop()
        if "linear" in str(current.target):
            return None
        if is_conv(current):
            return current
        pending.extend(current.users)
    return None


def pointwise(conv: Any) -> bool:
    """Whether XNNPACK runs this convolution (pt2e's ``conv2d``) as a matrix product over each pixel's channels: a 1x1
    kernel, stride 1, no padding, one group (any dilation; a 1x1 kernel's "same" padding is none). Its input is then
    quantized per pixel."""
    if "conv2d" not in str(conv.target):
        return False

    def shape_of(node: Any) -> Any:  # an exported graph's meta, else convert_pt2e's dequantize of a get_attr
        val = getattr(node, "meta", {}).get("val")
        if val is not None or getattr(node, "op", None) not in ("get_attr", "call_function"):
            return getattr(val, "shape", None)
        if node.op == "call_function":
            return shape_of(node.args[0]) if node.args and "dequantize" in str(node.target) else None
        owner = node.graph.owning_module
        for part in str(node.target).split("."):
            owner = getattr(owner, part, None)
        return getattr(owner, "shape", None)

    shape = shape_of(conv.args[1]) if len(conv.args) > 1 else None
    if shape is None:  # never a silent per-image guess: the reference then says it has no answer
        raise ValueError(f"{conv.name}: the weight's shape is not readable, so XNNPACK's per-pixel choice is unknown")
    names = ("stride", "padding", "dilation", "groups")
    given = dict(zip(names, conv.args[3:], strict=False)) | {k: v for k, v in conv.kwargs.items() if k in names}

    def each(value: Any) -> list[Any]:
        return list(value) if isinstance(value, (list, tuple)) else [value]

    return (len(shape) == 4 and tuple(shape[2:]) == (1, 1)
            and all(v == 1 for v in each(given.get("stride", 1))) and all(v in (0, "same", "valid") for v in each(given.get("padding", 0)))
            and given.get("groups", 1) == 1)


def per_row_program(module: Any) -> int:
    """Rewrite ``module`` (a quantized ``fx.GraphModule``, in place) so that each dequantize of a dynamically quantized
    activation (its scale computed by ``choose_qparams`` from the tensor itself) is ``qd8_fake_quantize`` of the
    quantize's input, per image where XNNPACK would feed it to a convolution, and per pixel for each pointwise
    convolution among its users beside other convolutions (measured: such a convolution's input is per pixel whichever
    convolution the walk reaches first; the other convolution's output is then XNNPACK's bug, which the per-image
    reference shows). A linear and a 3x3 convolution reading one activation, the linear first: the convolution's
    output is per image (136 dB from this reference); the linear's is the delegate's channels-last bug (it reads the
    convolution's NHWC copy, ``model.shared_linear_conv``), so no right linear output has been measured beside a
    convolution, and with the convolution first XNNPACK does not lower it. Returns how many it rewrote."""
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
            conv = feeds_into_conv(node.args[0])
            nonbatch = 3 if conv is not None else 1
            made: dict[bool, Any] = {}
            for user in list(node.users):  # a pointwise convolution's input is per pixel, whatever else shares it
                own = user if conv is not None and is_conv(user) else conv
                pixel = own is not None and pointwise(own)
                if pixel not in made:
                    with module.graph.inserting_before(node):
                        made[pixel] = module.graph.call_function(
                            qd8_fake_quantize, (node.args[0].args[0], nonbatch, pixel))
                user.replace_input_with(node, made[pixel])
            module.graph.erase_node(node)
            count += 1
    if count:
        module.graph.eliminate_dead_code()
        module.recompile()
    return count


def dynamic_quantizations(module: Any) -> int:
    """How many ``choose_qparams`` nodes (dynamic quantization) a graph has, whatever its dialect."""
    return sum(1 for n in module.graph.nodes if n.op == "call_function" and "choose_qparams" in str(n.target))
