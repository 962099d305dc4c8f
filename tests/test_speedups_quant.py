"""Speedups 5 and 6 (harness/speedups.py) compute exactly what torchao computes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
observer = pytest.importorskip("torchao.quantization.pt2e.observer")


def test_histogram_search_matches_torchao() -> None:
    import harness.speedups as sp

    original = observer.HistogramObserver._non_linear_param_search
    original = sp._HIST_ORIGINAL or original
    sp._HIST_ORIGINAL = original  # the fallback path of the fast version
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
        want, got = original(ob), sp._fast_non_linear_param_search(ob)
        assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1]), (trial, want, got)
        checked += 1
    assert checked > 40


def test_pattern_cache_returns_fresh_equal_graphs() -> None:
    pt2e_utils = pytest.importorskip("torchao.quantization.pt2e.utils")
    import torch.nn.functional as F
    from torchao.quantization.pt2e import WrapperModule

    import harness.speedups as sp

    sp._PATTERN_ORIGINAL = sp._PATTERN_ORIGINAL or pt2e_utils._get_aten_graph_module_for_pattern
    conv_fn = F.conv2d

    def make() -> object:
        def _conv_bn(x, w, b):  # type: ignore[no-untyped-def]
            out = conv_fn(x, w, b)
            return out, {"conv": out}

        return WrapperModule(_conv_bn)

    inputs = (torch.randn(1, 1, 3, 3), torch.randn(1, 1, 1, 1), torch.randn(1))
    want = sp._PATTERN_ORIGINAL(make(), inputs)
    first, second = sp._cached_pattern_graph(make(), inputs), sp._cached_pattern_graph(make(), inputs)
    assert first is not second and first.graph is not second.graph
    assert first.code == second.code == want.code
    assert sp._pattern_key(make(), (object(),), False, {}) is None  # unhashable input kind: no memo
