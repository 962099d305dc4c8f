"""Output comparison with numpy (torch-free: callers pass numpy arrays).

Per output: max_abs, max_rel, mae, mse, sqnr_db, cosine. NaN in the reference matched by NaN in
the output is a match (and excluded from the statistics); Inf must match Inf of the same sign.
Shape and dtype mismatches never raise: they come back as a path-shaped message.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

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


def _check(path: str, out: NDArray[Any], ref: NDArray[Any], s: dict[str, Any], tol: dict[str, float]) -> str | None:
    o = out.astype(np.float64, copy=False)
    r = ref.astype(np.float64, copy=False)
    nan_bad = np.isnan(o) != np.isnan(r)
    if nan_bad.any():
        idx = [int(v) for v in np.unravel_index(int(np.argmax(nan_bad)), out.shape)] if out.ndim else []
        return f"{path}: NaN where the reference has none (or the reverse) at {idx}"
    atol, rtol = tol.get("atol"), tol.get("rtol")
    if atol is not None or rtol is not None:
        a, rt = float(atol or 0.0), float(rtol or 0.0)
        with np.errstate(all="ignore"):
            close = np.isclose(o, r, rtol=rt, atol=a, equal_nan=True)
        if not close.all():
            flat = int(np.argmax(~close))
            idx = [int(v) for v in np.unravel_index(flat, out.shape)] if out.ndim else []
            bad = int((~close).sum())
            return (f"{path}: max_abs {s['max_abs']:.4g} exceeds atol {a:g} + rtol {rt:g}*|ref| "
                    f"({bad}/{close.size} elements; first at {idx}: {o.ravel()[flat]:.6g} vs {r.ravel()[flat]:.6g})")
    floor = tol.get("sqnr_db")
    if floor is not None and s["sqnr_db"] < float(floor):
        return f"{path}: SQNR {s['sqnr_db']:.2f} dB < floor {float(floor):g} dB (max_abs {s['max_abs']:.4g})"
    cos = tol.get("cosine")
    if cos is not None and s["cosine"] < float(cos):
        return f"{path}: cosine {s['cosine']:.6f} < floor {float(cos):g} (max_abs {s['max_abs']:.4g})"
    return None


def timed_calls(call: Callable[[], Any], warmup: int, repeats: int) -> tuple[Any, list[float]]:
    """Call ``warmup`` times untimed, then ``repeats`` (at least 1) times timed: (last result, ms per call)."""
    result = None
    for _ in range(warmup):
        result = call()
    samples = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        result = call()
        samples.append((time.perf_counter() - t0) * 1000.0)
    return result, samples


def opdiff_diff(base: list[NDArray[Any]], out: list[NDArray[Any]]) -> dict[str, Any]:
    """opdiff's ``diff_metrics`` of one output list against another: MSE, max and mean absolute difference over every
    element of every output (float64), or the reason they are not comparable, with opdiff's codes."""
    if len(base) != len(out):
        return {"ok": False, "code": "NOT_COMPARABLE_SHAPE", "msg": "len mismatch"}
    mse_sum = abs_sum = max_abs = 0.0
    n = 0
    for x, y in zip(base, out, strict=True):
        a, b = np.asarray(x), np.asarray(y)
        a, b = a.reshape(1) if a.shape == () else a, b.reshape(1) if b.shape == () else b  # rank 0 as (1,)
        if a.shape != b.shape:
            return {"ok": False, "code": "NOT_COMPARABLE_SHAPE", "msg": "shape mismatch"}
        if a.size == 0 or b.size == 0:
            return {"ok": False, "code": "NOT_COMPARABLE_EMPTY", "msg": None}
        da, db = a.astype(np.float64), b.astype(np.float64)
        if np.isnan(da).any():
            return {"ok": False, "code": "NAN_IN_BASELINE", "msg": "baseline contains NaN"}
        if np.isnan(db).any():
            return {"ok": False, "code": "NAN_IN_OUTPUT", "msg": "output contains NaN"}
        d = da - db
        ad = np.abs(d)
        max_abs = max(max_abs, float(np.max(ad)))
        abs_sum += float(np.sum(ad))
        mse_sum += float(np.sum(d * d))
        n += int(d.size)
    if n == 0:
        return {"ok": False, "code": "NOT_COMPARABLE_EMPTY", "msg": None}
    return {"ok": True, "mse": mse_sum / n, "max_abs": max_abs, "mean_abs": abs_sum / n}


def latency_stats(samples: list[float]) -> dict[str, float]:
    """Median, 90th percentile and minimum of per-call milliseconds."""
    arr = np.asarray(samples)
    return {"median": float(np.median(arr)), "p90": float(np.percentile(arr, 90)), "min": float(arr.min())}


# Dynamo's benchmark accuracy rule (torch/_dynamo/utils.py `same`, as `benchmarks/dynamo` calls it for
# inference): the tolerance per dtype, and RMSE multipliers.
DYNAMO_TOL = {"float32": 1e-4, "float64": 1e-4, "float16": 1e-3, "bfloat16": 1e-2}


def _rmse(a: NDArray[Any], b: NDArray[Any]) -> float:
    return float(np.sqrt(np.mean(np.square(a - b)))) if a.size else 0.0


def dynamo_rule(res: NDArray[Any], ref: NDArray[Any], fp64: NDArray[Any] | None, tol: float, res_dtype: str) -> dict[str, Any]:
    """One output held to dynamo's rule. ``res`` is the device's output, ``ref`` the CPU's in the same dtype,
    ``fp64`` the CPU's in float64. Passes when allclose(ref, res) at ``tol``; else when
    RMSE(res, fp64) ≤ m·RMSE(ref, fp64) + tol/10, with m = 3 for float16/bfloat16 outputs, small (< 1000
    elements) or 1×1-spatial outputs, or a loose tolerance (≥ 2e-2), else 2. Returns ``{"pass", "rule", ...}``:
    the rule that passed (``allclose`` or ``rmse``), or ``none``."""
    if res.shape != ref.shape:
        return {"pass": False, "rule": "none", "why": f"shape {list(res.shape)} != {list(ref.shape)}"}
    if not (np.issubdtype(res.dtype, np.floating) or np.issubdtype(res.dtype, np.complexfloating)):
        same = bool(np.array_equal(res, ref))
        return {"pass": same, "rule": "equal" if same else "none"}
    r = res.astype(np.float64)
    c = ref.astype(res.dtype).astype(np.float64)  # dynamo casts the reference to the result's dtype first
    if np.allclose(c, r, atol=tol, rtol=tol):
        return {"pass": True, "rule": "allclose", "tol": tol}
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
