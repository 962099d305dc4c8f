"""The built-in small-model suite: models built in code with seeded random weights.

Each ``ModelDef`` gives a factory (seeded), the input shapes by named dims, which dims may be
dynamic, and the model-level task used for accuracy (``classifier``: top-1 agreement).
Nothing is downloaded. torch is imported only when a model is built (worker side).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.cases.case import Case


@dataclass(frozen=True)
class ModelDef:
    name: str
    factory: str  # function name in this module
    inputs: tuple[tuple[str | int, ...], ...]  # shapes by dim name or int
    dims: dict[str, int]
    dynamic: dict[str, dict[str, int]] = field(default_factory=dict)
    input_init: str = "normal"  # or "randint:<high>" for token ids
    task: str | None = "classifier"
    tags: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("float32",)


def _mlp() -> Any:
    import torch.nn as nn

    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def _cnn() -> Any:
    import torch
    import torch.nn as nn

    class SmallCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
            self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32)
            self.pool = nn.MaxPool2d(2, 2)
            self.fc = nn.Linear(32, 10)

        def forward(self, x: torch.Tensor) -> Any:
            x = self.pool(torch.relu(self.bn1(self.conv1(x))))
            x = torch.relu(self.bn2(self.conv2(x)))
            return self.fc(x.mean(dim=(2, 3)))

    return SmallCNN()


def _conv_bn_sequential() -> Any:
    """Smallest reproducer of an XNNPACK bug: conv → batch-norm fusion inside ``nn.Sequential``
    (parameter names start with a digit) fails with ``'0_weight_fused_bn' is not in list``."""
    import torch.nn as nn

    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))


def _dwpw() -> Any:
    import torch
    import torch.nn as nn

    class InvertedResidual(nn.Module):
        def __init__(self, c: int = 16, expand: int = 4) -> None:
            super().__init__()
            h = c * expand
            self.pw1 = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6())
            self.dw = nn.Sequential(nn.Conv2d(h, h, 3, padding=1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6())
            self.pw2 = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10))

        def forward(self, x: torch.Tensor) -> Any:
            return self.head(x + self.pw2(self.dw(self.pw1(x))))

    return InvertedResidual()


def _two_readers(first: Any, second: Any) -> Any:
    """One input read by two layers: (first(x), second(x))."""
    import torch
    import torch.nn as nn

    class TwoReaders(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = first, second

        def forward(self, x: torch.Tensor) -> Any:
            return self.first(x), self.second(x)

    return TwoReaders()


def _shared_pointwise() -> Any:
    """Smallest reproducer of an XNNPACK bug (found by bti): one input, dynamically quantized once, read by a 1x1
    convolution and a 3x3 one. XNNPACK quantizes it per pixel for the 1x1 (its matrix product over each pixel's
    channels), and the 3x3 reads image n's integers through the n-th pixel's parameters: output[1] is wrong."""
    import torch.nn as nn

    return _two_readers(nn.Conv2d(16, 8, 1), nn.Conv2d(16, 8, 3, padding=1))


def _shared_linear_conv() -> Any:
    """Smallest reproducer of an ExecuTorch XNNPACK bug (found by bti): one input, dynamically quantized once, read by
    a linear layer over its last dimension and then by a 3x3 convolution. The delegate's channels-last pass gives the
    convolution an NHWC copy of the input and, under dynamic quantization, replaces every use of the input with it, so
    the linear (already processed, NCHW) reads the NHWC copy: output[0] is the linear over x.permute(0, 2, 3, 1). The
    input is square in C, H and W so the shapes agree and the program runs (otherwise execute fails with 0x10)."""
    import torch.nn as nn

    return _two_readers(nn.Linear(8, 4), nn.Conv2d(8, 4, 3, padding=1))


def _qkv_unbind() -> Any:
    """Smallest reproducer of a crash in Arm's Vela (found by bti in Swin-B and MobileViT-S on the Ethos-U55): an
    attention's qkv split, ``unbind(0)`` of a 5-D [3, B, heads, N, D] tensor with all three parts used. Vela's regor
    compiler overflows its stack on the U55 (SIGSEGV in process_regor); the U85 lowers it, and with a second dimension
    of 1 (a ViT's split) or two of the three parts the U55 does too."""
    import torch.nn as nn

    class QkvUnbind(nn.Module):
        def forward(self, x: Any) -> Any:
            q, k, v = (x * 2).unbind(0)
            return q + k + v

    return QkvUnbind()


def _latent_query() -> Any:
    """Smallest reproducer of an Arm quantizer failure (found by bti in timm's SigLIP, whose attention pool has a
    learned latent query, and akin to GPT-2's Conv1D bias): a Parameter as scaled_dot_product_attention's query. The Arm
    quantizer's transform_for_annotation decomposes the attention, which scales the query by mul.Scalar, and
    ReplaceScalarWithTensorByProfilePass calls ``.to_tensor()`` on that mul's first argument: the Parameter itself, not
    a traced value (AttributeError)."""
    import torch
    import torch.nn as nn

    class LatentQuery(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.latent = nn.Parameter(torch.randn(1, 1, 1, 64))

        def forward(self, x: Any) -> Any:
            k = x.unsqueeze(1)  # [B, 1 head, N, 64]
            return torch.nn.functional.scaled_dot_product_attention(self.latent, k, k)

    return LatentQuery()


def _finfo_mask() -> Any:
    """Smallest reproducer of an Arm lowering failure (found by bti in LayoutLM's two zoo rows): an additive attention
    mask built as BERT-era models build it, ``(1.0 - mask) * torch.finfo(torch.float32).min`` from a mask of ones, and
    added to the scores. The Arm int8 quantizer gives the -3.4e38 constant an int8 scale of about 1.3e36, and the mul's
    TOSA RESCALE then needs a ratio of scales no 32-bit multiplier with a shift in [2, 62] can express: the lowering
    asserts (op_tosa_rescale.py)."""
    import torch
    import torch.nn as nn

    class FinfoMask(nn.Module):
        def forward(self, x: Any) -> Any:
            mask = torch.ones(x.shape[0], x.shape[-1], device=x.device)  # on the input's device, as LayoutLM's
            return x + (1.0 - mask[:, None, :]) * torch.finfo(torch.float32).min

    return FinfoMask()


def _pad_conv() -> Any:
    """Smallest reproducer of an XNNPACK failure under dynamic int8 (found by bti in the zoo's TF EfficientNet-B0, whose
    "same" convolutions pad first, as NFNet-F0's and Hugging Face MobileNetV2's do): a constant pad, then a 3x3
    convolution. On executorch 1.5.1 the delegate's first call fails at reshape ("Propagating input shapes failed with
    code: xnn_status_invalid_parameter"), with symmetric or asymmetric padding; on 1.4.1 the program runs with the
    height padding lost. The convolution alone runs."""
    import torch
    import torch.nn as nn

    class PadConv(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x: Any) -> Any:
            return self.conv(torch.nn.functional.pad(x, (1, 1, 1, 1)))

    return PadConv()


def _eos_pool() -> Any:
    """The reduction of CLIP's failure on the Ethos-U recipes (found by bti in the zoo's ``hf_clip``): CLIP's text
    model in brief. The token ids are viewed as (-1, T), a view that changes nothing, then embedded; one causal
    self-attention follows, its additive mask built from ``arange`` as Hugging Face builds it; and each sequence's row
    at its first end-of-text token (3) is picked. ExecuTorch's Arm partitioner puts the view in a partition whose
    outputs include it, for an op outside the partition to read; the backend drops the view as a no-op, so that output
    of the TOSA graph is its input, with no operator writing it, and vela refuses the flatbuffer ("TOSA FB Reader
    error: Output tensor ... does not have any writers"). The partitions printed in the reduction: on the U85, the view
    with the comparison and its cast; on the U55 (a one-layer CLIPTextModel), the view with the embedding's reshape and
    the mask's constants. The pooling alone lowers on the U85 without the view, and on the U55 without the attention.
    The mask is -8, not ``finfo.min`` (that is ``model.finfo_mask``'s matter), so the int8 program stays near fp32."""
    import torch
    import torch.nn as nn

    class EosPool(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(16, 32)

        def forward(self, ids: torch.Tensor) -> Any:
            ids = ids.view(-1, ids.shape[-1])
            h = self.emb(ids)
            i = torch.arange(ids.shape[-1], device=ids.device)
            mask = torch.where(i[None, :] <= i[:, None], 0.0, -8.0)
            h = (h @ h.transpose(-1, -2) / 6.0 + mask).softmax(-1) @ h
            return h[torch.arange(h.shape[0], device=h.device), (ids.to(torch.int32) == 3).int().argmax(-1)]

    return EosPool()


def _scale_conv() -> Any:
    """The reduction of NFNet's failure under XNNPACK's dynamic int8 (found by bti in the zoo's NFNet-L0, whose blocks
    scale their input by a constant, ``act1(x) * beta``, before their convolutions): a convolution, a multiply by a
    Python scalar, then a 1x1 convolution. On executorch 1.5.1 the delegate's first call fails at reshape, as
    ``model.pad_conv``'s (an add of a scalar too; without the multiply, and with a SiLU or a ReLU in its place, it
    runs); on 1.4.1 the output has the wrong shape. The Arm quantizer folds the multiply into the first convolution by
    writing into its weights, the caller's."""
    import torch.nn as nn

    class ScaleConv(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Conv2d(16, 16, 3, padding=1)
            self.second = nn.Conv2d(16, 8, 1)

        def forward(self, x: Any) -> Any:
            return self.second(self.first(x) * 1.7)

    return ScaleConv()


def _permute_conv() -> Any:
    """``model.pad_conv``'s kin (found by bti in the zoo's Visformer, whose attention output is permuted and reshaped
    into a 1x1 projection): a permute, then a 1x1 convolution, under XNNPACK's dynamic int8."""
    import torch.nn as nn

    class PermuteConv(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(16, 8, 1)

        def forward(self, x: Any) -> Any:
            return self.conv(x.permute(0, 1, 3, 2))

    return PermuteConv()


def _rnn(cell: str) -> Any:
    import torch
    import torch.nn as nn

    class RNNClassifier(nn.Module):
        """A recurrent layer (GRU or LSTM) over the sequence, then a classifier on the last step."""

        def __init__(self) -> None:
            super().__init__()
            self.rnn = getattr(nn, cell)(16, 32, batch_first=True)
            self.fc = nn.Linear(32, 10)

        def forward(self, x: torch.Tensor) -> Any:
            out, _ = self.rnn(x)
            return self.fc(out[:, -1])

    return RNNClassifier()


def _gru() -> Any:
    return _rnn("GRU")


def _lstm() -> Any:
    return _rnn("LSTM")


def _encoder() -> Any:
    import torch
    import torch.nn as nn

    class TinyEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
            self.fc = nn.Linear(32, 10)

        def forward(self, x: torch.Tensor) -> Any:
            return self.fc(self.layer(x).mean(dim=1))

    return TinyEncoder()


def _attention_lm() -> Any:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class TinyLM(nn.Module):
        """Embedding + one causal self-attention block + tied-size LM head."""

        def __init__(self, vocab: int = 64, d: int = 32, heads: int = 4) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab)
            self.heads = heads

        def forward(self, ids: torch.Tensor) -> Any:
            x = self.emb(ids)
            b, t, d = x.shape
            q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
            q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
            return self.head(x)

    return TinyLM()


MODELS: dict[str, ModelDef] = {
    m.name: m
    for m in (
        ModelDef("mlp", "_mlp", (("B", 32),), {"B": 4}, {"B": {"min": 1, "max": 32, "run": 7}}, tags=("mlp",)),
        ModelDef("cnn", "_cnn", (("B", 3, 32, 32),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}}, tags=("conv",)),
        ModelDef("dwpw_block", "_dwpw", (("B", 16, 16, 16),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}}, tags=("conv", "depthwise")),
        ModelDef("conv_bn_sequential", "_conv_bn_sequential", (("B", 3, 8, 8),), {"B": 2}, {"B": {"min": 1, "max": 4, "run": 3}},
                 task=None, tags=("conv", "regression")),
        ModelDef("shared_pointwise", "_shared_pointwise", (("B", 16, 8, 8),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}},
                 task=None, tags=("conv", "regression")),
        ModelDef("shared_linear_conv", "_shared_linear_conv", (("B", 8, 8, 8),), {"B": 2},
                 {"B": {"min": 1, "max": 8, "run": 3}}, task=None, tags=("conv", "linear", "regression")),
        ModelDef("qkv_unbind", "_qkv_unbind", ((3, "B", 4, 256, 36),), {"B": 4}, {"B": {"min": 1, "max": 8, "run": 3}}, task=None,
                 tags=("transformer", "regression")),
        ModelDef("finfo_mask", "_finfo_mask", (("B", 4, 16),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}}, task=None,
                 tags=("transformer", "regression")),
        ModelDef("pad_conv", "_pad_conv", (("B", 3, 16, 16),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}}, task=None,
                 tags=("conv", "regression")),
        ModelDef("permute_conv", "_permute_conv", (("B", 16, 8, 12),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}},
                 task=None, tags=("conv", "regression")),
        ModelDef("scale_conv", "_scale_conv", (("B", 16, 8, 8),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}}, task=None,
                 tags=("conv", "regression")),
        ModelDef("eos_pool", "_eos_pool", (("B", 7),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}}, input_init="randint:16",
                 task=None, tags=("transformer", "regression")),
        ModelDef("latent_query", "_latent_query", (("B", 16, 64),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}}, task=None,
                 tags=("transformer", "regression")),
        # RNNs unroll over time at export, so the batch (not the sequence) is the dynamic dim
        ModelDef("gru", "_gru", (("B", 8, 16),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}}, tags=("rnn",)),
        ModelDef("lstm", "_lstm", (("B", 8, 16),), {"B": 2}, {"B": {"min": 1, "max": 8, "run": 3}}, tags=("rnn",)),
        ModelDef("transformer_encoder", "_encoder", ((2, "T", 32),), {"T": 8}, {"T": {"min": 2, "max": 32, "run": 12}}, tags=("transformer",)),
        ModelDef("tiny_lm", "_attention_lm", ((1, "T"),), {"T": 8}, {"T": {"min": 2, "max": 32, "run": 12}}, input_init="randint:64", task="lm", tags=("transformer", "lm")),
    )
}


def model_cases(suite: str = "models") -> list[Case]:
    import hashlib
    from pathlib import Path

    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]  # model code is part of the cache key
    out = []
    for m in MODELS.values():
        spec = {"model": m.name, "inputs": [list(s) for s in m.inputs], "dims": m.dims, "dynamic": m.dynamic,
                "input_init": m.input_init, "task": m.task, "code": code}
        out.append(Case(
            id=f"model.{m.name}.base", suite=suite, kind="model", spec=spec, op=None, tags=m.tags,
            dtypes=m.dtypes, shapes=("static", "dynamic") if m.dynamic else ("static",),
            source=f"harness/suites/models.py:{m.name}",
        ))
    return out
