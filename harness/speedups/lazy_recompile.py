"""Speedup 8: ``GraphModule.recompile`` deferred to the first use of the code.

Lowering calls it after nearly every pass (~250 times per int8 item; each generates the Python source of the
graph and compiles it), yet reads the code of few of those graphs. Inside ``lazy_recompile()`` (bti's ExecuTorch
``lower`` and ``serialize``) it does the cheap part at once (pytree specs, the wrapped ``__call__``, submodules)
and leaves the source to the first read of ``forward``, ``code`` or the attributes recompile sets: the same design
as torch's own ``_LazyGraphModule``, applied to every GraphModule. The code is generated from the graph as it is
when first read, which is what an eager recompile after the last change would have produced. Pickling starts from
a real recompile. Outside the scope torch's method runs unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Iterator
from typing import Any

from harness.speedups.base import VERIFIED, Speedup

_PENDING_ATTRS = ("_code", "_lineno_map", "_prologue_start")  # what a real recompile sets on the instance


class _Pending:
    """Sits on a dirty GraphModule's own class (torch gives every GraphModule a class of its own) as
    ``forward``, ``_code``, ``_lineno_map`` and ``_prologue_start``: the first read of any of them, from the
    instance or from the class, runs the real recompile, which puts the real values in their place."""

    def __init__(self, name: str, gm: Any) -> None:
        self.name = name
        self.gm = weakref.ref(gm)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        gm = obj if obj is not None else self.gm()
        if gm is None:
            raise AttributeError(self.name)
        _realize(gm)
        return getattr(gm if obj is not None else type(gm), self.name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # type(gm).forward(gm, ...)
        return self.__get__(None, None)(*args, **kwargs)


def _clear_pending(gm: Any) -> None:
    cls = type(gm)
    for name in ("forward", *_PENDING_ATTRS):
        if isinstance(cls.__dict__.get(name), _Pending):
            delattr(cls, name)


def _realize(gm: Any) -> Any:
    _clear_pending(gm)
    return SPEEDUP.original(gm)  # torch's (kept after disable: a graph marked while installed realizes with it)


def _lazy_recompile(self: Any) -> Any:
    """``GraphModule.recompile``. Outside ``lazy_recompile()`` it is torch's. Inside, it does the cheap part now
    (pytree specs, the wrapped ``__call__``, the submodules) and leaves the code to the first read of ``forward`` or
    ``code``: lowering recompiles each graph after every pass (~250 times per item), and reads the code of few."""
    lazy_cls, fx_config, pytree_codegen, wrapped_call = SPEEDUP.fx
    # the marks go on the instance's own class (torch's GraphModuleImpl, whose __name__ __init__ renames):
    # a class that several instances share gets torch's recompile
    if (SPEEDUP.depth == 0 or isinstance(self, lazy_cls) or fx_config.enrich_profiler_metadata
            or not type(self).__qualname__.endswith("GraphModuleImpl")):
        return _realize(self)
    if isinstance(self._graph._codegen, pytree_codegen):
        self._in_spec = self._graph._codegen.pytree_info.in_spec
        self._out_spec = self._graph._codegen.pytree_info.out_spec
    cls = type(self)
    for name in _PENDING_ATTRS:
        self.__dict__.pop(name, None)
        setattr(cls, name, _Pending(name, self))
    cls.forward = _Pending("forward", self)
    # as torch's recompile does
    cls_call = cls.__call__ if "__call__" in vars(cls) else None
    if "_wrapped_call" not in vars(cls):
        cls._wrapped_call = wrapped_call(cls, cls_call)

    def call_wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped_call(self, *args, **kwargs)

    cls.__call__ = call_wrapped
    self._recompile_submodules()
    return None


def _eager(method: Any) -> Any:
    """Pickling reads the instance's code and needs the PythonCode a real recompile returns: such
    methods start from a real recompile and run with laziness off."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(type(self).__dict__.get("forward"), _Pending):
            _realize(self)
        depth, SPEEDUP.depth = SPEEDUP.depth, 0
        try:
            return method(self, *args, **kwargs)
        finally:
            SPEEDUP.depth = depth

    return wrapper


class LazyRecompile(Speedup):
    number, name, verified_on = 8, "lazy-recompile", VERIFIED

    def __init__(self) -> None:
        super().__init__()
        self.original: Any = None  # torch's GraphModule.recompile, while installed
        self.fx: Any = None  # (_LazyGraphModule, fx's experimental config, _PyTreeCodeGen, _WrappedCall): looked up once
        self.depth = 0  # how many lazy_recompile() scopes are open

    def install(self) -> None:
        """Installs the method; ``lazy_recompile()`` scopes it."""
        from torch.fx._lazy_graph_module import _LazyGraphModule
        from torch.fx.experimental import _config as fx_config
        from torch.fx.graph import _PyTreeCodeGen
        from torch.fx.graph_module import GraphModule, _WrappedCall

        self.fx = (_LazyGraphModule, fx_config, _PyTreeCodeGen, _WrappedCall)
        self.original = self.patch(GraphModule, "recompile", _lazy_recompile)
        self.patch(GraphModule, "__reduce__", _eager(GraphModule.__reduce__))
        self.patch(GraphModule, "__reduce_package__", _eager(GraphModule.__reduce_package__))

SPEEDUP = LazyRecompile()


@contextlib.contextmanager
def lazy_recompile() -> Iterator[None]:
    """The speedup for the code inside (bti's ExecuTorch lowering and serialization); a no-op when off."""
    if not SPEEDUP.installed:
        yield
        return
    SPEEDUP.depth += 1
    try:
        yield
    finally:
        SPEEDUP.depth -= 1
