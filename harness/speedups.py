"""Guarded memoization of torch.export's composite-implicit (CIA) op table.

``torch.export``'s ``run_decompositions`` rebuilds the table of composite-implicit ops
(``torch._export.utils._collect_all_valid_cia_ops``) on every call — three times per
``to_edge_transform_and_lower`` — which is most of the cost of lowering a tiny graph. The result
depends only on which operators are registered, so it is cached and keyed by the number of
registered operator schemas: registering a new op invalidates it. ``benchmarks/verify_speedups.py``
checks that every starter-suite item yields identical ``.pte`` bytes and outputs with and without
it. Turn it off with ``--no-speedups`` or ``BTI_NO_SPEEDUPS=1``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_ORIGINAL: Any = None


def enable_cia_cache() -> bool:
    global _ORIGINAL
    if os.environ.get("BTI_NO_SPEEDUPS") or _ORIGINAL is not None:
        return _ORIGINAL is not None
    import torch
    import torch._export.utils as teu

    original = teu._collect_all_valid_cia_ops
    memo: dict[int, Any] = {}

    def cached() -> Any:
        key = len(torch._C._dispatch_get_all_op_names())
        if key not in memo:
            memo.clear()
            memo[key] = original()
        return set(memo[key])

    cached.__wrapped__ = original  # type: ignore[attr-defined]
    for mod in list(sys.modules.values()):
        if mod is not None and getattr(mod, "_collect_all_valid_cia_ops", None) is original:
            mod._collect_all_valid_cia_ops = cached
    _ORIGINAL = original
    return True


def disable_cia_cache() -> None:
    global _ORIGINAL
    if _ORIGINAL is None:
        return
    for mod in list(sys.modules.values()):
        fn = getattr(mod, "_collect_all_valid_cia_ops", None) if mod is not None else None
        if fn is not None and getattr(fn, "__wrapped__", None) is _ORIGINAL:
            mod._collect_all_valid_cia_ops = _ORIGINAL
    _ORIGINAL = None
