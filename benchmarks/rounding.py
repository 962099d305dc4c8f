"""Whether a quantized program's output is determined beyond its own rounding: the program of a `bti repro` script,
run as written and with every quantize node's ties (x/scale exactly at k + 0.5) rounded half away from
zero instead of half to even, which is another valid integer implementation. Prints how many elements the change
touches per node and how far it moves the output: SQNR against the program, and each against fp32.

A delegate that departs from its program by about what this move is cannot be told from rounding by its output
(ALBERT QA on XNNPACK static per-tensor: 4.7 dB against its program; this move 5.5 dB from 0.0015 % of the elements),
while a delegate far beyond it is not rounding. Where no element sits at a tie (OpenVINO's small int8 programs here),
nothing moves and the probe says nothing. Measures the program only, on the script's own inputs and recipe.

    bti repro ITEM --results D/results.jsonl -o r.py      # an int8 recipe's FAIL_MISMATCH
    python benchmarks/rounding.py r.py
"""

from __future__ import annotations

import runpy
import sys
from typing import Any


def half_away(v: Any) -> Any:
    """``v`` rounded to the nearest integer, ties (exactly k + 0.5) away from zero: torch.round elsewhere."""
    import torch

    t = torch.trunc(v)
    return torch.where((v - t).abs() == 0.5, t + torch.sign(v), torch.round(v))


def main(script: str) -> None:
    import torch

    g = runpy.run_path(script, run_name="rounding")  # the script's functions; its main() does not run
    torch.set_num_threads(1)
    if not g.get("QUANTIZED"):
        sys.exit(f"{script}: not a quantized recipe's script")
    ep = g["export"]()
    with torch.no_grad():
        fp32 = g["leaves"](ep.module()(*g["clone"](g["RUN"])))
    qep, program = g["quantize"](ep)  # the script's own calibration and convert_pt2e
    m = qep.module()
    q = torch.ops.quantized_decomposed.quantize_per_tensor
    changed: list[float] = []

    def away(x: Any, scale: Any, zp: Any, qmin: Any, qmax: Any, dtype: Any) -> Any:
        even = q.default(x, scale, zp, qmin, qmax, dtype)
        # quantize_per_tensor's own arithmetic (torch.ao's _decomposed: float32 input * inv_scale), ties moved
        v = x.float() * (1.0 / float(scale))
        out = torch.clamp(half_away(v) + int(zp), qmin, qmax).to(dtype).reshape(even.shape)
        changed.append(float((out != even).float().mean()))
        return out

    nodes = [n for n in m.graph.nodes if n.target in (q.default, q.tensor)]
    for n in nodes:
        n.target = away
    m.recompile()
    with torch.no_grad():
        moved = g["leaves"](m(*g["clone"](g["RUN"])))
    # the weights' own quantize nodes too where the recipe does not fold them (fold_quantize False)
    print(f"{len(nodes)} quantize nodes, {len(changed)} calls; elements whose rounding changed per call: "
          f"mean {sum(changed) / max(len(changed), 1):.6%}, max {max(changed, default=0.0):.6%}")
    def sqnr_db(out: Any, ref: Any) -> float:  # the script's own, in float64
        return float(g["sqnr_db"](out.double(), ref.double()))

    for i, (p, d, f) in enumerate(zip(program, moved, fp32, strict=False)):
        if not (isinstance(p, torch.Tensor) and p.is_floating_point()):
            continue
        print(f"output[{i}]: ties away from zero moves the program {sqnr_db(d, p):.2f} dB from itself "
              f"(max abs {float((d - p).abs().max()):.4g}); the program {sqnr_db(p, f):.2f} dB from fp32, "
              f"the moved one {sqnr_db(d, f):.2f} dB")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
