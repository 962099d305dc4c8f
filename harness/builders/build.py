"""Build the module and seeded inputs of an operator case (worker side, imports torch).

The module's forward takes only the tensor inputs, in order, and rebuilds the op's argument tree
around them. Non-contiguous layouts are made inside the graph (an exported program's inputs are
contiguous), so the backend sees the permute/transpose/slice it has to handle.
"""

from __future__ import annotations

from typing import Any

import torch

from harness.cases.case import Axes, Case
from harness.cases.contract import Built as Built  # re-exported: where builders (a vendor's too) have always found it
from harness.cases.ops import resolve_op


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)  # type: ignore[no-any-return]


class OpModule(torch.nn.Module):
    def __init__(self, fn: Any, args: list[Any], kwargs: dict[str, Any], layouts: list[str]) -> None:
        super().__init__()
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.layouts = layouts

    def forward(self, *tensors: torch.Tensor) -> Any:
        views = [_apply_layout(t, lay) for t, lay in zip(tensors, self.layouts, strict=True)]
        it = iter(views)
        args = [_fill(a, it) for a in self.args]
        kwargs = {k: _fill(v, it) for k, v in self.kwargs.items()}
        return self.fn(*args, **kwargs)


class ModuleOp(OpModule):
    """An ``nn.Module`` op: built from ``init:`` with seeded weights, called like a function."""

    def __init__(self, inner: torch.nn.Module, args: list[Any], kwargs: dict[str, Any], layouts: list[str],
                 init: dict[str, Any] | None = None) -> None:
        torch.nn.Module.__init__(self)
        self.inner = inner
        self.init = dict(init or {})  # the constructor's kwargs (``bti repro`` writes the construction out)
        self.fn = inner
        self.args = args
        self.kwargs = kwargs
        self.layouts = layouts


_SLOT = object()


def copy_module(module: torch.nn.Module) -> Any:
    """A deep copy of a built module that keeps the input-slot sentinel its argument templates point at."""
    import copy

    return copy.deepcopy(module, {id(_SLOT): _SLOT})


def _fill(template: Any, it: Any) -> Any:
    if template is _SLOT:
        return next(it)
    if isinstance(template, list):
        return [_fill(t, it) for t in template]
    return template


def _apply_layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    if layout == "transposed" and t.dim() >= 2:
        return t.transpose(-1, -2)
    if layout == "permuted" and t.dim() >= 2:
        return t.permute(*_inverse(_perm(t.dim())))
    if layout == "strided" and t.dim() >= 1:
        return t[..., ::2]
    if layout == "complex":  # the last dim (2) holds real and imaginary parts
        return torch.view_as_complex(t)
    return t


def _perm(rank: int) -> list[int]:
    """The storage order used for ``permuted`` inputs: reversed dims."""
    return list(range(rank))[::-1]


def _inverse(perm: list[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _storage_shape(shape: list[int], layout: str) -> list[int]:
    if layout == "transposed" and len(shape) >= 2:
        return [*shape[:-2], shape[-1], shape[-2]]
    if layout == "permuted" and len(shape) >= 2:
        return [shape[i] for i in _perm(len(shape))]
    if layout == "strided" and len(shape) >= 1:
        return [*shape[:-1], shape[-1] * 2]
    return shape


def generate(node: dict[str, Any], shape: list[int], dtype: str, seed: int) -> torch.Tensor:
    """Seeded tensor per an input node's ``init``."""
    gen = torch.Generator().manual_seed(seed)
    init, p = node["init"], node["params"]
    tdt = torch_dtype(dtype)
    is_float = tdt.is_floating_point
    if init == "zeros":
        return torch.zeros(shape, dtype=tdt)
    if init == "ones":
        return torch.ones(shape, dtype=tdt)
    if init == "full":
        return torch.full(shape, p.get("value", 0), dtype=tdt)
    if init == "arange":
        n = 1
        for s in shape:
            n *= s
        return torch.arange(n, dtype=torch.float64).reshape(shape).to(tdt)
    if init == "special" and is_float:
        # boundary values at fixed positions of a normal tensor: NaN, ±Inf, a huge value, ±0
        base = torch.randn(shape, generator=gen, dtype=torch.float32)
        flat = base.view(-1)
        for i, v in enumerate((float("nan"), float("inf"), float("-inf"), 3.0e38, 0.0, -0.0)):
            if i < flat.numel():
                flat[(i * 7) % flat.numel()] = v
        return base.to(tdt)
    if init == "bernoulli" or dtype == "bool":
        return torch.bernoulli(torch.full(shape, float(p.get("p", 0.5))), generator=gen).to(tdt)
    if init == "randint" or not is_float:
        lo, hi = _int_range(p, dtype)
        return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(tdt)
    if init == "uniform":
        low, high = float(p.get("low", -1.0)), float(p.get("high", 1.0))
        return (torch.rand(shape, generator=gen, dtype=torch.float32) * (high - low) + low).to(tdt)
    mean, std = float(p.get("mean", 0.0)), float(p.get("std", 1.0))
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * std + mean).to(tdt)


def _int_range(p: dict[str, Any], dtype: str) -> tuple[int, int]:
    lo, hi = int(p.get("low", 0 if dtype == "uint8" else -8)), int(p.get("high", 8))
    if dtype == "uint8":
        lo = max(lo, 0)
    return lo, max(hi, lo + 1)


def build_op(case: Case, axes: Axes, seed: int) -> Built:
    spec = case.spec
    fn = resolve_op(spec["op"])
    dims = dict(spec["dims"])
    run_dims = {**dims, **{k: v["run"] for k, v in spec["dynamic"].items()}} if axes.shape == "dynamic" else dims
    tensors: list[dict[str, Any]] = []

    def template(node: Any) -> Any:
        if isinstance(node, dict) and "tensor" in node:
            tensors.append(node["tensor"])
            return _SLOT
        if isinstance(node, dict) and "list" in node:
            return [template(n) for n in node["list"]]
        if isinstance(node, dict) and "torch_dtype" in node:
            return torch_dtype(node["torch_dtype"])
        if isinstance(node, dict) and "dim" in node:
            return dims[node["dim"]]
        return node

    args = [template(a) for a in spec["args"]]
    kwargs = {k: template(v) for k, v in spec["kwargs"].items()}
    layouts = [t["layout"] for t in tensors]
    if isinstance(fn, type) and issubclass(fn, torch.nn.Module):
        torch.manual_seed(seed)
        inner = fn(**spec["init"]).eval()  # `init:` are constructor kwargs; args/kwargs feed forward()
        if not _is_int(axes.dtype):
            inner = inner.to(torch_dtype(axes.dtype))
        module: torch.nn.Module = ModuleOp(inner, args, kwargs, layouts, spec["init"])
    else:
        module = OpModule(fn, args, kwargs, layouts)

    def make(dim_values: dict[str, int], salt: int) -> tuple[torch.Tensor, ...]:
        out = []
        for i, t in enumerate(tensors):
            shape = [dim_values[s] if isinstance(s, str) else s for s in t["shape"]]
            dtype = t["dtype"] or axes.dtype
            out.append(generate(t, _storage_shape(shape, t["layout"]), dtype, seed + salt + i))
        return tuple(out)

    example = make(dims, 0)
    run = make(run_dims, 7919) if axes.shape == "dynamic" else example
    # forward(*tensors): the varargs parameter takes one tuple of per-tensor specs
    flat = _dynamic_shapes(tensors, spec["dynamic"]) if axes.shape == "dynamic" else None
    ref = spec["ref"] if spec["ref"] != "eager" else None
    return Built(module.eval(), example, run, (flat,) if flat else None, flat_dynamic_shapes=flat, ref_dtype=ref)


def _is_int(dtype: str) -> bool:
    return not torch_dtype(dtype).is_floating_point


def _dynamic_shapes(tensors: list[dict[str, Any]], dynamic: dict[str, dict[str, int]]) -> tuple[Any, ...]:
    dim_objs = {name: torch.export.Dim(name, min=r["min"], max=r["max"]) for name, r in dynamic.items()}
    out = []
    for t in tensors:
        storage = list(range(len(t["shape"])))
        if t["layout"] in ("transposed", "permuted") and len(storage) >= 2:
            storage = [int(i) for i in _storage_shape(storage, t["layout"])]
        spec = {}
        for pos, logical in enumerate(storage):
            s = t["shape"][logical]
            if isinstance(s, str) and s in dim_objs:
                if t["layout"] == "strided" and logical == len(storage) - 1:
                    spec[pos] = 2 * dim_objs[s]
                else:
                    spec[pos] = dim_objs[s]
        out.append(spec or None)
    return tuple(out)


def build_pair(case: Case, axes: Axes, seed: int) -> Built:
    """A pair case: a's module and inputs, with b built beside it and given the same inputs."""
    import dataclasses

    spec = case.spec
    a = build_op(Case(spec["a"], case.suite, "op", spec=spec["a_spec"]), axes, seed)
    b = build_op(Case(spec["b"], case.suite, "op", spec=spec["b_spec"]), axes, seed)
    a.pair_b = dataclasses.replace(b, example=a.example, run=a.run)
    a.pair_b_name = str(spec["b"])
    return a
