"""Closed sets: work-item status and pipeline stage.

No code compares status strings, and nothing outside this module lists statuses: use the predicates
(``is_pass``, ``is_failure``, ``did_not_run``, ``died``) and the display ``group`` on the members.

Policy: FLAKY (an item whose attempts under ``--rerun-failures`` disagree) fails the run, like any
other failure: a backend whose answer changes between runs of the same program has a bug. It is
shown apart from the other failures in every report, so it is never mistaken for a stable one.
"""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    EXPORT = "export"
    QUANTIZE = "quantize"
    LOWER = "lower"
    SERIALIZE = "serialize"
    LOAD = "load"
    RUN = "run"
    COMPARE = "compare"

    @property
    def failure(self) -> Status:
        return _STAGE_FAILURE[self]


class Status(StrEnum):
    """Outcome of one work item. ``value`` is what the JSONL stores."""

    PASS = "PASS"
    PASS_UNDELEGATED = "PASS_UNDELEGATED"
    SKIP = "SKIP"
    LOWERED = "LOWERED"
    UNAVAILABLE = "UNAVAILABLE"
    BLOCKED = "BLOCKED"
    XFAIL = "XFAIL"
    XPASS = "XPASS"
    FAIL_EXPORT = "FAIL_EXPORT"
    FAIL_QUANTIZE = "FAIL_QUANTIZE"
    FAIL_LOWER = "FAIL_LOWER"
    FAIL_SERIALIZE = "FAIL_SERIALIZE"
    FAIL_LOAD = "FAIL_LOAD"
    FAIL_RUN = "FAIL_RUN"
    FAIL_MISMATCH = "FAIL_MISMATCH"
    FAIL_DELEGATION = "FAIL_DELEGATION"
    FLAKY = "FLAKY"
    TIMEOUT = "TIMEOUT"
    CRASH = "CRASH"
    ERROR = "ERROR"

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def is_pass(self) -> bool:
        return self in (Status.PASS, Status.PASS_UNDELEGATED)

    @property
    def is_failure(self) -> bool:
        """An unexpected outcome: makes ``bti run`` exit 1. XPASS counts (strict xfail)."""
        return self not in _OK

    @property
    def did_not_run(self) -> bool:
        """Never run here: skipped, its backend unavailable, blocked by its baseline's failure, or lowered and
        serialized for a runtime this machine lacks (LOWERED: neither a pass nor a failure)."""
        return self in (Status.SKIP, Status.LOWERED, Status.UNAVAILABLE, Status.BLOCKED)

    @property
    def attempted(self) -> bool:
        """Its backend was tried: it ran, failed, or was lowered for a runtime this machine lacks (LOWERED: its lowering
        can meet a rule, and costs time); not SKIP, UNAVAILABLE or BLOCKED, which were never tried."""
        return self not in (Status.SKIP, Status.UNAVAILABLE, Status.BLOCKED)

    @property
    def failed_before_run(self) -> bool:
        """Failed at a stage before its program ran: export, quantize, lower, serialize or load."""
        return self in _BEFORE_RUN

    @property
    def found_by_lowering(self) -> bool:
        """Failed at export, quantize, lower or serialize, or the delegation check: what a LOWERED item (lowered,
        serialized and its partition checked, not run here) has passed."""
        return (self in _BEFORE_RUN and self is not Status.FAIL_LOAD) or self is Status.FAIL_DELEGATION

    @property
    def died(self) -> bool:
        """The process died or hung (CRASH, TIMEOUT): the item's own code may be fine (triage: infra, unless it
        repeats), and the failure has no stage of its own, so the record says the stage it came in (``died_in``) and an
        xfail rule may name it (``stage:``)."""
        return self in (Status.CRASH, Status.TIMEOUT)

    @property
    def is_verdict(self) -> bool:
        """An answer about the program itself, stable enough to cache and to triage by: not a crash, a hang, a bti
        error or a flake. LOWERED is none either: its program was never run, and runs where the runtime appears."""
        return self not in (Status.TIMEOUT, Status.CRASH, Status.ERROR, Status.FLAKY, Status.LOWERED)

    @property
    def reruns(self) -> bool:
        """A failure ``--rerun-failures`` runs again: any but a bti error or an item already settled as FLAKY."""
        return self.is_failure and self not in (Status.ERROR, Status.FLAKY)

    @property
    def expectable(self) -> bool:
        """A failure an xfail rule may name (``status:``): the program's own, not XPASS, a bti error or a flake."""
        return self.reruns and self is not Status.XPASS

    @property
    def group(self) -> Group:
        """The display group every report uses (portal filters, dashboard cells, tables, history)."""
        if self.is_failure:
            return Group.FAILING
        if self is Status.PASS_UNDELEGATED:
            return Group.UNDELEGATED
        if self is Status.PASS:
            return Group.PASS
        if self is Status.XFAIL:
            return Group.XFAIL
        if self is Status.LOWERED:
            return Group.LOWERED
        return Group.SKIPPED


class Group(StrEnum):
    """A status's display group. ``value`` is the portal's filter name; the rest is how each report draws it."""

    PASS = "pass"
    UNDELEGATED = "undelegated"
    XFAIL = "xfail"
    LOWERED = "lowered"
    SKIPPED = "skipped"
    FAILING = "failing"

    @property
    def symbol(self) -> str:
        """Markdown tables: ✅ delegated pass, 🟡 undelegated pass, ❌, ``xfail``, 📦 lowered (not run here), — not run."""
        return {Group.PASS: "✅", Group.UNDELEGATED: "🟡", Group.XFAIL: "xfail", Group.FAILING: "❌",
                Group.LOWERED: "📦"}.get(self, "—")

    @property
    def css(self) -> str:
        """The dashboard's cell class."""
        return {Group.PASS: "pass", Group.UNDELEGATED: "undel", Group.XFAIL: "xfail", Group.LOWERED: "lowered",
                Group.SKIPPED: "skip"}.get(self, "fail")

    @property
    def outcome(self) -> str:
        """History's three-way view: ``pass``, ``fail`` or ``other`` (expected failures and items that did not run)."""
        return {Group.PASS: "pass", Group.UNDELEGATED: "pass", Group.FAILING: "fail"}.get(self, "other")


# BLOCKED is not a failure of its own: the baseline's failure, recorded on the baseline's item, is.
# the failures of a program on its device (an expected failure of the device, e.g. OpInfo's expectedFailure)
DEVICE_FAILURES = frozenset({Status.FAIL_LOWER, Status.FAIL_LOAD, Status.FAIL_RUN, Status.FAIL_MISMATCH})
_OK = frozenset({Status.PASS, Status.PASS_UNDELEGATED, Status.SKIP, Status.LOWERED, Status.UNAVAILABLE, Status.XFAIL,
                 Status.BLOCKED})

_LABELS = {
    Status.PASS: "pass",
    Status.PASS_UNDELEGATED: "pass (not delegated)",
    Status.SKIP: "skipped",
    Status.LOWERED: "lowered and serialized, not run: no runtime here",
    Status.UNAVAILABLE: "backend unavailable",
    Status.BLOCKED: "not compared: the baseline gave no outputs",
    Status.XFAIL: "expected failure",
    Status.XPASS: "unexpected pass",
    Status.FAIL_EXPORT: "model/export failed (not the backend)",
    Status.FAIL_QUANTIZE: "quantization failed",
    Status.FAIL_LOWER: "lowering/partitioning failed",
    Status.FAIL_SERIALIZE: "serialization failed",
    Status.FAIL_LOAD: "runtime load failed",
    Status.FAIL_RUN: "runtime execution failed",
    Status.FAIL_MISMATCH: "output mismatch",
    Status.FAIL_DELEGATION: "expected delegation missing",
    Status.FLAKY: "flaky (attempts disagree)",
    Status.TIMEOUT: "timed out",
    Status.CRASH: "worker crashed",
    Status.ERROR: "harness error",
}

_STAGE_FAILURE = {
    Stage.EXPORT: Status.FAIL_EXPORT,
    Stage.QUANTIZE: Status.FAIL_QUANTIZE,
    Stage.LOWER: Status.FAIL_LOWER,
    Stage.SERIALIZE: Status.FAIL_SERIALIZE,
    Stage.LOAD: Status.FAIL_LOAD,
    Stage.RUN: Status.FAIL_RUN,
    Stage.COMPARE: Status.FAIL_MISMATCH,
}
_BEFORE_RUN = frozenset(_STAGE_FAILURE[s] for s in tuple(Stage)[:tuple(Stage).index(Stage.RUN)])
