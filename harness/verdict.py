"""One status decision: stage outcomes in, one ``Record`` out (torch-free).

Every status bti writes is decided here, by ``decide`` (one attempt) and ``settle_attempts`` (an
item re-run under ``--rerun-failures``). The stages (``harness.stages``), the parent's settling
(UNAVAILABLE, SKIP), the pool (CRASH, TIMEOUT) and the reruns only *describe* what happened, as
frozen outcome objects; none of them sets a status or touches a record dict.

The order of the decision:

1. a status fixed before any stage ran, or by the pool (UNAVAILABLE, SKIP, CRASH, TIMEOUT);
2. a harness error: ERROR (a bti bug or a broken environment, never the backend's fault);
3. the first stage that raised, or whose result broke the backend contract: that stage's FAIL_*;
4. the comparison with the reference: FAIL_MISMATCH;
5. the recipe's ``expect`` rule (what must be delegated): FAIL_DELEGATION;
6. PASS, or PASS_UNDELEGATED when a partitioner took nothing;
7. the recipe's ``xfail`` rule: an expected failure (named status and message) is XFAIL; a pass is
   XPASS; any other failure stays a failure, with the xfail reason beside it;
8. the triage hint of a failure: upstream, backend, infra or flake (see ``triage``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.causes import Crash
from harness.errors import first_line
from harness.judge import Comparison
from harness.status import DEVICE_FAILURES, Stage, Status

if TYPE_CHECKING:
    from harness.cases.case import Item
    from harness.recipes import Recipe, Rule
    from harness.results import Record

from harness.results import SCHEMA

TRIAGE = ("upstream", "backend", "quantizer", "infra", "flake")


@dataclass(frozen=True)
class ErrorInfo:
    type: str
    message: str
    trace: str = ""
    status: Status | None = None  # the error decides the item's status itself (a runtime provider's ``status``)
    signature: str = ""  # the root cause's key: one bug, one key, across ops and recipes (harness.causes)

    def as_dict(self) -> dict[str, str]:
        out = {"type": self.type, "message": self.message, "trace": self.trace}
        if self.signature:
            out["signature"] = self.signature
        return out


@dataclass(frozen=True)
class StageOutcome:
    """One stage that ran: its time, and what went wrong, if anything.

    ``error``: the stage raised. ``fault``: it returned, but broke the backend contract (a non-tensor
    output, a write into its input tensors); either fails the stage."""

    stage: Stage
    seconds: float
    error: ErrorInfo | None = None
    fault: str | None = None
    own: bool = False  # the case's own stage: building the module and its eager reference, before any recipe

    @property
    def failed(self) -> bool:
        return self.error is not None or self.fault is not None


@dataclass(frozen=True)
class Program:
    """A serialized program: its size, hash and delegate blobs."""

    size: int
    sha256: str
    blobs: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Outcome:
    """Everything that happened to one item on one attempt (every field optional: a backend without a
    stage, or an item that never reached it, leaves it out)."""

    stages: tuple[StageOutcome, ...] = ()
    fixed: Status | None = None  # decided without the stages: UNAVAILABLE, SKIP, CRASH, TIMEOUT
    fixed_detail: str = ""
    harness_error: ErrorInfo | None = None
    partition: Mapping[str, Any] | None = None
    program: Program | None = None
    load_ms: float | None = None
    runtime: str | None = None  # the runtime provider that ran the program (harness.providers)
    lowered: str | None = None  # lowered and serialized, not run: why this machine cannot run it (run_requires)
    latency_ms: Mapping[str, float] | None = None
    comparison: Comparison | None = None
    artifacts: Mapping[str, str] | None = None
    memory_mb: Mapping[str, float] | None = None  # this item's own peak RSS: {"aot": .., "run": ..}
    peak_rss_mb: float | None = None
    duration_s: float | None = None
    worker_pid: int | None = None
    control: Status | None = None  # the control recipe's status on the same case and axes
    baseline: Mapping[str, Any] = field(default_factory=dict)
    times_ms: tuple[float, ...] | None = None  # each timed run's milliseconds (opdiff's times_all)
    sampled_inputs: tuple[Mapping[str, Any], ...] | None = None  # per input set: opdiff's diff against its reference
    detail_prefix: str = ""  # e.g. "pair b (op.x): " when one side of a pair speaks for the pair
    crash: Crash | None = None  # a dead worker's signal and what its own output said (harness.causes)
    load: Mapping[str, float] | None = None  # a TIMEOUT: what the item had of the machine (harness.env.load_note)
    died_in: Stage | None = None  # a CRASH or TIMEOUT of the pool's: the stage its worker was in


@dataclass
class GroupContext:
    """What the parent knows about a group before a worker runs it: the control recipe's status there
    (triage), and the baseline recipe's status and detail (``--baseline``)."""

    control: Status | None = None
    baseline: tuple[Status, str] | None = None

    @staticmethod
    def note(contexts: dict[str, GroupContext], rec: Record, control: str | None, baseline: str | None) -> None:
        """Record what ``rec`` says about its group, if it is the control's or the baseline's item."""
        if rec["recipe"] not in (control, baseline):
            return
        ctx = contexts.setdefault(rec["id"].rsplit("@", 1)[0], GroupContext())
        if rec["recipe"] == control:
            ctx.control = Status(rec["status"])
        if rec["recipe"] == baseline:
            ctx.baseline = (Status(rec["status"]), rec.get("detail", ""))


def base_record(item: Item, recipe: Recipe, run_id: str, attempt: int = 1) -> Record:
    return {
        "kind": "result", "schema": SCHEMA, "id": item.id, "case": item.case.id, "suite": item.case.suite,
        "op": item.case.op, "tags": list(item.case.tags), "recipe": recipe.name, "backend": recipe.backend,
        "axes": item.axes.as_dict(), "seed": item.seed, "spec_hash": item.case.spec_hash, "run_id": run_id,
        "attempt": attempt,
    }


def decide(item: Item, recipe: Recipe, outcome: Outcome, run_id: str, attempt: int = 1,
           control_recipe: str | None = None) -> Record:
    """Assemble the record of one attempt and decide its status."""
    rec = base_record(item, recipe, run_id, attempt)
    _fill(rec, outcome)
    status, detail, error = _status(recipe, item, outcome)
    if error is not None:
        rec["error"] = error.as_dict()
    status, detail, xfail = _apply_xfail(recipe, item, outcome, status, detail, error)
    rec["status"] = status.value
    rec["detail"] = (outcome.detail_prefix + detail)[:1000] if outcome.detail_prefix else detail
    if xfail is not None:
        rec["xfail"] = xfail
    if status.attempted:  # as _apply_xfail: a source asked about the item
        from harness.suites import case_facts

        if facts := case_facts(item.case, item.axes.dtype, recipe):
            rec["facts"] = facts
    owner = outcome.comparison.owner if outcome.comparison is not None else None
    if outcome.crash is not None and outcome.crash.cause:
        owner = "backend"  # the runtime's own fatal check said why: a bug there, not the machine
    hint = triage(status, outcome.control, recipe.name == control_recipe, owner)
    if hint:
        rec["triage"] = hint
    return rec


def _fill(rec: Record, o: Outcome) -> None:
    if o.stages:
        rec["stages"] = {s.stage.value: s.seconds for s in o.stages}
    if o.partition is not None:
        rec["partition"] = dict(o.partition)
    if o.program is not None:
        rec["pte_bytes"] = o.program.size
        rec["pte_sha256"] = o.program.sha256
        rec["delegate_blobs"] = [dict(b) for b in o.program.blobs]
    if o.load_ms is not None:
        rec["load_ms"] = o.load_ms
    if o.runtime is not None:
        rec["runtime"] = o.runtime
    if o.latency_ms is not None:
        rec["latency_ms"] = dict(o.latency_ms)
    if o.comparison is not None:
        rec["outputs"] = [dict(s) for s in o.comparison.outputs]  # type: ignore[misc]
        rec["tolerance"] = dict(o.comparison.tolerance)
        rec["reference"] = o.comparison.reference
        if o.comparison.accuracy:
            rec["accuracy"] = dict(o.comparison.accuracy)
    if o.artifacts is not None:
        rec["artifacts"] = dict(o.artifacts)
    if o.memory_mb is not None:
        rec["memory_mb"] = dict(o.memory_mb)
    if o.peak_rss_mb is not None:
        rec["peak_rss_mb"] = o.peak_rss_mb
    if o.duration_s is not None:
        rec["duration_s"] = o.duration_s
    if o.worker_pid is not None:
        rec["worker_pid"] = o.worker_pid
    if o.baseline:
        rec["baseline"] = dict(o.baseline)
    if o.times_ms:
        rec["times_ms"] = list(o.times_ms)
    if o.sampled_inputs:
        rec["sampled_inputs"] = [dict(s) for s in o.sampled_inputs]
    if o.crash is not None:
        rec["crash"] = o.crash.as_dict()
    if o.load:
        rec["load"] = dict(o.load)
    stage = _died_in(o)
    if stage is not None:
        rec["died_in"] = stage.value


def decide_bundle(base: Mapping[str, Any], outcome: Outcome, expected: Mapping[str, Any] | None = None) -> Record:
    """A bundled program re-run where it runs (``bti verify``): its stages and its comparison decide. The
    recipe's rules judged the item when the bundle was made; ``expected`` is that run's xfail (the item was
    XFAIL there): a failure here too stays expected (XFAIL), a pass is XPASS, as in the run."""
    rec: Record = {**base, "kind": "result", "schema": SCHEMA}  # type: ignore[typeddict-item]
    _fill(rec, outcome)
    status, detail, error = _status(None, None, outcome)
    if expected is not None and status is not Status.SKIP:
        reason = str(expected.get("reason", ""))
        if status.is_failure:
            status, detail = Status.XFAIL, f"expected, as in the run ({reason}): {detail}"[:1000]
        elif status.is_pass:
            status, detail = Status.XPASS, f"failed as expected in the run ({reason}), passes here"[:1000]
        rec["xfail"] = dict(expected)
    if error is not None:
        rec["error"] = error.as_dict()
    rec["status"] = status.value
    rec["detail"] = detail
    hint = triage(status, None, False)
    if hint:
        rec["triage"] = hint
    return rec


def _status(recipe: Recipe | None, item: Item | None, o: Outcome) -> tuple[Status, str, ErrorInfo | None]:
    if o.fixed is not None:
        key = o.crash.signature if o.crash is not None else ""
        error = ErrorInfo(o.fixed.value, o.fixed_detail, signature=key) if o.fixed.is_failure else None
        return o.fixed, o.fixed_detail, error
    if o.harness_error is not None:
        return Status.ERROR, f"harness error: {first_line(o.harness_error.message)}", o.harness_error
    for s in o.stages:
        if s.error is not None:
            # a runtime provider's runner process died or hung: that item alone is CRASH / TIMEOUT, and a
            # case it cannot take (a non-tensor input) is SKIP (harness.providers)
            status = s.error.status or s.stage.failure
            return status, f"{s.stage.value}: {first_line(s.error.message)}", (None if status is Status.SKIP else s.error)
        if s.fault is not None:
            msg = f"the backend's fault: {s.fault}"
            return s.stage.failure, f"{s.stage.value}: {msg}", ErrorInfo("BackendContract", msg)
    if o.comparison is not None and not o.comparison.ok:
        return Status.FAIL_MISMATCH, o.comparison.message[:1000], None
    part = o.partition or {}
    missing = _missing_delegation(recipe, item, part) if recipe is not None and item is not None else ""
    if missing:
        return Status.FAIL_DELEGATION, missing, ErrorInfo("Delegation", missing)
    if o.lowered is not None:
        return Status.LOWERED, f"lowered and serialized; not run here: {o.lowered}", None
    if part.get("partitioned") and part.get("delegated_nodes", 0) == 0:
        return (Status.PASS_UNDELEGATED,
                "correct, but nothing was delegated: " + ", ".join(sorted(part.get("undelegated_ops", {})))[:300], None)
    return Status.PASS, "", None


def _died_in(o: Outcome) -> Stage | None:
    """The stage a CRASH or TIMEOUT came in: where the pool's worker was, or where a runtime provider's runner died."""
    if o.died_in is not None:
        return o.died_in
    return next((s.stage for s in o.stages if s.error is not None and s.error.status is not None and s.error.status.died),
                None)


def _missing_delegation(recipe: Recipe, item: Item, part: Mapping[str, Any]) -> str:
    rule = recipe.expectation(item.group, item.case.suite)
    if rule is None or not part:
        return ""
    delegated = part.get("delegated_ops") or {}
    undelegated = part.get("undelegated_ops") or {}
    # an expected op counts only if the program has it: a case without the op has nothing to delegate
    absent = [op for op in rule.delegated_ops if op in undelegated and op not in delegated]
    problems = []
    if absent:
        problems.append(f"expected delegated, ran on the portable runtime: {', '.join(absent)}")
    pct = float(part.get("delegated_pct") or 0.0)
    if rule.min_delegated_pct is not None and pct < rule.min_delegated_pct:
        problems.append(f"{pct:g}% of nodes delegated, the recipe expects at least {rule.min_delegated_pct:g}%")
    return "; ".join(problems)


def _source_xfail(item: Item, recipe: Recipe) -> list[Rule]:
    """The case source's own expected failures: its rules (the zoo's known failures on this recipe, each with its
    status, message and versions), and OpInfo's ``expectedFailure`` for the device type, which any failure on the
    device holds."""
    from harness.recipes import Rule
    from harness.suites import case_judgement

    judgement = case_judgement(item.case, item.axes.dtype, recipe)
    rules = [r for r in judgement.rules if r.applies(item.group, item.case.suite)]  # the zoo's known failures
    why = judgement.xfail
    return [*rules, *([Rule(match=item.group, reason=why, statuses=DEVICE_FAILURES)] if why else [])]


def _apply_xfail(recipe: Recipe, item: Item, o: Outcome, status: Status, detail: str,
                 error: ErrorInfo | None) -> tuple[Status, str, dict[str, str] | None]:
    if not status.attempted:  # nothing to expect, nor to ask the case source (an
        return status, detail, None  # unavailable device may be unknown to torch)
    part = o.partition or {}
    delegated = None if not part.get("partitioned") else part.get("delegated_nodes", 0) > 0
    rules = recipe.xfail_rules(item.group, item.case.suite, delegated) or _source_xfail(item, recipe)
    message = f"{detail}\n{error.message}" if error is not None else detail
    db = lowest_sqnr_db(o.comparison.outputs if o.comparison else (), recipe.quantized, message)
    judged, rule = held(rules, status, message, _died_in(o), db)
    if rule is not None and judged is Status.XPASS and status is Status.LOWERED:  # a rule expecting an earlier failure
        return (Status.XPASS, f"expected to fail ({rule.describe()}: {rule.reason}) but {detail}",
                {"reason": rule.reason, "expects": rule.describe(), "lowered": o.lowered or ""})  # not run: not cached
    if rule is not None and judged is Status.XFAIL:
        info = {"reason": rule.reason, "expects": rule.describe(), "status": status.value}
        return Status.XFAIL, f"{status.value}: {detail} [xfail: {rule.reason}]", info
    if status is Status.LOWERED:
        return status, detail, None
    # building the module or its eager reference failed, and no rule expects that stage to fail: no recipe was reached
    # (a rule that does name it, with a message that no longer matches, keeps its "unexpected": it is to be narrowed)
    if any(s.own and s.failed for s in o.stages) and not any(status in rule.statuses for rule in rules):
        return status, f"{detail} [the case's own: building its module or eager reference failed, before any recipe]", None
    if not rules:
        return status, detail, None
    rule = next((r for r in rules if status in r.statuses), rules[0])  # the one that names this status (its bound failed)
    info = {"reason": rule.reason, "expects": rule.describe()}
    if status.is_pass:
        return Status.XPASS, f"expected to fail ({rule.describe()}: {rule.reason}) but passed", info
    return status, f"{detail} [unexpected: the xfail rule expects {rule.describe()}: {rule.reason}]", info


def lowest_sqnr_db(outputs: Sequence[Any], quantized: bool = False, message: str = "") -> float | None:
    """An item's farthest output from its reference, for an xfail rule's ``min_sqnr_db``: the lowest SQNR over its
    outputs, each against the quantized program under a ``quantized`` recipe (``quantized.sqnr_db``), else against
    eager (``sqnr_db``). None where there is no figure to bound: an output with none (a shape or dtype mismatch, an
    output a quantized recipe compares exactly or judged against fp32 alone), or where a further input set failed
    (``message``: "input set N: ...", whose figures the outputs do not hold). A record writes non-finite figures as
    strings ("inf"), which count as numbers."""
    if _FURTHER_SET.search(message):
        return None
    lowest = None
    for out in outputs:
        if not isinstance(out, Mapping):
            return None
        q = out.get("quantized")
        value = (q.get("sqnr_db") if isinstance(q, Mapping) else None) if quantized else out.get("sqnr_db")
        if isinstance(value, str) and value in ("inf", "-inf"):
            value = float(value)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
            return None
        lowest = value if lowest is None else min(lowest, value)
    return lowest


_FURTHER_SET = re.compile(r"(^|; )input set [0-9]+: ", re.M)


def held(rules: Sequence[Rule], status: Status, message: str, died_in: Stage | None = None,
         sqnr_db: float | None = None) -> tuple[Status, Rule | None]:
    """What the xfail rules that list an item make of its own status, and the rule that decided: XFAIL where a rule
    names the failure (its status, message and, for a crash, stage), XPASS where the item passed or lowered under a rule
    that expects a failure before the run (a stale rule), else the status itself (a failure no rule names stays
    unexpected). ``sqnr_db`` is the item's ``lowest_sqnr_db``, for a rule's ``min_sqnr_db``. ``benchmarks/rejudge.py``
    judges recorded results by it too."""
    if status is Status.LOWERED:  # lowered and serialized, not run: only a failure before the run is settled
        stale = next((rule for rule in rules if rule.stale_if_lowered), None)
        return (Status.XPASS, stale) if stale is not None else (status, None)
    if status.is_failure and status is not Status.ERROR:
        named = next((rule for rule in rules if rule.expects(status, message, died_in, sqnr_db)), None)  # any that names it
        if named is not None:
            return Status.XFAIL, named
    if status.is_pass and rules:
        return Status.XPASS, rules[0]
    return status, None


def triage(status: Status, control: Status | None, is_control: bool, owner: str | None = None) -> str | None:
    """Who should look first: ``flake`` (attempts disagree), ``infra`` (a crash, hang or harness/environment
    error, on any recipe), ``quantizer`` (a mismatch where the delegate matches its quantized program and only the
    quantization-quality floor failed: ``harness.judge``), ``upstream`` (fails before the backend, on the control
    recipe, or where the control fails too, other than by a crash or hang), else ``backend``. None for anything
    that is not a failure."""
    if not status.is_failure or status is Status.XPASS:
        return None
    if status is Status.FAIL_MISMATCH and owner == "quantizer":
        return "quantizer"
    if status is Status.FLAKY:
        return "flake"
    if status is Status.CRASH and owner == "backend":  # a crash the runtime explained, or the same on every attempt
        return "upstream" if is_control or control is Status.CRASH else "backend"
    if status.died or status is Status.ERROR:
        return "infra"
    if status is Status.FAIL_EXPORT or is_control:
        return "upstream"
    # the control's own crash, hang, harness error or flake says nothing about the case
    if control is not None and (control.is_failure or control is Status.XFAIL) and control.is_verdict:
        return "upstream"
    return "backend"


def reused(cached: Record, run_id: str) -> Record:
    """A cached record taken into this run: its verdict stands (the cache key covers what it depends on)."""
    rec = dict(cached)
    rec.update({"cached": True, "run_id": run_id})
    return rec  # type: ignore[return-value]


def settle_attempts(attempts: Sequence[Record]) -> Record:
    """The final record of an item run more than once: the last attempt, with every attempt listed;
    FLAKY when their statuses disagree."""
    last = dict(attempts[-1])
    last["attempts"] = [{"attempt": a.get("attempt", i + 1), "status": a["status"], "detail": a.get("detail", "")[:300]}
                        for i, a in enumerate(attempts)]
    statuses = [a["status"] for a in attempts]
    if len(set(statuses)) > 1:
        last["status"] = Status.FLAKY.value
        last["detail"] = "attempts disagree: " + ", ".join(statuses)
        last["triage"] = "flake"
    elif statuses[0] == Status.CRASH.value and len(attempts) > 1 and last.get("triage") == "infra":
        keys = {str((a.get("error") or {}).get("signature") or a.get("detail", "")) for a in attempts}
        if len(keys) == 1:  # the same crash every time: the backend's or the runtime's, not the machine's
            last["triage"] = "backend"
            last["detail"] = f"{last.get('detail', '')} (the same crash on all {len(attempts)} attempts)"[:1000]
    return last  # type: ignore[return-value]
