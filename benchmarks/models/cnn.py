"""A small ResNet: a stem, residual blocks with BatchNorm (one downsampling), pooling, a head."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

SIZES = {"tiny": dict(width=8, blocks=2, image=8, batch=2, classes=4),
         "bench": dict(width=16, blocks=4, image=16, batch=4, classes=10)}


class BasicBlock(nn.Module):
    def __init__(self, channels_in: int, channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or channels_in != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(channels_in, channels, 1, stride, bias=False),
                                          nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, width: int, blocks: int, classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU())
        layers = [BasicBlock(width, width, 1) for _ in range(blocks - 1)]
        layers.append(BasicBlock(width, 2 * width, 2))
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(self.pool(x), 1))


def build(size: str):
    config = SIZES[size]
    model = ResNet(config["width"], config["blocks"], config["classes"])

    def inputs() -> tuple[torch.Tensor]:
        return (torch.randn(config["batch"], 3, config["image"], config["image"]),)

    return model, inputs, lambda out: out.logsumexp(-1).mean()
