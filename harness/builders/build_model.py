"""Build a Python-defined model case (worker side)."""

from __future__ import annotations

from typing import Any

import torch

from harness.builders.build import generate, torch_dtype
from harness.cases.case import Axes, Case
from harness.cases.contract import Built


def build_model(case: Case, axes: Axes, seed: int) -> Built:
    from harness.suites import models

    spec = case.spec
    mdef = models.MODELS[spec["model"]]
    torch.manual_seed(seed)
    module = getattr(models, mdef.factory)().eval()
    dtype = axes.dtype
    if torch_dtype(dtype).is_floating_point:
        module = module.to(torch_dtype(dtype))
    init, _, high = spec["input_init"].partition(":")
    node: dict[str, Any] = {"init": init, "params": {"low": 0, "high": int(high)} if high else {}}
    in_dtype = "int64" if init == "randint" else dtype
    dims = spec["dims"]
    run_dims = {**dims, **{k: v["run"] for k, v in spec["dynamic"].items()}} if axes.shape == "dynamic" else dims

    def make(values: dict[str, int], salt: int) -> tuple[torch.Tensor, ...]:
        return tuple(
            generate(node, [values[s] if isinstance(s, str) else s for s in shape], in_dtype, seed + salt + i)
            for i, shape in enumerate(spec["inputs"])
        )

    example = make(dims, 0)
    run = make(run_dims, 7919) if axes.shape == "dynamic" else example
    dynamic_shapes = None
    if axes.shape == "dynamic":
        objs = {n: torch.export.Dim(n, min=r["min"], max=r["max"]) for n, r in spec["dynamic"].items()}
        dynamic_shapes = tuple(
            {i: objs[s] for i, s in enumerate(shape) if isinstance(s, str) and s in objs} or None
            for shape in spec["inputs"]
        )
    return Built(module, example, run, dynamic_shapes, flat_dynamic_shapes=dynamic_shapes, task=spec["task"])
