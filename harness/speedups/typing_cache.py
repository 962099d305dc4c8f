"""Speedup 2: ``typing`` work in ``torch._ops``.

``run_decompositions`` wraps every CIA op in ``_override_composite_implicit_decomp``, which calls
``OpOverload.py_impl`` about 12,000 times; each call defines an inner function whose annotations
(``Callable[_P, _T]``) are evaluated, and ``collections.abc.Callable[...]`` builds a fresh generic alias every
time (unlike ``typing``, it has no cache). That was 40% of a small XNNPACK lowering. bti rebinds the name
``Callable`` in ``torch._ops`` only, to a stand-in whose subscriptions are memoized and whose ``isinstance`` /
``issubclass`` checks delegate to ``collections.abc.Callable``. Annotations are all it is used for there besides
one ``isinstance`` check, so behaviour is unchanged.
"""

from __future__ import annotations

import collections.abc
from typing import Any

from harness.speedups.base import VERIFIED, Speedup


class _CachedCallableMeta(type):
    _memo: dict[Any, Any] = {}

    def __getitem__(cls, params: Any) -> Any:
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
        return callable(obj)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, collections.abc.Callable)  # type: ignore[arg-type]  # the ABC, not typing's form


class CachedCallable(metaclass=_CachedCallableMeta):
    """Stands in for ``collections.abc.Callable`` inside ``torch._ops``."""


class TypingCache(Speedup):
    number, name, verified_on = 2, "typing-cache", VERIFIED

    def install(self) -> None:
        import torch._ops

        self.patch(torch._ops, "Callable", CachedCallable)


SPEEDUP = TypingCache()
