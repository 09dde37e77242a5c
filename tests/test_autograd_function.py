"""Custom ``torch.autograd.Function``s and ``assume_constant_result`` marks, against eager and
torch.compile (its counts recorded: tests/reference).

Without an input that requires grad, ``apply`` is ``forward`` inlined (its ops join the graph);
with one, ``apply`` is one node that a differentiating backend traces through, so the class's own
``backward`` gives the gradients. Each backward here is deliberately *not* the true derivative,
so equal gradients prove the custom backward ran, not autograd's derivative of the forward.
"""

from __future__ import annotations

import functools

import pytest
import torch
from reference import measure, recorded

import graphlift
from graphlift.graph_break import listeners
from graphlift.testing import CompileCounterWithBackend


class Square(torch.autograd.Function):
    """x * x + 1 with a context, and a backward of 3 * x (not 2 * x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.scale = 3
        return x * x + 1

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * ctx.scale * x


class ScaledMul(torch.autograd.Function):
    """The setup_context style, a non-tensor argument, two outputs."""

    @staticmethod
    def forward(x, y, alpha):
        return x * y * alpha, x + y

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y, alpha = inputs
        ctx.save_for_backward(x, y)
        ctx.alpha = alpha

    @staticmethod
    def backward(ctx, grad_prod, grad_sum):
        x, y = ctx.saved_tensors
        return grad_prod * y + grad_sum, grad_prod * x * ctx.alpha + 2 * grad_sum, None


def square_sum(x):
    return Square.apply(x.sin()).sum()


def scaled(x, y):
    prod, total = ScaledMul.apply(x, y, 2.0)
    return (prod * total).sum()


CASES = {"ctx": (square_sum, 1), "setup_context": (scaled, 2)}


def _counts_graphlift(fn, args, backend):
    graphlift.reset()
    counter = CompileCounterWithBackend(backend)
    breaks: list = []
    listeners.append(breaks.append)
    try:
        out = graphlift.compile(fn, backend=counter)(*args)
    finally:
        listeners.remove(breaks.append)
    return out, counter.frame_count, len(breaks), counter.op_count


def _counts_torch(fn, args, backend) -> dict:
    """torch.compile's graphs, breaks and ops for one call."""
    import torch._dynamo.testing
    import torch._dynamo.utils

    torch._dynamo.utils.counters.clear()
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
    torch.compile(fn, backend=counter)(*args)
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    return {"graphs": counter.frame_count, "breaks": breaks, "ops": counter.op_count}


def _torch_compile_case(case: str, backend: str, requires_grad: bool) -> dict:
    fn, arity = CASES[case]
    torch.manual_seed(0)
    args = [torch.randn(4, requires_grad=requires_grad) for _ in range(arity)]
    with torch.set_grad_enabled(requires_grad):
        return _counts_torch(fn, args, backend)


for _case in CASES:
    measure(f"autograd_function/no_grad/{_case}",
            functools.partial(_torch_compile_case, _case, "eager", False))
    for _backend in ("eager", "aot_eager"):
        measure(f"autograd_function/training/{_case}/{_backend}",
                functools.partial(_torch_compile_case, _case, _backend, True))


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_grad_inlines_forward_like_torch_compile(case):
    fn, arity = CASES[case]
    args = [torch.randn(4) for _ in range(arity)]
    with torch.no_grad():
        expected = fn(*args)
        got, graphs, breaks, ops = _counts_graphlift(fn, args, "eager")
    theirs = recorded(f"autograd_function/no_grad/{case}")
    torch.testing.assert_close(got, expected)
    assert (graphs, breaks) == (theirs["graphs"], theirs["breaks"]) == (1, 0)
    assert ops == theirs["ops"]  # forward's ops, inlined by both


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_training_uses_the_custom_backward(case, backend):
    fn, arity = CASES[case]
    leaves = [torch.randn(4, requires_grad=True) for _ in range(arity)]
    expected = fn(*leaves)
    expected.backward()
    expected_grads = [leaf.grad.clone() for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None
    got, graphs, breaks, _ = _counts_graphlift(fn, leaves, backend)
    got.backward()
    torch.testing.assert_close(got, expected)
    for leaf, grad in zip(leaves, expected_grads):
        torch.testing.assert_close(leaf.grad, grad)
        leaf.grad = None
    theirs = recorded(f"autograd_function/training/{case}/{backend}")
    assert (graphs, breaks) == (theirs["graphs"], theirs["breaks"]) == (1, 0)


def test_grad_enabled_without_inputs_requiring_grad_gives_no_grad_fn():
    x = torch.randn(3)
    got, graphs, breaks, _ = _counts_graphlift(square_sum, [x], "eager")
    assert not got.requires_grad and got.grad_fn is None
    torch.testing.assert_close(got, square_sum(x))
    assert (graphs, breaks) == (1, 0)


def test_forward_break_is_reported_and_runs_eagerly(capsys):
    class Printing(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            print("forward")
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad

    def fn(x):
        return Printing.apply(x) + 1

    x = torch.randn(2)
    with torch.no_grad():
        got, graphs, breaks, _ = _counts_graphlift(fn, [x], "eager")
        assert not torch.is_grad_enabled()  # the abandoned inlining left grad mode as it was
    assert torch.is_grad_enabled()
    torch.testing.assert_close(got, x * 2 + 1)
    assert capsys.readouterr().out == "forward\n"  # once, as eager prints it
    assert breaks >= 1


# -- torch._dynamo.assume_constant_result (transformers' install probes) ------------------------
CALLS = []


def probe(name: str) -> bool:
    CALLS.append(name)
    return name == "torch"


probe._dynamo_marked_constant = True  # what torch._dynamo.assume_constant_result sets


def uses_probe(x):
    if probe("torch"):
        return x + 1
    return x - 1


def _torch_compile_uses_probe() -> dict:
    saved = list(CALLS)
    try:
        return _counts_torch(uses_probe, [torch.randn(3)], "eager")
    finally:
        CALLS[:] = saved


measure("autograd_function/assume_constant_result", _torch_compile_uses_probe)


def test_a_marked_constant_function_runs_once_while_tracing_and_folds():
    CALLS.clear()
    x = torch.randn(3)
    got, graphs, breaks, ops = _counts_graphlift(uses_probe, [x], "eager")
    torch.testing.assert_close(got, x + 1)
    assert CALLS == ["torch"]  # called for real once while tracing, not traced
    theirs = recorded("autograd_function/assume_constant_result")
    assert (graphs, breaks, ops) == (theirs["graphs"], theirs["breaks"], theirs["ops"]) == \
        (1, 0, 1)
