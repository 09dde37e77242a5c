"""An MLP: Linear layers with ReLU between them, in a ModuleList."""

from __future__ import annotations

import torch
from torch import nn

SIZES = {"tiny": dict(depth=3, width=16, batch=4), "bench": dict(depth=8, width=32, batch=8)}


class MLP(nn.Module):
    def __init__(self, depth: int, width: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = self.act(layer(x))
        return self.layers[-1](x)


def build(size: str):
    config = SIZES[size]
    model = MLP(config["depth"], config["width"])

    def inputs() -> tuple[torch.Tensor]:
        return (torch.randn(config["batch"], config["width"]),)

    return model, inputs, lambda out: out.pow(2).mean()
