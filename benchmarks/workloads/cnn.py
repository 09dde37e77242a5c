"""A small CNN trained with SGD: BatchNorm, Dropout, bfloat16 autocast, channels_last.

The zoo's residual blocks (``benchmarks/models/cnn.py``) with a Dropout before the head, the
weights and the images in channels_last, the forward and the loss under CPU autocast to
bfloat16, the backward outside it. Batch statistics move BatchNorm's running buffers every step
and Dropout draws from torch's generator, so a compiled step must do both as eager does.
Either the model is compiled, or the whole train step.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from benchmarks.models.cnn import BasicBlock
from benchmarks.workloads.steps import Run

WIDTH, IMAGE, BATCH, CLASSES = 8, 16, 8, 10


def build() -> nn.Module:
    model = nn.Sequential(
        nn.Conv2d(3, WIDTH, 3, 1, 1, bias=False), nn.BatchNorm2d(WIDTH), nn.ReLU(),
        BasicBlock(WIDTH, WIDTH, 1), BasicBlock(WIDTH, 2 * WIDTH, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.25), nn.Linear(2 * WIDTH, CLASSES))
    return model.to(memory_format=torch.channels_last)


def batches(steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(2)
    return [(torch.randn(BATCH, 3, IMAGE, IMAGE, generator=generator)
             .to(memory_format=torch.channels_last),
             torch.randint(0, CLASSES, (BATCH,), generator=generator)) for _ in range(steps)]


def train_step(model: Callable, opt: torch.optim.Optimizer) -> Callable:
    def step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return step


def train(run: Run, whole_step: bool) -> None:
    model = build()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if whole_step:
        step = run.compile(train_step(model, opt))
    else:
        step = train_step(run.compile(model), opt)
    for images, labels in batches(run.steps):
        run.log.begin()
        loss = step(images, labels)
        run.log.end(loss)
    run.checks["running_mean_sum"] = model[1].running_mean.sum().item()


def model(run: Run) -> None:
    train(run, whole_step=False)


def whole_step(run: Run) -> None:
    train(run, whole_step=True)
