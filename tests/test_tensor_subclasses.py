"""Tensor subclasses with ``__torch_function__``: compiled vs eager (values, the result's class,
Python attributes, what ``__torch_function__`` did), with graph and break counts against
torch.compile's recorded figures."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
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


class Unwrapping(torch.Tensor):
    """Runs every call with subclass dispatch off: results are plain tensors."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        SEEN.append(func.__name__)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class Zeroing(torch.Tensor):
    """Answers F.gelu itself, tested by identity, and logs whether func is F.relu."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        SEEN.append(f"{func.__name__}:{func is F.relu}")
        if func is F.gelu:
            return torch.zeros(1)
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


def reversed_operands(x):
    return 1 - x, 2 ** x, 3 / x, 1 + x


def operators(x, y):
    return x // (y + 1), x ** 2, x != y, x < y, -x, x @ y


def getters(x):
    return x[1:] * x.ndim, x.T, x.sum(0), x.shape, x.dtype, type(x).__name__


def in_place(x, y):
    x.add_(1)
    return torch.cat([x, y]), torch.stack((y, x))


def break_between(x):
    y = x + 1
    print("between")
    return y * 2, type(y).__name__


def attribute_store(x):
    y = x * 2
    y.tag = "made"
    return y + 1, y.tag


def store_then_break(x):
    y = x * 2
    y.tag, y.total = "made", x.sum()
    print("between")
    return y, y, y.tag


SUBCLASSES = {"logged": Logged, "doubling": Doubling, "plain": Plain, "unwrapping": Unwrapping,
              "zeroing": Zeroing}


def functional(x, y):
    return F.relu(x - 2), F.gelu(x), F.linear(x, y.reshape(1, 4))


def length_and_rows(x):
    rows = []
    for row in x:
        rows.append(row * 2)
    return len(x) + 1, rows


def views_and_copies(x):
    return (x.view(-1), x.reshape(2, 2), x.unsqueeze(0).squeeze(0), x.unbind(0),
            x.new_zeros(2), torch.zeros_like(x), x.clone().detach(), x.to(torch.float64),
            x.numel(), x.stride())


def _inputs(case: str) -> list:
    name, _, cls = case.partition("/")
    if cls:  # a case that runs on each subclass: "fn/subclass"
        return [torch.arange(1.0, 5.0).as_subclass(SUBCLASSES[cls]), torch.ones(4)][
            :CASES[case].__code__.co_argcount]
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
    **{f"{fn.__name__}/{cls}": fn
       for fn in (reversed_operands, operators, getters, in_place, functional, length_and_rows,
                  views_and_copies)
       for cls in SUBCLASSES},
}

# torch.compile's (graphs, breaks), or the exception it raises, where it does not make one graph
# as graphlift does. Tensor.split (a Python method of torch.Tensor) on a subclass's object: the
# frame runs eagerly for a subclass without a __torch_function__ of its own, two graphs for one
# with one. Reversed operators (``1 - x``) and ``operators`` (``//``, ``**``, ``!=``...): the
# frame runs eagerly. Getters (``x.T``): an
# internal AssertionError ("source must be None for ValueMutationNew"), and with subclass
# dispatch off inside __torch_function__, a recompile per call of the frame.
TORCH_COMPILE_COUNTS = {
    "split_plain": (0, 0), "split_logged": (2, 0),
    **{f"{fn}/{cls}": (0, 0) for fn in ("reversed_operands", "operators") for cls in SUBCLASSES},
    **{f"getters/{cls}": "AssertionError"
       for cls in ("logged", "doubling", "plain", "zeroing")},
    "getters/unwrapping": (9, 0),
}


def _torch_compile_counts(case: str) -> dict:
    import torch._dynamo.testing
    import torch._dynamo.utils

    torch._dynamo.utils.counters.clear()
    counter = torch._dynamo.testing.CompileCounter()
    try:
        out = torch.compile(CASES[case], backend=counter)(*_inputs(case))
    except Exception as error:  # torch.compile's own failure, recorded as such
        return {"error": type(error).__name__}
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    first = out[0] if type(out) is tuple else out
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
    if type(expected) in (tuple, list):
        assert type(got) is type(expected) and len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e)
        return
    assert type(got) is type(expected)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got.as_subclass(torch.Tensor),
                                   expected.as_subclass(torch.Tensor))
        assert sorted(got.__dict__) == sorted(expected.__dict__)
        for name in expected.__dict__:
            _same(got.__dict__[name], expected.__dict__[name])
    else:
        assert got == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_subclass_traced_like_eager_in_one_graph(case, capsys):
    fn = CASES[case]
    SEEN.clear()
    expected = fn(*_inputs(case))
    printed = capsys.readouterr().out
    seen_eager = list(SEEN)
    SEEN.clear()
    got, graphs, breaks = _compiled(fn, _inputs(case))
    assert SEEN == seen_eager  # __torch_function__ ran for the same calls, in the same order
    _same(got, expected)
    assert (graphs, breaks) == (1, 0)
    assert capsys.readouterr().out == printed
    theirs = recorded(f"tensor_subclasses/{case}")
    torch_compile = TORCH_COMPILE_COUNTS.get(case, (1, 0))
    if isinstance(torch_compile, str):
        assert theirs == {"error": torch_compile}
        return
    assert (theirs["graphs"], theirs["breaks"]) == torch_compile
    first = got[0] if type(got) is tuple else got
    assert theirs["type"] == type(first).__name__


# A graph break with a subclass's object alive: the rest runs on the object rebuilt from the
# graph's plain output, once (its identity kept), with its class and the attributes the frame
# stored on it. (graphs, breaks), the same for graphlift and torch.compile.
# (After store_then_break's break nothing is left to compute: no second graph.)
BREAK_CASES = {
    "break_between": (break_between, (2, 1)),
    "attribute_store": (attribute_store, (1, 0)),
    "store_then_break": (store_then_break, (1, 1)),
}


def _torch_compile_break_counts(case: str) -> dict:
    import torch._dynamo.testing
    import torch._dynamo.utils

    torch._dynamo.utils.counters.clear()
    counter = torch._dynamo.testing.CompileCounter()
    torch.compile(BREAK_CASES[case][0], backend=counter)(torch.arange(4.0).as_subclass(Logged))
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    return {"graphs": counter.frame_count, "breaks": breaks}


for _case in BREAK_CASES:
    measure(f"tensor_subclasses/break/{_case}",
            functools.partial(_torch_compile_break_counts, _case))


@pytest.mark.parametrize("case", sorted(BREAK_CASES))
def test_graph_break_and_attribute_store(case, capsys):
    fn, counts = BREAK_CASES[case]
    SEEN.clear()
    expected = fn(torch.arange(4.0).as_subclass(Logged))
    printed, seen = capsys.readouterr().out, list(SEEN)
    SEEN.clear()
    got, graphs, breaks = _compiled(fn, [torch.arange(4.0).as_subclass(Logged)])
    assert SEEN == seen
    _same(got, expected)
    assert capsys.readouterr().out == printed
    if case == "store_then_break":
        assert got[0] is got[1]
    theirs = recorded(f"tensor_subclasses/break/{case}")
    assert (graphs, breaks) == (theirs["graphs"], theirs["breaks"]) == counts


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


def test_one_object_given_twice_stays_one():
    def bump(x, y):
        x.add_(1)
        return x is y, y * 2

    graphlift.reset()
    compiled = graphlift.compile(bump, backend="eager")
    x = torch.arange(4.0).as_subclass(Logged)
    expected = bump(x.clone(), x.clone())
    got = compiled(x, x)  # one object: the write is seen through both names
    assert got[0] is True
    torch.testing.assert_close(got[1].as_subclass(torch.Tensor), torch.arange(2.0, 10.0, 2.0))
    fresh = torch.arange(4.0).as_subclass(Logged)
    _same(compiled(fresh, fresh.clone()), expected)  # two objects: guarded, a recompile


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradient_reaches_a_subclass_leaf(backend):
    def loss(w, z):
        return (w * z).sum()

    w = torch.ones(3).as_subclass(Logged).requires_grad_()
    expected = loss(w, torch.arange(3.0))
    expected.backward()
    expected_grad, w.grad = w.grad.clone(), None
    got, graphs, breaks = _compiled(loss, [w, torch.arange(3.0)])
    got.backward()
    _same(got.detach(), expected.detach())
    torch.testing.assert_close(w.grad, expected_grad)
    assert (graphs, breaks) == (1, 0)


class TaggedParameter(torch.nn.Parameter):
    """A Parameter subclass without a __torch_function__ of its own: plain in every call."""


class Opaque(torch.Tensor):
    """torch's disabled __torch_function__, as nn.Parameter has: results are plain tensors."""

    __torch_function__ = torch._C._disabled_torch_function_impl


class TaggedLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = TaggedParameter(torch.randn(3, 3))
        self.bias = torch.nn.Parameter(torch.zeros(3))

    def forward(self, x):
        out = F.linear(x, self.weight, self.bias).relu()
        return out, type(self.weight).__name__, isinstance(self.weight, TaggedParameter)


def opaque_input(t):
    return t * 2, type(t).__name__


def _torch_compile_plain_like(case: str) -> dict:
    import torch._dynamo.testing

    counter = torch._dynamo.testing.CompileCounter()
    torch.manual_seed(0)
    if case == "parameter_subclass":
        out = torch.compile(TaggedLinear(), backend=counter)(torch.randn(2, 3))
    else:
        out = torch.compile(opaque_input, backend=counter)(torch.ones(2).as_subclass(Opaque))
    return {"graphs": counter.frame_count, "type": type(out[0]).__name__}


for _case in ("parameter_subclass", "opaque_input"):
    measure(f"tensor_subclasses/{_case}", functools.partial(_torch_compile_plain_like, _case))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_parameter_subclass_as_a_module_weight(backend):
    torch.manual_seed(0)
    module, x = TaggedLinear(), torch.randn(2, 3)
    expected = module(x)
    expected[0].sum().backward()
    expected_grad = module.weight.grad.clone()
    module.weight.grad = None
    got, graphs, breaks = _compiled(module, [x])
    got[0].sum().backward()
    _same(got[0].detach(), expected[0].detach())
    assert got[1:] == expected[1:] == ("TaggedParameter", True)
    torch.testing.assert_close(module.weight.grad, expected_grad)
    theirs = recorded("tensor_subclasses/parameter_subclass")
    assert (graphs, breaks) == (theirs["graphs"], 0) == (1, 0)
    assert theirs["type"] == type(got[0]).__name__ == "Tensor"


def test_disabled_torch_function_subclass_input_is_guarded_on_its_class():
    counter = CompileCounterWithBackend("eager")
    graphlift.reset()
    compiled = graphlift.compile(opaque_input, backend=counter)
    t = torch.ones(2).as_subclass(Opaque)
    _same(compiled(t), opaque_input(t))
    _same(compiled(torch.ones(2)), opaque_input(torch.ones(2)))  # another class: recompiles
    theirs = recorded("tensor_subclasses/opaque_input")
    assert counter.frame_count == 2 and theirs == {"graphs": 1, "type": "Tensor"}


def test_replacing_the_class_torch_function_recompiles():
    class Swapped(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    def negate(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            return -func(*args, **(kwargs or {}))

    def double(x):
        return x * 2

    graphlift.reset()
    compiled = graphlift.compile(double, backend="eager")
    x = torch.ones(2).as_subclass(Swapped)
    _same(compiled(x), double(x))
    Swapped.__torch_function__ = classmethod(negate)
    expected = double(x)
    assert type(expected) is torch.Tensor and expected.tolist() == [-2.0, -2.0]
    _same(compiled(x), expected)
