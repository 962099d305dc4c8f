"""Recipes: one YAML file per flow (torch-free, apart from the backend's own option parser).

```yaml
name: xnnpack-int8-static-per-channel
description: XNNPACK, int8 static quantization (pt2e), per-channel weights
setup: https://…/xnnpack.md                # optional: the accelerator's setup notes (linked from the portal)
backend: executorch                 # a registered backend (harness.backends) or "module:Class"
partitioners: [xnnpack]             # the backend's own options: it parses them (Backend.parse_options)
quantize: {quantizer: xnnpack, per_channel: true, dynamic: false}
dtypes: [float32]                   # optional: other dtypes are SKIP for this recipe
shapes: [static, dynamic]           # optional
capabilities: {ranks: [1, 4], dynamic: true, quantization: [int8]}  # optional: items outside are SKIP, naming
                                    # it; a recipe quantizing outside its own `quantization` is refused at load
accuracy: {rule: dynamo, top1: 0.99, deterministic: true}  # optional model-level checks (see Accuracy)
runtime: {warmup: 1, repeats: 5}      # optional: provider (pybind | runner[:PATH] | command:TEMPLATE, with
                                    # push, pull, remote_dir, vars), threads (see harness/providers.py)
requires:                           # to lower and run: all must hold, else UNAVAILABLE with the reason
  modules: [openvino]               #   importable python modules
  runtime_backends: [OpenvinoBackend]  # registered in the executorch runtime
  env: [QNN_SDK_ROOT]               #   environment variables
  executables: [model-converter]    #   on PATH (or beside this interpreter, as a venv installs them)
  platforms: [darwin]               #   sys.platform, one of
run_requires:                       # to run only: where one fails, items stop once serialized as LOWERED
  runtime_backends: [CoreMLBackend] #   (neither a pass nor a failure), with the reason and everything
  note: the Core ML runtime is built for macOS and iOS only  # measured so far; `note` says why, for people
tolerances:                         # per dtype, plus "quantized" (used when the recipe quantizes)
  float32: {atol: 1.0e-4, rtol: 1.0e-4}
  float16: {atol: 1.0e-2, rtol: 1.0e-2, sqnr_db: 40}
  quantized: {qtol: 1, atol: 1.0e-3, rtol: 1.0e-3, sqnr_db: 12}  # against the quantized program; sqnr_db against fp32
skip:  [{match: "op.foo.*", reason: "why"}]      # fnmatch on "<case>[<dtype>,<shape>]"
xfail:                              # each rule names the failure it expects
  - {match: "op.max_pool2d.*", status: FAIL_LOWER, message: "IndexError", reason: "upstream bug #123"}
expect:                             # what must be delegated; a silent fallback is FAIL_DELEGATION
  - {match: "op.add.*", delegated_ops: [aten.add.Tensor], min_delegated_pct: 100}
```

A ``skip``/``xfail``/``expect`` list may hold ``- include: NAME``: the same list of the rules file ``rules/NAME.yaml``
(beside the recipe, then in each recipe directory: ``recipe_dirs``), spliced in at that place, so one triage shared by
several recipes (ExecuTorch's portable kernels wherever an op falls back to them) is written once. ``- {include: NAME,
unless: [globs]}`` excepts the recipe's items matching a glob from every rule it brings. A rules file holds
``description:`` and ``skip``/``xfail``/``expect`` lists, without includes of its own. The recipe's hash is the hash of
the recipe with its includes written out.

Rules (``skip``, ``xfail``, ``expect``) take ``suite:`` (a glob on the suite name), ``unless:``
(globs excepted from ``match``) and ``versions:`` (package -> PEP 440 specifier, e.g.
``versions: {executorch: "<1.5"}``: the rule holds only where every named package is installed at such a
version, so one recipe is right on every supported pair), and ``when:`` (a machine fact of ``harness.facts`` -> its
value or values, e.g. ``when: {openvino-cpu-precision: bf16}``: the rule holds only on such machines). An xfail
rule's ``status`` is one status or a list; ``message`` is a regular expression searched in the failure's message;
``delegated_only: true`` expects the failure only when the delegate took part of the graph. A listed item that fails
any other way is a failure, reported with the xfail reason beside it.

What the tolerances hold outputs to is ``harness.judge``'s (docs/recipes.md, "How outputs are judged"): a float
output against fp64 within ``atol + rtol*|fp64|`` plus twice eager's own error at each element, and SQNR >= ``sqnr_db``
against eager (when set); a quantized recipe's output against its quantized program run in eager PyTorch, within
``qtol`` steps of the output's dequantize scale (default 1) plus ``atol + rtol*|ref|`` (default 1e-3 each), while
``sqnr_db``/``cosine`` floor the quantized program against fp32 (the quantizer's accuracy). Integer and bool
outputs must match exactly unless the recipe sets ``int``/``bool`` tolerances.
"""

from __future__ import annotations

import copy
import fnmatch
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cases.case import ALL_DTYPES, SHAPES, UNINITIALIZED, stable_hash
from harness.errors import RecipeError
from harness.providers import ProviderSpec, parse_spec
from harness.status import Stage, Status

if TYPE_CHECKING:
    from harness.cases.case import Item

# Keys every recipe may have; anything else belongs to the backend, which parses it.
RECIPE_KEYS = frozenset({
    "name", "description", "setup", "accuracy", "backend", "dtypes", "shapes", "capabilities", "runtime", "requires", "run_requires", "tolerances",
    "skip", "xfail", "expect",
})
DEFAULT_TOLERANCES: dict[str, dict[str, float]] = {
    "float32": {"atol": 1e-4, "rtol": 1e-4},
    "float16": {"atol": 1e-2, "rtol": 1e-2},
    "bfloat16": {"atol": 5e-2, "rtol": 5e-2},
    "quantized": {"sqnr_db": 10.0},
    "int": {"atol": 0.0, "rtol": 0.0},
}
TOLERANCE_KEYS = ("atol", "rtol", "sqnr_db", "cosine")
XFAIL_STATUSES = frozenset(s for s in Status if s.expectable)


@dataclass(frozen=True)
class Rule:
    """One ``skip``/``xfail``/``expect`` entry. ``applies`` matches the item key and suite."""

    match: str
    reason: str = ""
    suite: str = "*"
    unless: tuple[str, ...] = ()  # globs excepted from ``match``
    delegated_only: bool = False  # xfail: only when the delegate took part of the graph
    statuses: frozenset[Status] = frozenset()  # xfail: the failure(s) expected
    message: re.Pattern[str] | None = field(default=None, compare=False)  # xfail: searched in the error message
    delegated_ops: tuple[str, ...] = ()  # expect
    min_delegated_pct: float | None = None  # expect
    versions: tuple[tuple[str, str], ...] = ()  # (package, PEP 440 specifier): the rule holds only on these installs
    when: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (fact, its admitted values): only on such machines (harness.facts)
    stage: Stage | None = None  # xfail of a CRASH or TIMEOUT: the stage it comes in (the record's ``died_in``)
    min_sqnr_db: float | None = None  # xfail of a FAIL_MISMATCH: how far it may be, each output's SQNR to its reference

    def applies(self, key: str, suite: str = "", delegated: bool | None = None) -> bool:
        if self.delegated_only and delegated is False:
            return False
        if suite and not fnmatch.fnmatchcase(suite, self.suite):
            return False
        if not fnmatch.fnmatchcase(key, self.match) or any(fnmatch.fnmatchcase(key, u) for u in self.unless):
            return False
        return (not self.versions or self.on_installed_versions()) and (not self.when or self.on_this_machine())

    def on_installed_versions(self) -> bool:
        """Whether every package named in ``versions:`` is installed at a version its specifier admits."""
        from harness.versions import cached_version, in_spec

        for package, spec in self.versions:
            have = cached_version(package)
            if have is None or not in_spec(have, spec):
                return False
        return True

    def on_this_machine(self) -> bool:
        """Whether every fact named in ``when:`` has one of its admitted values here (``harness.facts``)."""
        from harness.facts import fact

        return all(fact(name) in values for name, values in self.when)

    def expects(self, status: Status, message: str, died_in: Stage | None = None, sqnr_db: float | None = None) -> bool:
        """Whether a failure with this status and message is the one this xfail rule names (a CRASH or TIMEOUT, in the
        rule's ``stage`` where it names one; a mismatch no farther than its ``min_sqnr_db``, where it sets one:
        ``sqnr_db`` is the item's lowest output SQNR against its reference, None where none was measured)."""
        if status not in self.statuses:
            return False
        if self.stage is not None and status.died and died_in is not self.stage:
            return False
        if self.min_sqnr_db is not None and status is Status.FAIL_MISMATCH and (sqnr_db is None or sqnr_db < self.min_sqnr_db):
            return False
        return self.message is None or self.message.search(message) is not None

    @property
    def stale_if_lowered(self) -> bool:
        """An xfail rule that expects only failures a LOWERED item has passed (``Status.found_by_lowering``, or a crash
        or hang in a stage before the run): where the item lowers, the rule no longer holds."""
        before_run = self.stage is not None and self.stage.failure.found_by_lowering  # a stage a LOWERED item has passed
        return bool(self.statuses) and all(s.found_by_lowering or (s.died and before_run) for s in self.statuses)

    def describe(self) -> str:
        what = "|".join(sorted(s.value for s in self.statuses))
        return (what + (f" in {self.stage.value}" if self.stage is not None else "")
                + (f" matching /{self.message.pattern}/" if self.message is not None else "")
                + (f" at {self.min_sqnr_db:g} dB SQNR or better" if self.min_sqnr_db is not None else ""))


@dataclass(frozen=True)
class Requires:
    modules: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    runtime_backends: tuple[str, ...] = ()  # registered in the ExecuTorch runtime
    executables: tuple[str, ...] = ()  # on PATH, or in this interpreter's scripts directory
    platforms: tuple[str, ...] = ()  # sys.platform values, any of
    note: str = ""  # why, in words (run_requires: said beside a LOWERED item's missing piece)

    def __bool__(self) -> bool:
        return bool(self.modules or self.env or self.runtime_backends or self.executables or self.platforms)


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports; items outside are SKIP naming the capability (empty: anything)."""

    ranks: tuple[int, ...] = ()
    dynamic: bool = True
    quantization: tuple[str, ...] = ()  # e.g. int8, int4: schemes the backend accepts


@dataclass(frozen=True)
class Runtime:
    warmup: int = 1
    repeats: int = 3
    provider: ProviderSpec | None = None  # where an ExecuTorch program runs (None: pybind, in the worker)
    threads: int | None = None  # the runtime's thread pool


@dataclass(frozen=True)
class Accuracy:
    """Model-level checks (``accuracy:``). ``rule``: how outputs are judged, ``dynamo`` (the PyTorch
    benchmark rule: allclose at the dtype's tolerance, else RMSE against a float64 CPU reference; the
    default on torch-eager and torch-compile) or ``allclose`` (the recipe's tolerances; the default
    elsewhere). ``top1``: the least top-1 / next-token agreement a model with a task must reach.
    ``deterministic``: the model must give identical outputs when run twice on the device."""

    rule: str | None = None
    top1: float | None = None
    deterministic: bool = False


@dataclass(frozen=True)
class Recipe:
    name: str
    backend: str
    raw: dict[str, Any] = field(hash=False, compare=False)  # as written: its hash keys the cache
    description: str = ""
    setup: str = ""  # a link to the accelerator's setup notes (the portal's column header links there)
    path: str = ""
    options: Any = field(default=None, hash=False, compare=False)  # the backend's frozen options object
    dtypes: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    capabilities: Capabilities = Capabilities()
    runtime: Runtime = Runtime()
    accuracy: Accuracy = Accuracy()
    requires: Requires = Requires()
    run_requires: Requires = Requires()  # to run, not to lower: missing, an item stops as LOWERED
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict, hash=False, compare=False)
    skip: tuple[Rule, ...] = ()
    xfail: tuple[Rule, ...] = ()
    expect: tuple[Rule, ...] = ()
    options_error: str | None = None  # the backend could not be loaded to parse its options

    @property
    def hash(self) -> str:
        return stable_hash(self.raw)

    @property
    def quantized(self) -> bool:
        """Whether the backend quantizes (its options say so): picks the ``quantized`` tolerance."""
        return bool(getattr(self.options, "quantized", False))

    @property
    def quantization(self) -> str | None:
        """The quantization scheme (``int8`` ...) the backend's options name, if any."""
        return getattr(self.options, "scheme", None) if self.quantized else None

    def tolerance(self, dtype: str) -> dict[str, float]:
        tols = {**DEFAULT_TOLERANCES, **self.tolerances}
        if self.quantized and dtype in ("float32", "float16", "bfloat16"):  # a recipe's keys over the default floor
            return {**DEFAULT_TOLERANCES["quantized"], **self.tolerances.get("quantized", {})}
        if dtype in ("bool",) or dtype.startswith(("int", "uint")):
            return dict(tols.get(dtype) or tols["int"])
        return dict(tols.get(dtype) or tols["float32"])

    def skip_reason(self, item: Item) -> str | None:
        dtype, shape = item.axes.dtype, item.axes.shape
        if self.dtypes and dtype not in self.dtypes:
            return f"recipe {self.name} runs dtypes {', '.join(self.dtypes)}, not {dtype}"
        if self.shapes and shape not in self.shapes:
            return f"recipe {self.name} runs {', '.join(self.shapes)} shapes, not {shape}"
        if self.quantized and UNINITIALIZED in item.case.tags:
            return (f"recipe {self.name} quantizes, and this case's output is uninitialized memory (torch.empty*): its "
                    "observers would calibrate on whatever that memory holds (NaN, on a run here), so the item cannot be "
                    "judged the same way twice")
        caps = self.capabilities
        if shape == "dynamic" and not caps.dynamic:
            return f"capability: recipe {self.name} does not support dynamic shapes"
        rank = case_rank(item.case.spec)
        if caps.ranks and rank is not None and rank not in caps.ranks:
            return f"capability: recipe {self.name} supports ranks {', '.join(map(str, caps.ranks))}, not {rank}"
        for rule in self.skip:
            if rule.applies(item.group, item.case.suite):
                return rule.reason
        return None

    def facts(self) -> dict[str, str | None]:
        """The machine facts its rules are limited to (``when:``), as they are here: what its verdicts assumed."""
        return rule_facts((*self.skip, *self.xfail, *self.expect))

    def xfail_rules(self, key: str, suite: str = "", delegated: bool | None = None) -> list[Rule]:
        """Every xfail rule that lists the item, in file order."""
        return [rule for rule in self.xfail if rule.applies(key, suite, delegated)]

    def expectation(self, key: str, suite: str = "") -> Rule | None:
        return next((rule for rule in self.expect if rule.applies(key, suite)), None)


def rule_facts(rules: Iterable[Rule]) -> dict[str, str | None]:
    """The machine facts ``rules`` are limited to (``when:``), each as it is here (``harness.facts.fact``)."""
    from harness.facts import fact

    names = sorted({name for rule in rules for name, _ in rule.when})
    return {name: fact(name) for name in names}


def case_rank(spec: Mapping[str, Any]) -> int | None:
    """The rank of an operator case's first tensor input (None for models and other kinds)."""
    for arg in spec.get("args") or []:
        if isinstance(arg, dict) and isinstance(arg.get("tensor"), dict):
            return len(arg["tensor"].get("shape") or [])
    return None


def recipe_dirs() -> list[Path]:
    """Where recipe names are looked up: $BTI_RECIPE_PATH (os.pathsep-separated), ./recipes, bti's own.

    bti's own are the repository's ``recipes/`` in a checkout, and ``harness/_recipes`` in an installed wheel.
    """
    from harness.settings import current

    dirs = list(current().recipe_path)
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
    """A recipe by name (``xnnpack``) or path; a bare file name (``mybackend.yaml``) that is not in the working
    directory is looked up on the recipe path, as its name would be."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.parent == Path(".") and not path.exists():
        found = available_recipe_files().get(path.stem)
        if found is None or found.name != path.name:
            raise RecipeError(f"recipe file {name_or_path}: not in the working directory, nor in a recipe directory",
                              hint=f"recipe directories: {', '.join(str(d) for d in recipe_dirs())}")
        path = found
    elif path.suffix not in (".yaml", ".yml"):
        files = available_recipe_files()
        if name_or_path not in files:
            known = ", ".join(sorted(files)) or "none found"
            raise RecipeError(f"unknown recipe {name_or_path!r}", hint=f"known recipes: {known}")
        path = files[name_or_path]
    return parse_recipe(path)


def parse_recipe(path: Path) -> Recipe:
    from harness.cases.yamlload import load_yaml, where

    try:
        raw = load_yaml(path)
    except RecipeError:
        raise
    except Exception as exc:  # SpecError from the loader: re-raise as a recipe error, same line
        raise RecipeError(str(exc)) from None
    loc = where(raw, str(path))
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}:1: a recipe must be a mapping")
    _splice_includes(raw, path)

    def at(key: str) -> str:
        return where(raw, str(path), key)

    name = raw.get("name") or path.stem
    backend = raw.get("backend")
    if not isinstance(backend, str) or not backend:
        raise RecipeError(f"{loc}: recipe {name} needs `backend:`")
    for key, allowed in (("dtypes", ALL_DTYPES), ("shapes", SHAPES)):
        for v in _list(raw.get(key), at(key), key):
            if v not in allowed:
                raise RecipeError(f"{at(key)}: unknown {key[:-1]} {v!r} in `{key}`")
    tolerances = _tolerances(raw.get("tolerances"), at("tolerances"))
    options, options_error = _backend_options(backend, {k: v for k, v in raw.items() if k not in RECIPE_KEYS}, raw, path)
    caps = _capabilities(raw.get("capabilities"), at("capabilities"))
    scheme = getattr(options, "scheme", None) if getattr(options, "quantized", False) else None
    if caps.quantization and scheme is not None and scheme not in caps.quantization:
        raise RecipeError(f"{at('capabilities')}: the recipe quantizes to {scheme}, outside its own "
                          f"capabilities.quantization ({', '.join(caps.quantization)})")
    return Recipe(
        name=str(name),
        backend=backend,
        raw=_plain(raw),
        description=str(raw.get("description", "")),
        setup=_setup_url(name, raw.get("setup")),
        path=str(path),
        options=options,
        options_error=options_error,
        dtypes=tuple(map(str, raw.get("dtypes") or ())),
        shapes=tuple(map(str, raw.get("shapes") or ())),
        capabilities=caps,
        runtime=_runtime(raw.get("runtime"), at("runtime")),
        accuracy=_accuracy(raw.get("accuracy"), at("accuracy")),
        requires=_requires(raw.get("requires"), at("requires")),
        run_requires=_requires(raw.get("run_requires"), at("run_requires"), "run_requires"),
        tolerances=tolerances,
        skip=_rules(raw.get("skip"), at("skip"), "skip"),
        xfail=_rules(raw.get("xfail"), at("xfail"), "xfail"),
        expect=_rules(raw.get("expect"), at("expect"), "expect"),
    )


def with_provider(recipe: Recipe, text: str, spec: ProviderSpec, threads: int | None = None) -> Recipe:
    """The recipe run through another runtime provider (``bti run --runtime``); its hash, and so the
    cache key, names the provider."""
    from dataclasses import replace

    raw = dict(recipe.raw)
    raw["runtime"] = {**(raw.get("runtime") or {}), "provider": text, **({"threads": threads} if threads else {})}
    if spec.push:
        raw["runtime"].update(push=spec.push, pull=spec.pull, remote_dir=spec.remote_dir, vars=dict(spec.vars))
    runtime = replace(recipe.runtime, provider=spec, threads=threads or recipe.runtime.threads)
    return replace(recipe, raw=raw, runtime=runtime)


def with_counts(recipe: Recipe, warmup: int | None, repeats: int | None) -> Recipe:
    """The recipe with ``bti run --warmup/--repeats`` in place of its ``runtime:`` counts (its hash names them)."""
    from dataclasses import replace

    counts = {k: v for k, v in (("warmup", warmup), ("repeats", repeats)) if v is not None}
    if not counts:
        return recipe
    raw = dict(recipe.raw)
    raw["runtime"] = {**(raw.get("runtime") or {}), **counts}
    runtime = replace(recipe.runtime, warmup=recipe.runtime.warmup if warmup is None else warmup,
                      repeats=recipe.runtime.repeats if repeats is None else repeats)
    return replace(recipe, raw=raw, runtime=runtime)


def _backend_options(backend: str, rest: dict[str, Any], raw: Any, path: Path) -> tuple[Any, str | None]:
    """The backend parses its own keys (unknown ones are its error, with file:line). A backend
    that cannot be loaded here leaves the options unparsed: its items are UNAVAILABLE with why."""
    from harness.backends import get_backend
    from harness.cases.yamlload import where

    try:
        impl = get_backend(backend)
    except RecipeError as exc:
        return None, exc.one_line()
    return impl.parse_options(rest, lambda key=None: where(raw, str(path), key)), None


def _list(value: Any, loc: str, key: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecipeError(f"{loc}: `{key}` takes a list")
    return value


def _number(value: Any, loc: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(float(value)):
        raise RecipeError(f"{loc}: {what} must be a number, not {value!r}")
    return float(value)


def _tolerances(raw: Any, loc: str) -> dict[str, dict[str, float]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RecipeError(f"{loc}: `tolerances` maps a dtype (or quantized, int) to {{atol, rtol, sqnr_db}}")
    out: dict[str, dict[str, float]] = {}
    for dtype, tol in raw.items():
        if dtype not in (*ALL_DTYPES, "quantized", "int"):
            raise RecipeError(f"{loc}: unknown dtype {dtype!r} in `tolerances`")
        keys = set(TOLERANCE_KEYS) | ({"qtol"} if dtype == "quantized" else set())
        if not isinstance(tol, dict) or set(tol) - keys - {"shape_only"}:
            more = ", qtol" if dtype == "quantized" else ""
            raise RecipeError(f"{loc}: tolerances.{dtype} takes atol, rtol, sqnr_db, cosine{more}")
        vals = {k: _number(v, loc, f"tolerances.{dtype}.{k}") for k, v in tol.items() if k in keys}
        if any(v < 0 for k, v in vals.items() if k != "sqnr_db"):
            raise RecipeError(f"{loc}: tolerances.{dtype}: atol and rtol cannot be negative")
        out[str(dtype)] = vals
    return out


ACCURACY_RULES = ("dynamo", "allclose")


def _accuracy(raw: Any, loc: str) -> Accuracy:
    if raw is None:
        return Accuracy()
    if not isinstance(raw, dict) or set(raw) - {"rule", "top1", "deterministic"}:
        raise RecipeError(f"{loc}: `accuracy` takes rule ({' | '.join(ACCURACY_RULES)}), top1 (0..1), deterministic (true/false)")
    rule = raw.get("rule")
    if rule is not None and rule not in ACCURACY_RULES:
        raise RecipeError(f"{loc}: accuracy.rule is {' or '.join(ACCURACY_RULES)}, not {rule!r}")
    top1 = raw.get("top1")
    if top1 is not None:
        top1 = _number(top1, loc, "accuracy.top1")
        if not 0 <= top1 <= 1:
            raise RecipeError(f"{loc}: accuracy.top1 is a fraction between 0 and 1")
    det = raw.get("deterministic", False)
    if not isinstance(det, bool):
        raise RecipeError(f"{loc}: accuracy.deterministic takes true or false")
    return Accuracy(rule, top1, det)


RUNTIME_KEYS = ("warmup", "repeats", "threads", "provider", "push", "pull", "remote_dir", "vars")


def _runtime(raw: Any, loc: str) -> Runtime:
    if raw is None:
        return Runtime()
    if not isinstance(raw, dict) or set(raw) - set(RUNTIME_KEYS):
        raise RecipeError(f"{loc}: `runtime` takes {', '.join(RUNTIME_KEYS)}")
    counts = {k: _number(v, loc, f"runtime.{k}") for k, v in raw.items() if k in ("warmup", "repeats", "threads")}
    if any(v < 0 or v != int(v) for v in counts.values()) or counts.get("repeats", 1) < 1 or counts.get("threads", 1) < 1:
        raise RecipeError(f"{loc}: runtime.warmup, repeats and threads are whole numbers (repeats at least 1, threads at least 1)")
    spec = None
    if raw.get("provider") is not None or any(raw.get(k) is not None for k in ("push", "pull", "remote_dir", "vars")):
        texts = {k: raw.get(k) for k in ("provider", "push", "pull", "remote_dir")}
        if any(v is not None and not isinstance(v, str) for v in texts.values()):
            raise RecipeError(f"{loc}: runtime.provider, push, pull and remote_dir are strings")
        variables = raw.get("vars") or {}
        if not isinstance(variables, dict) or not all(isinstance(v, (str, int)) for v in variables.values()):
            raise RecipeError(f"{loc}: runtime.vars maps names to strings")
        try:
            spec = parse_spec(texts["provider"] or "pybind", texts["push"], texts["pull"], texts["remote_dir"],
                              {str(k): str(v) for k, v in variables.items()})
        except ValueError as exc:
            raise RecipeError(f"{loc}: runtime.provider: {exc}") from None
    threads = int(counts.pop("threads")) if "threads" in counts else None
    return Runtime(**{k: int(v) for k, v in counts.items()}, provider=spec, threads=threads)


_REQUIRES_LISTS = ("modules", "env", "runtime_backends", "executables", "platforms")


def _requires(raw: Any, loc: str, key: str = "requires") -> Requires:
    if raw is None:
        return Requires()
    allowed = {*_REQUIRES_LISTS, *(("note",) if key == "run_requires" else ())}
    if not isinstance(raw, dict) or set(raw) - allowed:
        raise RecipeError(f"{loc}: `{key}` takes {', '.join(sorted(allowed))}")
    note = raw.get("note", "")
    if not isinstance(note, str):
        raise RecipeError(f"{loc}: {key}.note takes text")
    return Requires(**{k: tuple(map(str, _list(v, loc, f"{key}.{k}"))) for k, v in raw.items() if k != "note"},
                    note=note.strip())


def _capabilities(raw: Any, loc: str) -> Capabilities:
    if raw is None:
        return Capabilities()
    if not isinstance(raw, dict) or set(raw) - {"ranks", "dynamic", "quantization"}:
        raise RecipeError(f"{loc}: `capabilities` takes ranks, dynamic, quantization")
    ranks = _list(raw.get("ranks"), loc, "capabilities.ranks")
    if not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks):
        raise RecipeError(f"{loc}: capabilities.ranks takes whole numbers")
    dynamic = raw.get("dynamic", True)
    if not isinstance(dynamic, bool):
        raise RecipeError(f"{loc}: capabilities.dynamic takes true or false")
    quant = tuple(map(str, _list(raw.get("quantization"), loc, "capabilities.quantization")))
    return Capabilities(tuple(ranks), dynamic, quant)


_RULE_KEYS = {
    "skip": {"match", "reason", "suite", "unless", "versions", "when"},
    "xfail": {"match", "reason", "suite", "unless", "status", "message", "stage", "delegated_only", "versions", "when",
              "min_sqnr_db"},
    "expect": {"match", "suite", "unless", "delegated_ops", "min_delegated_pct", "versions", "when"},
}


def parse_rules(raw: Any, loc: str, key: str) -> tuple[Rule, ...]:
    """``skip``/``xfail``/``expect`` entries (a list of mappings) as rules, checked as a recipe's are; ``loc`` names where
    they are written, for the one-line errors."""
    return _rules(raw, loc, key)


def _rules(raw: Any, loc: str, key: str) -> tuple[Rule, ...]:
    from harness.cases.yamlload import where

    if not raw:
        return ()
    if not isinstance(raw, list):
        raise RecipeError(f"{loc}: `{key}` must be a list of rules")
    allowed = _RULE_KEYS[key]
    out = []
    for r in raw:
        here = where(r, loc)
        if not isinstance(r, dict) or not r.get("match") or set(r) - allowed:
            raise RecipeError(f"{here}: each `{key}` entry takes {', '.join(sorted(allowed))} (`match:` is required)")
        if key != "expect" and not r.get("reason"):
            raise RecipeError(f"{here}: each `{key}` entry needs `reason:`")
        unless = _list(r.get("unless"), here, "unless")
        if not isinstance(r.get("delegated_only", False), bool):
            raise RecipeError(f"{here}: `delegated_only` takes true or false")
        statuses: frozenset[Status] = frozenset()
        message, stage, floor = None, None, None
        if key == "xfail":
            statuses = _statuses(r.get("status"), here)
            if r.get("message") is not None:
                try:
                    message = re.compile(str(r["message"]))
                except re.error as exc:
                    raise RecipeError(f"{here}: xfail `message:` is not a regular expression: {exc}") from None
            stage = _stage(r.get("stage"), statuses, here)
            floor = _floor(r.get("min_sqnr_db"), statuses, here)
        ops: tuple[str, ...] = ()
        pct = None
        if key == "expect":
            ops = tuple(map(str, _list(r.get("delegated_ops"), here, "delegated_ops")))
            if r.get("min_delegated_pct") is not None:
                pct = _number(r["min_delegated_pct"], here, "min_delegated_pct")
                if not 0 <= pct <= 100:
                    raise RecipeError(f"{here}: min_delegated_pct is a percentage (0-100)")
            if not ops and pct is None:
                raise RecipeError(f"{here}: an `expect` entry names delegated_ops, min_delegated_pct or both")
        out.append(Rule(str(r["match"]), str(r.get("reason") or ""), str(r.get("suite") or "*"), tuple(map(str, unless)),
                        bool(r.get("delegated_only", False)), statuses, message, ops, pct, _versions(r.get("versions"), here),
                        _when(r.get("when"), here), stage, floor))
    return tuple(out)


def _floor(raw: Any, statuses: frozenset[Status], here: str) -> float | None:
    """An xfail rule's ``min_sqnr_db:``: the farthest a FAIL_MISMATCH it holds may be (each output's SQNR against its
    reference, in dB), so that a worse departure than the one measured stays a failure."""
    if raw is None:
        return None
    if Status.FAIL_MISMATCH not in statuses:
        raise RecipeError(f"{here}: xfail `min_sqnr_db:` bounds a FAIL_MISMATCH (how far its outputs may be)")
    return _number(raw, here, "min_sqnr_db")


def _stage(raw: Any, statuses: frozenset[Status], here: str) -> Stage | None:
    """An xfail rule's ``stage:``: the stage its CRASH or TIMEOUT comes in."""
    if raw is None:
        return None
    names = ", ".join(s.value for s in Stage)
    if not isinstance(raw, str) or raw not in {s.value for s in Stage}:
        raise RecipeError(f"{here}: xfail `stage:` is one of {names}, not {raw!r}")
    if not statuses or not all(s.died for s in statuses):
        raise RecipeError(f"{here}: xfail `stage:` narrows a CRASH or TIMEOUT (the stage it comes in); the other "
                          "statuses name their stage already")
    return Stage(raw)


RULE_LISTS = tuple(_RULE_KEYS)  # skip, xfail, expect
_RULES_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def rules_file(name: str, beside: Path | None = None) -> Path | None:
    """The rules file ``NAME``: ``rules/NAME.yaml`` beside the recipe ``beside``, else in a recipe directory."""
    dirs = ([beside.parent] if beside is not None else []) + recipe_dirs()
    return next((f for f in (d / "rules" / f"{name}.yaml" for d in dirs) if f.is_file()), None)


def available_rules_files() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for d in recipe_dirs():
        for f in sorted((d / "rules").glob("*.yaml")):
            out.setdefault(f.stem, f)
    return out


def _splice_includes(raw: dict[str, Any], path: Path) -> None:
    """Each ``- include: NAME`` entry of the recipe's rule lists replaced, in place, by that rules file's list."""
    from harness.cases.yamlload import load_yaml, where

    files: dict[str, Any] = {}
    for key in RULE_LISTS:
        entries = raw.get(key)
        if not isinstance(entries, list) or not any(isinstance(e, dict) and "include" in e for e in entries):
            continue
        out: list[Any] = []
        for entry in entries:
            if not (isinstance(entry, dict) and "include" in entry):
                out.append(entry)
                continue
            here = where(entry, str(path))
            name = entry["include"]
            if set(entry) - {"include", "unless"} or not isinstance(name, str) or not _RULES_NAME.fullmatch(name):
                raise RecipeError(f"{here}: `- include: NAME` names a rules file (letters, digits, '.', '_', '-'), with "
                                  "`unless: [globs]` at most, e.g. `- include: executorch-portable`")
            unless = _list(entry.get("unless"), here, "unless")
            if name not in files:
                found = rules_file(name, path)
                if found is None:
                    known = ", ".join(sorted(available_rules_files())) or "none found"
                    raise RecipeError(f"{here}: no rules file {name!r} (rules/{name}.yaml beside the recipe or in a "
                                      f"recipe directory)", hint=f"rules files: {known}")
                try:
                    doc = load_yaml(found)
                except RecipeError:
                    raise
                except Exception as exc:
                    raise RecipeError(str(exc)) from None
                if not isinstance(doc, dict) or set(doc) - {"description", *RULE_LISTS}:
                    raise RecipeError(f"{where(doc, str(found))}: a rules file is a mapping of description, "
                                      f"{', '.join(RULE_LISTS)}")
                for k in RULE_LISTS:
                    if doc.get(k) is not None and not isinstance(doc.get(k), list):
                        raise RecipeError(f"{where(doc, str(found), k)}: `{k}` must be a list of rules")
                    if any(isinstance(e, dict) and "include" in e for e in doc.get(k) or ()):
                        raise RecipeError(f"{where(doc, str(found), k)}: a rules file does not include others")
                files[name] = doc
            for rule in files[name].get(key) or ():
                if unless and isinstance(rule, dict):  # the recipe excepts its own items from every included rule
                    rule = copy.copy(rule)  # an LDict: it keeps the rules file's file:line
                    rule["unless"] = [*_list(rule.get("unless"), here, "unless"), *unless]
                out.append(rule)
        entries[:] = out  # the list keeps its file:line


def _versions(raw: Any, loc: str) -> tuple[tuple[str, str], ...]:
    """``versions: {executorch: "<1.5", torch: ">=2.14"}``: each value a PEP 440 specifier (a bare version means ==)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        raise RecipeError(f"{loc}: `versions` maps a package to a version specifier, e.g. versions: {{executorch: \"<1.5\"}}")
    out = []
    for package, spec in raw.items():
        text = str(spec).strip()
        if text and text[0].isdigit():
            text = f"=={text}"
        try:
            SpecifierSet(text)
        except InvalidSpecifier:
            raise RecipeError(f"{loc}: versions: {package}: {spec!r} is not a version specifier (e.g. \"<1.5\", \">=2.14,<2.15\")") from None
        if not text or not str(package).strip():
            raise RecipeError(f"{loc}: versions: {package}: an empty specifier")
        out.append((str(package).strip().lower(), text))
    return tuple(sorted(out))


def _when(raw: Any, loc: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``when: {openvino-cpu-precision: bf16}``: each key a fact of ``harness.facts.FACTS``, each value one admitted
    value or a list of them."""
    from harness.facts import FACTS

    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        raise RecipeError(f"{loc}: `when` maps a machine fact to its value, e.g. when: {{openvino-cpu-precision: bf16}}")
    out = []
    for name, value in raw.items():
        if name not in FACTS:
            raise RecipeError(f"{loc}: when: unknown fact {name!r} (known: {', '.join(sorted(FACTS))})")
        raw_values = value if isinstance(value, list) else [value]
        if not raw_values or any(not isinstance(v, str) or not v.strip() for v in raw_values):
            raise RecipeError(f"{loc}: when: {name}: give a value or a list of values (strings)")
        unknown = [v for v in raw_values if v.strip() not in FACTS[name].values]
        if unknown:
            raise RecipeError(f"{loc}: when: {name}: unknown value {unknown[0]!r} (known: {', '.join(FACTS[name].values)})")
        out.append((str(name), tuple(v.strip() for v in raw_values)))
    return tuple(sorted(out))


def _statuses(raw: Any, loc: str) -> frozenset[Status]:
    names = raw if isinstance(raw, list) else [raw]
    if raw is None or not names:
        raise RecipeError(f"{loc}: an xfail rule names the failure it expects: `status:` "
                          f"(one of {', '.join(sorted(s.value for s in XFAIL_STATUSES))}, or a list)")
    out = set()
    for n in names:
        try:
            status = Status(str(n))
        except ValueError:
            status = None
        if status not in XFAIL_STATUSES:
            raise RecipeError(f"{loc}: xfail status {n!r} is not a failure status "
                              f"(one of {', '.join(sorted(s.value for s in XFAIL_STATUSES))})")
        out.add(status)
    return frozenset(out)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _setup_url(name: str, value: Any) -> str:
    if value is None:
        return ""
    from harness.report.safe import http_url

    url = http_url(value)
    if not url:
        raise RecipeError(f"recipe {name}: setup must be an http(s) URL, got {str(value).strip()[:80]!r}")
    return url
