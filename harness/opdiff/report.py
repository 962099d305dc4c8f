"""opdiff's results JSONL (its ``measure/jsonl_writter.py``), written from bti's results, so opdiff's own
``measure/report_*.py`` scripts (support matrix, latency CDF, diff report) read a bti run unchanged.

One ``meta`` line, then one ``item`` per case (and axes, when a case ran on several): ``baseline`` and, per recipe
(opdiff's "backend"), ``res`` (one entry per side: status, err, ms), ``times_all`` (each timed run) and ``diff_all``
(opdiff's diff: mse, max_abs, mean_abs, or a code). bti judges every item against eager PyTorch on the CPU (or the
run's ``--baseline`` recipe): that reference is the file's baseline, named ``eager`` when no recipe played it.

Statuses are opdiff's: a program that ran is ``OK`` whatever its numbers (opdiff judges none; the difference is in
``diff_all``); export, quantize, lower and serialize failures are ``EXPORT_FAIL``; load and run failures
``INFER_FAIL``; a timeout or a crash ``TIMED_ERROR``; SKIP, UNAVAILABLE, LOWERED and BLOCKED ``SKIPPED``; an error in
bti itself ``ERROR``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.results import Record, as_float, lowered_xpass
from harness.status import Status

ENV_PACKAGES = ("torch", "torchvision", "torchaudio", "coremltools", "onnxruntime", "executorch")
# opdiff's status for each of bti's, every status named once (tests/test_docs.py checks the table is whole): OK when the
# program ran (its outputs compared, whatever the verdict), EXPORT_FAIL before a runtime saw it, INFER_FAIL in the
# runtime, TIMED_ERROR for a hang or a crash, SKIPPED when it never ran
OPDIFF_STATUS: dict[Status, str] = {
    Status.PASS: "OK", Status.PASS_UNDELEGATED: "OK", Status.FAIL_MISMATCH: "OK", Status.FLAKY: "OK", Status.XPASS: "OK",
    Status.FAIL_EXPORT: "EXPORT_FAIL", Status.FAIL_QUANTIZE: "EXPORT_FAIL", Status.FAIL_LOWER: "EXPORT_FAIL",
    Status.FAIL_SERIALIZE: "EXPORT_FAIL", Status.FAIL_LOAD: "INFER_FAIL", Status.FAIL_RUN: "INFER_FAIL",
    Status.TIMEOUT: "TIMED_ERROR", Status.CRASH: "TIMED_ERROR", Status.ERROR: "ERROR",
    Status.FAIL_DELEGATION: "SKIPPED", Status.SKIP: "SKIPPED", Status.LOWERED: "SKIPPED", Status.UNAVAILABLE: "SKIPPED",
    Status.BLOCKED: "SKIPPED", Status.XFAIL: "SKIPPED",  # an XFAIL is mapped as the failure it was expected to have
}


def opdiff_status(rec: Record) -> str:
    status = rec["status"]
    if status == Status.XFAIL:  # the failure it was expected to have
        status = (rec.get("xfail") or {}).get("status") or Status.FAIL_RUN
    elif lowered_xpass(rec):  # a stale rule on a program not run here: it never ran
        status = Status.LOWERED
    try:
        return OPDIFF_STATUS[Status(status)]
    except ValueError:  # a status this bti does not know (a newer writer's)
        return "SKIPPED"


def _ms(rec: Record) -> float | None:
    return as_float((rec.get("latency_ms") or {}).get("median"))


def _aggregate(rec: Record) -> dict[str, Any] | None:
    """opdiff's diff over every element of every output, from bti's per-output figures."""
    outs = rec.get("outputs") or []
    if not outs or any("mse" not in o for o in outs):
        return None
    total = mse = mean = 0.0
    worst = 0.0
    for o in outs:
        n = 1
        for s in o.get("shape") or []:
            n *= int(s)
        n = max(n, 1)
        total += n
        mse += float(as_float(o["mse"]) or 0.0) * n
        mean += float(as_float(o["mae"]) or 0.0) * n
        worst = max(worst, float(as_float(o["max_abs"]) or 0.0))
    return {"ok": True, "mse": mse / total, "max_abs": worst, "mean_abs": mean / total}


def _diff_all(rec: Record) -> list[dict[str, Any]] | None:
    base = rec.get("baseline") or {}
    if base.get("judged") is False:  # an opdiff pair: a against b
        return [base["diff"]] if base.get("diff") else None
    if rec.get("sampled_inputs"):
        return [dict(d) for d in rec["sampled_inputs"]]
    one = _aggregate(rec)
    return [one] if one else None


def _res(rec: Record) -> dict[str, Any]:
    status = opdiff_status(rec)
    err = None if status == "OK" else (rec.get("detail") or None)
    return {"status": status, "err": err, "ms": _ms(rec) if status == "OK" else None}


def _op(rec: Record) -> str:
    return str(rec.get("op") or rec.get("case") or "")


def _cases(rec: Record, yaml: str) -> list[dict[str, Any]]:
    base = rec.get("baseline") or {}
    if "pair_b" in base or "pair" in (rec.get("tags") or []):  # opdiff's sides: <pair id>__a and __b
        b_id = str(base.get("pair_b") or f"{rec['case']}__b")
        return [{"yaml": yaml, "id": b_id[:-1] + "a", "op": _op(rec)},
                {"yaml": yaml, "id": b_id, "op": str(base.get("b_op") or _op(rec))}]
    return [{"yaml": yaml, "id": rec["case"], "op": _op(rec)}]


def _backend(rec: Record) -> dict[str, Any]:
    base = rec.get("baseline") or {}
    pair = "pair_b" in base or rec.get("detail", "").startswith("pair b (")
    res = [_res(rec)]
    times: list[Any] | None = [rec["times_ms"]] if rec.get("times_ms") else None
    if pair:
        if rec.get("detail", "").startswith("pair b ("):  # b failed: bti runs b first, and a not after it
            res = [{"status": "SKIPPED", "err": "not run: side b failed first", "ms": None}, _res(rec)]
            times = None
        else:
            b_ms = as_float(base.get("b_latency_ms"))
            res.append({"status": opdiff_status({"status": base.get("status", "PASS")}),
                        "err": None, "ms": b_ms})
            times = [rec.get("times_ms"), base.get("b_times_ms")] if rec.get("times_ms") else None
    return {"backend": rec["recipe"], "res": res, "times_all": times,
            "diff_all": _diff_all(rec) if res[0]["status"] == "OK" else None}


def render(header: dict[str, Any], records: Sequence[Record]) -> str:
    """opdiff's run: a meta line, then an item per case (× axes, when a case has several)."""
    packages = dict(header.get("packages") or {})
    versions = dict(header.get("versions") or {})
    env: dict[str, Any] = {"python": versions.get("python")}
    env.update({p: packages.get(p) or versions.get(p) for p in ENV_PACKAGES})
    env.update(torch_cuda=versions.get("torch_cuda"), torch_mps_available=None)
    baseline_recipe = header.get("baseline")
    suites = [str(s) for s in header.get("suites") or []]
    by_stem = {Path(s).stem: s for s in suites}
    repeats = sorted({int((r.get("latency_ms") or {}).get("repeats") or 0) for r in records} - {0})
    sampled = max((len(r.get("sampled_inputs") or []) for r in records), default=0) or 1
    meta = {"format_name": "opdiff_run", "format_version": 1, "created_at": header.get("created"), "env": env,
            "extra": {"yaml": suites[0] if len(suites) == 1 else suites,
                      "params": {"seed": _seed(header), "repeats": repeats[-1] if repeats else None,
                                 "num_sampled_inputs": sampled, "mode": 2},
                      "bti": {"run_id": header.get("run_id"), "recipes": sorted(header.get("recipes") or []),
                              "baseline": baseline_recipe or "eager"}}}
    lines = [json.dumps({"type": "meta", "meta": meta})]
    groups: dict[str, list[int]] = defaultdict(list)  # positions, not records: a pass holds one record at a time
    axes_of: dict[str, set[str]] = defaultdict(set)
    for i, rec in enumerate(records):
        key = f"{rec['case']}{_axes(rec)}"
        groups[key].append(i)
        axes_of[rec["case"]].add(_axes(rec))
    for key, where in groups.items():
        recs = [records[i] for i in where]
        first = recs[0]
        yaml = by_stem.get(str(first.get("suite")), str(first.get("suite") or ""))
        item_id = first["case"] if len(axes_of[first["case"]]) == 1 else key
        base_rec = next((r for r in recs if r["recipe"] == baseline_recipe), None)
        pair = any("pair_b" in (r.get("baseline") or {}) or "pair" in (r.get("tags") or []) for r in recs)
        if base_rec is not None and not pair:
            baseline: dict[str, Any] | None = {"backend": baseline_recipe, **_res(base_rec),
                                               "times_all": [base_rec["times_ms"]] if base_rec.get("times_ms") else None}
        elif pair:
            baseline = None  # opdiff compares a pair's sides, never a baseline
        else:
            baseline = {"backend": "eager", "status": "OK", "err": None, "ms": None, "times_all": None}
        order = {name: i for i, name in enumerate(header.get("recipes") or [])}
        backends = [_backend(r) for r in sorted(recs, key=lambda r: order.get(r["recipe"], len(order))) if r is not base_rec or pair]
        source = next((r for r in recs if "pair_b" in (r.get("baseline") or {})), first)
        lines.append(json.dumps({"type": "item", "id": item_id, "test_type": "pair" if pair else "single",
                                 "cases": _cases(source, yaml), "baseline": baseline, "backends": backends},
                                default=str))
    return "\n".join(lines) + "\n"


def _axes(rec: Record) -> str:
    axes = rec.get("axes") or {}
    return f"[{axes.get('dtype')},{axes.get('shape')}]"


def _seed(header: dict[str, Any]) -> int:
    argv = [str(a) for a in header.get("argv") or []]
    for i, arg in enumerate(argv):
        if arg == "--seed" and i + 1 < len(argv):
            return int(argv[i + 1]) if argv[i + 1].lstrip("-").isdigit() else 0
        if arg.startswith("--seed="):
            value = arg.split("=", 1)[1]
            return int(value) if value.lstrip("-").isdigit() else 0
    return 0


__all__ = ["opdiff_status", "render"]
