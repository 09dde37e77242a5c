"""``torch.utils.checkpoint.checkpoint``: the function becomes one ``tag_activation_checkpoint``
node over its subgraph, as under torch.compile, so AOTAutograd recomputes it in the backward
pass instead of saving its activations.

Each case runs eagerly (torch's own checkpoint), under graphlift and (recorded) under
torch.compile; see tests/hop_harness.py.

PYTEST_DONT_REWRITE: the cases' bytecode must be what the user wrote.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hop_harness import Collect, check, close, register, values
from reference import measure, recorded
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func
from torch.utils.checkpoint import checkpoint

import graphlift

PREFIX = "hop_checkpoint"


class Block(torch.nn.Module):
    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)
        with torch.no_grad():
            self.lin.weight.copy_(torch.linspace(-0.5, 0.5, width * width).reshape(width, width))
            self.lin.bias.fill_(0.1)

    def forward(self, x, scale=1.0):
        return self.norm(torch.nn.functional.gelu(self.lin(x)) * scale) + x


def inputs() -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, 12).reshape(3, 4).requires_grad_()


def train(fn, block, *args) -> list:
    x = inputs()
    loss = fn(x, *args)
    loss.backward()
    return [loss, x.grad, *(p.grad for p in block.parameters())]


def closure_non_reentrant(compile):
    block = Block()

    def f(x):
        return checkpoint(lambda y: block(y).sin(), x, use_reentrant=False).sum()

    return train(compile(f), block)


def module_with_arguments(compile):
    block = Block()

    def f(x, w):
        return checkpoint(block, x * w, 0.5, use_reentrant=False).pow(2).mean()

    return train(compile(f), block, torch.tensor([1.0, 2.0, 0.5, -1.0]))


def reentrant(compile):
    block = Block()

    def f(x):
        return checkpoint(block, x, use_reentrant=True).sum()

    return train(compile(f), block)


def stack_of_blocks(compile):
    blocks = torch.nn.ModuleList([Block(), Block(), Block()])

    def f(x):
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x.square().sum()

    x = inputs()
    loss = compile(f)(x)
    loss.backward()
    return [loss, x.grad, blocks[2].lin.weight.grad]


def keyword_arguments(compile):
    block = Block()

    def f(x):
        return checkpoint(block, x, use_reentrant=False, scale=2.0).sum()

    return train(compile(f), block)


def inference(compile):
    block = Block()

    def f(x):
        with torch.no_grad():
            return checkpoint(block, x, use_reentrant=False)

    return compile(f)(inputs())


def same_tensor_twice(compile):
    # One tensor passed as two arguments: one operand of the operator (fuzzer version 5, seeds
    # 500013 and nine more: "a body proxy reached a graph").
    block = Block()

    def f(x):
        return checkpoint(lambda a, b: block(a) * b, x, x, use_reentrant=False).sum()

    return train(compile(f), block)


CASES = [closure_non_reentrant, module_with_arguments, reentrant, stack_of_blocks,
         keyword_arguments, inference, same_tensor_twice]
for _case in CASES:
    register(PREFIX, _case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_checkpoint_as_torch_compile(case):
    check(case, recorded(f"{PREFIX}/{case.__name__}"))


def backward_ops(f, x: torch.Tensor) -> set[str]:
    """The aten operators of the backward graph AOTAutograd makes for graphlift's graph of
    ``f`` (after running the backward: values checked against eager by the callers)."""
    graphs = {}

    def keep(name):
        def compiler(gm, examples):
            graphs[name] = gm
            return make_boxed_func(gm.forward)
        return compiler

    def backend(gm, examples):
        compiled = aot_module_simplified(gm, examples, fw_compiler=keep("forward"),
                                         bw_compiler=keep("backward"))
        compiled._boxed_call = False  # it takes *args (see graphlift.backends._positional)
        return compiled

    graphlift.compile(f, backend=Collect(backend), fullgraph=True)(x).backward()
    return {str(n.target) for n in graphs["backward"].graph.nodes if n.op == "call_function"}


def test_the_backward_recomputes_the_body():
    """The forward saves the body's input, not its activations: the backward graph runs the
    body's tanh again, which it does not without the checkpoint (it reads the saved output)."""
    def body(y):
        return (y * 3).tanh().exp()

    def checkpointed(x):
        return checkpoint(body, x, use_reentrant=False).sum()

    def plain(x):
        return body(x).sum()

    x, y = inputs(), inputs()
    assert "aten.tanh.default" in backward_ops(checkpointed, x)
    assert "aten.tanh.default" not in backward_ops(plain, y)
    expected = inputs()
    plain(expected).backward()
    assert torch.allclose(x.grad, expected.grad) and torch.allclose(y.grad, expected.grad)


def test_a_body_that_writes_outside_runs_eagerly():
    """Without fullgraph, a refused body is a graph break: checkpoint runs eagerly, as written."""
    log = []

    def body(y):
        log.append(1)
        return y * 2

    def f(x):
        return checkpoint(body, x, use_reentrant=False) + 1

    counter = graphlift.testing.CompileCounter()
    out = graphlift.compile(f, backend=counter)(inputs())
    assert values(out) == values(inputs() * 2 + 1) and log == [1]
    assert graphlift.stats(f).graph_breaks == 1 and counter.frame_count == 1  # the + 1


def test_a_body_that_writes_outside_is_refused_under_fullgraph():
    holder = {}

    def f(x):
        def body(y):
            holder["y"] = y  # the refused store
            return y * 2

        return checkpoint(body, x, use_reentrant=False)

    with pytest.raises(graphlift.Unsupported) as info:
        graphlift.compile(f, backend="eager", fullgraph=True)(inputs())
    assert info.value.break_type == "higher_order_body"
    assert "the refused store" in str(info.value)


def test_writes_to_the_frames_own_values_are_refused():
    """A list made in the frame, or a variable of the frame (nonlocal), is outside the body:
    torch.cond would trace both branches' writes; checkpoint's backward would run them again."""

    def counts(x):
        calls = 0

        def body(y):
            nonlocal calls
            calls += 1
            return y * 2

        return checkpoint(body, x, use_reentrant=False), calls

    def appends(x):
        made = []

        def body(y):
            made.append(y)
            return y * 2

        return checkpoint(body, x, use_reentrant=False), len(made)

    for f in (counts, appends):
        with pytest.raises(graphlift.Unsupported, match="made outside it"):
            graphlift.compile(f, backend="eager", fullgraph=True)(inputs())
        out, n = graphlift.compile(f, backend="eager")(inputs())
        assert values(out) == values(inputs() * 2) and n == 1


def test_a_body_may_change_what_it_makes():
    def f(x):
        def body(y):
            parts = []
            parts.append(y.sin())
            parts.append(y.cos())
            return parts[0] + parts[1]

        return checkpoint(body, x, use_reentrant=False)

    counter = graphlift.testing.CompileCounter()
    out = graphlift.compile(f, backend=counter, fullgraph=True)(inputs())
    assert values(out) == values(inputs().sin() + inputs().cos()) and counter.frame_count == 1


# == transformers' gradient_checkpointing_enable() ==============================================
def checkpointed_model_step(name: str, compile) -> dict:
    """A training step of a tiny transformers model with gradient checkpointing: its loss and
    gradients, and the graphs and operators the backend received."""
    transformers = pytest.importorskip("transformers")  # noqa: F841 - build() needs it
    from test_transformers_models import build

    model, inputs = build(name)
    model.train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    inputs.setdefault("labels", inputs["input_ids"])
    backend = Collect(compile.keywords.pop("inner"))
    loss = compile(model, backend=backend)(**inputs).loss
    loss.backward()
    return {"seen": values([loss, *(p.grad for p in model.parameters())]),
            "graphs": len(backend.graphs), "operators": backend.operators()}


def _torch_compile_step(name: str) -> dict:
    from torch._dynamo.backends.registry import lookup_backend as torch_backend

    step = checkpointed_model_step(name, functools.partial(torch.compile,
                                                           inner=torch_backend("aot_eager")))
    return {"graphs": step["graphs"], "operators": step["operators"]}  # not every gradient


CHECKPOINTED_MODELS = ["llama", "gpt2_loss"]
for _name in CHECKPOINTED_MODELS:
    measure(f"{PREFIX}/transformers_{_name}", functools.partial(_torch_compile_step, _name))


@pytest.mark.parametrize("name", CHECKPOINTED_MODELS)
def test_gradient_checkpointing_of_a_transformers_model(name):
    from graphlift.backends import lookup_backend

    ours = checkpointed_model_step(name, functools.partial(graphlift.compile,
                                                           inner=lookup_backend("aot_eager")))
    graphlift.reset()
    eager_step = checkpointed_model_step(
        name, functools.partial(lambda fn, backend: fn, inner=None))
    theirs = recorded(f"{PREFIX}/transformers_{name}")
    assert close(ours["seen"], eager_step["seen"])
    assert ours["graphs"] <= theirs["graphs"]
    assert ours["operators"] == theirs["operators"] == ["tag_activation_checkpoint"]


def test_a_body_that_advances_an_iterator_from_outside_is_refused():
    def f(x):
        shifts = iter([1.0, 2.0])

        def body(y):
            return y + next(shifts)

        return checkpoint(body, x, use_reentrant=False), next(shifts)

    with pytest.raises(graphlift.Unsupported, match="made outside it"):
        graphlift.compile(f, backend="eager", fullgraph=True)(inputs())
    out, after = graphlift.compile(f, backend="eager")(inputs())
    assert values(out) == values(inputs() + 1) and after == 2.0
