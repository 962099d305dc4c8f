"""A deliberately misbehaving backend for the fault tests (ExecuTorch portable underneath).

Recipe key ``options`` (this backend's own, declared through ``extra_keys``): ``fault`` (segfault |
abort | sleep | spin | perturb | noise | raise_lower | segfault_lower | none_output | write_inputs |
hostile_lower | alloc | bad_lower | bad_serialize | chdir (changes the worker's directory to BTI_FAULT_STATE
while lowering, as some delegates' compilers do) | write_weights (any program with weights) | flaky, wrong on each program's first
attempt: needs ``BTI_FAULT_STATE``, a directory | scale (every float output times ``factor``: a delegate with a
requantization scale a few percent off) | shift (every float output moved by ``steps`` quantization steps of its
dequantize node, or ``steps`` hundredths of its largest magnitude where it has none: a wrong zero point)) and ``op`` (an
edge op name such as ``aten.mul.Tensor``, or ``*`` for every program): the fault fires only for programs containing
that op, so every other item must come out intact.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from harness.backends.executorch import ExecuTorchBackend


class FaultBackend(ExecuTorchBackend):
    name = "fault"
    extra_keys = frozenset({"options"})

    def __init__(self) -> None:
        self.armed: str | None = None
        self.recipe: Any = None

    def lower(self, recipe: Any, ep: Any, built: Any = None) -> tuple[Any, dict[str, Any]]:
        lowered, stats = super().lower(recipe, ep, built)
        opts = recipe.options.extra.get("options") or {}
        every = opts.get("op") == "*"
        self.armed = opts.get("fault") if every or opts.get("op") in stats["undelegated_ops"] else None
        self.steps = _output_steps(ep) if self.armed == "shift" else []
        self.first_time = False
        if self.armed == "flaky":  # a marker file per program under BTI_FAULT_STATE: absent on the first attempt
            import hashlib

            marker = os.path.join(os.environ["BTI_FAULT_STATE"], hashlib.sha256(str(ep).encode()).hexdigest()[:16])
            self.first_time = not os.path.exists(marker)
            open(marker, "w").close()
        self.options = opts
        if self.armed == "chdir":
            os.chdir(os.environ["BTI_FAULT_STATE"])
        if self.armed == "raise_lower":
            raise RuntimeError("fault backend: refusing to lower on purpose")
        if self.armed == "segfault_lower":  # a compiler that dies (Vela's stack overflow)
            os.kill(os.getpid(), signal.SIGSEGV)
        if opts.get("fault") == "write_weights":  # any program with weights: doubles them where they are shared
            import torch

            with torch.no_grad():
                for t in ep.state_dict.values():
                    t.mul_(2.0)
        if self.armed == "bad_lower":
            return lowered  # type: ignore[return-value]  # not (lowered, stats)
        if self.armed == "hostile_lower":  # what XML cannot carry, a CDATA end, and 2 MB
            raise RuntimeError("hostile \x00 NUL \x1b[31m ESC \ud800 lone surrogate ]]> <!-- --> &amp; " + "x" * 2_000_000)
        return lowered, stats

    def serialize(self, recipe: Any, lowered: Any) -> Any:
        if self.armed == "bad_serialize":
            return "not bytes", []
        return super().serialize(recipe, lowered)

    def run(self, handle: Any, inputs: tuple[Any, ...]) -> list[Any]:
        outs = super().run(handle, inputs)
        if self.armed == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.armed == "abort":
            os.abort()
        if self.armed == "sleep":  # ``seconds``: a slow program that ends (default: a hang)
            if os.environ.get("BTI_FAULT_STATE"):  # each call, and the time a runtime provider would have here
                from harness.settings import current

                with open(os.path.join(os.environ["BTI_FAULT_STATE"], "calls"), "a") as f:
                    f.write(f"{current().provider_timeout_s:g}\n")
            time.sleep(float(self.options.get("seconds", 3600)))
        if self.armed == "spin":  # computes until killed: a TIMEOUT that used a whole core, unlike ``sleep``'s
            end = time.monotonic() + float(self.options.get("seconds", 3600))
            while time.monotonic() < end:
                sum(range(10_000))
        if self.armed == "perturb":
            return [o + 1.0 for o in outs]
        if self.armed == "alloc":  # 512 MiB touched once: this item's own peak, not the next item's
            import numpy as np

            block = np.ones(512 * 2**20, dtype=np.uint8)
            del block
        if self.armed == "none_output":
            return None  # type: ignore[return-value]
        if self.armed == "write_inputs":
            for x in inputs:
                x.mul_(3.0)  # a delegate that computes in place in its input buffers
            return outs
        if self.armed == "noise":
            import torch

            gen = torch.Generator().manual_seed(0)
            return [o + torch.randn(o.shape, generator=gen, dtype=o.dtype) * float(self.options.get("scale", 1e-7)) for o in outs]
        if self.armed == "scale":
            return [o * float(self.options.get("factor", 1.03)) if o.is_floating_point() else o for o in outs]
        if self.armed == "shift":
            n = float(self.options.get("steps", 1))
            return [o + n * (step if step else 0.01 * float(o.abs().max())) if o.is_floating_point() else o
                    for o, step in zip(outs, self.steps + [None] * len(outs), strict=False)]
        if self.armed == "flaky" and self.first_time:  # wrong on a program's first attempt only
            return [o + 1.0 for o in outs]
        return outs


def _output_steps(ep: Any) -> list[float | None]:
    """Each output's quantization step, read from the quantized program's dequantize nodes (None: not quantized)."""
    import torch.utils._pytree as pytree

    from harness.judge import _DEQUANTIZE, _grid_scale, _op_name

    seen = {n.name: float(n.args[1]) for n in ep.graph.nodes
            if n.op == "call_function" and _op_name(n.target) in _DEQUANTIZE and isinstance(n.args[1], float)}
    outs = pytree.tree_leaves(ep.graph.output_node().args[0])
    return [_grid_scale(n, seen) if hasattr(n, "op") else None for n in outs]
