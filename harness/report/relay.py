"""The PyTorch cross-repo CI relay's callback (RFC-0050), built from a results file (torch-free).

The relay asks each downstream CI leg for: a status (``in_progress`` or ``completed``) and a conclusion;
test counts ``{passed, failed, skipped}``; a job name unique per matrix leg; an artifact URL; and the
failed tests, at most 1,000 entries, each message at most 1 KB and trace at most 4 KB (UTF-8 bytes).
``payload`` enforces those limits by truncating (and says how many entries were left out);
``validate`` checks a payload against them.
"""

from __future__ import annotations

from typing import Any

from harness.report.summary import unverified
from harness.results import Header, Record, status_of

MAX_FAILED = 1000
MAX_MESSAGE = 1024
MAX_TRACE = 4096
STATUSES = ("in_progress", "completed")


def _cut(text: object, limit: int) -> str:
    """At most ``limit`` UTF-8 bytes, never splitting a character."""
    data = str(text or "").encode("utf-8", "replace")
    return data[:limit].decode("utf-8", "ignore") if len(data) > limit else data.decode("utf-8")


def payload(header: Header, records: list[Record], *, job_name: str, artifact_url: str | None,
            status: str = "completed", allow_unverified: bool = False) -> dict[str, Any]:
    if status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
    failed = [r for r in records if status_of(r).is_failure]
    skipped = sum(1 for r in records if status_of(r).did_not_run)
    up = dict(header.get("upstream") or {})
    out: dict[str, Any] = {
        "status": status,
        # a leg that verified nothing (every item unavailable, skipped, lowered or blocked) is never a success, unless allowed
        "conclusion": None if status == "in_progress" else
        ("failure" if failed or (not allow_unverified and unverified(dict(header), records)) else "success"),
        "job_name": job_name,
        "artifact_url": artifact_url,
        "test_counts": {"passed": len(records) - len(failed) - skipped, "failed": len(failed), "skipped": skipped},
        "failed_tests": [
            {"name": r["id"], "status": r["status"],
             "message": _cut(r.get("detail") or (r.get("error") or {}).get("message"), MAX_MESSAGE),
             "trace": _cut((r.get("error") or {}).get("trace"), MAX_TRACE)}
            for r in failed[:MAX_FAILED]
        ],
        "failed_tests_omitted": max(0, len(failed) - MAX_FAILED),
        "head_sha": up.get("sha"),
        "repo": up.get("repo"),
        "pr": up.get("pr"),
    }
    validate(out)
    return out


def validate(p: dict[str, Any]) -> None:
    """Raise ValueError naming the first field beyond the relay's limits."""
    if p.get("status") not in STATUSES:
        raise ValueError(f"status: expected one of {', '.join(STATUSES)}")
    if p["status"] == "completed" and p.get("conclusion") not in ("success", "failure"):
        raise ValueError("conclusion: a completed callback needs success or failure")
    if not p.get("job_name"):
        raise ValueError("job_name: must be set, and unique per matrix leg")
    if set(p.get("test_counts") or {}) != {"passed", "failed", "skipped"}:
        raise ValueError("test_counts: expected passed, failed, skipped")
    tests = p.get("failed_tests") or []
    if len(tests) > MAX_FAILED:
        raise ValueError(f"failed_tests: {len(tests)} entries, at most {MAX_FAILED}")
    for i, t in enumerate(tests):
        for field, limit in (("message", MAX_MESSAGE), ("trace", MAX_TRACE)):
            if len(str(t.get(field) or "").encode()) > limit:
                raise ValueError(f"failed_tests[{i}].{field}: more than {limit} bytes")
