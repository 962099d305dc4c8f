"""Case sources: where the cases of a suite come from, registered like backends.

A ``CaseSource`` discovers its cases (parent side, no torch needed for YAML sources), builds one case ×
axes into a module and seeded inputs (worker side, torch), and estimates what an item costs (seconds, an
operator item being about 1), which shards are balanced by until a previous run's durations are known.
``requires`` names the Python modules it needs: a suite whose modules are missing is refused with the
reason, before anything runs.

The built-in sources are listed in ``BUILTIN`` below. A vendor ships its own model list without forking
bti, through the ``bti.case_sources`` entry-point group of its own package::

    [project.entry-points."bti.case_sources"]
    vendor-models = "vendor_pkg.bti:VendorModels"     # a CaseSource class (instantiated) or object

The source's ``kinds`` name the ``Case.kind`` values it builds; a kind belongs to exactly one source, and the
runner asks the source (``is_model_kind``), never a list of kinds, whether a case is a whole model.
Anything not registered is a path to a suite YAML file.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cases.case import Axes, Case
from harness.cases.contract import Built, CaseSource, Judgement, SuiteFileFormat, SuiteOptions
from harness.errors import UserError

HERE = Path(__file__).parent
DEFAULT_SUITES = ("ops", "models")
ENTRY_POINT_GROUP = "bti.case_sources"
FORMAT_GROUP = "bti.suite_formats"  # a vendor's suite file formats (SuiteFileFormat objects or classes)


def resolve_ref(ref: str) -> Any:
    """The object a ``"module:attribute"`` reference names (a registry entry), imported on first use."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class BuiltinSource:
    """A source whose functions are named ``module:function`` and imported on first use (listing the suites
    imports none of them)."""

    name: str
    description: str
    discover_ref: str
    build_refs: dict[str, str]  # kind -> "module:function(case, axes, seed)"
    per_item: float = 1.0  # estimated seconds per item
    requires: tuple[str, ...] = ()
    warm_discovery: bool = False
    whole_models: bool = False
    discover_args: tuple[Any, ...] = field(default=())
    prefetch_ref: str = ""  # "module:function()" that starts discovery in the background, if it can
    narrows: bool = False  # its discover function takes ``patterns=`` (discover_matching)
    judge_ref: str = ""  # "module:function(case, dtype, recipe)": the source's own word on an item (skip, xfail, tolerance)
    report_formats: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # its own results formats

    def prefetch(self) -> None:
        if self.prefetch_ref:
            resolve_ref(self.prefetch_ref)()

    def judge(self, case: Case, dtype: str, recipe: Any) -> Judgement | None:
        return resolve_ref(self.judge_ref)(case, dtype, recipe) if self.judge_ref else None

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self.build_refs)

    def discover(self) -> list[Case]:
        return list(resolve_ref(self.discover_ref)(*self.discover_args))

    def discover_matching(self, patterns: tuple[str, ...]) -> list[Case]:
        if not (self.narrows and patterns):
            return self.discover()
        return list(resolve_ref(self.discover_ref)(*self.discover_args, patterns=patterns))

    def build(self, case: Case, axes: Axes, seed: int) -> Built:
        built: Built = resolve_ref(self.build_refs[case.kind])(case, axes, seed)
        return built

    def cost(self, case: Case) -> float:
        return float(case.spec.get("cost", self.per_item)) if isinstance(case.spec, dict) else self.per_item


_OPS = {"op": "harness.builders.build:build_op", "pair": "harness.builders.build:build_pair",
        "opdiff": "harness.opdiff.build:build", "opdiff-pair": "harness.opdiff.build:build_pair"}
BUILTIN: tuple[BuiltinSource, ...] = (
    BuiltinSource("ops", "the starter operator suite (YAML)", "harness.suites:_yaml", _OPS, discover_args=(str(HERE / "ops.yaml"), "ops")),
    BuiltinSource("smoke", "a few operators, for a quick check (YAML)", "harness.suites:_yaml", {}, discover_args=(str(HERE / "smoke.yaml"), "smoke")),
    BuiltinSource("models", "small models built in code (MLP, CNN, RNNs, a transformer encoder, a tiny LM)",
                  "harness.suites.models:model_cases", {"model": "harness.builders.build_model:build_model"}, per_item=10.0, whole_models=True),
    BuiltinSource("hf-models", "tiny Hugging Face architectures from configs, seeded random weights", "harness.suites.hf_models:hf_cases",
                  {"hf": "harness.suites.hf_models:build_hf"}, per_item=10.0, requires=("transformers",), whole_models=True),
    BuiltinSource("hf-models-full", "eleven real-size Hugging Face models of the zoo's list, under their former ids "
                  "(model.<name>.full, aliases of zoo.huggingface.<name> until 2027-06-01)", "harness.suites.hf_full:hf_full_cases",
                  {}, per_item=120.0, requires=("transformers",), whole_models=True),
    BuiltinSource("tv-models", "torchvision and timm models (optional packages)", "harness.suites.tv_models:tv_cases",
                  {"tv": "harness.suites.tv_models:build_tv"}, per_item=10.0, whole_models=True),
    BuiltinSource("zoo", "the model zoo: every row of dynamo's Hugging Face, timm and TorchBench lists, built offline "
                  "(seeded weights; TorchBench rows outside pip-installable libraries are UNAVAILABLE with the reason)",
                  "harness.suites.zoo:zoo_cases", {"zoo": "harness.suites.zoo:build"}, per_item=60.0, whole_models=True,
                  judge_ref="harness.suites.zoo:judge"),
    *(BuiltinSource(f"zoo-{name}", f"the zoo's {name} list", "harness.suites.zoo:list_cases", {}, per_item=60.0,
                    whole_models=True, discover_args=(name,)) for name in ("huggingface", "timm", "torchbench")),
    BuiltinSource("models-ci", "a sample of the zoo for CI: one model per list", "harness.suites.zoo:ci_cases", {},
                  per_item=30.0, whole_models=True),
    BuiltinSource("executorch-upstream-ops", "the ExecuTorch backend test suite's operator programs",
                  "harness.suites.upstream:upstream_cases", {"upstream": "harness.suites.upstream:build_upstream"},
                  warm_discovery=True, prefetch_ref="harness.suites.upstream:start_discovery"),
    BuiltinSource("core-ops", "every core ATen operator, inputs generated from its schema", "harness.suites.core_ops:core_cases", {}),
    BuiltinSource("core-ops-ci", "a sample of core-ops for CI", "harness.suites:_core_ci", {}),
    BuiltinSource("opinfo", "PyTorch's OpInfo sample inputs, every entry of the installed torch (each sample a case; "
                  "OpInfo's dtypes, skips, expected failures and tolerances per device type)", "harness.suites.opinfo:discover",
                  {"opinfo": "harness.suites.opinfo:build"}, per_item=0.2, warm_discovery=True, narrows=True,
                  judge_ref="harness.suites.opinfo:judge_item"),
    BuiltinSource("opinfo-ci", "a sample of opinfo for CI: 34 entries across OpInfo's kinds", "harness.suites.opinfo:discover_ci",
                  {}, per_item=0.2, warm_discovery=True),
)


def _yaml(path: str, name: str | None) -> list[Case]:
    from harness.cases.suite import load_suite

    return load_suite(Path(path), name=name, check=False)


# suite file formats besides bti's own YAML, "module:object" (a SuiteFileFormat), asked in order
FILE_FORMATS = ("harness.opdiff.suite:FORMAT",)
# how a format's kind checks the torch op its case names before a run: "module:function(case) -> problem or None"
OP_CHECKS: dict[str, str] = {"opdiff": "harness.opdiff.build:op_problem"}
# results formats of a case source's own, beside bti's reports: `bti report --format NAME` writes FILE with
# "module:render(header, records) -> str"; a vendor's source adds its own as `report_formats`
REPORT_FORMATS: dict[str, tuple[str, str]] = {"opdiff": ("opdiff.jsonl", "harness.opdiff.report:render")}


def report_formats(wanted: tuple[str, ...] = ()) -> dict[str, tuple[str, str]]:
    """The case sources' own results formats: the built-in ones, and, only when ``wanted`` names one they lack, each
    registered source's ``report_formats`` (so ``bti report`` loads no vendor's plugin it does not need)."""
    out = dict(REPORT_FORMATS)
    if any(w not in out for w in wanted):
        for src in sources().values():
            for name, entry in src.report_formats.items():
                out.setdefault(name, entry)
    return out


def _suite_file(path: Path, options: SuiteOptions | None) -> list[Case]:
    """A suite .yaml: the first registered format that reads it (opdiff's: a top-level ``tests:``), else bti's own."""
    from harness.cases.yamlload import load_yaml

    if path.is_file():
        doc = load_yaml(path)
        for fmt in file_formats():
            if fmt.reads(doc, path):
                return fmt.load(path, options or SuiteOptions())
    return _yaml(str(path), None)


def op_checks(kinds: set[str]) -> dict[str, Callable[[Case], str | None]]:
    """The registered op checks of these kinds (imported only when a case of the kind is there)."""
    return {kind: resolve_ref(ref) for kind, ref in OP_CHECKS.items() if kind in kinds}


def file_formats() -> list[SuiteFileFormat]:
    """The suite file formats besides bti's own YAML, asked in order: the built-in ones (``FILE_FORMATS``), then the
    ``bti.suite_formats`` entry points of installed packages; one that cannot load, or is no format, is one line."""
    out: list[SuiteFileFormat] = [resolve_ref(ref) for ref in FILE_FORMATS]
    for where, fmt in _entry_points(FORMAT_GROUP, "suite format"):
        if not isinstance(fmt, SuiteFileFormat):
            raise UserError(f"suite format {where}: not a SuiteFileFormat (needs reads(doc, path), load(path, options) "
                            "and summary(cases))")
        out.append(fmt)
    return out


def _entry_points(group: str, what: str) -> list[tuple[str, Any]]:
    """Each entry point of ``group`` loaded (a class is instantiated), with where it comes from; one that cannot load
    is one line naming it."""
    from importlib.metadata import entry_points

    out = []
    for ep in entry_points(group=group):
        try:
            obj = ep.load()
            out.append((f"{ep.name} ({ep.value})", obj() if isinstance(obj, type) else obj))
        except Exception as exc:
            raise UserError(f"{what} {ep.name} ({ep.value}): cannot load: {type(exc).__name__}: {exc}") from None
    return out


def _core_ci() -> list[Case]:
    from harness.suites.core_ops import ci_sample, core_cases

    return ci_sample(core_cases())


_REGISTRY: dict[str, CaseSource] | None = None


def sources() -> dict[str, CaseSource]:
    """Every registered source by suite name: the built-ins, then the ``bti.case_sources`` entry points."""
    global _REGISTRY
    if _REGISTRY is None:
        reg: dict[str, CaseSource] = {s.name: s for s in BUILTIN}
        for where, src in _entry_points(ENTRY_POINT_GROUP, "case source"):
            register(src, where=f"entry point {where}", into=reg)
        _REGISTRY = reg
    return _REGISTRY


NEWER = ("judge", "report_formats", "discover_matching")  # the Protocol's members a source written before 2026-11-26 lacks
OLD_SOURCES_UNTIL = "2027-06-01"


class _WithDefaults:
    """A source written before ``judge`` and ``report_formats`` joined the Protocol: its own members, their defaults."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def report_formats(self) -> Mapping[str, tuple[str, str]]:
        return dict(getattr(self._inner, "report_formats", {}))

    def judge(self, case: Case, dtype: str, recipe: Any) -> Judgement | None:
        own = getattr(self._inner, "judge", None)
        return own(case, dtype, recipe) if own is not None else None

    def discover_matching(self, patterns: tuple[str, ...]) -> list[Case]:
        own = getattr(self._inner, "discover_matching", None)
        return list(own(patterns) if own is not None else self._inner.discover())


def register(src: Any, where: str = "", into: dict[str, CaseSource] | None = None) -> None:
    """Add a case source (checked: it must speak the protocol, and neither its name nor its kinds may be taken)."""
    reg = into if into is not None else sources()
    what = where or repr(src)
    if not isinstance(src, CaseSource) and isinstance(_WithDefaults(src), CaseSource):
        print(f"bti: warning: case source {what} lacks {', '.join(m for m in NEWER if not hasattr(src, m))}, part of the "
              f"CaseSource Protocol since 2026-11-26: it runs with the defaults until {OLD_SOURCES_UNTIL} (subclass "
              "harness.cases.contract.BaseCaseSource)", file=sys.stderr)
        src = _WithDefaults(src)
    if not isinstance(src, CaseSource):
        raise UserError(f"case source {what}: not a CaseSource (needs name, description, kinds, requires, "
                        "warm_discovery, whole_models, report_formats, prefetch(), discover(), discover_matching(), build(), "
                        "judge(), cost(); harness.cases.contract.BaseCaseSource has the defaults)")
    if src.name in reg:
        raise UserError(f"case source {what}: the suite name {src.name!r} is taken")
    taken = {k: s.name for s in reg.values() for k in s.kinds}
    clash = [k for k in src.kinds if k in taken]
    if clash:
        raise UserError(f"case source {what}: kind(s) {', '.join(clash)} already built by {taken[clash[0]]}")
    reg[src.name] = src


def suite_names() -> list[str]:
    return sorted(sources())


def source_for_kind(kind: str) -> CaseSource:
    for src in sources().values():
        if kind in src.kinds:
            return src
    raise UserError(f"no case source builds cases of kind {kind!r}")


def is_model_kind(kind: str) -> bool:
    """Whether cases of ``kind`` are whole models (its source says so); an unknown kind is not."""
    try:
        return source_for_kind(kind).whole_models
    except UserError:
        return False


def build_case(case: Case, axes: Axes, seed: int) -> Built:
    """Worker side: the case's module, inputs and reference setup, from the source that owns its kind."""
    return source_for_kind(case.kind).build(case, axes, seed)


def case_judgement(case: Case, dtype: str, recipe: Any) -> Judgement:
    """The case source's own word on one item (``judge``: skip, expected failure, tolerance, known failures); an empty
    ``Judgement`` when it says nothing (most do not)."""
    try:
        src = source_for_kind(case.kind)
    except UserError:
        return Judgement()
    return src.judge(case, dtype, recipe) or Judgement()


def case_facts(case: Case, dtype: str, recipe: Any) -> dict[str, str | None]:
    """The machine facts the case source's own rules for this item are limited to (``when:``; the zoo's), as they are
    here: what its verdict assumed besides the recipe's own (``Recipe.facts``). The record keeps them, and the result
    cache keys on them, so a cache shared by machines of two kinds does not carry one's expected failure to the other."""
    from harness.recipes import rule_facts

    return rule_facts(case_judgement(case, dtype, recipe).rules)


def case_cost(case: Case, recipe: str | None = None) -> float:
    """Estimated seconds per item of ``case`` (shard balancing before durations are recorded): on ``recipe`` where the
    case's spec has a figure for it (``costs``, recipe name -> seconds: the zoo's, since one model takes seconds on
    XNNPACK and most of an hour on the portable kernels), else the case source's estimate (``CaseSource.cost``)."""
    from harness.settings import seconds_or_none

    per = case.spec.get("costs") if isinstance(case.spec, dict) else None
    seconds = seconds_or_none(per.get(recipe)) if recipe and isinstance(per, dict) else None
    if seconds is not None:
        return seconds
    try:
        return source_for_kind(case.kind).cost(case)
    except UserError:
        return 1.0


def missing_requirements(src: CaseSource) -> list[str]:
    import importlib.util

    return [m for m in src.requires if importlib.util.find_spec(m) is None]


def warm_discovery(names: list[str] | tuple[str, ...]) -> bool:
    reg = sources()
    return any(reg[n].warm_discovery for n in names if n in reg)


def prefetch(names: list[str] | tuple[str, ...]) -> None:
    """Let the named sources that can (a ``prefetch()`` method) start discovering in the background."""
    reg = sources()
    for name in names:
        if name in reg:
            reg[name].prefetch()


def load_suites(names: list[str] | tuple[str, ...], check: bool = True, options: SuiteOptions | None = None,
                patterns: tuple[str, ...] = ()) -> list[Case]:
    """The named suites' cases. ``check=False`` leaves resolving ops against torch to the caller
    (``harness.cases.suite.check_ops``), as ``bti run`` does for the items it actually executes. ``options``
    (``SuiteOptions``): how suite files load; by default none of the code they name runs. ``patterns``: the run's
    ``-k`` globs, which a source may narrow its discovery by (``CaseSource.discover_matching``)."""
    from harness.cases.suite import check_ops

    reg = sources()
    cases: list[Case] = []
    for name in names:
        src = reg.get(name)
        if src is not None:
            missing = missing_requirements(src)
            if missing:
                raise UserError(f"suite {name} needs {', '.join(missing)} (not installed)",
                                hint="pip install 'bti[models]'" if "transformers" in missing else None)
            cases.extend(src.discover_matching(patterns))
        elif Path(name).suffix in (".yaml", ".yml"):
            cases.extend(_suite_file(Path(name), options))
        else:
            raise UserError(f"unknown suite {name!r}", hint=f"suites: {', '.join(suite_names())}, or a .yaml path")
    unique: dict[str, Case] = {}
    for c in cases:
        if c.id in unique and unique[c.id].source != c.source:
            raise UserError(f"case id {c.id} is defined twice ({unique[c.id].source} and {c.source})")
        unique.setdefault(c.id, c)
    if check:
        check_ops(list(unique.values()))
    return list(unique.values())
