"""``nn.LSTM`` and ``nn.GRU`` (stacked, bidirectional) in a training step and in inference,
against eager and torch.compile (recorded: tests/reference).

Their forwards check their flat weights through ``weakref`` calls, a graph break in both
frontends. In training the CPU ``torch.lstm`` cannot be a node for ``aot_eager``: AOTAutograd's
forward saves None where its trace saved a tensor and its runtime asserts, so graphlift runs
that call eagerly at a graph break (torch.compile runs the whole forward eagerly). Checked: no
crash, the loss and every gradient equal eager's on two calls, and at least as many graphs as
torch.compile captures.
"""

from __future__ import annotations

import functools

import pytest
import torch
from reference import measure, recorded

import graphlift
from graphlift.testing import CompileCounterWithBackend

CONFIGS = {
    "stacked": dict(num_layers=2),
    "bidirectional": dict(bidirectional=True),
    "stacked_bidirectional": dict(num_layers=2, bidirectional=True),
}
CELLS = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}
MODES = ("training", "eval")


def _model(cell: str, config: str) -> torch.nn.Module:
    torch.manual_seed(0)
    rnn = CELLS[cell](4, 6, batch_first=True, **CONFIGS[config])
    width = 12 if CONFIGS[config].get("bidirectional") else 6
    return torch.nn.ModuleDict({"rnn": rnn, "head": torch.nn.Linear(width, 1)})


MODELS = {(cell, config): _model(cell, config) for cell in CELLS for config in CONFIGS}


def _loss_fn(model):
    def loss(x):
        return model["head"](model["rnn"](x)[0]).pow(2).mean()
    return loss


def _input(i: int) -> torch.Tensor:
    return torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(i))


def _torch_compile_case(cell: str, config: str, mode: str) -> dict:
    """torch.compile's graphs and breaks over two calls (aot_eager in training). A measure."""
    import torch._dynamo.testing
    import torch._dynamo.utils

    torch._dynamo.utils.counters.clear()
    model = MODELS[cell, config]
    model.train(mode == "training")
    counter = torch._dynamo.testing.CompileCounterWithBackend(
        "aot_eager" if mode == "training" else "eager")
    compiled = torch.compile(_loss_fn(model), backend=counter)
    with torch.set_grad_enabled(mode == "training"):
        for i in range(2):
            loss = compiled(_input(i))
            if mode == "training":
                loss.backward()
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    return {"graphs": counter.frame_count, "breaks": breaks}


for _cell, _config in MODELS:
    for _mode in MODES:
        measure(f"nn_rnn/{_cell}/{_config}/{_mode}",
                functools.partial(_torch_compile_case, _cell, _config, _mode))


def _step(fn, model, x: torch.Tensor, training: bool) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss = fn(x)
    if not training:
        return [loss]
    loss.backward()
    return [loss.detach()] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("cell", "config"), sorted(MODELS), ids="-".join)
def test_recurrent_step_equals_eager_without_crashing(cell, config, mode, breaks):
    training = mode == "training"
    model = MODELS[cell, config]
    model.train(training)
    loss = _loss_fn(model)
    counter = CompileCounterWithBackend("aot_eager" if training else "eager")
    compiled = graphlift.compile(loss, backend=counter)
    with torch.set_grad_enabled(training):
        for i in range(2):
            expected = _step(loss, model, _input(i), training)
            got = _step(compiled, model, _input(i), training)
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                torch.testing.assert_close(g, e, atol=1e-6, rtol=1e-5)
    theirs = recorded(f"nn_rnn/{cell}/{config}/{mode}")
    assert counter.frame_count >= theirs["graphs"]
    lstm_breaks = [b for b in breaks if "torch.lstm with grad" in b.explanation]
    assert bool(lstm_breaks) == (cell == "lstm" and training)
