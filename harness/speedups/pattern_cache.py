"""Speedup 5: pt2e pattern graphs.

The XNNPACK quantizer's conv+batch-norm annotators (``_do_annotate_conv_bn``, four of them) build their match
patterns on every ``prepare_pt2e`` with ``torchao...utils._get_aten_graph_module_for_pattern``: a strict (dynamo)
``torch.export`` of a fixed closure, twelve per call, whatever the model: ~1.6 s of a ~1.7 s quantize stage. The
graph depends only on the pattern's code and closure (conv function, relu flags), the example inputs' tensor
metadata (random values, never read by the graph) and ``is_cuda``; bti keys on exactly those (anything unhashable,
a module with parameters or buffers, or a non-tensor input it cannot hash disables the memo for that call) and
hands out a ``copy.deepcopy`` of the first graph, since the matcher rewrites the pattern's output node. The caller
still draws its example inputs from the global RNG, so RNG state after prepare is unchanged.

Installed only when torchao's pt2e utils are already imported (a quantizing recipe's ``warm``); modules that
import the function later get the cached one.
"""

from __future__ import annotations

import copy
import sys
import types
from typing import Any

from harness.speedups.base import VERIFIED, Speedup

MODULE = "torchao.quantization.pt2e.utils"
FUNCTION = "_get_aten_graph_module_for_pattern"


def _stable(value: Any) -> bool:
    """A closure value whose identity or value fixes its behaviour: a scalar, a builtin or torch op,
    or a plain function without state of its own (defaults, closure)."""
    import torch

    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (types.BuiltinFunctionType, torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    return (isinstance(value, types.FunctionType) and not value.__closure__ and not value.__defaults__
            and not value.__kwdefaults__)


def _input_key(x: Any) -> Any:
    """An example input's part of the key; None when it cannot be told safely."""
    import torch

    if isinstance(x, torch.Tensor):
        if type(x) is not torch.Tensor:
            return None
        return ("T", tuple(x.shape), tuple(x.stride()), x.dtype, x.device, x.requires_grad)
    if x is None or isinstance(x, (bool, int, float, str)):
        return (type(x), x)
    return None


def pattern_key(pattern: Any, example_inputs: Any, is_cuda: bool, kwargs: dict[str, Any]) -> Any:
    """What a pattern graph depends on, or None when that cannot be told safely."""
    import torch

    fn = pattern
    mod_type = None
    if isinstance(pattern, torch.nn.Module):  # only torchao's stateless WrapperModule(fn)
        from torchao.quantization.pt2e.export_utils import WrapperModule

        if (type(pattern) is not WrapperModule or pattern._modules or pattern._parameters or pattern._buffers
                or pattern._forward_hooks or pattern._forward_pre_hooks or not pattern.training):
            return None
        mod_type = WrapperModule
        fn = pattern.fn
    if not isinstance(fn, types.FunctionType) or fn.__defaults__ or fn.__kwdefaults__:
        return None
    try:
        cells = tuple(c.cell_contents for c in fn.__closure__ or ())
    except ValueError:  # an empty cell
        return None
    inputs = tuple(_input_key(x) for x in example_inputs)
    if not all(_stable(c) for c in cells) or None in inputs:
        return None
    key = (mod_type, fn.__code__, id(fn.__globals__), cells, inputs, bool(is_cuda), tuple(sorted(kwargs.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


class PatternCache(Speedup):
    number, name, verified_on = 5, "pattern-cache", VERIFIED

    def __init__(self) -> None:
        super().__init__()
        self.original: Any = None  # torchao's function, while installed
        self.graphs: dict[Any, Any] = {}

    def install(self) -> None:
        utils = sys.modules.get(MODULE)
        if utils is None:
            return
        self.original = getattr(utils, FUNCTION)
        self.rebind_everywhere(FUNCTION, self.original, self.cached_graph)

    def uninstalled(self) -> None:
        self.graphs.clear()  # ``original`` stays: a module that imported ``cached_graph`` while installed still calls it

    def cached_graph(self, pattern: Any, example_inputs: Any, is_cuda: bool = False, **kwargs: Any) -> Any:
        """``_get_aten_graph_module_for_pattern`` once per pattern, a deep copy each call (torchao's own once disabled)."""
        key = pattern_key(pattern, example_inputs, is_cuda, kwargs)
        if key is None or not self.installed:
            return self.original(pattern, example_inputs, is_cuda, **kwargs)
        gm = self.graphs.get(key)
        if gm is None:
            if len(self.graphs) > 1000:
                self.graphs.clear()
            gm = self.graphs[key] = self.original(pattern, example_inputs, is_cuda, **kwargs)
        return copy.deepcopy(gm)


SPEEDUP = PatternCache()
