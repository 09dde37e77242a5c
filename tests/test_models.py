"""The model zoo (benchmarks/models) at tiny sizes: compiled output equals eager, graph counts,
and training steps whose gradients equal eager's."""

import copy
import functools
import sys
from pathlib import Path

import pytest
import torch
from reference import measure, recorded

import graphlift
from graphlift.testing import CompileCounter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from models import make  # noqa: E402

transformers = pytest.importorskip("transformers")

# name -> graphs captured for one call (torch.compile 2.13 also captures one graph for each;
# for ``vision``, recorded below).
GRAPHS = {"mlp": 1, "cnn": 1, "gpt": 1, "hf_gpt2": 1, "hf_bert": 1, "vision": 1}


def close(a, b, atol=1e-5):
    torch.testing.assert_close(a, b, atol=atol, rtol=1e-4)


def output_tensor(out):
    return out if isinstance(out, torch.Tensor) else out[0]


@pytest.mark.parametrize("name", list(GRAPHS))
def test_inference_matches_eager(name):
    case = make(name)
    model = case.model.eval()
    counter = CompileCounter()
    cm = graphlift.compile(model, backend=counter)
    with torch.no_grad():
        for seed in (0, 1):
            torch.manual_seed(seed)
            args = case.inputs()
            close(output_tensor(cm(*args)), output_tensor(model(*args)))
    assert counter.frame_count == GRAPHS[name]
    assert graphlift.stats(cm).compiles == 1


@pytest.mark.parametrize("name", ["cnn"])
def test_training_mode_forward_updates_buffers_like_eager(name):
    case = make(name)
    reference = copy.deepcopy(case.model)
    cm = graphlift.compile(case.model, backend="aot_eager")
    args = case.inputs()
    for _ in range(2):
        close(cm(*args), reference(*args))
    for mine, theirs in zip(case.model.buffers(), reference.buffers()):
        close(mine, theirs)


@pytest.mark.parametrize("name,backend", [("gpt", "eager"), ("gpt", "aot_eager"),
                                          ("cnn", "aot_eager"), ("hf_gpt2", "aot_eager")])
def test_training_steps_give_eager_gradients(name, backend):
    case = make(name)
    reference = copy.deepcopy(case.model)
    cm = graphlift.compile(case.model, backend=backend)
    opt = torch.optim.AdamW(case.model.parameters(), lr=1e-3)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-3)
    args = case.inputs()
    for _ in range(3):
        for module, optimizer in ((cm, opt), (reference, ref_opt)):
            optimizer.zero_grad()
            case.loss(module(*args)).backward()
        for mine, theirs in zip(case.model.parameters(), reference.parameters()):
            close(mine.grad, theirs.grad, atol=1e-4)
        opt.step()
        ref_opt.step()
    assert graphlift.stats(cm).compiles == 1


def _torch_compile_graphs_and_breaks(name: str, training: bool) -> list[int]:
    """torch.compile's graphs and breaks for one forward of model ``name``."""
    import torch._dynamo.testing
    import torch._dynamo.utils

    case = make(name)
    counter = torch._dynamo.testing.CompileCounter()
    torch._dynamo.utils.counters.clear()
    with torch.set_grad_enabled(training):
        torch.compile(case.model.train(training), backend=counter)(*case.inputs())
    return [counter.frame_count, sum(torch._dynamo.utils.counters["graph_break"].values())]


for _mode in ("eval", "train"):
    measure(f"models/vision_{_mode}", functools.partial(_torch_compile_graphs_and_breaks,
                                                        "vision", _mode == "train"))


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_torchvision_style_usage_logging_is_traced(mode):
    """Each block of a torchvision-style model logs its use, and ``stochastic_depth`` does in
    every forward, reading its own ``__module__`` and ``__name__``: in the graph, no break, as
    under torch.compile (recorded)."""
    case = make("vision")
    model = case.model.train(mode == "train")
    with torch.set_grad_enabled(mode == "train"):
        report = graphlift.explain(type(model).forward)(model, *case.inputs())
    assert [report.graph_count, report.graph_break_count] == recorded(f"models/vision_{mode}")
    assert report.graph_count == 1
