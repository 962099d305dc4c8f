"""CSV: one row per item, flat columns (stdlib csv)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from harness.results import Record, as_float

COLUMNS = (
    "id", "case", "suite", "op", "recipe", "dtype", "shape", "status", "detail", "delegated_nodes",
    "undelegated_nodes", "delegated_pct", "undelegated_ops", "pte_bytes", "delegate_bytes", "export_s", "quantize_s",
    "lower_s", "serialize_s", "load_ms", "latency_median_ms", "max_abs", "max_rel", "mae", "min_sqnr_db",
    "min_cosine", "peak_rss_mb", "duration_s", "cached", "triage", "item_peak_run_mb", "baseline_latency_ratio",
)


def _min(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return min(vals) if vals else None


def row(rec: Record) -> dict[str, object]:
    part = rec.get("partition") or {}
    stages = rec.get("stages") or {}
    outs = rec.get("outputs") or []
    axes = rec.get("axes") or {}
    return {
        "id": rec["id"], "case": rec.get("case"), "suite": rec.get("suite"), "op": rec.get("op") or "",
        "recipe": rec.get("recipe"), "dtype": axes.get("dtype"), "shape": axes.get("shape"),
        "status": rec["status"], "detail": (rec.get("detail") or "").replace("\n", " ")[:300],
        "delegated_nodes": part.get("delegated_nodes"), "undelegated_nodes": part.get("undelegated_nodes"),
        "delegated_pct": part.get("delegated_pct"),
        "undelegated_ops": ";".join(part.get("undelegated_ops") or {}),
        "pte_bytes": rec.get("pte_bytes"),
        "delegate_bytes": sum(b.get("bytes", 0) for b in rec.get("delegate_blobs") or []) if rec.get("delegate_blobs") is not None else None,
        "export_s": stages.get("export"), "quantize_s": stages.get("quantize"), "lower_s": stages.get("lower"),
        "serialize_s": stages.get("serialize"), "load_ms": rec.get("load_ms"),
        "latency_median_ms": (rec.get("latency_ms") or {}).get("median"),
        "max_abs": _max([as_float(o.get("max_abs")) for o in outs]),
        "max_rel": _max([as_float(o.get("max_rel")) for o in outs]),
        "mae": _max([as_float(o.get("mae")) for o in outs]),
        "min_sqnr_db": _min([as_float(o.get("sqnr_db")) for o in outs]),
        "min_cosine": _min([as_float(o.get("cosine")) for o in outs]),
        "peak_rss_mb": rec.get("peak_rss_mb"), "duration_s": rec.get("duration_s"), "cached": bool(rec.get("cached")),
        "triage": rec.get("triage") or "", "item_peak_run_mb": (rec.get("memory_mb") or {}).get("run"),
        "baseline_latency_ratio": (rec.get("baseline") or {}).get("latency_ratio"),
    }


def _max(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return max(vals) if vals else None


def render(records: Sequence[Record]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for rec in records:
        writer.writerow(row(rec))
    return buf.getvalue()
