"""Speedup 6: torchao's ``HistogramObserver._non_linear_param_search``.

``convert_pt2e`` calls it once per activation observer; it walks its quantile bounds in steps of 1e-5, up to
100,000 iterations, each comparing 0-dim tensors (``cSum[l] < next_alpha * total``): ~50 ms per observer, up to
0.5 s for an ``add`` with small inputs. bti runs the same loop on the cumulative sums as Python floats. torch
compares a float32 tensor with a Python float in float32 (the scalar is rounded to float32 first), so each bound is
rounded to float32 (``numpy.float32``) before the comparison: the same booleans, the same bins, the same calls to
``_compute_quantization_error`` and the same result. Only float32 CPU histograms take this path; anything else runs
torchao's method.

Installed only when torchao's pt2e observers are already imported.
"""

from __future__ import annotations

import sys
from typing import Any

from harness.speedups.base import VERIFIED, Speedup

MODULE = "torchao.quantization.pt2e.observer"


def _quantile_bins(csum: list[float], lo: float, hi: float, start_bin: int, end_bin: int) -> tuple[int, int]:
    """torchao's scan for the left and right bins between the quantile bounds ``lo`` and ``hi``."""
    left, right = start_bin, end_bin
    while left < end_bin and csum[left] < lo:
        left = left + 1
    while right > start_bin and csum[right] > hi:
        right = right - 1
    return left, right


def search(self: Any) -> Any:
    """``_non_linear_param_search`` with the bin scan on Python floats (float32-rounded bounds, as torch compares);
    everything else is torchao's code. ``self`` is the observer."""
    import numpy as np
    import torch

    if self.histogram.dtype != torch.float32 or self.histogram.device.type != "cpu":
        return SPEEDUP.original(self)
    assert self.histogram.size()[0] == self.bins, "bins mismatch"
    bin_width = (self.max_val - self.min_val) / self.bins

    # cumulative sum
    total = torch.sum(self.histogram).item()
    cSum = torch.cumsum(self.histogram, dim=0)
    csum = cSum.tolist()  # exact: float32 values as Python floats
    f32 = np.float32

    stepsize, alpha, beta = 1e-5, 0.0, 1.0  # granularity, lower bound, upper bound
    start_bin, end_bin, norm_min = 0, self.bins - 1, float("inf")

    with np.errstate(over="ignore", invalid="ignore"):
        while alpha < beta:
            # Find the next step
            next_alpha = alpha + stepsize
            next_beta = beta - stepsize

            # find the left and right bins between the quantile bounds
            lo = float(f32(next_alpha * total))  # torch rounds the scalar to the tensor's float32
            hi = float(f32(next_beta * total))
            l, r = _quantile_bins(csum, lo, hi, start_bin, end_bin)  # noqa: E741

            # decide the next move
            next_start_bin = start_bin
            next_end_bin = end_bin
            if (l - start_bin) > (end_bin - r):
                # move the start bin
                next_start_bin = l
                alpha = next_alpha
            else:
                # move the end bin
                next_end_bin = r
                beta = next_beta

            if next_start_bin == start_bin and next_end_bin == end_bin:
                continue

            # calculate the quantization error using next_start_bin and next_end_bin
            norm = self._compute_quantization_error(next_start_bin, next_end_bin)

            if norm > norm_min:
                break
            norm_min = norm
            start_bin = next_start_bin
            end_bin = next_end_bin

    new_min = self.min_val + bin_width * start_bin
    new_max = self.min_val + bin_width * (end_bin + 1)
    return new_min, new_max


class HistogramSearch(Speedup):
    number, name, verified_on = 6, "histogram-search", VERIFIED

    def __init__(self) -> None:
        super().__init__()
        self.original: Any = None  # torchao's method, while installed

    def install(self) -> None:
        observer = sys.modules.get(MODULE)
        if observer is not None:
            self.original = self.patch(observer.HistogramObserver, "_non_linear_param_search", search)

SPEEDUP = HistogramSearch()
