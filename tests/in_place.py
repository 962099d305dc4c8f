"""The smallest graph with an in-place op the Arm quantizer meets: a convolution whose residual is added in place, as
torchvision's ResNet adds it. Imported inside tests, since it imports torch."""

from __future__ import annotations

import torch


class Residual(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y += x
        return torch.relu(y)
