"""Tiny models from real model libraries (Hugging Face ``transformers``), built offline from configs with
seeded random weights — never downloaded. ``bti run -s hf-models``; UNAVAILABLE-style errors name
the missing package when ``transformers`` is not installed (``pip install .[models]``).

Each entry: a config class and keyword overrides that shrink it (hidden size 32–64, 2 layers), the
model class, the input kind, the output to compare and the model-level metric (``lm``: next-token
agreement; ``classifier``: top-1 agreement; ``None``: element-wise only).
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cases.case import Case

TEXT = {"vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
DECODER = {**TEXT, "num_key_value_heads": 2, "max_position_embeddings": 64}
VISION = {"image_size": 32, "patch_size": 8, "num_channels": 3, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64}


@dataclass(frozen=True)
class HFModel:
    name: str
    config: str  # transformers class names
    model: str
    overrides: dict[str, Any]
    inputs: str  # text | image | audio_features | audio_values
    task: str | None
    dynamic: str | None = "T"  # the dynamic dim (sequence T or batch B), None for static only
    seq: int = 8
    image: int = 32
    extra: dict[str, Any] = field(default_factory=dict)


MODELS: tuple[HFModel, ...] = (
    HFModel("bert", "BertConfig", "BertForSequenceClassification", {**TEXT, "num_labels": 4}, "text", "classifier"),
    HFModel("distilbert", "DistilBertConfig", "DistilBertForSequenceClassification",
            {"vocab_size": 128, "dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64, "num_labels": 4}, "text", "classifier"),
    HFModel("roberta", "RobertaConfig", "RobertaForSequenceClassification", {**TEXT, "num_labels": 4, "pad_token_id": 1}, "text",
            "classifier"),
    HFModel("albert", "AlbertConfig", "AlbertForSequenceClassification", {**TEXT, "embedding_size": 16, "num_labels": 4}, "text",
            "classifier"),
    HFModel("gpt2", "GPT2Config", "GPT2LMHeadModel", {"vocab_size": 128, "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64},
            "text", "lm"),
    HFModel("llama", "LlamaConfig", "LlamaForCausalLM", DECODER, "text", "lm"),
    HFModel("qwen2", "Qwen2Config", "Qwen2ForCausalLM", DECODER, "text", "lm"),
    HFModel("mistral", "MistralConfig", "MistralForCausalLM", DECODER, "text", "lm"),
    HFModel("phi", "PhiConfig", "PhiForCausalLM", DECODER, "text", "lm"),
    HFModel("gemma", "GemmaConfig", "GemmaForCausalLM", {**DECODER, "head_dim": 16}, "text", "lm"),
    HFModel("t5_encoder", "T5Config", "T5EncoderModel",
            {"vocab_size": 128, "d_model": 32, "d_kv": 16, "d_ff": 64, "num_layers": 2, "num_heads": 2}, "text", None),
    HFModel("bart_encoder", "BartConfig", "BartModel",
            {"vocab_size": 128, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
             "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "max_position_embeddings": 64}, "text", None,
            extra={"encoder_only": True}),
    HFModel("vit", "ViTConfig", "ViTForImageClassification", {**VISION, "num_labels": 10}, "image", "classifier", dynamic="B"),
    HFModel("deit", "DeiTConfig", "DeiTForImageClassification", {**VISION, "num_labels": 10}, "image", "classifier", dynamic="B",
            extra={"drawn": ("cls_token", "distillation_token", "position_embeddings")}),
    HFModel("convnext", "ConvNextConfig", "ConvNextForImageClassification",
            {"num_channels": 3, "num_stages": 2, "hidden_sizes": [16, 32], "depths": [1, 1], "num_labels": 10}, "image", "classifier", dynamic="B"),
    HFModel("resnet", "ResNetConfig", "ResNetForImageClassification",
            {"num_channels": 3, "embedding_size": 16, "hidden_sizes": [16, 32], "depths": [1, 1], "num_labels": 10}, "image",
            "classifier", dynamic="B"),
    HFModel("mobilenet_v2", "MobileNetV2Config", "MobileNetV2ForImageClassification",
            {"num_channels": 3, "image_size": 32, "depth_multiplier": 0.35, "num_labels": 10}, "image", "classifier", dynamic="B"),
    HFModel("swin", "SwinConfig", "SwinForImageClassification",
            {"image_size": 32, "patch_size": 4, "embed_dim": 16, "depths": [1, 1], "num_heads": [2, 2], "window_size": 4,
             "num_labels": 10}, "image", "classifier", dynamic="B", extra={"drawn": ("relative_position_bias_table",)}),
    HFModel("segformer", "SegformerConfig", "SegformerForSemanticSegmentation",
            {"num_channels": 3, "num_encoder_blocks": 2, "depths": [1, 1], "sr_ratios": [2, 1], "hidden_sizes": [16, 32],
             "num_attention_heads": [1, 2], "decoder_hidden_size": 32, "num_labels": 4, "patch_sizes": [7, 3], "strides": [4, 2]},
            "image", None, dynamic="B"),
    HFModel("clip_vision", "CLIPVisionConfig", "CLIPVisionModel", VISION, "image", None, dynamic="B"),
    HFModel("clip_text", "CLIPTextConfig", "CLIPTextModel",
            {"vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
             "max_position_embeddings": 64}, "text", None),
    HFModel("whisper_encoder", "WhisperConfig", "WhisperModel",
            {"vocab_size": 128, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
             "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "num_mel_bins": 16,
             "max_source_positions": 16, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 1},
            "audio_features", None, dynamic=None, extra={"encoder_only": True}),
    HFModel("wav2vec2", "Wav2Vec2Config", "Wav2Vec2Model",
            {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
             "conv_dim": [16, 16], "conv_stride": [4, 4], "conv_kernel": [8, 4], "num_conv_pos_embeddings": 8,
             "num_conv_pos_embedding_groups": 2, "do_stable_layer_norm": True}, "audio_values", None, dynamic="B"),
)


def _inputs(m: HFModel, b: int, t: int, seed: int) -> tuple[Any, ...]:
    """Seeded inputs of the model's kind: token ids, images or audio, batch ``b`` (sequence ``t`` for text)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    if m.inputs == "text":
        return (torch.randint(0, 128, (b, t), generator=g),)
    if m.inputs == "image":
        return (torch.randn(b, 3, m.image, m.image, generator=g),)
    if m.inputs == "audio_features":
        return (torch.randn(b, 16, 32, generator=g),)
    return (torch.randn(b, 400, generator=g),)


def _draw(model: Any, names: tuple[str, ...]) -> None:
    """Draw the parameters called ``names`` from the global (seeded) generator, as the model's reference code (timm, the
    papers' repositories) initializes them: a truncated normal, std 0.02.

    transformers leaves at zero what a checkpoint fills: DeiT's class and distillation tokens and position embeddings,
    Swin's relative position bias. At zero, DeiT's class token enters the encoder empty and the classifier reads the
    attention's residue alone (std 2e-3, under one step of static int8's per-tensor scale: SQNR 4 dB at the logits), and
    a backend that gathered Swin's bias wrongly would still pass."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.rsplit(".", 1)[-1] in names:
                torch.nn.init.trunc_normal_(p, std=0.02)


def build_hf(case: Case, axes: Any, seed: int) -> Any:
    import torch

    from harness.cases.contract import Built
    from harness.suites.zoo_builders import estimate_batch_norm

    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise RuntimeError("python package 'transformers' is not installed (pip install .[models])") from None
    spec = case.spec
    m = next(x for x in MODELS if x.name == spec["model"])
    torch.manual_seed(seed)
    config = getattr(transformers, m.config)(**m.overrides)
    if hasattr(config, "_attn_implementation"):
        config._attn_implementation = "eager"
    inner = getattr(transformers, m.model)(config).eval()
    _draw(inner, m.extra.get("drawn", ()))

    def make(b: int, t: int, salt: int) -> tuple[torch.Tensor, ...]:
        return _inputs(m, b, t, seed + salt)

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner.get_encoder() if m.extra.get("encoder_only") else inner

        def forward(self, x: torch.Tensor) -> Any:
            kwargs: dict[str, Any] = {"return_dict": True}
            if m.inputs == "text":
                kwargs["input_ids"] = x
                if "use_cache" in inner.forward.__code__.co_varnames:
                    kwargs["use_cache"] = False
            elif m.inputs == "image":
                kwargs["pixel_values"] = x
            elif m.inputs == "audio_features":
                kwargs["input_features"] = x
            else:
                kwargs["input_values"] = x
            out = self.inner(**kwargs)
            return out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state

    # batch norm's untrained statistics (mean 0, variance 1) under random weights made MobileNetV2's logits 1e-25: every
    # backend, and one that returned zeros, passed on it. Estimated on seeded batches, as the zoo's are, the logits are
    # O(1) (ResNet's and SegFormer's too); a model without batch norm is left as it is (and in eval mode either way)
    module = Tiny()
    estimate_batch_norm(module, [make(4, m.seq, 104729 + i) for i in range(2)])
    module.eval()
    dynamic = axes.shape == "dynamic" and m.dynamic is not None
    example = make(2, m.seq, 0)
    if not dynamic:
        return Built(module, example, example, None, task=m.task)
    dim = 0 if m.dynamic == "B" else 1
    ds = ({dim: torch.export.Dim(str(m.dynamic), min=1 if dim == 0 else 2, max=8 if dim == 0 else 32)},)
    run = make(3, m.seq, 7919) if dim == 0 else make(2, 12, 7919)
    return Built(module, example, run, ds, flat_dynamic_shapes=ds, task=m.task)


def hf_cases(suite: str = "hf-models") -> list[Case]:
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    return [Case(id=f"model.{m.name}.tiny", suite=suite, kind="hf", spec={"model": m.name, "code": code}, op=None,
                 tags=("hf", m.inputs), dtypes=("float32",), shapes=("static", "dynamic") if m.dynamic else ("static",),
                 source=f"transformers.{m.model}") for m in MODELS]
