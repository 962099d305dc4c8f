"""Speedup 4: ``_override_composite_implicit_decomp``, entered two or three times per lowering.

For each of ~560 CIA ops torch goes through ``OpOverload.py_impl`` 22 times (each call builds a closure, checks
the key's kind and clears the op's dispatch cache): 24 ms per entry with GC out of the way. bti swaps in a version
with the same effect: the same ``py_kernels`` entries, built in torch's order by the same torch helpers
(``autograd_not_implemented``, ``_get_decomp_for_cia``), the same fake-tensor registration and the same restore on
exit. It computes each op's patched table once per (op, decomp callable) — ``_callable_key`` recognises the
equivalent ``functools.partial`` objects torch rebuilds on every call — and reuses it while the op's kernels before
entry are unchanged (checked on every entry), so an entry is a dictionary copy and update per op: about 1 ms
instead of 24 ms. The reused entries are stateless wrappers (a closure over the op, a ``functools.partial``).
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Iterator
from typing import Any

from harness.speedups.base import VERIFIED, Speedup

Patched = tuple[dict[Any, Any], dict[Any, Any], Any]  # the op's py_kernels before, while overridden, its fake impl


def _force_dispatch_to_orig_cia_callable(fake_tensor_mode: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    # The body of the closure of this name in torch.export.exported_program._override_composite_implicit_decomp.
    orig_cia_callable = kwargs["original_callable"]
    del kwargs["original_callable"]
    with fake_tensor_mode:
        return orig_cia_callable(*args, **kwargs)


def _callable_key(fn: Any) -> Any:
    """Identify a decomposition callable by what it does. torch builds a fresh
    ``functools.partial(<fresh closure-free local function>, kernel=op)`` for many ops on every
    ``run_decompositions`` (``_get_decomp_for_cia``); two of those with the same code object, no
    closure, no defaults and equal arguments behave identically."""
    if not isinstance(fn, functools.partial):
        return fn
    func: Any = fn.func
    if isinstance(func, types.FunctionType) and func.__closure__ is None and not func.__defaults__ and not func.__kwdefaults__:
        func = ("code", func.__code__, func.__globals__.get("__name__"))
    key = ("partial", func, fn.args, tuple(sorted(fn.keywords.items())))
    try:
        hash(key)
    except TypeError:
        return fn
    return key


def _patch_plan(op: Any, decomp_callable: Any, saved: dict[Any, Any]) -> Patched:
    """What torch's ``_override_composite_implicit_decomp`` makes of one op, in torch's own order and
    with torch's own helpers, computed on a copy: (saved, patched py_kernels, fake-tensor impl)."""
    import torch
    import torch.export.exported_program as epm
    from torch._export.utils import _get_decomp_for_cia
    from torch._higher_order_ops.utils import autograd_not_implemented

    cia_key = torch._C.DispatchKey.CompositeImplicitAutograd
    kernels = dict(saved)
    for key in epm._AUTOGRAD_ALIAS_BACKEND_KEYS_TO_OVERRIDE:
        if key not in kernels:
            kernels[key] = autograd_not_implemented(op, deferred_error=True)
    orig_cia_callable = _get_decomp_for_cia(op)  # reads op.py_kernels, which still equal `saved`
    kernels.pop(cia_key, None)
    kernels[cia_key] = decomp_callable
    fake_impl = functools.partial(_force_dispatch_to_orig_cia_callable, original_callable=orig_cia_callable)
    for key in epm._BACKEND_KEYS_TO_OVERRIDE:
        if key not in kernels:
            kernels[key] = orig_cia_callable
    return saved, kernels, fake_impl


class FastOverride(Speedup):
    number, name, verified_on = 4, "fast-override", VERIFIED

    def __init__(self) -> None:
        super().__init__()
        self.patches: dict[tuple[Any, Any], Patched] = {}  # (op, decomp callable key) -> its patched tables

    def install(self) -> None:
        import torch.export.exported_program as epm

        self.patch(epm, "_override_composite_implicit_decomp", self.override)

    def uninstalled(self) -> None:
        self.patches.clear()

    @contextlib.contextmanager
    def override(self, cia_ops_to_callable: dict[Any, Any]) -> Iterator[None]:
        """torch's ``_override_composite_implicit_decomp`` from remembered per-op plans."""
        from torch._subclasses import fake_impls

        fake_table = fake_impls.op_implementations_dict
        saved_tables = {}
        for op, decomp_callable in cia_ops_to_callable.items():
            kernels = op.py_kernels
            saved = saved_tables[op] = kernels.copy()
            key = (op, _callable_key(decomp_callable))
            patched = self.patches.get(key)
            if patched is None or patched[0] != saved:  # first use, or the op's kernels changed since: recompute
                if len(self.patches) > 50_000:
                    self.patches.clear()
                patched = self.patches[key] = _patch_plan(op, decomp_callable, saved)
            kernels.clear()
            kernels.update(patched[1])
            if op not in fake_table:
                fake_table[op] = patched[2]
            op._dispatch_cache.clear()
        try:
            yield
        finally:
            for op, saved in saved_tables.items():
                op.py_kernels.clear()
                op.py_kernels.update(saved)
                op._dispatch_cache.clear()
                fake_impls._deregister_op_impl(op)


SPEEDUP = FastOverride()
