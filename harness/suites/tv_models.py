"""Optional model sources: torchvision (and timm) classifiers with random weights (``weights=None``).

These libraries are optional. Where they import, their models run like any other; where they do
not (not installed, or — as with the only torchvision wheel for torch 2.13 here, a CUDA build —
failing to import beside the CPU torch), every item is UNAVAILABLE with the import error as the
reason. Nothing works around the import.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from harness.cases.case import Case

# (source package, constructor path, kwargs, input size)
MODELS: tuple[tuple[str, str, str, dict[str, Any], int], ...] = (
    ("tv_resnet18", "torchvision", "torchvision.models.resnet18", {"weights": None, "num_classes": 10}, 64),
    ("tv_mobilenet_v3_small", "torchvision", "torchvision.models.mobilenet_v3_small", {"weights": None, "num_classes": 10}, 64),
    ("tv_efficientnet_b0", "torchvision", "torchvision.models.efficientnet_b0", {"weights": None, "num_classes": 10}, 64),
    ("tv_shufflenet_v2", "torchvision", "torchvision.models.shufflenet_v2_x0_5", {"weights": None, "num_classes": 10}, 64),
    ("timm_mobilevit_xxs", "timm", "timm.create_model", {"model_name": "mobilevit_xxs", "pretrained": False, "num_classes": 10}, 64),
)

BN_BATCHES, BN_BATCH = 4, 16  # batch norm's statistics: estimated on 4 seeded batches of 16 (docs/zoo.md)


def tv_cases(suite: str = "tv-models") -> list[Case]:
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    return [Case(id=f"model.{name}.random", suite=suite, kind="tv", op=None, tags=("optional", pkg),
                 spec={"model": name, "requires": [pkg], "code": code}, dtypes=("float32",), shapes=("static", "dynamic"),
                 source=ctor) for name, pkg, ctor, _, _ in MODELS]


def build_tv(case: Case, axes: Any, seed: int) -> Any:
    import importlib

    import torch

    from harness.cases.contract import Built
    from harness.suites.zoo_builders import estimate_batch_norm

    _, _, ctor, kwargs, size = next(m for m in MODELS if m[0] == case.spec["model"])
    module_name, _, attr = ctor.rpartition(".")
    torch.manual_seed(seed)
    model = getattr(importlib.import_module(module_name), attr)(**kwargs).eval()
    # batch norm's untrained statistics (mean 0, variance 1) under random weights left EfficientNet-B0's logits at
    # 2-4e-13 and MobileNetV3-Small's at 4-9e-10 (seeds 0 and 1234): int8 quantizes them to zero, so the int8 recipes
    # could verify nothing.
    # Estimated on seeded batches as the zoo's are, but on more of them (the zoo's two batches of four left
    # EfficientNet-B0's last 2x2 stages 16 values a channel, and its logits at 108): docs/zoo.md
    calibrate = torch.Generator().manual_seed(seed + 1)
    estimate_batch_norm(model, [(torch.randn(BN_BATCH, 3, size, size, generator=calibrate),) for _ in range(BN_BATCHES)])
    g = torch.Generator().manual_seed(seed)
    example = (torch.randn(2, 3, size, size, generator=g),)
    if axes.shape != "dynamic":
        return Built(model, example, example, None, task="classifier")
    ds = ({0: torch.export.Dim("B", min=1, max=8)},)
    run = (torch.randn(3, 3, size, size, generator=g),)
    return Built(model, example, run, ds, flat_dynamic_shapes=ds, task="classifier")
