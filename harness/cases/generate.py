"""Constraint-based operator case generation (FACTO-style, compact, deterministic).

Each operator gets a small ``OpGen``: its argument roles (the primary tensor ``X``, a second tensor
``Y`` that broadcasts against it, a dim, a dim list, a keepdim flag, literal scalars…), the dtypes it
allows, the rank range it accepts and whether its values have a restricted domain. The generator
starts from a base configuration and varies **one attribute at a time**:

* dtype (every allowed dtype at the base shape; the base also gets the dynamic-shape axis);
* rank 0–5, size-1 dims and an empty dim (where the op allows them);
* layout (transposed and permuted inputs, made inside the graph);
* broadcasting and scalar-vs-tensor operands (binary ops);
* attribute values (each dim, keepdim true/false, the op's literal alternatives);
* boundary values: large magnitudes, and NaN/Inf where they are meaningful.

Structural variants run over the op's floating dtypes. The output is ordinary ``Case`` objects with
the same spec as YAML cases, so the worker builds them the same way. Nothing here is random: the
inputs are seeded per case id like every other case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from harness.cases.case import FLOAT_DTYPES, Case

FLOATS = FLOAT_DTYPES
INTS = ("int8", "uint8", "int32", "int64")
SIGNED_INTS = ("int8", "int32", "int64")
NUM = (*FLOATS, *INTS)
ALL = (*NUM, "bool")
BASE_SHAPES = {0: [], 1: [6], 2: [3, 5], 3: [2, 3, 5], 4: [2, 3, 4, 5], 5: [2, 1, 3, 2, 4]}
DIMS = {"N": 2}


def T(shape: list[int | str], **node: Any) -> dict[str, Any]:
    """A tensor input node (the same form the YAML loader produces)."""
    return {"tensor": {"shape": list(shape), "dtype": node.pop("dtype", None), "init": node.pop("init", "normal"),
                       "params": node, "layout": "contiguous"}}


def _with(node: dict[str, Any], **changes: Any) -> dict[str, Any]:
    t = dict(node["tensor"])
    params = dict(t["params"])
    for key in ("mean", "std", "low", "high", "p", "value", "special"):
        if key in changes:
            params[key] = changes.pop(key)
    t.update(changes)
    t["params"] = params
    return {"tensor": t}


@dataclass(frozen=True)
class Variant:
    name: str
    args: list[Any]
    kwargs: dict[str, Any]
    dtypes: tuple[str, ...]
    dynamic: bool = False
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpGen:
    """How to build valid calls of one operator overload."""

    op: str
    family: str
    make: Callable[[list[int | str], dict[str, Any]], tuple[list[Any], dict[str, Any]]]
    dtypes: tuple[str, ...] = FLOATS
    ranks: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
    init: dict[str, Any] = field(default_factory=dict)  # value domain of X
    attrs: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # attribute name -> alternatives (first is the base)
    empty: bool = True
    boundary: bool = True  # NaN/Inf meaningful
    layouts: bool = True
    dynamic: bool = True
    base_rank: int = 3
    tags: tuple[str, ...] = ()
    shape_only: bool = False  # outputs are random or uninitialized: compare shapes and dtypes only

    def variants(self) -> Iterator[Variant]:
        base_attrs = {name: values[0] for name, values in self.attrs}
        floats = tuple(d for d in self.dtypes if d in FLOATS) or self.dtypes[:1]
        base_shape: list[int | str] = list(BASE_SHAPES[self.base_rank])
        dyn_shape: list[int | str] = ["N", *base_shape[1:]] if base_shape else []

        def build(name: str, shape: list[int | str], attrs: dict[str, Any], dtypes: tuple[str, ...], dynamic: bool = False,
                  x: dict[str, Any] | None = None, tags: tuple[str, ...] = ()) -> Variant:
            args, kwargs = self.make(shape, {**attrs, "_x": x or {}})
            return Variant(name, args, kwargs, dtypes, dynamic, tags)

        # 1. the base: every allowed dtype, plus the dynamic-shape axis
        yield build("base", dyn_shape if (self.dynamic and dyn_shape) else base_shape, base_attrs, self.dtypes,
                    dynamic=self.dynamic and bool(dyn_shape))
        # 2. rank
        for rank in self.ranks:
            if rank != self.base_rank:
                yield build(f"rank{rank}", list(BASE_SHAPES[rank]), base_attrs, floats, tags=("rank",))
        # 3. size-1 and empty dims
        if self.base_rank >= 2:
            ones = list(base_shape)
            ones[0] = 1
            ones[-1] = 1
            yield build("size1", ones, base_attrs, floats, tags=("size-1",))
            if self.empty:
                zero = list(base_shape)
                zero[0] = 0
                yield build("empty", zero, base_attrs, floats[:1], tags=("empty",))
        # 4. layout
        if self.layouts and self.base_rank >= 2:
            for layout in ("transposed", "permuted"):
                yield build(layout, base_shape, base_attrs, floats[:1], x={"layout": layout}, tags=("non-contiguous",))
        # 5. attribute alternatives, one at a time
        for name, values in self.attrs:
            for value in values[1:]:
                label = str(value).replace(" ", "").replace("[", "").replace("]", "").replace(",", "_").replace("-", "m")
                yield build(f"{name}_{label}", base_shape, {**base_attrs, name: value}, floats[:1] if floats else self.dtypes[:1])
        # 6. boundary values
        if any(d in FLOATS for d in self.dtypes):
            if not self.init:
                yield build("large", base_shape, base_attrs, ("float32",), x={"std": 1.0e4}, tags=("boundary",))
            if self.boundary:
                yield build("nan_inf", base_shape, base_attrs, ("float32",), x={"special": True}, tags=("boundary",))


def generate_cases(specs: list[OpGen], suite: str) -> list[Case]:
    from harness.cases.ops import op_short_name

    cases = []
    for spec in specs:
        short = op_short_name(spec.op)
        overload = spec.op.split(".", 1)[1] if "." in spec.op else "default"
        for v in spec.variants():
            used = {s for s in _shape_names(v.args) | _shape_names(list(v.kwargs.values()))}
            case_spec = {
                "op": spec.op, "args": v.args, "kwargs": v.kwargs, "init": {}, "dims": {d: DIMS[d] for d in sorted(used)},
                "dynamic": {"N": {"min": 1, "max": 8, "run": 3}} if v.dynamic else {}, "ref": "eager",
                "tolerance": {"shape_only": True} if spec.shape_only else {},
            }
            cases.append(Case(
                id=f"op.{short}.{overload}.{v.name}", suite=suite, kind="op", spec=case_spec, op=spec.op,
                tags=tuple(sorted({spec.family, "generated", *spec.tags, *v.tags})), dtypes=v.dtypes,
                shapes=("static", "dynamic") if v.dynamic else ("static",), source=f"harness/suites/core_ops.py:{spec.op}",
            ))
    return cases


def _shape_names(nodes: list[Any]) -> set[str]:
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, dict) and "tensor" in node:
            out |= {s for s in node["tensor"]["shape"] if isinstance(s, str)}
        elif isinstance(node, dict) and "list" in node:
            out |= _shape_names(node["list"])
        elif isinstance(node, dict) and "dim" in node:
            out.add(node["dim"])
    return out


def x_node(shape: list[int | str], attrs: dict[str, Any], **defaults: Any) -> dict[str, Any]:
    """The primary tensor: the op's value domain plus the variant's layout/values overrides."""
    node = T(shape, **defaults)
    extra = dict(attrs.get("_x") or {})
    layout = extra.pop("layout", None)
    if layout and len(shape) >= 2:
        node = _with(node, layout=layout)
    if extra.pop("special", False):
        node = _with(node, init="special")
    if extra:
        node = _with(node, **extra)
    return node
