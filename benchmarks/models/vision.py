"""A tiny torchvision-style classifier: inverted-residual blocks with stochastic depth.

torchvision is not a dependency, so this is a model of our own written the way torchvision's
models and ops are: every block records its use (``torch._C._log_api_usage_once``) under a
name built from the object's ``__module__`` and ``__class__.__name__``, and the functional op
``stochastic_depth`` does so for itself on every call, reading the function's own
``__module__`` and ``__name__`` from inside the forward pass. Those reads are what a tracer
meets in torchvision's forwards.
"""

from __future__ import annotations

import types

import torch
from torch import nn

SIZES = {"tiny": dict(width=8, blocks=2, image=8, batch=2, classes=4),
         "bench": dict(width=16, blocks=4, image=16, batch=4, classes=10)}


def log_api_usage(obj: object) -> None:
    """Record the use of ``obj`` (a module or a function) under its dotted name, once per
    process (torch keeps the set of names seen)."""
    module = obj.__module__
    prefix = "" if module.startswith("torchvision") else "torchvision.internal."
    name = obj.__class__.__name__
    if isinstance(obj, types.FunctionType):  # a function goes by its own name, not "function"
        name = obj.__name__
    torch._C._log_api_usage_once(f"{prefix}{module}.{name}")


def stochastic_depth(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Drop whole samples of a residual branch with probability ``p`` in training (the kept
    ones scaled by ``1 / (1 - p)``); the identity otherwise."""
    if not torch.jit.is_scripting() and not torch.jit.is_tracing():
        log_api_usage(stochastic_depth)
    if not training or p == 0.0:
        return x
    keep = torch.empty((x.shape[0],) + (1,) * (x.ndim - 1), dtype=x.dtype, device=x.device)
    return x * keep.bernoulli_(1.0 - p).div_(1.0 - p)


class StochasticDepth(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        log_api_usage(self)
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return stochastic_depth(x, self.p, self.training)


class ConvNormAct(nn.Sequential):
    """Conv2d, BatchNorm2d and an activation, as one block."""

    def __init__(self, channels_in: int, channels: int, kernel: int = 3, stride: int = 1,
                 groups: int = 1, activation: type[nn.Module] | None = nn.SiLU) -> None:
        layers = [nn.Conv2d(channels_in, channels, kernel, stride, kernel // 2, groups=groups,
                            bias=False), nn.BatchNorm2d(channels)]
        if activation is not None:
            layers.append(activation())
        super().__init__(*layers)
        log_api_usage(self)


class InvertedResidual(nn.Module):
    """Expand, depthwise conv, project; a residual with stochastic depth when shapes allow."""

    def __init__(self, channels_in: int, channels: int, stride: int, drop: float) -> None:
        super().__init__()
        log_api_usage(self)
        hidden = 4 * channels_in
        self.block = nn.Sequential(
            ConvNormAct(channels_in, hidden, kernel=1),
            ConvNormAct(hidden, hidden, stride=stride, groups=hidden),
            ConvNormAct(hidden, channels, kernel=1, activation=None))
        self.residual = stride == 1 and channels_in == channels
        self.drop = StochasticDepth(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return x + self.drop(out) if self.residual else out


class TinyNet(nn.Module):
    def __init__(self, width: int, blocks: int, classes: int) -> None:
        super().__init__()
        log_api_usage(self)
        self.stem = ConvNormAct(3, width, stride=1)
        layers = [InvertedResidual(width, width, 1, drop=0.1 * (i + 1) / blocks)
                  for i in range(blocks - 1)]
        layers.append(InvertedResidual(width, 2 * width, 2, drop=0.0))
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(self.pool(x), 1))


def build(size: str):
    config = SIZES[size]
    model = TinyNet(config["width"], config["blocks"], config["classes"])

    def inputs() -> tuple[torch.Tensor]:
        return (torch.randn(config["batch"], 3, config["image"], config["image"]),)

    return model, inputs, lambda out: out.logsumexp(-1).mean()
