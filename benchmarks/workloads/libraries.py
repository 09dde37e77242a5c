"""The tiny LLaMA trained by libraries that call ``torch.compile`` themselves.

- transformers' ``Trainer`` with ``torch_compile=True`` (it hands accelerate a dynamo plugin, and
  accelerate compiles the model in ``prepare``);
- Lightning's ``trainer.fit(torch.compile(module))`` (Lightning unwraps the compiled module and
  compiles its ``forward`` and step methods with the wrapper's context) and ``trainer.fit`` of a
  module compiled in place by ``module.compile()`` (``nn.Module.compile``: Lightning has no
  compile method of its own);
- accelerate's ``prepare`` with a dynamo plugin, then ``unwrap_model``, which must give back the
  very module that was trained.

Under graphlift, every one of these ``torch.compile`` calls is graphlift's (the drop-in switch).
Each step's loss is the one the library computed; the clock runs from the library's step-begin
callback to its step-end callback.
"""

from __future__ import annotations

import tempfile

import torch

from benchmarks.workloads import llama
from benchmarks.workloads.steps import BACKEND, Run


class TokenBatches(torch.utils.data.Dataset):
    """The LLaMA workloads' batches as a dataset of single sequences, labels equal to inputs."""

    def __init__(self, steps: int) -> None:
        self.rows = torch.cat(llama.batches([llama.SEQ] * steps))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.rows[index], "labels": self.rows[index]}


# -- transformers' Trainer -------------------------------------------------------------------------
def hf_trainer(run: Run) -> None:
    import transformers

    class LoggedTrainer(transformers.Trainer):
        """Keeps each loss the trainer computes, for the step-end callback to log."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            computed.append(loss.detach())
            return loss

    class Steps(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            run.log.begin()

        def on_step_end(self, args, state, control, **kwargs):
            run.log.end(computed.pop())

    computed: list[torch.Tensor] = []
    model, _ = llama.build(checkpointing=False)
    with tempfile.TemporaryDirectory() as output:
        args = transformers.TrainingArguments(
            output_dir=output, max_steps=run.steps, per_device_train_batch_size=llama.BATCH,
            learning_rate=1e-3, lr_scheduler_type="constant", warmup_steps=0, seed=0,
            # A backend given turns torch_compile on by itself: none for eager.
            torch_compile=run.compiling, torch_compile_backend=BACKEND if run.compiling else None,
            use_cpu=True,
            report_to="none", logging_strategy="no", save_strategy="no", disable_tqdm=True,
            dataloader_num_workers=0)
        trainer = LoggedTrainer(model=model, args=args, train_dataset=TokenBatches(run.steps),
                                callbacks=[Steps()])
        trainer.train()
    run.checks["model_compiled"] = type(trainer.model_wrapped).__name__


# -- Lightning -------------------------------------------------------------------------------------
def _lightning_module():
    import lightning.pytorch as pl

    class LitLlama(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model, _ = llama.build(checkpointing=False)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=ids, labels=ids).loss

        def training_step(self, batch, batch_idx):
            return self(batch["input_ids"])

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    return LitLlama()


def _fit(run: Run, module) -> None:
    import lightning.pytorch as pl

    class Steps(pl.Callback):
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            run.log.begin()

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            run.log.end(outputs["loss"])

    data = torch.utils.data.DataLoader(TokenBatches(run.steps), batch_size=llama.BATCH)
    trainer = pl.Trainer(max_steps=run.steps, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[Steps()])
    trainer.fit(module, data)


def lightning_fit_compiled(run: Run) -> None:
    """``trainer.fit(torch.compile(module))``."""
    _fit(run, run.compile(_lightning_module()))


def lightning_module_compile(run: Run) -> None:
    """``module.compile()``, then ``trainer.fit(module)``."""
    module = _lightning_module()
    run.compile_module_in_place(module)
    _fit(run, module)


# -- accelerate ------------------------------------------------------------------------------------
def accelerate_unwrap(run: Run) -> None:
    """``prepare`` (which compiles, given a dynamo backend), the loop, then ``unwrap_model``."""
    import accelerate

    model, opt = llama.build(checkpointing=False)
    accelerator = accelerate.Accelerator(cpu=True,
                                         dynamo_backend=BACKEND if run.compiling else "no")
    prepared, opt = accelerator.prepare(model, opt)
    for ids in llama.batches([llama.SEQ] * run.steps):
        run.log.begin()
        loss = prepared(input_ids=ids, labels=ids).loss
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        run.log.end(loss)
    # unwrap_model keeps torch.compile's wrapper unless told not to.
    unwrapped = accelerator.unwrap_model(prepared, keep_torch_compile=False)
    run.checks["unwrap_gives_the_module"] = unwrapped is model
    run.checks["unwrap_keeps_the_compiled"] = accelerator.unwrap_model(prepared) is prepared
    run.checks["prepare_compiled"] = prepared is not model
    # One more forward of each, called as in training (grad on, labels given) so that the
    # compiled one is a cache hit, not a recompile the counts would show.
    ids = llama.batches([llama.SEQ])[0]
    eager_logits = unwrapped(input_ids=ids, labels=ids).logits
    compiled_logits = prepared(input_ids=ids, labels=ids).logits
    run.checks["unwrapped_vs_prepared_max_diff"] = (
        (eager_logits - compiled_logits).abs().max().item())
