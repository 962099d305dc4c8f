"""The contract between a case source and the rest of bti (torch-free): the ``CaseSource`` Protocol, what a source
builds for one item (``Built``) and what it says of one item (``Judgement``).

Everything the pipeline, the verdict and the runner read of a source goes through these three; they name no
source. A source's own kinds of data travel as generic fields: a pair (``pair_b``: another built case, fed the
same inputs), further input sets (``more_runs``), the source's own float64 reference (``fp64_ref``), its known
failures (``Judgement.rules``). ``BaseCaseSource`` gives every optional member its default, so a source (a vendor's
too, through the ``bti.case_sources`` entry points) writes only what it has.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from harness.cases.case import Axes, Case

# a case tag: its standalone script would carry real-size weights, so `bti run --repro` leaves it out of the scripts a
# run writes by itself; `bti repro ITEM` writes it on request
REPRO_ON_REQUEST = "repro-on-request"


@dataclass
class Built:
    """One case × axes, built in a worker: the module, its inputs, and how it is to be judged."""

    module: Any  # a torch.nn.Module
    example: tuple[Any, ...]  # export-time inputs
    run: tuple[Any, ...]  # runtime inputs (a different shape on the dynamic axis)
    dynamic_shapes: Any  # for torch.export.export(module, ...), or None
    flat_dynamic_shapes: Any = None  # one spec per flat input (re-exporting an unlifted GraphModule)
    ref_dtype: str | None = None  # upcast reference dtype
    task: str | None = None  # "classifier" | "lm" (model-level accuracy)
    pair_b: Built | None = None  # a pair case: b's built case, fed a's inputs
    pair_b_name: str = "b"  # a pair's b side as the record names it ("pair b (<name>): ...")
    pair_b_op: str | None = None  # the op or module path b runs, when it differs from the case's
    pair_judged: bool = True  # a pair's a is judged against b's outputs (else against its own reference; the a-b diff is a figure)
    random_outputs: bool = False  # the module draws random numbers: only shapes and dtypes can be compared
    more_runs: tuple[tuple[Any, ...], ...] = ()  # further input sets, each run once and compared (sampled inputs)
    # the case source's own float64 reference of the run inputs (OpInfo's NumPy ``op.ref``), used before the module in
    # float64 (harness.judge): ``fp64_ref(*inputs) -> list of outputs``
    fp64_ref: Callable[..., Any] | None = None


@dataclass(frozen=True)
class Judgement:
    """A case source's own word on one item (case, dtype, recipe): all optional."""

    skip: str | None = None  # SKIP, with the reason and where the source says so
    xfail: str | None = None  # an expected failure of the device (status.DEVICE_FAILURES): where the source says so
    tolerance: Mapping[str, float] | None = None  # the source's own tolerance for this dtype (atol, rtol)
    rules: tuple[Any, ...] = ()  # known failures as recipe xfail rules (harness.recipes), each with status and message


@dataclass(frozen=True)
class SuiteOptions:
    """How suite files load for one command: the files the user named (code they name may run), ``--allow-suite-code``
    (any may), the base seed of their inputs and how many input sets each test samples."""

    named: frozenset[str] = frozenset()
    allow_code: bool = False
    seed: int = 0
    samples: int = 1

    def is_named(self, path: Path) -> bool:
        return any(Path(n).resolve() == path.resolve() for n in self.named)


@runtime_checkable
class SuiteFileFormat(Protocol):
    """A suite file format besides bti's own YAML (registered in ``harness.suites.FILE_FORMATS``, or by a vendor's
    package through the ``bti.suite_formats`` entry points)."""

    def reads(self, doc: Any, path: Path) -> bool: ...  # whether a loaded YAML document is in this format

    def load(self, path: Path, options: SuiteOptions) -> list[Case]: ...

    def summary(self, cases: list[Case]) -> str: ...  # what a file's cases hold, for `bti validate` ("ok (…), …")


@runtime_checkable
class CaseSource(Protocol):
    @property
    def name(self) -> str: ...  # the suite name given to `bti run -s`

    @property
    def description(self) -> str: ...

    @property
    def kinds(self) -> tuple[str, ...]: ...  # the Case.kind values this source builds

    @property
    def requires(self) -> tuple[str, ...]: ...  # importable modules it needs

    @property
    def warm_discovery(self) -> bool: ...  # discovery imports torch and executorch: `bti run` warms the parent first

    @property
    def whole_models(self) -> bool: ...  # its cases are whole models: model-level accuracy (dynamo's rule, top-1, determinism)

    def prefetch(self) -> None: ...  # start discovery in the background if it can (`bti run` calls it before its warm-up)

    def discover(self) -> list[Case]: ...

    # discover(), less the cases none of ``patterns`` (`bti run -k`'s globs) can match: where discovery is costly
    # (OpInfo's counts every sample), a source narrows it; ``could_match`` says what may go, and the filter still applies
    def discover_matching(self, patterns: tuple[str, ...]) -> list[Case]: ...

    def build(self, case: Case, axes: Axes, seed: int) -> Built: ...  # worker side

    def judge(self, case: Case, dtype: str, recipe: Any) -> Judgement | None: ...  # parent and worker side

    # estimated seconds per item (shard balance); where it differs by recipe, a case's spec may say so itself:
    # ``costs``, recipe name -> seconds, which the shard balance prefers (harness.suites.case_cost)
    def cost(self, case: Case) -> float: ...

    @property
    def report_formats(self) -> Mapping[str, tuple[str, str]]: ...  # its own results formats: name -> (file, "module:render")


class BaseCaseSource:
    """Defaults for every member of ``CaseSource`` but ``name``, ``discover`` and ``build``."""

    name: str = ""
    description: str = ""
    kinds: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    warm_discovery: bool = False
    whole_models: bool = False
    report_formats: Mapping[str, tuple[str, str]] = {}

    def prefetch(self) -> None:
        return None

    def discover(self) -> list[Case]:
        raise NotImplementedError

    def discover_matching(self, patterns: tuple[str, ...]) -> list[Case]:
        return self.discover()

    def build(self, case: Case, axes: Axes, seed: int) -> Built:
        raise NotImplementedError

    def judge(self, case: Case, dtype: str, recipe: Any) -> Judgement | None:
        return None

    def cost(self, case: Case) -> float:
        return 1.0


def could_match(prefix: str, patterns: tuple[str, ...]) -> bool:
    """Whether an id beginning with ``prefix`` (every item, group and case id of a case begins with its case id) can
    match one of the fnmatch ``patterns``, judged by each pattern's literal part before its first wildcard. No patterns:
    everything can."""
    if not patterns:
        return True
    for pattern in patterns:
        literal = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
        if prefix.startswith(literal) or literal.startswith(prefix):
            return True
    return False
