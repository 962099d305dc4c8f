"""Speedup 1: the composite-implicit (CIA) op table.

``torch.export``'s ``run_decompositions`` rebuilds the table of composite-implicit ops
(``torch._export.utils._collect_all_valid_cia_ops``) on every call — three times per
``to_edge_transform_and_lower`` — which is most of the cost of lowering a tiny graph. The result
depends only on which operators have a composite-implicit kernel, so it is cached and keyed by the
number of CompositeImplicitAutograd registrations in the dispatcher (0.3 ms to read, where the list
of every operator name took 1.5 ms): registering a new CIA kernel invalidates it.
"""

from __future__ import annotations

from typing import Any

from harness.speedups.base import VERIFIED, Speedup


class CiaCache(Speedup):
    number, name, verified_on = 1, "cia-cache", VERIFIED

    def install(self) -> None:
        import torch
        import torch._export.utils as teu

        original = teu._collect_all_valid_cia_ops
        memo: dict[int, Any] = {}

        def cached() -> Any:
            key = len(torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd"))
            if key not in memo:
                memo.clear()
                memo[key] = original()
            return set(memo[key])

        cached.__wrapped__ = original  # type: ignore[attr-defined]
        self.rebind_everywhere("_collect_all_valid_cia_ops", original, cached)  # torch re-exports it under several names


SPEEDUP = CiaCache()
