"""opdiff's input grammar: one class per node type, each with its fields, its checks (opdiff's messages), its
resolution (presets inlined, dims and numeric strings to numbers, dtypes from kinds) and its sampling (opdiff's
InputGen, worker side: torch is imported only there). ``NODES`` maps a node's ``type`` to its class; the loader
(``harness.opdiff.suite``) and the builder (``harness.opdiff.build``) dispatch through it and nothing else.

``check`` and ``resolve`` receive the loader's context ``v`` (``opdiff._Nodes``): its error factory, dims and
presets, and the shared checks of numbers and symbols.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from harness.opdiff.suite import _Nodes

INITS = ("normal", "uniform", "randint", "zeros", "ones", "bernoulli")
DEFAULT_DTYPE = {"float": "float32", "int": "int64", "bool": "bool"}
SAMPLING = ("init", "low", "high", "mean", "std", "p")


# values as opdiff's pydantic models take them (lax mode), shared with the loader (suite.py)
_TRUE, _FALSE = {"true", "t", "yes", "y", "on", "1"}, {"false", "f", "no", "n", "off", "0"}


def _lax_int(v: Any) -> int | None:
    """An int as opdiff's pydantic models take one (lax mode): 4, 4.0, "4"; None otherwise."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    return None


def _lax_float(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def _lax_bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE
    return None


def _plain(value: Any) -> Any:
    """The value as plain Python (what ``str()`` of it reads in opdiff), without the loader's line bookkeeping."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _nested_shape(value: Any) -> list[int] | None:
    if isinstance(value, list):
        if not value:
            return [0]
        subs = [_nested_shape(v) for v in value]
        if any(s is None or s != subs[0] for s in subs):
            return None
        return [len(value), *subs[0]]  # type: ignore[misc]
    if isinstance(value, (int, float, bool)):
        return []
    return None


def _count(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


class Node:
    """A node type: its name, the fields it takes, and what it does with them."""

    name: ClassVar[str]
    fields: ClassVar[tuple[str, ...]]

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        return None

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        return {"type": self.name}

    def sample(self, n: dict[str, Any]) -> Any:
        raise NotImplementedError(self.name)


class _Typed(Node):
    """A value node with a dtype, given or from its kind (tensor, const_tensor, scalar, scalar_tensor)."""

    shaped: ClassVar[bool] = False
    distributed: ClassVar[bool] = False  # drawn from a distribution: init, low, high, mean, std, p

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        v._kind_dtype(node, sub)
        if self.shaped:
            v._shape(node, sub)
        if self.distributed:
            init = node.get("init")
            if init is not None and init not in INITS:
                raise v.err(node, f"{sub}.init", f"Value error, unsupported init '{init}'", key="init")
            for key in ("low", "high"):
                if key in node and node[key] is not None:
                    v._symbol_or_number(node, f"{sub}.{key}", key, f"{self.name}.{key}")
            for key in ("mean", "std", "p"):
                if key in node:
                    v._number(node, f"{sub}.{key}", key)

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.name, "dtype": node.get("dtype") or DEFAULT_DTYPE[node.get("kind") or "float"],
                               "kind": node.get("kind")}
        if self.shaped:
            out["shape"] = [v._dim(node, d, self.name) for d in node["shape"]]
        if self.distributed:
            randint = node.get("init") == "randint"
            out["init"] = node.get("init")
            for key, default in (("low", 0), ("high", 10)):
                value = node.get(key, default)
                value = v._symbol_or_number({key: value}, key, key, key) if value is not None else None
                out[key] = None if value is None else (int(value) if randint else float(value))
            for key, default2 in (("mean", 0.0), ("std", 1.0), ("p", 0.5)):
                out[key] = _lax_float(node.get(key, default2)) or 0.0
        return out


class Tensor(_Typed):
    name, fields = "tensor", ("shape", "kind", "dtype", *SAMPLING, "requires_grad")
    shaped = distributed = True

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        super().check(v, node, sub, allow_var_ref, depth)
        if "requires_grad" in node and _lax_bool(node["requires_grad"]) is None:
            raise v.err(node, f"{sub}.requires_grad", "Input should be a valid boolean", key="requires_grad")

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        out = super().resolve(v, node, env)
        out["requires_grad"] = bool(_lax_bool(node.get("requires_grad", False)))
        return out

    def sample(self, n: dict[str, Any]) -> Any:
        from harness.builders.build import torch_dtype
        from harness.opdiff.build import _auto_dist, _by_dist

        dtype = torch_dtype(n["dtype"])
        t = _by_dist(tuple(n["shape"]), dtype, n["init"] or _auto_dist(dtype), n)
        if n.get("requires_grad") and t.is_floating_point():
            t.requires_grad_(True)
        return t


class ConstTensor(_Typed):
    name, fields = "const_tensor", ("shape", "kind", "dtype", "value", *SAMPLING)
    shaped = distributed = True

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        super().check(v, node, sub, allow_var_ref, depth)
        if node.get("value") is not None:
            shape = [v._dim(node, d, sub) for d in node["shape"]]
            got = _nested_shape(node["value"])
            if got is None or (got != shape and _count(got) != _count(shape)):
                raise v.err(node, f"{sub}.value", f"value has shape {got} but the node declares shape {shape}", key="value")

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        return {**super().resolve(v, node, env), "value": _plain(node.get("value"))}

    def sample(self, n: dict[str, Any]) -> Any:
        if n.get("value") is None:  # drawn like a tensor
            return NODES["tensor"].sample(n)
        import torch

        from harness.builders.build import torch_dtype

        return torch.tensor(n["value"], dtype=torch_dtype(n["dtype"])).reshape(n["shape"])


class ScalarTensor(_Typed):
    name, fields = "scalar_tensor", ("kind", "dtype", "value", *SAMPLING)
    distributed = True

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        super().check(v, node, sub, allow_var_ref, depth)
        if "value" in node and node["value"] is not None and not isinstance(node["value"], (int, float, bool)):
            raise v.err(node, f"{sub}.value", "Input should be a number or a boolean", key="value")

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        return {**super().resolve(v, node, env), "value": _plain(node.get("value"))}

    def sample(self, n: dict[str, Any]) -> Any:
        import torch

        from harness.builders.build import torch_dtype
        from harness.opdiff.build import _auto_dist, _by_dist

        dtype = torch_dtype(n["dtype"])
        if n.get("value") is not None:
            return torch.tensor(n["value"], dtype=dtype)
        return _by_dist((), dtype, n["init"] or _auto_dist(dtype), n)


class Scalar(_Typed):
    name, fields = "scalar", ("kind", "dtype", "value", "low", "high", "p")

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        super().check(v, node, sub, allow_var_ref, depth)
        v._scalar(node, sub)

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        out = super().resolve(v, node, env)
        out["value"] = node.get("value")
        for key, default in (("low", -3.0), ("high", 3.0)):
            out[key] = float(v._symbol_or_number(node, key, key, key)) if node.get(key) is not None else default
        return out

    def sample(self, n: dict[str, Any]) -> Any:
        import torch

        from harness.opdiff.build import _scalar_kind

        if n["value"] is not None:
            torch.randint(0, 1, ())  # opdiff draws from its one-element choices: the stream moves on
            return n["value"]
        k = _scalar_kind(n)
        if k == "int":
            return int(torch.randint(int(n["low"]), int(n["high"]) + 1, ()).item())
        if k == "bool":
            return bool(torch.randint(0, 2, ()).item())
        return float(torch.rand(()).item() * (n["high"] - n["low"]) + n["low"])


class IntList(Node):
    name, fields = "int_list", ("elems",)

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        elems = node.get("elems")
        if not isinstance(elems, list) or any(_lax_int(e) is None for e in elems):
            raise v.err(node, f"{sub}.elems", "Input should be a valid list of integers", key="elems")
        if not elems:
            raise v.err(node, f"{sub}.elems", "Value error, int_list.elems cannot be empty", key="elems")

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        return {"type": self.name, "elems": [_lax_int(e) for e in node["elems"]]}

    def sample(self, n: dict[str, Any]) -> Any:
        return tuple(n["elems"])


class ListNode(Node):
    name, fields = "list", ("len", "elem")

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        if "len" not in node or "elem" not in node:
            raise v.err(node, sub, f"Field required: {'len' if 'len' not in node else 'elem'}")
        length = v._symbol_or_number(node, f"{sub}.len", "len", "list.len")
        if isinstance(length, (int, float)) and length < 0:
            raise v.err(node, f"{sub}.len", "Value error, list.len must be >= 0", key="len")
        v.node(node["elem"], f"{sub}.elem", allow_var_ref, depth + 1)

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        return {"type": self.name, "len": int(v._symbol_or_number(node, "len", "len", "list.len")),
                "elem": v.resolve(node["elem"], env)}

    def sample(self, n: dict[str, Any]) -> Any:
        return [sample(n["elem"]) for _ in range(n["len"])]


class TupleNode(Node):
    name, fields = "tuple", ("elems",)

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        elems = node.get("elems")
        if not isinstance(elems, list):
            raise v.err(node, f"{sub}.elems", "Input should be a valid list", key="elems")
        for i, e in enumerate(elems):
            v.node(e, f"{sub}.elems.{i}", allow_var_ref, depth + 1)

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        return {"type": self.name, "elems": [v.resolve(e, env) for e in node["elems"]]}

    def sample(self, n: dict[str, Any]) -> Any:
        return tuple(sample(e) for e in n["elems"])


class Optional(Node):
    name, fields = "optional", ("p_none", "elem")

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        if "elem" not in node:
            raise v.err(node, sub, "Field required: elem")
        p = _lax_float(node.get("p_none", 0.0))
        if p is None or not 0.0 <= p <= 1.0:
            raise v.err(node, f"{sub}.p_none", "Value error, p_none must be in [0,1]", key="p_none")
        v.node(node["elem"], f"{sub}.elem", allow_var_ref, depth + 1)

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        return {"type": self.name, "p_none": _lax_float(node.get("p_none", 0.0)) or 0.0, "elem": v.resolve(node["elem"], env)}

    def sample(self, n: dict[str, Any]) -> Any:
        import torch

        if n["p_none"] <= 0:
            return sample(n["elem"])
        return None if torch.rand(()).item() < n["p_none"] else sample(n["elem"])


class Const(Node):
    name, fields = "const", ("value",)

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        if "value" not in node:
            raise v.err(node, sub, "Field required: value")

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        return {"type": self.name, "value": _plain(node["value"])}

    def sample(self, n: dict[str, Any]) -> Any:
        return n["value"]


class Ref(Node):
    """A preset by name, or (in a template's inputs) by a template variable: resolved to the preset's node."""

    name, fields = "ref", ("ref",)

    def check(self, v: _Nodes, node: dict[str, Any], sub: str, allow_var_ref: bool, depth: int) -> None:
        ref = node.get("ref")
        if isinstance(ref, dict) and set(ref) == {"var"}:
            if not allow_var_ref:
                raise v.err(node, sub, "a {ref: {var: …}} is only valid in a template's inputs")
            return
        if not isinstance(ref, str):
            raise v.err(node, f"{sub}.ref", "ref is a preset name or {var: name}")
        if ref not in v.presets:
            raise v.err(node, f"{sub}.ref", f"Value error, unknown preset ref '{ref}'", key="ref")
        v.node(v.presets[ref], f"presets.{ref}", depth=depth + 1)

    def resolve(self, v: _Nodes, node: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
        ref = node["ref"]
        if isinstance(ref, dict):
            name = ref["var"]
            if name not in env:
                raise v.err(node, "ref", f"Unknown template var '{name}'")
            ref = env[name]
            if not isinstance(ref, str):
                raise v.err(node, "ref", f"Ref var '{name}' must expand to a preset name string, got {type(ref)}")
            if ref not in v.presets:
                raise v.err(node, "ref", f"Unknown preset ref: {ref}")
            v.node(v.presets[ref], f"presets.{ref}")
        return v.resolve(v.presets[ref], env)


NODES: dict[str, Node] = {n.name: n for n in (Ref(), Tensor(), Scalar(), ScalarTensor(), IntList(), ListNode(), TupleNode(),
                                              Optional(), Const(), ConstTensor())}


def sample(n: dict[str, Any]) -> Any:
    """One draw of a resolved node (worker side), in opdiff's order of random draws."""
    node = NODES.get(n["type"])
    if node is None:
        raise ValueError(f"unknown node type {n['type']!r}")
    return node.sample(n)
