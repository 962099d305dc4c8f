"""Speedups 5 and 6 (harness/speedups/) compute exactly what torchao computes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.speedup_on import all_off, speedup_on


@pytest.fixture(autouse=True)
def _speedups_off() -> Iterator[None]:
    yield from all_off()  # each test starts from torch's own code, whatever ran before it in this process


torch = pytest.importorskip("torch")
observer = pytest.importorskip("torchao.quantization.pt2e.observer")


def test_histogram_search_matches_torchao() -> None:
    from harness.speedups import histogram_search

    histogram_search.SPEEDUP.disable()
    original = observer.HistogramObserver._non_linear_param_search
    with speedup_on("histogram-search"):
        assert observer.HistogramObserver._non_linear_param_search is histogram_search.search
        _check_search(original, histogram_search.search)
    assert observer.HistogramObserver._non_linear_param_search is original


def _check_search(original: object, search: object) -> None:
    g = torch.Generator().manual_seed(0)
    checked = 0
    for trial in range(60):
        size = int(torch.randint(1, 20 if trial % 3 == 0 else 2000, (1,), generator=g))
        x = torch.randn(size, generator=g)
        x = [x, x.exp(), torch.randint(-5, 5, (size,), generator=g).float(), x * 1e-3 + 100.0][trial % 4]
        ob = observer.HistogramObserver(dtype=torch.int8, qscheme=torch.per_tensor_affine)
        ob(x)
        if ob.min_val.item() == ob.max_val.item():
            continue
        want, got = original(ob), search(ob)  # type: ignore[operator]
        assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1]), (trial, want, got)
        checked += 1
    assert checked > 40


def test_pattern_cache_returns_fresh_equal_graphs() -> None:
    pt2e_utils = pytest.importorskip("torchao.quantization.pt2e.utils")
    from harness.speedups import pattern_cache

    pattern_cache.SPEEDUP.disable()
    original = pt2e_utils._get_aten_graph_module_for_pattern
    with speedup_on("pattern-cache") as speedup:
        cached = pt2e_utils._get_aten_graph_module_for_pattern
        assert cached is not original and speedup.original is original  # type: ignore[attr-defined]
        _check_cache(original, cached)
    assert pt2e_utils._get_aten_graph_module_for_pattern is original


def _check_cache(original: object, cached: object) -> None:
    import torch.nn.functional as F
    from torchao.quantization.pt2e import WrapperModule

    from harness.speedups import pattern_cache

    conv_fn = F.conv2d

    def make() -> object:
        def _conv_bn(x, w, b):  # type: ignore[no-untyped-def]
            out = conv_fn(x, w, b)
            return out, {"conv": out}

        return WrapperModule(_conv_bn)

    inputs = (torch.randn(1, 1, 3, 3), torch.randn(1, 1, 1, 1), torch.randn(1))
    want = original(make(), inputs)  # type: ignore[operator]
    first, second = cached(make(), inputs), cached(make(), inputs)  # type: ignore[operator]
    assert first is not second and first.graph is not second.graph
    assert first.code == second.code == want.code
    assert pattern_cache.pattern_key(make(), (object(),), False, {}) is None  # unhashable input kind: no memo
