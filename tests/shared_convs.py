"""A module for tests/fixtures/suites/pointwise.yaml: one input read by a 1x1 convolution (XNNPACK's matrix product
over each pixel's channels) and by a 3x3 one, so that the dynamic recipe quantizes it once for both."""

from __future__ import annotations

from typing import Any

import torch


class SharedConvs(torch.nn.Module):
    def __init__(self, channels: int = 16, out: int = 8) -> None:
        super().__init__()
        self.pointwise = torch.nn.Conv2d(channels, out, 1)
        self.spatial = torch.nn.Conv2d(channels, out, 3, padding=1)

    def forward(self, x: torch.Tensor) -> Any:
        return self.pointwise(x), self.spatial(x)
