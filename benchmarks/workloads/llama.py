"""A tiny LLaMA (transformers ``LlamaForCausalLM`` from a small config) trained with AdamW.

The model is the zoo's (``benchmarks/models/hf.py``: 2 layers, hidden 32, vocabulary 64, random
weights, dropout 0), trained on random token batches of 2 sequences, the labels being the inputs.
Either the model is compiled and the loop runs eagerly around it, or the whole train step
(forward, backward, ``opt.step()``, ``opt.zero_grad()``) is one compiled function.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from benchmarks.models import hf
from benchmarks.workloads.steps import Run

BATCH = 2
SEQ = 8
# The variable-length loop's lengths, taken in turns; the first two differ, so a system that
# makes sizes dynamic after one change does so at step 2.
LENGTHS = (8, 12, 6, 16, 10, 14, 5, 11)


def batches(lengths: list[int]) -> list[torch.Tensor]:
    """One batch of token ids per step, of these lengths, from a generator of its own."""
    generator = torch.Generator().manual_seed(1)
    vocab = hf.TINY["vocab_size"]
    return [torch.randint(3, vocab, (BATCH, n), generator=generator) for n in lengths]


def build(checkpointing: bool) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model, _ = hf.build_family("llama", "train")
    if checkpointing:
        model.gradient_checkpointing_enable()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> Callable:
    """The whole step as one function of the batch."""

    def step(ids: torch.Tensor) -> torch.Tensor:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return step


def train(run: Run, whole_step: bool, checkpointing: bool = False,
          lengths: list[int] | None = None) -> None:
    """``run.steps`` steps: the model compiled, or (``whole_step``) the train step."""
    model, opt = build(checkpointing)
    if whole_step:
        step = run.compile(train_step(model, opt))
    else:
        step = train_step(run.compile(model), opt)
    for ids in batches(lengths or [SEQ] * run.steps):
        run.log.begin()
        loss = step(ids)
        run.log.end(loss)


def model(run: Run) -> None:
    train(run, whole_step=False)


def whole_step(run: Run) -> None:
    train(run, whole_step=True)


def checkpointed_model(run: Run) -> None:
    train(run, whole_step=False, checkpointing=True)


def checkpointed_step(run: Run) -> None:
    train(run, whole_step=True, checkpointing=True)


def variable_lengths(run: Run) -> None:
    lengths = [LENGTHS[i % len(LENGTHS)] for i in range(run.steps)]
    train(run, whole_step=False, lengths=lengths)


def variable_lengths_step(run: Run) -> None:
    lengths = [LENGTHS[i % len(LENGTHS)] for i in range(run.steps)]
    train(run, whole_step=True, lengths=lengths)
