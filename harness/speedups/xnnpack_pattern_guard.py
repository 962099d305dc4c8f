"""Speedup 9: XNNPACK's SDPA and bilinear-upsampling pattern graphs built only when a graph could match.

Two of XNNPACK's preprocess passes (``ConvertToSDPAPass``, ``ConvertToUpsampleBilinear2d``) match every delegated
graph against pattern graphs that are built, on first use in a process, by strict (dynamo) exports of an attention
and an interpolation module: 2.2 s, which the parent's warm-up paid on every run before it forked. Each pattern has
one anchor, and the matcher compares the anchor and its ancestors by target, so a graph that lacks one of their ops
(``_softmax`` or ``bmm`` for SDPA, ``upsample_bilinear2d.vec`` for upsampling) matches nothing. On such a graph bti
runs the pass with an empty pattern list: it does what it does on finding no match, and the patterns are never
built. Otherwise the pass runs as usual, and builds the patterns the first time with the global RNG restored
afterwards (they draw their example inputs from it). ``tests/test_speedups_graph.py`` checks its patterns on the
installed stack. When a run has model items (any kind but single-operator ones), the parent still builds them
before it forks (``prebuild_xnnpack_patterns``), so workers do not each build them inside an item.

Installed only when XNNPACK's passes are already imported (a recipe that uses XNNPACK imported them).
"""

from __future__ import annotations

import sys
import types
from typing import Any, NamedTuple

from harness.speedups.base import VERIFIED, Speedup


class PatternPass(NamedTuple):
    """A pass that matches pattern graphs, and the edge ops every one of its patterns needs. Every pattern has one
    anchor, and these ops are among the anchor and its ancestors, which the matcher compares one by one
    (target ==): a graph without one of them matches no pattern. tests/test_speedups_graph.py checks both facts
    against the patterns themselves."""

    module: str
    cls: str
    patterns: str  # the pass module's attribute holding the pattern module
    getter: str  # the pattern module's function that builds them
    empty: type  # what the getter returns when there are none
    ops: tuple[str, ...]


PASSES = (
    PatternPass("executorch.backends.xnnpack._passes.convert_to_sdpa", "ConvertToSDPAPass", "sdpa", "get_graphs", list,
                ("aten._softmax.default", "aten.bmm.default")),
    PatternPass("executorch.backends.xnnpack._passes.convert_to_upsample_bilinear2d", "ConvertToUpsampleBilinear2d",
                "bilinear_2d", "get_graphs_dict", dict, ("aten.upsample_bilinear2d.vec",)),
)


def may_match(graph_module: Any, required: tuple[Any, ...]) -> bool:
    """Whether every op in ``required`` is the target of a call_function node (compared as the matcher does)."""
    missing = list(required)
    for node in graph_module.graph.nodes:
        if node.op == "call_function":
            missing = [t for t in missing if not t == node.target]  # noqa: SIM201  (==, as the matcher compares)
            if not missing:
                return True
    return False


def edge_op(name: str) -> Any:
    from executorch.exir.dialects._ops import ops as exir_ops

    op: Any = exir_ops.edge
    for part in name.split("."):
        op = getattr(op, part)
    return op


def _guarded_call(original: Any, module: Any, p: PatternPass) -> Any:
    import torch

    stand_in = types.SimpleNamespace(**{p.getter: p.empty})
    required = tuple(edge_op(o) for o in p.ops)

    def call(self: Any, graph_module: Any) -> Any:
        if may_match(graph_module, required):
            # the patterns may be built now: their example inputs come from the global RNG, which is left
            # as it was (as when the parent's warm-up built them)
            with torch.random.fork_rng(devices=[]):
                return original(self, graph_module)
        real = getattr(module, p.patterns)
        setattr(module, p.patterns, stand_in)  # the pass runs as it would on finding no match
        try:
            return original(self, graph_module)
        finally:
            setattr(module, p.patterns, real)

    call.__wrapped__ = original  # type: ignore[attr-defined]
    return call


class XnnpackPatternGuard(Speedup):
    number, name, verified_on = 9, "xnnpack-pattern-guard", VERIFIED

    def __init__(self) -> None:
        super().__init__()
        self.guarded: dict[type, Any] = {}  # pass class -> its original call, while installed

    def install(self) -> None:
        if any(p.module not in sys.modules for p in PASSES):
            return
        for p in PASSES:
            module = sys.modules[p.module]
            cls = getattr(module, p.cls)
            self.guarded[cls] = cls.call
            self.patch(cls, "call", _guarded_call(cls.call, module, p))

    def uninstalled(self) -> None:
        self.guarded.clear()


SPEEDUP = XnnpackPatternGuard()


def prebuild_xnnpack_patterns() -> None:
    """Build the patterns the guard defers, now (in the parent before it forks, global RNG left as it was): for
    runs whose items are models, which often have attention or upsampling, so that no worker builds them
    inside an item."""
    if not SPEEDUP.guarded:
        return
    import torch

    with torch.random.fork_rng(devices=[]):
        for p in PASSES:
            getattr(getattr(sys.modules[p.module], p.patterns), p.getter)()
