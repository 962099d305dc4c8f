"""A pure-Python PrivateUse1 device backed by CPU kernels (torch >= 2.9, tested on 2.13.0+cpu and 2.14.1).

Usage (``import bti_example_npu`` does the install)::

    import torch
    from bti_example_npu.device import install
    install("npu")
    x = torch.randn(2, 3, device="npu")          # x.device == device(type='npu', index=0)
    y = torch.relu(x @ x.T + 1).cpu()

How it works
------------
* ``torch.utils.backend_registration._setup_privateuseone_for_python_backend``-style setup:
  rename PrivateUse1, generate ``Tensor.npu()/is_npu`` etc., register a device module
  (``torch.npu``), a Python PrivateUse1 hooks object and a Python device guard.
* Every "npu" tensor is a *real* PrivateUse1 TensorImpl (no Python subclass, no Python
  dispatch key) with truthful sizes/strides/storage_offset.  Its storage is a PrivateUse1
  ``UntypedStorage`` made by ``torch._C._construct_storage_from_data_pointer`` that points at
  the memory of a CPU ``UntypedStorage``; that CPU storage is kept alive as an attribute of the
  npu storage's Python object (PyObject preservation keeps it as long as the StorageImpl lives).
  So views, ``.data``, ``detach``, ``Parameter``, shallow copies share storage as usual.
* One boxed Python fallback is registered for the PrivateUse1 key
  (``torch.library.Library("_", "IMPL").fallback``): it rebuilds CPU aliases of the npu
  arguments (zero-copy ``set_`` onto the CPU storage), runs the same op on CPU, and turns the
  CPU results back into npu tensors (zero-copy; results that alias an input reuse that input's
  npu storage; ``Tensor(a!)`` results return the original argument, whose metadata is re-synced
  if the CPU kernel resized/restrided it).
* ``aten::_copy_from`` / ``_copy_from_and_resize`` (what ``copy_`` calls for PrivateUse1) are
  registered explicitly.
"""

from __future__ import annotations

import types

import torch
from torch.utils import _pytree as pytree

__all__ = ["install"]

_ATTR = "_pu1_cpu_storage"
_state: dict = {"name": None, "libs": []}


# ----------------------------------------------------------------------------- helpers
def _name() -> str:
    return _state["name"]


def _is_dev_tensor(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == _name()


def _is_dev_storage(x) -> bool:
    return isinstance(x, (torch.UntypedStorage, torch.TypedStorage)) and x.device.type == _name()


def _cpu_storage_of(ns: torch.UntypedStorage) -> torch.UntypedStorage:
    cs = getattr(ns, _ATTR, None)
    if cs is None:
        # Some C++ paths (e.g. legacy torch.save's storage._write_file) rebuild a StorageImpl
        # from our data pointer, losing the Python attribute.  The memory is host memory and
        # is kept alive by the caller for the duration of the op: alias it without owning it.
        cs = torch._C._construct_storage_from_data_pointer(
            ns.data_ptr(), torch.device("cpu"), ns.nbytes()
        )
    return cs


def _cpu_alias(t: torch.Tensor, cs=None) -> torch.Tensor:
    """Zero-copy CPU tensor viewing the same memory/metadata as npu tensor ``t``."""
    if cs is None:
        cs = _cpu_storage_of(t.untyped_storage())
    c = torch.empty(0, dtype=t.dtype)
    c.set_(cs, t.storage_offset(), t.size(), t.stride())
    return c


_CPU_KS = None  # DispatchKeySet(CPU), set in install()


def _npu_storage_for(cs: torch.UntypedStorage, known: dict) -> torch.UntypedStorage:
    ns = known.get(cs._cdata)
    if ns is None:
        ns = torch._C._construct_storage_from_data_pointer(
            cs.data_ptr(), torch.device(_name(), 0), cs.nbytes()
        )
        setattr(ns, _ATTR, cs)
        known[cs._cdata] = ns
    return ns


def _set_meta(t: torch.Tensor, ns, offset, size, stride) -> torch.Tensor:
    # CPU's set_ kernel only touches metadata (storage is big enough), so it is safe on npu.
    return torch.ops.aten.set_.source_Storage_storage_offset.redispatch(
        _CPU_KS, t, ns, offset, size, stride
    )


def _wrap(c: torch.Tensor, known: dict) -> torch.Tensor:
    """CPU tensor -> npu tensor sharing its memory."""
    if c.layout != torch.strided:
        raise RuntimeError(f"{_name()}: only strided tensors are supported, got {c.layout}")
    ns = _npu_storage_for(c.untyped_storage(), known)
    e = torch._C._acc.create_empty_tensor([0], c.dtype)
    return _set_meta(e, ns, c.storage_offset(), c.size(), c.stride())


def _bind(schema, args, kwargs):
    """[(argument_schema, value)] for the arguments that were passed."""
    out = []
    pos = [a for a in schema.arguments if not a.kwarg_only]
    for a, v in zip(pos, args, strict=False):
        out.append((a, v))
    for a in schema.arguments:
        if a.name in kwargs:
            out.append((a, kwargs[a.name]))
    return out


# ----------------------------------------------------------------------------- kernels
def _fallback(op, *args, **kwargs):
    return _run_on_cpu(op, op, args, kwargs)


def _run_on_cpu(op, cpu_fn, args, kwargs):
    """Run ``cpu_fn`` on CPU aliases of ``args``; interpret results with ``op``'s schema."""
    name = _name()
    known: dict = {}  # CPU StorageImpl address -> npu UntypedStorage
    aliases: dict = {}  # id(npu tensor) -> (cpu alias, its storage before the op)
    out_device = [None]

    def to_cpu(x):
        if isinstance(x, torch.Tensor):
            if x.device.type == name:
                ns = x.untyped_storage()
                cs = _cpu_storage_of(ns)
                known.setdefault(cs._cdata, ns)
                c = _cpu_alias(x, cs)
                aliases[id(x)] = (c, cs._cdata, cs.data_ptr(), cs.nbytes())
                return c
            return x
        if _is_dev_storage(x):
            ns = x.untyped_storage() if isinstance(x, torch.TypedStorage) else x
            cs = _cpu_storage_of(ns)
            known.setdefault(cs._cdata, ns)
            return cs
        if isinstance(x, torch.device):
            out_device[0] = x
            return torch.device("cpu") if x.type == name else x
        return x

    cargs = pytree.tree_map(to_cpu, args)
    ckwargs = pytree.tree_map(to_cpu, kwargs)
    to_dev = out_device[0] is None or out_device[0].type == name

    res = cpu_fn(*cargs, **ckwargs)

    schema = op._schema
    bound = _bind(schema, args, kwargs)
    # Re-sync metadata of mutated npu arguments (resize_, out= resize, t_, set_, ...).
    for a, v in bound:
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        for t in v if isinstance(v, (list, tuple)) else [v]:
            if not _is_dev_tensor(t):
                continue
            c, cdata0, ptr0, nbytes0 = aliases[id(t)]
            cs = c.untyped_storage()
            if (cs._cdata, cs.data_ptr(), cs.nbytes()) != (cdata0, ptr0, nbytes0):
                if cs._cdata == cdata0:  # CPU storage reallocated in place (resize)
                    known.pop(cdata0, None)
                _set_meta(t, _npu_storage_for(cs, known), c.storage_offset(), c.size(), c.stride())
            elif (c.size(), c.stride(), c.storage_offset()) != (
                t.size(),
                t.stride(),
                t.storage_offset(),
            ):
                _set_meta(t, t.untyped_storage(), c.storage_offset(), c.size(), c.stride())

    def write_target(ret_schema):
        ai = ret_schema.alias_info
        if ai is None or not ai.is_write:
            return None
        for a, v in bound:
            if a.alias_info is not None and a.alias_info.before_set == ai.before_set:
                return (v,)
        return None

    def back(x):
        if isinstance(x, torch.Tensor) and x.device.type == "cpu" and to_dev:
            return _wrap(x, known)
        return x

    rets = schema.returns
    if len(rets) == 1:
        tgt = write_target(rets[0])
        return tgt[0] if tgt is not None else pytree.tree_map(back, res)
    if len(rets) == 0:
        return res
    out = []
    for r, v in zip(rets, res, strict=False):
        tgt = write_target(r)
        out.append(tgt[0] if tgt is not None else pytree.tree_map(back, v))
    return tuple(out)


def _copy_from(self, dst, non_blocking=False):
    src_c = _cpu_alias(self) if _is_dev_tensor(self) else self
    dst_c = _cpu_alias(dst) if _is_dev_tensor(dst) else dst
    dst_c.copy_(src_c)
    return dst


def _copy_from_and_resize(self, dst):
    if dst.size() != self.size():
        dst.resize_(self.size())
    return _copy_from(self, dst)


def _convolution_overrideable(*args, **kwargs):
    aten = torch.ops.aten
    return _run_on_cpu(
        aten.convolution_overrideable.default, aten.convolution.default, args, kwargs
    )


def _conv_bwd_cpu(
    grad_out,
    inp,
    weight,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
):
    bias_sizes = [weight.size(1) * groups if transposed else weight.size(0)]
    return torch.ops.aten.convolution_backward.default(
        grad_out,
        inp,
        weight,
        bias_sizes,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        output_mask,
    )


def _convolution_backward_overrideable(*args, **kwargs):
    op = torch.ops.aten.convolution_backward_overrideable.default
    return _run_on_cpu(op, _conv_bwd_cpu, args, kwargs)


# ----------------------------------------------------------------------------- storages
def _patch_untyped_storage_new() -> None:
    """``torch.UntypedStorage(n, device="npu")`` would use the PrivateUse1 allocator, which
    cannot be registered from Python (null -> segfault; hit by torch.load and
    ``storage.to("npu")``).  Build the storage on CPU and wrap it instead."""
    cls = torch.UntypedStorage
    if "_pu1_orig_new" in cls.__dict__:
        return
    base_new = torch._C.StorageBase.__new__

    def __new__(klass, *args, **kwargs):
        dev = kwargs.get("device")
        if dev is not None and torch.device(dev).type == _name():
            if torch.device(dev).index not in (None, 0):
                raise RuntimeError(f"{_name()}: only device 0 exists")
            kw = {k: v for k, v in kwargs.items() if k != "device"}
            return _npu_storage_for(cls(*args, **kw), {})
        return base_new(klass, *args, **kwargs)

    cls._pu1_orig_new = base_new
    cls.__new__ = __new__


# ----------------------------------------------------------------------------- device module
def _make_device_module(name: str) -> types.ModuleType:
    m = types.ModuleType(f"torch.{name}")
    m.__doc__ = f"CPU-backed PrivateUse1 test device '{name}' (npu_device.py)"
    m.is_available = lambda: True
    m.is_initialized = lambda: True
    m._lazy_init = lambda: None
    m._is_in_bad_fork = lambda: False
    m.device_count = lambda: 1
    m.current_device = lambda: 0

    def set_device(device):
        idx = (
            torch.device(name, device).index
            if isinstance(device, int)
            else torch.device(device).index
        )
        if idx not in (None, 0):
            raise RuntimeError(f"{name}: only device 0 exists")

    m.set_device = set_device
    m.synchronize = lambda device=None: None
    m.empty_cache = lambda: None
    m.get_device_name = lambda device=None: f"{name} (CPU-backed test device)"
    m.get_device_capability = lambda device=None: (0, 0)
    # Random numbers come from the CPU default generator (torch.manual_seed() also calls
    # manual_seed_all here, so these must not call back into torch.manual_seed).
    gen = torch.default_generator
    m.manual_seed = lambda seed: gen.manual_seed(int(seed)) and None
    m.manual_seed_all = lambda seed: gen.manual_seed(int(seed)) and None
    m.seed = lambda: gen.seed() and None
    m.seed_all = lambda: gen.seed() and None
    m.initial_seed = lambda: gen.initial_seed()
    m.get_rng_state = lambda device=None: torch.get_rng_state()
    m.set_rng_state = lambda state, device=None: torch.set_rng_state(state)
    m.get_rng_state_all = lambda: [torch.get_rng_state()]
    m.set_rng_state_all = lambda states: torch.set_rng_state(states[0])
    m.get_amp_supported_dtype = lambda: [torch.float16, torch.bfloat16]

    class device:
        def __init__(self, device):
            set_device(device)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    m.device = device
    return m


# ----------------------------------------------------------------------------- install
def install(name: str = "npu") -> None:
    """Register the CPU-backed PrivateUse1 device ``name``. Idempotent within a process
    (and in forked children of a process that already installed it)."""
    global _CPU_KS
    from torch.utils import backend_registration as br

    if _state["name"] is not None:
        if _state["name"] != name:
            raise RuntimeError(f"npu_device already installed as {_state['name']!r}")
        return
    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", name):
        raise RuntimeError(f"PrivateUse1 backend already renamed to {current!r}")
    if current != name:
        torch.utils.rename_privateuse1_backend(name)
    if not hasattr(torch.Tensor, name):
        torch.utils.generate_methods_for_privateuse1_backend()
    if not hasattr(torch, name):
        torch._register_device_module(name, _make_device_module(name))
    # Both return False (no error) if something is already registered for PrivateUse1.
    torch._C._acc.register_python_privateuseone_hook(br._DummyPrivateUse1Hook())
    torch._C._acc.register_python_privateuseone_device_guard(br._DummyDeviceGuard())

    _CPU_KS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    _state["name"] = name
    _patch_untyped_storage_new()

    fb = torch.library.Library("_", "IMPL")
    fb.fallback(_fallback, "PrivateUse1")
    # Like AutocastCUDA in C++: ops without an autocast rule fall through.
    fb.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    impl = torch.library.Library("aten", "IMPL")
    impl.impl("_copy_from", _copy_from, "PrivateUse1")
    impl.impl("_copy_from_and_resize", _copy_from_and_resize, "PrivateUse1")
    # convolution() sends unknown backends to *_overrideable (CompositeExplicitAutograd
    # kernels that just raise), which outrank the fallback: route them to aten.convolution.
    impl.impl("convolution_overrideable", _convolution_overrideable, "PrivateUse1")
    impl.impl(
        "convolution_backward_overrideable", _convolution_backward_overrideable, "PrivateUse1"
    )
    _state["libs"] += [fb, impl]  # keep registrations alive
