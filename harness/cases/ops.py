"""Resolve an op reference: ``aten::name[.overload]`` or a dotted module path."""

from __future__ import annotations

import importlib
from typing import Any

from harness.errors import SpecError


def op_short_name(op: str) -> str:
    """``aten::add.Tensor`` -> ``add``; ``torch.nn.functional.gelu`` -> ``gelu``; ``torch.nn.Conv2d`` -> ``conv2d``."""
    if op.startswith("aten::"):
        return op[len("aten::"):].split(".")[0]
    return op.rsplit(".", 1)[-1].lower()


def resolve_op(op: str, loc: str = "") -> Any:
    """Return the callable (an OpOverload, a function, or an nn.Module class)."""
    import torch

    prefix = f"{loc}: " if loc else ""
    if op.startswith("aten::"):
        name, _, overload = op[len("aten::"):].partition(".")
        packet = getattr(torch.ops.aten, name, None) if name else None
        if packet is None:
            raise SpecError(f"{prefix}unknown op {op!r}: torch.ops.aten has no {name!r}")
        try:
            return getattr(packet, overload or "default")
        except AttributeError:
            raise SpecError(
                f"{prefix}unknown op {op!r}: overloads of aten::{name} are {', '.join(packet.overloads())}"
            ) from None
    module_path, _, attr = op.rpartition(".")
    if not module_path:
        raise SpecError(f"{prefix}unknown op {op!r}: use aten::name[.overload] or a dotted module path")
    try:
        module = importlib.import_module(module_path)
        return getattr(module, attr)
    except (ImportError, AttributeError):
        raise SpecError(f"{prefix}unknown op {op!r}: cannot import {attr} from {module_path}") from None
