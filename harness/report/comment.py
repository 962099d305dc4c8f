"""The sticky PR comment body (torch-free): the delta against the base first, then per-recipe pass
rates, then capped lists of new failures with their first error lines, then links. Kept under
GitHub's 65,536-character limit with a note when truncated."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from harness.errors import UserError
from harness.report import safe
from harness.report.compare import Change, Comparison
from harness.report.summary import RecipeSummary, attempts_line, by_recipe, failures, flaky, headline, triage_line
from harness.results import Record
from harness.status import Status

LIMIT = 65_536
CAP_FAILURES = 50
CAP_OTHER = 20


class CommentMode(Enum):
    """When to post: ``always``; ``changes`` (only when the delta is non-empty); ``failures``
    (only when head has unexpected failures); ``off``. An existing sticky comment is always kept
    current, so it never shows stale numbers."""

    ALWAYS = "always"
    CHANGES = "changes"
    FAILURES = "failures"
    OFF = "off"

    def wants(self, comparison: Comparison | None, head_failures: int) -> bool:
        if self is CommentMode.ALWAYS:
            return True
        if self is CommentMode.CHANGES:
            return comparison is None or comparison.changed
        if self is CommentMode.FAILURES:
            return head_failures > 0
        return False


KEY = re.compile(r"[A-Za-z0-9._-]{1,64}")


def marker(key: str) -> str:
    """The hidden first line of the sticky comment for ``key`` (a validated name, never results text)."""
    if not KEY.fullmatch(key):
        raise UserError(f"--key {key!r}: expected 1-64 of A-Z a-z 0-9 . _ -")
    return f"<!-- bti:comment:{key} -->"


@dataclass(frozen=True)
class Links:
    run_url: str | None = None
    artifact_url: str | None = None


def _esc(text: str) -> str:
    return safe.inline(text, 240)


def _change_rows(changes: list[Change], cap: int, show_detail: bool = True, hints: dict[str, str] | None = None) -> list[str]:
    rows = ["| item | base | head |" + (" first error line |" if show_detail else ""),
            "|---|---|---|" + ("---|" if show_detail else "")]
    for c in changes[:cap]:
        hint = (hints or {}).get(c.id)
        head = (c.head or "—") + (f" ({hint})" if hint else "")
        row = f"| {safe.code(c.id)} | {_esc(c.base or '—')} | {_esc(head)} |"
        rows.append(row + (f" {_esc(c.detail)} |" if show_detail else ""))
    if len(changes) > cap:
        rows.append(f"\n…and {len(changes) - cap} more (see the artifacts).")
    return rows


def render(key: str, header: dict[str, Any], records: list[Record], comparison: Comparison | None,
           links: Links = Links(), base_records: list[Record] | None = None, limit: int = LIMIT, no_base_reason: str = "") -> str:
    fails = failures(records)
    recipes = by_recipe(header, records)
    verdict = safe.inline(headline(header, records, recipes), 1200)
    title = safe.code(key) + (f" ({', '.join(safe.code(n) for n in list(recipes)[:6])})" if recipes else "")
    out = [marker(key), f"## bti {title}: {verdict}", ""]
    if fails:
        out += [f"Triage: {triage_line(records)} _(upstream: fails on the control recipe too or before the backend; "
                "backend: only this recipe; quantizer: the delegate matches its quantized program, which lost accuracy; "
                "infra: crash, hang or harness error; flake: attempts disagree)_", ""]
    hints = {r["id"]: str(r.get("triage") or "") for r in fails}
    if comparison is not None:
        c = comparison.counts()
        out += ["### Against the base", "",
                f"**{c['new_failures']}** new failure(s) · **{c['fixed']}** fixed · {c['newly_expected']} newly expected · "
                f"{c['status_changes']} other status change(s) · "
                f"{c['drift']} numeric drift · {c['latency']} latency regression(s) · {c['added']} added · {c['removed']} removed", ""]
    else:
        why = f": {safe.inline(no_base_reason, 300)}" if no_base_reason else ""
        out += [f"_No base results to compare against{why}._", ""]
    out += _rate_table(recipes, by_recipe({}, base_records) if base_records else {})
    if comparison is not None:
        sections = [("New failures", comparison.new_failures, CAP_FAILURES, True), ("Fixed", comparison.fixed, CAP_OTHER, False),
                    ("Newly expected (an xfail rule now holds them)", comparison.newly_expected, CAP_OTHER, True),
                    ("Numeric drift", comparison.drift, CAP_OTHER, True), ("Latency regressions", comparison.latency, CAP_OTHER, True),
                    ("Other status changes", comparison.status_changes, CAP_OTHER, True)]
        for title, changes, cap, detail in sections:
            if changes:
                out += [f"### {title} ({len(changes)})", "", *_change_rows(changes, cap, detail, hints), ""]
    elif fails:
        rows = [Change(r["id"], None, r["status"], r.get("detail", ""), r["recipe"]) for r in fails]
        out += [f"### Unexpected failures ({len(fails)})", "", *_change_rows(rows, CAP_FAILURES, hints=hints), ""]
    if fails:
        where = f"[artifacts]({links.artifact_url})" if links.artifact_url else "the run's output directory"
        out += [f"Reproduce a failure without bti: `bti run` writes a standalone script (torch + executorch alone) for the first "
                f"failures on ExecuTorch recipes under `repro/` in {where}; for any other, `bti repro ITEM --results results.jsonl`.", ""]
    flakes = flaky(records)
    if flakes:
        out += [f"### Flaky ({len(flakes)})", "", "Attempts disagree (FLAKY fails the run):", ""]
        out += [f"- {safe.code(r['id'])}: {_esc(attempts_line(r))}"
                for r in flakes[:CAP_OTHER]]
        out.append("")
    link_bits = []
    if links.run_url:
        link_bits.append(f"[workflow run]({links.run_url})")
    if links.artifact_url:
        link_bits.append(f"[artifacts (JSONL, JUnit, Markdown, CSV)]({links.artifact_url})")
    if link_bits:
        out += [" · ".join(link_bits), ""]
    return _fit("\n".join(out), limit, link_bits)


def _rate_table(recipes: dict[str, RecipeSummary], base_rates: dict[str, RecipeSummary]) -> list[str]:
    """Pass rate per recipe, delegated passes apart from CPU fallbacks, against the base; what verified nothing, why."""
    # a recipe lowered here for a runtime this runner lacks (LOWERED) gets a column: neither passed nor ran
    lowered = any(s.counts[Status.LOWERED] for s in recipes.values())
    extra = (" 📦 lowered, not run here |", "---:|") if lowered else ("", "")
    out = ["### Pass rate per recipe", "", f"| recipe | passed | on the delegate | CPU fallback | ran | rate | vs base |{extra[0]}",
           f"|---|---:|---:|---:|---:|---:|---:|{extra[1]}"]
    for name, s in recipes.items():
        rate = f"{s.pass_rate:.1f}%" if s.ran else "**nothing verified**"
        delta = ""
        if name in base_rates and base_rates[name].ran and s.ran:
            d = s.pass_rate - base_rates[name].pass_rate
            delta = f"{d:+.1f} pp" if abs(d) >= 0.05 else "="
        split = f"{s.delegated} | {s.fallback}" if s.delegating else "— | —"  # no partitioner: nothing to delegate
        out.append(f"| {safe.code(name)} | {s.passed} | {split} | {s.ran} | {rate} | {delta} |"
                   + (f" {s.counts[Status.LOWERED]} |" if lowered else ""))
    out.append("")
    for s in recipes.values():
        if not s.verified:
            out += [f"> {safe.code(s.name)} verified nothing: {_esc(s.unverified_reason())}", ""]
    return out


def _fit(text: str, limit: int, link_bits: list[str]) -> str:
    if len(text) <= limit:
        return text
    note = "\n\n_…comment truncated to fit GitHub's limit; the full results are in the artifacts._\n"
    tail = ("\n" + " · ".join(link_bits) + "\n") if link_bits else ""
    budget = limit - len(note) - len(tail)
    cut = text.rfind("\n", 0, budget)
    return text[: cut if cut > 0 else budget] + note + tail
