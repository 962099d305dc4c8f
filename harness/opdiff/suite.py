"""opdiff's suite format, read as opdiff reads it (github 0xShug0/opdiff, ``testgen/testcase_spec.md``).

A suite file with a top-level ``tests:`` list (or an orchestrator whose ``include:`` leads to one) is an opdiff
suite: ``bti run -s suite.yaml``, ``bti validate`` and ``bti list`` take it unchanged. This module is torch-free:
it loads the file (includes merged as opdiff merges them), validates every node against the specification with
opdiff's own messages (one line, ``file:line``), expands ``template_module`` and ``template_compare_pair`` into
opdiff's own test ids, and resolves presets and dims, so each ``Case.spec`` is self-contained. The worker side is
``harness.opdiff.build``.

Where opdiff's code is laxer than its specification, bti follows the specification: unknown top-level keys and
unknown node fields are errors (opdiff's pydantic models ignore them), and an unknown dim symbol is an error at
load, not at run time. A test without an ``id`` (opdiff writes ``None``) is ``test_<n>``, its position.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cases.case import Case
from harness.cases.contract import SuiteOptions
from harness.cases.yamlload import LDict, LList, load_yaml, where
from harness.errors import SpecError
from harness.opdiff.nodes import NODES, _lax_bool, _lax_float, _lax_int, _plain

TOP_KEYS = ("include", "dims", "presets", "tests")
TEST_FIELDS = ("id", "impl", "op", "in", "kwargs", "out", "device", "cast_input0_to_complex")
DEVICES = ("cpu", "gpu", "cuda", "mps")
DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool", "complex64", "complex128")
KINDS = ("float", "int", "bool")
NODE_FIELDS: dict[str, tuple[str, ...]] = {name: node.fields for name, node in NODES.items()}  # the grammar (opdiff_nodes)
SAFE_PREFIXES = ("torch.nn.",)  # module/construct paths any suite may name; others are code, gated like file:
BUILD_FIELDS = {"module": ("path", "args", "kwargs"), "construct": ("path", "args", "kwargs")}
TEMPLATE_FIELDS = ("path", "vars", "cases", "args", "kwargs")
PAIR_FIELDS = ("vars", "cases", "common", "a", "b")
SIDE_FIELDS = ("impl", "type", "path", "args", "kwargs")


OpdiffOptions = SuiteOptions  # the name it had before suite file formats were generic


def is_opdiff(doc: Any, path: Path, seen: tuple[Path, ...] = ()) -> bool:
    """Whether a loaded YAML document is an opdiff suite: it has ``tests:``, or it has none of bti's own keys and
    its first include is one."""
    if not isinstance(doc, dict):
        return False
    if "tests" in doc:
        return True
    if set(doc) & {"cases", "suite", "defaults", "description"}:
        return False
    includes = doc.get("include")
    first = includes if isinstance(includes, str) else includes[0] if isinstance(includes, list) and includes else None
    if not isinstance(first, str):
        return False
    target = (path.parent / first).resolve()
    if not target.is_file():  # said at the include's line by the opdiff loader
        return True
    if target in seen:
        return False
    try:
        return is_opdiff(load_yaml(target), target, (*seen, path.resolve()))
    except SpecError:
        return False


class _Err:
    """opdiff's error label (``[id=… op=…] tests.3.in.0: message``), at a file:line."""

    def __init__(self, label: str, loc: str) -> None:
        self.label, self.loc = label, loc

    def __call__(self, node: Any, path: str, message: str, key: str | None = None) -> SpecError:
        return SpecError(f"{where(node, self.loc, key)}: [{self.label}] {path}: {message}")


def load_opdiff(path: Path, *, named: bool, allow_code: bool = False, seed: int = 0, samples: int = 1) -> list[Case]:
    """The cases of an opdiff suite. A ``file:`` path runs Python code from a file: bti allows it in tests written in
    the suite the user named on the command line (``named``) or in files of its folder tree that it includes, and
    anywhere with ``allow_code`` (``--allow-suite-code``); otherwise it is refused at load, before anything runs."""
    root = path.resolve()
    merged = _load_with_includes(root, ())
    dims = _dims(merged)
    presets = merged["presets"]
    raw_tests = merged["tests"]
    suite = path.stem
    cases: list[Case] = []
    seen: dict[str, str] = {}
    ctx = {"dims": dims, "presets": presets, "base": str(root.parent), "cwd": os.getcwd(),
           "trusted_root": root.parent if named else None, "allow_code": allow_code,
           "seed": int(seed), "samples": int(samples), "suite_file": str(path)}
    presets_check = _Nodes(_Err("test=unknown", str(path)), ctx)  # opdiff validates every preset, used or not
    for name, node in presets.items():
        presets_check.node(node, f"presets.{name}")
    for index, raw in enumerate(raw_tests):
        for case in _expand(raw, index, suite, ctx):
            if case.id in seen:
                raise SpecError(f"{case.source}: duplicate test id {case.id!r} (first at {seen[case.id]}); bti keys "
                                "results by id")
            seen[case.id] = case.source
            cases.append(case)
    return cases


# --- files, includes, dims -------------------------------------------------------------------------------------

def _load_with_includes(path: Path, stack: tuple[Path, ...]) -> dict[str, Any]:
    if path in stack:
        chain = " -> ".join(str(p) for p in (*stack, path))
        raise SpecError(f"{stack[-1]}:1: include cycle detected: {chain}")
    doc = load_yaml(path)
    if doc is None:
        doc = LDict()
    if not isinstance(doc, dict):
        raise SpecError(f"{where(doc, str(path))}: top-level YAML must be a mapping/dict: {path}")
    unknown = [k for k in doc if k not in TOP_KEYS]
    if unknown:
        raise SpecError(f"{where(doc, str(path), str(unknown[0]))}: unknown top-level key(s): "
                        f"{', '.join(map(str, unknown))} (an opdiff suite has {', '.join(TOP_KEYS)})")
    includes = doc.get("include")
    if includes is None:
        includes = []
    elif isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise SpecError(f"{where(doc, str(path), 'include')}: include must be a string or a list of strings")
    merged: dict[str, Any] = {"dims": {}, "presets": {}, "tests": [], "dims_at": {}, "presets_at": {}}
    for inc in includes:
        target = Path(inc) if os.path.isabs(inc) else path.parent / inc
        if not target.is_file():
            raise SpecError(f"{where(doc, str(path), 'include')}: include {inc!r}: no such file ({target})")
        _merge(merged, _load_with_includes(target.resolve(), (*stack, path)))
    own: dict[str, Any] = {"tests": [], "dims_at": {}, "presets_at": {}}
    for key in ("dims", "presets"):
        value = doc.get(key)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise SpecError(f"{where(doc, str(path), key)}: `{key}` must be a mapping")
        own[key] = value
        own[f"{key}_at"] = {str(k): where(value, str(path), str(k)) for k in value}
    tests = doc.get("tests")
    if tests is None:
        tests = []
    if not isinstance(tests, list):
        raise SpecError(f"{where(doc, str(path), 'tests')}: `tests` must be a list")
    own["tests"] = tests
    _merge(merged, own)
    return merged


def _merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key in ("dims", "presets"):
        for name, value in other[key].items():
            if name in into[key] and into[key][name] != value:
                raise SpecError(f"{other[f'{key}_at'][name]}: conflict in {key}.{name}: {into[key][name]!r} vs {value!r} "
                                f"(first at {into[f'{key}_at'][name]})")
            into[key][name] = value
            into[f"{key}_at"].setdefault(name, other[f"{key}_at"][name])
    into["tests"] = into["tests"] + list(other["tests"])


def _dims(merged: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, raw_value in merged["dims"].items():
        loc = merged["dims_at"][name]
        value = _lax_int(raw_value)
        if value is None:
            raise SpecError(f"{loc}: dims.{name} must be int")
        if value < 0:
            raise SpecError(f"{loc}: dims.{name} must be >= 0")
        out[str(name)] = value
    return out


# --- tests and templates ---------------------------------------------------------------------------------------


def _op_display(op: Any) -> str:
    if isinstance(op, str):
        return op
    if isinstance(op, dict) and op.get("type") and op.get("path"):
        return f"{op['type']}:{op['path']}"
    return repr(op)


def _label(raw: Any, index: int) -> str:
    if not isinstance(raw, dict):
        return f"index={index}"
    tid, op = raw.get("id"), _op_display(raw.get("op"))
    return f"id={tid} op={op}" if tid else f"op={op}"


@dataclass
class _Test:
    """One test being expanded: where it is, its checked fields, and the node checker for its file."""

    raw: Any
    at: str
    err: _Err
    check: Any
    tid: str | None
    base: dict[str, Any]
    ins: list[Any]
    kwargs: dict[str, Any]
    loc: str
    suite: str
    ctx: dict[str, Any]

    def io(self, env: dict[str, Any]) -> dict[str, Any]:
        return {"in": [self.check.resolve(n, env) for n in self.ins],
                "kwargs": {str(k): self.check.resolve(v, env) for k, v in self.kwargs.items()}}


def _fields(raw: Any, at: str, err: _Err) -> tuple[Any, dict[str, Any], list[Any], dict[str, Any]]:
    """The test's own fields, checked: (id, {impl, device, cast_input0_to_complex}, in, kwargs)."""
    if not isinstance(raw, dict):
        raise err(raw, at, "a test is a mapping (id, op, in, …)")
    extra = [k for k in raw if k not in TEST_FIELDS]
    if extra:
        msgs = []
        for k in extra:
            close = difflib.get_close_matches(str(k), sorted(TEST_FIELDS), n=1, cutoff=0.8)
            msgs.append(f"unknown field '{k}' (did you mean '{close[0]}'?)" if close else f"unknown field '{k}'")
        raise err(raw, at, "; ".join(msgs), key=str(extra[0]))
    for key in ("op", "in"):
        if key not in raw:
            raise err(raw, f"{at}.{key}", "Field required")
    tid = raw.get("id")
    if tid is not None and not isinstance(tid, str):
        raise err(raw, f"{at}.id", "Input should be a valid string", key="id")
    if raw.get("impl") is not None and not isinstance(raw.get("impl"), str):
        raise err(raw, f"{at}.impl", "Input should be a valid string", key="impl")
    device = raw.get("device", "cpu")
    if device not in DEVICES:
        raise err(raw, f"{at}.device", f"Input should be {', '.join(repr(d) for d in DEVICES)}", key="device")
    cast = _lax_bool(raw.get("cast_input0_to_complex", False))
    if cast is None:
        raise err(raw, f"{at}.cast_input0_to_complex", "Input should be a valid boolean", key="cast_input0_to_complex")
    ins = raw["in"]
    if not isinstance(ins, list):
        raise err(raw, f"{at}.in", "Input should be a valid list", key="in")
    kwargs = raw.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise err(raw, f"{at}.kwargs", "Input should be a valid dictionary", key="kwargs")
    return tid, {"impl": raw.get("impl"), "device": device, "cast_input0_to_complex": cast}, ins, kwargs


def _expand(raw: Any, index: int, suite: str, ctx: dict[str, Any]) -> list[Case]:
    err = _Err(_label(raw, index), ctx["suite_file"])
    at = f"tests.{index}"
    tid, base, ins, kwargs = _fields(raw, at, err)
    written = getattr(raw, "file", "")
    ctx = {**ctx, "base": str(Path(written).resolve().parent) if written else ctx["base"]}  # file: paths: next to it
    check = _Nodes(err, ctx)
    check.origin = raw
    # the nodes as written: validated here (a {ref: {var}} is resolved per template row below)
    for i, node in enumerate(ins):
        check.node(node, f"{at}.in.{i}", allow_var_ref=True)
    for k, node in kwargs.items():
        check.node(node, f"{at}.kwargs.{k}", allow_var_ref=True)
    if raw.get("out") is not None:
        check.node(raw["out"], f"{at}.out", allow_var_ref=True)
    t = _Test(raw, at, err, check, tid, base, ins, kwargs, where(raw, ctx["suite_file"]), suite, ctx)
    op = raw["op"]
    name = tid or f"test_{index}"
    if isinstance(op, str):
        if not op.strip() or "::" not in op:
            raise err(raw, f"{at}.op", f"Invalid op string: {op}", key="op")
        return [_case(name, suite, "opdiff", {**base, "op": op, **t.io({})}, t.loc, ctx, op=op, op_loc=where(raw, t.loc, "op"), code=check.code)]
    if not isinstance(op, dict) or op.get("type") not in ("module", "template_module", "template_compare_pair"):
        raise err(raw, f"{at}.op", "op is an ATen name or a node of type module, template_module or template_compare_pair",
                  key="op")
    if op["type"] == "module":
        module = check.build(op, f"{at}.op", "module")
        return [_case(name, suite, "opdiff", {**base, "op": module, **t.io({})}, t.loc, ctx, op=module["path"], code=check.code)]
    fields = TEMPLATE_FIELDS if op["type"] == "template_module" else PAIR_FIELDS
    unknown = [k for k in op if k not in (*fields, "type")]
    if unknown:
        raise err(op, f"{at}.op.{op['type']}", f"unknown field '{unknown[0]}'", key=str(unknown[0]))
    return _template(t, op) if op["type"] == "template_module" else _pair(t, op)


def _template(t: _Test, op: dict[str, Any]) -> list[Case]:
    at = f"{t.at}.op.template_module"
    variables, rows = _vars_and_cases(op, at, "template_module", t.err)
    if not isinstance(op.get("path"), str):
        raise t.err(op, f"{at}.path", "Field required")
    node = {"type": "module", "path": op["path"], "args": op.get("args") or [], "kwargs": op.get("kwargs") or {}}
    t.check.build(node, at, "template_module", allow_vars=set(variables))
    keys = sorted(variables)
    out = []
    for env in _rows(t.ctx["dims"], variables, rows, keys):
        module = t.check.build(node, at, "template_module", env=env)
        out.append(_case(f"{t.tid or 'template'}{_suffix(keys, env)}", t.suite, "opdiff", {**t.base, "op": module, **t.io(env)},
                         t.loc, t.ctx, op=op["path"], code=t.check.code))
    return out


def _pair(t: _Test, op: dict[str, Any]) -> list[Case]:
    at = f"{t.at}.op.template_compare_pair"
    variables, rows = _vars_and_cases(op, at, "template_compare_pair", t.err)
    common = op.get("common") or {}
    if not isinstance(common, dict) or set(common) - {"args", "kwargs"}:
        raise t.err(op, f"{at}.common", "common takes args (a list) and kwargs (a mapping)", key="common")
    sides = {}
    for side in ("a", "b"):
        node = op.get(side)
        if not isinstance(node, dict):
            raise t.err(op, f"{at}.{side}", "Field required")
        bad = [k for k in node if k not in SIDE_FIELDS]
        if bad:
            raise t.err(node, f"{at}.{side}", f"unknown field '{bad[0]}'", key=str(bad[0]))
        for key, why in (("impl", "Field required"), ("path", "Field required")):
            if not isinstance(node.get(key), str):
                raise t.err(node, f"{at}.{side}.{key}", why)
        if node.get("type", "module") != "module":
            raise t.err(node, f"{at}.{side}.type", "Input should be 'module'", key="type")
        args = node.get("args") if node.get("args") is not None else common.get("args") or []
        if not isinstance(args, list):
            raise t.err(node, f"{at}.{side}.args", "template_compare_pair side.args must be a list when provided")
        side_kw = {**(common.get("kwargs") or {}), **(node.get("kwargs") or {})}
        sides[side] = (node, {"type": "module", "path": node["path"], "args": args, "kwargs": side_kw})
        t.check.build(sides[side][1], f"{at}.{side}", "template_compare_pair", allow_vars=set(variables))
    keys = sorted(variables)
    out = []
    for env in _rows(t.ctx["dims"], variables, rows, keys):
        pair_id = f"{t.tid or 'template_compare_pair'}{_suffix(keys, env)}"
        a, b = ({**t.base, "id": f"{pair_id}__{s}", "impl": sides[s][0]["impl"], **t.io(env),
                 "op": t.check.build(sides[s][1], f"{at}.{s}", "template_compare_pair", env=env)} for s in ("a", "b"))
        out.append(_case(pair_id, t.suite, "opdiff-pair", {"a": a, "b": b}, t.loc, t.ctx, op=a["op"]["path"],
                         code=t.check.code))
    return out


def _vars_and_cases(op: dict[str, Any], at: str, kind: str, err: _Err) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    variables = op.get("vars") or {}
    if not isinstance(variables, dict):
        raise err(op, f"{at}.vars", f"{kind}.vars must be a dict", key="vars")
    for k, values in variables.items():
        if not isinstance(k, str) or not k.strip():
            raise err(op, f"{at}.vars", f"{kind}.vars keys must be non-empty strings", key="vars")
        if not isinstance(values, list) or not values:
            raise err(variables, f"{at}.vars", f"{kind}.vars['{k}'] must be a non-empty list", key=str(k))
    rows = op.get("cases") or []
    if not isinstance(rows, list):
        raise err(op, f"{at}.cases", f"{kind}.cases must be a list", key="cases")
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not row:
            raise err(rows, f"{at}.cases", f"{kind}.cases[{i}] must be a non-empty dict")
        extra = [k for k in row if k not in variables]
        if extra:
            raise err(row, f"{at}", f"{kind}.cases[{i}] has keys not declared in vars: {extra}")
    return dict(variables), list(rows)


def _rows(dims: dict[str, int], variables: dict[str, list[Any]], rows: list[dict[str, Any]],
          keys_all: list[str]) -> list[dict[str, Any]]:
    """opdiff's expansion order: each ``cases`` row (or one empty row), then the product of the variables it leaves
    open, in sorted key order; the environment starts from the dims (a variable named like a dim takes the dim)."""
    out = []
    for row in rows or [{}]:
        env0 = dict(dims)
        env0.update(row)
        remaining = [k for k in keys_all if k not in env0]
        for combo in itertools.product(*(variables[k] for k in remaining)) if remaining else [()]:
            env = dict(env0)
            env.update(dict(zip(remaining, combo, strict=True)))
            out.append(env)
    return out


def _safe(value: Any) -> str:
    return "".join(ch if (ch.isalnum() or ch in ("-", "_")) else "_" for ch in str(_plain(value)))


def _suffix(keys: list[str], env: dict[str, Any]) -> str:
    """opdiff's id suffix: ``__k=v`` per template variable, sorted by name, values reduced to [A-Za-z0-9_-]."""
    return "".join(f"__{k}={_safe(env[k])}" for k in keys)


def _case(cid: str, suite: str, kind: str, test: dict[str, Any], loc: str, ctx: dict[str, Any], op: str | None = None,
          op_loc: str = "", code: dict[str, str] | None = None) -> Case:
    # the file: paths checked above (and their contents' hashes): the worker runs these and refuses any other
    code = code or {}
    spec = {"format": "opdiff", "test": test, "seed": ctx["seed"], "samples": ctx["samples"], "base": ctx["base"],
            "cwd": ctx["cwd"], "code": dict(sorted(code.items()))}
    sides = [test["a"], test["b"]] if kind == "opdiff-pair" else [test]
    impls = sorted({s["impl"] for s in sides if s.get("impl")})
    tags = ("opdiff", *(f"impl:{i}" for i in impls), *(("pair",) if kind == "opdiff-pair" else ()))
    return Case(id=cid, suite=suite, kind=kind, spec=spec, op=op, tags=tags, dtypes=("float32",), shapes=("static",),
                source=loc, op_loc=op_loc or loc)


# --- nodes -----------------------------------------------------------------------------------------------------

class _Nodes:
    """Validates input nodes (opdiff's messages) and resolves them: presets inlined, dims and numeric strings to
    numbers, dtypes from kinds, and template variables substituted where opdiff substitutes them."""

    def __init__(self, err: _Err, ctx: dict[str, Any]) -> None:
        self.err, self.dims, self.presets, self.ctx = err, ctx["dims"], ctx["presets"], ctx
        self.origin: Any = None  # the test being read (its file decides whether its file: paths may run)
        self.code: dict[str, str] = {}  # file: paths allowed here -> their contents' hash

    # validation ---------------------------------------------------------------------------------------------
    def node(self, node: Any, at: str, allow_var_ref: bool = False, depth: int = 0) -> None:
        if depth > 64:
            raise self.err(node, at, "nodes nest too deeply (a preset that refers to itself?)")
        node = _shorthand(node)
        if not isinstance(node, dict) or node.get("type") not in NODE_FIELDS:
            kinds = ", ".join(NODE_FIELDS)
            got = node.get("type") if isinstance(node, dict) else type(node).__name__
            raise self.err(node, at, f"Input tag {got!r} found using 'type' does not match any of the expected tags: {kinds}")
        kind = node["type"]
        unknown = [k for k in node if k != "type" and k not in NODE_FIELDS[kind]]
        if unknown:
            raise self.err(node, f"{at}.{kind}", f"unknown field '{unknown[0]}' (a {kind} node takes "
                           f"{', '.join(NODE_FIELDS[kind])})", key=str(unknown[0]))
        NODES[kind].check(self, node, f"{at}.{kind}", allow_var_ref, depth)

    def _kind_dtype(self, node: dict[str, Any], sub: str) -> None:
        kind, dtype = node.get("kind"), node.get("dtype")
        if kind is not None and kind not in KINDS:
            raise self.err(node, f"{sub}.kind", f"Value error, unsupported kind '{kind}'", key="kind")
        if dtype is not None and dtype not in DTYPES:
            raise self.err(node, f"{sub}.dtype", f"Value error, unsupported dtype '{dtype}'", key="dtype")
        if kind is None and dtype is None:
            raise self.err(node, sub, "Value error, must specify either 'dtype' or 'kind'")

    def _shape(self, node: dict[str, Any], sub: str) -> None:
        shape = node.get("shape")
        if not isinstance(shape, list):
            raise self.err(node, f"{sub}.shape", "Field required" if shape is None else "Input should be a valid list", key="shape")
        if not shape:
            raise self.err(node, f"{sub}.shape", "Value error, shape cannot be empty", key="shape")
        for d in shape:
            if isinstance(d, dict) and set(d) == {"var"}:
                raise self.err(node, f"{sub}.shape", "template variables ({var: …}) are not permitted inside shape", key="shape")
            if isinstance(d, bool) or not isinstance(d, (int, str)):
                raise self.err(node, f"{sub}.shape", f"shape entries are ints or dim symbols, not {d!r}", key="shape")
            if isinstance(d, int) and d < 0:
                raise self.err(node, f"{sub}.shape", "Value error, shape dims must be >= 0", key="shape")
            if isinstance(d, str) and not d.strip():
                raise self.err(node, f"{sub}.shape", "Value error, symbolic dims must be non-empty strings", key="shape")
            self._dim(node, d, sub)

    def _dim(self, node: Any, d: Any, sub: str) -> int:
        if isinstance(d, int):
            return d
        if d.strip() not in self.dims:
            raise self.err(node, f"{sub}.shape", f"Unknown dim symbol: {d}", key="shape")
        return int(self.dims[d.strip()])

    def _number(self, node: dict[str, Any], at: str, key: str) -> float:
        v = _lax_float(node[key])
        if v is None:
            raise self.err(node, at, "Input should be a valid number", key=key)
        return v

    def _symbol_or_number(self, node: dict[str, Any], at: str, key: str, what: str) -> float | int:
        v = node[key]
        if isinstance(v, bool) or not isinstance(v, (int, float, str)) or (isinstance(v, str) and not v.strip()):
            raise self.err(node, at, f"Value error, {what} must be a number or a non-empty symbolic string", key=key)
        if not isinstance(v, str):
            return v
        s = v.strip()
        if s in self.dims:
            return int(self.dims[s])
        try:
            return float(s) if any(c in s for c in ".eE") else int(s)
        except ValueError:
            raise self.err(node, at, f"Unknown symbol (or non-numeric) range value: {v}", key=key) from None

    def _scalar(self, node: dict[str, Any], sub: str) -> None:
        value = node.get("value")
        if value is not None and not isinstance(value, (int, float, bool)):
            raise self.err(node, f"{sub}.value", "Input should be a number or a boolean", key="value")
        low, high = node.get("low"), node.get("high")
        for key in ("low", "high"):
            if node.get(key) is not None:
                self._symbol_or_number(node, f"{sub}.{key}", key, f"scalar.{key}")
        if node.get("p") is not None:
            self._number(node, f"{sub}.p", "p")
        if value is not None:
            return
        if (low is None) != (high is None):
            raise self.err(node, sub, "Value error, scalar must specify both low and high (or neither)")
        if node.get("kind") == "bool":
            p = node.get("p")
            if p is not None and not 0.0 <= float(p) <= 1.0:
                raise self.err(node, f"{sub}.p", "Value error, scalar.p must be in [0,1]", key="p")
            return
        if isinstance(low, str) or isinstance(high, str):
            return
        if low is not None and high is not None and not low < high:
            raise self.err(node, sub, "Value error, scalar.low must be < scalar.high")

    # resolution ---------------------------------------------------------------------------------------------
    def resolve(self, node: Any, env: dict[str, Any]) -> dict[str, Any]:
        """The node with presets inlined and symbols resolved (validated already)."""
        node = _shorthand(node)
        return NODES[node["type"]].resolve(self, node, env)

    def build(self, node: Any, at: str, what: str, allow_vars: set[str] | None = None,
              env: dict[str, Any] | None = None) -> dict[str, Any]:
        """A module/construct node: checked (``path`` a string, ``file:x.py::Name`` well-formed and, untrusted,
        refused), with template variables substituted when ``env`` is given."""
        if not isinstance(node, dict) or not isinstance(node.get("path"), str) or not node["path"].strip():
            raise self.err(node, f"{at}.path", "Field required (a class path: torch.nn.Linear or file:x.py::Name)")
        kind = node.get("type", "module")
        bad = [k for k in node if k not in (*BUILD_FIELDS.get(kind, ()), "type")]
        if bad and what not in ("template_module", "template_compare_pair"):
            raise self.err(node, f"{at}.{kind}", f"unknown field '{bad[0]}'", key=str(bad[0]))
        path = node["path"]
        if path.startswith("file:"):
            self._file(node, path, at)
        elif not path.startswith(SAFE_PREFIXES) and not self._code_allowed(node):
            raise self.err(node, f"{at}.path", f"{path} calls Python code outside {', '.join(SAFE_PREFIXES)}; bti calls it only in "
                           "a suite named on the command line (-s) and the files it includes from its own folder tree, or "
                           "with --allow-suite-code", key="path")
        args = node.get("args") or []
        kwargs = node.get("kwargs") or {}
        if not isinstance(args, list):
            raise self.err(node, f"{at}.args", "Input should be a valid list", key="args")
        if not isinstance(kwargs, dict):
            raise self.err(node, f"{at}.kwargs", "Input should be a valid dictionary", key="kwargs")
        return {"type": kind, "path": path, "args": [self._arg(a, f"{at}.args.{i}", allow_vars, env) for i, a in enumerate(args)],
                "kwargs": {str(k): self._arg(v, f"{at}.kwargs.{k}", allow_vars, env) for k, v in kwargs.items()}}

    def _arg(self, value: Any, at: str, allow_vars: set[str] | None, env: dict[str, Any] | None) -> Any:
        if isinstance(value, dict) and (set(value) == {"var"} or value.get("type") == "var"):
            name = value.get("var", value.get("name"))
            if not isinstance(name, str) or not name.strip():
                raise self.err(value, at, "Value error, var.name must be a non-empty string")
            name = name.strip()
            if env is None:
                if allow_vars is not None and name not in allow_vars:
                    raise self.err(value, at, f"Unknown template var '{name}'")
                return {"var": name}
            if name not in env:
                raise self.err(value, at, f"Unknown template var '{name}'")
            v = env[name]
            if isinstance(v, str) and v in env and isinstance(env[v], int):
                return env[v]
            return self._arg(_plain(v), at, allow_vars, {})  # a value that is a node is checked like one written there
        if isinstance(value, dict) and value.get("type") in ("construct", "module"):
            return self.build(value, at, "construct", allow_vars, env)
        if isinstance(value, list):
            return [self._arg(v, f"{at}.{i}", allow_vars, env) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {str(k): self._arg(v, f"{at}.{k}", allow_vars, env) for k, v in value.items()}
        return value

    def _code_allowed(self, node: Any) -> bool:
        if self.ctx["allow_code"]:
            return True
        root, written_in = self.ctx["trusted_root"], getattr(node, "file", "") or getattr(self.origin, "file", "")
        return root is not None and bool(written_in) and _within(Path(written_in), root)

    def _file(self, node: Any, path: str, at: str) -> None:
        spec = path[len("file:"):]
        file_part, sep, sym = spec.partition("::")
        if not sep or not file_part or not sym:
            raise self.err(node, f"{at}.path", f"Invalid file path spec: {path} (expected file:...py::Symbol)", key="path")
        if not self._code_allowed(node):
            raise self.err(node, f"{at}.path", f"{path} runs Python code from a file; bti runs it only in a suite named on "
                           "the command line (-s) and the files it includes from its own folder, or with --allow-suite-code",
                           key="path")
        found = find_code_file(file_part, self.ctx["cwd"], self.ctx["base"])
        if found is None:
            raise self.err(node, f"{at}.path", f"{path}: no such file (looked in {self.ctx['cwd']} and {self.ctx['base']})",
                           key="path")
        # the worker loads only the files checked here; their contents key the result cache (an edit runs again)
        self.code[path] = hashlib.sha256(found.read_bytes()).hexdigest()[:16]


def _shorthand(node: Any) -> Any:
    """``{ref: x}`` as the typed node it stands for, keeping where it was written."""
    if isinstance(node, dict) and "type" not in node and set(node) == {"ref"}:
        typed = LDict(type="ref", ref=node["ref"])
        typed.line, typed.file = getattr(node, "line", 0), getattr(node, "file", "")
        typed.key_lines = dict(getattr(node, "key_lines", {}) or {})
        return typed
    return node


def _within(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def find_code_file(file_part: str, cwd: str, base: str) -> Path | None:
    """A ``file:`` path as opdiff resolves it (against the working directory), else against the suite's folder."""
    candidates = [Path(file_part)] if os.path.isabs(file_part) else [Path(cwd) / file_part, Path(base) / file_part]
    return next((c.resolve() for c in candidates if c.is_file()), None)


__all__ = ["LDict", "LList", "OpdiffOptions", "find_code_file", "is_opdiff", "load_opdiff"]


class _Format:
    """opdiff's suite files as a suite file format (``harness.suites.FILE_FORMATS``)."""

    def reads(self, doc: Any, path: Path) -> bool:
        return is_opdiff(doc, path)

    def load(self, path: Path, options: SuiteOptions) -> list[Case]:
        return load_opdiff(path, named=options.is_named(path), allow_code=options.allow_code, seed=options.seed,
                           samples=options.samples)

    def summary(self, cases: list[Case]) -> str:
        pairs = sum(c.kind == "opdiff-pair" for c in cases)
        aten = [c for c in cases if c.kind == "opdiff" and isinstance(c.spec["test"]["op"], str)]
        return (f"ok (opdiff suite), {len(cases)} tests: {len(aten)} on {len({c.op for c in aten})} ATen ops, "
                f"{len(cases) - len(aten) - pairs} module tests, {pairs} pairs")


FORMAT = _Format()
