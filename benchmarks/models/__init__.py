"""A model zoo for graphlift's tests and benchmarks: each model, its inputs and a loss, by size.

``make(name, size)`` builds a model with a fixed seed and returns a :class:`Case`: the model,
a function making its inputs, and a loss over its output for training steps. ``"tiny"`` is for
tests (milliseconds per call), ``"bench"`` for ``benchmarks/models.py``.

===============  ===========================================================================
``mlp``          Linear + ReLU stack
``cnn``          small ResNet: Conv2d, BatchNorm2d, residual blocks, pooling, Linear head
``gpt``          GPT-style decoder: causal attention, LayerNorm, GELU MLP, tied embeddings
``hf_gpt2``      ``transformers`` GPT2LMHeadModel from a small config, random weights
``hf_bert``      ``transformers`` BertModel from a small config, random weights
``vision``       torchvision-style: inverted residuals, stochastic depth, API-usage logging
===============  ===========================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from . import cnn, gpt, hf, mlp, vision


@dataclass
class Case:
    """A built model, how to make its inputs (args tuple), and a scalar loss of its output."""

    name: str
    model: torch.nn.Module
    inputs: Callable[[], tuple[Any, ...]]
    loss: Callable[[Any], torch.Tensor]


# name -> builder(size) returning (model, inputs, loss). One row per model.
BUILDERS: dict[str, Callable[[str], tuple]] = {
    "mlp": mlp.build,
    "cnn": cnn.build,
    "gpt": gpt.build,
    "hf_gpt2": hf.build_gpt2,
    "hf_bert": hf.build_bert,
    "vision": vision.build,
}


def make(name: str, size: str = "tiny", seed: int = 0) -> Case:
    """Build model ``name`` at ``size`` ("tiny" or "bench") with parameters from ``seed``."""
    torch.manual_seed(seed)
    model, inputs, loss = BUILDERS[name](size)
    return Case(name, model, inputs, loss)


def names() -> list[str]:
    """Every model in the zoo."""
    return list(BUILDERS)
