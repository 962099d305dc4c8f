"""ExecuTorch flows: portable (no partitioner) and delegates by partitioner name.

Recipe keys read here: ``partitioners`` (xnnpack, coreml, vulkan, qnn, openvino), ``quantize``
(``{quantizer: xnnpack|openvino, per_channel, dynamic, fold_quantize}``), ``compile_specs``
(``{name: value}`` passed to partitioners that take them), ``edge_compile``
(``{check_ir_validity: false}`` for delegates that consume non-core ops) and
``requires.runtime_backends``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.recipes import Recipe

_SKIP_NODES = {"getitem", "executorch_call_delegate"}


def registered_runtime_backends() -> set[str]:
    from executorch.runtime import Runtime

    return set(Runtime.get().backend_registry.registered_backend_names)


def _partitioner(name: str, recipe: Recipe) -> Any:
    specs = recipe.raw.get("compile_specs") or {}
    if name == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return XnnpackPartitioner()
    if name == "coreml":
        from executorch.backends.apple.coreml.partition import CoreMLPartitioner

        return CoreMLPartitioner()
    if name == "vulkan":
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

        return VulkanPartitioner()
    if name == "openvino":
        from executorch.backends.openvino.partitioner import OpenvinoPartitioner
        from executorch.exir.backend.compile_spec_schema import CompileSpec

        device = str(specs.get("device", "CPU")).encode()
        return OpenvinoPartitioner([CompileSpec("device", device)])
    if name == "qnn":
        from executorch.backends.qualcomm.partition.qnn_partitioner import QnnPartitioner  # type: ignore[import-not-found]

        return QnnPartitioner(specs)  # needs the QNN SDK; recipes gate this on QNN_SDK_ROOT
    raise ValueError(f"unknown partitioner {name!r} (known: xnnpack, coreml, vulkan, openvino, qnn)")


def _quantizer(cfg: dict[str, Any]) -> Any:
    kind = cfg.get("quantizer", "xnnpack")
    if kind == "xnnpack":
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        qcfg = get_symmetric_quantization_config(
            is_per_channel=bool(cfg.get("per_channel", True)), is_dynamic=bool(cfg.get("dynamic", False))
        )
        return XNNPACKQuantizer().set_global(qcfg)
    if kind == "openvino":
        from executorch.backends.openvino.quantizer import OpenVINOQuantizer

        return OpenVINOQuantizer()
    raise ValueError(f"unknown quantizer {kind!r} (known: xnnpack, openvino)")


@dataclass
class Loaded:
    """Keeps the Program (and its bytes) alive while the Method runs: executorch.runtime's
    ``load_program(buf).load_method(...)`` chain frees the Program under the Method."""

    blob: bytes
    program: Any
    method: Any


class ExecuTorchBackend:
    name = "executorch"

    def unavailable_reason(self, recipe: Recipe) -> str | None:
        needed = (recipe.raw.get("requires") or {}).get("runtime_backends") or []
        if needed:
            have = registered_runtime_backends()
            missing = [b for b in needed if b not in have]
            if missing:
                return (f"{', '.join(missing)} not registered in this executorch runtime "
                        f"(registered: {', '.join(sorted(have))})")
        return None

    def quantize(self, recipe: Recipe, ep: Any, built: Any) -> Any:
        cfg = recipe.quantize
        if not cfg:
            return ep
        import torch
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        load_quantized_kernels()

        prepared = prepare_pt2e(ep.module(), _quantizer(cfg))
        with torch.no_grad():
            for inputs in _calibration_sets(built):
                prepared(*inputs)
        converted = convert_pt2e(prepared, fold_quantize=bool(cfg.get("fold_quantize", True)))
        return torch.export.export(converted, built.example, dynamic_shapes=built.flat_dynamic_shapes, strict=False)

    def lower(self, recipe: Recipe, ep: Any) -> tuple[Any, dict[str, Any]]:
        from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

        parts = [_partitioner(p, recipe) for p in recipe.raw.get("partitioners") or []]
        edge_cfg = recipe.raw.get("edge_compile") or {}
        config = EdgeCompileConfig(_check_ir_validity=bool(edge_cfg.get("check_ir_validity", True)))
        edge = to_edge_transform_and_lower(ep, partitioner=parts or None, compile_config=config)
        program = edge.exported_program()
        stats = partition_stats(program.graph_module, bool(parts))
        stats["input_mutations"] = _input_mutation_outputs(program)
        return edge, stats

    def serialize(self, lowered: Any) -> tuple[bytes, list[dict[str, Any]]]:
        buf = bytes(lowered.to_executorch().buffer)
        return buf, delegate_blobs(buf)

    def load(self, blob: bytes) -> Loaded:
        from executorch.runtime import Runtime

        program = Runtime.get().load_program(blob)
        return Loaded(blob, program, program.load_method("forward"))

    def run(self, handle: Loaded, inputs: tuple[Any, ...]) -> list[Any]:
        return list(handle.method.execute(list(inputs)))


def _input_mutation_outputs(program: Any) -> int:
    """How many leading program outputs are user inputs written in place (e.g. an ``out=`` argument);
    the runtime returns them before the user outputs, eager does not."""
    from torch.export.graph_signature import OutputKind

    return sum(1 for spec in program.graph_signature.output_specs if spec.kind == OutputKind.USER_INPUT_MUTATION)


def load_quantized_kernels() -> None:
    """Register the ``quantized_decomposed::*.out`` variants, so q/dq nodes a partitioner leaves
    behind can be serialized for the portable runtime (otherwise: "Missing out variants")."""
    import executorch.kernels.quantized  # noqa: F401


def _calibration_sets(built: Any) -> list[tuple[Any, ...]]:
    sets = [built.example]
    if built.run is not built.example:
        sets.append(built.run)
    return sets


def partition_stats(gm: Any, partitioned: bool) -> dict[str, Any]:
    """Delegated/undelegated op counts from the lowered graph (no etrecord needed)."""
    delegated: Counter[str] = Counter()
    undelegated: Counter[str] = Counter()
    subgraphs = 0
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = getattr(node.target, "__name__", str(node.target))
        if name == "executorch_call_delegate":
            subgraphs += 1
            lowered = getattr(gm, node.args[0].target)
            for inner in lowered.original_module.graph.nodes:
                if inner.op == "call_function":
                    iname = getattr(inner.target, "__name__", str(inner.target))
                    if iname not in _SKIP_NODES:
                        delegated[iname] += 1
        elif name not in _SKIP_NODES:
            undelegated[name] += 1
    d, u = sum(delegated.values()), sum(undelegated.values())
    return {
        "partitioned": partitioned,
        "delegated_subgraphs": subgraphs,
        "delegated_nodes": d,
        "undelegated_nodes": u,
        "total_nodes": d + u,
        "delegated_pct": round(100.0 * d / (d + u), 2) if d + u else 100.0,
        "delegated_ops": dict(sorted(delegated.items())),
        "undelegated_ops": dict(sorted(undelegated.items())),
    }


def delegate_blobs(buf: bytes) -> list[dict[str, Any]]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    pte = deserialize_pte_binary(buf)
    program = getattr(pte, "program", pte)
    out = []
    for plan in program.execution_plan:
        for d in plan.delegates:
            if d.processed.location == 0:  # INLINE
                size = len(program.backend_delegate_data[d.processed.index].data)
            else:  # SEGMENT
                size = int(program.segments[d.processed.index].size)
            out.append({"backend": d.id, "bytes": size, "method": plan.name})
    return out
