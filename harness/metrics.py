"""Timing and the difference figures of two output lists (torch-free). What outputs are held to is ``harness.judge``'s."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

LONG_CALL_S = 10.0  # in bti run, a warm call at least this long ends the timing (one warm-up, one sample)


def timed_calls(call: Callable[[], Any], warmup: int, repeats: int, long_s: float | None = None) -> tuple[Any, list[float]]:
    """Call ``warmup`` times untimed, then ``repeats`` (at least 1) times timed: (last result, ms per call).

    With ``long_s`` (``bti run``'s run stage: ``LONG_CALL_S``), a warm call that takes that long or more ends its
    phase: one warm-up warms, and one warm sample of ten seconds or more has its noise well under the figure, where
    each more call of a 14-minute BERT-large on the portable kernels would only bring the item nearer its timeout. A
    cold call (no call before it) never ends the timed phase. The record's ``repeats`` counts the samples taken."""
    result = None
    for _ in range(warmup):
        t0 = time.perf_counter()
        result = call()
        if long_s is not None and time.perf_counter() - t0 >= long_s:
            break
    samples: list[float] = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        result = call()
        samples.append((time.perf_counter() - t0) * 1000.0)
        warm = warmup > 0 or len(samples) > 1  # a call ran before this one
        if long_s is not None and warm and samples[-1] >= long_s * 1000.0:
            break
    return result, samples


def diff_figures(base: list[NDArray[Any]], out: list[NDArray[Any]]) -> dict[str, Any]:
    """How far one output list is from another, as figures (not a verdict): MSE, max and mean absolute difference
    over every element of every output (float64), or the reason they are not comparable. The computation and the codes
    are opdiff's ``diff_metrics``, so its results format carries them as they are."""
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
