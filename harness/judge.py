"""Judging: what an item's outputs are held to, against which reference, and why (numpy at heart; torch is
imported only where a tensor or a program is in hand).

The stage pipeline (``harness.stages``) produces outputs; this module decides what they are held to and records
every figure it used. Three references, three owners:

- **The delegate against its own program.** A quantized recipe's outputs are held to the *quantized reference*:
  the quantized program (pt2e-converted, q/dq nodes in it) run in eager PyTorch on the same inputs, as
  ExecuTorch's own tester does (``backends/test/harness/tester.py``). An output that comes from a dequantize node
  passes within ``qtol`` quantization steps of that node's scale, plus ``atol + rtol*|ref|``; one that is not
  quantized within ``atol + rtol*|ref|`` alone. A failure here is the backend's.
- **The quantized program against fp32** (the *quantization quality*): its SQNR against the eager fp32 output is
  always recorded and held to the recipe's ``sqnr_db`` (and ``cosine``) floor. When only that floor fails, the
  quantizer lost the accuracy, not the delegate: the comparison's ``owner`` is ``quantizer``.
- **Eager against fp64** (the *noise floor*): a float recipe's outputs are held to the module run in float64 on
  the CPU. An element passes when ``|out - fp64| <= atol + rtol*|fp64| + k * noise``, where ``noise`` is the
  error of eager PyTorch in the case's dtype against fp64 at that element and ``k`` is ``NOISE_K``. The
  check is magnitude-aware: the output's gain against fp64 must stay within 1 by
  ``max(rtol, REL_FLOOR[dtype], k * |eager's gain - 1|)``, where the gain is the least-squares factor between an
  output and fp64 (``<out, fp64> / <fp64, fp64>``): an all-zero (gain 0) or uniformly scaled output never passes
  where the reference is not zero, however small its values, while errors that are not correlated with the values
  (rounding, approximations) leave the gain at 1.

Integer and bool outputs match exactly (or within the recipe's ``int`` tolerance), against eager. A baseline
recipe's or a pair's outputs, where they are the reference, are held to the recipe's tolerances as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from harness.cases.case import Item
    from harness.cases.contract import Built
    from harness.recipes import Recipe

NOISE_K = 2.0  # the noise-floor multiplier: dynamo's RMSE multiplier for float32; with k >= 1 + rtol, every output
# within the recipe's atol/rtol of eager is within the fp64 budget too (the triangle inequality), so the budget never
# fails what the eager comparison passed, and widens only where eager itself is far from fp64
# the relative floor of the magnitude check, per output dtype: dynamo's accuracy tolerances
REL_FLOOR = {"float64": 1e-7, "float32": 1e-4, "float16": 1e-3, "bfloat16": 1e-2}
QUANTIZED_DEFAULTS = {"qtol": 1.0, "atol": 1e-3, "rtol": 1e-3}  # ExecuTorch's tester: atol = rtol = 1e-3, qtol steps
# the systematic part of an error (a least-squares gain and offset against the quantized reference) may reach half a
# step: a wrong zero point moves every element a whole step, within qtol element by element; legitimate rounding
# differences fit to at most 0.26 step on the shipped int8 recipes' ops and models (docs/recipes.md). From 8 elements on.
SYSTEMATIC_STEPS = 0.5
SYSTEMATIC_MIN_N = 8
# an output that is not quantized (dynamic quantization's, or an op left in float): its gain through the origin within
# 1 % of 1 and its mean error within 1 % of the reference's RMS (legitimate outputs: docs/recipes.md)
SYSTEMATIC_REL = 0.01
# a model under a quantized recipe: rounding differences between a delegate and its quantized program compound layer
# by layer (2 to 7 output steps on torchvision's and the zoo's int8 programs, gains within 0.5 %: docs/recipes.md), so
# a model's outputs are held to the bound the upstream suite holds every model to (backends/test/suite/runner.py:
# atol 0.1, rtol 0.04, no step allowance), the strictest anchor that runs these programs (Arm's model tests allow
# atol 0.25 and a step; XNNPACK skips its calibrated model tests, T187799178), the recipe's own where it is wider;
# then the systematic checks of an output that is not quantized, on every output, the gain's and the mean error's
# allowances widened by three of their standard errors (a 20-element output's estimates are themselves noisy)
MODEL_QUANTIZED = {"atol": 0.1, "rtol": 0.04, "qtol": 0.0}
MEAN_SE = 3.0
# a model's output errors are not independent element by element (they reach the logits through the same few features):
# the gain along fp32 of int8 MobileNetV2 on XNNPACK, over seven seeds of the zoo row, spread by 0.024 where each fit's
# own standard error said 0.006 (1,000 logits): about 64 independent elements. So a model's standard errors count at
# most MODEL_N_EFF elements (docs/recipes.md)
MODEL_N_EFF = 64
# a model's float outputs against fp64: rounding error through tens of layers lands on different elements in eager and
# in a backend with the same distribution (inception_v3 on XNNPACK: RMSE 1.28 x eager's, the 99th percentile 0.19e-3
# against eager's 0.15e-3, yet 5 of 1,000 logits past k x eager's error at that element: docs/recipes.md), so a model's
# noise floor is eager's error at the element or the largest of n draws at eager's RMS error (``_model_noise``),
# whichever is more, and the output's RMSE against fp64 must stay within atol + k x eager's RMSE as a whole (dynamo's
# RMSE rule for models at its float32 multiplier, with the recipe's atol for dynamo's tol / 10)
MODEL_FLOOR = "eager's RMS, n draws"


# ---------------------------------------------------------------------------------------------------- conversion
def to_numpy(value: Any) -> NDArray[Any]:
    """The one tensor -> numpy conversion (run, ``bti verify``, ``bti bench``): dense; bfloat16 and float8 widened to
    float32, complex32 to complex64, the wide unsigned ints to int64 (uint64 to float64), all without changing a
    value; complex as a trailing dimension of 2 (real, imaginary). Anything else through ``np.asarray``."""
    try:
        import torch
    except ImportError:  # a report machine: no tensors to convert
        return np.asarray(value)
    if isinstance(value, torch.Tensor):
        t = comparable(value.detach().cpu())
        if t.is_complex():
            t = torch.view_as_real(t.resolve_conj())
        return np.asarray(t.contiguous().numpy())
    return np.asarray(value)


def comparable(t: Any) -> Any:
    """A tensor numpy and torch.equal can take: dense, and widened from the dtypes they lack (bfloat16, float8,
    complex32, the wide unsigned ints) without changing a value, but for uint64 above 2**53 (as float64)."""
    import torch

    if t.layout != torch.strided:
        t = t.to_dense()
    if t.dtype == torch.complex32:
        return t.to(torch.complex64)
    if t.is_floating_point() and t.dtype not in (torch.float16, torch.float32, torch.float64):
        return t.float()  # bfloat16, float8_*: every value is a float32
    if t.dtype in (torch.uint16, torch.uint32, torch.uint64):
        return t.to(torch.float64) if t.dtype == torch.uint64 else t.to(torch.int64)
    return t


def same_tensor(x: Any, y: Any) -> bool:
    """Bit for bit equal, for any dtype and layout (torch.equal lacks some: complex32, the bfloat complex)."""
    import torch

    x, y = comparable(x), comparable(y)
    try:
        return bool(torch.equal(x, y))
    except (RuntimeError, TypeError):
        return x.shape == y.shape and bool(torch.equal(x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8)))


def dtype_name(value: Any) -> str:
    """``float32`` for a tensor of that dtype; a Python value's type name otherwise."""
    dt = getattr(value, "dtype", None)
    return str(dt).replace("torch.", "") if dt is not None and not isinstance(value, np.ndarray) else type(value).__name__


def leaves(out: Any) -> list[Any]:
    """A module's outputs as a flat list (pytree leaves, None left out)."""
    import torch.utils._pytree as pytree

    return [leaf for leaf in pytree.tree_leaves(out) if leaf is not None]


# --------------------------------------------------------------------------------------------------- comparators
_REL_EPS = 1e-12


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str  # path-shaped, e.g. "output[1]: max_abs 0.3 > atol 1e-4 at [0, 2]"
    stats: list[dict[str, Any]]
    structural: bool = False  # the outputs' count, a dtype or a shape differs: no numeric rule can pass them


def output_stats(out: NDArray[Any], ref: NDArray[Any]) -> dict[str, Any]:
    o = out.astype(np.float64, copy=False).ravel()
    r = ref.astype(np.float64, copy=False).ravel()
    both_nan = np.isnan(o) & np.isnan(r)
    same_inf = np.isinf(r) & (o == r)
    keep = ~(both_nan | same_inf)
    o, r = o[keep], r[keep]
    if o.size == 0:
        return {"max_abs": 0.0, "max_rel": 0.0, "mae": 0.0, "mse": 0.0, "sqnr_db": math.inf, "cosine": 1.0}
    with np.errstate(all="ignore"):
        diff = np.abs(o - r)
        rel = diff / np.maximum(np.abs(r), _REL_EPS)
        signal = float(np.sum(r * r))
        noise = float(np.sum((o - r) ** 2))
        if not np.all(np.isfinite(diff)):
            sqnr = -math.inf
        elif noise == 0.0:
            sqnr = math.inf
        elif signal == 0.0:
            sqnr = -math.inf
        else:
            sqnr = 10.0 * math.log10(signal / noise)
        no, nr = float(np.linalg.norm(o)), float(np.linalg.norm(r))
        if no == 0.0 and nr == 0.0:
            cos = 1.0
        elif no == 0.0 or nr == 0.0 or not (math.isfinite(no) and math.isfinite(nr)):
            cos = 0.0
        else:
            cos = float(np.dot(o, r) / (no * nr))
    return {
        "max_abs": _f(np.max(diff)),
        "max_rel": _f(np.max(rel)),
        "mae": _f(np.mean(diff)),
        "mse": _f(np.mean(diff * diff)),
        "sqnr_db": sqnr,
        "cosine": cos,
    }


def _f(x: Any) -> float:
    v = float(x)
    return v if not math.isnan(v) else math.inf


def compare(outputs: list[NDArray[Any]], refs: list[NDArray[Any]], tol: dict[str, float], dtypes: list[tuple[str, str]] | None = None) -> Verdict:
    """Compare each output against its reference under ``tol`` (atol, rtol, sqnr_db, cosine floor; each optional;
    ``shape_only`` checks shapes and dtypes alone, for random or uninitialized outputs).

    ``dtypes`` optionally gives (output dtype, reference dtype) names per output, checked for equality.
    """
    if len(outputs) != len(refs):
        return Verdict(False, f"outputs: count {len(outputs)} != reference count {len(refs)}", [], structural=True)
    stats: list[dict[str, Any]] = []
    problems: list[str] = []
    structural = False
    for i, (out, ref) in enumerate(zip(outputs, refs, strict=True)):
        path = f"output[{i}]"
        entry: dict[str, Any] = {"name": path, "shape": list(ref.shape), "dtype": str(ref.dtype)}
        if dtypes and dtypes[i][0] != dtypes[i][1]:
            structural = True
            problems.append(f"{path}: dtype {dtypes[i][0]} != reference {dtypes[i][1]}")
        if out.shape != ref.shape:
            structural = True
            problems.append(f"{path}: shape {list(out.shape)} != reference {list(ref.shape)}")
            stats.append(entry)
            continue
        if tol.get("shape_only"):  # random or uninitialized outputs: shape and dtype are the contract
            stats.append(entry)
            continue
        entry.update(output_stats(out, ref))
        stats.append(entry)
        problem = _check(path, out, ref, entry, tol)
        if problem:
            problems.append(problem)
    return Verdict(not problems, "; ".join(problems), stats, structural)


def _check(path: str, out: NDArray[Any], ref: NDArray[Any], s: Mapping[str, Any], tol: Mapping[str, Any]) -> str | None:
    o = out.astype(np.float64, copy=False)
    r = ref.astype(np.float64, copy=False)
    nan_problem = _nan_mismatch(path, o, r, out.shape)
    if nan_problem:
        return nan_problem
    atol, rtol = tol.get("atol"), tol.get("rtol")
    if atol is not None or rtol is not None:
        a, rt = float(atol or 0.0), float(rtol or 0.0)
        with np.errstate(all="ignore"):
            close = np.isclose(o, r, rtol=rt, atol=a, equal_nan=True)
        if not close.all():
            flat = int(np.argmax(~close))
            idx = [int(v) for v in np.unravel_index(flat, out.shape)] if out.ndim else []
            bad = int((~close).sum())
            with np.errstate(all="ignore"):  # measured here: a caller's statistics may not carry it
                err = float(np.nanmax(np.abs(o - r))) if not np.isnan(o - r).all() else math.nan
            return (f"{path}: max_abs {err:.4g} exceeds atol {a:g} + rtol {rt:g}*|ref| "
                    f"({bad}/{close.size} elements; first at {idx}: {o.ravel()[flat]:.6g} vs {r.ravel()[flat]:.6g})")
    return _floors(path, s, tol)


def _floors(path: str, s: Mapping[str, Any], tol: Mapping[str, Any]) -> str | None:
    """The SQNR and cosine floors of one output's statistics, where the tolerance sets them."""
    floor = tol.get("sqnr_db")
    if floor is not None and s["sqnr_db"] < float(floor):
        return f"{path}: SQNR {s['sqnr_db']:.2f} dB < floor {float(floor):g} dB (max_abs {s['max_abs']:.4g})"
    cos = tol.get("cosine")
    if cos is not None and s["cosine"] < float(cos):
        return f"{path}: cosine {s['cosine']:.6f} < floor {float(cos):g} (max_abs {s['max_abs']:.4g})"
    return None


# Dynamo's benchmark accuracy rule (torch/_dynamo/utils.py `same`, as `benchmarks/dynamo` calls it for
# inference): the tolerance per dtype, and RMSE multipliers.
DYNAMO_TOL = {"float32": 1e-4, "float64": 1e-4, "float16": 1e-3, "bfloat16": 1e-2}


def _rmse(a: NDArray[Any], b: NDArray[Any]) -> float:
    return float(np.sqrt(np.mean(np.square(a - b)))) if a.size else 0.0


def dynamo_rule(res: NDArray[Any], ref: NDArray[Any], fp64: NDArray[Any] | None, tol: float, res_dtype: str,
                cosine: bool = False) -> dict[str, Any]:
    """One output held to dynamo's rule. ``res`` is the device's output, ``ref`` the CPU's in the same dtype,
    ``fp64`` the CPU's in float64. Passes when allclose(ref, res) at ``tol``; else when
    RMSE(res, fp64) ≤ m·RMSE(ref, fp64) + tol/10, with m = 3 for float16/bfloat16 outputs, small (< 1000
    elements) or 1×1-spatial outputs, or a loose tolerance (≥ 2e-2), else 2. With ``cosine`` (the model gave no
    float64 reference: dynamo's harness then sets ``cosine``), when the cosine similarity of the two, flattened in
    float32, is at least 0.99 (``same(..., cos_similarity=True)``). Returns ``{"pass", "rule", ...}``: the rule that
    passed (``allclose``, ``rmse`` or ``cosine``), or ``none``."""
    if res.shape != ref.shape:
        return {"pass": False, "rule": "none", "why": f"shape {list(res.shape)} != {list(ref.shape)}"}
    if not (np.issubdtype(res.dtype, np.floating) or np.issubdtype(res.dtype, np.complexfloating)):
        same = bool(np.array_equal(res, ref))
        return {"pass": same, "rule": "equal" if same else "none"}
    r = res.astype(np.float64)
    c = ref.astype(res.dtype).astype(np.float64)  # dynamo casts the reference to the result's dtype first
    if np.allclose(c, r, atol=tol, rtol=tol, equal_nan=cosine):  # same()'s cosine branch: NaN matches NaN
        return {"pass": True, "rule": "allclose", "tol": tol}
    if fp64 is None and cosine:
        score = _cosine32(ref, res)
        ok = score >= 0.99
        out = {"pass": ok, "rule": "cosine" if ok else "none", "tol": tol, "cosine": score}
        return out if ok else {**out, "why": f"not allclose, and cosine {score:.6f} < 0.99 (no float64 reference)"}
    if fp64 is None or fp64.shape != res.shape:
        return {"pass": False, "rule": "none", "tol": tol, "why": "not allclose, and no float64 reference"}
    f = fp64.astype(np.float64)
    if not np.isnan(f).any() and not np.isnan(r).any() and np.isnan(c).any() and np.allclose(f, r, atol=4e-2, rtol=4e-2):
        return {"pass": True, "rule": "rmse", "tol": tol, "why": "the CPU reference has NaN; the result matches float64"}
    ref_err, res_err = _rmse(f, c), _rmse(f, r)
    small = res.size < 1000 or (res.ndim == 4 and res.shape[-1] == res.shape[-2] == 1) or tol >= 2e-2
    mult = 3.0 if res_dtype in ("float16", "bfloat16") or small else 2.0
    ok = bool(res_err <= mult * ref_err + tol / 10.0)
    out = {"pass": ok, "rule": "rmse" if ok else "none", "tol": tol, "rmse": res_err, "rmse_cpu": ref_err, "multiplier": mult}
    if not ok:
        out["why"] = f"RMSE(device, fp64) {res_err:.3g} > {mult:g}×RMSE(cpu, fp64) {ref_err:.3g} + tol/10"
    return out


def _cosine32(ref: NDArray[Any], res: NDArray[Any]) -> float:
    """torch.nn.functional.cosine_similarity(ref, res, dim=0, eps=1e-6) of the two flattened in float32, as dynamo's
    ``same`` computes it (each norm held at eps at least)."""
    a, b = ref.astype(np.float32).ravel().astype(np.float64), res.astype(np.float32).ravel().astype(np.float64)
    return float(a @ b / (max(float(np.linalg.norm(a)), 1e-6) * max(float(np.linalg.norm(b)), 1e-6)))


# ---------------------------------------------------------------------------------------------------- references
def eager_reference(built: Any, inputs: tuple[Any, ...]) -> list[Any]:
    """The case's module in eager PyTorch on the CPU: in the case's dtype, or in its ``ref`` dtype where the case
    asks for an upcast reference."""
    import copy

    import torch

    from harness.builders.build import torch_dtype

    with torch.no_grad():
        if built.ref_dtype:
            up = torch_dtype(built.ref_dtype)

            def cast(t: Any) -> Any:
                return t.to(up) if isinstance(t, torch.Tensor) and t.is_floating_point() else t

            return leaves(copy.deepcopy(built.module).to(up)(*[cast(t) for t in inputs]))
        return leaves(built.module(*inputs))


def fp64_reference(built: Any, inputs: tuple[Any, ...], count: int) -> tuple[list[Any] | None, str]:
    """The float64 reference of a built case: its source's own (``built.fp64_ref``, OpInfo's NumPy ``op.ref``) where
    it gives ``count`` outputs, else a copy of the module and its float inputs in float64, on the CPU. Returns (the
    outputs, where they came from: ``op.ref`` or ``module``) or (None, why there are none)."""
    import torch

    from harness.builders.build import copy_module

    def up(t: Any) -> Any:
        return t.to(torch.float64) if isinstance(t, torch.Tensor) and t.is_floating_point() else t

    if built.fp64_ref is not None:
        try:
            outs = [o for o in built.fp64_ref(*inputs) if isinstance(o, torch.Tensor)]
            if len(outs) == count:
                return outs, "op.ref"
        except Exception:  # a reference that cannot take this sample: the module in float64 instead
            pass
    try:
        with torch.no_grad():
            return leaves(copy_module(built.module).to(torch.float64)(*[up(t) for t in inputs])), "module"
    except Exception as exc:  # a module that cannot run in float64: judged against eager alone, and said so
        return None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"


# ------------------------------------------------------------------------------------------------ the fp64 budget
def _is_float(a: NDArray[Any]) -> bool:
    return bool(np.issubdtype(a.dtype, np.floating))


def fp64_check(path: str, out: NDArray[Any], eager: NDArray[Any], fp64: NDArray[Any], tol: Mapping[str, Any],
               dtype: str, k: float = NOISE_K, model: bool = False) -> tuple[str | None, dict[str, Any]]:
    """One float output against the module's float64 output, with eager's own error as the noise floor, element by
    element (see the module's docstring). Returns (the problem or None, the figures: ``max_abs`` against fp64, eager's
    largest error ``noise_max_abs``, their ``ratio``, ``rel_l2``, the ``gain`` and its ``gain_budget``). NaN must
    match eager's NaN, and where eager is not finite (or fp64 does not fit the dtype) the output must equal eager, as
    before; those failures keep the eager comparison's words ("NaN where the reference has none", "exceeds atol").
    A ``model``'s floor is eager's error at the element or ``_model_noise``, whichever is more, with the RMSE held as
    a whole (``MODEL_FLOOR``; the figures add ``rmse``, eager's ``noise_rmse`` and the ``noise_floor``)."""
    o, e = out.astype(np.float64, copy=False).ravel(), eager.astype(np.float64, copy=False).ravel()
    f = fp64.astype(np.float64, copy=False).ravel()
    atol, rtol = float(tol.get("atol") or 0.0), float(tol.get("rtol") or 0.0)
    with np.errstate(all="ignore"):
        fits = np.isfinite(fp64.astype(eager.dtype, copy=False)).ravel() if _is_float(eager) else np.isfinite(f)
        fin = np.isfinite(e) & fits
        special = ~fin & ~((o == e) | (np.isnan(o) & np.isnan(e)))
        noise_d, err_d = np.abs(e[fin] - f[fin]), np.abs(o[fin] - f[fin])
        wide = _model_noise(noise_d) if model and noise_d.size else 0.0  # a model's floor everywhere (MODEL_FLOOR)
        floor = np.maximum(noise_d, wide) if model else noise_d
        over = ~(err_d <= atol + rtol * np.abs(f[fin]) + k * floor)  # NaN in the output fails
        top = float(np.max(np.abs(f[fin]))) if fin.any() else 0.0  # scaled to 1 first: no underflow, however small
        fs, os_, es = (f[fin] / top, o[fin] / top, e[fin] / top) if top > 0 else (f[fin], o[fin], e[fin])
        power = float(np.dot(fs, fs))
        gain = float(np.dot(os_, fs) / power) if power > 0 else 1.0  # out ~ gain * fp64, least squares
        gain_noise = abs(float(np.dot(es, fs) / power) - 1.0) if power > 0 else 0.0
        rel = float(np.linalg.norm(os_ - fs) / math.sqrt(power)) if power > 0 else 0.0
    noise = float(noise_d.max()) if noise_d.size else 0.0
    err = float(np.max(err_d)) if err_d.size else 0.0
    err = math.inf if math.isnan(err) else err
    gain_budget = max(rtol, REL_FLOOR.get(dtype, 1e-4), k * gain_noise)
    figures = {"max_abs": err, "rel_l2": rel if math.isfinite(rel) else math.inf, "noise_max_abs": noise,
               "ratio": (err / noise if noise > 0 else (0.0 if err == 0 else math.inf)), "k": k,
               "gain": gain if math.isfinite(gain) else math.inf, "gain_budget": gain_budget}
    if model:
        with np.errstate(all="ignore"):
            figures["rmse"], figures["noise_rmse"] = (float(np.sqrt(np.mean(d * d))) if d.size else 0.0 for d in (err_d, noise_d))
            figures["noise_floor"] = wide
    nan_problem = _nan_mismatch(path, o, e, out.shape)
    if nan_problem:
        return nan_problem, figures
    if special.any():
        at = int(np.argmax(special))
        return (f"{path}: max_abs {abs(o[at] - e[at]):.4g} exceeds atol {atol:g} + rtol {rtol:g}*|ref| where eager is not finite "
                f"({int(special.sum())}/{o.size} elements; first at {_index(at, out.shape)}: {o[at]:.6g} vs {e[at]:.6g})"), figures
    if over.any():
        where = np.flatnonzero(fin)[int(np.argmax(over))]
        there = f"error there or its model-wide {figures['noise_floor']:.3g}, the larger (a model)" if model else "error there"
        return (f"{path}: max_abs {err:.4g} against fp64 exceeds atol {atol:g} + rtol {rtol:g}*|fp64| + {k:g} x eager's {there} "
                f"({int(over.sum())}/{o.size} elements; first at {_index(int(where), out.shape)}: {o[where]:.6g} vs fp64 "
                f"{f[where]:.6g}, eager {e[where]:.6g})"), figures
    if model and not figures["rmse"] <= atol + k * figures["noise_rmse"]:
        return (f"{path}: RMSE {figures['rmse']:.4g} against fp64 exceeds atol {atol:g} + {k:g} x eager's RMSE "
                f"{figures['noise_rmse']:.3g} (a model: its error as a whole)"), figures
    if power > 0 and not abs(gain - 1.0) <= gain_budget:
        return (f"{path}: the output is {gain:.4g} x fp64 (least squares), off by more than {gain_budget:.3g} (the largest of "
                f"rtol, the {dtype} floor and {k:g} x eager's {gain_noise:.3g}): off in scale or magnitude"), figures
    return None, figures


def _model_noise(noise: NDArray[Any]) -> float:
    """A model's noise floor at every element (``MODEL_FLOOR``): the largest of ``n`` draws with eager's RMS error
    (``RMS * sqrt(2 ln n)``, the Gaussian maximum), never more than eager's own largest. Taken from the RMS, one
    element where eager cancels badly widens the others by 1/sqrt(n) of its error, not by all of it."""
    rms = float(np.sqrt(np.mean(noise * noise)))
    return min(float(noise.max()), rms * math.sqrt(2.0 * math.log(max(noise.size, 2))))


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(v) for v in np.unravel_index(flat, shape)] if len(shape) else []


def _nan_mismatch(path: str, out: NDArray[Any], ref: NDArray[Any], shape: tuple[int, ...],
                  counted_as: str | None = None) -> str | None:
    """The problem where an output has NaN and its reference not (or the reverse), in the words every check uses (xfail
    messages match them); ``counted_as`` adds how many elements, and against what."""
    bad = np.isnan(out) != np.isnan(ref)
    if not bad.any():
        return None
    problem = f"{path}: NaN where the reference has none (or the reverse) at {_index(int(np.argmax(bad)), shape)}"
    return f"{problem} ({int(bad.sum())}/{bad.size} elements, {counted_as})" if counted_as else problem


# ------------------------------------------------------------------------------------------ the quantized reference
@dataclass(frozen=True)
class QuantizedReference:
    """The quantized program's own outputs on the item's inputs, in eager PyTorch, and per output the scale of the
    dequantize node it comes from (None: not quantized). ``error``: why there is none (the judge falls back to fp32)."""

    outputs: tuple[Any, ...] = ()
    scales: tuple[float | None, ...] = ()
    error: str = ""
    # per output, the lowest SQNR (dB) of the program against itself when its float inputs are multiplied by
    # 1 + eps N(0, 1), eps their dtype's step (``SENSITIVITY_DRAWS`` seeded draws; ``perturbed_inputs``): how far a
    # kernel that only rounds in another order can land from it. Measured for a model's outputs; empty where not
    # measured
    sensitivity_db: tuple[float | None, ...] = ()
    # per output, the SQNR (dB) of the program against itself when every static quantize rounds a value within
    # ``NEAR_TIE`` of a step of a tie to its other neighbour (``near_ties``): how far an integer implementation whose
    # arithmetic is that far off may land from it (a single XNNPACK convolution against the portable kernels: 0.07 % of
    # its outputs one step apart). Measured with ``sensitivity_db``; empty where not measured
    near_tie_db: tuple[float | None, ...] = ()


SENSITIVITY_DRAWS = 3
NEAR_TIE = 1e-3  # of a quantization step


def near_ties(eps: float = NEAR_TIE) -> Any:
    """A torch dispatch mode under which ``quantized_decomposed.quantize_per_tensor`` (a static quantization: its scale
    a number) rounds a value within ``eps`` of a step of a tie (k + 0.5) to the other of its two neighbours than half
    to even, and everything else as it is. A program run under it is one a valid integer implementation may compute.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    target = torch.ops.quantized_decomposed.quantize_per_tensor.default

    class NearTies(TorchDispatchMode):  # type: ignore[no-untyped-call]
        calls = 0  # how many quantizations it rounded (none: the program has no static quantize to move)

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if func is not target or kwargs:
                return func(*args, **(kwargs or {}))
            self.calls += 1
            x, scale, zero_point, qmin, qmax, dtype = args
            if x.dtype in (torch.float16, torch.bfloat16):  # the op's own arithmetic (torch.ao's decomposed one)
                x = x.to(torch.float32)
            v = x * (1.0 / scale)
            lo = torch.floor(v)
            even = torch.round(v)
            rounded = torch.where(((v - lo) - 0.5).abs() < eps, torch.where(even == lo, lo + 1, lo), even)
            return torch.clamp(rounded + zero_point, qmin, qmax).to(dtype)

    return NearTies()  # type: ignore[no-untyped-call]


def perturbed_inputs(inputs: Sequence[Any], draw: int) -> tuple[Any, ...] | None:
    """``inputs`` with each floating-point tensor times ``1 + eps * N(0, 1)``, ``eps`` its dtype's step at 1 (one
    float32 step: 1.2e-7), from seed ``draw``; None where no input is floating point (token ids: nothing to move)."""
    import torch

    if not any(isinstance(v, torch.Tensor) and v.is_floating_point() for v in inputs):
        return None
    gen = torch.Generator().manual_seed(draw)

    def move(v: Any) -> Any:
        if not (isinstance(v, torch.Tensor) and v.is_floating_point()):
            return v.clone() if isinstance(v, torch.Tensor) else v
        noise = torch.randn(v.shape, generator=gen, dtype=torch.float64)
        return (v.double() * (1.0 + torch.finfo(v.dtype).eps * noise)).to(v.dtype).to(v.device)

    return tuple(move(v) for v in inputs)


def with_sensitivity(qref: QuantizedReference, run: Callable[[tuple[Any, ...]], QuantizedReference],
                     inputs: Sequence[Any]) -> QuantizedReference:
    """``qref`` with its ``sensitivity_db``: ``run`` (what gave it) again on ``SENSITIVITY_DRAWS`` perturbed copies of
    ``inputs`` (unmeasured where no input is floating point, or a draw fails); and its ``near_tie_db``: ``run`` on a
    copy of ``inputs`` under ``near_ties`` (unmeasured where no static quantize ran, or the run fails). Each is measured
    on its own; ``inputs`` are never handed to ``run`` (a program may write into its inputs)."""
    if qref.error:
        return qref
    return _near_tie(_input_steps(qref, run, inputs), run, inputs)


def _input_steps(qref: QuantizedReference, run: Callable[[tuple[Any, ...]], QuantizedReference],
                 inputs: Sequence[Any]) -> QuantizedReference:
    try:  # a figure for the triager, never a verdict: whatever fails here, the record keeps the reference it has
        draws = []
        for draw in range(SENSITIVITY_DRAWS):
            moved = perturbed_inputs(inputs, draw)
            again = run(moved) if moved is not None else None
            if again is None or again.error:
                return qref
            draws.append(again.outputs)
        return dataclasses.replace(qref, sensitivity_db=sensitivity(qref.outputs, draws))
    except Exception:
        return qref


def _near_tie(qref: QuantizedReference, run: Callable[[tuple[Any, ...]], QuantizedReference],
              inputs: Sequence[Any]) -> QuantizedReference:
    try:  # as _input_steps: never a verdict
        import torch

        copies = tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in inputs)
        with near_ties() as mode:
            again = run(copies)
        if again.error or not mode.calls:
            return qref
        return dataclasses.replace(qref, near_tie_db=sensitivity(qref.outputs, [again.outputs]))
    except Exception:
        return qref


def sensitivity(base: Sequence[Any], draws: Sequence[Sequence[Any]]) -> tuple[float | None, ...]:
    """Per output of ``base``, the lowest SQNR of the ``draws`` (the program's outputs on perturbed inputs) against
    it; None for an output that is not floating point or that a draw does not give in the same shape."""
    lowest: list[float | None] = []
    for i, b in enumerate(base):
        ref = to_numpy(b)
        if not _is_float(ref):
            lowest.append(None)
            continue
        values = [output_stats(to_numpy(d[i]), ref)["sqnr_db"] for d in draws
                  if i < len(d) and getattr(d[i], "shape", None) == getattr(b, "shape", None)]
        lowest.append(min(values) if len(values) == len(draws) and values else None)
    return tuple(lowest)


_DEQUANTIZE = ("dequantize_per_tensor", "dequantize_per_channel", "dequantize_affine")
# ops whose every output value is one of their input's values (or 0): a dequantized grid survives them
_KEEPS_GRID = frozenset({
    "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "squeeze", "unsqueeze", "flatten", "clone",
    "contiguous", "expand", "slice", "select", "alias", "detach", "cat", "stack", "relu", "hardtanh", "max_pool2d",
    "max_pool2d_with_indices", "getitem", "pixel_shuffle", "pixel_unshuffle", "flip", "roll", "narrow", "split",
    "split_with_sizes", "chunk", "unbind", "index_select", "gather", "repeat", "tile", "max", "min", "maximum", "minimum", "amax", "amin",
    "clamp", "pad", "constant_pad_nd",
})


def _op_name(target: Any) -> str:
    name = getattr(target, "__name__", "") or str(target)
    parts = str(getattr(target, "_name", "") or name).split("::")[-1]
    return parts.split(".")[0]


def quantized_reference(program: Any, inputs: Sequence[Any]) -> QuantizedReference:
    """Run a quantized program (a ``torch.export.ExportedProgram``, or a ``GraphModule``) in eager PyTorch on
    ``inputs``; each output's scale is intercepted where it leaves a dequantize node, directly or through ops that
    keep the quantized grid (views, ReLU, max pooling, concatenation: the largest scale among their inputs)."""
    import torch
    import torch.utils._pytree as pytree

    module = program.module() if hasattr(program, "module") and hasattr(program, "graph_signature") else program
    if not isinstance(module, torch.fx.GraphModule):
        return QuantizedReference(error=f"the quantize stage returned {type(program).__name__}, not a torch program")
    seen: dict[str, float] = {}
    for node in module.graph.nodes:
        if node.op == "call_function" and _op_name(node.target) in _DEQUANTIZE:
            node.target = _shim(node.target, node.name, seen)
    module.recompile()
    with torch.no_grad():
        outs = leaves(module(*inputs))
    out_nodes = [a for a in pytree.tree_leaves(module.graph.output_node().args[0])]
    scales: list[float | None] = []
    for i in range(len(outs)):
        node = out_nodes[i] if i < len(out_nodes) and isinstance(out_nodes[i], torch.fx.Node) else None
        scales.append(_grid_scale(node, seen) if node is not None else None)
    return QuantizedReference(tuple(outs), tuple(scales))


def _shim(target: Any, name: str, seen: dict[str, float]) -> Any:
    at = 2 if _op_name(target) == "dequantize_affine" else 1  # (input, block_size, scale, …) there

    def dequantize(*args: Any, **kwargs: Any) -> Any:
        scale = args[at] if len(args) > at else kwargs.get("scale")
        with contextlib.suppress(TypeError, ValueError, AttributeError):
            seen[name] = float(scale.max() if hasattr(scale, "max") else scale)  # type: ignore[union-attr,arg-type]
        return target(*args, **kwargs)

    dequantize.__name__ = f"bti_shim_{_op_name(target)}"
    return dequantize


def _grid_scale(node: Any, seen: Mapping[str, float], depth: int = 0) -> float | None:
    """The quantization scale an output node's values sit on, or None."""
    import torch

    if node.name in seen:
        return seen[node.name]
    if depth > 32 or node.op != "call_function" or _op_name(node.target) not in _KEEPS_GRID:
        return None
    srcs = [a for a in node.all_input_nodes if isinstance(a, torch.fx.Node)]
    if _op_name(node.target) in ("clamp", "hardtanh", "pad", "constant_pad_nd", "index_select", "gather", "getitem"):
        srcs = srcs[:1]  # the data operand; the rest are indices or bounds (max/min of two tensors: both are data)
    found = [_grid_scale(s, seen, depth + 1) for s in srcs]
    return max(found) if found and all(s is not None for s in found) else None  # type: ignore[type-var]


def systematic(out: NDArray[Any], ref: NDArray[Any], scale: float | None, along: NDArray[Any] | None = None) -> dict[str, Any]:
    """The error's systematic part, over the finite elements. With a quantization ``scale``: ``out`` fitted as
    ``gain * ref + offset`` by least squares, and ``systematic_steps`` the largest fitted error ``|(gain - 1) * ref +
    offset|`` in steps (well-conditioned at the data points however narrow the reference's range; a wrong scale or zero
    point shows here where no single element leaves the step bound). Without one: ``gain`` through the origin
    (``<out, ref> / <ref, ref>``) and ``offset`` the mean error, each well-conditioned on its own, with ``gain_se``
    the gain's standard error from what its fit leaves. ``along`` (a model's fp32 output, of the same shape) measures
    the gain along it instead, ``<out, along> / <ref, along>``: a reference with rounding noise of its own biases the
    gain through the origin toward zero by its noise power (regression dilution: 4 % at a relative error of 0.2, as
    int8 MobileNetV2's delegate and quantized program each are from fp32), which the fp32 direction does not share.
    ``rms``: the reference's RMS; ``rel_l2``: ``||out - ref|| / ||ref||``."""
    o, r = out.ravel(), ref.ravel()
    keep = np.isfinite(o) & np.isfinite(r)
    w = along.ravel() if along is not None and along.size == out.size and scale is None else None
    if w is not None:
        w = np.where(np.isfinite(w), w, 0.0)[keep]  # a non-finite fp32 element counts for nothing along it
    o, r = o[keep], r[keep]
    if o.size == 0:
        return {"n": 0}
    top = float(np.max(np.abs(r))) or 1.0  # scaled to 1 for the products: no underflow
    rs, os_ = r / top, o / top
    power = float(np.dot(rs, rs))
    figures: dict[str, Any] = {"n": int(o.size), "rms": top * math.sqrt(power / o.size),
                               "rel_l2": float(np.linalg.norm(os_ - rs) / math.sqrt(power)) if power > 0 else 0.0}
    if scale:
        if np.ptp(r) > 0:
            (gain, offset), *_ = np.linalg.lstsq(np.vstack([r, np.ones_like(r)]).T, o, rcond=None)
        else:  # a constant reference: an offset alone
            gain, offset = 1.0, float(np.mean(o - r))
        figures.update(gain=float(gain), offset=float(offset), bias_steps=float(np.mean(o - r)) / scale,
                       systematic_steps=float(np.max(np.abs((gain - 1.0) * r + offset))) / scale)
    else:
        ws = rs if w is None else w / (float(np.max(np.abs(w))) or 1.0)
        if w is not None and not (float(np.dot(rs, ws)) > 0.5 * math.sqrt(power * float(np.dot(ws, ws))) > 0):
            ws, w = rs, None  # fp32 too far from the program's direction (cosine < 0.5, or zero) to measure along it
        across = float(np.dot(rs, ws))
        gain = float(np.dot(os_, ws) / across) if across != 0 else 1.0
        spread = float(np.std(os_ - gain * rs)) * float(np.linalg.norm(ws)) / abs(across) if across != 0 else 0.0
        figures.update(gain=gain, gain_se=spread, offset=float(np.mean(o - r)), **({"gain_along": "fp32"} if w is not None else {}))
    return figures


def quantized_check(path: str, out: NDArray[Any], qref: NDArray[Any], scale: float | None,
                    tol: Mapping[str, Any], fp32: NDArray[Any] | None = None) -> tuple[str | None, dict[str, Any]]:
    """One output against the quantized reference: within ``qtol`` steps of ``scale`` plus ``atol + rtol*|ref|``
    (``QUANTIZED_DEFAULTS`` where the recipe names none). A model's gain is measured along its ``fp32`` output where
    given (``systematic``). Returns (the problem or None, the figures)."""
    qtol = float(tol.get("qtol", QUANTIZED_DEFAULTS["qtol"]))
    atol = float(tol.get("atol", QUANTIZED_DEFAULTS["atol"]))
    rtol = float(tol.get("rtol", QUANTIZED_DEFAULTS["rtol"]))
    o, r = out.astype(np.float64, copy=False), qref.astype(np.float64, copy=False)
    widen = qtol * scale if scale else 0.0
    with np.errstate(all="ignore"):
        diff = np.abs(o - r)
        close = (diff <= atol + widen + rtol * np.abs(r)) | (np.isnan(o) & np.isnan(r)) | (o == r)
    err = float(np.nanmax(diff)) if diff.size and not np.isnan(diff).all() else 0.0
    figures: dict[str, Any] = {"max_abs": err, "scale": scale, "qtol": qtol,
                               "steps": (err / scale if scale else None), **systematic(o, r, scale)}
    model = bool(tol.get("rule") == "model")
    if model:
        along = fp32.astype(np.float64, copy=False) if fp32 is not None else None
        figures.update(systematic(o, r, None, along))  # a model's outputs: the systematic checks of a float output
        figures["scale"] = scale
    # in the float checks' words: max_abs leaves NaN out, so it would read as a pass
    element = _nan_mismatch(path, o, r, out.shape, counted_as="against the quantized program")
    if element is None and not close.all():
        flat = int(np.argmax(~close.ravel()))
        bound = "(a model) " if model else f"{qtol:g} step(s) of scale {scale:.4g} + " if scale else "(not quantized) "
        element = (f"{path}: max_abs {err:.4g} against the quantized program exceeds {bound}atol {atol:g} + rtol "
                   f"{rtol:g}*|ref| ({int((~close).sum())}/{close.size} elements; first at {_index(flat, out.shape)}: "
                   f"{o.ravel()[flat]:.6g} vs {r.ravel()[flat]:.6g})")
        if not model:
            return element, figures
    bias = _systematic_problem(path, o, r, figures, scale, model)
    if element and bias:  # a model's expected failure names the element bound alone: a systematic error is a change
        return f"{element}; and {bias.removeprefix(path + ': ')}", figures
    return element or bias, figures


def _systematic_problem(path: str, o: NDArray[Any], r: NDArray[Any], figures: dict[str, Any], scale: float | None,
                        model: bool) -> str | None:
    """The error's systematic part against its bound: a quantized op output's fitted steps; a float output's (or any
    model output's) gain and mean error, a model's allowances widened by three standard errors of the estimates, each
    taken from the residual of its own fit."""
    fitted = None if model else figures.get("systematic_steps")
    if fitted is not None and figures["n"] >= SYSTEMATIC_MIN_N and fitted > SYSTEMATIC_STEPS:
        return (f"{path}: a systematic error of {fitted:.3g} step(s) against the quantized program (gain "
                f"{figures['gain']:.4g}, offset {figures['offset'] / (scale or 1.0):.3g} step(s); at most "
                f"{SYSTEMATIC_STEPS:g}): a wrong scale or zero point")
    gain, offset, rms = figures.get("gain"), figures.get("offset"), figures.get("rms")
    if not (model or not scale) or gain is None or offset is None or figures["n"] < SYSTEMATIC_MIN_N or not rms:
        return None
    gain_room, allowance = SYSTEMATIC_REL, SYSTEMATIC_REL * rms
    if model:  # the estimates' own sampling error, from what each fit leaves (not from the error it measures)
        keep = np.isfinite(o) & np.isfinite(r)
        design = math.sqrt(figures["n"] / min(figures["n"], MODEL_N_EFF))  # correlated errors: fewer independent elements
        gain_room += MEAN_SE * design * float(figures.get("gain_se") or 0.0)
        allowance += MEAN_SE * design * float(np.std(o[keep] - r[keep] - offset)) / math.sqrt(figures["n"])
    if abs(gain - 1.0) > gain_room or abs(offset) > allowance:
        return (f"{path}: a systematic error against the quantized program ({'a model' if model else 'not quantized'}: "
                f"gain {gain:.4g}, offset {offset:.3g} = {abs(offset) / rms:.2%} of the reference's RMS; at most "
                f"{gain_room:.2%} off and {allowance / rms:.2%}): the output is off in scale or magnitude")
    return None


# ------------------------------------------------------------------------------------------------------ the judge
@dataclass(frozen=True)
class Comparison:
    """What the outputs were held to and how they did. ``owner``: who a failure belongs to (``backend``: the
    delegate diverged from its reference; ``quantizer``: only the quantization-quality floor failed)."""

    ok: bool
    message: str
    outputs: tuple[Mapping[str, Any], ...]
    tolerance: Mapping[str, Any]
    accuracy: Mapping[str, Any] | None = None
    owner: str | None = None
    reference: str = "eager"  # eager, fp64, quantized, baseline


class Subject(Protocol):
    """What the judge reads of a (case, axes) group (``harness.stages.Group``)."""

    built: Built  # judged only once built
    ref: list[Any]
    case_tolerance: dict[str, Any]
    fp64_error: str
    fp64_source: str

    def fp64_reference(self) -> list[Any] | None: ...


def device_tolerance(tol: Mapping[str, Any], quantized: bool | None = None) -> dict[str, Any]:
    """What a run against eager outputs alone can be held to, from the tolerance its item was (or would be) judged by:
    a bundled program on a device (``bti verify``: the bundle's expected outputs are eager's), an opdiff item's further
    input sets. A quantized item (``quantized``, or a judged tolerance whose ``reference`` is ``quantized``) keeps its
    floors against fp32; a float item its ``atol``/``rtol`` and floors. The judge's own figures (``reference``, ``k``,
    ``fp64``, ``qtol``) stay behind."""
    if quantized is None:
        quantized = tol.get("reference") == "quantized"
    if quantized:
        return floors_only(tol)
    return {k: v for k, v in tol.items() if k in ("atol", "rtol", "sqnr_db", "cosine", "shape_only")}


def tolerance(item: Item, recipe: Recipe, group: Subject) -> dict[str, Any]:
    """What the item's outputs are held to: the recipe's for the dtype, with the case's own where it does not
    quantize (a quantized recipe keeps only the case's shape-only rule)."""
    from harness.suites import case_judgement

    tol: dict[str, Any] = dict(recipe.tolerance(item.axes.dtype))
    case_tol = dict(group.case_tolerance)
    own = case_judgement(item.case, item.axes.dtype, recipe).tolerance
    for key, value in (own or {}).items():  # the case source's override (OpInfo's) widens, never narrows
        case_tol[key] = max(float(value), float(tol.get(key) or 0.0), float(case_tol.get(key) or 0.0))
    if group.built is not None and group.built.random_outputs:
        case_tol["shape_only"] = True  # it draws random numbers: shapes and dtypes are the contract
    if not recipe.quantized:
        tol.update(case_tol)
    elif case_tol.get("shape_only"):
        tol["shape_only"] = True
    return tol


@dataclass
class _Outputs:
    """The outputs of one item, converted once."""

    raw: list[Any]
    arrays: list[NDArray[Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.arrays = [to_numpy(o) for o in self.raw]


def judge(item: Item, recipe: Recipe, group: Subject, outs: list[Any], baseline: Any = None, rule: str = "allclose",
          deterministic: bool | None = None, quantized: QuantizedReference | None = None) -> Comparison:
    """Every output of one item against its reference: a baseline's or a pair's outputs where given; else the
    quantized reference for a quantized recipe, dynamo's rule for a model under it, or fp64 with its noise floor.
    Then the model-level checks (top-1 / next-token agreement, determinism)."""
    refs = group.ref if baseline is None else baseline.outputs
    tol = tolerance(item, recipe, group)
    got = _Outputs(outs)
    want = [to_numpy(r) for r in refs]
    dtypes = None
    if not group.built.ref_dtype or baseline is not None:
        dtypes = [(dtype_name(o), dtype_name(r)) for o, r in zip(outs, refs, strict=False)]
        low = getattr(recipe.options, "autocast", None)
        if low:
            dtypes = [_autocast_pair(o, pair, str(low)) for o, pair in zip(outs, dtypes, strict=False)]
    verdict = compare(got.arrays, want, tol, dtypes)
    result = Comparison(verdict.ok, verdict.message, tuple(verdict.stats), tol)
    judgeable = not tol.get("shape_only") and not verdict.structural
    plain = baseline is None and judgeable
    if recipe.quantized and judgeable and (baseline is None or quantized is not None):
        # against its own quantized program, beside a baseline too (whose outputs then stand in for fp32's)
        tol = quantized_bound(item, tol)
        eager = want if baseline is None else [to_numpy(r) for r in group.ref]  # a model's gain is measured along eager fp32
        result = _judge_quantized(got, want, tol, quantized, verdict, eager)
    elif plain and is_model(item) and rule == "dynamo":
        # under autocast the device computes in the autocast dtype: its tolerance and multiplier (dynamo's --amp)
        compute = str(getattr(recipe.options, "autocast", None) or item.axes.dtype)
        ok, message, accuracy = _dynamo(compute, group, got, refs)
        result = Comparison(ok, message, tuple(verdict.stats), {"rule": "dynamo", "tol": DYNAMO_TOL.get(compute, 1e-4)},
                            accuracy, reference="fp64")
    elif plain:
        result = _judge_fp64(group, got, want, tol, verdict, model=is_model(item))
    return _model_checks(item, recipe, group, got, want, result, deterministic)


def _autocast_pair(out: Any, pair: tuple[str, str], low: str) -> tuple[str, str]:
    """An autocast backend returns its outputs in the autocast dtype widened to the inputs' (autocast is judged on
    values), so an output the op itself asked in that dtype (``x.to(torch.bfloat16)`` under bf16 autocast) comes back
    wide: where the reference is in the autocast dtype and every value of the output is one of that dtype's, the
    dtypes agree. A wide output with any value the autocast dtype cannot hold is a real dtype mismatch."""
    have, want = pair
    if want != low or have not in ("float32", "float64") or not hasattr(out, "to"):
        return pair
    import torch

    narrow = out.to(getattr(torch, low)).to(out.dtype)
    exact = bool(((narrow == out) | torch.isnan(out)).all())
    return (low, want) if exact else pair


def model_bound(tol: dict[str, Any]) -> dict[str, Any]:
    """A model's outputs under a quantized recipe: the suite's model bound, or the recipe's own where wider; no step
    allowance."""
    return {**tol, **{k: max(float(tol.get(k, QUANTIZED_DEFAULTS[k])), MODEL_QUANTIZED[k]) for k in ("atol", "rtol")},
            "qtol": MODEL_QUANTIZED["qtol"], "rule": "model"}


def quantized_bound(item: Item, tol: dict[str, Any]) -> dict[str, Any]:
    """What an item of a quantized recipe is held to against its quantized program, as its record names it: a model's
    bound, an operator's tolerance over ExecuTorch's tester defaults (``bti repro`` carries the same)."""
    return model_bound(tol) if is_model(item) else {**QUANTIZED_DEFAULTS, **tol}


def is_model(item: Item) -> bool:
    from harness.suites import is_model_kind

    return is_model_kind(item.case.kind)


def _judge_quantized(got: _Outputs, fp32: list[NDArray[Any]], tol: dict[str, Any], q: QuantizedReference | None,
                     fallback: Verdict, eager: list[NDArray[Any]] | None = None) -> Comparison:
    """The delegate against its quantized program (the backend's), then the program against fp32 (the quantizer's).
    Each output's top-level figures stay against fp32 (as every report and ``bti compare`` read them); the figures
    against the quantized program are under ``quantized``, the program's own against fp32 under ``fp32``."""
    floors = floors_only(tol)
    if q is None or q.error or len(q.outputs) != len(got.arrays):
        why = (q.error if q is not None and q.error else "no quantized program to run" if q is None
               else f"it gave {len(q.outputs)} outputs for {len(got.arrays)}")
        acc = {"quantized_reference": f"none ({why}): judged against fp32 alone"}
        alone = compare(got.arrays, fp32, floors)  # the floors against fp32; the step budget needs the program
        return Comparison(alone.ok, alone.message, tuple(alone.stats), floors, acc, None if alone.ok else "backend")
    qref = [to_numpy(r) for r in q.outputs]
    problems, quality, stats = [], [], []
    for i, (o, r, f, scale, entry) in enumerate(zip(got.arrays, qref, fp32, q.scales, fallback.stats, strict=True)):
        path, entry = f"output[{i}]", dict(entry)  # against fp32, as compare() measured it
        if o.shape != r.shape:
            problems.append(f"{path}: shape {list(o.shape)} != the quantized program's {list(r.shape)}")
            stats.append(entry)
            continue
        if _is_float(r):
            e = eager[i] if eager is not None and i < len(eager) else f
            problem, figures = quantized_check(path, o, r, scale, tol, e if e.shape == o.shape and _is_float(e) else None)
            figures["sqnr_db"] = output_stats(o, r)["sqnr_db"]
            apart = _apart(path, figures, tol)
            problem = f"{problem}; and {apart.removeprefix(path + ': ')}" if problem and apart else problem or apart
            moved = q.sensitivity_db[i] if i < len(q.sensitivity_db) else None
            near = q.near_tie_db[i] if i < len(q.near_tie_db) else None
            said = []  # figures for the triager: the verdict stays the element bound's
            if moved is not None:
                figures["program_self_sqnr_db"] = moved
                said.append(f"its inputs moved one float step: {_db(moved)} from its own output, the lowest of {SENSITIVITY_DRAWS} draws")
            if near is not None:  # measured whatever the inputs (token ids too), so it may be said alone
                figures["program_near_tie_sqnr_db"] = near
                said.append(f"values within {NEAR_TIE:g} step of a tie rounded the other way: {_db(near)}")
            if problem and said:
                problem += f" (the program itself, {'; '.join(said)})"
        else:
            problem, figures = _check(path, o, r, {}, {"atol": 0.0, "rtol": 0.0}), {}
        entry["quantized"] = figures
        if r.shape == f.shape:  # the quantization quality: the program against fp32
            q_stats = output_stats(r, f)
            entry["fp32"] = {"program_sqnr_db": q_stats["sqnr_db"], "program_cosine": q_stats["cosine"],
                             "program_max_abs": q_stats["max_abs"]}
            floor = _quality(path, q_stats, floors)
            if floor:
                quality.append(floor)
        stats.append(entry)
        if problem:
            problems.append(problem)
    tolerance = {**tol, "reference": "quantized"}
    if problems:
        return Comparison(False, "; ".join(problems), tuple(stats), tolerance, owner="backend", reference="quantized")
    if quality:
        msg = "quantizer: " + "; ".join(quality) + " (the delegate matches its quantized program)"
        return Comparison(False, msg, tuple(stats), tolerance, owner="quantizer", reference="quantized")
    return Comparison(True, "", tuple(stats), tolerance, reference="quantized")


def _apart(path: str, figures: Mapping[str, Any], tol: Mapping[str, Any]) -> str | None:
    """A model's output against its own quantized program, relative to its size: the element bound is absolute (atol
    0.1), so logits of RMS 0.02-0.04 pass it even when the delegate's output is noise (NFNet's computed weights on
    XNNPACK static per-tensor: SQNR -3 and -5 dB against the program, cosine 0.15 and 0.50 against fp32, while the
    zoo's legitimate int8 programs are 13.9-65 dB from their delegates: docs/recipes.md). The recipe's ``sqnr_db``
    floor, which the program itself is held to against fp32, holds the delegate against the program too, from
    ``SYSTEMATIC_MIN_N`` finite elements on, where the program is not all zero."""
    floor, sqnr_db = tol.get("sqnr_db"), figures["sqnr_db"]
    if tol.get("rule") != "model" or floor is None or not sqnr_db < float(floor):
        return None
    # a handful of logits (a classifier head of 2-8) is one rounding step from any SQNR, as for the systematic check;
    # an all-zero program has no power to measure against (the element bound judges what the delegate adds). Both
    # from the figures ``systematic`` already took over the finite elements: their count and the program's RMS
    if figures.get("n", 0) < SYSTEMATIC_MIN_N or not figures.get("rms"):
        return None
    return (f"{path}: SQNR {sqnr_db:.2f} dB against the quantized program < floor {float(floor):g} dB (a model): the "
            f"delegate's output is not its program's")


def _db(value: float) -> str:
    return "unchanged" if value == math.inf else f"{value:.1f} dB"


def floors_only(tol: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a quantized tolerance that holds outputs against fp32: the ``sqnr_db`` and ``cosine`` floors (and
    ``shape_only``)."""
    return {k: v for k, v in tol.items() if k in ("sqnr_db", "cosine", "shape_only")}


def _quality(path: str, s: Mapping[str, Any], tol: Mapping[str, Any]) -> str | None:
    floor, cos = tol.get("sqnr_db"), tol.get("cosine")
    if floor is not None and s["sqnr_db"] < float(floor):
        return f"{path}: the quantized program's SQNR against fp32 {s['sqnr_db']:.2f} dB < floor {float(floor):g} dB"
    if cos is not None and s["cosine"] < float(cos):
        return f"{path}: the quantized program's cosine against fp32 {s['cosine']:.6f} < floor {float(cos):g}"
    return None


def _judge_fp64(group: Subject, got: _Outputs, eager: list[NDArray[Any]], tol: dict[str, Any],
                verdict: Verdict, model: bool = False) -> Comparison:
    """Float outputs against fp64 with eager's noise floor; integer and bool outputs as compared against eager. The
    SQNR and cosine floors stay on the eager comparison. Without an fp64 reference, the eager comparison decides."""
    fp64 = group.fp64_reference() if any(_is_float(e) for e in eager) else None
    if fp64 is None or len(fp64) != len(eager):
        why = group.fp64_error or ("it gave a different number of outputs" if fp64 is not None else "")
        acc = {"fp64_reference": f"none ({why}): against eager alone"} if why else None
        return Comparison(verdict.ok, verdict.message, tuple(verdict.stats), tol, acc)
    problems, stats = [], []
    for i, (o, e, f_raw, entry) in enumerate(zip(got.arrays, eager, fp64, verdict.stats, strict=True)):
        path, entry = f"output[{i}]", dict(entry)
        f = to_numpy(f_raw)
        if _is_float(e) and _is_float(o) and f.shape == e.shape:
            problem, entry["fp64"] = fp64_check(path, o, e, f, tol, dtype_name(got.raw[i]), model=model)
            problem = problem or _floors(path, entry, tol)
        else:
            problem = _check(path, o, e, entry, tol)
        stats.append(entry)
        if problem:
            problems.append(problem)
    floor = {"floor": MODEL_FLOOR} if model else {}
    return Comparison(not problems, "; ".join(problems), tuple(stats), {**tol, "k": NOISE_K, "fp64": group.fp64_source, **floor},
                      reference="fp64")


def _model_checks(item: Item, recipe: Recipe, group: Subject, got: _Outputs, want: list[NDArray[Any]], result: Comparison,
                  deterministic: bool | None) -> Comparison:
    ok, message = result.ok, result.message
    accuracy: dict[str, Any] = dict(result.accuracy or {})
    task = group.built.task
    if task and result.outputs and len(got.arrays) == len(want):
        accuracy.update(_agreement(task, got.arrays[0], want[0]))
        agree = accuracy.get("top1_agreement", accuracy.get("next_token_agreement"))
        floor = recipe.accuracy.top1
        if floor is not None and agree is not None and agree < floor:
            ok, message = False, "; ".join(filter(None, [message, f"{'top-1' if task == 'classifier' else 'next-token'} agreement "
                                                                  f"{agree:.4g} < {floor:g} (accuracy.top1)"]))
    if deterministic is not None:
        accuracy["deterministic"] = deterministic
        if recipe.accuracy.deterministic and not deterministic:
            ok, message = False, "; ".join(filter(None, [message, "two runs on the device gave different outputs (accuracy.deterministic)"]))
    return Comparison(ok, message, result.outputs, result.tolerance, accuracy or None,
                      None if ok else (result.owner or "backend"), result.reference)


def _dynamo(compute: str, group: Subject, got: _Outputs, refs: list[Any]) -> tuple[bool, str, dict[str, Any]]:
    """Every output held to dynamo's benchmark rule (``dynamo_rule``) at the tolerance of the dtype the device
    computed in; which rule passed is recorded."""
    fp64 = group.fp64_reference()
    tol = DYNAMO_TOL.get(compute, 1e-4)
    cosine = fp64 is None and bool(group.fp64_error)  # dynamo's harness: "fp64 golden ref were not generated"
    results = []
    for i, (o, r) in enumerate(zip(got.arrays, refs, strict=True)):
        f = to_numpy(fp64[i]) if fp64 is not None and i < len(fp64) else None
        low = compute in ("float16", "bfloat16")
        results.append(dynamo_rule(o, to_numpy(r), f, tol, compute if low else dtype_name(got.raw[i]), cosine))
    ok = all(x["pass"] for x in results)
    rules = {x["rule"] for x in results}
    acc: dict[str, Any] = {"rule": "none" if not ok else next((k for k in ("rmse", "cosine") if k in rules), "allclose"),
                           "rule_tol": tol}
    if fp64 is None:  # never silent: the RMSE arm could not be tried
        acc["fp64_reference"] = (f"none ({group.fp64_error}): allclose, then cosine >= 0.99 as dynamo's harness falls back"
                                 if cosine else "none (no floating-point outputs): allclose only")
    cosines = [x["cosine"] for x in results if "cosine" in x]
    if cosines:  # the margin of the cosine arm: the lowest output's
        acc["cosine"] = min(cosines)
    rmses = [(x["rmse"], x["rmse_cpu"], x["multiplier"]) for x in results if "rmse" in x]
    if rmses:
        worst = max(rmses, key=lambda t: t[0] - t[2] * t[1])
        acc.update({"rmse": worst[0], "rmse_cpu": worst[1], "multiplier": worst[2]})
    why = "; ".join(f"output[{i}]: {x.get('why', 'mismatch')}" for i, x in enumerate(results) if not x["pass"])
    return ok, (f"dynamo accuracy rule: {why}" if why else ""), acc


def _agreement(task: str, out: NDArray[Any], ref: NDArray[Any]) -> dict[str, Any]:
    if out.shape != ref.shape or out.ndim == 0:
        return {}
    agree = float(np.mean(np.argmax(out, axis=-1) == np.argmax(ref, axis=-1)))
    key = "top1_agreement" if task == "classifier" else "next_token_agreement"
    return {key: round(agree, 6)}
