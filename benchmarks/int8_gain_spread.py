"""How far an int8 delegate's gain along fp32 spreads from 1 over seeds of one zoo row, and where along the network the
int8 program leaves fp32: the figures behind ``judge.MODEL_N_EFF`` (docs/recipes.md, docs/measurements.md "Random
weights and batch norm"). The row is quantized (XNNPACKQuantizer, static, calibrated on the judged image), lowered to
XNNPACK and run as the shipped recipes do; nothing is judged.

    python benchmarks/int8_gain_spread.py per-channel 0 1 2 3 4 5 1455624891    (one line per seed: the whole model)
    python benchmarks/int8_gain_spread.py per-tensor 0 --stages                  (the network cut after each stage)
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROW = "zoo.timm.mobilenetv2_100"


def _run(module: object, x: tuple, per_channel: bool) -> tuple:
    """(fp32, the quantized program's, the delegate's) outputs, flat, in float64."""
    import executorch.kernels.quantized  # noqa: F401  (the quantized_decomposed out variants the runtime needs)
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    with torch.no_grad():
        f = module(*x).double().numpy().ravel()
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=False))
    prepared = prepare_pt2e(torch.export.export(module, x, strict=False).module(), quantizer)
    with torch.no_grad():
        prepared(*x)
    program = convert_pt2e(prepared, fold_quantize=True)
    with torch.no_grad():
        r = copy.deepcopy(program)(*x).double().numpy().ravel()
    edge = to_edge_transform_and_lower(torch.export.export(program, x, strict=False), partitioner=[XnnpackPartitioner()])
    pte = edge.to_executorch().buffer  # held: the loaded program reads from it
    loaded = Runtime.get().load_program(pte)
    o = loaded.load_method("forward").execute(list(x))[0]
    return f, r, o.double().numpy().ravel()


def _line(label: str, f: object, r: object, o: object) -> str:
    import numpy as np

    return (f"| {label} | {o.size} | {float(o @ f / (r @ f)):.4f} | {float(r @ f / (f @ f)):.4f} | "
            f"{float(np.linalg.norm(o - r) / np.linalg.norm(r)):.3f} | {float(np.linalg.norm(r - f) / np.linalg.norm(f)):.3f} |")


def main(args: list[str]) -> None:
    import torch

    from harness.cases.case import Axes
    from harness.suites import load_suites, zoo

    per_channel = args[0] == "per-channel"
    stages = "--stages" in args
    seeds = [int(a) for a in args[1:] if a != "--stages"] or [0]
    case = next(c for c in load_suites(["zoo"]) if c.id == ROW)
    print(f"{ROW}, XNNPACK static {args[0]}\n")
    print("| seed / cut | outputs | delegate / program, along fp32 | program / fp32 | rel. L2 delegate–program | rel. L2 program–fp32 |")
    print("|---|---:|---:|---:|---:|---:|")
    for seed in seeds:
        built = zoo.build(case, Axes("float32", "static"), seed)
        m, x = built.module, built.example
        cuts: list[object] = list(range(1, len(m.blocks) + 1)) if stages else []
        for cut in [*cuts, "all"]:
            module = m if cut == "all" else torch.nn.Sequential(m.conv_stem, m.bn1, *m.blocks[:cut]).eval()
            print(_line(f"{seed} / {cut}", *_run(module, x, per_channel)), flush=True)


if __name__ == "__main__":
    if not sys.argv[1:] or sys.argv[1] not in ("per-channel", "per-tensor"):
        sys.exit("usage: python benchmarks/int8_gain_spread.py per-channel|per-tensor [SEED ...] [--stages]")
    main(sys.argv[1:])
