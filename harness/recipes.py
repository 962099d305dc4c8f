"""Recipes: one YAML file per lowering flow (torch-free).

```yaml
name: xnnpack-int8-static-per-channel
description: XNNPACK, int8 static quantization (pt2e), per-channel weights
backend: executorch                 # a registered backend (harness.backends) or "module:Class"
partitioners: [xnnpack]             # backend-specific options follow
quantize: {quantizer: xnnpack, per_channel: true, dynamic: false}
dtypes: [float32]                   # optional: other dtypes are SKIP for this recipe
shapes: [static, dynamic]           # optional
runtime: {warmup: 1, repeats: 5}
requires:                           # all must hold, else UNAVAILABLE with the reason
  modules: [openvino]               #   importable python modules
  runtime_backends: [OpenvinoBackend]  # registered in the executorch runtime
  env: [QNN_SDK_ROOT]               #   environment variables
tolerances:                         # per dtype, plus "quantized" (used when quantize is set)
  float32: {atol: 1.0e-4, rtol: 1.0e-4}
  float16: {atol: 1.0e-2, rtol: 1.0e-2, sqnr_db: 40}
  quantized: {sqnr_db: 12}
skip:  [{match: "op.foo.*", reason: "why"}]      # fnmatch on "<case>[<dtype>,<shape>]"
xfail: [{match: "op.max_pool2d.*", reason: "upstream bug #123"}]  # add `delegated_only: true` to expect
                                    # the failure only when the delegate took part of the graph, and
                                    # `unless: [globs]` to except items from `match`
```

An output passes when every criterion its tolerance defines holds: ``|out-ref| <= atol + rtol*|ref|``
element-wise (when atol or rtol is set) and SQNR >= ``sqnr_db`` (when set). Integer and bool
outputs must match exactly unless the recipe sets ``int``/``bool`` tolerances.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import RecipeError
from harness.spec.case import ALL_DTYPES, SHAPES, stable_hash

RECIPE_KEYS = {
    "name", "description", "backend", "partitioners", "quantize", "dtypes", "shapes", "runtime", "requires",
    "tolerances", "skip", "xfail", "options", "compile_specs", "edge_compile",
}
DEFAULT_TOLERANCES: dict[str, dict[str, float]] = {
    "float32": {"atol": 1e-4, "rtol": 1e-4},
    "float16": {"atol": 1e-2, "rtol": 1e-2},
    "bfloat16": {"atol": 5e-2, "rtol": 5e-2},
    "quantized": {"sqnr_db": 10.0},
    "int": {"atol": 0.0, "rtol": 0.0},
}


@dataclass(frozen=True)
class Rule:
    match: str
    reason: str
    delegated_only: bool = False  # xfail only when the delegate took part of the graph
    unless: tuple[str, ...] = ()  # globs excepted from ``match``

    def applies(self, key: str, delegated: bool | None = None) -> bool:
        if self.delegated_only and delegated is False:
            return False
        return fnmatch.fnmatchcase(key, self.match) and not any(fnmatch.fnmatchcase(key, u) for u in self.unless)


@dataclass(frozen=True)
class Recipe:
    name: str
    backend: str
    raw: dict[str, Any] = field(hash=False, compare=False)
    description: str = ""
    path: str = ""
    skip: tuple[Rule, ...] = ()
    xfail: tuple[Rule, ...] = ()

    @property
    def hash(self) -> str:
        return stable_hash(self.raw)

    @property
    def quantize(self) -> dict[str, Any] | None:
        return self.raw.get("quantize") or None

    @property
    def runtime(self) -> dict[str, Any]:
        return {"warmup": 1, "repeats": 3, **(self.raw.get("runtime") or {})}

    def tolerance(self, dtype: str) -> dict[str, float]:
        tols = {**DEFAULT_TOLERANCES, **(self.raw.get("tolerances") or {})}
        if self.quantize and dtype in ("float32", "float16", "bfloat16"):
            return dict(tols["quantized"])
        if dtype in ("bool",) or dtype.startswith(("int", "uint")):
            return dict(tols.get(dtype) or tols["int"])
        return dict(tols.get(dtype) or tols["float32"])

    def skip_reason(self, key: str, dtype: str, shape: str) -> str | None:
        dtypes = self.raw.get("dtypes")
        if dtypes and dtype not in dtypes:
            return f"recipe {self.name} runs dtypes {', '.join(dtypes)}, not {dtype}"
        shapes = self.raw.get("shapes")
        if shapes and shape not in shapes:
            return f"recipe {self.name} runs {', '.join(shapes)} shapes, not {shape}"
        for rule in self.skip:
            if rule.applies(key):
                return rule.reason
        return None

    def xfail_reason(self, key: str, delegated: bool | None = None) -> str | None:
        for rule in self.xfail:
            if rule.applies(key, delegated):
                return rule.reason
        return None


def recipe_dirs() -> list[Path]:
    """Where recipe names are looked up: $BTI_RECIPE_PATH (os.pathsep-separated), ./recipes, bti's own.

    bti's own are the repository's ``recipes/`` in a checkout, and ``harness/_recipes`` in an installed wheel.
    """
    dirs = [Path(p) for p in os.environ.get("BTI_RECIPE_PATH", "").split(os.pathsep) if p]
    dirs.append(Path.cwd() / "recipes")
    here = Path(__file__).resolve().parent
    dirs += [here.parent / "recipes", here / "_recipes"]
    seen, out = set(), []
    for d in dirs:
        if d.is_dir() and d.resolve() not in seen:
            seen.add(d.resolve())
            out.append(d)
    return out


def available_recipe_files() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for d in recipe_dirs():
        for f in sorted(d.glob("*.yaml")):
            out.setdefault(f.stem, f)
    return out


def load_recipe(name_or_path: str) -> Recipe:
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        files = available_recipe_files()
        if name_or_path not in files:
            known = ", ".join(sorted(files)) or "none found"
            raise RecipeError(f"unknown recipe {name_or_path!r}", hint=f"known recipes: {known}")
        path = files[name_or_path]
    return parse_recipe(path)


def parse_recipe(path: Path) -> Recipe:
    from harness.spec.yamlload import load_yaml, where

    try:
        raw = load_yaml(path)
    except RecipeError:
        raise
    except Exception as exc:  # SpecError from the loader: re-raise as a recipe error, same line
        raise RecipeError(str(exc)) from None
    loc = where(raw, str(path))
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}:1: a recipe must be a mapping")
    unknown = set(raw) - RECIPE_KEYS
    if unknown:
        raise RecipeError(f"{loc}: unknown recipe key(s): {', '.join(sorted(unknown))}")
    name = raw.get("name") or path.stem
    backend = raw.get("backend")
    if not isinstance(backend, str) or not backend:
        raise RecipeError(f"{loc}: recipe {name} needs `backend:`")
    for key, allowed in (("dtypes", ALL_DTYPES), ("shapes", SHAPES)):
        for v in raw.get(key) or []:
            if v not in allowed:
                raise RecipeError(f"{loc}: unknown {key[:-1]} {v!r} in `{key}`")
    for dtype, tol in (raw.get("tolerances") or {}).items():
        if not isinstance(tol, dict) or set(tol) - {"atol", "rtol", "sqnr_db"}:
            raise RecipeError(f"{loc}: tolerances.{dtype} takes atol, rtol, sqnr_db")
    return Recipe(
        name=str(name),
        backend=backend,
        raw=_plain(raw),
        description=str(raw.get("description", "")),
        path=str(path),
        skip=_rules(raw.get("skip"), loc, "skip"),
        xfail=_rules(raw.get("xfail"), loc, "xfail"),
    )


def _rules(raw: Any, loc: str, key: str) -> tuple[Rule, ...]:
    if not raw:
        return ()
    if not isinstance(raw, list):
        raise RecipeError(f"{loc}: `{key}` must be a list of {{match, reason}}")
    out = []
    for r in raw:
        if not isinstance(r, dict) or not r.get("match") or not r.get("reason") or set(r) - {"match", "reason", "delegated_only", "unless"}:
            raise RecipeError(f"{loc}: each `{key}` entry takes `match:`, `reason:` and optionally `delegated_only:`, `unless:`")
        unless = r.get("unless") or []
        if not isinstance(unless, list):
            raise RecipeError(f"{loc}: `unless` takes a list of globs")
        out.append(Rule(str(r["match"]), str(r["reason"]), bool(r.get("delegated_only", False)), tuple(map(str, unless))))
    return tuple(out)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
