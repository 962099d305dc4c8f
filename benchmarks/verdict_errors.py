"""The error distributions behind the judge's budgets (harness/judge.py), per recipe, from a results file.

    .venv/bin/bti run -s ops -r xnnpack-int8-static-per-channel -r xnnpack-int8-static-per-tensor \\
        -r xnnpack-int8-dynamic-per-channel -r arm-tosa-int -r openvino-int8 -o out-int8
    .venv/bin/python benchmarks/verdict_errors.py out-int8/results.jsonl

Quantized recipes (outputs against the quantized program): for outputs with a dequantize scale, the error in steps
and the fitted systematic part in steps; for outputs without one, max_abs and |gain - 1|; and the quantized
program's SQNR against fp32 (the quantizer's accuracy; its low end: min / p1 / p10 / p50). Float recipes (outputs against fp64): the ratio of the
output's error to eager's own (the noise floor) and |gain - 1|. Passing items only (PASS, PASS_UNDELEGATED): what a
correct backend does, which the budgets must hold with a margin. Percentiles p50 / p90 / p99 / max.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from harness.results import as_float, read_latest, status_of


def _pct(values: list[float], at: tuple[int, ...] = (50, 90, 99, 100)) -> str:
    vals = [v for v in values if v is not None and np.isfinite(v)]
    if not vals:
        return "—"
    return " / ".join(f"{x:.3g}" for x in np.percentile(vals, at))


def main(path: str) -> None:
    _, records = read_latest(Path(path))
    quant: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    flt: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        if not status_of(rec).is_pass:
            continue
        for out in rec.get("outputs") or []:
            q, f = out.get("quantized"), out.get("fp64")
            if isinstance(q, dict) and q:  # an integer output has no figures of its own
                d = quant[rec["recipe"]]
                if q.get("scale"):
                    d["steps"].append(as_float(q.get("steps")))
                    d["systematic"].append(as_float(q.get("systematic_steps")))
                else:
                    d["float_max_abs"].append(as_float(q.get("max_abs")))
                    if q.get("gain") is not None:
                        d["float_gain"].append(abs(float(as_float(q["gain"]) or 0.0) - 1.0))
                sqnr = as_float((out.get("fp32") or {}).get("program_sqnr_db"))
                if sqnr is not None:
                    d["sqnr"].append(sqnr)
            elif isinstance(f, dict):
                d = flt[rec["recipe"]]
                d["ratio"].append(as_float(f.get("ratio")))
                d["gain"].append(abs(float(as_float(f.get("gain")) or 1.0) - 1.0))
                d["noise"].append(as_float(f.get("noise_max_abs")))
    if quant:
        print("| recipe | quantized outputs | error, steps | systematic, steps | float outputs | max_abs | gain - 1 | "
              "program SQNR vs fp32, dB (min / p1 / p10 / p50) |")
        print("|---|---:|---|---|---:|---|---|---|")
        for name, d in sorted(quant.items()):
            print(f"| `{name}` | {len(d['steps'])} | {_pct(d['steps'])} | {_pct(d['systematic'])} | {len(d['float_max_abs'])} | "
                  f"{_pct(d['float_max_abs'])} | {_pct(d['float_gain'])} | {_pct(d['sqnr'], (0, 1, 10, 50))} |")
    if flt:
        print("\n| recipe | float outputs | error / eager's noise | gain - 1 | eager's noise (max_abs) |")
        print("|---|---:|---|---|---|")
        for name, d in sorted(flt.items()):
            print(f"| `{name}` | {len(d['ratio'])} | {_pct(d['ratio'])} | {_pct(d['gain'])} | {_pct(d['noise'])} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/verdict_errors.py RESULTS.jsonl")
    main(sys.argv[1])
