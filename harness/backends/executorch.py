"""ExecuTorch flows: portable (no partitioner) and delegates by partitioner name.

Recipe keys this backend owns (``parse_options``): ``partitioners`` (xnnpack, coreml, vulkan, qnn,
openvino, and the Arm targets tosa, ethos-u, vgf: harness.backends.arm), ``quantize``
(``{quantizer: xnnpack|openvino|arm, per_channel, dynamic, fold_quantize}``),
``compile_specs`` (``{name: value}`` passed to partitioners that take them) and ``edge_compile``
(``{check_ir_validity: false}`` for delegates that consume non-core ops). It also honours the
common ``requires.runtime_backends``. Stages: quantize (when ``quantize`` is set), lower, serialize,
load, run.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from harness.backends import BaseBackend, Where, arm, check_keys
from harness.errors import RecipeError
from harness.providers import Loaded, PybindProvider, RunOptions
from harness.speedups.lazy_recompile import lazy_recompile
from harness.status import Stage

if TYPE_CHECKING:
    from harness.judge import QuantizedReference
    from harness.recipes import Recipe

_SKIP_NODES = {"getitem", "executorch_call_delegate"}
PARTITIONERS = ("xnnpack", "coreml", "vulkan", "qnn", "openvino", *arm.PARTITIONERS)
QUANTIZERS = ("xnnpack", "openvino", "arm")
REFERENCES = ("program", "per-row")  # quantize.reference: what a quantized recipe's outputs are held to
# Only pure-Python lowering paths are warmed in the parent: a vendor backend could crash the parent
# (which holds the results file), and a runtime with its own thread pool (OpenVINO's TBB) would make
# every later fork unsafe.
WARM_PARTITIONERS = frozenset({"xnnpack"})


@contextlib.contextmanager
def scratch_tempdir() -> Iterator[Path]:
    """Point ``tempfile`` at a fresh directory for the block, then remove it. Delegates' compilers leave their
    temporary files behind (coremltools left one ``tmp*.mlpackage`` per item in the system temp directory: 322 from
    360 ops), and a sweep of thousands of items must not fill the runner's disk."""
    previous = tempfile.tempdir
    from harness.env import scratch_prefix

    scratch = tempfile.mkdtemp(prefix=scratch_prefix())  # named by this worker's pid: the pool removes it if the worker dies
    tempfile.tempdir = scratch
    try:
        yield Path(scratch)
    finally:
        tempfile.tempdir = previous
        shutil.rmtree(scratch, ignore_errors=True)



@dataclass(frozen=True)
class Quantize:
    quantizer: str = "xnnpack"
    per_channel: bool = True
    dynamic: bool = False
    fold_quantize: bool = True
    reference: str = "program"  # "per-row": dynamic activations per row in the reference, as XNNPACK's qd8 (harness.qd8)


@dataclass(frozen=True)
class ExecuTorchOptions:
    partitioners: tuple[str, ...] = ()
    quantize: Quantize | None = None
    compile_specs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    check_ir_validity: bool = True
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # keys a subclass declares

    @property
    def quantized(self) -> bool:
        return self.quantize is not None

    @property
    def scheme(self) -> str | None:
        return "int8" if self.quantize is not None else None


def _options(recipe: Recipe) -> ExecuTorchOptions:
    opts = recipe.options
    if opts is None:
        return ExecuTorchOptions()
    if not isinstance(opts, ExecuTorchOptions):  # never lower without the recipe's partitioners and quantizer
        raise RecipeError(_foreign_options(recipe))
    return opts


def _foreign_options(recipe: Recipe) -> str:
    return (f"recipe {recipe.name}: backend {recipe.backend}'s parse_options returned a {type(recipe.options).__name__}, "
            "not an ExecuTorchOptions: ExecuTorch would lower it without its partitioners and quantizer (declare your "
            "keys in extra_keys and read them from recipe.options.extra, or subclass ExecuTorchOptions)")


def _partitioner(name: str, recipe: Recipe) -> Any:
    specs = _options(recipe).compile_specs
    if name == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return XnnpackPartitioner()
    if name == "coreml":
        return _coreml_partitioner(specs)
    if name == "vulkan":
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

        return VulkanPartitioner()
    if name == "openvino":
        from executorch.backends.openvino.partitioner import OpenvinoPartitioner
        from executorch.exir.backend.compile_spec_schema import CompileSpec

        device = str(specs.get("device", "CPU")).encode()
        return OpenvinoPartitioner([CompileSpec("device", device)])
    if name == "qnn":
        from executorch.backends.qualcomm.partition.qnn_partitioner import QnnPartitioner

        return QnnPartitioner(specs)  # needs the QNN SDK; recipes gate this on QNN_SDK_ROOT
    if name in arm.PARTITIONERS:
        return arm.partitioner(name, specs)
    raise ValueError(f"unknown partitioner {name!r} (known: {', '.join(PARTITIONERS)})")


def _coreml_partitioner(specs: Mapping[str, Any]) -> Any:
    """``compile_specs``: ``minimum_deployment_target`` (coremltools' ``target`` name, e.g. iOS17: fp16 inputs need
    iOS16+) and ``compute_precision`` (float16, coremltools' default, or float32)."""
    import coremltools as ct  # type: ignore[import-untyped]
    from executorch.backends.apple.coreml.compiler import CoreMLBackend
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner

    kwargs: dict[str, Any] = {}
    if "minimum_deployment_target" in specs:
        kwargs["minimum_deployment_target"] = getattr(ct.target, str(specs["minimum_deployment_target"]))
    if "compute_precision" in specs:
        kwargs["compute_precision"] = getattr(ct.precision, str(specs["compute_precision"]).upper())
    return CoreMLPartitioner(compile_specs=CoreMLBackend.generate_compile_specs(**kwargs))


def _arm_target(opts: ExecuTorchOptions) -> str | None:
    """The recipe's Arm partitioner (tosa, ethos-u, vgf), if it has one."""
    return next((p for p in opts.partitioners if p in arm.PARTITIONERS), None)


def _quantizer(cfg: Quantize) -> Any:
    kind = cfg.quantizer
    if kind == "xnnpack":
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        qcfg = get_symmetric_quantization_config(
            is_per_channel=cfg.per_channel, is_dynamic=cfg.dynamic
        )
        return XNNPACKQuantizer().set_global(qcfg)
    if kind == "openvino":
        from executorch.backends.openvino.quantizer import OpenVINOQuantizer

        return OpenVINOQuantizer()
    raise ValueError(f"unknown quantizer {kind!r} (known: xnnpack, openvino)")


@dataclass
class Deferred:
    """A program for an out-of-process provider: loaded and run where the provider runs it."""

    blob: bytes
    provider: Any
    mutations: int = 0
    threads: int | None = None


class ExecuTorchBackend(BaseBackend):
    name = "executorch"
    stages = frozenset({Stage.QUANTIZE, Stage.SERIALIZE})
    runs_programs = True
    extra_keys: frozenset[str] = frozenset()  # recipe keys a subclass (a vendor's variant) adds
    extra_partitioners: frozenset[str] = frozenset()  # partitioner names a subclass builds (its ``partitioner``)
    extra_quantizers: frozenset[str] = frozenset()  # quantizer names a subclass builds (its ``quantizer``)

    def partitioner(self, name: str, recipe: Recipe) -> Any:
        """The partitioner a recipe's ``partitioners:`` entry names; a vendor subclass builds its own names here."""
        return _partitioner(name, recipe)

    def quantizer(self, cfg: Quantize) -> Any:
        """The pt2e quantizer ``quantize.quantizer`` names; a vendor subclass builds its own names here."""
        return _quantizer(cfg)

    def parse_options(self, raw: Mapping[str, Any], where: Where) -> ExecuTorchOptions:
        check_keys(raw, {"partitioners", "quantize", "compile_specs", "edge_compile", *self.extra_keys}, where, self.name)
        parts = raw.get("partitioners") or []
        if not isinstance(parts, list):
            raise RecipeError(f"{where('partitioners')}: `partitioners` takes a list")
        known = (*PARTITIONERS, *sorted(self.extra_partitioners))
        for p in parts:
            if p not in known:
                raise RecipeError(f"{where('partitioners')}: unknown partitioner {p!r} (known: {', '.join(known)})")
        quant = None
        q = raw.get("quantize")
        if q:
            if not isinstance(q, dict):
                raise RecipeError(f"{where('quantize')}: `quantize` takes a mapping")
            check_keys(q, {"quantizer", "per_channel", "dynamic", "fold_quantize", "reference"}, lambda _k=None: where("quantize"),
                       f"{self.name} (quantize)")
            quantizers = (*QUANTIZERS, *sorted(self.extra_quantizers))
            if q.get("quantizer", "xnnpack") not in quantizers:
                raise RecipeError(f"{where('quantize')}: unknown quantizer {q.get('quantizer')!r} (known: {', '.join(quantizers)})")
            for flag in ("per_channel", "dynamic", "fold_quantize"):
                if flag in q and not isinstance(q[flag], bool):
                    raise RecipeError(f"{where('quantize')}: quantize.{flag} takes true or false, not {q[flag]!r}")
            if q.get("reference", "program") not in REFERENCES:
                raise RecipeError(f"{where('quantize')}: quantize.reference takes {' or '.join(REFERENCES)}, not {q['reference']!r}")
            if q.get("reference") == "per-row" and not (q.get("dynamic") and q.get("quantizer", "xnnpack") == "xnnpack"
                                                        and "xnnpack" in parts):
                raise RecipeError(f"{where('quantize')}: quantize.reference per-row is XNNPACK's dynamic quantization "
                                  "(quantizer: xnnpack, dynamic: true, the xnnpack partitioner)")
            quant = Quantize(**q)
        specs = raw.get("compile_specs") or {}
        edge = raw.get("edge_compile") or {}
        if not isinstance(specs, dict):
            raise RecipeError(f"{where('compile_specs')}: `compile_specs` takes a mapping")
        if not isinstance(edge, dict) or set(edge) - {"check_ir_validity"}:
            raise RecipeError(f"{where('edge_compile')}: `edge_compile` takes check_ir_validity")
        extra = {k: raw[k] for k in self.extra_keys if k in raw}
        return ExecuTorchOptions(tuple(parts), quant, MappingProxyType(dict(specs)),
                                 bool(edge.get("check_ir_validity", True)), MappingProxyType(extra))

    def unavailable_reason(self, recipe: Recipe) -> str | None:
        if recipe.options is not None and not isinstance(recipe.options, ExecuTorchOptions):
            return _foreign_options(recipe)
        return None  # requires.runtime_backends: checked with the rest of ``requires`` (harness.backends)

    def warm(self, recipe: Recipe, lower: bool) -> None:
        """Imports (always), then one tiny lowering when every partitioner is pure Python."""
        import executorch.exir
        from executorch.runtime import Runtime  # noqa: F401

        opts = _options(recipe)
        if "xnnpack" in opts.partitioners:
            import executorch.backends.xnnpack.partition.xnnpack_partitioner  # noqa: F401
        if opts.quantize is not None:
            import torchao.quantization.pt2e.quantize_pt2e  # noqa: F401

            load_quantized_kernels()
        # only bti's own code lowers in the parent: a subclass is a vendor's, and could crash the parent
        if lower and type(self) is ExecuTorchBackend and set(opts.partitioners) <= WARM_PARTITIONERS:
            ep, built = _tiny_program()
            if ep is not None:
                lowered, _ = self.lower(recipe, self.quantize(recipe, ep, built) if opts.quantize else ep, built)
                self.serialize(recipe, lowered)

    def quantize(self, recipe: Recipe, ep: Any, built: Any) -> Any:
        cfg = _options(recipe).quantize
        if cfg is None:
            return ep
        import torch
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        load_quantized_kernels()

        target = _arm_target(_options(recipe))
        if cfg.quantizer == "arm":  # paired with the partitioner's compile spec, which the quantizer needs
            if target is None:
                raise RecipeError(f"recipe {recipe.name}: quantizer arm needs an Arm partitioner ({', '.join(arm.PARTITIONERS)})")
            quantizer = arm.quantizer(target, _options(recipe).compile_specs, cfg.per_channel, cfg.dynamic)
        else:
            quantizer = self.quantizer(cfg)
        # without the input guards' call_module: the Arm quantizer's RewriteInplaceArithmeticPass cannot run it ("call_module
        # is not supported") on a graph with an in-place op (torchvision's ResNet). torch leaves it out by itself only
        # when a calling file's path says "executorch" or "torchao" (_unlift._ok_to_generate_guards_fn), as this one's does by chance
        prepared = prepare_pt2e(ep.module(check_guards=False), quantizer)
        with torch.no_grad():
            for inputs in _calibration_sets(built):
                prepared(*inputs)
        converted = convert_pt2e(prepared, fold_quantize=cfg.fold_quantize)
        return torch.export.export(converted, built.example, dynamic_shapes=built.flat_dynamic_shapes, strict=False)

    def quantized_reference(self, recipe: Recipe, quantized: Any, inputs: tuple[Any, ...]) -> QuantizedReference:
        """The quantized program in eager PyTorch; with ``quantize.reference: per-row``, its dynamically quantized
        activations quantized per row as XNNPACK's kernels do (``harness.qd8``), the program the delegate runs."""
        from harness.judge import quantized_reference

        cfg = _options(recipe).quantize
        if cfg is None or cfg.reference != "per-row":
            return quantized_reference(quantized, inputs)
        from harness.judge import QuantizedReference
        from harness.qd8 import dynamic_quantizations, per_row_program

        module = quantized.module()
        if not per_row_program(module) and dynamic_quantizations(module):  # never the per-tensor program unsaid
            return QuantizedReference(error=f"the per-row reference found none of the program's {dynamic_quantizations(module)} "
                                            "dynamic quantizations in the form it rewrites (choose_qparams -> quantize -> dequantize)")
        return quantized_reference(module, inputs)

    def lower(self, recipe: Recipe, ep: Any, built: Any = None) -> tuple[Any, dict[str, Any]]:
        from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

        opts = _options(recipe)
        parts = [self.partitioner(p, recipe) for p in opts.partitioners]
        config = EdgeCompileConfig(_check_ir_validity=opts.check_ir_validity)
        vela: list[dict[str, Any]] = []
        with lazy_recompile(), arm.vela_estimates(vela), scratch_tempdir():
            edge = to_edge_transform_and_lower(ep, partitioner=parts or None, compile_config=config)
        program = edge.exported_program()
        stats = partition_stats(program.graph_module, bool(parts))
        if vela:  # the Ethos-U compiler's own figures for this program
            stats["vela"] = arm.summarize(vela)
        stats["input_mutations"] = _input_mutation_outputs(program)
        if opts.quantize is not None and opts.quantize.reference == "per-row":
            from harness.qd8 import dynamic_quantizations

            outside = dynamic_quantizations(program.graph_module)  # left to the portable kernels: per tensor, as written
            if outside:
                stats["dynamic_quantization_outside_delegate"] = outside
        return edge, stats

    def serialize(self, recipe: Recipe, lowered: Any) -> tuple[bytes, list[dict[str, Any]]]:
        with lazy_recompile(), scratch_tempdir():
            buf = bytes(lowered.to_executorch().buffer)
        return buf, delegate_blobs(buf)

    def load(self, recipe: Recipe, lowered: Any, blob: bytes | None) -> Loaded | Deferred | arm.ReferenceModel | arm.CorstoneRun:
        """In this process (pybind) the program loads here, timed as the load stage; another provider
        loads it where it runs, and reports its own load time."""
        assert blob is not None
        target = _arm_target(_options(recipe))
        if target == "tosa":  # no TOSA runtime in ExecuTorch's pybindings: the TOSA reference model runs it
            return arm.reference_model(lowered)
        if target == "ethos-u":  # reached only where the recipe's run_requires hold: an FVP and a runner ELF
            return arm.corstone(lowered, str(_options(recipe).compile_specs.get("target", "ethos-u55-128")))
        mutations = _input_mutation_outputs(lowered.exported_program()) if lowered is not None else 0
        spec = recipe.runtime.provider
        if spec is not None and spec.kind != "pybind":
            return Deferred(blob, spec.build(), mutations, recipe.runtime.threads)
        PybindProvider.set_threads(recipe.runtime.threads)
        return PybindProvider.load(blob, "forward", mutations)

    def run(self, handle: Loaded | Deferred | arm.ReferenceModel | arm.CorstoneRun, inputs: tuple[Any, ...]) -> list[Any]:
        if isinstance(handle, arm.ReferenceModel):
            return arm.run_reference(handle, inputs)
        if isinstance(handle, arm.CorstoneRun):
            return arm.run_corstone(handle, inputs)
        if isinstance(handle, Deferred):
            return self.execute(handle, inputs, 0, 1)[0]
        return PybindProvider.run(handle, inputs)

    def execute(self, handle: Loaded | Deferred | arm.ReferenceModel | arm.CorstoneRun, inputs: tuple[Any, ...], warmup: int,
                repeats: int) -> tuple[list[Any], list[float], dict[str, Any]]:
        if not isinstance(handle, Deferred):  # through self.run: a vendor subclass's own run() is what gets timed
            return super().execute(handle, inputs, warmup, repeats)
        from harness.settings import current

        opts = RunOptions(warmup, repeats, handle.threads, current().provider_timeout_s)
        ex = handle.provider.execute(handle.blob, "pte", inputs, opts)
        outs = list(ex.outputs)[handle.mutations:]
        return outs, ex.latencies_ms, {"load_ms": round(ex.load_ms, 3), "memory_mb": ex.memory_mb}

    def bundle(self, recipe: Recipe, directory: Path, name: str, lowered: Any, blob: bytes | None,
               inputs: tuple[Any, ...], refs: list[Any], outs: list[Any]) -> dict[str, str]:
        assert blob is not None
        mutations = _input_mutation_outputs(lowered.exported_program())
        return write_programs(directory, name, blob, inputs, refs, outs, mutations)


def _tiny_program() -> tuple[Any, Any]:
    import torch

    from harness.cases.contract import Built

    torch.set_num_threads(1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
        example = (torch.randn(2, 8),)
        try:
            ep = torch.export.export(module, example, strict=False)
        except Exception:
            return None, None
    return ep, Built(module, example, example, None)


def write_programs(directory: Path, name: str, blob: bytes, inputs: tuple[Any, ...], refs: list[Any], outs: list[Any],
                   mutations: int) -> dict[str, str]:
    """Write ``<name>.pte`` and, when the case fits the bundled-program format, ``<name>.bpte``: the
    runtime inputs with the eager reference outputs as expected outputs (cast to the program's output
    dtypes), so a device can check the same case. Paths are relative to the run's output directory."""
    import torch

    from harness.results import atomic_write_bytes

    pte = directory / f"{name}.pte"
    atomic_write_bytes(pte, blob)
    artifacts = {"pte": f"{directory.name}/{pte.name}"}
    why = None
    if mutations:
        why = "the program returns mutated inputs"
    elif len(refs) != len(outs) or not all(isinstance(r, torch.Tensor) and isinstance(o, torch.Tensor) and r.shape == o.shape
                                           and not r.is_complex() for r, o in zip(refs, outs, strict=False)):
        why = "the reference outputs do not match the program's outputs one to one"
    elif not all(isinstance(x, (torch.Tensor, int, float, bool)) for x in inputs):
        why = "an input is neither a tensor nor a scalar"
    if why:
        artifacts["bpte_skipped"] = why
        return artifacts
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    expected = [r.detach().to(o.dtype).contiguous() for r, o in zip(refs, outs, strict=True)]
    case = MethodTestCase(inputs=[x.contiguous() if isinstance(x, torch.Tensor) else x for x in inputs],
                          expected_outputs=expected)
    bundled = BundledProgram(None, [MethodTestSuite("forward", [case])], pte_file_path=str(pte))
    bpte = directory / f"{name}.bpte"
    atomic_write_bytes(bpte, serialize_from_bundled_program_to_flatbuffer(bundled))
    artifacts["bpte"] = f"{directory.name}/{bpte.name}"
    return artifacts


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
