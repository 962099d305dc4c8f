"""Whether a quantized program's output is determined beyond its own rounding, and what a delegate computes instead:
the program of a `bti repro` script, run as written and changed in one of two ways that are both valid integer
implementations of it.

- ``ties`` (the default): every quantize node's ties (x/scale exactly at k + 0.5) rounded half away from zero instead
  of half to even. Prints how many elements the change touches per node and how far it moves the output.
- ``--per-row``: every dynamically quantized activation (a quantize node whose scale a ``choose_qparams`` node computes
  from the tensor itself) quantized per row instead of per tensor, as XNNPACK's dynamically quantized kernels do
  whatever the program says (the script's copy of ``harness/qd8.py``; the reference of a recipe with
  ``quantize.reference: per-row``).

Each prints SQNR against the program as written (per tensor), and each against fp32. With ``--delegate`` the
script's own lower, serialize, load and run follow, and the delegate's output is set against the program, the
changed program and fp32. With ``--portable`` the program is lowered with no partitioner too and run on ExecuTorch's
own portable and quantized kernels: a third implementation of the same program, set against the program and the
delegate (where it is as far from the program as the delegate is, the program is ill-conditioned, and no delegate
is shown at fault: torchvision's EfficientNet-B0 in tv-models, docs/measurements.md). With ``--by-op`` (an XNNPACK
script) the program is lowered once per kind of operator it holds, XNNPACK delegating that kind alone, and each output
is set against the portable kernels': which operator's delegation departs from the program. With ``--steps RATE``
that fraction of one quantize node's elements is moved one integer step, node by node: how far a layer rounded
differently moves the program (ShuffleNet v2's static int8 programs: 0.07 % of an early layer, 12-24 dB).

A delegate that departs from its program by about what the change moves it cannot be told from that change by its
output (ALBERT QA on XNNPACK static per-tensor: 4.7 dB against its program; ties moved it 5.5 dB from 0.0015 % of the
elements), while a delegate far beyond it is not that change. Where no element sits at a tie (OpenVINO's small int8
programs here), nothing moves and ``ties`` says nothing. Measures on the script's own inputs and recipe.

    bti repro ITEM --results D/results.jsonl -o r.py      # an int8 recipe's item (--passing for a passing one)
    python benchmarks/rounding.py r.py
    python benchmarks/rounding.py --per-row --delegate r.py
    python benchmarks/rounding.py --per-row --delegate --noise r.py    # and how far float rounding alone moves it
    python benchmarks/rounding.py --delegate --portable r.py           # and the runtime's own kernels, no delegate
    python benchmarks/rounding.py --delegate --portable --by-op r.py   # and one operator delegated at a time
    python benchmarks/rounding.py --steps 0.0007 r.py                  # and one layer rounded differently
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import Any


def half_away(v: Any) -> Any:
    """``v`` rounded to the nearest integer, ties (exactly k + 0.5) away from zero: torch.round elsewhere."""
    import torch

    t = torch.trunc(v)
    return torch.where((v - t).abs() == 0.5, t + torch.sign(v), torch.round(v))


def near_other_way(v: Any, eps: float) -> Any:
    """``v`` rounded to the nearest integer, except that a value within ``eps`` of a tie (k + 0.5) goes to the other of
    its two neighbours than torch.round (half to even) takes: what an implementation whose arithmetic is ``eps`` of a
    step off may do to it."""
    import torch

    lo = torch.floor(v)
    r = torch.round(v)
    return torch.where(((v - lo) - 0.5).abs() < eps, torch.where(r == lo, lo + 1, lo), r)


def _ties(m: Any, q: Any, near: float | None = None) -> tuple[int, list[float]]:
    import torch

    changed: list[float] = []

    def away(x: Any, scale: Any, zp: Any, qmin: Any, qmax: Any, dtype: Any) -> Any:
        even = q.default(x, scale, zp, qmin, qmax, dtype)
        # quantize_per_tensor's own arithmetic (torch.ao's _decomposed: float32 input * inv_scale), ties moved
        v = x.float() * (1.0 / float(scale))
        rounded = half_away(v) if near is None else near_other_way(v, near)
        out = torch.clamp(rounded + int(zp), qmin, qmax).to(dtype).reshape(even.shape)
        changed.append(float((out != even).float().mean()))
        return out

    nodes = [n for n in m.graph.nodes if n.target in (q.default, q.tensor)]
    for n in nodes:
        n.target = away
    return len(nodes), changed


def gain_along(out: Any, ref: Any, along: Any) -> float:
    """``out``'s gain against ``ref`` along ``along`` (the model's fp32 output), by the verdict's own systematic check
    on a model (``harness.judge.systematic``: finite elements only, and through the origin where fp32 is too far
    from the reference's direction to measure along it), so the figure printed is the one a record would carry."""
    from harness.judge import systematic

    def flat(t: Any) -> Any:
        return t.detach().double().flatten().numpy()

    return float(systematic(flat(out), flat(ref), None, flat(along))["gain"])


def _noise(g: dict[str, Any], m: Any, moved: list[Any], delegate: list[Any] | None, sqnr_db: Any, fp32: list[Any]) -> None:
    """The per-row program ``m`` with each activation element moved one float32 ulp up or down (at random) before its
    quantization, three times: a program whose output moves as far as its delegate does is not
    determined beyond float rounding (ResNet-152 dynamic: 16.6-17.2 dB, its delegate 16.3). With the gain along fp32
    of each draw against the program: on a nearly constant output a shift of the whole vector reads as one."""
    import torch

    fq, gen = g["qd8_fake_quantize"], torch.Generator().manual_seed(0)

    def noisy(x: Any, nonbatch: int = 1, per_pixel: bool = False) -> Any:  # nextafter: 1 + 2**-24 rounds to 1 in float32
        up = torch.rand(x.shape, generator=gen) < 0.5
        inf = torch.full_like(x, float("inf"))
        return fq(torch.where(up, torch.nextafter(x, inf), torch.nextafter(x, -inf)), nonbatch, per_pixel)

    nodes = [n for n in m.graph.nodes if n.target is fq]
    for n in nodes:
        n.target = noisy
    m.recompile()
    for _ in range(3):
        with torch.no_grad():
            out = g["leaves"](m(*g["clone"](g["RUN"])))[0]
        line = (f"output[0]: 1-ulp noise before each of {len(nodes)} quantizations moves the per-row program "
                f"{sqnr_db(out, moved[0]):.2f} dB (max abs {float((out - moved[0]).abs().max()):.4g}, "
                f"gain along fp32 {gain_along(out, moved[0], fp32[0]):.4f})")
        if delegate:
            line += f"; the delegate is {sqnr_db(delegate[0], out):.2f} dB from the noisy one"
        print(line)


def _by_op(g: dict[str, Any], ns: dict[str, Any], qep: Any, held: dict[str, int], portable: list[Any], fp32: list[Any]) -> None:
    """Lower the program with XNNPACK's partitioner limited to one operator config at a time, for each config whose
    operator the portable program holds (``held``: each operator's count), and print how far each such program's output is from the portable kernels'."""
    import copy

    import torch
    from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    parts = g["partitioners"]()  # the script's own (run_path's copy: ``ns`` has the portable run's patch)
    if len(parts) != 1 or type(parts[0]) is not XnnpackPartitioner:
        _refuse("--by-op bisects XNNPACK's partitioner: the script's recipe does not lower with XnnpackPartitioner alone")
    standalone = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_affine", "dequantize_affine",
                  "choose_qparams_affine")  # a delegated operator's own q/dq come with its config's pattern
    configs = [c for c in ALL_PARTITIONER_CONFIGS
               if c.target_name in held and not c.target_name.startswith(standalone)]

    def sqnr_db(out: Any, ref: Any) -> float:
        return float(g["sqnr_db"](out.double(), ref.double()))

    for c in configs:
        ns["partitioners"] = lambda c=c: [XnnpackPartitioner(configs=[c])]
        try:
            one = g["lower"](copy.deepcopy(qep))
            delegated = sum(1 for n in one.exported_program().graph.nodes if n.op == "call_function"
                            and "call_delegate" in str(n.target))
            out = g["run"](g["load"](one, g["serialize"](one)), g["mutated_inputs"](one))
        except Exception as e:  # one operator's lowering failing says which, and the others still run
            print(f"only {c.target_name} delegated ({held[c.target_name]} in the program): {type(e).__name__}: "
                  f"{str(e).splitlines()[0] if str(e) else ''}"[:300])
            continue
        for i, (o, q) in enumerate(zip(out, portable, strict=False)):
            if isinstance(o, torch.Tensor) and o.is_floating_point() and isinstance(q, torch.Tensor):
                print(f"only {c.target_name} delegated ({held[c.target_name]} in the program, {delegated} delegate "
                      f"calls): output[{i}] {sqnr_db(o, q):.2f} dB from the portable kernels (max abs "
                      f"{float((o - q).abs().max()):.4g}), gain along fp32 {gain_along(o, q, fp32[i]):.4f}")
    ns["partitioners"] = lambda: []  # as the portable run left it


def _steps(g: dict[str, Any], m: Any, program: list[Any], rate: float, nodes: int) -> None:
    """Move ``rate`` of one quantize node's output elements one integer step up or down (clamped to its range), for
    each of the first ``nodes`` quantize nodes in turn, three seeded draws each, and print how far each moves the
    program's first float output from itself: the program's sensitivity to a layer rounded differently."""
    import torch

    q_op = torch.ops.quantized_decomposed.quantize_per_tensor.default
    qs = [n for n in m.graph.nodes if n.op == "call_function" and n.target == q_op][:nodes]
    first = next(i for i, p in enumerate(program) if isinstance(p, torch.Tensor) and p.is_floating_point())
    gen: list[Any] = [None]

    def step(q: Any, qmin: int, qmax: int) -> Any:
        flat = q.flatten().clone()
        k = max(1, round(rate * flat.numel()))
        idx = torch.randperm(flat.numel(), generator=gen[0])[:k]
        sign = torch.randint(0, 2, (k,), generator=gen[0]) * 2 - 1
        flat[idx] = (flat[idx].to(torch.int32) + sign).clamp(qmin, qmax).to(flat.dtype)
        return flat.view_as(q)

    for i, n in enumerate(qs):
        with m.graph.inserting_after(n):
            moved = m.graph.call_function(step, (n, n.args[3], n.args[4]))
        n.replace_all_uses_with(moved)
        moved.args = (n, n.args[3], n.args[4])
        m.recompile()
        figures = []
        for draw in range(3):
            gen[0] = torch.Generator().manual_seed(draw)
            with torch.no_grad():
                out = g["leaves"](m(*g["clone"](g["RUN"])))[first]
            figures.append(float(g["sqnr_db"](out.double(), program[first].double())))
        moved.replace_all_uses_with(n)
        m.graph.erase_node(moved)
        m.recompile()
        shape = tuple(n.meta["val"].shape) if "val" in n.meta else "?"
        print(f"quantize node {i} ({n.name}, {shape}): {rate:.2%} of its elements one step off moves output[{first}] "
              + ", ".join(f"{f:.2f}" for f in figures) + " dB from the program (3 draws)")


def _held(edge: Any) -> dict[str, int]:
    """Each operator's count in a lowered program's graph, by XNNPACK's config names (aten.cat.default: cat.default);
    read before serializing it, which rewrites the graph to out variants."""
    held: dict[str, int] = {}
    for n in edge.exported_program().graph.nodes:
        if n.op == "call_function":
            name = ".".join(getattr(n.target, "__name__", str(n.target)).split(".")[-2:])
            held[name] = held.get(name, 0) + 1
    return held


def _refuse(line: str) -> None:
    print(f"rounding.py: {line}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("script", help="a `bti repro` script of a quantized recipe's item")
    ap.add_argument("--per-row", action="store_true", help="quantize dynamic activations per row as XNNPACK does")
    ap.add_argument("--delegate", action="store_true", help="lower and run the program as the script does, and compare")
    ap.add_argument("--noise", action="store_true", help="with --per-row: also 1-ulp noise before each quantization "
                    "(a kernel's float arithmetic), three draws: how far float rounding alone moves the program")
    ap.add_argument("--portable", action="store_true", help="with --delegate: also run the program with no partitioner, "
                    "on ExecuTorch's portable and quantized kernels, and set it against the program and the delegate")
    ap.add_argument("--steps", type=float, metavar="RATE", help="also move RATE (0.0007: 0.07 %%) of one quantize node's "
                    "elements one step at a time, for each of the first --nodes nodes, three draws each: how far a "
                    "different integer implementation of one layer (a requantization that rounds a few elements the "
                    "other way) moves the program")
    ap.add_argument("--near", type=float, metavar="EPS", help="instead of ties: every value within EPS of a step "
                    "of a tie (k + 0.5) rounded to its other neighbour, at every quantize node at once")
    ap.add_argument("--nodes", type=int, default=3, help="with --steps: how many quantize nodes, in graph order")
    ap.add_argument("--by-op", action="store_true", help="with --portable, for an XNNPACK script: delegate one kind of "
                    "operator at a time (XnnpackPartitioner's per-operator configs) and set each against the portable "
                    "kernels: which operator's delegation moves the output")
    args = ap.parse_args(argv)
    import copy

    import torch

    if not os.path.isfile(args.script):
        _refuse(f"{args.script}: no such file")
    g = runpy.run_path(args.script, run_name="rounding")  # the script's functions; its main() does not run
    torch.set_num_threads(1)
    if not g.get("QUANTIZED"):
        _refuse(f"{args.script}: not a quantized recipe's script")
    if args.portable and not args.delegate:
        _refuse("--portable sets the runtime's own kernels against the delegate: give --delegate too")
    if args.by_op and not args.portable:
        _refuse("--by-op sets each operator's delegation against the runtime's own kernels: give --delegate --portable too")
    if args.near is not None and args.per_row:
        _refuse("--near moves a static program's near-ties; --per-row quantizes its dynamic activations per row: one or the other")
    if args.nodes != 3 and args.steps is None:
        _refuse("--nodes says how many quantize nodes --steps moves: give --steps too")
    if args.noise and not args.per_row:
        _refuse("--noise perturbs the per-row program: give --per-row too")
    if args.per_row and "per_row_program" not in g:
        _refuse(f"{args.script}: written before bti repro carried harness/qd8.py; write it again")
    ep = g["export"]()
    with torch.no_grad():
        fp32 = g["leaves"](ep.module()(*g["clone"](g["RUN"])))
    qep, _ = g["quantize"](ep)  # the script's own calibration and convert_pt2e
    delegate = None
    if args.delegate:  # before the program's module is changed below
        edge = g["lower"](copy.deepcopy(qep))  # the program below stays as quantize returned it
        handle = g["load"](edge, g["serialize"](edge))
        delegate = g["run"](handle, g["mutated_inputs"](edge))
    portable = None
    if args.portable:  # the script's own calls, with no partitioner and on the ExecuTorch runtime whatever its recipe's
        ns = g["lower"].__globals__  # the script's own namespace (run_path returns a copy of it)
        ns["partitioners"], ns["RUNS_ON"] = (lambda: []), "pybind"
        edge = g["lower"](copy.deepcopy(qep))
        held = _held(edge)
        portable = g["run"](g["load"](edge, g["serialize"](edge)), g["mutated_inputs"](edge))
        if args.by_op:
            _by_op(g, ns, qep, held, portable, fp32)
    with torch.no_grad():  # the program as written (per tensor, whatever the script's reference)
        program = g["leaves"](qep.module()(*g["clone"](g["RUN"])))
    if args.steps is not None:
        if not 0 < args.steps < 1:
            _refuse(f"--steps {args.steps:g}: a rate between 0 and 1 (0.0007: 0.07 % of the elements)")
        _steps(g, qep.module(), program, args.steps, args.nodes)
    m = qep.module()
    if args.per_row:  # the script's own copy of harness/qd8.py
        count = g["per_row_program"](m)
        if not count:
            _refuse(f"{args.script}: no dynamically quantized activation (choose_qparams -> quantize -> dequantize)")
    else:
        count, calls = _ties(m, torch.ops.quantized_decomposed.quantize_per_tensor, args.near)
        m.recompile()
    with torch.no_grad():
        moved = g["leaves"](m(*g["clone"](g["RUN"])))
    if args.per_row:
        what = "per row"
        print(f"{count} dynamic quantize/dequantize pairs quantized per row (XNNPACK's qd8)")
    else:
        what = "ties away from zero" if args.near is None else f"values within {args.near:g} step of a tie the other way"
        # the weights' own quantize nodes too where the recipe does not fold them (fold_quantize False)
        print(f"{count} quantize nodes, {len(calls)} calls; elements whose rounding changed per call: "
              f"mean {sum(calls) / max(len(calls), 1):.6%}, max {max(calls, default=0.0):.6%}")

    def sqnr_db(out: Any, ref: Any) -> float:  # the script's own, in float64
        return float(g["sqnr_db"](out.double(), ref.double()))

    if args.noise:
        _noise(g, m, moved, delegate, sqnr_db, fp32)

    for i, (p, d, f) in enumerate(zip(program, moved, fp32, strict=False)):
        if not (isinstance(p, torch.Tensor) and p.is_floating_point()):
            continue
        print(f"output[{i}]: {what} moves the program {sqnr_db(d, p):.2f} dB from itself "
              f"(max abs {float((d - p).abs().max()):.4g}); the program {sqnr_db(p, f):.2f} dB from fp32, "
              f"the moved one {sqnr_db(d, f):.2f} dB")
        if delegate is not None and i < len(delegate) and isinstance(delegate[i], torch.Tensor):
            o = delegate[i]
            print(f"output[{i}]: the delegate {sqnr_db(o, p):.2f} dB from the program (max abs {float((o - p).abs().max()):.4g}), "
                  f"{sqnr_db(o, d):.2f} dB from the moved one (max abs {float((o - d).abs().max()):.4g}), "
                  f"gain along fp32 against the judge's reference ({'the per-row program' if args.per_row else 'the program as written'}) "
                  f"{gain_along(o, d if args.per_row else p, f):.4f}, "
                  f"{sqnr_db(o, f):.2f} dB from fp32")
            if portable is not None and i < len(portable) and isinstance(portable[i], torch.Tensor):
                q = portable[i]
                print(f"output[{i}]: the portable kernels (no delegate) {sqnr_db(q, p):.2f} dB from the program, the delegate "
                      f"{sqnr_db(o, q):.2f} dB from them, they {sqnr_db(q, f):.2f} dB from fp32")


if __name__ == "__main__":
    main(sys.argv[1:])
