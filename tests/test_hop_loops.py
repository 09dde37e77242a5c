"""``while_loop``, ``map`` and ``scan`` (torch._higher_order_ops): one operator node each, as
under torch.compile, so the graph does not grow with the number of steps.

Each case runs eagerly (the operator's Python meaning), under graphlift and (recorded) under
torch.compile; see tests/hop_harness.py.

PYTEST_DONT_REWRITE: the cases' bytecode must be what the user wrote.
"""

from __future__ import annotations

import pytest
import torch
import torch._higher_order_ops as hops
from hop_harness import Collect, check, register
from reference import recorded

import graphlift
from graphlift.backends import lookup_backend

PREFIX = "hop_loops"
WEIGHT = torch.tensor([0.5, -1.0, 2.0, 0.25])


def rows(n: int = 5) -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, n * 4).reshape(n, 4)


# == while_loop =================================================================================
def while_counts_up(compile):
    def f(x):
        return hops.while_loop(lambda i, x: i < 5, lambda i, x: (i + 1, x * WEIGHT + 1),
                               (torch.tensor(0), x))

    fn = compile(f)
    return [fn(torch.ones(4)), fn(torch.arange(4.0))]


def while_on_data(compile):
    def f(x, limit):
        def cond_fn(x):
            return x.sum() < limit

        def body_fn(x):
            return (x * 2 + 0.5,)

        return hops.while_loop(cond_fn, body_fn, (x,))

    fn = compile(f)
    return [fn(torch.full((4,), 0.1), torch.tensor(40.0)), fn(torch.ones(4), torch.tensor(3.0))]


# == map ========================================================================================
def map_rows(compile):
    def f(xs, y):
        return hops.map(lambda row, y: (row * y + WEIGHT).sin(), xs, y)

    fn = compile(f)
    return [fn(rows(), torch.ones(4)), fn(rows(7), torch.arange(4.0))]


def map_module_over_a_tuple(compile):
    lin = torch.nn.Linear(4, 3)
    torch.nn.init.constant_(lin.weight, 0.125)
    torch.nn.init.zeros_(lin.bias)

    def body(pair):
        a, b = pair
        return lin(a) + lin(b), a - b

    def f(a, b):
        return hops.map(body, (a, b))

    return compile(f)(rows(), rows() * 2)


def map_training(compile):
    lin = torch.nn.Linear(4, 4)
    torch.nn.init.constant_(lin.weight, 0.5)
    torch.nn.init.constant_(lin.bias, 0.1)

    def f(xs):
        return hops.map(lambda row: lin(row).tanh(), xs).sum()

    xs = rows().requires_grad_()
    loss = compile(f)(xs)
    loss.backward()
    return [loss, xs.grad, lin.weight.grad]


# == scan =======================================================================================
def scan_cumulative(compile):
    def f(init, xs):
        return hops.scan(lambda carry, x: (carry + x * WEIGHT, carry.clone()), init, xs)

    fn = compile(f)
    return [fn(torch.zeros(4), rows()), fn(torch.ones(4), rows(9))]


def scan_dim_and_reverse(compile):
    def f(init, xs):
        return hops.scan(lambda c, x: (c * 0.5 + x, (c + x).relu()), init, xs, dim=1,
                         reverse=True)

    return compile(f)(torch.zeros(5), rows())


def scan_tuple_carry(compile):
    def step(carry, x):
        total, count = carry
        return (total + x, count + 1), total / count

    def f(xs):
        return hops.scan(step, (torch.zeros(4), torch.ones(4)), xs)

    return compile(f)(rows())


CASES = [while_counts_up, while_on_data, map_rows, map_module_over_a_tuple, map_training,
         scan_cumulative, scan_dim_and_reverse, scan_tuple_carry]
# Not here: gradients through scan. torch's own scan backward (its HopGraphMinCutPartitioner)
# calls nn.Module.compile, that is torch.compile, which the suite never runs in its processes.
for _case in CASES:
    register(PREFIX, _case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_loop_operators_as_torch_compile(case):
    check(case, recorded(f"{PREFIX}/{case.__name__}"))


@pytest.mark.parametrize("length", [4, 64, 512])
def test_graph_size_does_not_grow_with_the_length(length):
    backend = Collect(lookup_backend("eager"))
    fn = graphlift.compile(lambda init, xs: hops.scan(lambda c, x: (c + x, c * x), init, xs),
                           backend=backend, fullgraph=True)
    fn(torch.zeros(4), torch.ones(length, 4))
    (gm,) = backend.graphs
    sizes = [len(gm.graph.nodes), *(len(m.graph.nodes) for m in gm.children())]
    assert sizes == [7, 5]  # any length: 2 inputs, get_attr, scan, 2 getitems, output; the body


def test_a_body_that_prints_is_refused_naming_its_line():
    def f(xs):
        def body(row):
            print(row)  # the refused print
            return row + 1

        return hops.map(body, xs)

    with pytest.raises(graphlift.Unsupported) as info:
        graphlift.compile(f, backend="eager", fullgraph=True)(rows())
    assert info.value.break_type == "higher_order_body"
    assert "the refused print" in str(info.value)


def test_a_carry_that_changes_shape_is_refused():
    def f(x):
        return hops.while_loop(lambda x: x.sum() < 10, lambda x: (x.repeat(2),), (x,))

    with pytest.raises(graphlift.Unsupported, match="carries like carried_inputs"):
        graphlift.compile(f, backend="eager", fullgraph=True)(torch.ones(2))
