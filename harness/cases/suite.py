"""Operator suite YAML → ``Case`` objects.

Format (documented in README "Suite spec"):

```yaml
suite: ops                      # suite name
include: [other.yaml]           # merged first (dims, presets, defaults, cases)
dims: {N: 2, C: 4, H: 8}        # named sizes usable in shapes and as dynamic dims
presets:                        # reusable tensor nodes
  img: {shape: [N, C, H, H]}
defaults: {dtypes: [float32], tags: []}
cases:
  - id: bcast_rank4             # variant; the case id is op.<aten name>.<variant>
    op: aten::add.Tensor        # or a module path: torch.nn.functional.gelu, torch.nn.Conv2d
    args: [{preset: img}, {shape: [1, C, 1, 1], init: uniform, low: -2, high: 2}]
    kwargs: {alpha: 2}
    dtypes: [float32, float16]  # the dtype axis (tensor inputs without an explicit dtype take it)
    dynamic: {N: [1, 8]}        # adds the dynamic axis: N is a torch.export.Dim in [1, 8]
    ref: float32                # compute the reference upcast (default: eager in the case dtype)
  - template: {op: [aten::abs, aten::neg], rank: [0, 1, 4]}
    id: "rank{rank}"
    op: "{op}"
    args: [{preset: "r{rank}"}]
    cases: [{rank: 4}, {op: aten::abs}]   # optional: keep only combinations matching one of these
    exclude: [{op: aten::neg, rank: 0}]   # optional: drop matching combinations
  - template:                   # a row given as a mapping binds all its keys at once (zipped values)
      v: [{name: k2, k: [2, 2]}, {name: k3, k: [3, 3]}]
    id: "{v}"
    op: aten::max_pool2d.default
    args: [{preset: img}, "{k}"]  # a whole-string placeholder keeps the value's type (here a list)
```

Tensor nodes: ``shape`` (ints or dim names), ``dtype`` (default: the axis dtype), ``init`` (normal,
uniform, randint, zeros, ones, bernoulli, arange) with ``mean/std/low/high/p``, and ``layout``
(contiguous, transposed, permuted, strided: the module receives a contiguous tensor and makes the
non-contiguous view inside the graph). ``{torch_dtype: float16}`` passes a dtype argument.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from harness.cases.case import ALL_DTYPES, Case
from harness.cases.yamlload import load_yaml, where
from harness.errors import SpecError
from harness.settings import seconds_or_none

INITS = ("normal", "uniform", "randint", "zeros", "ones", "bernoulli", "arange", "full", "special")
LAYOUTS = ("contiguous", "transposed", "permuted", "strided", "complex")
CASE_KEYS = {
    "id", "op", "op_id", "args", "kwargs", "init", "dtypes", "dynamic", "tags", "ref",
    "template", "cases", "exclude", "tolerance", "method", "timeout_s", "timeouts",
}
TENSOR_KEYS = {"shape", "preset", "dtype", "init", "mean", "std", "low", "high", "p", "layout", "value"}
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def load_suite(path: Path, name: str | None = None, check: bool = True) -> list[Case]:
    doc = _load_with_includes(path, seen=())
    suite = name or doc.get("suite") or path.stem
    dims = doc["dims"]
    cases: list[Case] = []
    seen: dict[str, str] = {}
    pairs = [raw for raw in doc["cases"] if isinstance(raw, dict) and "pair" in raw]
    for raw in doc["cases"]:
        if isinstance(raw, dict) and "pair" in raw:
            continue
        for case in _expand(raw, suite, dims, doc["presets"], doc["defaults"]):
            if case.id in seen:
                raise SpecError(f"{case.source}: duplicate case id {case.id} (first at {seen[case.id]})")
            seen[case.id] = case.source
            cases.append(case)
    by_id = {c.id: c for c in cases}
    for raw in pairs:
        case = _pair(raw, suite, by_id)
        if case.id in seen:
            raise SpecError(f"{case.source}: duplicate case id {case.id} (first at {seen[case.id]})")
        seen[case.id] = case.source
        cases.append(case)
    if check:
        check_ops(cases)
    return cases


def case_tolerance(raw: Any, loc: str) -> dict[str, Any]:
    """A case's ``tolerance:``: atol, rtol, sqnr_db (numbers) and shape_only (true/false)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) - {"atol", "rtol", "sqnr_db", "shape_only"}:
        raise SpecError(f"{loc}: `tolerance` takes atol, rtol, sqnr_db (numbers) and shape_only (true/false)")
    for key, value in raw.items():
        ok = isinstance(value, bool) if key == "shape_only" else isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            raise SpecError(f"{loc}: tolerance.{key} {'takes true or false' if key == 'shape_only' else 'must be a number'}, not {value!r}")
    return dict(raw)


def _input_shapes(spec: dict[str, Any]) -> list[list[int]]:
    """The concrete shapes of a case's tensor inputs, in order (dims resolved)."""
    out: list[list[int]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict) and "tensor" in node:
            out.append([spec["dims"].get(s, s) if isinstance(s, str) else s for s in node["tensor"]["shape"]])
        elif isinstance(node, dict) and "list" in node:
            for n in node["list"]:
                walk(n)

    for a in spec["args"]:
        walk(a)
    for v in spec["kwargs"].values():
        walk(v)
    return out


def _pair(raw: dict[str, Any], suite: str, by_id: dict[str, Case]) -> Case:
    """``- {id: ln_vs_rms, pair: {a: op.layer_norm.x, b: op.rms_norm.y}}``: the two cases' outputs are
    compared with each other on the same backend (a against b). Both must be in this file and take
    inputs of equal shapes; they share a's inputs."""
    loc = where(raw, "<suite>")
    if set(raw) - {"id", "pair", "tags", "tolerance"}:
        raise SpecError(f"{loc}: a pair entry takes id, pair: {{a, b}}, tags, tolerance")
    pair = raw.get("pair")
    variant = raw.get("id")
    if not isinstance(variant, (str, int)) or not re.fullmatch(r"[\w.\-]+", str(variant)):
        raise SpecError(f"{loc}: a pair needs an `id:` made of letters, digits, _ . -; got {variant!r}")
    if not isinstance(pair, dict) or set(pair) != {"a", "b"}:
        raise SpecError(f"{loc}: `pair` takes {{a: CASE_ID, b: CASE_ID}}")
    ends = []
    for key in ("a", "b"):
        if not isinstance(pair[key], str):
            raise SpecError(f"{loc}: pair.{key} takes a case id (a string), not {pair[key]!r}")
        if pair[key] not in by_id:
            raise SpecError(f"{loc}: pair.{key}: no case {pair[key]!r} in this suite file (known: "
                            f"{', '.join(sorted(by_id)[:8])}{'…' if len(by_id) > 8 else ''})")
        ends.append(by_id[pair[key]])
    a, b = ends
    if a.kind != "op" or b.kind != "op":
        raise SpecError(f"{loc}: a pair compares two operator cases")
    sa, sb = _input_shapes(a.spec), _input_shapes(b.spec)
    if sa != sb:
        raise SpecError(f"{loc}: pair inputs differ: {a.id} takes {sa}, {b.id} takes {sb}; a pair needs equal input shapes")
    if a.spec["dynamic"] != b.spec["dynamic"]:
        raise SpecError(f"{loc}: pair {a.id} and {b.id} declare different dynamic dims")
    dtypes = tuple(d for d in a.dtypes if d in b.dtypes)
    if not dtypes:
        raise SpecError(f"{loc}: pair {a.id} ({', '.join(a.dtypes)}) and {b.id} ({', '.join(b.dtypes)}) share no dtype")
    tags = raw.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise SpecError(f"{loc}: `tags` takes a list of strings")
    spec = {"a": a.id, "b": b.id, "a_spec": a.spec, "b_spec": b.spec, "tolerance": case_tolerance(raw.get("tolerance"), loc)}
    return Case(id=f"pair.{variant}", suite=suite, kind="pair", spec=spec, op=None,
                tags=tuple(sorted({"pair", *tags})), dtypes=dtypes,
                shapes=tuple(s for s in a.shapes if s in b.shapes), source=loc)


def _load_with_includes(path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    path = path.resolve()
    if path in seen:
        raise SpecError(f"{path}: include cycle")
    doc = load_yaml(path)
    if not isinstance(doc, dict):
        raise SpecError(f"{path}:1: a suite file must be a mapping with a `cases:` list")
    unknown = set(doc) - {"suite", "include", "dims", "presets", "defaults", "cases", "description"}
    if unknown:
        raise SpecError(f"{where(doc, str(path))}: unknown top-level key(s): {', '.join(sorted(unknown))}")
    merged: dict[str, Any] = {"dims": {}, "presets": {}, "defaults": {}, "cases": []}
    for inc in doc.get("include") or []:
        sub = _load_with_includes(path.parent / str(inc), (*seen, path))
        for key in ("dims", "presets", "defaults"):
            merged[key].update(sub[key])
        merged["cases"].extend(sub["cases"])
    for key in ("dims", "presets", "defaults"):
        value = doc.get(key) or {}
        if not isinstance(value, dict):
            raise SpecError(f"{where(doc, str(path))}: `{key}` must be a mapping")
        merged[key].update(value)
    cases = doc.get("cases") or []
    if not isinstance(cases, list):
        raise SpecError(f"{where(doc, str(path))}: `cases` must be a list")
    merged["cases"].extend(cases)
    for name, size in merged["dims"].items():
        if not isinstance(size, int) or size < 0:
            raise SpecError(f"{where(doc, str(path))}: dim {name} must be a non-negative int, got {size!r}")
    merged["suite"] = doc.get("suite")
    return merged


def _expand(raw: Any, suite: str, dims: dict[str, int], presets: dict[str, Any], defaults: dict[str, Any]) -> list[Case]:
    loc = where(raw, "<suite>")
    if not isinstance(raw, dict):
        raise SpecError(f"{loc}: each case must be a mapping")
    unknown = set(raw) - CASE_KEYS
    if unknown:
        raise SpecError(f"{loc}: unknown case key(s): {', '.join(sorted(unknown))}")
    template = raw.get("template")
    if template is None:
        return [_build_case(raw, loc, suite, dims, presets, defaults)]
    if not isinstance(template, dict) or not all(isinstance(v, list) and v for v in template.values()):
        raise SpecError(f"{loc}: `template` must map names to non-empty lists")
    names = list(template)
    keep = raw.get("cases")
    drop = raw.get("exclude") or []
    body = {k: v for k, v in raw.items() if k not in ("template", "cases", "exclude")}
    out = []
    for values in itertools.product(*(template[n] for n in names)):
        binding: dict[str, Any] = {}
        for name, value in zip(names, values, strict=True):
            if isinstance(value, dict):  # a zipped row: its keys bind too, the variable binds to its `name`
                if "name" not in value:
                    raise SpecError(f"{loc}: template rows given as mappings need a `name:`")
                binding.update(value)
                binding[name] = value["name"]
            else:
                binding[name] = value
        if keep is not None and not any(_matches(binding, c) for c in keep):
            continue
        if any(_matches(binding, c) for c in drop):
            continue
        out.append(_build_case(_substitute(body, binding, loc), loc, suite, dims, presets, defaults))
    return out


def _matches(binding: dict[str, Any], constraint: Any) -> bool:
    return isinstance(constraint, dict) and all(binding.get(k) == v for k, v in constraint.items())


def _substitute(value: Any, binding: dict[str, Any], loc: str) -> Any:
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole and whole.group(1) in binding:
            return binding[whole.group(1)]

        def repl(m: re.Match[str]) -> str:
            if m.group(1) not in binding:
                raise SpecError(f"{loc}: template placeholder {{{m.group(1)}}} is not a template variable")
            return str(binding[m.group(1)])

        return _PLACEHOLDER.sub(repl, value)
    if isinstance(value, dict):
        return {k: _substitute(v, binding, loc) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, binding, loc) for v in value]
    return value


def check_ops(cases: list[Case]) -> None:
    """Resolve every case's ``op`` against torch (imports torch): an unknown op is a SpecError at
    the line that names it (bti's own YAML here; another suite file format's kinds by their registered check,
    ``harness.suites.OP_CHECKS``). Kept apart from loading so a run whose items all come from the cache
    never imports torch."""
    from harness.cases.ops import resolve_op
    from harness.suites import op_checks

    checks = op_checks({c.kind for c in cases})
    checked: set[str] = set()
    for case in cases:
        op = case.spec.get("op") if case.kind == "op" else None
        if isinstance(op, str) and op not in checked:
            resolve_op(op, case.op_loc or case.source)
            checked.add(op)
        check = checks.get(case.kind)
        if check is not None and isinstance(case.op, str) and case.op not in checked:
            problem = check(case)
            if problem:
                raise SpecError(f"{case.op_loc or case.source}: unknown op {case.op!r}: {problem}")
            checked.add(case.op)


def _build_case(raw: dict[str, Any], loc: str, suite: str, dims: dict[str, int], presets: dict[str, Any], defaults: dict[str, Any]) -> Case:
    from harness.cases.ops import op_short_name

    op = raw.get("op")
    if not isinstance(op, str) or not op:
        raise SpecError(f"{loc}: case needs `op:` (aten::name[.overload] or a module path)")
    variant = raw.get("id")
    if not isinstance(variant, (str, int)) or not re.fullmatch(r"[\w.\-]+", str(variant)):
        raise SpecError(f"{loc}: case needs an `id:` made of letters, digits, _ . -; got {variant!r}")
    used: set[str] = set()
    args = [_node(a, loc, dims, presets, used) for a in raw.get("args") or []]
    kwargs_raw = raw.get("kwargs") or {}
    if not isinstance(kwargs_raw, dict):
        raise SpecError(f"{loc}: `kwargs` must be a mapping")
    kwargs = {str(k): _node(v, loc, dims, presets, used) for k, v in kwargs_raw.items()}
    dtypes = tuple(str(d) for d in (raw.get("dtypes") or defaults.get("dtypes") or ["float32"]))
    for d in dtypes:
        if d not in ALL_DTYPES:
            raise SpecError(f"{loc}: unknown dtype {d!r} (known: {', '.join(ALL_DTYPES)})")
    dynamic = _dynamic(raw.get("dynamic"), loc, dims, used)
    ref = raw.get("ref", "eager")
    if ref not in ("eager", "float32", "float64"):
        raise SpecError(f"{loc}: `ref` must be eager, float32 or float64")
    tags = tuple(sorted({*(defaults.get("tags") or []), *(raw.get("tags") or [])}))
    spec = {
        "op": op,
        "args": args,
        "kwargs": kwargs,
        "init": dict(raw.get("init") or {}),
        "dims": {d: dims[d] for d in sorted(used)},
        "dynamic": dynamic,
        "ref": ref,
        "tolerance": case_tolerance(raw.get("tolerance"), loc),
    }
    if "timeout_s" in raw:  # a slow case's own time, when longer than --timeout (harness.settings.case_timeout)
        seconds = seconds_or_none(raw["timeout_s"])
        if not seconds:
            raise SpecError(f"{loc}: `timeout_s` must be a positive number of seconds, got {raw['timeout_s']!r}")
        spec["timeout_s"] = seconds
    if "timeouts" in raw:  # the same, on one recipe (``timeouts: {portable: 1800}``)
        per = raw["timeouts"]
        if not isinstance(per, dict) or not per or not all(isinstance(r, str) and seconds_or_none(v) for r, v in per.items()):
            raise SpecError(f"{loc}: `timeouts` must map recipe names to positive numbers of seconds, got {per!r}")
        spec["timeouts"] = {r: float(v) for r, v in sorted(per.items())}
    name = str(raw.get("op_id") or op_short_name(op))
    return Case(
        id=f"op.{name}.{variant}",
        suite=suite,
        kind="op",
        spec=spec,
        op=op,
        tags=tags,
        dtypes=dtypes,
        shapes=("static", "dynamic") if dynamic else ("static",),
        source=loc,
        op_loc=where(raw, loc, key="op"),
    )


def _node(value: Any, loc: str, dims: dict[str, int], presets: dict[str, Any], used: set[str]) -> Any:
    if isinstance(value, dict):
        if "torch_dtype" in value:
            if value["torch_dtype"] not in ALL_DTYPES:
                raise SpecError(f"{loc}: unknown torch_dtype {value['torch_dtype']!r}")
            return {"torch_dtype": value["torch_dtype"]}
        return {"tensor": _tensor(value, loc, dims, presets, used)}
    if isinstance(value, list):
        items = [_node(v, loc, dims, presets, used) for v in value]
        if any(isinstance(i, dict) for i in items):
            return {"list": items}
        return items
    if isinstance(value, str) and value in dims:
        used.add(value)
        return {"dim": value}
    return value


def _tensor(node: dict[str, Any], loc: str, dims: dict[str, int], presets: dict[str, Any], used: set[str]) -> dict[str, Any]:
    node = dict(node)
    preset = node.pop("preset", None)
    if preset is not None:
        if preset not in presets:
            raise SpecError(f"{loc}: unknown preset {preset!r}")
        node = {**presets[preset], **node}
    unknown = set(node) - TENSOR_KEYS
    if unknown:
        raise SpecError(f"{loc}: unknown tensor key(s): {', '.join(sorted(unknown))}")
    shape = node.get("shape")
    if not isinstance(shape, list):
        raise SpecError(f"{loc}: a tensor input needs `shape:` as a list (or a `preset:`)")
    for s in shape:
        if isinstance(s, str):
            if s not in dims:
                raise SpecError(f"{loc}: unknown dim {s!r} in shape {list(shape)}")
            used.add(s)
        elif not isinstance(s, int) or s < 0:
            raise SpecError(f"{loc}: shape entries are dim names or ints >= 0, got {s!r}")
    init = node.get("init", "normal")
    if init not in INITS:
        raise SpecError(f"{loc}: unknown init {init!r} (known: {', '.join(INITS)})")
    layout = node.get("layout", "contiguous")
    if layout not in LAYOUTS:
        raise SpecError(f"{loc}: unknown layout {layout!r} (known: {', '.join(LAYOUTS)})")
    dtype = node.get("dtype")
    if dtype is not None and dtype not in ALL_DTYPES:
        raise SpecError(f"{loc}: unknown dtype {dtype!r}")
    params = {k: node[k] for k in ("mean", "std", "low", "high", "p", "value") if k in node}
    return {"shape": list(shape), "dtype": dtype, "init": init, "params": params, "layout": layout}


def _dynamic(raw: Any, loc: str, dims: dict[str, int], used: set[str]) -> dict[str, dict[str, int]]:
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise SpecError(f"{loc}: `dynamic` maps dim names to [min, max] (optionally {{min, max, run}})")
    out = {}
    for name, rng in raw.items():
        if name not in dims:
            raise SpecError(f"{loc}: dynamic dim {name!r} is not in `dims`")
        if name not in used:
            raise SpecError(f"{loc}: dynamic dim {name!r} is not used by any input shape")
        if isinstance(rng, list) and len(rng) == 2:
            lo, hi, run = rng[0], rng[1], None
        elif isinstance(rng, dict):
            lo, hi, run = rng.get("min"), rng.get("max"), rng.get("run")
        else:
            raise SpecError(f"{loc}: dynamic dim {name}: expected [min, max]")
        size = dims[name]
        if not (isinstance(lo, int) and isinstance(hi, int) and lo <= size <= hi):
            raise SpecError(f"{loc}: dynamic dim {name}: need ints min <= {size} <= max, got [{lo}, {hi}]")
        if run is None:
            run = size + 1 if size + 1 <= hi else size - 1
        if not lo <= run <= hi or run == size:
            raise SpecError(f"{loc}: dynamic dim {name}: run size {run} must differ from {size} and lie in range")
        out[name] = {"min": lo, "max": hi, "run": run}
    return out


