"""Base run vs head run: new failures, fixes, status changes, numeric drift, latency regressions,
items added or removed (torch-free). ``bti compare`` and the PR comment are built on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.results import Record, as_float, latest_by_id, status_of
from harness.status import Status


@dataclass(frozen=True)
class Thresholds:
    sqnr_drop_db: float = 3.0  # drift: min SQNR fell by more than this
    latency_ratio: float = 1.5  # regression: head median > ratio × base median …
    latency_min_ms: float = 0.05  # … and the increase is at least this much

@dataclass(frozen=True)
class Change:
    id: str
    base: str | None  # status value, None when added
    head: str | None  # status value, None when removed
    detail: str = ""
    recipe: str = ""

@dataclass
class Comparison:
    new_failures: list[Change] = field(default_factory=list)
    fixed: list[Change] = field(default_factory=list)  # a failure that now passes
    newly_expected: list[Change] = field(default_factory=list)  # a failure an xfail rule now holds: not fixed
    status_changes: list[Change] = field(default_factory=list)  # other changes (e.g. FAIL_RUN → FAIL_LOWER)
    drift: list[Change] = field(default_factory=list)
    latency: list[Change] = field(default_factory=list)
    added: list[Change] = field(default_factory=list)
    removed: list[Change] = field(default_factory=list)

    @property
    def regressed(self) -> bool:
        """What makes ``bti compare`` exit 1: new failures or numeric drift."""
        return bool(self.new_failures or self.drift)

    @property
    def changed(self) -> bool:
        return any((self.new_failures, self.fixed, self.newly_expected, self.status_changes, self.drift, self.latency,
                    self.added, self.removed))

    def counts(self) -> dict[str, int]:
        return {k: len(getattr(self, k)) for k in ("new_failures", "fixed", "newly_expected", "status_changes", "drift", "latency",
                                                    "added", "removed")}

    def as_dict(self) -> dict[str, Any]:
        return {k: [c.__dict__ for c in getattr(self, k)] for k in self.counts()}

def _min_sqnr(rec: Record) -> float | None:
    raw = [as_float(o.get("sqnr_db")) for o in rec.get("outputs") or [] if "sqnr_db" in o]
    vals = [v for v in raw if v is not None]
    return min(vals) if vals else None

def compare(base: list[Record], head: list[Record], th: Thresholds = Thresholds()) -> Comparison:
    b, h = latest_by_id(base), latest_by_id(head)
    out = Comparison()
    for item_id in sorted(set(b) | set(h)):
        rb, rh = b.get(item_id), h.get(item_id)
        if rb is None:
            assert rh is not None
            change = Change(item_id, None, rh["status"], rh.get("detail", ""), rh["recipe"])
            out.added.append(change)
            if status_of(rh).is_failure:
                out.new_failures.append(change)
            continue
        if rh is None:
            out.removed.append(Change(item_id, rb["status"], None, "", rb["recipe"]))
            continue
        sb, sh = status_of(rb), status_of(rh)
        change = Change(item_id, sb.value, sh.value, rh.get("detail", ""), rh["recipe"])
        if sh.is_failure and not sb.is_failure:
            out.new_failures.append(change)
        elif sb.is_failure and sh.is_pass:
            out.fixed.append(change)
        elif sb.is_failure and sh is Status.XFAIL:
            out.newly_expected.append(change)
        elif sb is not sh:
            out.status_changes.append(change)
        if sb.is_pass or sh.is_pass:
            _drift(rb, rh, th, out)
            _latency(rb, rh, th, out)
    return out

def _drift(rb: Record, rh: Record, th: Thresholds, out: Comparison) -> None:
    qb, qh = _min_sqnr(rb), _min_sqnr(rh)
    if qb is None or qh is None or qb == qh:
        return
    if qb == float("inf") and qh < float("inf"):
        drop = float("inf")
    else:
        drop = qb - qh
    if drop > th.sqnr_drop_db:
        out.drift.append(Change(rh["id"], rb["status"], rh["status"], f"min SQNR {qb:.1f} → {qh:.1f} dB", rh["recipe"]))

def _latency(rb: Record, rh: Record, th: Thresholds, out: Comparison) -> None:
    lb = (rb.get("latency_ms") or {}).get("median")
    lh = (rh.get("latency_ms") or {}).get("median")
    if not lb or not lh:
        return
    if lh > lb * th.latency_ratio and lh - lb >= th.latency_min_ms:
        out.latency.append(Change(rh["id"], rb["status"], rh["status"], f"median {lb:.3f} → {lh:.3f} ms ({lh / lb:.2f}×)", rh["recipe"]))
