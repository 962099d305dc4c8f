"""A vendor's own case source for bti: its model list, built and judged without touching bti's core.

Registered through the ``bti.case_sources`` entry point (``pyproject.toml``), so ``pip install`` makes
``bti run -s example-cases`` work. It shows every member a case source may have:

* ``discover``: the cases (parent side, cheap: no torch);
* ``build``: one case × axes in a worker: the module, seeded inputs, and further input sets (``more_runs``), each
  run once on the same program and compared;
* ``judge``: the source's own word on one item (here a SKIP with its reason; a ``Judgement`` can also carry an
  expected failure, a tolerance of its own and known failures as xfail rules);
* ``cost``: seconds per item, which shards are balanced by.

Everything else comes from ``BaseCaseSource``'s defaults.
"""

from __future__ import annotations

from typing import Any

from harness.cases.case import Axes, Case
from harness.cases.contract import BaseCaseSource, Built, Judgement

WIDTHS = {"narrow": 8, "wide": 256}


class ExampleCases(BaseCaseSource):
    name = "example-cases"
    description = "a vendor's example model list (a small conv net at two widths)"
    kinds = ("example-convnet",)
    whole_models = True  # model-level accuracy applies (dynamo's rule on eager and compiled recipes)

    def discover(self) -> list[Case]:
        return [Case(id=f"model.example_convnet.{width}", suite=self.name, kind="example-convnet", op=None,
                     tags=("example",), spec={"channels": channels}, source="bti_example_cases")
                for width, channels in WIDTHS.items()]

    def build(self, case: Case, axes: Axes, seed: int) -> Built:
        import torch

        torch.manual_seed(seed)
        c = int(case.spec["channels"])
        module = torch.nn.Sequential(torch.nn.Conv2d(3, c, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                     torch.nn.Flatten(), torch.nn.Linear(c, 10)).eval()
        g = torch.Generator().manual_seed(seed)
        x = (torch.randn(1, 3, 16, 16, generator=g),)
        more = tuple((torch.randn(1, 3, 16, 16, generator=g),) for _ in range(2))  # two more input sets, same program
        return Built(module, x, x, None, more_runs=more)

    def judge(self, case: Case, dtype: str, recipe: Any) -> Judgement | None:
        if case.spec["channels"] > 64 and recipe.quantized:
            return Judgement(skip="example-cases: the wide net is not calibrated for int8 yet (bti_example_cases)")
        return None

    def cost(self, case: Case) -> float:
        return 2.0
