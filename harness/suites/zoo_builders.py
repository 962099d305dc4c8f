"""How the zoo builds a row (worker side): one ``Builder`` per kind of library, each with the packages it needs, the
model, its input size, its seeded inputs and the module that is judged. ``zoo.ZooModel.builder`` names one of
``BUILDERS``; nothing else dispatches on it."""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.suites.zoo import ZooModel

GRAPH = (1000, 10000)  # nodes, edges of the random graph the GNN rows run on
# batch-norm statistics are estimated on this many seeded batches of this many images (other rows: their own inputs),
# drawn from a generator seeded with the item's seed + 1, so never the item's own judged inputs (an item run with
# ``--seed`` one higher is fed the first of them): docs/zoo.md, "Random weights and batch norm"
BN_BATCHES, BN_BATCH = 2, 4



def vocab(config: Any) -> int:
    """The vocabulary size of a text model's config (a multimodal config keeps it in its ``text_config``)."""
    return int(getattr(getattr(config, "text_config", None) or config, "vocab_size", 30000))


class Builder:
    """A library's models: built from ``target`` with ``config`` as keyword arguments, fed one image batch."""

    requires: tuple[str, ...] = ()

    def model(self, m: ZooModel) -> Any:
        module, _, attr = m.target.rpartition(".")
        return getattr(importlib.import_module(module), attr)(**m.config)

    def input_size(self, m: ZooModel, model: Any) -> list[int]:
        return [3, 224, 224]

    def inputs(self, m: ZooModel, model: Any, g: Any) -> tuple[Any, ...]:
        import torch

        return (torch.randn(1, *self.input_size(m, model), generator=g),)

    def wrap(self, model: Any, m: ZooModel) -> Any:
        """The module that is exported and judged."""
        return model

    def calibration(self, m: ZooModel, model: Any, g: Any) -> list[tuple[Any, ...]]:
        """Seeded batches the batch-norm statistics are estimated on (none: the row's statistics stay as built)."""
        import torch

        return [(torch.randn(BN_BATCH, *self.input_size(m, model), generator=g),) for _ in range(BN_BATCHES)]


def estimate_batch_norm(model: Any, batches: list[tuple[Any, ...]]) -> int:
    """Set every batch norm's running statistics to the mean and variance of its input over ``batches`` (a cumulative
    average, as ``momentum=None`` keeps it), everything else in eval mode; returns how many layers were estimated.

    A network with random weights keeps untrained statistics (mean 0, variance 1), so batch norm is an identity and
    activations grow layer by layer: inception_v3's logits reach 1e12. Training would have set them from the data, and
    that is what this does, with seeded data: the weights stay random, the activations stay in a trained network's
    range."""
    import torch

    layers = [b for b in model.modules() if isinstance(b, torch.nn.modules.batchnorm._BatchNorm) and b.track_running_stats
              and b.running_mean is not None]
    if not layers or not batches:
        return 0
    saved = [b.momentum for b in layers]
    model.eval()
    try:
        for b in layers:
            b.reset_running_stats()
            b.momentum = None
            b.training = True  # the layer alone: a subclass's own children (timm's BatchNormAct2d's dropout) stay in eval
        with torch.no_grad():
            for batch in batches:
                model(*batch)
    finally:
        for b, momentum in zip(layers, saved, strict=True):
            b.momentum = momentum
        model.eval()
    return len(layers)


class Torchvision(Builder):
    requires = ("torchvision",)


class TorchvisionDetection(Torchvision):
    def inputs(self, m: ZooModel, model: Any, g: Any) -> tuple[Any, ...]:
        import torch

        return ([torch.rand(3, 224, 224, generator=g)],)

    def calibration(self, m: ZooModel, model: Any, g: Any) -> list[tuple[Any, ...]]:
        return []  # Mask R-CNN's backbone has frozen batch norm (no running statistics to estimate)


class Timm(Builder):
    requires = ("timm",)

    def model(self, m: ZooModel) -> Any:
        return importlib.import_module("timm").create_model(m.target, pretrained=False, **m.config)

    def input_size(self, m: ZooModel, model: Any) -> list[int]:
        # dynamo evaluates at the test size (resolve_data_config(use_test_size=not training))
        cfg = model.pretrained_cfg
        return [int(x) for x in cfg.get("test_input_size") or cfg.get("input_size") or (3, 224, 224)]


class PyG(Builder):
    requires = ("torch_geometric",)

    def input_size(self, m: ZooModel, model: Any) -> list[int]:
        return [GRAPH[0], int(m.config["in_channels"])]

    def inputs(self, m: ZooModel, model: Any, g: Any) -> tuple[Any, ...]:
        import torch

        nodes, edges = GRAPH
        return (torch.randn(nodes, int(m.config["in_channels"]), generator=g), torch.randint(0, nodes, (2, edges), generator=g))

    def calibration(self, m: ZooModel, model: Any, g: Any) -> list[tuple[Any, ...]]:
        return [self.inputs(m, model, g) for _ in range(BN_BATCHES)]


class HuggingFace(Builder):
    """A transformers class from its config, as dynamo builds it (caches off, eager attention), called as dynamo
    calls it (``wrap``)."""

    requires = ("transformers",)

    def model(self, m: ZooModel) -> Any:
        cls = getattr(importlib.import_module("transformers"), m.target)
        config = cls.config_class(**m.config)
        for key, value in (("use_cache", False), ("_attn_implementation", "eager")):
            if hasattr(config, key):
                setattr(config, key, value)
        return cls(config)

    def input_size(self, m: ZooModel, model: Any) -> list[int]:
        if m.inputs == "audio":
            return [int(model.config.num_mel_bins), 2 * int(model.config.max_source_positions)]
        return [m.seq]

    def inputs(self, m: ZooModel, model: Any, g: Any) -> tuple[Any, ...]:
        import torch

        if m.inputs == "audio":
            return super().inputs(m, model, g)
        config = model.config
        high = 1 if m.inputs == "zeros" else vocab(config)  # dynamo feeds RoBERTa randint(0, 1)
        ids = torch.randint(0, high, (1, m.seq), generator=g)
        if m.inputs == "clip":
            side = int(config.vision_config.image_size)
            return (ids, torch.randn(1, 3, side, side, generator=g))
        if m.name.startswith(("Bart", "MBart", "PLBart")) and getattr(config, "eos_token_id", None) is not None:
            ids[:, -1] = int(config.eos_token_id)  # dynamo: "Bart" inputs end with eos
        return (ids,)

    def wrap(self, model: Any, m: ZooModel) -> Any:
        return _wrapped_class()(model, m)

    def calibration(self, m: ZooModel, model: Any, g: Any) -> list[tuple[Any, ...]]:
        return [self.inputs(m, model, g) for _ in range(BN_BATCHES)]  # the row's own kind of input, as the wrapper takes it


@functools.cache
def _wrapped_class() -> Any:  # made once, on first use: torch is imported lazily
    import torch

    class Wrapped(torch.nn.Module):
        """A Hugging Face model called as dynamo calls it, returning the tensor it is judged by."""

        def __init__(self, inner: Any, m: ZooModel) -> None:
            super().__init__()
            self.inner = inner
            self.seq2seq = bool(getattr(inner.config, "is_encoder_decoder", False))
            self.m = m

        def forward(self, *args: Any) -> Any:
            m = self.m
            if m.inputs == "audio":
                kwargs: dict[str, Any] = {"input_features": args[0]}
                if self.seq2seq and not m.target.endswith("AudioClassification"):
                    kwargs["decoder_input_ids"] = torch.zeros(1, m.seq, dtype=torch.long, device=args[0].device)
            elif m.inputs == "clip":
                kwargs = {"input_ids": args[0], "pixel_values": args[1]}
            else:
                kwargs = {"input_ids": args[0]}
                if self.seq2seq:
                    kwargs["decoder_input_ids"] = args[0]
            out = self.inner(**kwargs, return_dict=True)
            for key in ("logits", "start_logits", "logits_per_image", "last_hidden_state"):
                value = getattr(out, key, None)
                if value is not None:
                    return value
            return out[0]

    return Wrapped


BUILDERS: dict[str, Builder] = {"hf": HuggingFace(), "timm": Timm(), "tv": Torchvision(), "tv-detection": TorchvisionDetection(),
                                "pyg": PyG()}
