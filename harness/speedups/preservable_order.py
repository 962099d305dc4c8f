"""Speedup 10: the cheap half of torch's "preservable CIA op" test first.

``run_decompositions`` splits its decomposition table into composite-implicit ops and the rest, asking
``_is_preservable_cia_op`` of every op of the table that is not in the (cached, speedup 1) set of preservable CIA
ops: ~430 of the ~985 in executorch's default table, 5 ms per table. torch's function is
``_check_valid_to_preserve(op) and _is_cia_op(op)``; both are side-effect-free predicates, and the second, a
dispatcher lookup, is false for all of those ops. bti asks it first.
"""

from __future__ import annotations

from typing import Any

from harness.speedups.base import VERIFIED, Speedup


def is_preservable_cia_op(op: Any) -> bool:
    """``torch._export.utils._is_preservable_cia_op`` with its two tests swapped: whether the op has a
    composite-implicit kernel (a dispatcher lookup) before whether it is functional (a walk over its schema).
    An op the first test raises on gets torch's order."""
    is_cia_op, check_valid_to_preserve, original = SPEEDUP.parts
    try:
        cia = is_cia_op(op)
    except Exception:
        return original(op)  # type: ignore[no-any-return]
    return bool(cia and check_valid_to_preserve(op))


class PreservableOrder(Speedup):
    number, name, verified_on = 10, "preservable-order", VERIFIED

    def __init__(self) -> None:
        super().__init__()
        self.parts: Any = None  # torch's (_is_cia_op, _check_valid_to_preserve, _is_preservable_cia_op): looked up once

    def install(self) -> None:
        import torch._export.utils as teu

        self.parts = (teu._is_cia_op, teu._check_valid_to_preserve, teu._is_preservable_cia_op)
        self.rebind_everywhere("_is_preservable_cia_op", teu._is_preservable_cia_op, is_preservable_cia_op)


SPEEDUP = PreservableOrder()
