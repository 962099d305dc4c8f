"""Build an opdiff test (``harness.opdiff.suite``) into a module and its inputs, as opdiff samples them (worker side).

Inputs are opdiff's own: input set ``i`` is drawn with ``torch.manual_seed(seed + i)`` in a forked RNG, the
positional nodes in order, then the keyword nodes in their order under the same seed (opdiff's ``InputGen``); a
pair's side b uses ``seed + 1``; floating tensors are then cast to float32 (opdiff's default precision). Modules
are constructed under ``torch.manual_seed(0)`` (opdiff's backend seed).

What becomes a graph input (the rest is a constant of the program, as in opdiff's export bundle): a ``tensor``
node, each tensor of a ``list`` of tensors, a ``scalar_tensor`` as a rank-0 tensor, and a ``scalar`` as a rank-1
tensor of shape (1,) (opdiff's specification), except where every overload of the ATen op takes a number at that
argument: there it is the Python value, as opdiff's current code passes every scalar. Complex inputs travel packed
as real (…, 2) tensors; ``cast_input0_to_complex`` rebuilds input 0 inside the graph; complex outputs come back
packed (opdiff's ``sanitize_output``), and Python numbers as tensors.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch

from harness.builders.build import _SLOT, torch_dtype  # the one slot sentinel: copy_module keeps it through deepcopy
from harness.cases.case import Axes, Case
from harness.cases.contract import Built
from harness.errors import SpecError
from harness.opdiff.nodes import sample


def build(case: Case, axes: Axes, seed: int) -> Built:
    spec = case.spec
    return _build_side(spec, spec["test"], int(spec["seed"]))


def build_pair(case: Case, axes: Axes, seed: int) -> Built:
    """Side a on ``seed``, side b on ``seed + 1`` (opdiff's rule), each with its own inputs."""
    spec = case.spec
    a = _build_side(spec, spec["test"]["a"], int(spec["seed"]))
    b = _build_side(spec, spec["test"]["b"], int(spec["seed"]) + 1)
    op = spec["test"]["b"].get("op")
    return dataclasses.replace(a, pair_b=b, pair_judged=False, pair_b_name=str(spec["test"]["b"].get("id", "b")),
                               pair_b_op=str(op.get("path")) if isinstance(op, dict) else (str(op) if op else None))


def _build_side(spec: dict[str, Any], test: dict[str, Any], seed: int) -> Built:
    op = test["op"]
    if isinstance(op, str):
        fn = lookup_op(op)
        target: Any = fn
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            target = ModuleRunner(op, spec)
        fn = None
    kw_names = list(test["kwargs"])
    sets = []
    for i in range(max(1, int(spec.get("samples") or 1))):
        pos = _sample_all(test["in"], seed + i)
        kws = _sample_all([test["kwargs"][k] for k in kw_names], seed + i) if kw_names else []
        sets.append((_float32(pos), _float32(kws)))
    template, kw_template, layout = _templates(test, fn, sets[0], kw_names)
    module = OpdiffModule(target, template, kw_template, layout, bool(test.get("cast_input0_to_complex")))
    runs = tuple(_graph_inputs(test, fn, s, kw_names) for s in sets)
    return Built(module.eval(), runs[0], runs[0], None, more_runs=runs[1:])


# --- sampling (opdiff's InputGen) ------------------------------------------------------------------------------

def _sample_all(nodes: list[dict[str, Any]], seed: int) -> list[Any]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return [sample(n) for n in nodes]


def _auto_dist(dtype: torch.dtype) -> str:
    if dtype is torch.bool:
        return "bernoulli"
    if dtype.is_floating_point or dtype.is_complex:
        return "normal"
    return "randint"


def _by_dist(shape: tuple[int, ...], dtype: torch.dtype, dist: str, n: dict[str, Any]) -> torch.Tensor:
    low, high, mean, std, p = n["low"], n["high"], n["mean"], n["std"], n["p"]
    if dist == "zeros":
        return torch.zeros(shape, dtype=dtype)
    if dist == "ones":
        return torch.ones(shape, dtype=dtype)
    if dist == "bernoulli":
        if dtype is not torch.bool and not dtype.is_floating_point:
            raise ValueError("bernoulli requires bool or floating dtype")
        t = torch.bernoulli(torch.full(shape, float(p), dtype=torch.float32))
        return t.to(torch.bool) if dtype is torch.bool else t.to(dtype)
    if dist == "randint":
        if dtype not in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8):
            raise ValueError("randint requires integer dtype")
        return torch.randint(int(low), int(high), shape, dtype=dtype)
    if dist in ("uniform", "normal"):
        if not (dtype.is_floating_point or dtype.is_complex):
            raise ValueError(f"{dist} requires floating dtype")

        def draw(dt: torch.dtype) -> torch.Tensor:
            t = torch.empty(shape, dtype=dt)
            return t.uniform_(float(low), float(high)) if dist == "uniform" else t.normal_(float(mean), float(std))

        if dtype.is_complex:
            base = torch.float32 if dtype == torch.complex64 else torch.float64
            real = draw(base)
            return torch.complex(real, draw(base))
        return draw(dtype)
    raise ValueError(f"Unsupported dist: {dist}")


def _scalar_kind(n: dict[str, Any]) -> str:
    dt = n["dtype"]
    if dt == "bool":
        return "bool"
    if dt.startswith(("int", "uint")):
        return "int"
    return "float"


def _float32(values: Any) -> Any:
    """opdiff's ``cast_precision``: floating (not complex) tensors to float32, through lists, tuples and dicts."""
    if isinstance(values, torch.Tensor):
        return values.to(torch.float32) if values.is_floating_point() and values.dtype != torch.float32 else values
    if isinstance(values, list):
        return [_float32(v) for v in values]
    if isinstance(values, tuple):
        return tuple(_float32(v) for v in values)
    if isinstance(values, dict):
        return {k: _float32(v) for k, v in values.items()}
    return values


# --- graph inputs and the module -------------------------------------------------------------------------------

def _is_input(node: dict[str, Any], number_param: bool) -> bool:
    kind = node["type"]
    return kind in ("tensor", "scalar_tensor") or (kind == "scalar" and not number_param) or \
        (kind == "list" and node["elem"]["type"] == "tensor")


def _templates(test: dict[str, Any], fn: Any, first: tuple[list[Any], list[Any]], kw_names: list[str]) -> tuple[list[Any], dict[str, Any], list[str]]:
    """The argument templates (``_SLOT`` where a graph input goes, constants elsewhere) and each input's role."""
    pos, kws = first
    layout: list[str] = []

    def slot(node: dict[str, Any], value: Any, number_param: bool) -> Any:
        if not _is_input(node, number_param):
            return value
        if node["type"] == "list":
            layout.extend("tensor" for _ in value)
            return [_SLOT for _ in value]
        layout.append("scalar" if node["type"] == "scalar" else "tensor")
        return _SLOT

    args = [slot(n, v, _number_param(fn, i, None)) for i, (n, v) in enumerate(zip(test["in"], pos, strict=True))]
    kwargs = {k: slot(test["kwargs"][k], v, _number_param(fn, None, k)) for k, v in zip(kw_names, kws, strict=True)}
    return args, kwargs, layout


def _graph_inputs(test: dict[str, Any], fn: Any, values: tuple[list[Any], list[Any]], kw_names: list[str]) -> tuple[Any, ...]:
    pos, kws = values
    out: list[torch.Tensor] = []

    def add(node: dict[str, Any], value: Any, number_param: bool) -> None:
        if not _is_input(node, number_param):
            return
        if node["type"] == "list":
            out.extend(_pack(v) for v in value)
        elif node["type"] == "scalar":  # opdiff's specification: a scalar is exported as a rank-1 tensor
            out.append(torch.tensor(value, dtype=torch_dtype(node["dtype"])).reshape(1))
        else:
            out.append(_pack(value))

    for i, (n, v) in enumerate(zip(test["in"], pos, strict=True)):
        add(n, v, _number_param(fn, i, None))
    for k, v in zip(kw_names, kws, strict=True):
        add(test["kwargs"][k], v, _number_param(fn, None, k))
    return tuple(out)


def _pack(t: torch.Tensor) -> torch.Tensor:
    """Complex tensors travel as real (…, 2) (opdiff's ``pack_inputs``)."""
    if torch.is_complex(t):
        return torch.view_as_real(t.resolve_conj()).contiguous()
    return t


def _number_param(fn: Any, position: int | None, name: str | None) -> bool:
    """Whether every overload of the ATen op takes a number (not a Tensor) at this argument."""
    if fn is None:
        return False
    overloads = [getattr(fn, o) for o in fn.overloads()] if hasattr(fn, "overloads") else [fn]
    types = []
    for ov in overloads:
        args = ov._schema.arguments
        if name is not None:
            found = [a for a in args if a.name == name]
        else:
            positional = [a for a in args if not a.kwarg_only]
            found = [positional[position]] if position is not None and position < len(positional) else []
        types += [str(a.type) for a in found]
    return bool(types) and not any("Tensor" in t for t in types)


class OpdiffModule(torch.nn.Module):
    """``forward(*graph_inputs)`` rebuilds the call: constants where they were written, inputs in their slots."""

    def __init__(self, target: Any, args: list[Any], kwargs: dict[str, Any], layout: list[str], complex0: bool) -> None:
        super().__init__()
        self.target = target
        self.args = args
        self.kwargs = kwargs
        self.layout = layout
        self.complex0 = complex0

    def forward(self, *inputs: torch.Tensor) -> Any:
        it = iter(inputs)

        def fill(template: Any) -> Any:
            if template is _SLOT:
                return next(it)
            if isinstance(template, list):
                return [fill(t) for t in template]
            return template

        args = [fill(a) for a in self.args]
        kwargs = {k: fill(v) for k, v in self.kwargs.items()}
        if self.complex0 and args:
            args[0] = _to_complex(args[0])
        return _sanitize(self.target(*args, **kwargs))


def _to_complex(x: Any) -> Any:
    """opdiff's ``_to_complex_input0``: a real (…, 2) tensor is complex(re, im); a real tensor gets im = 0."""
    if isinstance(x, torch.Tensor) and not torch.is_complex(x):
        if x.ndim >= 1 and x.shape[-1] == 2:
            return torch.complex(x[..., 0], x[..., 1])
        if x.dtype in (torch.float16, torch.float32, torch.float64):
            return torch.complex(x, torch.zeros_like(x))
        if x.dtype in (torch.int32, torch.int64, torch.bool):
            x2 = x.to(torch.float32)
            return torch.complex(x2, torch.zeros_like(x2))
    return x


def _sanitize(x: Any) -> Any:
    """opdiff's ``sanitize_output``: complex → real (…, 2), Python numbers → tensors, dicts by sorted key."""
    if isinstance(x, torch.Tensor):
        return torch.view_as_real(x.resolve_conj()) if torch.is_complex(x) else x
    if isinstance(x, bool):
        return torch.tensor(x, dtype=torch.bool)
    if isinstance(x, int):
        return torch.tensor(x, dtype=torch.int64)
    if isinstance(x, float):
        return torch.tensor(x, dtype=torch.float32)
    if isinstance(x, (tuple, list)):
        return tuple(_sanitize(v) for v in x)
    if isinstance(x, dict):
        return tuple(_sanitize(x[k]) for k in sorted(x))
    return x


# --- ops, classes, file: paths ---------------------------------------------------------------------------------

def lookup_op(op: str) -> Any:
    """``namespace::name[.overload]`` → ``torch.ops.namespace.name[.overload]`` (opdiff's ``_lookup_torch_op_fn``)."""
    ns, sep, name = op.partition("::")
    if not sep:
        raise ValueError(f"Invalid op string: {op}")
    namespace = getattr(torch.ops, ns, None)
    if namespace is None:
        raise KeyError(f"torch.ops has no namespace '{ns}'")
    base, dot, overload = name.partition(".")
    try:
        base_op = getattr(namespace, base)
    except AttributeError:
        raise KeyError(f"torch.ops.{ns} has no op '{base}'") from None
    if dot:
        fn = getattr(base_op, overload, None)
        if fn is None:
            raise KeyError(f"torch.ops.{ns}.{base} has no overload '{overload}'")
        return fn
    return base_op


def op_problem(case: Case) -> str | None:
    """Why the torch op an opdiff case calls (``namespace::name[.overload]``) does not exist, or None (a module
    case has nothing to check here)."""
    if not isinstance(case.op, str) or not isinstance(case.spec["test"].get("op"), str):
        return None
    try:
        lookup_op(case.op)
    except (KeyError, ValueError) as exc:
        return str(exc.args[0] if exc.args else exc)
    return None


def resolve_path(path: str, spec: dict[str, Any]) -> Any:
    """A class or function from a dotted path, or from ``file:x.py::Name`` (only in a case whose file: paths were
    allowed at load: ``spec["code"]``)."""
    if path.startswith("file:"):
        from harness.opdiff.suite import find_code_file

        if path not in (spec.get("code") or {}):
            raise SpecError(f"{path}: this case may not run code from files (not checked when the suite was loaded)")
        file_part, _, sym = path[len("file:"):].partition("::")
        found = find_code_file(file_part, spec["cwd"], spec["base"])
        if found is None:
            raise FileNotFoundError(f"{path}: no such file")
        mod_name = "_opdiff_file_" + hashlib.sha256(str(found).encode()).hexdigest()[:16]
        mod = sys.modules.get(mod_name)
        if mod is None:
            module_spec = importlib.util.spec_from_file_location(mod_name, found)
            if module_spec is None or module_spec.loader is None:
                raise ImportError(f"could not load {found}")
            mod = importlib.util.module_from_spec(module_spec)
            sys.modules[mod_name] = mod
            # the file's folder, and where the path was resolved from (opdiff runs from its repository root, so
            # `from examples.toy_model import …` works there)
            extra = [str(found.parent), spec["cwd"] if (Path(spec["cwd"]) / file_part).is_file() else spec["base"]]
            added = [p for p in dict.fromkeys(extra) if p not in sys.path]
            sys.path[:0] = added
            try:
                module_spec.loader.exec_module(mod)
            except BaseException:
                sys.modules.pop(mod_name, None)
                raise
            finally:
                for p in added:
                    if p in sys.path:
                        sys.path.remove(p)
        obj = getattr(mod, sym, None)
        if obj is None:
            raise AttributeError(f"{path}: symbol '{sym}' not found in {found}")
        return obj
    parts = path.split(".")
    last: Exception | None = None
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception as exc:
            last = exc
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(f"Could not import any module from '{path}': {last}")


def _materialize(x: Any, spec: dict[str, Any]) -> Any:
    if isinstance(x, dict) and x.get("type") in ("construct", "module") and "path" in x:
        ctor = resolve_path(x["path"], spec)
        return ctor(*[_materialize(a, spec) for a in x.get("args") or []],
                    **{k: _materialize(v, spec) for k, v in (x.get("kwargs") or {}).items()})
    if isinstance(x, dict):
        return {k: _materialize(v, spec) for k, v in x.items()}
    if isinstance(x, list):
        return [_materialize(v, spec) for v in x]
    return x


class ModuleRunner(torch.nn.Module):
    """opdiff's ``TorchModuleRunner``: an ``nn.Module`` class is instantiated once; a factory that returns a module is
    called once; a plain callable is called on every forward with the inputs first."""

    def __init__(self, node: dict[str, Any], spec: dict[str, Any]) -> None:
        super().__init__()
        self.fn = resolve_path(node["path"], spec)
        self.ctor_args = [_materialize(a, spec) for a in node.get("args") or []]
        self.ctor_kwargs = {k: _materialize(v, spec) for k, v in (node.get("kwargs") or {}).items()}
        self.mod: torch.nn.Module | None = None
        if isinstance(self.fn, type) and issubclass(self.fn, torch.nn.Module):
            self.mod = self.fn(*self.ctor_args, **self.ctor_kwargs).eval()
        elif callable(self.fn):
            made = self.fn(*self.ctor_args, **self.ctor_kwargs)
            if isinstance(made, torch.nn.Module):
                self.mod = made.eval()

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.mod is not None:
            return self.mod(*inputs, **kwargs)
        return self.fn(*inputs, *self.ctor_args, **{**self.ctor_kwargs, **kwargs})


__all__ = ["build", "build_pair", "lookup_op", "resolve_path", "sample"]
