"""The stages of one work item: export → [quantize] → lower → [serialize] → load → run → compare.

Worker side (imports torch). ``execute_group`` runs every item of one (case, axes) group: the
module is built, the eager reference computed and ``torch.export`` run once, then shared by every
recipe. Each stage the backend has is timed and described by a frozen ``StageOutcome``; the first
failure stops the item. ``harness.verdict.decide`` turns the outcomes into the record and its
status: this module never sets one. A failure of the eager model or of ``torch.export`` is
FAIL_EXPORT — not the backend's fault.

Every backend call gets its own copy of the inputs, so a backend that writes into them cannot
disturb the reference or the next recipe; such a write is detected and reported as the backend's
fault (a run failure), as is an output that is not a tensor.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import stat
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from harness.backends import Backend, get_backend, run_gap
from harness.cases.case import Item
from harness.causes import chain, describe, root_cause, root_signature, runtime_said, says_only_a_code, signature
from harness.env import PeakMeter, peak_rss_mb
from harness.errors import first_line
from harness.judge import Comparison, QuantizedReference, comparable, compare, device_tolerance, eager_reference, fp64_reference, judge, same_tensor, to_numpy, tolerance
from harness.metrics import LONG_CALL_S, diff_figures, latency_stats
from harness.providers import ProviderError
from harness.recipes import Recipe
from harness.results import Record, atomic_write_text, dumps
from harness.settings import current, use
from harness.speedups.gc_policy import ItemMemory
from harness.status import Stage, Status
from harness.suites import is_model_kind
from harness.verdict import ErrorInfo, GroupContext, Outcome, Program, StageOutcome, base_record, decide

T = TypeVar("T")
_STAGE_WATCH: ContextVar[Callable[[Stage], None] | None] = ContextVar("bti_stage_watch", default=None)
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Stop(Exception):
    """A stage failed; its outcome is already recorded."""


class _OwnFault(Exception):
    """bti's own code failed inside a stage (the judge): the item is ERROR, never the backend's failure."""


def error_info(exc: BaseException, said: str = "") -> ErrorInfo:
    """Type, message and trace tail of the chain's root cause (``harness.causes``: a wrapper names its cause first),
    and the key that groups the same bug across items. ``said``: the error a native runtime logged while the stage ran
    (``harness.causes.runtime_said``): it ends the message's first line and keys the signature, since the exception
    itself says only an error code."""
    rtype, msg, where = describe(exc)
    root = root_cause(exc)
    said = said if said and says_only_a_code(str(root)) else ""
    if said:
        first, _, rest = msg.partition("\n")
        msg = f"{first}; the runtime logged: {said}" + (f"\n{rest}" if rest else "")
    links = chain(exc)
    head = "the chain, outermost first:\n" + "\n".join(f"  {link}" for link in links) + "\nthe root cause's traceback:\n" \
        if len(links) > 1 else ""
    frames = traceback.format_exception(type(root), root, root.__traceback__)
    trace = head[:2000] + "".join(frames[-8:])[-(4000 - len(head[:2000])):]
    # a runtime provider's error (raised, or the root of what was raised) decides: CRASH, TIMEOUT, SKIP or ERROR
    status = next((e.status for e in (exc, root) if isinstance(e, ProviderError)), None)
    key = signature(rtype, said, where) if said else root_signature(exc)
    return ErrorInfo(rtype, _text(msg[:4000]), _text(trace), status, key)


def _stderr_mark() -> int | None:
    """Where this process's stderr stands, when it is a regular file (a worker's log): what a stage's native code
    writes after this offset is read back by ``_stderr_since``. None elsewhere (a terminal, a pipe)."""
    with contextlib.suppress(Exception):  # what an earlier item printed is written before the mark, not after it
        sys.stdout.flush()
        sys.stderr.flush()
    try:
        st = os.fstat(2)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _stderr_since(mark: int | None, limit: int = 256 * 1024) -> str:
    """What was written to stderr since ``mark`` (its last ``limit`` bytes: the runtime's error comes just before the
    raise), read through /proc (Linux): the log is open for appending only."""
    if mark is None:
        return ""
    try:
        with open("/proc/self/fd/2", "rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            fh.seek(max(mark, end - limit))
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _text(s: str) -> str:
    """A backend's message as valid Unicode: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", s)


@contextlib.contextmanager
def watching_stages(watch: Callable[[Stage], None]) -> Iterator[None]:
    """Within it, ``watch(stage)`` is told each stage as it starts (the pool's worker tells its parent, so a crash or a
    hang names the stage it died in)."""
    token = _STAGE_WATCH.set(watch)
    try:
        yield
    finally:
        _STAGE_WATCH.reset(token)


class StageLog:
    """Runs stages in order, timing each; the first failure (raised, or a contract fault found by
    ``check``) is recorded and stops the item with ``_Stop``."""

    def __init__(self, done: tuple[StageOutcome, ...] = ()) -> None:
        self.done: list[StageOutcome] = list(done)

    def seconds(self, stage: Stage) -> float:
        return next((s.seconds for s in self.done if s.stage is stage), 0.0)

    def fail_last(self, fault: str) -> None:
        """The last stage's contract fault, found after it returned (by what ran on its product): stops the item."""
        self.done[-1] = dataclasses.replace(self.done[-1], fault=fault)
        raise _Stop

    def __call__(self, stage: Stage, fn: Callable[[], T], check: Callable[[T], str | None] | None = None) -> T:
        watch = _STAGE_WATCH.get()
        if watch is not None:
            watch(stage)
        t0 = time.perf_counter()
        mark = _stderr_mark()
        try:
            value = fn()
        except _OwnFault:
            raise
        except Exception as exc:
            said = runtime_said(_stderr_since(mark))
            self.done.append(StageOutcome(stage, round(time.perf_counter() - t0, 6), error=error_info(exc, said)))
            raise _Stop from exc
        seconds = round(time.perf_counter() - t0, 6)
        fault = check(value) if check is not None else None
        self.done.append(StageOutcome(stage, seconds, fault=fault))
        if fault:
            raise _Stop
        return value


def _pending_unbacked(ep: Any) -> str:
    """The unbacked symbols the exported program's shape environment holds pending. Lowering a program with a
    data-dependent size (nonzero) leaves the ones its re-trace made there (ExecuTorch 1.5.1, torch 2.14: u6…u17 after
    portable's to_edge), and the next lowering of the same program fails with PendingUnbackedSymbolNotFound: such a
    program counts as changed, and the next recipe exports again."""
    for node in ep.graph.nodes:
        shape_env = getattr(getattr(node.meta.get("val"), "fake_mode", None), "shape_env", None)
        if shape_env is not None:
            return str(list(getattr(shape_env, "pending_fresh_unbacked_symbols", ())))
    return ""


class Group:
    """The shared part of a (case, axes) group: built module, pristine inputs, reference, exported program."""

    def __init__(self, item: Item, prebuilt: Any = None, tolerance: dict[str, Any] | None = None) -> None:
        from harness.suites import build_case

        self.built: Any = None  # a Built once built (harness.cases.contract)
        self.ref: list[Any] = []
        self.ep: Any = None
        self.ref_mutates = False  # the eager module itself writes into its inputs
        self._weights_seen: int | None = None
        # the case's own tolerance (a pair's b side keeps b's; the pair's loosens only a against b)
        self.case_tolerance: dict[str, Any] = tolerance if tolerance is not None else dict(item.case.spec.get("tolerance") or {})
        log = StageLog()

        def build() -> None:
            self.built = prebuilt if prebuilt is not None else build_case(item.case, item.axes, item.seed)
            ref_inputs = clone_inputs(self.built.run)
            self.ref = eager_reference(self.built, ref_inputs)
            self.ref_mutates = not inputs_equal(ref_inputs, self.built.run)
            self._weights_seen = self._weights_version()

        with contextlib.suppress(_Stop):
            log(Stage.EXPORT, build)
        self.built_outcome = dataclasses.replace(log.done[0], own=True)
        self._exported: StageOutcome | None = None
        self._program_seen: tuple[str, ...] = ()
        self._other: Group | None = None
        self._fp64: list[Any] | None = None
        self.fp64_error = ""  # why the module gave no float64 reference (the record says so)
        self.fp64_source = ""  # where it came from: op.ref (the case source's) or module
        self.item = item

    def _weights_version(self) -> int:
        """The sum of the version counters of the module's parameters and the exported program's state
        (they share storage): any in-place torch write bumps it. Cheap: no tensor data is read."""
        tensors = list(self.built.module.parameters()) if self.built is not None else []
        if self.ep is not None:
            tensors += [t for t in self.ep.state_dict.values() if hasattr(t, "_version")]
        return sum(int(t._version) for t in tensors)

    def weights_written(self) -> bool:
        """Whether a backend wrote into the shared weights since the group was built (or last checked)."""
        now = self._weights_version()
        if self._weights_seen is None:
            self._weights_seen = now
            return False
        return now != self._weights_seen

    def _program_key(self) -> tuple[str, ...]:
        """What a backend must not change in the shared exported program: its code and each node's value (shapes
        included: ExecuTorch's lowering once specialized a dynamic batch in place, s77 -> 2, and every later recipe of
        the group lowered a static program), and which parameters, buffers and constants it holds under which inputs
        (on executorch 1.4.1 a lowering dropped a non-persistent buffer, RoBERTa's token_type_ids, from the shared
        program: every later recipe's ep.module() failed with its KeyError)."""
        if self.ep is None:
            return ()
        ep = self.ep
        return (ep.graph_module.code, *(str(n.meta.get("val")) for n in ep.graph.nodes), _pending_unbacked(ep),
                " ".join(sorted(ep.state_dict)), " ".join(sorted(ep.constants)), str(ep.graph_signature.input_specs))

    def program_changed(self) -> bool:
        """Whether a backend changed the shared exported program since it was made; if so it is dropped, and the
        next recipe that needs one exports again."""
        if self.ep is None or self._program_seen == self._program_key():
            return False
        self.ep, self._exported, self._program_seen = None, None, ()
        self._weights_seen = self._weights_version()  # the program's state no longer counts: not a write by anyone
        return True

    def pair_other(self) -> Group:
        """A pair case's b side: its own module (and eager reference), a's inputs."""
        if self._other is None:
            self._other = Group(self.item, prebuilt=self.built.pair_b,
                                tolerance=dict((self.item.case.spec.get("b_spec") or {}).get("tolerance") or {}))
        return self._other

    def outcomes(self, export: bool) -> tuple[StageOutcome, ...]:
        """The shared export stage, as a backend sees it: building the module and its reference, and
        ``torch.export`` only for a backend that takes an exported program (done once, on first need)."""
        if not export or self.built_outcome.failed:
            return (self.built_outcome,)
        if self._exported is None:
            import torch

            log = StageLog()
            with contextlib.suppress(_Stop):
                self.ep = log(Stage.EXPORT, lambda: torch.export.export(
                    self.built.module, clone_inputs(self.built.example), dynamic_shapes=self.built.dynamic_shapes, strict=False))
            done = log.done[0]
            self._exported = dataclasses.replace(done, seconds=round(done.seconds + self.built_outcome.seconds, 6))
            self._weights_seen = self._weights_version()
            self._program_seen = self._program_key()
        return (self._exported,)

    def fp64_reference(self) -> list[Any] | None:
        """The module's outputs in float64 on the CPU (dynamo's accuracy rule), computed once; None when the
        module cannot run in float64."""
        if self._fp64 is None:
            outs, why = fp64_reference(self.built, clone_inputs(self.built.run), len(self.ref))
            self._fp64 = outs or []
            self.fp64_source, self.fp64_error = (why, "") if outs is not None else ("", why)
        return self._fp64 or None

    def fresh_built(self) -> Any:
        """The built case with its own copies of the inputs, for one backend call."""
        return dataclasses.replace(self.built, example=clone_inputs(self.built.example), run=clone_inputs(self.built.run))


def clone_inputs(values: tuple[Any, ...]) -> tuple[Any, ...]:
    import torch

    return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in values)


def inputs_equal(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return not changed_inputs(a, b)


def changed_inputs(after: tuple[Any, ...], before: tuple[Any, ...]) -> list[int]:
    """Indices of tensor inputs whose values differ (NaN equals NaN)."""
    import torch

    out = []
    for i, (x, y) in enumerate(zip(after, before, strict=False)):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            out.append(i)
            continue
        x, y = comparable(x), comparable(y)
        if not same_tensor(x, y) and not _equal_nan(x, y):
            out.append(i)
    return out


def _equal_nan(x: Any, y: Any) -> bool:
    import torch

    return bool(x.is_floating_point() or x.is_complex()) and bool(torch.allclose(x, y, rtol=0.0, atol=0.0, equal_nan=True))


def output_fault(outs: Any) -> str | None:
    """Why a backend's ``run`` result breaks the contract (a list of tensors or Python scalars)."""
    import torch

    if not isinstance(outs, (list, tuple)):
        return f"run returned {type(outs).__name__}, not a list of tensors"
    for i, o in enumerate(outs):
        if not isinstance(o, (torch.Tensor, int, float, bool, complex)):
            return f"output[{i}] is {type(o).__name__}, not a tensor"
    return None


def run_item(item: Item, recipe: Recipe, group: Group, run_id: str, bundle_dir: str | None = None,
             control: Status | None = None, control_recipe: str | None = None, attempt: int = 1,
             refs: Baseline | None = None, prefix: str = "") -> tuple[Record, list[Any] | None, float | None]:
    """One item: (its record, its outputs and median latency when it ran to the end). ``refs``: compare
    with a baseline recipe's outputs instead of the eager reference."""
    side_b: Baseline | None = None
    if refs is None and not group.built_outcome.failed and group.built.pair_b is not None:
        # a pair: b runs first on the same backend (its own eager reference checks it), then a is
        # compared with b's outputs
        rec_b, b = _pair_b(item, recipe, group, run_id, control, control_recipe, attempt)
        if b is None:
            return rec_b, None, None  # b's own failure is the pair's
        if group.built.pair_judged:
            refs = b
        else:  # a pair whose sides are each judged against their own reference: how far a is from b is a figure
            side_b = b
    t_start = time.perf_counter()
    facts: dict[str, Any] = {}
    harness_error = None
    log = StageLog()
    outs: list[Any] = []
    try:
        backend: Backend = get_backend(recipe.backend)
        log = StageLog(group.outcomes(export=backend.needs_export))
        if any(s.failed for s in log.done):
            raise _Stop
        _run_stages(backend, item, recipe, group, log, facts, bundle_dir, outs, refs)
    except _Stop:
        pass
    except Exception as exc:  # bti's own code failed: never the backend's fault
        harness_error = error_info(exc)
    duration = round(time.perf_counter() - t_start + log.seconds(Stage.EXPORT), 6)
    median = (facts.get("latency_ms") or {}).get("median")
    if side_b is not None:
        ratio = round(median / side_b.median_ms, 4) if median and side_b.median_ms else None
        facts["baseline"] = {"pair_b": side_b.recipe[5:], "status": side_b.status, "latency_ratio": ratio,
                             "b_latency_ms": side_b.median_ms, "judged": False, "b_op": group.built.pair_b_op, "b_times_ms": side_b.times_ms,
                             "diff": diff_figures([to_numpy(o) for o in outs], [to_numpy(o) for o in side_b.outputs])
                             if "comparison" in facts else None}
    elif refs is not None:
        ratio = round(median / refs.median_ms, 4) if median and refs.median_ms else None
        if refs.recipe.startswith("pair:"):
            facts["baseline"] = {"pair_b": refs.recipe[5:], "status": refs.status, "latency_ratio": ratio}
        else:
            facts["baseline"] = {"recipe": refs.recipe, "status": refs.status, "latency_ratio": ratio}
    outcome = Outcome(stages=tuple(log.done), harness_error=harness_error, duration_s=duration,
                      peak_rss_mb=round(peak_rss_mb(), 1), control=control, worker_pid=os.getpid(), detail_prefix=prefix,
                      **facts)
    rec = decide(item, recipe, outcome, run_id, attempt, control_recipe)
    if bundle_dir and (rec.get("artifacts") or {}).get("bpte"):  # what `bti verify` needs to judge it where it runs
        card = {k: v for k, v in base_record(item, recipe, "").items() if k not in ("kind", "run_id", "attempt")}
        # a LOWERED item was never compared: its card still names the tolerance its device run is held to
        card.update(tolerance=device_tolerance(rec.get("tolerance") or tolerance(item, recipe, group), recipe.quantized),
                    recipe_hash=recipe.hash,
                    status=rec["status"])
        if rec.get("xfail"):
            card["xfail"] = rec["xfail"]
        bpte = Path(bundle_dir) / Path(rec["artifacts"]["bpte"]).name
        atomic_write_text(bpte.with_name(bpte.name + ".json"), dumps(card))
    return rec, (outs if "comparison" in facts else None), median


@dataclass(frozen=True)
class Baseline:
    """A baseline recipe's outputs on one group (on the CPU), its status and median latency."""

    recipe: str
    status: str
    outputs: list[Any]
    median_ms: float | None
    times_ms: list[float] | None = None  # each timed run (a pair's b side)


def _pair_b(item: Item, recipe: Recipe, group: Group, run_id: str, control: Status | None, control_recipe: str | None,
            attempt: int) -> tuple[Record, Baseline | None]:
    """A pair's b side on the same backend: its record, and its outputs when it passed."""
    b_name = group.built.pair_b_name
    rec_b, outs_b, median_b = run_item(item, recipe, group.pair_other(), run_id, None, control, control_recipe, attempt,
                                       prefix=f"pair b ({b_name}): ")
    if outs_b is None or not Status(rec_b["status"]).is_pass:
        return rec_b, None
    return rec_b, Baseline(f"pair:{b_name}", rec_b["status"], outs_b, median_b, rec_b.get("times_ms"))


def _shape(value: Any) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(type(v).__name__ for v in value) + ")"
    return type(value).__name__


def _lowered_fault(value: Any) -> str | None:
    if not (isinstance(value, tuple) and len(value) == 2 and (value[1] is None or isinstance(value[1], dict))):
        return f"lower returned {_shape(value)}, not (lowered, partition stats or None)"
    return None


WROTE_WEIGHTS = "it wrote into the model's weights (shared with the eager reference and the other recipes)"


def _weights_fault(group: Group) -> str | None:
    """A stage that wrote into the model's weights (the Arm quantizer's FoldScalarMulIntoConvPass scales a
    convolution's weight in place, ``model.scale_conv``): the stage's fault, where it happened, whether or not the
    program ever runs here."""
    return WROTE_WEIGHTS if group.weights_written() else None


def _serialized_fault(value: Any) -> str | None:
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], (bytes, bytearray))
            and isinstance(value[1], list)):
        return f"serialize returned {_shape(value)}, not (program bytes, list of delegate blobs)"
    return None


def _run_stages(backend: Backend, item: Item, recipe: Recipe, group: Group, stage: StageLog, facts: dict[str, Any],
                bundle_dir: str | None, keep: list[Any], refs: Baseline | None) -> None:
    meter = PeakMeter()
    memory: dict[str, float] = {}
    deterministic, unchecked = None, ""  # model cases: did a second run give the same outputs, or why it did not run
    start = meter.start()
    try:
        built = group.fresh_built()
        judged = refs is None or not refs.recipe.startswith("pair:")  # a baseline's items keep their quantized program
        ep, qref = _quantize(backend, recipe, group, built, stage, judged, _measures(item, recipe))
        lowered, stats = stage(Stage.LOWER, lambda: backend.lower(recipe, ep, built), lambda v: _lowered_fault(v) or _weights_fault(group))
        if stats is not None:
            facts["partition"] = stats
            qref = _kept_reference(qref, stats, ep, group, _measures(item, recipe))
        blob = None
        if Stage.SERIALIZE in backend.stages:
            blob, blobs = stage(Stage.SERIALIZE, lambda: backend.serialize(recipe, lowered), _serialized_fault)
            blob = bytes(blob)
            facts["program"] = Program(len(blob), hashlib.sha256(blob).hexdigest(), tuple(blobs))
        memory["aot"] = meter.peak()
        memory["aot_growth"] = round(memory["aot"] - start, 1)
        _stop_if_not_runnable(backend, item, recipe, group, facts, bundle_dir, lowered, blob)
        start = meter.start()
        if backend.runs_programs:  # the record names where the program ran
            facts["runtime"] = recipe.runtime.provider.label if recipe.runtime.provider is not None else "pybind"
        handle = stage(Stage.LOAD, lambda: backend.load(recipe, lowered, blob))
        facts["load_ms"] = round(stage.seconds(Stage.LOAD) * 1000.0, 3)
        if isinstance(getattr(handle, "runtime_label", None), str):  # run by something else than a provider
            facts["runtime"] = handle.runtime_label
        outs, samples, provider_facts = _run(backend, handle, recipe, group, stage, stats)
        if is_model_kind(item.case.kind):  # wherever the program runs: in process, or through a runtime provider
            deterministic, unchecked = _determinism(backend, handle, recipe, group, outs, samples)
        if "load_ms" in provider_facts:  # loaded where the provider runs: its own load time
            facts["load_ms"] = provider_facts["load_ms"]
        for k, v in (provider_facts.get("memory_mb") or {}).items():
            memory[f"runtime_{k}"] = v
    finally:  # an item that failed midway still has its own memory figures
        key = "run" if "aot" in memory else "aot"
        memory[key] = meter.peak()
        memory[f"{key}_growth"] = round(memory[key] - start, 1)
        facts["memory_mb"] = memory
    facts["latency_ms"] = {**{k: round(v, 4) for k, v in latency_stats(samples).items()}, "repeats": len(samples)}
    facts["times_ms"] = tuple(round(float(x), 4) for x in samples)
    outs = list(outs)
    keep.extend(o.detach().cpu().clone() if hasattr(o, "detach") else o for o in outs)
    rule = str(recipe.accuracy.rule or backend.accuracy_rule or "allclose")

    def compare_all() -> Comparison:
        comparison = _judged(item, recipe, group, outs, refs, rule, deterministic, qref)
        if unchecked:
            comparison = dataclasses.replace(comparison, accuracy={**(comparison.accuracy or {}), "deterministic_unchecked": unchecked})
        more = group.built.more_runs  # with --baseline too: further sets are held to eager (the baseline ran set 0)
        if more:
            comparison = _compare_more(backend, handle, group, comparison, outs, more, facts)
        return comparison

    facts["comparison"] = stage(Stage.COMPARE, compare_all)
    if bundle_dir:
        facts["artifacts"] = backend.bundle(recipe, Path(bundle_dir), _bundle_name(item), lowered, blob, group.built.run,
                                            group.ref, outs)


def _judged(*args: Any) -> Comparison:
    """``harness.judge.judge``: the judge is bti's, so its own failure is ERROR (``_OwnFault``), never the backend's
    mismatch."""
    try:
        return judge(*args)
    except Exception as exc:
        raise _OwnFault(f"the judge failed: {type(exc).__name__}") from exc


def _measures(item: Item, recipe: Recipe) -> bool:
    """Whether the item's quantized reference is measured for its sensitivity (``harness.judge.with_sensitivity``):
    a model's, where its program runs here (a lowered-only recipe's is never judged)."""
    return is_model_kind(item.case.kind) and run_gap(recipe) is None


def _quantize(backend: Backend, recipe: Recipe, group: Group, built: Any, stage: StageLog,
              judged: bool, model: bool) -> tuple[Any, QuantizedReference | None]:
    """The quantize stage, where the recipe quantizes: the program to lower, and (when it is ``judged`` against its own
    reference, not a pair's other side) the quantized program's outputs, run before lowering, which may consume the
    program; for a ``model``, with its sensitivity (``QuantizedReference.sensitivity_db``)."""
    if not (recipe.quantized and Stage.QUANTIZE in backend.stages):
        return group.ep, None
    ep = stage(Stage.QUANTIZE, lambda: backend.quantize(recipe, group.ep, built), lambda _: _weights_fault(group))
    qref = _quantized_reference(backend, recipe, ep, group, model) if judged else None
    if _weights_fault(group):  # the quantized program wrote into them when bti ran it: the quantize stage's product
        stage.fail_last(f"{WROTE_WEIGHTS}, when its quantized program ran in eager PyTorch")
    return ep, qref


def _quantized_reference(backend: Backend, recipe: Recipe, quantized: Any, group: Group,
                         model: bool = False) -> QuantizedReference:
    """The quantized program run in eager PyTorch on the item's inputs (the backend's hook); its own failure is
    said in the record, and the judge falls back to fp32."""
    return _reference_or_error(lambda inputs: backend.quantized_reference(recipe, quantized, inputs), group, model)


def _reference_or_error(run: Callable[[tuple[Any, ...]], QuantizedReference], group: Group,
                        model: bool = False) -> QuantizedReference:
    """``run`` on the item's inputs; for a ``model``, with its sensitivity (``harness.judge.with_sensitivity``)."""
    try:
        qref = run(clone_inputs(group.built.run))
    except Exception as exc:
        return QuantizedReference(error=f"{type(exc).__name__}: {first_line(str(exc))[:200]}")
    if not model:
        return qref
    from harness.judge import with_sensitivity

    return with_sensitivity(qref, run, group.built.run)


def _kept_reference(qref: QuantizedReference | None, stats: dict[str, Any], quantized: Any,
                    group: Group, model: bool) -> QuantizedReference | None:
    """The quantized reference after lowering. A per-row one (harness.qd8) stands for the delegate's kernels: where a
    dynamic quantization stays outside the delegate, the portable kernels run the program as written, the reference."""
    if qref is None or not stats.get("dynamic_quantization_outside_delegate"):
        return qref
    from harness.judge import quantized_reference

    return _reference_or_error(lambda inputs: quantized_reference(quantized, inputs), group, model)


def _compare_more(backend: Backend, handle: Any, group: Group, comparison: Comparison, outs: list[Any],
                  more: tuple[tuple[Any, ...], ...], facts: dict[str, Any]) -> Comparison:
    """Further input sets (``Built.more_runs``, e.g. ``--sampled-inputs``): each runs once on the loaded program and is held
    to the same tolerance against its own eager reference; each set's difference is recorded (``sampled_inputs``)."""
    problems = [comparison.message] if not comparison.ok else []
    sets = [diff_figures([to_numpy(r) for r in group.ref], [to_numpy(o) for o in outs])]
    for i, inputs in enumerate(more, start=1):
        try:
            got = list(backend.execute(handle, clone_inputs(inputs), 0, 1)[0])
            want = eager_reference(group.built, clone_inputs(inputs))
        except Exception as exc:
            problems.append(f"input set {i}: {type(exc).__name__}: {first_line(str(exc))[:300]}")
            sets.append({"ok": False, "code": "RUN_FAILED", "msg": first_line(str(exc))[:300]})
            continue
        got_np, want_np = [to_numpy(o) for o in got], [to_numpy(r) for r in want]
        verdict = compare(got_np, want_np, device_tolerance(comparison.tolerance))  # against eager, as the set's reference
        sets.append(diff_figures(want_np, got_np))
        if not verdict.ok:
            problems.append(f"input set {i}: {verdict.message}")
    facts["sampled_inputs"] = tuple(sets)
    return dataclasses.replace(comparison, ok=not problems, message="; ".join(problems))


def _stop_if_not_runnable(backend: Backend, item: Item, recipe: Recipe, group: Group, facts: dict[str, Any],
                          bundle_dir: str | None, lowered: Any, blob: bytes | None) -> None:
    """Where the recipe's runtime is missing (``run_requires``), the item ends here as LOWERED: lowered, serialized
    and measured so far. With ``--bundle`` its program is written with the eager outputs as the expected ones, for
    ``bti verify`` where the runtime is."""
    gap = run_gap(recipe)
    if gap is None:
        return
    facts["lowered"] = gap
    if bundle_dir:
        facts["artifacts"] = backend.bundle(recipe, Path(bundle_dir), _bundle_name(item), lowered, blob, group.built.run,
                                            group.ref, group.ref)
    raise _Stop


def _bundle_name(item: Item) -> str:
    """The file name of an item's device bundle (``--bundle``)."""
    return re.sub(r"[^\w.@-]+", "_", item.id).strip("_")


def _run(backend: Backend, handle: Any, recipe: Recipe, group: Group, stage: StageLog,
         stats: dict[str, Any] | None) -> tuple[list[Any], list[float], dict[str, Any]]:
    """The run stage: warmup + repeats runs on fresh copies of the inputs, checked against the backend contract
    (tensors out; the inputs and the model's weights untouched). Returns outputs, latencies and provider facts."""
    inputs = clone_inputs(group.built.run)
    checks_inputs = not group.ref_mutates and not (stats or {}).get("input_mutations")
    provider_facts: dict[str, Any] = {}

    def run() -> tuple[Any, list[float]]:
        outs, samples, more = backend.execute(handle, inputs, recipe.runtime.warmup, recipe.runtime.repeats)
        provider_facts.update(more)
        return outs, samples

    def run_fault(result: tuple[Any, list[float]]) -> str | None:
        why = output_fault(result[0])
        if why is None and checks_inputs:
            changed = changed_inputs(inputs, group.built.run)
            if changed:
                why = f"the program wrote into its input tensor(s) {', '.join(f'input[{i}]' for i in changed)}"
        if why is None:
            why = _weights_fault(group)
        return why

    outs, samples = stage(Stage.RUN, run, run_fault)
    return outs, samples, provider_facts


def _determinism(backend: Backend, handle: Any, recipe: Recipe, group: Group, outs: list[Any],
                 samples: list[float]) -> tuple[bool | None, str]:
    """(did a second run give the same outputs, or why it was not run): after a call of ``LONG_CALL_S`` or more, a
    figure the recipe does not ask for is not worth another call of minutes."""
    if recipe.accuracy.deterministic or not samples or samples[-1] < LONG_CALL_S * 1000.0:
        return _runs_twice_identically(backend, handle, group, outs), ""
    return None, f"not checked: a call took {samples[-1] / 1000.0:.0f} s (accuracy.deterministic asks for it)"


def _runs_twice_identically(backend: Backend, handle: Any, group: Group, outs: list[Any]) -> bool | None:
    """One more run on the device, compared bit for bit with the first (oota's ✓ is exactly this check)."""
    import torch

    try:
        again = list(backend.execute(handle, clone_inputs(group.built.run), 0, 1)[0])
    except Exception:
        return None
    if len(again) != len(outs):
        return False
    for a, b in zip(outs, again, strict=True):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or a.dtype != b.dtype or not torch.equal(a.detach().cpu(), b.detach().cpu()):
                return False
        elif a != b:
            return False
    return True


_WARMED: set[tuple[str, str]] = set()  # (backend, options) already warmed in this process


def warm_up(recipes: list[Recipe]) -> None:
    """Let each recipe's backend lower a tiny model once in the not-yet-forked parent (``Backend.warm``
    decides whether that is fork-safe), so the state torch and the backend build lazily on first use
    exists before workers fork. One torch thread: no OpenMP pool is started. Failures are ignored (the
    items themselves will report them); the global RNG state is left as it was. A recipe whose backend
    and options were already warmed in this process is not lowered again."""
    import torch

    torch.set_num_threads(1)
    with torch.random.fork_rng(devices=[]):
        for recipe in recipes:
            key = (recipe.backend, repr(recipe.options))
            if key in _WARMED:
                continue
            _WARMED.add(key)
            try:
                get_backend(recipe.backend).warm(recipe, lower=True)
            except Exception:
                continue


def execute_group(items: list[Item], recipes: dict[str, Recipe], run_id: str,
                  on_start: Callable[[str], None], emit: Callable[[Record], None], bundle_dir: str | None = None,
                  control_recipe: str | None = None, context: GroupContext | None = None, attempt: int = 1,
                  baseline_recipe: str | None = None) -> None:
    """Run every item of one group, calling ``on_start(item_id)`` before and ``emit(record)`` after each.
    The baseline recipe's item runs first (its outputs are the others' reference), then the control
    recipe's (so the others' triage can name it)."""
    context = context or GroupContext()
    group = Group(items[0])
    memory = ItemMemory()  # before a requeued group's baseline is computed again: its garbage counts too
    control = context.control
    baseline: Baseline | None = None
    blocked = context.baseline  # (status, detail) of a baseline that gave no outputs
    if baseline_recipe and not any(it.recipe == baseline_recipe for it in items) and blocked and blocked[0].is_pass:
        # the baseline passed in an earlier worker (this group was requeued after a crash): compute its
        # outputs again, without recording it twice
        again = Item(items[0].case, baseline_recipe, items[0].axes)
        _, outs, median = run_item(again, recipes[baseline_recipe], group, run_id)
        baseline = Baseline(baseline_recipe, blocked[0].value, outs, median) if outs is not None else None
    order = sorted(items, key=lambda it: (it.recipe != baseline_recipe, it.recipe != control_recipe))
    for item in order:
        memory.after_item()  # the previous item's garbage is not this one's memory
        on_start(item.id)
        recipe = recipes[item.recipe]
        if baseline_recipe and item.recipe != baseline_recipe and baseline is None:
            status, detail = blocked or (Status.BLOCKED, "it did not run")
            why = f"baseline {baseline_recipe} gave no outputs to compare with: {status.value}: {detail}"[:1000]
            rec = decide(item, recipe, Outcome(fixed=Status.BLOCKED, fixed_detail=why), run_id, attempt, control_recipe)
        else:
            judged_pair = group.built is None or group.built.pair_judged  # a pair whose sides are each judged has no baseline
            with use(current().for_case(item.case.spec, item.recipe)):  # a runtime provider gives up before the pool
                rec, outs, median = run_item(item, recipe, group, run_id, bundle_dir, control, control_recipe, attempt,
                                             refs=baseline if item.recipe != baseline_recipe and judged_pair else None)
            if item.recipe == baseline_recipe:
                status = Status(rec["status"])
                if outs is not None and (status.is_pass or status is Status.XPASS):
                    baseline = Baseline(baseline_recipe, status.value, outs, median)
                else:
                    blocked = (status, rec.get("detail", ""))
        if item.recipe == control_recipe:
            control = Status(rec["status"])
        emit(rec)  # before any rebuild below: a crash there is the next item's (its module's build), not this one's
        if group.weights_written():  # that backend wrote into the shared weights: the next recipes get a fresh build
            group = Group(items[0])
        group.program_changed()  # or into the shared exported program: the next recipes export again
        outs = None  # not held through the next item (a baseline keeps its own reference)
