"""Guarded memoizations of pure recomputation inside torch.export (``--no-speedups`` turns them off).

1. The composite-implicit (CIA) op table.

``torch.export``'s ``run_decompositions`` rebuilds the table of composite-implicit ops
(``torch._export.utils._collect_all_valid_cia_ops``) on every call — three times per
``to_edge_transform_and_lower`` — which is most of the cost of lowering a tiny graph. The result
depends only on which operators are registered, so it is cached and keyed by the number of
registered operator schemas: registering a new op invalidates it. ``benchmarks/verify_speedups.py``
checks that every starter-suite item yields identical ``.pte`` bytes and outputs with and without
it. Turn it off with ``--no-speedups`` or ``BTI_NO_SPEEDUPS=1``.

2. ``typing`` work in ``torch._ops``. ``run_decompositions`` wraps every CIA op in
``_override_composite_implicit_decomp``, which calls ``OpOverload.py_impl`` about 12,000 times;
each call defines an inner function whose annotations (``Callable[_P, _T]``) are evaluated, and
``collections.abc.Callable[...]`` builds a fresh generic alias every time (unlike ``typing``, it
has no cache). That was 40% of a small XNNPACK lowering. bti rebinds the name ``Callable`` in
``torch._ops`` only, to a stand-in whose subscriptions are memoized and whose ``isinstance`` /
``issubclass`` checks delegate to ``collections.abc.Callable``. Annotations are all it is used
for there besides one ``isinstance`` check, so behaviour is unchanged; the same benchmark verifies it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_ORIGINAL: Any = None
_ORIGINAL_CALLABLE: Any = None


class _CachedCallableMeta(type):
    _memo: dict[Any, Any] = {}

    def __getitem__(cls, params: Any) -> Any:
        import collections.abc

        key = params
        if isinstance(params, tuple) and len(params) == 2 and isinstance(params[0], list):
            key = ("args", tuple(params[0]), params[1])  # Callable[[A, B], R]: the list is unhashable
        try:
            return cls._memo[key]
        except KeyError:
            alias = cls._memo[key] = collections.abc.Callable[params]
            return alias
        except TypeError:  # unhashable parameters: no memo
            return collections.abc.Callable[params]

    def __instancecheck__(cls, obj: Any) -> bool:
        import collections.abc

        return isinstance(obj, collections.abc.Callable)

    def __subclasscheck__(cls, sub: Any) -> bool:
        import collections.abc

        return issubclass(sub, collections.abc.Callable)


class CachedCallable(metaclass=_CachedCallableMeta):
    """Stands in for ``collections.abc.Callable`` inside ``torch._ops`` (see the module docstring)."""


def enable_typing_cache() -> bool:
    global _ORIGINAL_CALLABLE
    if os.environ.get("BTI_NO_SPEEDUPS"):
        return False
    import torch._ops as ops

    if _ORIGINAL_CALLABLE is None:
        _ORIGINAL_CALLABLE = ops.Callable
        ops.Callable = CachedCallable  # type: ignore[misc]
    return True


def enable_all() -> bool:
    return enable_cia_cache() and enable_typing_cache()


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
