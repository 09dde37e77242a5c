"""Graph breaks with resume functions: differential tests against eager Python.

Every case is a function with one or more graph breaks (a print, a branch on a tensor's value,
``.item()`` feeding Python control flow, a call graphlift refuses, a break inside an inlined
callee, inside ``with torch.no_grad()``, several in a row, with containers live on the stack, in
closures and in functions with defaults, ``*args`` and ``**kwargs``). ``run_break_case`` runs it
eagerly and compiled and compares the return value, printed output, the arguments afterwards and
the module's global state; checks the graph and break counts reported by ``graphlift.explain``;
and calls the compiled function again with fresh inputs to check that nothing recompiles.

``@case(graphs, breaks, make)`` holds torch.compile's numbers for the same function on torch
2.13, read side by side in a scratch script while writing these tests (torch.compile is not run
here, to keep the suite fast): ``graphs`` is what ``torch._dynamo.testing.CompileCounter`` counts
(equal to ``torch._dynamo.explain(fn)(...).graph_count``), and ``breaks`` is the number of
``Graph break in user code at ...`` records torch.compile logs under ``TORCH_LOGS=graph_breaks``.
(``torch._dynamo.explain``'s own ``graph_break_count`` is just ``graph_count - 1``, which misses
breaks with no graph on one side, so it is not used.) graphlift must report the same numbers
through ``graphlift.explain`` and a :class:`~graphlift.testing.CompileCounter` backend.

Where graphlift differs on purpose or where torch.compile does something special, the case holds
graphlift's numbers and ``tc=(graphs, breaks)`` records torch.compile's, with a comment saying
why. Where graphlift falls short of torch.compile (a known gap, reported to the lead), the case
holds torch.compile's numbers and ``gap=`` names the gap: its counts test is a strict xfail, so it
starts failing (XPASS) when the gap closes. The results test of every case must pass regardless.

PYTEST_DONT_REWRITE: pytest's assert rewriting would change the bytecode of the cases (an
``assert`` in a case must stay the plain ``assert`` torch.compile saw).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import os
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from corpus.harness import assert_same

import graphlift
from graphlift import cache
from graphlift.graph_break import listeners as break_listeners
from graphlift.testing import CompileCounter


@dataclass(frozen=True)
class BreakCase:
    name: str
    fn: Callable
    make: Callable[[], tuple]  # fresh positional arguments on every call
    graphs: int
    breaks: int
    tc: tuple[int, int] | None  # torch.compile's (graphs, breaks) where graphlift differs
    gap: str | None  # a known graphlift gap: the counts test is expected to fail until fixed


CASES: list[BreakCase] = []


def case(graphs: int, breaks: int, make: Callable[[], tuple] | None = None,
         tc: tuple[int, int] | None = None, gap: str | None = None) -> Callable:
    """Register the decorated function as a case (``make`` defaults to one 4-float tensor)."""
    def register(fn: Callable) -> Callable:
        CASES.append(BreakCase(fn.__name__, fn, make or (lambda: (t(4),)), graphs, breaks, tc,
                               gap))
        return fn

    return register


def t(*shape: int, seed: int = 0, shift: float = 0.0, grad: bool = False) -> torch.Tensor:
    """A deterministic random tensor (same values on every call with the same seed)."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator) + shift).requires_grad_(grad)


def pos() -> tuple:
    """One tensor whose sum, mean and max are positive."""
    return (t(4, shift=3.0),)


def neg() -> tuple:
    """One tensor whose sum, mean and max are negative."""
    return (t(4, shift=-3.0),)


# Module state that cases mutate; reset before every run and compared after it.
LOG: list = []
STATE: dict = {}
COUNTER = 0


def reset_globals() -> None:
    global COUNTER
    LOG.clear()
    STATE.clear()
    COUNTER = 0


class Box:
    """A plain object for attribute reads and stores."""

    def __init__(self, value: Any = None) -> None:
        self.value = value

    def scale(self, x):
        print("Box.scale")
        return x * 2

    def shifted(self, x):
        return x + self.value


# -- callees that break (inlined into the caller until the break) -------------------------------
def helper_print(y):
    z = y * 2
    print("in helper")
    return z + 1


def helper_branch(y):
    if y.sum() > 0:
        return y * 2
    return y * -2


def helper_item(y):
    v = y.max().item()
    return y + v


def helper_outer(y):
    return helper_print(y + 1) - 1


def helper_pure(y):
    return y.cos()


def helper_pair(y):
    a = y + 1
    print("pair")
    return a, y - 1


def helper_kw(y, *, scale=1.0):
    print("scale", scale)
    return y * scale


def helper_print_none():
    print("side")


def helper_append(lst, y):
    lst.append(y * 2)
    print("appended")
    lst.append(y * 3)
    return len(lst)


def helper_default(y, k=3):
    print("default", k)
    return y * k


def make_adder(k):
    def add(y):
        print("adder", k)
        return y + k

    return add


ADD_TWO = make_adder(2)


# == print in the middle =========================================================================
@case(2, 1)
def print_mid(x):
    y = x + 1
    print("mid")
    return y * 2


@case(1, 1)
def print_first(x):
    print("first")
    return x.sin()


@case(1, 1)
def print_last(x):
    y = x.cos()
    print("last")
    return y


@case(2, 1)
def print_tensor(x):
    y = x * 3
    print(y)
    return y + 1


@case(2, 1)
def print_sep_end(x):
    y = x - 1
    print("a", 1, 2.5, sep="-", end="!\n")
    return y.abs()


@case(2, 1)
def print_shape(x):
    y = x.exp()
    print(x.shape[0], x.dim(), tuple(x.shape))
    return y.sum()


@case(2, 2)
def print_twice(x):
    y = x + 1
    print("one")
    print("two")
    return y * y


@case(2, 1)
def print_result_used(x):
    y = x * 2
    r = print("r")
    return y + (r is None)


@case(2, 1)
def print_live_locals(x):
    a = x + 1
    b = x * 2
    c = [a, 3]
    print("live")
    return a + b + c[0] * c[1]


@case(1, 1)
def print_list_literal(x):
    y = x.neg()
    print([1, 2, 3], {"k": (4, 5)})
    return y


@case(2, 1)
def print_two_tensors(x):
    s = x.sum()
    m = x.mean()
    print(s, m)
    return s - m


@case(2, 1, lambda: (t(4), t(4, seed=1), t(4, seed=2)))
def print_unread_arg(x, y, z):
    a = x * 2
    print("unread")
    return a + z


@case(2, 1, lambda: (t(3), 4))
def print_int_arg(x, n):
    y = x * n
    print(n, n + 1)
    return y + n


@case(2, 1)
def print_then_list(x):
    out = [x + 1]
    print(len(out))
    out.append(x * 2)
    return out


@case(2, 1)
def print_returns_tuple(x):
    a = x + 1
    print("tuple")
    return a, a * 2, "tag", None


@case(2, 1, lambda: (t(2, 3),))
def print_reshape(x):
    y = x.reshape(3, 2)
    print("reshaped")
    return y.t() @ y


# == branch on a tensor's value ==================================================================
@case(2, 1, pos)
def branch_pos(x):
    y = x.sin()
    if y.sum() > 0:
        return y + 1
    return y - 1


@case(2, 1, neg)
def branch_neg(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


@case(2, 1, neg)
def branch_fallthrough(x):
    if x.mean() < 0:
        x = x * 2
    return x + 1


@case(2, 1, pos)
def branch_any(x):
    if (x > 0).any():
        return x.relu()
    return x


@case(2, 1, neg)
def branch_not(x):
    y = x + 0.5
    if not (y.sum() > 0):
        return y * 10
    return y


@case(3, 2, pos)
def branch_and(x):
    if x.sum() > 0 and x.max() > 1:
        return x * 3
    return x


@case(3, 2, neg)
def branch_or(x):
    if x.sum() > 0 or x.min() > -10:
        return x * 3
    return x


@case(3, 2, pos)
def branch_nested(x):
    y = x.abs()
    if y.sum() > 0:
        if x.min() > 100:
            return y * 2
        return y * 3
    return y


@case(2, 1, pos)
def branch_ternary(x):
    return x + 1 if x.sum() > 0 else x - 1


@case(2, 1)
def branch_live_locals(x):
    a = x.sin()
    b = x.cos()
    if a.sum() > b.sum():
        return a - b
    return b - a


@case(2, 1, neg)
def branch_on_stored_condition(x):
    c = x.sum() > 0
    y = x * 2
    if c:
        return y
    return -y


@case(2, 1, pos)
def branch_truthiness(x):
    s = x.sum()
    if s:
        return x / s
    return x


@case(2, 1, pos)
def branch_value_on_stack(x):
    return x + (1 if x.sum() > 0 else 2)


@case(2, 1, neg)
def branch_in_list(x):
    return [x, 1 if x.sum() > 0 else 2, x * 2]


@case(2, 1, lambda: (t(4, shift=3.0), t(4, seed=1)))
def branch_two_args(x, y):
    z = x + y
    if z.mean() > 1:
        return z * y
    return z


@case(2, 1, lambda: (t(4, shift=3.0), 5))
def branch_then_int_math(x, n):
    if x.sum() > 0:
        n = n * 2
    return x * n


# == .item() / .tolist() in Python control flow ==================================================
@case(2, 1, pos)
def item_if(x):
    v = (x * 2).sum().item()
    if v > 0:
        return x + v
    return x - v


@case(2, 1)
def item_arith(x):
    v = x.sum().item()
    return x * v + 1


@case(2, 1)
def item_compare_chain(x):
    m = x.abs().max().item()
    if 0 < m < 100:
        return x / m
    return x


@case(2, 1)
def item_tolist(x):
    values = (x * 10).round().tolist()
    total = sum(values)
    return x + total


@case(2, 2)
def item_then_print(x):
    v = x.norm().item()
    print(round(v, 3))
    return x / v


@case(2, 1, pos)
def item_max_branch(x):
    y = x.exp()
    m = y.max().item()
    if m > 1.0:
        y = y / m
    return y


@case(1, 1, pos)
def bool_call(x):
    y = x - 1
    if bool((y > 0).any()):
        return y
    return -y


@case(2, 1)
def float_call(x):
    y = x * 3
    f = float(y.sum())
    return y - f


@case(2, 1)
def item_in_list(x):
    values = [x.sum().item(), 3]
    return x * values[0] + values[1]


@case(3, 2)
def item_twice(x):
    a = x.sum().item()
    y = x * a
    b = y.mean().item()
    return y - b


@case(2, 1, lambda: (torch.arange(6),))
def item_int_indexing(x):
    i = (x.sum() % 4).item()
    y = x * 2
    return y[i]


# == calls graphlift refuses (skipped library functions) =========================================
@case(2, 1)
def sleep_mid(x):
    y = x + 1
    time.sleep(0)
    return y * 2


@case(2, 1)
def getpid_mid(x):
    y = x.sin()
    pid = os.getpid()
    return y + (pid > 0)


# The float from time.perf_counter() is never read: no value guard, no recompile.
@case(2, 1)
def time_mid(x):
    y = x.cos()
    start = time.perf_counter()  # noqa: F841 (a float that changes on every call, never read)
    return y * 2


@case(2, 1)
def manual_seed_mid(x):
    y = x * 2
    torch.manual_seed(0)
    return y + 1


# graphlift refuses torch.set_printoptions (STATEFUL_TORCH_FUNCTIONS); torch.compile traces it
# into one graph with no break.
@case(2, 1, tc=(1, 0))
def set_printoptions_mid(x):
    y = x * 2
    torch.set_printoptions(profile="default")  # the defaults: no state leaks to other tests
    return y + 1


@case(2, 1)
def getcwd_mid(x):
    y = x + 3
    cwd = os.getcwd()
    return y * len(cwd[:1])


# NumPy is traced through torch._numpy; float() of the array's sum reads data: the break.
@case(2, 1)
def numpy_mid(x):
    y = x * 2
    arr = y.numpy()
    return y + float(arr.sum())


# == a break inside an inlined user function =====================================================
@case(4, 2)
def callee_print(x):
    a = x + 1
    b = helper_print(a)
    return b * 3


@case(4, 2, pos)
def callee_branch(x):
    a = x.abs()
    b = helper_branch(a)
    return b - 1


@case(4, 2)
def callee_item(x):
    a = x * 2
    b = helper_item(a)
    return b.sum()


@case(6, 3)
def callee_two_levels(x):
    a = x * 2
    b = helper_outer(a)
    return b + a


@case(3, 3)
def callee_twice(x):
    a = helper_print(x)
    b = helper_print(a)
    return a + b


# torch.compile fails to resume after the method's break and skips the frame: (1, 3).
@case(3, 2, tc=(1, 3))
def callee_method(x):
    box = Box(2)
    y = x + 1
    z = box.scale(y)
    return z - 1


@case(3, 2)
def callee_kwargs(x):
    y = x - 1
    z = helper_kw(y, scale=2.5)
    return z + 1


@case(4, 2)
def callee_tuple_unpack(x):
    a, b = helper_pair(x * 2)
    return a * b


@case(2, 1)
def callee_pure_then_print(x):
    a = helper_pure(x)
    print("after pure")
    return a + 1


# torch.compile never traces a frame without tensor arguments, so the callee's own frame is not
# compiled and its print is not counted again: (2, 1).
@case(2, 2, tc=(2, 1))
def callee_no_tensors(x):
    y = x * 2
    helper_print_none()
    return y + 1


@case(3, 2)
def callee_closure(x):
    y = x * 2
    z = ADD_TWO(y)
    return z * 2


@case(3, 2)
def callee_default_arg(x):
    y = x + 1
    z = helper_default(y)
    return z - 1


@case(2, 2, lambda: (t(3), []))
def callee_mutates_list(x, lst):
    n = helper_append(lst, x)
    return n


# == breaks inside with torch.no_grad() ==========================================================
@case(2, 1, lambda: (t(4, grad=True),))
def no_grad_print(x):
    with torch.no_grad():
        y = x * 2
        print("no grad")
        z = y + 1
    return z, z.requires_grad


@case(2, 1, lambda: (t(4, shift=3.0, grad=True),))
def no_grad_branch(x):
    with torch.no_grad():
        y = x * 2
        if y.sum() > 0:
            y = y + 1
    return y, y.requires_grad


@case(2, 1, lambda: (t(4, grad=True),))
def no_grad_then_grad(x):
    with torch.no_grad():
        a = x * 2
        print("inside")
        b = a + 1
    c = x * b
    return b.requires_grad, c.requires_grad, c


@case(2, 1, lambda: (t(4, grad=True),))
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            print("enabled")
            c = b + 1
    return a.requires_grad, c.requires_grad, c


@case(2, 1, lambda: (t(4, grad=True),))
def nested_no_grad(x):
    with torch.no_grad():
        with torch.no_grad():
            y = x + 1
            print("nested")
        z = y * 2
    return z.requires_grad, z


@case(2, 1, lambda: (t(4, grad=True),))
def print_after_no_grad(x):
    with torch.no_grad():
        y = x * 2
    print("after")
    z = x * y
    return z.requires_grad, z


@case(2, 1, lambda: (t(4, grad=True),))
def set_grad_enabled_block(x):
    with torch.set_grad_enabled(False):
        y = x * 2
        print("set_grad_enabled")
        z = y * 3
    return z.requires_grad, z


@case(2, 2, lambda: (t(4, grad=True),))
def no_grad_callee(x):
    with torch.no_grad():
        y = helper_print(x)
    return y.requires_grad, y


@case(3, 2, lambda: (t(4, grad=True),))
def no_grad_two_prints(x):
    with torch.no_grad():
        a = x + 1
        print("a")
        b = a * 2
        print("b")
        c = b - 1
    return c, c.requires_grad, torch.is_grad_enabled()


@case(2, 1, lambda: (t(4, grad=True),))
def no_grad_item(x):
    with torch.no_grad():
        v = (x * 2).sum().item()
        y = x * v
    return y.requires_grad, y


@case(2, 1, lambda: (t(3, 3),), gap="a break inside an autocast block runs the whole frame "
      "eagerly ('autocast(...).__exit__ cannot leave the compiled frame'), with no location")
def autocast_print(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x
        print("autocast")
        z = y @ x
    return y.dtype, z.dtype, z


# == several breaks in a row =====================================================================
@case(4, 3)
def three_prints(x):
    a = x + 1
    print("1")
    b = a * 2
    print("2")
    c = b - 3
    print("3")
    return c / 2


@case(4, 3, pos)
def print_branch_item(x):
    a = x.sin()
    print("start")
    if a.sum() > -10:
        a = a * 2
    v = a.max().item()
    return a - v


@case(3, 2, pos)
def two_branches(x):
    if x.sum() > 0:
        x = x * 2
    if x.mean() > 100:
        x = x - 1
    return x + 1


@case(6, 5)
def five_prints(x):
    for_graph = x + 1
    print("a")
    for_graph = for_graph * 2
    print("b")
    for_graph = for_graph - 1
    print("c")
    for_graph = for_graph.exp()
    print("d")
    for_graph = for_graph.log()
    print("e")
    return for_graph.sum()


@case(3, 3)
def mixed_skipped_calls(x):
    a = x * 2
    time.sleep(0)
    b = a + 1
    print("b")
    c = b * 3
    os.getpid()
    return c


@case(3, 2, neg)
def item_branch_item(x):
    s = x.sum().item()
    if s < 0:
        x = x * -1
    m = x.max().item()
    return x + s + m


@case(5, 5)
def breaks_between_every_op(x):
    print("0")
    a = x + 1
    print("1")
    b = a * 2
    print("2")
    c = b - 3
    print("3")
    d = c / 4
    print("4")
    e = d.exp()
    return e


@case(5, 4, lambda: (t(4), t(4, seed=1)))
def alternating_kinds(x, y):
    a = x + y
    print("x")
    b = a * y
    if b.sum() > -100:
        b = b + 1
    c = b.max().item()
    d = b * c
    print("y")
    return d + x


@case(2, 2)
def consecutive_sleeps(x):
    a = x * 5
    time.sleep(0)
    time.sleep(0)
    return a - 1


@case(4, 3, pos)
def chain_of_branches(x):
    y = x
    if y.sum() > 0:
        y = y * 2
    if y.sum() > 0:
        y = y * 3
    if y.sum() > 0:
        y = y * 4
    return y


# == breaks with live containers and calls on the stack ==========================================
# A break at a call while an outer call is being set up (its NULL and callee on the stack) falls
# back to running the whole frame eagerly; torch.compile splits there.
NULL_ON_STACK = "a NULL below the break on the stack: 'cannot return NullVariable(NULL)'"
# A function made inside the frame cannot be passed to the eager call or to the resume function.
NESTED_FN = "a function made in the frame crosses the break: 'cannot return NestedFunctionVariable'"

@case(2, 1, lambda: (t(4), t(4, seed=1)))
def list_with_print(x, y):
    return [x + 1, print(1), y * 2]


def foo(a, b):
    return (a, b)


@case(1, 1, lambda: (t(4),))
def call_with_print_arg(x):
    a = x * 2
    return foo(a, print(2))


@case(1, 1)
def tuple_with_print(x):
    return (x, print(3), x + 1)


@case(2, 1)
def dict_with_print(x):
    return {"a": x * 2, "b": print(4), "c": x - 1}


@case(2, 1)
def nested_list_with_print(x):
    return [[x + 1, print("n")], x * 2]


@case(2, 3)
def kwarg_with_print(x):
    y = x - 1
    return helper_kw(y, scale=print("k") or 3.0)


@case(4, 2)
def binary_with_callee(x):
    a = x * 2
    return a + helper_print(x)


@case(4, 2)
def stack_with_callee(x):
    return torch.stack([x + 1, helper_print(x), x * 3])


# graphlift compiles the resume function's a.add(...) as a graph of its own.
@case(2, 1, tc=(1, 1))
def method_call_with_print(x):
    a = x + 1
    return a.add(print("m") or 1)


@case(2, 1)
def list_tensor_scalars_print(x):
    return [x.sum(), print("s"), 3, "str", x * 2]


@case(2, 2)
def list_with_two_prints(x):
    return [x, print(1), x + 1, print(2), x + 2]


@case(1, 1, neg)
def dict_with_branch(x):
    return {"a": x, "b": 1 if x.sum() > 0 else 2}


@case(2, 1)
def print_arg_is_expression(x):
    y = x * 2
    return [y, print(y.sum()), y + 1]


@case(1, 1)
def item_in_call_args(x):
    return foo(x * 2, (x + 1).sum().item())


# == closures, defaults, *args and **kwargs ======================================================
def make_scaled(k):
    def scaled(x):
        y = x * k
        print("scaled", k)
        return y + k

    return scaled


def make_tensor_closure(w):
    def mul(x):
        y = x * w
        print("tensor closure")
        return y + w

    return mul


def make_list_closure(store):
    def push(x):
        store.append(x + 1)
        print("pushed")
        store.append(x * 2)
        return len(store)

    return push


def make_counter():
    count = 0

    def bump(x):
        nonlocal count
        count += 1
        print("bump", count)
        count += 10
        return x + count

    return bump


CLOSURES = {
    "scaled": make_scaled(3),
    "tensor": make_tensor_closure(t(4, seed=5)),
    "list": make_list_closure([]),
}


@case(2, 2)
def closure_scalar(x):
    return CLOSURES["scaled"](x)


@case(2, 2)
def closure_tensor(x):
    return CLOSURES["tensor"](x)


@case(2, 1, gap=NESTED_FN)
def frame_with_cells(x):
    k = x * 2

    def inner():
        return k + 1

    print("cells")
    return inner()


@case(2, 1)
def cells_made_after_break(x):
    k = x * 2
    print("cells")

    def inner():
        return k + 1

    return inner()


@case(2, 1)
def cell_stored_across_break(x):
    k = x * 2
    print("cell")
    k = k + 1

    def inner():
        return k * 3

    return inner()


def long_function(x):
    a = x + 1
    b = a * 2
    c = b - 3
    d = c / 4
    e = d.exp()
    f = e.log()
    g = f.abs()
    h = g.neg()
    i = h.sin()
    j = i.cos()
    k = j + a
    m = k * b
    n = m - c
    o = n / (d.abs() + 1)
    p = o + e
    q = p * f
    r = q - g
    s = r + h
    u = s * i
    v = u - j
    w = [a, b, c, d, e, f, g, h, i, j, k, m, n, o, p, q, r, s, u, v]
    total = w[0] + w[1] + w[2] + w[3] + w[4] + w[5] + w[6] + w[7] + w[8] + w[9]
    total = total + w[10] + w[11] + w[12] + w[13] + w[14] + w[15] + w[16] + w[17] + w[18]
    print("long")
    total = total + w[19] * 2
    total = total - a * b + c * d - e * f + g * h - i * j
    return total, len(w)


case(2, 1)(long_function)


@case(2, 1, lambda: (t(4), 2.0))
def default_args(x, scale=2.0, *, bias=1):
    y = x * scale
    print("defaults", scale, bias)
    return y + bias


@case(2, 1, lambda: (t(4), t(4, seed=1), t(4, seed=2)))
def star_args(*args):
    total = args[0] + args[1]
    print(len(args))
    return total * args[2]


@case(1, 1, lambda: (t(4), 3))
def star_args_after_x(x, *rest):
    y = x * rest[0]
    print("rest", rest)
    return y, rest


@case(1, 1, lambda: (t(4), t(4, seed=1), 2, "tag"))
def args_and_locals(x, y, n, tag):
    z = x * n + y
    print(tag, n)
    return z, tag


@case(3, 2, lambda: (t(4), t(4, seed=1)))
def defaults_and_branch(x, y, flip=False, scale=3):
    z = x * scale
    print("flip", flip)
    if z.sum() > -100:
        z = z + y
    return -z if flip else z


# == breaks in loops and try blocks ==============================================================
# graphlift cannot resume inside a loop body or a try block: the whole frame runs eagerly
# (documented in graphlift.resume). torch.compile 2.13 does the same (0 graphs, 1 break).
@case(0, 1)
def print_in_loop(x):
    for i in range(3):
        x = x + i
        print(i)
    return x


# The first test of a while loop is outside the loop body: the frame splits there, and the
# resume function (which holds the loop) runs eagerly at its own break. torch.compile also
# compiles the loop body up to the test in the resume function: (2, 2).
@case(1, 2, lambda: (t(4, shift=1.0),), tc=(2, 2))
def tensor_while(x):
    while x.sum() > 0:
        x = x - 1
    return x


@case(0, 1)
def print_in_try(x):
    try:
        y = x * 2
        print("try")
    except RuntimeError:
        y = x
    return y + 1


@case(0, 1)
def item_in_loop(x):
    total = 0.0
    for row in x:
        total += row.sum().item()
    return x * total


def helper_loop(y):
    for i in range(2):
        y = y + i
        print("loop", i)
    return y


@case(2, 2)
def callee_with_loop(x):
    a = x * 2
    b = helper_loop(a)
    return b - 1


@case(2, 1)
def print_after_loop(x):
    for i in range(3):
        x = x * (i + 1)
    print("looped")
    return x + 1


@case(2, 1)
def print_before_loop(x):
    x = x + 1
    print("before")
    for i in range(3):
        x = x * (i + 1)
    return x


@case(2, 1)
def print_after_try(x):
    try:
        y = x * 2
    except RuntimeError:
        y = x
    print("after try")
    return y + 1


# == side effects around breaks ==================================================================
@case(2, 1, lambda: (t(3), []))
def list_arg_around_print(x, lst):
    lst.append(x * 2)
    print("between")
    lst.append(x * 3)
    return lst


@case(1, 1, lambda: (t(4, shift=3.0), {}))
def dict_arg_around_branch(x, d):
    d["a"] = x + 1
    if x.sum() > 0:
        d["b"] = 1
    else:
        d["b"] = 2
    return d


# torch.compile does not compile the resume function (no tensor among its arguments): (1, 1).
@case(2, 1, lambda: (t(3), Box(0)), tc=(1, 1))
def attr_around_print(x, box):
    box.value = x + 1
    print("attr")
    box.other = box.value * 2
    return box.other


@case(1, 1)
def global_list_around_print(x):
    LOG.append("before")
    y = x * 2
    print("global log")
    LOG.append("after")
    return y


@case(2, 1)
def global_store_around_print(x):
    global COUNTER
    COUNTER = 5
    y = x * COUNTER
    print("counter")
    COUNTER = 7
    return y + COUNTER


@case(1, 1, pos)
def global_dict_around_branch(x):
    STATE["seen"] = 1
    y = x + 1
    if y.sum() > 0:
        STATE["branch"] = "pos"
    return y


@case(2, 1, lambda: (t(3), []))
def new_list_escapes_around_print(x, out):
    fresh = [x + 1]
    out.append(fresh)
    print("escaped")
    fresh.append(x * 2)
    return fresh


@case(1, 1, lambda: (t(3), [1, 2, 3]))
def list_pop_around_print(x, lst):
    a = lst.pop()
    print("popped", a)
    b = lst.pop(0)
    return x * a + b, lst


# == identity and new objects across a break ====================================================
class Counter:
    """An object whose method breaks after mutating it."""

    def __init__(self) -> None:
        self.value = 0

    def bump(self, x):
        self.value += 1
        print("bump", self.value)
        self.value += 10
        return x * self.value


# torch.compile cannot reconstruct the bound method of an object made in the frame: (1, 3).
@case(1, 2, tc=(1, 3))
def new_object_method_breaks(x):
    counter = Counter()
    y = counter.bump(x)
    return y, counter.value


@case(2, 1)
def new_list_two_names(x):
    a = [x + 1]
    b = a
    print("alias")
    b.append(x * 2)
    return a, b, a is b


@case(2, 1)
def alias_list_len_after_break(x):
    a = [x + 1]
    b = a
    print("alias len")
    b.append(x * 2)
    return len(a)


@case(0, 1)
def alias_dict_len_after_break(x):
    a = {"k": x}
    b = a
    print("alias dict len")
    b["j"] = 2
    return len(a)


# torch.compile does not compile the resume function (no tensor among its arguments): (1, 1).
@case(2, 1, tc=(1, 1))
def alias_attr_after_break(x):
    a = Box(x + 1)
    b = a
    print("alias attr")
    b.value = b.value * 2
    return a.value


# The bound method crosses the break; the resume function's total() + 1 is a graph of its own.
@case(2, 1, tc=(1, 1))
def bound_tensor_method_across_break(x):
    y = x * 2
    total = y.sum
    print("method")
    return total() + 1


@case(2, 1)
def new_dict_two_names(x):
    a = {"k": x + 1}
    b = a
    print("alias dict")
    b["j"] = x * 2
    return a, a is b


# torch.compile does not compile the resume function (no tensor among its arguments): (1, 1).
@case(2, 1, tc=(1, 1))
def new_object_two_names(x):
    a = Box(x + 1)
    b = a
    print("alias object")
    b.value = b.value * 2
    return a.value, a is b


@case(1, 1)
def new_list_in_two_containers(x):
    shared = [x]
    pair = (shared, shared)
    print("shared")
    pair[0].append(x + 1)
    return pair, pair[0] is pair[1]


@case(2, 1)
def tensor_alias_inplace_after_break(x):
    y = x + 1
    z = y
    print("tensor alias")
    z.add_(1)
    return y, y is z


@case(1, 1)
def input_alias_inplace_after_break(x):
    y = x
    print("input alias")
    y.mul_(2)
    return x


@case(1, 1)
def inplace_before_print(x):
    x.add_(1)
    print(x)
    return x


@case(2, 1)
def view_inplace_after_break(x):
    v = x[1:3]
    w = v * 1
    print("view")
    v.mul_(10)
    return x, w


@case(1, 1, lambda: (t(3), [1]))
def list_arg_seen_by_print(x, lst):
    lst.append(2)
    print(lst, len(lst))
    return x * len(lst)


def read_log():
    print("log has", list(LOG))
    return len(LOG)


# torch.compile never traces a frame without tensor arguments, so the callee's own frame is not
# compiled and its break is not counted again: (1, 1).
@case(1, 2, tc=(1, 1))
def global_mutation_seen_by_eager_call(x):
    LOG.append("first")
    n = read_log_eager()
    return x * n


def read_log_eager():
    return len(LOG) + os.getpid() * 0


# torch.compile never traces a frame without tensor arguments, so the callee's own frame is not
# compiled and its break is not counted again: (2, 1).
@case(2, 2, tc=(2, 1))
def global_store_seen_by_callee(x):
    global COUNTER
    COUNTER = 41
    y = x * 2
    n = read_counter()
    return y + n


def read_counter():
    time.sleep(0)
    return COUNTER + 1


@case(2, 2, lambda: (t(3), Box(1)))
def attr_store_seen_by_method(x, box):
    box.value = 5
    y = x + 1
    z = box.scale(y)
    return z, box.value


@case(1, 1)
def nested_fn_local_across_break(x):
    def g(y):
        return y + 1

    print("nested fn")
    return g(x) * 2


@case(3, 2, gap=NESTED_FN)
def lambda_callee_breaks(x):
    g = lambda y: print("lambda") or y * 3  # noqa: E731
    a = x + 1
    return g(a) - 1


@case(4, 2, lambda: (t(4), helper_print))
def function_argument_breaks(x, fn):
    a = x * 2
    return fn(a) + 1


# A fresh closure each call: guarded by its code and cells, like torch.compile (no recompile).
@case(2, 2, lambda: (t(4), make_counter()))
def closure_nonlocal_argument(x, bump):
    y = x * 2
    return bump(y)


@case(4, 2, gap="map() runs eagerly at the break and returns a map object, which the "
      "resume function cannot iterate: it runs eagerly")
def map_with_breaking_fn(x):
    ys = list(map(helper_print, [x, x + 1]))
    return ys[0] + ys[1]


@case(1, 1)
def sorted_key_prints(x):
    order = sorted([3, 1, 2], key=lambda v: print("key", v) or -v)
    return x * order[0]


# The call of sum() holding the break runs eagerly, its generator rebuilt (not started) over
# an iterator of the range's items, and the rest is a graph. torch.compile runs the frame
# eagerly and counts the break twice: (0, 2).
@case(1, 1, tc=(0, 2))
def genexpr_with_print(x):
    total = sum(print("g", i) or i for i in range(3))
    return x + total


@case(1, 1)
def return_print_value(x):
    y = x * 2
    return print("returned", y.shape)


# torch.compile turns an assert on a tensor into torch._assert inside the graph: (1, 0).
@case(2, 1, pos, tc=(1, 0))
def assert_on_tensor(x):
    y = x * 2
    assert y.sum() > 0, "negative"
    return y + 1


@case(2, 1, pos)
def tensor_and_expression(x):
    return (x.sum() > 0) and x * 2


@case(2, 1, pos)
def walrus_branch(x):
    if (s := x.sum()) > 0:
        return x / s
    return x


# The resume function reads the unbound local: its own frame records a break and runs
# eagerly, raising UnboundLocalError as eager does; torch.compile counts one break.
@case(1, 2, neg, tc=(1, 1))
def unbound_after_branch(x):
    if x.sum() > 0:
        y = x + 1
    return y  # noqa: F821 (UnboundLocalError when the branch is not taken, as in eager)


# The dead x + 1 is a graph, as in torch.compile. As above: the resume function raises
# UnboundLocalError from a frame that runs eagerly, a break of its own.
@case(1, 2, tc=(1, 1))
def deleted_local_read_after_break(x):
    a = x + 1
    del a
    print("deleted")
    return a  # noqa: F821 (UnboundLocalError, as in eager)


@case(1, 1)
def sleep_raises(x):
    y = x * 2
    time.sleep(-1)
    return y


@case(1, 1, lambda: (t(3), []))
def raise_after_mutation(x, lst):
    lst.append(1)
    y = x + 1
    time.sleep(-1)
    return y


@case(1, 2, lambda: (t(4), {"a": 2}))
def kwargs_mutated_around_break(x, kw):
    return kwargs_helper(x, **kw)


def kwargs_helper(x, **kw):
    kw["b"] = 3
    print(sorted(kw))
    return x * kw["a"] + kw["b"]


@case(1, 1, lambda: (t(4), (1, 2)))
def tuple_arg_survives_break(x, pair):
    a, b = pair
    print("pair", a)
    return x * b, pair


@case(1, 1)
def constants_across_break(x):
    dtype = x.dtype
    shape = x.shape
    rng = range(2, 5)
    sl = slice(1, 3)
    print("constants")
    return x.to(dtype).reshape(shape)[sl] * len(rng), rng[1]


@case(1, 1)
def set_local_across_break(x):
    seen = {1, 2}
    print("set")
    seen.add(3)
    return x * len(seen), seen


# == graphlift.graph_break() =====================================================================
# Counted against the same functions with torch._dynamo.graph_break() under torch.compile.
@case(2, 1)
def forced_break(x):
    y = x + 1
    graphlift.graph_break()
    return y * 2


@case(3, 2, lambda: (t(4), []))
def forced_breaks_with_mutation(x, lst):
    lst.append(x + 1)
    graphlift.graph_break()
    lst.append(x * 2)
    graphlift.graph_break()
    return lst[0] + lst[1]


@case(2, 1, lambda: (t(4, grad=True),))
def forced_break_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        graphlift.graph_break()
        z = y + 1
    return z.requires_grad, z


# == running the cases ===========================================================================
def snapshot_globals() -> tuple:
    return (list(LOG), dict(STATE), COUNTER)


def plain(value: Any) -> Any:
    """``value`` with each closure replaced by its cells' contents (compared, not identities)."""
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, types.FunctionType):
        return (value.__qualname__, [plain(cell.cell_contents) for cell in value.__closure__ or ()])
    return value


def run_once(fn: Callable, args: tuple) -> tuple[Any, str, tuple, tuple | None]:
    """Result, printed output, global state and the user's exception (type, message) of a call;
    the module's globals are reset first."""
    reset_globals()
    out = io.StringIO()
    result, error = None, None
    with contextlib.redirect_stdout(out):
        try:
            result = fn(*args)
        except graphlift.GraphliftError:
            raise
        except Exception as exc:  # the user's exception, compared with eager's
            error = (type(exc), str(exc))
    return result, out.getvalue(), snapshot_globals(), error


def assert_same_identity(result_e: Any, args_e: tuple, result_c: Any, args_c: tuple) -> None:
    """An argument returned (or nested in the result) is the same object in both runs."""
    def identities(result, args):
        items = result if isinstance(result, (list, tuple)) else [result]
        if isinstance(result, dict):
            items = list(result.values())
        return [next((i for i, a in enumerate(args) if a is item), None) for item in
                [result, *items]]

    assert identities(result_c, args_c) == identities(result_e, args_e), "identity differs"


def run_break_case(c: BreakCase) -> None:
    """Eager vs compiled (result, output, arguments, globals, identity), then a second call."""
    eager_args = c.make()
    eager = run_once(c.fn, eager_args)
    counter = CompileCounter()
    compiled = graphlift.compile(c.fn, backend=counter)
    compiled_args = c.make()
    result = run_once(compiled, compiled_args)
    assert result[3] == eager[3], "a different exception"
    assert result[1] == eager[1], "printed output differs"
    assert_same(eager[0], result[0])
    assert_same(plain(eager_args), plain(compiled_args), "arguments after the call")
    assert result[2] == eager[2], "module globals differ"
    assert_same_identity(eager[0], eager_args, result[0], compiled_args)
    # A second call with fresh inputs of the same values hits every cache.
    graphs, compiles = counter.frame_count, cache.accumulated_compiles()
    again_args = c.make()
    again = run_once(compiled, again_args)
    assert again[3] == eager[3], "a different exception on the second call"
    assert again[1] == eager[1], "printed output differs on the second call"
    assert_same(eager[0], again[0])
    assert_same(plain(eager_args), plain(again_args), "arguments after the second call")
    assert (counter.frame_count, cache.accumulated_compiles()) == (graphs, compiles), \
        "the second call recompiled"
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits) == (1, 1), f"compiles, hits: {stats.compiles, stats.hits}"


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_break_results(c: BreakCase) -> None:
    run_break_case(c)


def _counts_param(c: BreakCase) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=c.gap)] if c.gap else []
    return pytest.param(c, id=c.name, marks=marks)


@pytest.mark.parametrize("c", [_counts_param(c) for c in CASES])
def test_break_counts(c: BreakCase) -> None:
    """Graph and break counts from explain() and from a CompileCounter backend."""
    reset_globals()
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            explained = graphlift.explain(c.fn)(*c.make())
        except graphlift.GraphliftError:
            raise
        except Exception:  # the case raises: count through a counter and the break records
            explained = None
    if explained is not None:
        assert (explained.graph_count, explained.graph_break_count) == (c.graphs, c.breaks), \
            str(explained)
    graphlift.reset()
    counter = CompileCounter()
    reset_globals()
    breaks: list = []
    break_listeners.append(breaks.append)
    try:
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.suppress(ValueError, UnboundLocalError):
            graphlift.compile(c.fn, backend=counter)(*c.make())
    finally:
        break_listeners.remove(breaks.append)
    assert (counter.frame_count, len(breaks)) == (c.graphs, c.breaks), \
        f"graphs, breaks: {counter.frame_count, len(breaks)}"


def test_case_count() -> None:
    names = [c.name for c in CASES]
    assert len(set(names)) == len(names), "duplicate case names"
    assert len(CASES) >= 100, len(CASES)
    assert all(c.breaks >= 1 for c in CASES), "a case without a break"


# == the fullgraph error and the graph_breaks log ================================================
def line_of(fn: Callable, text: str) -> int:
    """The line number of the first line of ``fn``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


# (case, break type, text of the line that breaks)
FULLGRAPH_ERRORS = [
    ("print_mid", "skipped_function", 'print("mid")'),
    ("branch_pos", "data_dependent_branch", "if y.sum() > 0:"),
    # fullgraph=True captures .item() (as torch.compile 2.13): the branch on it is what fails.
    ("item_if", "data_dependent_guard", "if v > 0:"),
    ("sleep_mid", "skipped_function", "time.sleep(0)"),
    ("no_grad_print", "skipped_function", 'print("no grad")'),
]
CASE_BY_NAME = {c.name: c for c in CASES}


@pytest.mark.parametrize("name, break_type, text", FULLGRAPH_ERRORS,
                         ids=[row[0] for row in FULLGRAPH_ERRORS])
def test_fullgraph_error_text(name: str, break_type: str, text: str, capsys) -> None:
    c = CASE_BY_NAME[name]
    where = f"{__file__}:{line_of(c.fn, text)}"
    with pytest.raises(graphlift.Unsupported) as info:
        graphlift.compile(c.fn, fullgraph=True)(*c.make())
    error = info.value
    message = str(error)
    assert message.startswith(f"{break_type}: {error.explanation}"), message
    assert error.explanation and error.hints, message
    assert (error.break_type, error.location, error.source_line) == (break_type, where, text)
    assert f"  at {where}\n    {text}\n" in message, message
    assert all(f"  hint: {hint}" in message for hint in error.hints), message
    assert capsys.readouterr().out == "", "fullgraph ran part of the function before raising"


def test_fullgraph_error_in_inlined_callee() -> None:
    """The location is the callee's line that breaks."""
    line = line_of(helper_print, 'print("in helper")')
    where = f"{__file__}:{line}"
    with pytest.raises(graphlift.Unsupported) as info:
        graphlift.compile(callee_print, fullgraph=True)(t(4))
    assert info.value.location == where, (info.value.location, where)
    assert f"  at {where}\n    print(\"in helper\")" in str(info.value)


@pytest.fixture
def break_log(caplog):
    """The text of every graph_breaks record (the artifact turned on for the test)."""
    graphlift.set_logs(graph_breaks=True)
    logger = logging.getLogger("graphlift")
    # graphlift stops propagation when it installs its own stderr handler; catch records anyway.
    direct = not logger.propagate
    if direct:
        logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="graphlift"):
            yield lambda: [r.getMessage() for r in caplog.records
                           if r.name == "graphlift.graph_breaks"]
    finally:
        if direct:
            logger.removeHandler(caplog.handler)


def test_graph_breaks_log_format(break_log) -> None:
    line = line_of(print_mid, 'print("mid")')
    where = f"{__file__}:{line}"
    with contextlib.redirect_stdout(io.StringIO()):
        graphlift.compile(print_mid)(t(4))
    (text,) = break_log()
    lines = text.splitlines()
    assert lines[0] == f"Graph break in user code at {where}", text
    assert lines[1].startswith("Graph Break Reason: skipped_function: "), text
    traceback = lines[lines.index("User code traceback:") + 1:]
    assert traceback == [f'  File "{__file__}", line {line}, in print_mid',
                         '    print("mid")'], text


def test_graph_breaks_log_once_per_break(break_log) -> None:
    """Each break is logged when it is compiled, and cache hits log nothing."""
    compiled = graphlift.compile(three_prints)
    with contextlib.redirect_stdout(io.StringIO()):
        compiled(t(4))
        compiled(t(4))
    records = break_log()
    assert len(records) == 3, records
    lines = [line_of(three_prints, f'print("{i}")') for i in (1, 2, 3)]
    assert [r.splitlines()[0] for r in records] == \
        [f"Graph break in user code at {__file__}:{line}" for line in lines]


def test_explain_break_reasons_have_user_stacks() -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        explained = graphlift.explain(item_then_print)(t(4))
    kinds = [record.break_type.value for record in explained.break_reasons]
    assert kinds == ["data_dependent", "skipped_function"]
    first = explained.break_reasons[0]
    line = line_of(item_then_print, ".item()")
    assert first.user_stack == (f'  File "{__file__}", line {line}, in item_then_print',
                                "    v = x.norm().item()")
    assert "Graph Break Count: 2" in str(explained)


def test_graph_breaks_log_traceback_through_callee(break_log) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        graphlift.compile(callee_print)(t(4))
    text = break_log()[0]
    traceback = text.splitlines()[text.splitlines().index("User code traceback:") + 1:]
    call_site = f'  File "{__file__}", line {line_of(callee_print, "helper_print(")}, ' \
        "in callee_print"
    assert traceback[0] == call_site, text  # outermost first, then the callee's line
    assert traceback[2].startswith(f'  File "{__file__}"') and "in helper_print" in traceback[2]


def test_stats_count_breaks() -> None:
    compiled = graphlift.compile(three_prints)
    with contextlib.redirect_stdout(io.StringIO()):
        compiled(t(4))
        compiled(t(4))
    stats = graphlift.stats(compiled)
    assert (stats.graph_breaks, stats.eager_frames, stats.compiles, stats.hits) == (1, 0, 1, 1)


# == branches, closures and state across calls ===================================================
def test_branch_both_ways() -> None:
    """Each side of a tensor branch gets its own resume function; both stay cached."""
    compiled = graphlift.compile(branch_pos)
    for sign in (1.0, -1.0, 1.0, -1.0):
        x = t(4, shift=3.0 * sign)
        assert_same(branch_pos(x), compiled(x))
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits) == (1, 3), stats


def test_closures_of_one_code_resume_with_their_own_cells() -> None:
    """Closures share the code (and the cache) but each resumes with its own cells."""
    two, three = make_scaled(2), make_scaled(3)
    compiled_two, compiled_three = graphlift.compile(two), graphlift.compile(three)
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(2):
            assert_same(two(t(4)), compiled_two(t(4)))
            assert_same(three(t(4)), compiled_three(t(4)))


def test_item_values_do_not_hit_the_recompile_limit(caplog) -> None:
    compiled = graphlift.compile(item_arith)
    with caplog.at_level(logging.WARNING, logger="graphlift"):
        for i in range(12):
            x = t(4, seed=i)
            assert_same(item_arith(x), compiled(x))
    limit = [r.getMessage() for r in caplog.records if "recompile_limit" in r.getMessage()]
    assert limit == [], limit


def test_item_values_stay_correct_past_the_recompile_limit() -> None:
    compiled = graphlift.compile(item_arith)
    for i in range(12):
        x = t(4, seed=i)
        assert_same(item_arith(x), compiled(x))


def raises_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        time.sleep(-1)
    return y


def test_grad_mode_restored_when_the_eager_instruction_raises() -> None:
    """The with block's exit runs in eager Python even when the call inside it raises."""
    compiled = graphlift.compile(raises_in_no_grad)
    with pytest.raises(ValueError, match="non-negative"):
        compiled(t(3, grad=True))
    enabled = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    assert enabled, "grad mode left disabled after the exception"
