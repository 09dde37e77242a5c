"""Tensor subclasses with ``__torch_function__``: compiled vs eager (values, the result's class,
Python attributes, what ``__torch_function__`` did), with graph and break counts against
torch.compile's recorded figures."""

from __future__ import annotations

import functools

import pytest
import torch
from reference import measure, recorded

import graphlift
from graphlift.graph_break import listeners
from graphlift.testing import CompileCounterWithBackend
from graphlift.variables.torch_function import is_traceable_subclass

SEEN: list[str] = []  # what the logging subclass's __torch_function__ saw, in order


class Logged(torch.Tensor):
    """Passes every call through ``super()``, logging the function's name."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        SEEN.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs or {})


class Doubling(torch.Tensor):
    """Overrides ``add``: the second operand counts twice."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.add or func in (torch.Tensor.add,):
            args = (args[0], args[1] * 2)
        return super().__torch_function__(func, types, args, kwargs or {})


class Plain(torch.Tensor):
    """No ``__torch_function__`` of its own: torch.Tensor's converts every result."""


class Scaled(torch.Tensor):
    """A Python method reading a Python attribute of the object."""

    def scaled(self):
        return self * self.scale


class Dispatching(torch.Tensor):
    """A ``__torch_dispatch__`` subclass: not traced, runs eagerly."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def chain(x, y):
    return (x + y).sin() * 2


def adds(x, y):
    return torch.add(x, y) + x.add(y)


def method(x):
    return x.scaled() + 1


def made_in_frame(x):
    y = x.as_subclass(Plain)
    return y.cos(), isinstance(y, Plain), type(y * 2) is Plain


def split_results(x):
    a, b = x.split(2)
    return a + b


def _inputs(case: str) -> list:
    base = torch.arange(4.0)
    if case == "logged":
        return [base.as_subclass(Logged), torch.ones(4)]
    if case == "doubling":
        return [base.as_subclass(Doubling), torch.ones(4)]
    if case == "plain":
        return [base.as_subclass(Plain), torch.ones(4)]
    if case == "scaled":
        x = base.as_subclass(Scaled)
        x.scale = 3.0
        return [x]
    if case in ("made_in_frame", "split"):
        return [base]
    if case == "split_plain":
        return [base.as_subclass(Plain)]
    if case == "split_logged":
        return [base.as_subclass(Logged)]
    raise KeyError(case)


CASES = {
    "logged": chain, "doubling": adds, "plain": chain, "scaled": method,
    "made_in_frame": made_in_frame, "split": split_results, "split_plain": split_results,
    "split_logged": split_results,
}

# torch.compile's (graphs, breaks) where they are not one graph: Tensor.split, a Python method
# of torch.Tensor, on a subclass's object. It runs the frame eagerly for a subclass without a
# __torch_function__ of its own, and makes two graphs for one with one; graphlift makes one.
TORCH_COMPILE_COUNTS = {"split_plain": (0, 0), "split_logged": (2, 0)}


def _torch_compile_counts(case: str) -> dict:
    import torch._dynamo.testing
    import torch._dynamo.utils

    torch._dynamo.utils.counters.clear()
    counter = torch._dynamo.testing.CompileCounter()
    out = torch.compile(CASES[case], backend=counter)(*_inputs(case))
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    first = out[0] if isinstance(out, tuple) else out
    return {"graphs": counter.frame_count, "breaks": breaks, "type": type(first).__name__}


for _case in CASES:
    measure(f"tensor_subclasses/{_case}", functools.partial(_torch_compile_counts, _case))


def _compiled(fn, args):
    graphlift.reset()
    counter = CompileCounterWithBackend("eager")
    breaks: list = []
    listeners.append(breaks.append)
    try:
        out = graphlift.compile(fn, backend=counter)(*args)
    finally:
        listeners.remove(breaks.append)
    return out, counter.frame_count, len(breaks)


def _same(got, expected) -> None:
    if isinstance(expected, tuple):
        assert type(got) is tuple and len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e)
        return
    assert type(got) is type(expected)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got.as_subclass(torch.Tensor),
                                   expected.as_subclass(torch.Tensor))
        assert got.__dict__ == expected.__dict__
    else:
        assert got == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_subclass_traced_like_eager_in_one_graph(case):
    fn = CASES[case]
    SEEN.clear()
    expected = fn(*_inputs(case))
    seen_eager = list(SEEN)
    SEEN.clear()
    got, graphs, breaks = _compiled(fn, _inputs(case))
    _same(got, expected)
    assert SEEN == seen_eager  # __torch_function__ ran for the same calls, in the same order
    theirs = recorded(f"tensor_subclasses/{case}")
    first = got[0] if isinstance(got, tuple) else got
    assert theirs["type"] == type(first).__name__
    assert (graphs, breaks) == (1, 0)
    torch_compile = TORCH_COMPILE_COUNTS.get(case, (1, 0))
    assert (theirs["graphs"], theirs["breaks"]) == torch_compile


def test_class_and_attribute_are_guarded():
    counter = CompileCounterWithBackend("eager")
    graphlift.reset()
    compiled = graphlift.compile(method, backend=counter)
    x, = _inputs("scaled")
    _same(compiled(x), method(x))
    x.scale = 5.0  # the attribute read is guarded: a recompile, the new value used
    _same(compiled(x), method(x))
    assert counter.frame_count == 2
    plain = graphlift.compile(chain, backend=counter)
    for args in (_inputs("plain"), [torch.arange(4.0), torch.ones(4)], _inputs("logged")):
        SEEN.clear()
        expected, seen = chain(*args), list(SEEN)
        SEEN.clear()
        _same(plain(*args), expected)
        assert SEEN == seen
    assert counter.frame_count == 5  # one graph per class: the exact class is guarded


def test_a_cached_call_runs_the_traced_torch_function_again():
    graphlift.reset()
    compiled = graphlift.compile(chain, backend="eager")
    for _ in range(2):
        SEEN.clear()
        compiled(*_inputs("logged"))
        assert SEEN == ["add", "sin", "mul"]


def test_torch_dispatch_subclass_is_not_traced():
    assert not is_traceable_subclass(Dispatching)
    assert not is_traceable_subclass(torch.nn.Parameter)
    assert is_traceable_subclass(Logged) and is_traceable_subclass(Plain)
