"""Every workload, by name: the function that trains it under a :class:`~steps.Run`.

One row per workload, in the table's order. The functions import their libraries themselves, so
a child imports only what its workload needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.workloads import cnn, libraries, llama
from benchmarks.workloads.steps import Run


@dataclass(frozen=True)
class Workload:
    """A workload: what it trains and how it is compiled, and the function that runs it."""

    what: str
    train: Callable[[Run], None]


WORKLOADS: dict[str, Workload] = {
    "llama-model": Workload("tiny LLaMA, AdamW; the model compiled", llama.model),
    "llama-step": Workload("tiny LLaMA, AdamW; the whole train step compiled",
                           llama.whole_step),
    "llama-ckpt-model": Workload("tiny LLaMA, gradient checkpointing; the model compiled",
                                 llama.checkpointed_model),
    "llama-ckpt-step": Workload("tiny LLaMA, gradient checkpointing; the train step compiled",
                                llama.checkpointed_step),
    "llama-varlen-model": Workload("tiny LLaMA, 8 sequence lengths in turns; the model compiled",
                                   llama.variable_lengths),
    "llama-varlen-step": Workload("tiny LLaMA, 8 sequence lengths in turns; the train step "
                                  "compiled", llama.variable_lengths_step),
    "hf-trainer": Workload("tiny LLaMA, transformers Trainer(torch_compile=True)",
                           libraries.hf_trainer),
    "lightning-fit": Workload("tiny LLaMA, Lightning trainer.fit(torch.compile(module))",
                              libraries.lightning_fit_compiled),
    "lightning-module-compile": Workload("tiny LLaMA, Lightning module.compile(); fit(module)",
                                         libraries.lightning_module_compile),
    "accelerate": Workload("tiny LLaMA, accelerate prepare(dynamo backend), unwrap_model",
                           libraries.accelerate_unwrap),
    "cnn-model": Workload("CNN, BatchNorm, Dropout, bf16 autocast, channels_last; the model "
                          "compiled", cnn.model),
    "cnn-step": Workload("CNN, BatchNorm, Dropout, bf16 autocast, channels_last; the train step "
                         "compiled", cnn.whole_step),
}
