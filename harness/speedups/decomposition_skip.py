"""Speedup 12: the edge decompositions that have nothing to decompose, skipped.

``to_edge_transform_and_lower`` (``_gen_edge_manager_for_partitioners``) calls ``run_decompositions`` three times per
program for a partitioner such as XNNPACK's: once with an empty table, which functionalizes the graph, then twice
with tables (the default table less the partitioner's preserved ops, then the default table, after the preserved
ops were renamed out of its reach); twice without a partitioner (the empty table, then the default one). Each call
retraces the whole graph (~0.03 s on a tiny one). After the first, a call whose table holds no operator of the
graph decomposes nothing; ExecuTorch 1.5 itself skips that call on one of its paths
(``_can_skip_using_EDGE_DO_NOT_DECOMP``: "safe to skip when none of those targets occur in the graph"). bti skips it
on every path of that function, and only when all of these hold:

- the table is a non-empty dict and nothing else is passed (never the functionalizing call);
- the program is one that an earlier ``run_decompositions`` of the same call returned (functional inference IR);
- no ``call_function`` node, in the graph or any graph module under it (control-flow branches and bodies), has a
  target in the table (an edge op is compared by the ATen op it wraps, as ExecuTorch's own test does), nor a
  mutable schema: a partitioner's hook that edited the program in place (an in-place op) gets its retrace.

On the upstream suite's XNNPACK programs, 121 of 213 calls are skipped. Only for partitioners whose programs were
compared byte for byte with and without it (``VERIFIED_PARTITIONERS``) or none. The guard replaces
``ExportedProgram.run_decompositions`` only while that function runs, in the calling thread's process; bti's workers
lower one item at a time. A skipped call also skips the retrace's own checks: none failed where the retrace ran in
``benchmarks/verify_speedups.py``'s runs.

Installed only when ExecuTorch's program module is already imported (a recipe that lowers imported it).
"""

from __future__ import annotations

import functools
import sys
import weakref
from typing import Any

from harness.speedups.base import VERIFIED, Speedup

# The partitioners whose programs ``benchmarks/verify_speedups.py``-style runs found byte-identical with and without
# the skip (XNNPACK; Arm TOSA and VGF; Vulkan), compared by exact type. OpenVINO's differ (479 of the `ops` suite's
# 720 programs on openvino and openvino-int8, 41 of them by 2 bytes; statuses and outputs identical), where two
# identical runs give identical bytes; Core ML's differ from one identical run to the next; Ethos-U and QNN were not
# compared. A call with any other partitioner runs every decomposition.
VERIFIED_PARTITIONERS = frozenset({
    "executorch.backends.xnnpack.partition.xnnpack_partitioner.XnnpackPartitioner",
    "executorch.backends.arm.tosa.partitioner.TOSAPartitioner",
    "executorch.backends.arm.vgf.partitioner.VgfPartitioner",
    "executorch.backends.vulkan.partitioner.vulkan_partitioner.VulkanPartitioner",
})


def verified_partitioners(partitioners: Any) -> bool:
    """Whether every partitioner of a ``_gen_edge_manager_for_partitioners`` call (``{method: [partitioner]}``, or
    none: the portable path) is of a type in ``VERIFIED_PARTITIONERS``."""
    return all(f"{type(p).__module__}.{type(p).__qualname__}" in VERIFIED_PARTITIONERS
               for ps in (partitioners or {}).values() for p in ps)


def blocks_skip(graph_module: Any, ops: Any) -> Any:
    """The first node (under ``graph_module``, control-flow graph modules included) that a ``run_decompositions`` with
    table ``ops`` would change: its target is in the table (an edge op by the ATen overload it wraps), or its schema is
    mutable (functionalization would rewrite it); None when there is none."""
    import torch

    for module in graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op != "call_function":
                continue
            target = node.target
            if not isinstance(target, torch._ops.OpOverload):
                target = getattr(target, "_op", target)
            if target in ops or (isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable):
                return node
    return None


class DecompositionSkip(Speedup):
    number, name, verified_on = 12, "decomposition-skip", VERIFIED

    def __init__(self) -> None:
        super().__init__()
        self.skipped = 0  # calls skipped in this process (tests read it)
        self.ran = 0

    def install(self) -> None:
        program_mod = sys.modules.get("executorch.exir.program._program")
        if program_mod is None:
            return
        from torch.export import ExportedProgram

        run_decompositions = ExportedProgram.run_decompositions
        produced: weakref.WeakSet[Any] = weakref.WeakSet()  # programs a call in the current scope returned

        def guarded(ep: Any, decomp_table: Any = None, *args: Any, **kwargs: Any) -> Any:
            if (isinstance(decomp_table, dict) and decomp_table and not args and not kwargs and ep in produced
                    and blocks_skip(ep.graph_module, decomp_table) is None):
                self.skipped += 1
                return ep
            self.ran += 1
            out = run_decompositions(ep, decomp_table, *args, **kwargs)
            produced.add(out)
            return out

        original = program_mod._gen_edge_manager_for_partitioners

        @functools.wraps(original)
        def scoped(*args: Any, **kwargs: Any) -> Any:
            if not verified_partitioners(args[0] if args else kwargs.get("partitioner")):
                return original(*args, **kwargs)
            ExportedProgram.run_decompositions = guarded  # type: ignore[method-assign]
            try:
                return original(*args, **kwargs)
            finally:
                ExportedProgram.run_decompositions = run_decompositions  # type: ignore[method-assign]
                produced.clear()

        self.patch(program_mod, "_gen_edge_manager_for_partitioners", scoped)

    def uninstalled(self) -> None:
        self.skipped = self.ran = 0


SPEEDUP = DecompositionSkip()
