"""How a deep model's fp32 error against float64 is spread, in eager PyTorch and in ExecuTorch (XNNPACK and the portable
runtime): the figures behind a model's noise floor (docs/recipes.md, "A whole model's noise floor") and the zoo's
batch-norm estimate (docs/zoo.md). Prints a Markdown table; judges nothing.

    python benchmarks/model_noise.py [ZOO_ROW ...]     (default: zoo.timm.inception_v3)
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _build(row: str) -> tuple[object, tuple]:
    """The zoo row as bti builds it (seed 0): batch norm estimated on seeded batches."""
    from harness.cases.case import Axes
    from harness.suites import load_suites, zoo

    built = zoo.build(next(c for c in load_suites(["zoo"]) if c.id == row), Axes("float32", "static"), 0)
    return built.module, built.example


def _untrained_largest(row: str) -> float:
    """The largest logit of the same row with its batch norm left as built (mean 0, variance 1)."""
    import torch

    from harness.suites import load_suites, zoo

    case = next(c for c in load_suites(["zoo"]) if c.id == row)
    m = zoo._row(case)
    builder = zoo.BUILDERS[m.builder]
    torch.manual_seed(0)
    model = builder.model(m).eval()
    x = builder.inputs(m, model, torch.Generator().manual_seed(0))
    with torch.no_grad():
        return float(builder.wrap(model, m).eval()(*x).abs().max())


def _errors(row: str) -> list[tuple[str, object]]:
    import numpy as np
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    module, x = _build(row)
    with torch.no_grad():
        eager = module(*x).double().numpy().ravel()
        fp64 = copy.deepcopy(module).double()(*(t.double() for t in x)).numpy().ravel()
    rows = [("eager", np.abs(eager - fp64))]
    program = torch.export.export(module, x, strict=False)
    runtime = Runtime.get()
    for name, partitioners in (("xnnpack", [XnnpackPartitioner()]), ("portable", [])):
        pte = to_edge_transform_and_lower(program, partitioner=partitioners).to_executorch().buffer  # held while it runs
        loaded = runtime.load_program(pte)
        out = loaded.load_method("forward").execute(list(x))[0]
        rows.append((name, np.abs(out.double().numpy().ravel() - fp64)))
    return [("|fp64| largest", np.abs(fp64)), *rows]


def main(rows: list[str]) -> None:
    import numpy as np

    for row in rows:
        before = _untrained_largest(row)
        print(f"\n## {row}\n\nlargest logit with untrained batch norm: {before:.3g}\n")
        figures = _errors(row)
        print(f"largest logit with estimated batch norm: {float(figures[0][1].max()):.3g}\n")
        eager_rmse = float(np.sqrt(np.mean(figures[1][1] ** 2)))
        print("| error against fp64 | median | 90th | 99th | largest | RMSE | RMSE / eager's | elements past 2 x eager's error there | past 2 x eager's largest |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        noise = figures[1][1]
        for name, d in figures[1:]:
            q = np.quantile(d, [0.5, 0.9, 0.99])
            rmse = float(np.sqrt(np.mean(d**2)))
            print(f"| {name} | {q[0]:.2g} | {q[1]:.2g} | {q[2]:.2g} | {d.max():.2g} | {rmse:.2g} | {rmse / eager_rmse:.2f} | "
                  f"{int((d > 2 * noise).sum())} | {int((d > 2 * noise.max()).sum())} |")


if __name__ == "__main__":
    main(sys.argv[1:] or ["zoo.timm.inception_v3"])
