from __future__ import annotations

import math

import numpy as np

from harness.judge import compare, output_stats


def test_exact_match_has_infinite_sqnr_and_unit_cosine() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    s = output_stats(a, a)
    assert s["max_abs"] == 0.0 and s["sqnr_db"] == math.inf and s["cosine"] == 1.0


def test_stats_values() -> None:
    ref = np.array([1.0, 2.0, 4.0])
    out = np.array([1.1, 2.0, 3.6])
    s = output_stats(out, ref)
    assert np.isclose(s["max_abs"], 0.4)
    assert np.isclose(s["max_rel"], 0.1)
    assert np.isclose(s["mae"], 0.5 / 3)
    assert np.isclose(s["mse"], (0.01 + 0.16) / 3)
    assert np.isclose(s["sqnr_db"], 10 * math.log10(21 / 0.17))


def test_nan_in_reference_matched_by_nan_is_a_match() -> None:
    ref = np.array([np.nan, 1.0, np.inf])
    out = np.array([np.nan, 1.0, np.inf])
    v = compare([out], [ref], {"atol": 1e-6, "rtol": 0.0})
    assert v.ok, v.message
    bad = compare([np.array([0.0, 1.0, np.inf])], [ref], {"atol": 1e-6})
    assert not bad.ok and "NaN" in bad.message and bad.message.startswith("output[0]")


def test_shape_and_count_mismatch_do_not_raise() -> None:
    v = compare([np.zeros((2, 3))], [np.zeros((3, 2))], {"atol": 1e-3})
    assert not v.ok and v.message == "output[0]: shape [2, 3] != reference [3, 2]" and v.structural
    v = compare([np.zeros(2)], [np.zeros(2), np.zeros(2)], {"atol": 1e-3})
    assert not v.ok and "count 1 != reference count 2" in v.message and v.structural


def test_dtype_mismatch_is_reported() -> None:
    v = compare([np.zeros(2)], [np.zeros(2)], {"atol": 1e-3}, dtypes=[("float16", "float32")])
    assert not v.ok and "dtype float16 != reference float32" in v.message and v.structural


def test_tolerance_message_is_path_shaped() -> None:
    ref = np.zeros((2, 2))
    out = ref.copy()
    out[1, 0] = 0.5
    v = compare([ref, out], [ref, ref], {"atol": 1e-3, "rtol": 0.0})
    assert not v.ok
    assert v.message.startswith("output[1]: max_abs 0.5 exceeds atol 0.001")
    assert "first at [1, 0]" in v.message
    assert not v.structural  # a numeric miss: the dynamo accuracy rule may still judge it (stages._compare)


def test_sqnr_floor_judges_quantized_output() -> None:
    rng = np.random.default_rng(0)
    ref = rng.standard_normal(1000)
    noisy = ref + rng.standard_normal(1000) * 0.1  # ~20 dB
    assert compare([noisy], [ref], {"sqnr_db": 15}).ok
    v = compare([noisy], [ref], {"sqnr_db": 30})
    assert not v.ok and "SQNR" in v.message and "< floor 30 dB" in v.message


def test_a_long_warm_call_ends_the_timing_and_a_short_or_cold_one_does_not(monkeypatch) -> None:
    """A 14-minute call of BERT-large on the portable kernels would otherwise run warmup + repeats times (4 in the
    recipes) and meet its timeout: with ``long_s``, a warm call that long ends its phase, a cold one (no call before
    it) is never the only sample, and the samples say how many were taken. Without ``long_s`` (``bti bench``), the
    counts asked for. The clock is this test's: each call takes the seconds it is given."""
    from harness import metrics

    clock = [0.0]
    monkeypatch.setattr(metrics.time, "perf_counter", lambda: clock[0])
    calls: list[int] = []

    def call(seconds: float) -> int:
        calls.append(1)
        clock[0] += seconds
        return len(calls)

    def run(seconds: float, warmup: int, repeats: int, long_s: float | None = 10.0) -> tuple[int, list[float]]:
        calls.clear()
        result, samples = metrics.timed_calls(lambda: call(seconds), warmup, repeats, long_s)
        assert result == len(calls)
        return len(calls), samples

    assert run(12.0, warmup=2, repeats=5) == (2, [12000.0])  # one warm-up, one sample
    assert run(12.0, warmup=0, repeats=3) == (2, [12000.0, 12000.0])  # the cold call is not the only sample
    assert run(12.0, warmup=0, repeats=1) == (1, [12000.0])
    assert run(0.5, warmup=2, repeats=5) == (7, [500.0] * 5)
    assert run(12.0, warmup=1, repeats=3, long_s=None) == (4, [12000.0] * 3)
