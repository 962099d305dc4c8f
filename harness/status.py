"""Closed sets: work-item status and pipeline stage.

No code compares status strings: use the predicates on the members.

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
    def is_backend_failure(self) -> bool:
        """The backend (not the model, not the harness) is at fault."""
        return self.is_failure and self not in (Status.FAIL_EXPORT, Status.ERROR, Status.XPASS)

    @property
    def is_infra(self) -> bool:
        """The process died or hung: the item's own code may be fine (triage: infra, unless it repeats)."""
        return self in (Status.CRASH, Status.TIMEOUT)

    @property
    def emoji(self) -> str:
        if self.is_pass:
            return "✅"
        if self in (Status.SKIP, Status.UNAVAILABLE, Status.XFAIL, Status.BLOCKED):
            return "⚪"
        return "❌"


# BLOCKED is not a failure of its own: the baseline's failure, recorded on the baseline's item, is.
_OK = frozenset({Status.PASS, Status.PASS_UNDELEGATED, Status.SKIP, Status.UNAVAILABLE, Status.XFAIL, Status.BLOCKED})

_LABELS = {
    Status.PASS: "pass",
    Status.PASS_UNDELEGATED: "pass (not delegated)",
    Status.SKIP: "skipped",
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
