"""A vendor backend plugin for the act scenarios: ExecuTorch portable, but wrong on purpose.

Programs that contain the recipe's ``options.op`` come back with every output off by ``options.offset``;
every other program is left intact, so exactly those items fail.
"""

from __future__ import annotations

from typing import Any

from harness.backends.executorch import ExecuTorchBackend


class FaultBackend(ExecuTorchBackend):
    name = "fault"
    extra_keys = frozenset({"options"})  # this backend's own recipe key, beside ExecuTorch's

    def __init__(self) -> None:
        self.offset = 0.0

    def lower(self, recipe: Any, ep: Any, built: Any = None) -> tuple[Any, dict[str, Any]]:
        lowered, stats = super().lower(recipe, ep, built)
        opts = recipe.options.extra.get("options") or {}
        self.offset = float(opts.get("offset", 1.0)) if opts.get("op") in stats["undelegated_ops"] else 0.0
        return lowered, stats

    def run(self, handle: Any, inputs: tuple[Any, ...]) -> list[Any]:
        return [o + self.offset for o in super().run(handle, inputs)]
