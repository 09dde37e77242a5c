"""Dict and set iteration while the container changes, ranges, and with blocks whose body raises
while traced, against eager.

Each case runs eagerly and under ``graphlift.compile`` on fresh arguments and compares the
return value, printed output, the user's exception and the arguments afterwards; graph counts
are compared with ``torch.compile``'s, recorded (tests/reference).

PYTEST_DONT_REWRITE: the cases' bytecode must be what the user wrote.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import typing

import pytest
import torch
from reference import measure, recorded
from test_correctness_values import assert_same_run, run, torch_compile_graphs

import graphlift
from graphlift.testing import CompileCounter


def register(key: str, fn, make) -> None:
    measure(f"correctness_iteration/{key}", functools.partial(torch_compile_graphs, fn, make))


def compare_and_count(key: str, fn, make) -> None:
    """Eager vs compiled twice, then graphlift's graphs vs torch.compile's."""
    counter = CompileCounter()
    compiled = graphlift.compile(fn, backend=counter)
    for _ in range(2):
        assert_same_run(run(fn, make()), run(compiled, make()))
    assert counter.frame_count == recorded(f"correctness_iteration/{key}")


# == a dict or set whose keys change during a loop ================================================
def reinsert_last_key(x):
    d = {0: 1, 1: 2}
    for k in d:
        if k == 1:
            del d[1]
            d[1] = 0  # the same keys, in the same order: CPython still finds a new entry
        x = x + k
    return x


def replace_last_key(x):
    d = {0: 1, 1: 2}
    for k in d:
        if k == 1:
            del d[1]
            d[2] = 0
        x = x + k
    return x


def reinsert_first_key(x):
    d = {0: 1, 1: 2}
    for k in d:
        del d[0]
        d[0] = 0
        x = x + k
    return x


def values_of_input(x, d):
    for v in d.values():
        if v == 2:
            del d[1]
            d[1] = 0
        x = x + v
    return x


def items_of_input(x, d):
    for k, v in d.items():
        if k == 1:
            del d[1]
            d[1] = 5
        x = x + v
    return x


def values_rewritten(x, d):
    for k in d:
        d[k] = d[k] * 2  # values only: the loop goes on
    return x + d[0] + d[1], d


def dict_grows(x):
    d = {0: 1, 1: 2}
    for k in d:
        d[k + 10] = 0
        x = x + k
    return x


def set_grows(x):
    s = {0, 1}
    for k in s:
        s.add(k + 10)
        x = x + k
    return x


def set_readds(x):
    s = {0, 1}
    for k in s:
        if k == 1:
            s.remove(1)
            s.add(1)
        x = x + k
    return x


ITERATION = {
    "reinsert_last_key": (reinsert_last_key, lambda: (torch.ones(2),)),
    "replace_last_key": (replace_last_key, lambda: (torch.ones(2),)),
    "reinsert_first_key": (reinsert_first_key, lambda: (torch.ones(2),)),
    "values_of_input": (values_of_input, lambda: (torch.ones(2), {0: 1, 1: 2})),
    "items_of_input": (items_of_input, lambda: (torch.ones(2), {0: 1, 1: 2})),
    "values_rewritten": (values_rewritten, lambda: (torch.ones(2), {0: 1, 1: 2})),
    "dict_grows": (dict_grows, lambda: (torch.ones(2),)),
    "set_grows": (set_grows, lambda: (torch.ones(2),)),
    "set_readds": (set_readds, lambda: (torch.ones(2),)),
}
for _key, (_fn, _make) in ITERATION.items():
    register(f"mutated/{_key}", _fn, _make)


@pytest.mark.parametrize("key", list(ITERATION))
def test_container_changed_during_iteration(key):
    fn, make = ITERATION[key]
    compare_and_count(f"mutated/{key}", fn, make)


# == ranges: O(1), as CPython's =================================================================
def range_len_overflows(x):
    return x + len(range(-sys.maxsize, sys.maxsize))


def huge_range_queries(x):
    r = range(0, 10**18, 3)
    return x + (3 * 10**16 in r), r.index(3 * 10**16), r[10**16], len(r[::7]), r[-1]


def huge_range_loop(x):
    for i in range(10**15):
        if i > 3:
            break
        x = x + i
    return x


def huge_reversed_range(x):
    total = 0
    for i in reversed(range(3, 10**12, 7)):
        total = total + i
        if total > 10**12:
            break
    return x + total


def range_iterator_returned(x):
    it = iter(range(2, 10**12))
    next(it)
    return x + next(it), it


RANGES = {
    "len_overflows": range_len_overflows,
    "queries": huge_range_queries,
    "loop": huge_range_loop,
    "reversed": huge_reversed_range,
    "iterator_returned": range_iterator_returned,
}
for _key, _fn in RANGES.items():
    register(f"range/{_key}", _fn, lambda: (torch.ones(2),))


@pytest.mark.parametrize("key", list(RANGES))
def test_range_is_constant_time(key):
    fn = RANGES[key]
    if key != "iterator_returned":
        return compare_and_count(f"range/{key}", fn, lambda: (torch.ones(2),))
    counter = CompileCounter()  # the iterator is rebuilt after the graph: its next items
    compiled = graphlift.compile(fn, backend=counter)
    for _ in range(2):
        (eager, left), (ours, ours_left) = fn(torch.ones(2)), compiled(torch.ones(2))
        assert torch.equal(eager, ours) and type(left) is type(ours_left)
        assert [next(left), next(left)] == [next(ours_left), next(ours_left)] == [4, 5]
    assert counter.frame_count == recorded(f"correctness_iteration/range/{key}")


# == a with block whose body fails at an operation the trace stops at ==========================
LOG: list = []


class Logged:
    def __enter__(self):
        LOG.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        LOG.append(("exit", kind.__name__ if kind else None))
        return False


class Swallowed(Logged):
    def __exit__(self, kind, value, tb):
        super().__exit__(kind, value, tb)
        return True


def add(a, b):
    return a + b


def suppressed_view(x):
    with contextlib.suppress(RuntimeError):
        x = x.view(4, -1)
    return x + 1


def suppressed_tensor_condition(x):
    with contextlib.suppress(RuntimeError):
        if x > 0:
            x = x + 1
    return x * 2


def suppressed_missing_argument(x):
    with contextlib.suppress(TypeError):
        x = add(x)
    return x * 2


def logged_view(x):
    with Logged():
        x = x.view(4, -1)
    return x


def swallowed_tensor_condition(x):
    with Swallowed():
        if x > 0:
            x = x + 1
    return x * 2, list(LOG)


def grad_mode_condition(x):
    with torch.no_grad():
        if x.sum() > 0:  # a grad-mode block still splits the frame
            x = x + 1
    return x * 2


WITH_BLOCKS = {
    "suppressed_view": suppressed_view,
    "suppressed_tensor_condition": suppressed_tensor_condition,
    "suppressed_missing_argument": suppressed_missing_argument,
    "logged_view": logged_view,
    "swallowed_tensor_condition": swallowed_tensor_condition,
    "grad_mode_condition": grad_mode_condition,
}


def _fresh_log() -> tuple:
    LOG.clear()
    return (torch.ones(6),)


for _key, _fn in WITH_BLOCKS.items():
    register(f"with/{_key}", _fn, _fresh_log)


@pytest.mark.parametrize("key", list(WITH_BLOCKS))
def test_with_block_exit_sees_the_error(key):
    fn = WITH_BLOCKS[key]
    counter = CompileCounter()
    compiled = graphlift.compile(fn, backend=counter)
    for _ in range(2):
        eager = run(fn, _fresh_log())
        eager_log = list(LOG)
        ours = run(compiled, _fresh_log())
        assert_same_run(eager, ours)
        assert LOG == eager_log, "__exit__ calls differ"
    assert counter.frame_count == recorded(f"correctness_iteration/with/{key}")


# == what graphlift failed on internally: eager's value or the program's own error =============
def to_python_bool(x):
    return (x * 2).to(bool)


def python_dtypes(x):
    return torch.zeros(2, dtype=int) + x.sum(), x.to(dtype=float), torch.ones(2, dtype=complex)


def unhashable_get(x):
    return x + {1: 2}.get([1])


def unhashable_subscript(x):
    return x + {1: 2}[[1]]


def huge_repeat(x):
    return x + len([1] * (sys.maxsize // 2))


def huge_inplace_repeat(x):
    items = [1]
    items *= sys.maxsize // 2
    return x + len(items)


INTERNAL = {
    "to_python_bool": to_python_bool,
    "python_dtypes": python_dtypes,
    "unhashable_get": unhashable_get,
    "unhashable_subscript": unhashable_subscript,
    "huge_repeat": huge_repeat,
    "huge_inplace_repeat": huge_inplace_repeat,
}
for _key, _fn in INTERNAL.items():
    register(f"internal/{_key}", _fn, lambda: (torch.ones(2),))


@pytest.mark.parametrize("key", list(INTERNAL))
def test_no_internal_error(key):
    fn = INTERNAL[key]
    compare_and_count(f"internal/{key}", fn, lambda: (torch.ones(2),))
    whole = graphlift.compile(fn, backend=CompileCounter(), fullgraph=True)
    eager = run(fn, (torch.ones(2),))
    if eager.error is None:  # traced whole, as torch.compile traces it
        assert_same_run(eager, run(whole, (torch.ones(2),)))
    else:  # the program's error, reported as such (not graphlift's InternalError)
        with pytest.raises(graphlift.Unsupported, match=eager.error[0].__name__):
            whole(torch.ones(2))


# == generator.close(): what the generator does on GeneratorExit ===============================
def returns_on_exit(log):
    try:
        yield 1
    except GeneratorExit:
        log.append("closing")
        return 42  # close() returns it on 3.13, None before


def reraises_on_exit(log):
    try:
        yield 1
    except GeneratorExit:
        log.append("closing")
        raise


def finally_on_exit(log):
    try:
        yield 1
        yield 2
    finally:
        log.append("finally")


def close_returned(x):
    log = []
    gen = returns_on_exit(log)
    next(gen)
    return x + 1, gen.close(), gen.close(), log


def close_reraised(x):
    log = []
    gen = reraises_on_exit(log)
    next(gen)
    return x + 1, gen.close(), log


def close_finally(x):
    log = []
    gen = finally_on_exit(log)
    next(gen)
    closed = gen.close()
    return x + len(log), closed, log, next(gen, "done")


def close_unstarted(x):
    log = []
    gen = returns_on_exit(log)
    return x + 1, gen.close(), log


CLOSE = {"returned": close_returned, "reraised": close_reraised, "finally": close_finally,
         "unstarted": close_unstarted}
for _key, _fn in CLOSE.items():
    register(f"close/{_key}", _fn, lambda: (torch.ones(2),))


@pytest.mark.parametrize("key", list(CLOSE))
def test_generator_close(key):
    compare_and_count(f"close/{key}", CLOSE[key], lambda: (torch.ones(2),))


# == raise ... from: the cause as CPython sets it ===============================================
class OwnError(Exception):
    pass


def cause_from_class(x):
    try:
        raise IndexError from KeyError  # the cause is KeyError(), an instance
    except IndexError as error:
        return x + 1, type(error.__cause__).__name__, error.__cause__.args, \
            error.__suppress_context__


def cause_from_int(x):
    raise IndexError from 5  # eager: TypeError, causes must derive from BaseException


def cause_from_none(x):
    try:
        try:
            raise KeyError
        except KeyError:
            raise IndexError from None
    except IndexError as error:
        return x + 1, error.__cause__, error.__suppress_context__, \
            type(error.__context__).__name__


def cause_from_instance(x):
    try:
        raise IndexError("i") from OwnError("own")
    except IndexError as error:
        return x + 1, type(error.__cause__).__name__, error.__cause__.args, \
            error.__suppress_context__


def context_only(x):
    try:
        try:
            raise KeyError
        except KeyError:
            raise IndexError  # noqa: B904 (the context alone is what this case checks)
    except IndexError as error:
        return x + 1, error.__cause__, error.__suppress_context__, \
            type(error.__context__).__name__


CAUSES = {"from_class": cause_from_class, "from_int": cause_from_int,
          "from_none": cause_from_none, "from_instance": cause_from_instance,
          "context_only": context_only}
for _key, _fn in CAUSES.items():
    register(f"cause/{_key}", _fn, lambda: (torch.ones(2),))


@pytest.mark.parametrize("key", list(CAUSES))
def test_exception_cause(key):
    fn = CAUSES[key]
    compare_and_count(f"cause/{key}", fn, lambda: (torch.ones(2),))
    eager = run(fn, (torch.ones(2),))
    whole = graphlift.compile(fn, backend=CompileCounter(), fullgraph=True)
    if eager.error is None:  # traced whole
        assert_same_run(eager, run(whole, (torch.ones(2),)))
    else:
        with pytest.raises(graphlift.Unsupported, match="exception causes must derive"):
            whole(torch.ones(2))


# == a function made in the frame keeps its annotations when made anew after the graph ==========
def annotated_typing(x):
    # Strings under this module's ``from __future__ import annotations``, as they are written.
    def inner(y: typing.Optional[torch.Tensor] = None, *, k: int = 1) -> typing.Any:  # noqa: UP045
        return y

    y = inner(x) + 1
    print("a graph break: inner is made anew after the graph")
    return y, inner.__annotations__, inner.__kwdefaults__


ANNOTATED = {"typing": annotated_typing}
for _key, _fn in ANNOTATED.items():
    register(f"annotations/{_key}", _fn, lambda: (torch.ones(2),))


@pytest.mark.parametrize("key", list(ANNOTATED))
def test_annotations_of_a_function_made_in_the_frame(key):
    compare_and_count(f"annotations/{key}", ANNOTATED[key], lambda: (torch.ones(2),))
