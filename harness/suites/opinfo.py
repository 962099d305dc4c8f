"""PyTorch's own sample inputs as cases: every OpInfo entry of the installed torch (``op_db``), each sample a case.

A case is one sample of one OpInfo entry: ``opinfo.<op>.<variant>.<n>``, its dtype axis the dtypes OpInfo lists
for the CPU (the reference) that give a sample ``n``. It runs the op on the recipe's device against the same op on
the CPU, like PyTorch's ``TestCommon.test_compare_cpu``.

OpInfo's knowledge is read from OpInfo, never copied: for the recipe's device type (``cpu``, ``cuda``, a
PrivateUse1 name…), a dtype OpInfo does not list for it is SKIP; its ``DecorateInfo`` entries active for
``TestCommon.test_compare_cpu`` on that device type and dtype (evaluated by OpInfo's own ``is_active``) decide:
``unittest.skip`` is SKIP and ``expectedFailure`` an expected failure, each naming its source; ``toleranceOverride``
and ``precisionOverride`` widen the tolerance. Device-capability decorators (``onlyCUDA``, ``skipCPUIfNoLapack``…) are
evaluated where OpInfo says what they test; the rest are listed in ``docs/opinfo.md`` as not modelled.

Counting the samples of every entry at every dtype takes about a minute; the count is kept in the result cache
directory, keyed by torch's version, so later runs discover in a second.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import torch

from harness.cases.case import Case
from harness.cases.contract import Judgement, could_match

SUITE = "opinfo"
SKIP_DTYPES = ("complex32",)  # experimental in torch ("BComplex32 support is experimental")
# opinfo-ci: a spread of OpInfo's kinds (unary, binary, reductions, shape ops, linalg, nn.functional, indexing)
CI_OPS = ("abs", "add", "addmm", "amax", "argmax", "cat", "clamp", "cumsum", "div", "exp", "flip", "gather", "index_select",
          "linalg.vector_norm", "log_softmax", "matmul", "mean", "mul", "nn.functional.gelu", "nn.functional.layer_norm",
          "nn.functional.linear", "nn.functional.relu", "nn.functional.softmax", "permute", "pow", "repeat", "rsqrt",
          "sigmoid", "sort", "sum", "tanh", "topk", "transpose", "where")


def _op_db() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return list(op_db)


@functools.cache
def entries() -> dict[tuple[str, str], Any]:
    """OpInfo entries by (name, variant)."""
    return {(op.name, op.variant_test_name or "default"): op for op in _op_db()}


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _samples(op: Any, dtype: str, seed: int) -> list[Any]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return list(op.sample_inputs("cpu", getattr(torch, dtype), requires_grad=False))


@functools.lru_cache(maxsize=32)
def _samples_of(name: str, variant: str, dtype: str) -> list[Any]:
    """An entry's samples at a dtype, drawn under a seed of the entry and dtype (every sample of them the same in
    every run and worker); kept for the next items, which are mostly the same entry at other dtypes. Builders
    copy the tensors they take."""
    from harness.cases.case import seed_for

    return _samples(entries()[(name, variant)], dtype, seed_for(f"opinfo|{name}|{variant}|{dtype}"))


def _counts(keys: list[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """Samples per dtype for each entry (``"<name>|<variant>"`` → {dtype: n}), from the cache when it has them."""
    from harness.settings import current

    path = current().cache_dir / f"opinfo-samples-{torch.__version__}.json"
    try:
        known: dict[str, dict[str, int]] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    missing = [k for k in keys if f"{k[0]}|{k[1]}" not in known]
    for key in missing:
        op = entries()[key]
        per: dict[str, int] = {}
        for dt in op.supported_dtypes("cpu"):
            name = _dtype_name(dt)
            if name in SKIP_DTYPES:
                continue
            try:
                per[name] = len(_samples(op, name, 0))
            except Exception:
                per[name] = 1  # the sample cannot be built: one case says so (FAIL_EXPORT, not the device's fault)
        known[f"{key[0]}|{key[1]}"] = per
    if missing:
        try:
            from harness.results import atomic_write_text

            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(known, sort_keys=True))
        except OSError:
            pass  # a read-only cache: counted again next time
    return known


def discover(ops: tuple[str, ...] | None = None, suite: str = SUITE, patterns: tuple[str, ...] = ()) -> list[Case]:
    """The entries' samples as cases (``ops``: only these entries), counting only entries whose ids can match
    ``patterns`` (`bti run -k`): a run of one op does not count the samples of all 700."""
    keys = [k for k in entries() if (ops is None or k[0] in ops) and could_match(f"opinfo.{k[0]}.{k[1]}.", patterns)]
    counts = _counts(keys)
    cases = []
    for name, variant in keys:
        per = counts[f"{name}|{variant}"]
        aten = entries()[(name, variant)].aten_name
        op = f"aten::{aten}" if aten and hasattr(torch.ops.aten, aten) else f"opinfo:{name}"  # --op and the support table
        for n in range(max(per.values(), default=0)):
            dtypes = tuple(sorted(d for d, c in per.items() if c > n))
            cases.append(Case(id=f"opinfo.{name}.{variant}.{n}", suite=suite, kind="opinfo", op=op,
                              spec={"opinfo": name, "variant": variant, "sample": n}, tags=("opinfo",), dtypes=dtypes,
                              source=f"torch OpInfo {name!r} (variant {variant!r}), sample {n}"))
    return cases


def discover_ci() -> list[Case]:
    return discover(CI_OPS, suite="opinfo-ci")


# --- decisions for one device type -----------------------------------------------------------------------------


def _source(op: Any, info: Any, what: str) -> str:
    where = ".".join(x for x in (info.cls_name, info.test_name) if x) or "every test"
    dev = f", device_type={info.device_type}" if info.device_type else ""
    return f"OpInfo {op.name!r}: {what} ({where}{dev})"


def _skip_reason(dec: Any) -> str | None:
    """``unittest.skip(reason)``'s reason (a closure cell), None for anything else."""
    if getattr(dec, "__qualname__", "") != "skip.<locals>.decorator":
        return None
    cells = [c.cell_contents for c in getattr(dec, "__closure__", None) or () if isinstance(c.cell_contents, str)]
    return cells[0] if cells else "skipped"


def _capability(dec: Any, device_type: str) -> str | None:
    """The device-type gates OpInfo attaches as decorators, evaluated as they test (None: not a gate, or passes)."""
    name = getattr(dec, "__name__", "") or type(dec).__name__
    gates = {
        "onlyCUDA": device_type != "cuda",
        "onlyCPU": device_type != "cpu",
        "onlyNativeDeviceTypes": device_type not in ("cpu", "cuda", "meta", "mps", "xpu"),
        "skipXPU": device_type == "xpu",
        "skipCPUIfNoLapack": device_type == "cpu" and not torch._C.has_lapack,
        "skipCPUIfNoFFT": device_type == "cpu" and not torch._C.has_spectral,
        "skipCPUIfNoMklSparse": device_type == "cpu" and not torch._C.has_mkl,
    }
    return f"{name} on {device_type}" if gates.get(name) else None


@functools.cache
def judge(name: str, variant: str, device_type: str, dtype: str) -> Judgement:
    """What OpInfo says about running ``name``/``variant`` at ``dtype`` on ``device_type`` against the CPU."""
    from torch.testing._internal.opinfo.core import DecorateInfo

    op = entries()[(name, variant)]
    supported = {_dtype_name(d) for d in op.supported_dtypes(device_type)}
    if dtype not in supported:
        return Judgement(skip=f"OpInfo {name!r}: dtype {dtype} is not supported on {device_type} (its dtypes there: "
                              f"{', '.join(sorted(supported)) or 'none'})")
    # test_compare_cpu runs only off the CPU (onlyCUDA/XPU): on the CPU its skips and device gates still hold (an
    # output that is non-deterministic is so everywhere), its expected failures and tolerances (a device against the
    # CPU) do not
    off_cpu = device_type != "cpu"
    tdt = getattr(torch, dtype)
    xfail: str | None = None
    tol: dict[str, float] = {}
    for info in [*op.skips, *op.decorators]:
        info = info if isinstance(info, DecorateInfo) else DecorateInfo(info)  # type: ignore[no-untyped-call]
        if not info.is_active("TestCommon", "test_compare_cpu", device_type, tdt, {}):  # type: ignore[no-untyped-call]
            continue
        for dec in info.decorators:
            reason = _skip_reason(dec)
            if reason is not None:
                return Judgement(skip=_source(op, info, f"skip: {reason}"))
            gate = _capability(dec, device_type)
            if gate is not None:
                return Judgement(skip=_source(op, info, gate))
            if not off_cpu:
                continue
            if getattr(dec, "__name__", "") == "expectedFailure":
                xfail = _source(op, info, "expectedFailure")
            override = getattr(dec, "d", None)
            if isinstance(override, dict) and tdt in override:
                value = override[tdt]
                atol, rtol = (value.atol, value.rtol) if hasattr(value, "atol") else (float(value), 0.0)
                tol = {"atol": max(float(atol), tol.get("atol", 0.0)), "rtol": max(float(rtol), tol.get("rtol", 0.0))}
    return Judgement(xfail=xfail, tolerance=tol or None)


def judge_item(case: Case, dtype: str, recipe: Any) -> Judgement:
    """OpInfo's word on one item: its case's entry, at its dtype, on its recipe's device type."""
    return judge(case.spec["opinfo"], case.spec["variant"], device_type(recipe), dtype)


# --- the worker side -------------------------------------------------------------------------------------------

def build(case: Case, axes: Any, seed: int) -> Any:
    """The sample's op as a module whose inputs are the sample's tensors (nested ones flattened), on the CPU."""
    import torch.utils._pytree as pytree

    from harness.cases.contract import Built

    op = entries()[(case.spec["opinfo"], case.spec["variant"])]
    n = case.spec["sample"]
    samples = _samples_of(case.spec["opinfo"], case.spec["variant"], axes.dtype)
    if n >= len(samples):
        raise IndexError(f"OpInfo gives {len(samples)} sample(s) for {op.name} at {axes.dtype}; no sample {n}")
    sample = samples[n]
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    slots = [isinstance(x, torch.Tensor) for x in leaves]
    tensors = tuple(x.detach().clone() for x, s in zip(leaves, slots, strict=True) if s)
    module = OpInfoModule(op, spec, [None if s else x for x, s in zip(leaves, slots, strict=True)], slots,
                          sample.output_process_fn_grad)
    random = _is_random(module, tensors)
    ref = _numpy_ref(op, spec, leaves, slots) if op.ref is not None and not random else None
    return Built(module.eval(), tensors, tensors, None, random_outputs=random, fp64_ref=ref)


def _numpy_ref(op: Any, spec: Any, leaves: list[Any], slots: list[bool]) -> Any:
    """OpInfo's reference (``op.ref``, NumPy or SciPy) on the sample with its floating tensors in float64: the judge's
    fp64 reference for this item, as OpInfo's own ``test_numpy_ref`` uses it."""
    from torch.testing._internal.opinfo.core import SampleInput

    def ref(*tensors: Any) -> list[Any]:
        import numpy as np
        import torch.utils._pytree as pytree

        it = iter(tensors)
        filled = [next(it) if s else c for s, c in zip(slots, leaves, strict=True)]
        inp, args, kwargs = pytree.tree_unflatten(filled, spec)
        sample = SampleInput(inp, args=tuple(args), kwargs=dict(kwargs))  # type: ignore[no-untyped-call]
        up = sample.transform(  # type: ignore[no-untyped-call]
            lambda t: t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t).numpy()
        out = op.ref(up.input, *up.args, **up.kwargs)
        return [torch.from_numpy(np.array(x)) for x in pytree.tree_leaves(out) if x is not None]

    return ref


def _is_random(module: Any, tensors: tuple[Any, ...]) -> bool:
    """Whether the op draws random numbers (dropout, bernoulli…): two seeds, different outputs."""
    def run(seed: int) -> Any:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            return module(*[t.clone() for t in tensors])

    try:
        a, b = run(1), run(2)
    except Exception:
        return False  # it fails on the CPU: the reference stage says how
    from harness.judge import leaves as _leaves
    from harness.judge import same_tensor

    fa = [x for x in _leaves(a) if isinstance(x, torch.Tensor)]
    fb = [x for x in _leaves(b) if isinstance(x, torch.Tensor)]
    return any(x.shape == y.shape and not same_tensor(x, y) for x, y in zip(fa, fb, strict=False))


class OpInfoModule(torch.nn.Module):
    """``forward(*tensors)``: the sample's call with its tensors put back where they were."""

    def __init__(self, op: Any, spec: Any, constants: list[Any], slots: list[bool], post: Any) -> None:
        super().__init__()
        self.op, self.spec, self.constants, self.slots, self.post = op, spec, constants, slots, post

    def forward(self, *tensors: Any) -> Any:
        import torch.utils._pytree as pytree

        it = iter(tensors)
        leaves = [next(it) if s else c for s, c in zip(self.slots, self.constants, strict=True)]
        inp, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.post(self.op(inp, *args, **kwargs))


def device_type(recipe: Any) -> str:
    """The device type a recipe runs on, as OpInfo names device types (ExecuTorch and ONNX Runtime recipes: cpu)."""
    device = getattr(recipe.options, "device", None) if recipe.options is not None else None
    kind = str(device or "cpu").split(":", 1)[0]
    return kind


__all__ = ["CI_OPS", "Judgement", "build", "device_type", "discover", "discover_ci", "judge_item"]
