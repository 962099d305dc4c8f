"""``bti repro ITEM``: one recorded failure as a standalone Python script that needs torch and executorch alone.

The script holds the module (an operator case as readable source: the op called on its inputs; any other case as its
exported program, ``torch.export.save``'d: in the script, or over ``MAX_PROGRAM_BYTES`` in a ``.pt2`` file written beside
it, which the run's own scripts do not write), the seeded inputs bti generated (``torch.save``'d, byte for byte), the
recipe's export, quantize, lower, serialize, load and run calls written out as plain ExecuTorch API calls, and the
comparison that decided the verdict, with the tolerance and quantization scales the record names. It prints the
versions it runs on beside the ones bti recorded, each stage as it goes, and ends with one line: ``REPRODUCED`` (exit
1: the recorded stage failed again with the same exception type, or the outputs were out of tolerance again),
``DIFFERENT`` (exit 3) or ``NOT REPRODUCED`` (exit 0). A crash kills the script's process as it killed bti's worker
(``faulthandler`` prints the Python stack).

The comparison is the judge's rule in its element form: against eager (float recipes; every failure of bti's fp64
budget per element fails it too, by the triangle inequality; a model failing only its RMSE bound against fp64, the
model noise floor of ``harness.judge``, is not written out) or against the quantized program, within ``qtol`` steps plus
``atol + rtol*|ref|``, with the systematic (gain and offset) check and the SQNR floor against fp32. bti's model-level
rules (dynamo's, top-1 agreement, determinism) are not written out: such an item's script compares element-wise.
"""

from __future__ import annotations

import base64
import inspect
import io
import json
import math
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from harness.cases.contract import REPRO_ON_REQUEST
from harness.errors import UserError, first_line
from harness.judge import REL_FLOOR
from harness.status import Stage

STAGE_OF = {stage.failure.value: stage.value for stage in Stage}  # FAIL_LOWER -> lower: a record's text, both sides
REPRODUCIBLE = (*STAGE_OF, "CRASH")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")  # no line of the results' text may end the comment it is in
MAX_PROGRAM_BYTES = 200 * 10**6  # an exported program carried in a script, weights included (before compression)
MAX_SCRIPT_BYTES = 300 * 10**6  # what the portal copies into a site
SCRIPT_FIRST_LINES = b"#!/usr/bin/env python3\n# A standalone reproduction written by `bti repro`"
PROGRAM_FILE_LINE = b"\nPROGRAM_FILE = "  # a script whose exported program is in a file beside it


class Unsupported(UserError):
    """The item has no standalone form (said in one line)."""


def reproduced_status(rec: Any) -> str | None:
    """The failure a record stands for (its status, or an xfail's expected status) when a script can reproduce it: a
    stage's failure or a crash. None for a pass, a skip, ERROR, TIMEOUT or FLAKY (bti's or the machine's)."""
    status = str(rec.get("status"))
    if status == "XFAIL":
        status = str(_dict(rec.get("xfail")).get("status") or "")
    return status if status in REPRODUCIBLE else None


def script_name(item_id: str) -> str:
    """A file name for an item's script: its id with every character outside ``[A-Za-z0-9._-]`` as ``_``."""
    return _SAFE.sub("_", item_id).strip("_")[:180] + ".py"


@dataclass(frozen=True)
class Found:
    record: dict[str, Any]
    header: dict[str, Any]


def find_record(results: Path, item_id: str) -> Found:
    """The last record of ``item_id`` in a results file (its final attempt), and the run's header."""
    if not results.is_file():
        raise UserError(f"no results file at {results}", hint="run `bti run` first, or pass --results")
    header: dict[str, Any] = {}
    found = None
    with results.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if item_id not in line:
                if '"kind": "header"' in line or '"kind":"header"' in line:
                    header = _json(line) or header
                continue
            rec = _json(line)
            if rec and rec.get("kind") == "header":
                header = rec
            elif rec and rec.get("id") == item_id:
                found = rec
    if found is None:
        raise UserError(f"{item_id} is not in {results}", hint="item ids look like op.add.basic[float32,static]@xnnpack")
    return Found(found, header)


def _json(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def write(results: Path, item_id: str, out: Path | None = None, suites: tuple[str, ...] = (),
          passing: bool = False) -> Path:
    """Write ``item_id``'s script (default: ``repro/<item>.py`` beside the results file) and return its path. ``suites``:
    suite files (``-s FILE.yaml`` of the run) to look the case up in, besides the built-in suites. ``passing``: a passing
    item is written too, as a control (its script ends ``PASSED AS RECORDED``)."""
    found = find_record(results, item_id)
    return _write(found.record, found.header, out if out is not None else results.parent / "repro" / script_name(item_id),
                  suites, passing=passing)


def _write(rec: dict[str, Any], header: dict[str, Any], path: Path, suites: tuple[str, ...],
           beside: bool = True, passing: bool = False) -> Path:
    """Write the script to ``path``; a program too large to carry in it goes to ``path.with_suffix(".pt2")`` beside it
    when ``beside`` (on request, ``bti repro``), else the item has no script (the run's own scripts)."""
    from harness.results import atomic_write_bytes, atomic_write_text

    if path.suffix == ".pt2":
        raise UserError(f"{path}: a script's name, not a program's (.pt2 is where a large program goes beside it)")
    text, program = render(rec, header, suites, program_file=path.with_suffix(".pt2") if beside else None,
                           passing=passing)
    try:  # the program first, once the script is rendered: a script that names it never lacks it
        path.parent.mkdir(parents=True, exist_ok=True)
        if program is not None:
            atomic_write_bytes(path.with_suffix(".pt2"), program)
        atomic_write_text(path, text)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def render(rec: dict[str, Any], header: dict[str, Any], suites: tuple[str, ...] = (),
           program_file: Path | None = None, passing: bool = False) -> tuple[str, bytes | None]:
    """The script for one failing record (with ``passing``, a passing one too: a control), and the bytes of its
    exported program where the script loads it from ``program_file`` (one over ``MAX_PROGRAM_BYTES``; without
    ``program_file`` such an item is ``Unsupported``), for the caller to write there."""
    from harness.status import Status

    status = str(rec.get("status"))
    try:
        st = Status(status)
    except ValueError:
        raise UserError(f"{rec.get('id')}: unknown status {status!r}") from None
    if reproduced_status(rec) is None and not (passing and st.is_pass):
        what = "there is no failure to reproduce (--passing writes it as a control)" if st.is_pass else "not a failure of a stage (ERROR, TIMEOUT, FLAKY: bti's or the machine's)"
        raise Unsupported(f"{rec.get('id')} is {status}: {what}")
    recipe, case, axes, seed = _item(rec, suites)
    built = _build(case, axes, seed)
    module_src, exported, program = _module_source(case, built, seed, axes.dtype, program_file)
    text = Template(_SCRIPT).substitute(
        header=_header(rec, header, recipe),
        expected=repr(_expected(rec)),
        tolerance=repr(_tolerance(rec) if rec.get("tolerance") else _unjudged_tolerance(recipe, case, axes, built)),
        scales=repr(_scales(rec)),
        ref_dtype=repr(built.ref_dtype),
        quantized=repr(bool(recipe.quantized)),
        threads=repr(int(recipe.runtime.threads or 0)),
        seed=seed,
        module=module_src,
        export=_export_code(exported),
        inputs=_blob({"example": built.example, "run": built.run}),
        dims=_dims_code(built),
        calibrate="EXAMPLE, RUN" if built.run is not built.example else "EXAMPLE,",
        recipe_code=_recipe_code(recipe),
        rel_floor=repr(REL_FLOOR),
        qd8=_qd8_code() if recipe.quantized else "",
    )
    return text, program


def _find_case(rec: dict[str, Any], suites: tuple[str, ...]) -> list[Any]:
    """The record's case: from its built-in suite by name, else from the suite files the caller names. A suite file is
    never taken from the results (untrusted: a suite's ``op:`` names code that building the case runs)."""
    from harness.suites import load_suites, sources

    name = str(rec.get("suite"))
    for source in ([name] if name in sources() else []) + list(suites):
        cases = [c for c in load_suites([source], check=False) if c.id == rec.get("case")]
        if cases:
            return cases
    raise UserError(f"case {rec.get('case')} is in none of the suites given ({', '.join([name, *suites])})",
                    hint="a suite from a file: pass it as `bti repro ITEM --suite FILE.yaml`")


def _item(rec: dict[str, Any], suites: tuple[str, ...]) -> tuple[Any, Any, Any, int]:
    """The recipe, case, axes and seed of a record, rebuilt from bti's registries."""
    from harness.backends import get_backend
    from harness.backends.executorch import ExecuTorchBackend
    from harness.cases.case import Axes, seed_for
    from harness.recipes import load_recipe

    recipe = load_recipe(str(rec.get("recipe")))
    backend = get_backend(recipe.backend)
    if type(backend) is not ExecuTorchBackend:  # a plugin's subclass lowers and runs in its own code
        raise Unsupported(f"recipe {recipe.name} runs on backend {recipe.backend}: bti repro writes ExecuTorch's own flows")
    axes_raw = _dict(rec.get("axes"))
    axes = Axes(str(axes_raw.get("dtype") or "float32"), str(axes_raw.get("shape") or "static"))
    cases = _find_case(rec, suites)
    seed = seed_for(f"{cases[0].id}{axes}")
    if rec.get("seed") not in (None, seed):
        raise UserError(f"{rec.get('id')}: the record's seed {rec.get('seed')} is not this bti's ({seed}): a different bti wrote it")
    return recipe, cases[0], axes, seed


def _build(case: Any, axes: Any, seed: int) -> Any:
    from harness.suites import build_case

    try:
        built = build_case(case, axes, seed)
    except Exception as exc:
        raise Unsupported(f"{case.id}: building the case failed ({type(exc).__name__}: {first_line(str(exc))[:200]}): "
                          "the failure is the case's own, before any torch.export") from exc
    if built.pair_b is not None:
        raise Unsupported(f"{case.id} is a pair case (two modules, one judged against the other): not written out standalone")
    return built


# -- the module ------------------------------------------------------------------------------------------------------
def _module_source(case: Any, built: Any, seed: int, dtype: str,
                   program_file: Path | None = None) -> tuple[str, bool, bytes | None]:
    """(the module's code, whether it is an exported program, the program's bytes where they go beside the script): an
    operator case's source where every part of its call can be written as Python; else its exported program, in the
    script, or in ``program_file`` beside it when it is too large to carry (a real-size model's weights)."""
    src = _op_source(built.module, seed, dtype)
    if src is not None:
        return src, False, None
    import torch

    try:
        ep = torch.export.export(built.module, _clone(built.example), dynamic_shapes=built.dynamic_shapes, strict=False)
        buf = io.BytesIO()
        torch.export.save(ep, buf)
    except Exception as exc:
        raise Unsupported(f"{case.id}: its module ({type(built.module).__name__}) is written out as its exported program, and "
                          f"torch.export fails on it ({type(exc).__name__}: {first_line(str(exc))[:200]}): reproduce "
                          "with `bti run`") from exc
    code = "\n".join("#   " + line for line in ep.graph_module.code.strip().splitlines()[:80])
    data = buf.getvalue()  # one copy: a real-size model's is a gigabyte
    del ep, buf
    size = len(data)
    if size > MAX_PROGRAM_BYTES and program_file is None:
        raise Unsupported(f"{case.id}: its exported program is {size / 1e6:.0f} MB with its weights, more than "
                          f"{MAX_PROGRAM_BYTES // 10**6} MB to carry in a script: `bti repro` writes it beside its script")
    _check_loads(case, data)
    if size <= MAX_PROGRAM_BYTES:
        return (f"# the module as bti exported it (torch.export.save), with its weights; its graph:\n{code}\n"
                f"PROGRAM = {_b64(data)}\n\n\n"
                "def module():\n    return torch.export.load(io.BytesIO(zlib.decompress(base64.b64decode(PROGRAM)))).module()\n"), True, None
    assert program_file is not None  # the larger program without a file beside it is refused above
    name = program_file.name
    return (f"# the module as bti exported it (torch.export.save), with its weights: {size / 1e6:.0f} MB, too large to carry\n"
            f"# here, so it is in {_CONTROL.sub(' ', name)} beside this script (written with it); its graph:\n{code}\n"
            f"PROGRAM_FILE = {name!r}\n\n\n"
            "def module():\n"
            "    import pathlib\n"
            "    path = pathlib.Path(__file__).resolve().with_name(PROGRAM_FILE)\n"
            "    if not path.is_file():\n"
            "        print(f\"{path.name}: not found beside this script: `bti repro` writes the exported program there \"\n"
            "              \"with the script; copy the two together\", file=sys.stderr)\n"
            "        sys.exit(2)\n"
            "    return torch.export.load(path).module()\n"), True, data


def _check_loads(case: Any, data: bytes) -> None:
    """The script starts from ``torch.export.load`` of these bytes: a program torch cannot read back (torch 2.13 and
    2.14 save an empty ``with torch.no_grad():`` block as a ``wrap_with_set_grad_enabled`` node they then reject on
    load, as in TorchBench's Reformer) would make a script that fails at export, not where bti's run failed. Costs a
    second copy of the weights for the load's duration."""
    import torch

    try:
        torch.export.load(io.BytesIO(data))
    except MemoryError:
        raise
    except Exception as exc:
        raise Unsupported(f"{case.id}: its module is written out as its exported program, and torch.export.load cannot "
                          f"read back what torch.export.save wrote ({type(exc).__name__}: "
                          f"{first_line(str(exc))[:200].rstrip('.')}): reproduce with `bti run`") from exc


def _op_source(module: Any, seed: int, dtype: str) -> str | None:
    """An operator case (``OpModule``/``ModuleOp``) as a module class, or None when some part is not plain Python."""
    from harness.builders import build

    if type(module) not in (build.OpModule, build.ModuleOp):
        return None
    inner = module.inner if isinstance(module, build.ModuleOp) else None
    fn = _callable_code(type(inner) if inner is not None else module.fn)
    if fn is None:
        return None
    slots = iter(range(1000))
    try:
        args = [_arg_code(a, slots) for a in module.args] + [f"{k}={_arg_code(v, slots)}" for k, v in module.kwargs.items()]
    except ValueError:
        return None
    plain = all(lay not in ("transposed", "permuted", "strided", "complex") for lay in module.layouts)
    helpers = "" if plain else "".join(inspect.getsource(f) + "\n\n" for f in (build._perm, build._inverse, build._apply_layout))
    init = ""
    if inner is not None:
        init_kwargs = module.init
        to = f".to(torch.{dtype})" if dtype in ("float16", "bfloat16", "float32", "float64") else ""  # as bti builds it
        init = (f"        torch.manual_seed({seed})  # bti seeds the module's weights with the item's seed\n"
                f"        self.inner = {fn}(**{init_kwargs!r}).eval(){to}\n")
        fn = "self.inner"
    helpers = helpers.replace("def _", "def ").replace("_perm(", "perm(").replace("_inverse(", "inverse(")
    layouts = "" if plain else f"LAYOUTS = {module.layouts!r}\n\n\n"
    views = "t = tensors" if plain else "t = [apply_layout(x, layout) for x, layout in zip(tensors, LAYOUTS)]"
    return (f"{helpers}{layouts}class Repro(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n{init}\n"
            f"    def forward(self, *tensors):\n        {views}\n        return {fn}({', '.join(args)})\n\n\n"
            "def module():\n    return Repro().eval()\n")


def _callable_code(fn: Any) -> str | None:
    """A Python expression naming ``fn`` (``torch.ops.aten.add.Tensor``, ``torch.nn.functional.relu``,
    ``torch.nn.Conv2d``) that resolves back to the very object, or None."""
    import importlib

    import torch

    if isinstance(fn, torch._ops.OpOverload):
        ns, name = fn._schema.name.split("::")
        return f"torch.ops.{ns}.{name}.{fn._overloadname}"
    if isinstance(fn, torch._ops.OpOverloadPacket):
        ns, name = fn._qualified_op_name.split("::")
        return f"torch.ops.{ns}.{name}"
    for mod in (getattr(fn, "__module__", None), "torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft"):
        qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
        if not mod or not qual or not str(mod).startswith("torch"):
            continue
        try:
            obj: Any = importlib.import_module(str(mod))
            for part in str(qual).split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            continue
        if obj is fn:
            return f"{mod}.{qual}"
    return None


def _arg_code(value: Any, slots: Any) -> str:
    """One argument of the op's call as code: an input (``t[i]``), a list, a dtype or a Python constant."""
    import torch

    from harness.builders.build import _SLOT

    if value is _SLOT:
        return f"t[{next(slots)}]"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_arg_code(v, slots) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    raise ValueError(f"no code for {type(value).__name__}")


def _export_code(exported: bool) -> str:
    if exported:
        return "torch.export.export(module(), EXAMPLE, dynamic_shapes=FLAT_DYNAMIC_SHAPES, strict=False)"
    return "torch.export.export(module(), EXAMPLE, dynamic_shapes=DYNAMIC_SHAPES, strict=False)"


def _dims_code(built: Any) -> str:
    dims: dict[str, Any] = {}
    shapes = _shape_code(built.dynamic_shapes, dims)
    flat = _shape_code(built.flat_dynamic_shapes, dims)
    lines = [f"{name} = torch.export.Dim({name!r}, min={d.min}, max={d.max})" for name, d in dims.items()]
    return "\n".join([*lines, f"DYNAMIC_SHAPES = {shapes}", f"FLAT_DYNAMIC_SHAPES = {flat}"])


def _shape_code(spec: Any, dims: dict[str, Any]) -> str:
    import torch

    if spec is None or isinstance(spec, (int, str)):
        return repr(spec)
    if isinstance(spec, dict):
        return "{" + ", ".join(f"{k!r}: {_shape_code(v, dims)}" for k, v in spec.items()) + "}"
    if isinstance(spec, (list, tuple)):
        inner = ", ".join(_shape_code(v, dims) for v in spec)
        return f"[{inner}]" if isinstance(spec, list) else f"({inner}{',' if len(spec) == 1 else ''})"
    root = getattr(spec, "root", None)
    if root is not None and hasattr(spec, "fn"):  # a derived dim: a * root + b
        dims.setdefault(root.__name__, root)
        b = int(spec.fn(0))
        a = int(spec.fn(1)) - b
        return f"{a} * {root.__name__}" + (f" + {b}" if b else "")
    if isinstance(spec, torch.export.Dim) or type(spec).__name__ == "Dim":
        dims.setdefault(spec.__name__, spec)
        return str(spec.__name__)
    raise Unsupported(f"a dynamic shape spec of type {type(spec).__name__} cannot be written out")


def _clone(values: tuple[Any, ...]) -> tuple[Any, ...]:
    import torch

    return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in values)


def _blob(obj: Any) -> str:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return _b64(buf.getvalue())


def _b64(data: bytes) -> str:
    text = base64.b64encode(zlib.compress(data, 9)).decode()
    return "(\n" + "\n".join(f'    "{text[i:i + 100]}"' for i in range(0, len(text), 100)) + "\n)"


# -- the recipe ------------------------------------------------------------------------------------------------------
def _recipe_code(recipe: Any) -> str:
    """The recipe's quantizer, partitioners, edge config and runtime as code."""
    from harness.backends.arm import PARTITIONERS as ARM

    opts = recipe.options
    specs = dict(opts.compile_specs)
    parts = [_partitioner_code(p, specs) for p in opts.partitioners]
    target = next((p for p in opts.partitioners if p in ARM), None)
    q = opts.quantize
    lines = ["def quantizer():"]
    if q is None:
        lines.append("    return None  # the recipe does not quantize")
    elif q.quantizer == "xnnpack":
        lines += ["    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config",
                  "", f"    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel={q.per_channel}, is_dynamic={q.dynamic}))"]
    elif q.quantizer == "openvino":
        lines += ["    from executorch.backends.openvino.quantizer import OpenVINOQuantizer", "", "    return OpenVINOQuantizer()"]
    elif q.quantizer == "arm" and target is not None:
        imp, spec = _arm_spec_code(target, specs)
        lines += ["    from executorch.backends.arm.quantizer import get_symmetric_quantization_config",
                  "    from executorch.backends.arm.util._factory import create_quantizer", f"    {imp}", "",
                  f"    q = create_quantizer({spec})",
                  f"    return q.set_global(get_symmetric_quantization_config(is_per_channel={q.per_channel}, is_dynamic={q.dynamic}))"]
    else:
        raise Unsupported(f"recipe {recipe.name}: quantizer {q.quantizer} is a plugin's: bti repro writes ExecuTorch's own")
    imports = list(dict.fromkeys(imp for p in parts for imp in p[0]))
    lines += ["", "", "def partitioners():", *(f"    {imp}" for imp in imports), *([""] if imports else []), f"    return [{', '.join(p[1] for p in parts)}]",
              "", "", f"FOLD_QUANTIZE = {q.fold_quantize if q else True}",
              f"PER_ROW_REFERENCE = {bool(q and q.reference == 'per-row')}  # the reference's dynamic activations per row, as XNNPACK's qd8",
              f"CHECK_IR_VALIDITY = {opts.check_ir_validity}",
              f"RUNS_ON = {('tosa-reference-model' if target == 'tosa' else 'corstone-fvp' if target == 'ethos-u' else 'pybind')!r}"]
    return "\n".join(lines)


def _qd8_code() -> str:
    """harness/qd8.py's functions, as the script's own (a quantized recipe's script: its reference may need them)."""
    from harness import qd8

    return "".join(inspect.getsource(f) + "\n\n" for f in (qd8.qd8_fake_quantize, qd8.is_conv, qd8.feeds_into_conv, qd8.pointwise,
                                                             qd8.per_row_program))


def _partitioner_code(name: str, specs: dict[str, Any]) -> tuple[list[str], str]:
    """(imports, expression) of one partitioner, as ``harness.backends.executorch`` builds it."""
    if name == "xnnpack":
        return ["from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner"], "XnnpackPartitioner()"
    if name == "vulkan":
        return ["from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner"], "VulkanPartitioner()"
    if name == "openvino":
        return (["from executorch.backends.openvino.partitioner import OpenvinoPartitioner",
                 "from executorch.exir.backend.compile_spec_schema import CompileSpec"],
                f"OpenvinoPartitioner([CompileSpec('device', {str(specs.get('device', 'CPU')).encode()!r})])")
    if name == "qnn":
        return ["from executorch.backends.qualcomm.partition.qnn_partitioner import QnnPartitioner"], f"QnnPartitioner({specs!r})"
    if name == "coreml":
        kwargs = []
        if "minimum_deployment_target" in specs:
            kwargs.append(f"minimum_deployment_target=ct.target.{specs['minimum_deployment_target']}")
        if "compute_precision" in specs:
            kwargs.append(f"compute_precision=ct.precision.{str(specs['compute_precision']).upper()}")
        return (["import coremltools as ct", "from executorch.backends.apple.coreml.compiler import CoreMLBackend",
                 "from executorch.backends.apple.coreml.partition import CoreMLPartitioner"],
                f"CoreMLPartitioner(compile_specs=CoreMLBackend.generate_compile_specs({', '.join(kwargs)}))")
    from harness.backends.arm import PARTITIONERS as ARM

    if name in ARM:
        imp, spec = _arm_spec_code(name, specs)
        return ["from executorch.backends.arm.util._factory import create_partitioner", imp], f"create_partitioner({spec})"
    raise Unsupported(f"partitioner {name} is a plugin's: bti repro writes ExecuTorch's own")


def _arm_spec_code(name: str, specs: dict[str, Any]) -> tuple[str, str]:
    """(import, expression) of an Arm partitioner's compile spec, as ``harness.backends.arm.compile_spec`` builds it."""
    if name == "tosa":
        return ("from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec",
                f"TosaCompileSpec({str(specs.get('tosa_spec', 'TOSA-1.0+FP'))!r})")
    if name == "ethos-u":
        return ("from executorch.backends.arm.ethosu import EthosUCompileSpec",
                f"EthosUCompileSpec({str(specs.get('target', 'ethos-u55-128'))!r}, system_config={specs.get('system_config')!r}, "
                f"memory_mode={specs.get('memory_mode')!r})")
    tosa = repr(str(specs["tosa_spec"])) if "tosa_spec" in specs else "None"
    return "from executorch.backends.arm.vgf import VgfCompileSpec", f"VgfCompileSpec({tosa})"


# -- what was recorded -----------------------------------------------------------------------------------------------
def _expected(rec: dict[str, Any]) -> dict[str, Any]:
    """What the script expects: a failure's status and stage, or for a control (a passing item) its status alone."""
    status = reproduced_status(rec) or str(rec.get("status"))
    err = _dict(rec.get("error"))
    etype = str(err.get("type") or "")
    died_in = str(rec.get("died_in") or "")  # a crash's stage, as the worker told it (one of the stages, or none)
    stage = STAGE_OF.get(status, "") or (died_in if status == "CRASH" and died_in in STAGE_OF.values() else "")
    return {"status": status, "stage": stage, "type": etype.rsplit(".", 1)[-1],
            "detail": first_line(str(rec.get("detail") or ""))[:300]}


def _tolerance(rec: dict[str, Any]) -> dict[str, Any]:
    tol = _dict(rec.get("tolerance"))
    keep = ("atol", "rtol", "qtol", "sqnr_db", "cosine", "shape_only")
    out: dict[str, Any] = {k: tol[k] for k in keep if k in tol and isinstance(tol[k], (int, float, bool)) and math.isfinite(tol[k])}
    if tol.get("rule") == "model":  # judge.MODEL_QUANTIZED: a model's outputs under a quantized recipe
        out["rule"] = "model"
    return out


def _unjudged_tolerance(recipe: Any, case: Any, axes: Any, built: Any) -> dict[str, Any]:
    """What bti's judge would hold the outputs to, for a record that failed before the comparison (it names none): a
    script that gets further on a version where the failure is fixed is judged as bti would judge it (a model's
    bound under a quantized recipe, not the operators' defaults)."""
    from types import SimpleNamespace

    from harness.cases.case import Item
    from harness.judge import quantized_bound, tolerance

    item = Item(case, recipe.name, axes)
    group = SimpleNamespace(case_tolerance=dict(case.spec.get("tolerance") or {}), built=built)
    tol = tolerance(item, recipe, group)  # group: the two fields of a Group that tolerance() reads
    if recipe.quantized and not tol.get("shape_only"):
        tol = quantized_bound(item, tol)
    return _tolerance({"tolerance": tol})


def _scales(rec: dict[str, Any]) -> list[float | None]:
    out = []
    outputs = rec.get("outputs")
    for o in outputs if isinstance(outputs, list) else []:
        q = o.get("quantized") if isinstance(o, dict) else None
        s = q.get("scale") if isinstance(q, dict) else None
        out.append(float(s) if isinstance(s, (int, float)) and math.isfinite(s) and s > 0 else None)
    return out


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _header(rec: dict[str, Any], header: dict[str, Any], recipe: Any) -> str:
    pk = _dict(header.get("packages")) or _dict(header.get("versions"))
    versions = ", ".join(f"{p} {pk[p]}" for p in ("torch", "executorch", "torchao") if pk.get(p))
    lines = [f"item:     {rec.get('id')}", f"recipe:   {recipe.name}: {recipe.description}",
             f"recorded: {rec.get('status')}: {first_line(str(rec.get('detail') or ''))[:400]}",
             f"on:       {versions or 'versions not recorded'} (bti run {header.get('run_id') or rec.get('run_id') or '?'})"]
    runtime = str(rec.get("runtime") or "")
    if runtime and runtime not in ("pybind", "tosa-reference-model", "corstone-fvp"):
        lines.append(f"runtime:  bti ran it on {runtime}; this script runs it in this process (ExecuTorch's pybindings)")
    if rec.get("xfail"):
        lines.append(f"expected: {first_line(str(_dict(rec.get('xfail')).get('reason') or ''))[:400]}")
    # results are untrusted text: no line of theirs may end the comment block
    return "\n".join("# " + _CONTROL.sub(" ", line) for line in lines)


_SCRIPT = '''#!/usr/bin/env python3
# A standalone reproduction written by `bti repro`: it needs torch and executorch (and the recipe's own packages), not bti.
#
$header
#
# Run: python THIS_FILE.py. It prints the versions, each stage as it runs, and one last line:
#   REPRODUCED (exit 1)      the recorded stage failed again with the same exception type, or the outputs disagree again;
#   DIFFERENT (exit 3)       another stage or exception failed (for a control: it did not pass as recorded);
#   NOT REPRODUCED (exit 0)  every stage passed and the outputs are within tolerance (for a crash: the stage it was
#                            recorded in passed; the later ones are not run);
#   PASSED AS RECORDED (exit 0) the same, for an item bti recorded as passing (a control: `bti repro --passing`);
#   NOT RUN (exit 4)         the stages up to serialize passed and the program runs on a device not written out here.
# A crash kills this process as it killed bti's worker; faulthandler prints where. Where bti recorded the stage the
# worker died in (EXPECTED["stage"]), that stage passing here is NOT REPRODUCED (exit 0).
from __future__ import annotations

import base64
import copy
import faulthandler
import io
import math
import platform
import sys
import traceback
import zlib

import torch

faulthandler.enable()
torch.set_num_threads(1)  # as bti's workers (--threads 1)
EXPECTED = $expected
TOLERANCE = $tolerance  # the record's (bti's for this item, where it failed before comparing): atol + rtol*|ref| (+ qtol steps)
SCALES = $scales  # each output's quantization step, as bti measured it on the quantized program
REF_DTYPE = $ref_dtype  # the eager reference is computed in this dtype (an upcast reference), or None
QUANTIZED = $quantized
THREADS = $threads
REL_FLOOR = $rel_floor  # the magnitude check's floor per dtype (dynamo's accuracy tolerances)


# -- the module ----------------------------------------------------------------------------------------------------
$module

# -- the inputs bti generated (seed $seed), and the dynamic shapes ---------------------------------------------------
INPUTS = torch.load(io.BytesIO(zlib.decompress(base64.b64decode($inputs))))
EXAMPLE, RUN = tuple(INPUTS["example"]), tuple(INPUTS["run"])
$dims


# -- the recipe ----------------------------------------------------------------------------------------------------
$recipe_code


def clone(values):
    return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in values)


def leaves(out):
    return [x for x in torch.utils._pytree.tree_leaves(out) if x is not None]


def export():
    return $export


AS_WRITTEN = []  # the program's outputs as written (per tensor), where a per-row reference is set aside
SENSITIVITY = {}  # per program ("reference", "as_written"): each output's program_self_sqnr_db, drawn at quantize


def quantize(ep):
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    import executorch.kernels.quantized  # noqa: F401  (the quantized_decomposed out variants the runtime needs)

    # without the input guards' call_module, which the Arm quantizer's passes cannot run (RewriteInplaceArithmeticPass:
    # "call_module is not supported") on a graph with an in-place op; torch leaves it out by itself only when a calling
    # file's path contains "executorch" or "torchao", which this script's need not
    prepared = prepare_pt2e(ep.module(check_guards=False), quantizer())
    with torch.no_grad():
        for inputs in ($calibrate):
            prepared(*clone(inputs))
    converted = convert_pt2e(prepared, fold_quantize=FOLD_QUANTIZE)
    reference = copy.deepcopy(converted)
    if PER_ROW_REFERENCE:  # the recipe's quantize.reference: per-row (bti's qd8 functions, copied below)
        written = copy.deepcopy(converted)
        with torch.no_grad():
            AS_WRITTEN[:] = leaves(written(*clone(RUN)))
        measure("as_written", written, AS_WRITTEN)
        del written
        per_row_program(reference)
    with torch.no_grad():
        program_outputs = leaves(reference(*clone(RUN)))  # the quantized reference
    measure("reference", reference, program_outputs)
    return torch.export.export(converted, EXAMPLE, dynamic_shapes=FLAT_DYNAMIC_SHAPES, strict=False), program_outputs


$qd8
def lower(ep):
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    parts = partitioners()
    return to_edge_transform_and_lower(ep, partitioner=parts or None, compile_config=EdgeCompileConfig(_check_ir_validity=CHECK_IR_VALIDITY))


def serialize(edge):
    return bytes(edge.to_executorch().buffer)


def mutated_inputs(edge):
    """How many leading outputs are inputs written in place: the runtime returns them first, eager does not."""
    from torch.export.graph_signature import OutputKind

    return sum(1 for s in edge.exported_program().graph_signature.output_specs if s.kind == OutputKind.USER_INPUT_MUTATION)


KEEP = []  # the Program and its bytes outlive the Method: load_program(buf).load_method(...) frees them under it


def load(edge, pte):
    if RUNS_ON == "tosa-reference-model":  # as ExecuTorch's arm_tosa flows run it
        return edge.exported_program().module()
    from executorch.runtime import Runtime

    if THREADS:
        from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool

        _unsafe_reset_threadpool(THREADS)
    program = Runtime.get().load_program(pte)
    KEEP.append((pte, program))
    return program.load_method("forward")


def run(handle, mutations):
    if RUNS_ON == "tosa-reference-model":
        from executorch.backends.arm.test.runner_utils import TosaReferenceModelDispatch

        class Dispatch(TosaReferenceModelDispatch):
            def __exit__(self, *exc):  # a program left whole on the CPU still runs
                torch.overrides.TorchFunctionMode.__exit__(self, *exc)

        with torch.no_grad(), Dispatch():
            return leaves(handle(*clone(RUN)))
    return list(handle.execute(list(clone(RUN))))[mutations:]


def reference():
    m = module()
    with torch.no_grad():
        if REF_DTYPE:
            up = getattr(torch, REF_DTYPE)
            return leaves(copy.deepcopy(m).to(up)(*[x.to(up) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in clone(RUN)]))
        return leaves(m(*clone(RUN)))


def sqnr_db(out, ref):
    noise, signal = float(((out - ref) ** 2).sum()), float((ref ** 2).sum())
    if noise == 0:
        return float("inf")
    return 10.0 * math.log10(signal / noise) if signal > 0 and math.isfinite(noise) else float("-inf")


def check(i, out, ref, scale=None, fp32=None):
    """One output, as bti judged it (see harness/judge.py): None, or what is wrong."""
    if not isinstance(out, torch.Tensor) or not isinstance(ref, torch.Tensor):
        return None if out == ref else f"output[{i}]: {out!r} != {ref!r}"
    if out.shape != ref.shape:
        return f"output[{i}]: shape {list(out.shape)} != the reference's {list(ref.shape)}"
    if TOLERANCE.get("shape_only"):
        return None
    if not REF_DTYPE and out.dtype != ref.dtype:
        return f"output[{i}]: dtype {out.dtype} != the reference's {ref.dtype}"
    problem = values(i, out, ref, scale)
    if problem is None and fp32 is not None and isinstance(fp32, torch.Tensor) and fp32.shape == ref.shape:
        floor = TOLERANCE.get("sqnr_db")  # the quantizer's part: the quantized program against fp32
        if floor is not None and sqnr_db(ref.double(), fp32.double()) < floor:
            return f"quantizer: output[{i}]: the quantized program's SQNR against fp32 is below {floor:g} dB"
    return problem


def values(i, out, ref, scale):
    if not (ref.is_floating_point() or ref.is_complex()):
        bad = out != ref
        return f"output[{i}]: {int(bad.sum())}/{out.numel()} elements differ" if bool(bad.any()) else None
    o, r = out.double(), ref.double()
    default = 1e-3 if QUANTIZED else 0.0
    atol, rtol, qtol = TOLERANCE.get("atol", default), TOLERANCE.get("rtol", default), TOLERANCE.get("qtol", 1.0)
    budget = atol + rtol * r.abs() + (qtol * scale if scale else 0.0)
    bad = ~(((o - r).abs() <= budget) | (o == r) | (o.isnan() & r.isnan()))
    if bool(bad.any()):
        err = float((o - r).abs().nan_to_num(float("inf")).max())
        return f"output[{i}]: max_abs {err:.4g} exceeds the budget ({int(bad.sum())}/{o.numel()} elements)"
    keep = o.isfinite() & r.isfinite()
    return systematic(i, o[keep], r[keep], scale, rtol, str(ref.dtype).replace("torch.", "")) or floors(i, o[keep], r[keep])


def systematic(i, o, r, scale, rtol, dtype):
    """The error's systematic part (harness/judge.py systematic): a wrong scale or zero point, or a scaled output."""
    if o.numel() == 0 or float((r * r).sum()) == 0:
        return None
    model = TOLERANCE.get("rule") == "model"  # a model's outputs: the float checks, with the estimates' sampling error
    if QUANTIZED and scale and not model:
        if float(r.max() - r.min()) > 0:
            gain, offset = torch.linalg.lstsq(torch.stack([r, torch.ones_like(r)], 1), o[:, None]).solution.flatten().tolist()
        else:  # a constant reference: an offset alone
            gain, offset = 1.0, float((o - r).mean())
        steps = float(((gain - 1.0) * r + offset).abs().max()) / scale
        if o.numel() >= 8 and steps > 0.5:
            return f"output[{i}]: a systematic error of {steps:.3g} step(s) (gain {gain:.4g}, offset {offset / scale:.3g} steps)"
        return None
    gain, offset, rms = float((o * r).sum() / (r * r).sum()), float((o - r).mean()), float((r * r).mean().sqrt())
    room, allowance = 0.01, 0.01 * rms
    if model:
        n = o.numel() ** 0.5
        room += 3 * float((o - gain * r).std(unbiased=False)) / (rms * n)
        allowance += 3 * float((o - r - offset).std(unbiased=False)) / n
    if QUANTIZED and o.numel() >= 8 and (abs(gain - 1.0) > room or abs(offset) > allowance):
        return f"output[{i}]: off in scale or magnitude (gain {gain:.4g}, offset {offset:.3g})"
    budget = max(rtol, REL_FLOOR.get(dtype, 1e-4))
    if not QUANTIZED and abs(gain - 1.0) > budget:  # against eager; bti widens it by eager's own gain error against fp64
        return f"output[{i}]: the output is {gain:.4g} x the reference (least squares), off by more than {budget:.3g}"
    return None


def floors(i, o, r):
    """The recipe's SQNR and cosine floors, where it sets them (float recipes: against eager)."""
    if QUANTIZED or o.numel() == 0:
        return None
    floor, cos = TOLERANCE.get("sqnr_db"), TOLERANCE.get("cosine")
    if floor is not None and sqnr_db(o, r) < floor:
        return f"output[{i}]: SQNR {sqnr_db(o, r):.2f} dB < floor {floor:g} dB"
    if cos is not None and float(torch.nn.functional.cosine_similarity(o.flatten(), r.flatten(), dim=0)) < cos:
        return f"output[{i}]: cosine below the floor {cos:g}"
    return None


def compare(outs, eager, program_outputs):
    refs = program_outputs if QUANTIZED and program_outputs is not None else eager
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, the reference has {len(refs)}"
    problems = []
    for i, (o, r) in enumerate(zip(outs, refs)):
        if QUANTIZED and isinstance(o, torch.Tensor) and isinstance(eager[i], torch.Tensor) and o.shape != eager[i].shape:
            problems.append(f"output[{i}]: shape {list(o.shape)} != the reference's {list(eager[i].shape)}")
            continue
        scale = SCALES[i] if i < len(SCALES) else None
        problem = check(i, o, r, scale, eager[i] if QUANTIZED else None)
        if problem:
            problems.append(problem)
    return "; ".join(problems)


SENSITIVITY_DRAWS = 3


def moved(draw):
    """RUN with each floating-point tensor times 1 + eps N(0, 1), eps its dtype's step, from seed ``draw``, as bti
    draws them (harness/judge.py perturbed_inputs); None where no input is floating point."""
    if not any(isinstance(v, torch.Tensor) and v.is_floating_point() for v in RUN):
        return None
    gen = torch.Generator().manual_seed(draw)

    def move(v):
        if not (isinstance(v, torch.Tensor) and v.is_floating_point()):
            return v.clone() if isinstance(v, torch.Tensor) else v
        noise = torch.randn(v.shape, generator=gen, dtype=torch.float64)
        return (v.double() * (1.0 + torch.finfo(v.dtype).eps * noise)).to(v.dtype)
    return tuple(move(v) for v in RUN)


def sensitivity(program, base):
    """bti's program_self_sqnr_db: per floating-point output, the lowest SQNR of the program's outputs on moved inputs
    against its own (None where not measured)."""
    lowest = [float("inf") if isinstance(b, torch.Tensor) and b.is_floating_point() else None for b in base]
    for draw in range(SENSITIVITY_DRAWS):
        inputs = moved(draw)
        if inputs is None:
            return [None] * len(base)
        with torch.no_grad():
            outs = leaves(program(*inputs))
        if len(outs) != len(base):
            return [None] * len(base)
        for i, b in enumerate(base):
            if lowest[i] is None or outs[i].shape != b.shape:
                lowest[i] = None
                continue
            o, r = outs[i].double().flatten(), b.double().flatten()
            keep = ~((o.isnan() & r.isnan()) | (r.isinf() & (o == r)))
            lowest[i] = min(lowest[i], sqnr_db(o[keep], r[keep]))  # a non-finite difference: -inf, as bti
    return lowest


def measure(name, program, base):
    """The program's sensitivity, where bti measures it (a model's outputs under a quantized recipe, where the program
    runs): the numbers only, so no copy of the program outlives the quantize stage. Never the verdict."""
    if not (TOLERANCE.get("rule") == "model" and RUNS_ON != "corstone-fvp"):  # quantize runs only when QUANTIZED
        return
    try:
        SENSITIVITY[name] = sensitivity(program, base)
    except Exception as exc:
        SENSITIVITY[name] = f"{type(exc).__name__}: {exc}"


def self_sensitivity(program_outputs, problem):
    """After a failing comparison: how far the program bti judged against moves by itself, for each output whose own
    bound failed (as bti adds it to those problems, not to the quantizer's floor)."""
    lowest = SENSITIVITY.get("as_written" if program_outputs is AS_WRITTEN else "reference")
    if isinstance(lowest, str):
        print(f"[compare] the program's sensitivity is not measured: {lowest}")
    for i, db in enumerate(lowest if isinstance(lowest, list) else []):
        if db is not None and (problem.startswith(f"output[{i}]: ") or f"; output[{i}]: " in problem):
            figure = "unchanged" if db == float("inf") else f"{db:.1f} dB"
            print(f"[compare] output[{i}]: the program itself, its inputs moved one float step: {figure} from its own "
                  f"output, the lowest of {SENSITIVITY_DRAWS} draws (bti's program_self_sqnr_db)")


class Failed(Exception):
    pass


def weights(ep):
    return {k: (v._version, v.detach().clone()) for k, v in ep.state_dict.items() if isinstance(v, torch.Tensor)}


def unwritten(name, ep, before):
    """bti checks after each stage that nothing wrote into the model's weights (the exported program shares them with
    the module), as torch counts writes (a tensor's version), whether or not the values changed: a stage that did
    failed."""
    def same(a, b):  # NaN equal to NaN, as bti compares tensors
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True) if a.is_floating_point() else torch.equal(a, b)

    written = [k for k, v in ep.state_dict.items() if k in before and v._version != before[k][0]]
    if written:
        changed = [k for k in written if not same(ep.state_dict[k], before[k][1])]
        print(f"[{name}] failed: it wrote into the model's weights ({', '.join(written[:4])}; values changed: "
              f"{', '.join(changed[:4]) or 'none'})", flush=True)
        raise Failed(name, "BackendContract")  # the type bti records for a backend that broke its contract


def stage(name, fn, *args):
    print(f"[{name}] ...", flush=True)
    try:
        value = fn(*args)
    except Exception as exc:
        seen = [exc]  # the innermost of the chain (__cause__, else __context__; a cycle ends it), as bti names it
        while (seen[-1].__cause__ or seen[-1].__context__) is not None and all(
                x is not (seen[-1].__cause__ or seen[-1].__context__) for x in seen):
            seen.append(seen[-1].__cause__ or seen[-1].__context__)
        root = seen[-1]
        traceback.print_exc()
        first = (str(root).strip().splitlines() or [""])[0]
        print(f"[{name}] failed: {type(root).__name__}: {first[:400]}", flush=True)
        raise Failed(name, type(root).__name__) from exc
    print(f"[{name}] ok", flush=True)
    if EXPECTED["status"] == "CRASH" and name == EXPECTED["stage"] != "export":  # export: after the eager reference too
        raise Survived(name)
    return value


class Survived(Exception):
    pass


def main():
    import importlib.metadata as md

    def version(p):
        try:
            return md.version(p)
        except md.PackageNotFoundError:
            return "not installed"

    print(f"python {platform.python_version()}, torch {version('torch')}, executorch {version('executorch')}, torchao {version('torchao')}")
    print(f"bti recorded: {EXPECTED['status']}: {EXPECTED['detail']}", flush=True)
    try:
        ep = stage("export", export)
        eager = reference()
        if EXPECTED["status"] == "CRASH" and EXPECTED["stage"] == "export":  # bti's export stage runs the module once too
            raise Survived("export")
        program_outputs = None
        exported, before = ep, weights(ep)
        if QUANTIZED:
            ep, program_outputs = stage("quantize", quantize, ep)
            unwritten("quantize", exported, before)
        edge = stage("lower", lower, ep)
        unwritten("lower", exported, before)
        if PER_ROW_REFERENCE and any("choose_qparams" in str(n.target) for n in edge.exported_program().graph.nodes):
            print("[lower] a dynamic quantization stays outside the delegate: held to the program as written", flush=True)
            program_outputs = AS_WRITTEN  # the portable kernels quantize per tensor, as bti judged it
        pte = stage("serialize", serialize, edge)
        if RUNS_ON == "corstone-fvp":  # bti records such an item LOWERED where no FVP is installed
            print("NOT RUN: the stages up to serialize passed; the program runs on a Corstone FVP, not written out here")
            return 4
        handle = stage("load", load, edge, pte)
        outs = stage("run", run, handle, mutated_inputs(edge))
        print("[compare] ...", flush=True)
        problem = compare(outs, eager, program_outputs)
    except Survived as exc:
        print(f"NOT REPRODUCED: bti's worker died in the {exc.args[0]} stage; here it passed")
        return 0
    except Failed as exc:
        name, etype = exc.args
        same = name == EXPECTED["stage"] and etype == (EXPECTED["type"] or etype) and EXPECTED["status"] != "CRASH"
        print(("REPRODUCED: " if same else "DIFFERENT: ") + f"the {name} stage failed ({etype})"
              + ("" if same else f"; bti recorded {EXPECTED['status']} {EXPECTED['type']}"))
        return 1 if same else 3
    if problem:
        print(f"[compare] failed: {problem}")
        self_sensitivity(program_outputs, problem)
        same = EXPECTED["stage"] == "compare" and EXPECTED["status"] != "CRASH"  # a crash is not reproduced by a mismatch
        print(("REPRODUCED: " if same else "DIFFERENT: ") + "the outputs are out of tolerance")
        return 1 if same else 3
    print("[compare] ok")
    if EXPECTED["status"] == "CRASH" and EXPECTED["stage"] == "compare":
        print("NOT REPRODUCED: bti's worker died in the compare stage; here it passed")
        return 0
    if EXPECTED["status"] in ("PASS", "PASS_UNDELEGATED"):  # a control: bti recorded it passing
        delegated = sum(1 for n in edge.exported_program().graph.nodes if "executorch_call_delegate" in str(n.target))
        if (delegated > 0) != (EXPECTED["status"] == "PASS"):  # PASS delegates something, PASS_UNDELEGATED nothing
            print(f"DIFFERENT: {delegated} delegate call(s) in the lowered program; bti recorded {EXPECTED['status']}")
            return 3
        print("PASSED AS RECORDED: every stage passed and the outputs are within tolerance"
              + ("" if delegated else ", on the portable kernels alone (as recorded: nothing delegated)"))
        return 0
    print("NOT REPRODUCED: every stage passed and the outputs are within tolerance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _bug(rec: Any) -> str:
    sig = _dict(rec.get("error")).get("signature")
    return str(sig) if sig else f"{rec.get('status')}: {first_line(str(rec.get('detail') or ''))[:120]}"


def write_failures(results: Path, directory: Path, limit: int, suites: tuple[str, ...] = ()) -> tuple[list[Path], list[str]]:
    """A script per unexpected failure of the run (the first ``limit``), each written in a forked child so that a case
    that crashes while it is built cannot take the run's reports with it. Returns (the scripts, why others have none)."""
    from harness.providers import ProviderError, run_forked
    from harness.results import read_latest, status_of

    header, latest = read_latest(results)
    failing = [r for r in latest if status_of(r).is_failure and reproduced_status(r)
               and r.get("backend") == "executorch"  # ExecuTorch's own flows (a plugin's backend has its own name)
               and REPRO_ON_REQUEST not in (r.get("tags") or [])]  # a real-size model's program is its weights
    first: dict[str, Any] = {}
    for r in failing:  # one per root cause first
        first.setdefault(_bug(r), r)
    failing = list(first.values()) + [r for r in failing if all(r is not f for f in first.values())]
    written: list[Path] = []
    skipped: list[str] = []
    for rec in failing[:limit]:
        item_id = str(rec.get("id"))
        path = directory / script_name(item_id)
        if rec.get("status") == "FAIL_EXPORT" and not rec.get("op"):  # known without building it (nor a fork: ~0.2 s)
            skipped.append(f"{item_id}: its module is written out as its exported program, and torch.export failed on it "
                           "in the run: reproduce with `bti run`")
            continue
        try:
            run_forked(lambda rec=rec, path=path: str(_write(dict(rec), dict(header), path, suites, beside=False)))
            written.append(path)
        except ProviderError as exc:
            skipped.append(f"{item_id}: {first_line(str(exc))[:200]}")
    skipped += [f"{r.get('id')}: beyond the first {limit}" for r in failing[limit:]]
    return written, skipped


def program_beside(script: Path) -> Path | None:
    """The ``.pt2`` file a script loads its program from (a program over ``MAX_PROGRAM_BYTES``), or None."""
    try:
        with script.open("rb") as fh:
            named = PROGRAM_FILE_LINE in fh.read(1 << 20)
    except OSError:
        return None
    return script.with_suffix(".pt2") if named else None


def is_script(path: Path) -> bool:
    """A file ``bti repro`` wrote (not a link, under the size cap, starting as its scripts start) that runs by itself
    (its program not in a file beside it): what ``bti merge`` and the portal copy from results they are given."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_SCRIPT_BYTES:
            return False
        with path.open("rb") as fh:
            if fh.read(len(SCRIPT_FIRST_LINES)) != SCRIPT_FIRST_LINES:
                return False
    except OSError:
        return False
    return program_beside(path) is None  # its program is beside it: copied alone, it could not run


def gather(results: list[Path], item_ids: set[str], directory: Path) -> int:
    """Copy the scripts beside each results file (``repro/``) whose items are in ``item_ids`` into ``directory``
    (``bti merge``: the shards' scripts go with the merged results). Returns how many."""
    import shutil

    wanted = {script_name(i) for i in item_ids}
    copied = 0
    for path in results:
        for script in sorted((path.parent / "repro").glob("*.py")):
            if script.name in wanted and is_script(script):
                directory.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(script, directory / script.name)
                copied += 1
    return copied
