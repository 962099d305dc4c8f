"""Markdown summary for ``$GITHUB_STEP_SUMMARY`` (kept under 1 MiB)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, cast

from harness.report import safe
from harness.report.summary import (
    RecipeSummary,
    attempts_line,
    baseline_latency,
    blocking_ops,
    by_recipe,
    failures,
    flaky,
    fmt_num,
    headline,
    root_causes,
    triage_counts,
    worst_sqnr,
)
from harness.results import Record, status_of
from harness.status import Status

LIMIT_BYTES = 1024 * 1024
_FAIL_ORDER = [s for s in Status if s.is_failure]


_esc = safe.inline


def header_lines(header: dict[str, Any]) -> list[str]:
    v = header.get("versions") or {}
    bits = [f"torch {v.get('torch', '?')}", f"executorch {v.get('executorch', '?')}", f"bti {v.get('bti', '?')}"]
    up = header.get("upstream") or {}
    if up.get("repo"):
        ref = f"{up['repo']}@{str(up.get('sha', ''))[:12]}" + (f" PR #{up['pr']}" if up.get("pr") else "")
        bits.append(f"upstream {ref}")
    if header.get("shard"):
        bits.append(f"shard {header['shard']}")
    return [f"<sub>run {safe.code(header.get('run_id', '?'))} · {_esc(' · '.join(map(str, bits)))}</sub>", ""]


def recipe_table(header: dict[str, Any], records: Sequence[Record], summaries: dict[str, RecipeSummary] | None = None) -> list[str]:
    not_run = [st for st in Status if st.did_not_run]  # skip, lowered (not run here), unavailable, blocked
    lines = ["| recipe | pass | on the delegate | CPU fallback | fail | xfail | " + " | ".join(st.value.lower() for st in not_run)
             + " | pass rate |", "|---|" + "---:|" * (6 + len(not_run))]
    summaries = by_recipe(header, records) if summaries is None else summaries
    for name, s in summaries.items():
        rate = f"{s.pass_rate:.1f}%" if s.ran else "**nothing verified**"
        counts = " | ".join(str(s.counts[st]) for st in not_run)
        split = f"{s.delegated} | {s.fallback}" if s.delegating else "— | —"  # no partitioner: nothing to delegate
        lines.append(f"| {safe.code(name)} | {s.passed} | {split} | {s.failed} | "
                     f"{s.counts[Status.XFAIL]} | {counts} | {rate} |")
    unavailable = [(n, s.unavailable) for n, s in summaries.items() if s.unavailable]
    for name, why in unavailable:
        lines.append(f"\n> {safe.code(name)} is unavailable here: {_esc(why or '')}")
    lowered: dict[str, list[Record]] = {}
    for rec in records:
        if status_of(rec) is Status.LOWERED:
            lowered.setdefault(rec["recipe"], []).append(rec)
    for name, recs in lowered.items():  # measured up to the runtime it needs, and said apart from a pass or a failure
        lines.append(f"\n> {safe.code(name)}: {len(recs)} item(s) lowered and serialized, not run here: "
                     f"{_esc((recs[0].get('detail') or '')[:300])}")
    return lines


def _slim(records: Iterable[Record]) -> list[Record]:
    """One pass over the records, keeping only what the sections read (the rest, a trace or the stages, stays in
    the JSONL): they then make their passes over these, not over the file's lines again. At 134,000 records: one
    parse instead of ten, ~0.2 GB held."""
    out: list[Record] = []
    for rec in records:
        slim: dict[str, Any] = {k: rec[k] for k in ("id", "recipe", "status", "detail", "triage", "attempts", "accuracy")
                                if k in rec}
        if isinstance(err := rec.get("error"), dict) and err.get("signature"):
            slim["error"] = {"signature": err["signature"]}  # root_cause
        if isinstance(part := rec.get("partition"), dict):  # by_recipe, blocking_ops
            slim["partition"] = {k: part[k] for k in ("partitioned", "undelegated_ops") if k in part}
        if isinstance(base := rec.get("baseline"), dict) and "latency_ratio" in base:
            slim["baseline"] = {"latency_ratio": base["latency_ratio"]}
        if isinstance(outs := rec.get("outputs"), list):  # worst_sqnr
            slim["outputs"] = [{k: o[k] for k in ("sqnr_db", "max_abs", "cosine") if k in o} for o in outs if isinstance(o, dict)]
        out.append(cast(Record, slim))
    return out


def render(header: dict[str, Any], records: Sequence[Record], limit: int = LIMIT_BYTES) -> str:
    records = _slim(records)
    total = len(records)
    fails = failures(records)
    summaries = by_recipe(header, records)
    verdict = safe.inline(headline(header, records, summaries), 1200)
    out = [f"# bti results: {verdict}", "", *header_lines(header), f"{total} items.", "", "## Pass rate per recipe", "",
           *recipe_table(header, records, summaries), ""]
    counts: dict[Status, Counter[str]] = {}
    for rec in fails:
        counts.setdefault(status_of(rec), Counter())[rec["recipe"]] += 1
    if counts:
        recipes = sorted({r["recipe"] for r in fails})
        out += ["## Failures by status", "", "| status | meaning | " + " | ".join(safe.code(r) for r in recipes) + " |",
                "|---|---|" + "---:|" * len(recipes)]
        for st in _FAIL_ORDER:
            if st in counts:
                out.append(f"| {st.value} | {st.label} | " + " | ".join(str(counts[st][r]) for r in recipes) + " |")
        out.append("")
        out += ["## Triage (who should look first)", "",
                "_upstream: fails on the control recipe too, or before the backend; backend: only this recipe; "
                "quantizer: the delegate matches its quantized program, which lost accuracy against fp32; "
                "infra: a crash, hang or harness error; flake: attempts disagree._", "",
                "| triage | " + " | ".join(safe.code(r) for r in recipes) + " |", "|---|" + "---:|" * len(recipes)]
        for hint, per in triage_counts(fails).items():
            out.append(f"| {hint} | " + " | ".join(str(per[r]) for r in recipes) + " |")
        out.append("")
        out += _root_cause_table(fails)
    flakes = flaky(records)
    if flakes:
        out += [f"## Flaky items ({len(flakes)})", "", "_Their attempts disagree; FLAKY fails the run._", "",
                "| item | attempts |", "|---|---|"]
        out += [f"| {safe.code(r['id'])} | {_esc(attempts_line(r))} |"
                for r in flakes[:50]]
        out.append("")
    ratios = baseline_latency(records)
    if ratios:
        base = safe.code(header.get("baseline") or "?")
        out += [f"## Latency against the baseline {base}", "",
                "_Per item: this recipe's median latency over the baseline's on the same case; < 1 is faster._", "",
                "| recipe | items | median ratio | p90 ratio |", "|---|---:|---:|---:|"]
        out += [f"| {safe.code(name)} | {n} | {med:.3g} | {p90:.3g} |" for name, (n, med, p90) in ratios.items()]
        out.append("")
    out += model_accuracy(records)
    blockers = blocking_ops(records)[:25]
    if blockers:
        out += ["## Undelegated ops (ranked by items they block)", "", "| op | items | recipes |", "|---|---:|---|"]
        out += [f"| {safe.code(op)} | {n} | {_esc(', '.join(rs))} |" for op, n, rs in blockers]
        out.append("")
    worst = worst_sqnr([r for r in records if not status_of(r).did_not_run])
    if worst:
        out += ["## Worst numerics (lowest SQNR)", "", "| item | status | SQNR dB | max_abs | cosine |", "|---|---|---:|---:|---:|"]
        for sq, rec in worst:
            o = min(rec.get("outputs") or [{}], key=lambda x: float(str(x.get("sqnr_db", "inf"))))
            out.append(f"| {safe.code(rec['id'])} | {status_of(rec).value} | {fmt_num(sq)} | {fmt_num(o.get('max_abs'))} | {fmt_num(o.get('cosine'), 6)} |")
        out.append("")
    text = "\n".join(out) + "\n"
    if fails:
        text += _failure_list(fails, limit - len(text.encode()) - 200)
    return text


def _root_cause_table(fails: list[Record], limit: int = 25) -> list[str]:
    """One row per root cause (the innermost exception and where it was raised, a crash's fatal line, a mismatch's
    shape), the largest first: one upstream bug is one row across ops and recipes."""
    groups = root_causes(fails)
    out = ["## Root causes (one bug, one row)", "",
           "_The innermost exception and where it was raised, or a crash's fatal line from the worker's own output; "
           "numbers blanked. Each failure's full chain is in its record (`error.trace`, `crash`)._", "",
           "| root cause | items | recipes | statuses | e.g. |", "|---|---:|---|---|---|"]
    for key, recs in groups[:limit]:
        recipes = sorted({r["recipe"] for r in recs})
        statuses = sorted({r["status"] for r in recs})
        out.append(f"| {safe.code(key, 300)} | {len(recs)} | {_esc(', '.join(recipes[:6]) + (' …' if len(recipes) > 6 else ''))} "
                   f"| {_esc(', '.join(statuses))} | {safe.code(recs[0]['id'], 120)} |")
    if len(groups) > limit:
        out.append(f"\n_{len(groups) - limit} more root cause(s), {sum(len(r) for _, r in groups[limit:])} failure(s): see results.jsonl._")
    out.append("")
    return out


def model_accuracy(records: Sequence[Record], limit: int = 40) -> list[str]:
    """The model-level checks: which accuracy rule passed, top-1 / next-token agreement, runs twice identically."""
    rows = [r for r in records if isinstance(r.get("accuracy"), dict) and r["accuracy"]]
    if not rows:
        return []
    out = ["## Model accuracy", "",
           "_rule: dynamo's benchmark rule (allclose, else RMSE against float64, or cosine >= 0.99 where the model cannot "
           "run in float64) or the recipe's tolerances; agreement: "
           "top-1 (classifiers) or next-token (LMs) against the reference; deterministic: two runs on the device gave identical outputs._", "",
           "| item | status | rule | agreement | deterministic |", "|---|---|---|---:|---|"]
    for rec in sorted(rows, key=lambda r: (not status_of(r).is_failure, r["id"]))[:limit]:
        acc = rec["accuracy"]
        agree = acc.get("top1_agreement", acc.get("next_token_agreement"))
        d = acc.get("deterministic")
        det = "yes" if d is True else "**no**" if d is False else "not checked" if acc.get("deterministic_unchecked") else "—"
        out.append(f"| {safe.code(rec['id'])} | {status_of(rec).value} | {_esc(acc.get('rule', '—'))} | {fmt_num(agree, 4)} | {det} |")
    if len(rows) > limit:
        out.append(f"\n_…and {len(rows) - limit} more (failures first)._")
    out.append("")
    return out


def _failure_list(fails: list[Record], budget: int) -> str:
    lines = ["## Unexpected failures", "", "| item | status | triage | first error line |", "|---|---|---|---|"]
    used = sum(len(line) + 1 for line in lines)
    shown = 0
    for rec in fails:
        line = (f"| {safe.code(rec['id'])} | {status_of(rec).value} | {_esc(rec.get('triage') or '')} | "
                f"{_esc((rec.get('detail') or '')[:300])} |")
        if used + len(line.encode()) + 1 > budget:
            break
        lines.append(line)
        used += len(line.encode()) + 1
        shown += 1
    if shown < len(fails):
        lines.append(f"\n_…and {len(fails) - shown} more; see the JUnit/CSV reports for all of them._")
    return "\n".join(lines) + "\n"
