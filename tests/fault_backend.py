"""A deliberately misbehaving backend for the fault tests (ExecuTorch portable underneath).

Recipe options: ``fault`` (segfault | abort | sleep | perturb | noise | raise_lower) and ``op`` (an
edge op name such as ``aten.mul.Tensor``): the fault fires only for programs containing that op,
so every other item must come out intact.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from harness.backends.executorch import ExecuTorchBackend


class FaultBackend(ExecuTorchBackend):
    name = "fault"

    def __init__(self) -> None:
        self.armed: str | None = None
        self.recipe: Any = None

    def lower(self, recipe: Any, ep: Any) -> tuple[Any, dict[str, Any]]:
        lowered, stats = super().lower(recipe, ep)
        opts = recipe.raw.get("options") or {}
        self.armed = opts.get("fault") if opts.get("op") in stats["undelegated_ops"] else None
        self.options = opts
        if self.armed == "raise_lower":
            raise RuntimeError("fault backend: refusing to lower on purpose")
        return lowered, stats

    def run(self, handle: Any, inputs: tuple[Any, ...]) -> list[Any]:
        outs = super().run(handle, inputs)
        if self.armed == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.armed == "abort":
            os.abort()
        if self.armed == "sleep":
            time.sleep(3600)
        if self.armed == "perturb":
            return [o + 1.0 for o in outs]
        if self.armed == "noise":
            import torch

            gen = torch.Generator().manual_seed(0)
            return [o + torch.randn(o.shape, generator=gen, dtype=o.dtype) * float(self.options.get("scale", 1e-7)) for o in outs]
        return outs
