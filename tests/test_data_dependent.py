"""Data-dependent values: ``.item()``, ``.tolist()``, ``nonzero``, masks, ``unique`` in the graph.

With ``config.capture_scalar_outputs`` / ``config.capture_dynamic_output_shape_ops`` (or
``fullgraph=True``, which turns both on as torch.compile 2.13 does) these stay in the graph as
*unbacked* symbols; Python needing such a value is a graph break of type GL0012. Every case runs
eagerly and under graphlift, and compares results, graphs and breaks with eager's and with
torch.compile's under the same settings (backend counting graphs; its figures, and whether it
agreed with eager, recorded: tests/reference).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from corpus.harness import assert_same
from reference import measure, recorded

import graphlift
from graphlift.graph_break import listeners as break_listeners
from graphlift.testing import CompileCounter

CAPTURE = {"capture_scalar_outputs": True, "capture_dynamic_output_shape_ops": True}


class _BreakLog(logging.Handler):
    """Counts torch.compile's ``Graph break in user code`` records (TORCH_LOGS=graph_breaks)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Graph break in user code"):
            self.count += 1


def outcome(fn: Callable, args: tuple):
    """The result, or the exception's type (a failed torch._check says the same in other words
    inside a graph: "Runtime assertion failed for expression u0 <= 9")."""
    try:
        return fn(*args)
    except Exception as error:
        return (type(error),)


def same_as_eager(eager: list, results: list, compare: Callable = assert_same) -> bool:
    """Whether every result equals eager's by ``compare`` (which raises AssertionError when not);
    a call where eager raised is not compared (the exception's type may differ: see
    ``outcome``)."""
    for expected, got in zip(eager, results):
        if isinstance(expected, tuple) and isinstance(expected[0], type):
            continue
        try:
            compare(expected, got)
        except AssertionError:
            return False
    return True


def torch_compile_counts(fn: Callable, calls: list[tuple], fullgraph: bool = False, *,
                         compare: Callable = assert_same, **settings) -> dict[str, Any]:
    """torch.compile's graphs and breaks with these dynamo settings, and whether it agreed with
    eager on every call. A measure (tests/reference)."""
    import torch._dynamo.config
    import torch._dynamo.testing

    printed = contextlib.redirect_stdout(io.StringIO())
    with printed:
        eager = [outcome(fn, args) for args in calls]
    counter = torch._dynamo.testing.CompileCounter()
    log = _BreakLog()
    logger = logging.getLogger("torch._dynamo")
    torch._logging.set_logs(graph_breaks=True)
    logger.addHandler(log)
    try:
        with torch._dynamo.config.patch(**settings), printed:
            compiled = torch.compile(fn, backend=counter, fullgraph=fullgraph)
            results = [outcome(compiled, args) for args in calls]
    finally:
        logger.removeHandler(log)
        torch._logging.set_logs()
    return {"graphs": counter.frame_count, "breaks": log.count,
            "same_as_eager": same_as_eager(eager, results, compare)}


def register(key: str, fn: Callable, calls: list[tuple], fullgraph: bool = False,
             **settings) -> str:
    """Register torch.compile's figures for ``fn`` over ``calls`` as ``data_dependent/<key>``;
    returns the full key."""
    return measure(f"data_dependent/{key}",
                   functools.partial(torch_compile_counts, fn, calls, fullgraph, **settings))


def graphlift_counts(fn: Callable, calls: list[tuple], fullgraph: bool = False,
                     **settings) -> tuple[int, int, list]:
    """(graphs, breaks, results) of graphlift with the same settings; breaks of resume functions
    included."""
    counter = CompileCounter()
    seen: list = []  # every break record, resume functions' included
    break_listeners.append(seen.append)
    try:
        with graphlift.config.patch(**settings):
            compiled = graphlift.compile(fn, backend=counter, fullgraph=fullgraph)
            results = [outcome(compiled, args) for args in calls]
    finally:
        break_listeners.remove(seen.append)
    # torch.compile logs a break once per place in the user's code (a recompiled resume function
    # that breaks at the same print is not logged again): count places.
    return counter.frame_count, len({record.user_stack for record in seen}), results


def check(key: str, fn: Callable, calls: list[tuple], fullgraph: bool = False,
          **settings) -> tuple:
    """Eager, graphlift and torch.compile (its run recorded as ``key``: see ``register``) agree
    on every call; graphlift's counts equal torch.compile's. Returns graphlift's (graphs,
    breaks)."""
    eager = [outcome(fn, args) for args in calls]
    graphs, breaks, got = graphlift_counts(fn, calls, fullgraph, **settings)
    for expected, mine in zip(eager, got):
        assert_same(expected, mine)
    assert recorded(key) == {"graphs": graphs, "breaks": breaks, "same_as_eager": True}
    return graphs, breaks


def registered(prefix: str, cases: list[tuple], fullgraph: bool = False,
               **settings) -> list:
    """Register each ``(fn, calls)`` case as ``<prefix>/<fn name>``; the pytest parameters
    ``(key, fn, calls)``."""
    return [pytest.param(register(f"{prefix}/{fn.__name__}", fn, calls, fullgraph, **settings),
                         fn, calls, id=fn.__name__) for fn, calls in cases]


def vec(*values: float) -> torch.Tensor:
    return torch.tensor(values)


def ivec(*values: int) -> torch.Tensor:
    return torch.tensor(values)


# -- the functions --------------------------------------------------------------------------
def scale_by_sum(x):
    n = x.sum().item()
    return x * n


def int_item_arith(x):
    n = x.max().item()
    return x + n * 2 - 1


def branch_on_item(x):
    n = x.sum().item()
    if n > 0:
        return x + 1
    return x - 1


def range_of_item(x):
    n = x.sum().int().item()
    out = x
    for _ in range(n):
        out = out + 1
    return out


def tolist_ints(x):
    return x.tolist()


def tolist_matrix(x):
    rows = x.tolist()
    return rows, x + 1


def tolist_floats(x):
    return x.tolist()


def nonzero_of(x):
    return torch.nonzero(x > 0)


def masked(x):
    return x[x > 0] * 2


def masked_select_of(x):
    return torch.masked_select(x, x > 0).sum()


def unique_of(x):
    return torch.unique(x)


def mask_size_read(x):
    y = x[x > 0]
    return y * y.shape[0]


def branch_on_mask_size(x):
    y = x[x > 0]
    if y.shape[0] > 1:
        return y + 1
    return y - 1


def zeros_of_item(x):
    n = x.max().item()
    torch._check(n >= 0)
    return torch.zeros(n)


def checked_item(x):
    n = x.sum().int().item()
    torch._check(n < 10)
    return x + n


def checked_size(x):
    n = x.max().item()
    torch._check_is_size(n)
    return torch.ones(n) * 2


# -- capture off: graph breaks, as torch.compile ---------------------------------------------
@pytest.mark.parametrize("key, fn, calls", registered("without_capture", [
    (scale_by_sum, [(vec(1., -2., 3.),)]),
    (branch_on_item, [(vec(1., -2., 3.),)]),
    (tolist_ints, [(ivec(1, 2, 3),)]),
    (nonzero_of, [(vec(1., -2., 3.),)]),
    (unique_of, [(ivec(3, 1, 3),)]),
    (checked_item, [(vec(1., 2.),)]),
]))
def test_without_capture_data_dependent_calls_break(key, fn, calls):
    graphs, breaks = check(key, fn, calls)
    assert breaks == 1


# -- capture on: one graph ------------------------------------------------------------------
@pytest.mark.parametrize("key, fn, calls", registered("with_capture", [
    (scale_by_sum, [(vec(1., -2., 3.),), (vec(4., 5., 6.),)]),
    (int_item_arith, [(ivec(1, 5, 2),), (ivec(7, 0, 3),)]),
    (tolist_ints, [(ivec(1, 2, 3),), (ivec(4, 5, 6),)]),
    (tolist_matrix, [(torch.arange(6).reshape(2, 3),)]),
    (nonzero_of, [(vec(1., -2., 3.),), (vec(-1., -2., -3.),), (vec(1., 2., 3.),)]),
    (masked, [(vec(1., -2., 3.),), (vec(-1., 2., 4.),)]),
    (masked_select_of, [(vec(1., -2., 3.),)]),
    (unique_of, [(ivec(3, 1, 3),), (ivec(1, 2, 3),)]),
    (mask_size_read, [(vec(1., -2., 3.),), (vec(5., 6., 7.),)]),
    (zeros_of_item, [(ivec(1, 3, 2),), (ivec(0, 0, 0),)]),
    (checked_size, [(ivec(1, 3, 2),)]),
], **CAPTURE))
@pytest.mark.filterwarnings("ignore:_check_is_size will be removed:FutureWarning")
def test_with_capture_data_dependent_values_stay_in_one_graph(key, fn, calls):
    graphs, breaks = check(key, fn, calls, **CAPTURE)
    assert (graphs, breaks) == (1, 0)


@pytest.mark.parametrize("key, fn, calls", registered("fullgraph", [
    (scale_by_sum, [(vec(1., -2., 3.),)]),
    (nonzero_of, [(vec(1., -2., 3.),)]),
    (masked, [(vec(1., -2., 3.),)]),
    (tolist_ints, [(ivec(1, 2, 3),)]),
], fullgraph=True))
def test_fullgraph_turns_capture_on(key, fn, calls):
    assert check(key, fn, calls, fullgraph=True) == (1, 0)


def _torch_compile_capture_defaults() -> dict:
    import torch._dynamo.config

    return {name: getattr(torch._dynamo.config, name) for name in sorted(CAPTURE)}


measure("data_dependent/capture_defaults", _torch_compile_capture_defaults)


def test_capture_is_off_by_default_and_named_as_in_torch_compile():
    defaults = graphlift.config.defaults()
    assert defaults["capture_scalar_outputs"] is False
    assert defaults["capture_dynamic_output_shape_ops"] is False
    assert recorded("data_dependent/capture_defaults") == \
        {"capture_dynamic_output_shape_ops": False, "capture_scalar_outputs": False}


def test_item_is_a_graph_node_with_an_unbacked_symbol():
    counter = CompileCounter()
    with graphlift.config.patch(capture_scalar_outputs=True):
        graphlift.compile(scale_by_sum, backend=counter)(vec(1., 2.))
    (graph,) = counter.graphs
    (item,) = [n for n in graph.graph.nodes if n.target == "item"]
    assert str(item.meta["example_value"]).startswith("zuf")  # a float without a value
    assert item.meta["unbacked_bindings"]


FLOAT_TOLIST = register("float_tolist", tolist_floats, [(vec(1.5, 2.5),)], **CAPTURE)


def test_float_tolist_breaks_as_in_torch_compile():
    graphs, breaks = check(FLOAT_TOLIST, tolist_floats, [(vec(1.5, 2.5),)], **CAPTURE)
    assert breaks == 1


# -- Python needing an unbacked value: GL0012 -------------------------------------------------
@pytest.mark.parametrize("key, fn, calls", registered("unbacked_needed_by_python", [
    (branch_on_item, [(vec(1., -2., 3.),), (vec(-5., 1., 1.),)]),
    (range_of_item, [(vec(1., 0., 1.),)]),
    (branch_on_mask_size, [(vec(1., -2., 3.),), (vec(1., -2., -3.),)]),
], **CAPTURE))
def test_python_needing_an_unbacked_value_is_a_clean_break(key, fn, calls):
    seen = []
    break_listeners.append(seen.append)
    try:
        graphs, breaks = check(key, fn, calls, **CAPTURE)
    finally:
        break_listeners.remove(seen.append)
    assert breaks == 1
    assert seen and seen[0].break_type.value == "data_dependent_guard" and seen[0].id == "GL0012"


def test_a_branch_on_an_unbacked_value_under_fullgraph_raises_unsupported():
    with pytest.raises(graphlift.Unsupported) as info:
        graphlift.compile(branch_on_item, fullgraph=True)(vec(1., 2.))
    assert "GL0012" in str(info.value) and "if n > 0:" in str(info.value)


# -- torch._check: asserts inside the graph ----------------------------------------------------
CHECKED_ITEM_CALLS = [(vec(1., 2.),), (vec(5., 6.),)]  # the second sums to 11: torch._check fails
CHECKED_ITEM = register("runtime_assert/checked_item", checked_item, CHECKED_ITEM_CALLS,
                        **CAPTURE)


def test_check_becomes_a_runtime_assert_that_raises_as_eager():
    check(CHECKED_ITEM, checked_item, CHECKED_ITEM_CALLS, **CAPTURE)
    counter = CompileCounter()
    with graphlift.config.patch(capture_scalar_outputs=True):
        compiled = graphlift.compile(checked_item, backend=counter)
        compiled(vec(1., 2.))
        with pytest.raises(RuntimeError, match="u0 < 10|u0 <= 9"):
            compiled(vec(5., 6.))
    assert counter.frame_count == 1  # the failing call was a hit: the graph itself raised
    assert "_assert_scalar" in counter.graphs[0].code


# -- mark_unbacked ---------------------------------------------------------------------------
def double_plus_length(x):
    return x * 2 + x.shape[0]


def branch_on_length(x):
    if x.shape[0] > 1:
        return x + 1
    return x - 1


UNBACKED_SIZES = (1, 5, 8, 0)


def _torch_compile_mark_unbacked(fn: Callable) -> dict:
    """torch.compile's graphs over every size of a dimension marked unbacked, and whether it
    agreed with eager."""
    import torch._dynamo.decorators
    import torch._dynamo.testing

    torch.manual_seed(0)
    theirs = torch._dynamo.testing.CompileCounter()
    reference = torch.compile(fn, backend=theirs)
    same = True
    for n in UNBACKED_SIZES:
        x = torch.randn(n, 3)
        torch._dynamo.decorators.mark_unbacked(x, 0)
        try:
            assert_same(fn(x), reference(x))
        except AssertionError:
            same = False
    return {"graphs": theirs.frame_count, "same_as_eager": same}


for _fn in (double_plus_length, branch_on_length):
    measure(f"data_dependent/mark_unbacked/{_fn.__name__}",
            functools.partial(_torch_compile_mark_unbacked, _fn))


@pytest.mark.parametrize("fn, graphs, breaks", [
    (double_plus_length, 1, 0),  # one entry for every size, 0 and 1 included
    (branch_on_length, 3, 1),  # the branch breaks; each side's resume function compiles
])
def test_mark_unbacked_dimension_serves_every_size(fn, graphs, breaks):
    mine = CompileCounter()
    compiled = graphlift.compile(fn, backend=mine)
    for n in UNBACKED_SIZES:
        x = torch.randn(n, 3)
        graphlift.mark_unbacked(x, 0)
        assert_same(fn(x), compiled(x))
    assert (mine.frame_count, graphlift.stats(compiled).graph_breaks) == (graphs, breaks)
    assert recorded(f"data_dependent/mark_unbacked/{fn.__name__}") == \
        {"graphs": graphs, "same_as_eager": True}
    guards = graphlift.cache_entries(compiled)[-1].guards
    assert not any("size()[0]" in g for g in guards)  # no guard on the unbacked size


def test_mark_unbacked_checks_its_arguments():
    with pytest.raises(IndexError):
        graphlift.mark_unbacked(torch.ones(2), 1)
    with pytest.raises(TypeError):
        graphlift.mark_unbacked([1, 2], 0)


# -- floats carried into resume functions stay inputs ------------------------------------------
def float_across_item_break(x):
    s = x.sum().item()  # capture off: a break; the resume function receives s as a float
    return x * s + 1.0


def float_computed_then_print(x):
    s = x.sum().item()
    t = s * 2.0
    print("mid")  # a second break: the resume function receives t
    return x * t


EIGHT_FLOATS = [(torch.ones(3) * i,) for i in range(1, 9)]  # eight different floats
for _fn in (float_across_item_break, float_computed_then_print):
    register(f"float_into_resume/{_fn.__name__}", _fn, EIGHT_FLOATS)


@pytest.mark.parametrize("fn, graphs", [
    (float_across_item_break, 3),  # the frame; its resume function static, then dynamic
    (float_computed_then_print, 4),  # each of the two resume functions static, then dynamic
])
def test_a_float_read_by_a_resume_function_becomes_an_input_not_a_guard(fn, graphs, capsys):
    calls = EIGHT_FLOATS
    assert check(f"data_dependent/float_into_resume/{fn.__name__}", fn, calls)[0] == graphs
    counter = CompileCounter()
    compiled = graphlift.compile(fn, backend=counter)
    for args in calls:
        compiled(*args)
    resumed = [g for g in counter.graphs if any(n.op == "placeholder" and "float" in n.name
                                                 or n.target == "item" for n in g.graph.nodes)]
    assert resumed, "the changing float reaches a graph as an input"
    capsys.readouterr()


# -- torch._check's message, exception type and variants ---------------------------------------
def check_with_constant_message(x):
    n = x.sum().int().item()
    torch._check(n < 10, lambda: "n is too big")
    return x + n


def check_with_string_message(x):
    n = x.sum().int().item()
    torch._check(n < 10, "n is too big")  # eager: TypeError when the check fails
    return x + n


def check_with_value_error(x):
    n = x.sum().int().item()
    torch._check_with(ValueError, n < 10, lambda: "n is too big")
    return x + n


def check_value(x):
    n = x.sum().int().item()
    torch._check_value(n < 10)
    return x + n


def check_without_message(x):
    n = x.sum().int().item()
    torch._check(n < 10, None)
    return x + n


def check_is_size_with_max(x):
    n = x.sum().int().item()
    torch._check_is_size(n, max=5)
    return torch.ones(n)


def check_message_of_a_local(x):
    n = x.sum().int().item()
    torch._check(n < 10, lambda: f"n is {n}")
    return x + n


def raised(fn: Callable, args: tuple) -> tuple[type, str] | None:
    try:
        fn(*args)
    except Exception as error:
        return type(error), str(error)
    return None


CHECK_CALLS = [(vec(1., 2.),), (vec(5., 6.),)]  # the second sums to 11: the check fails
for _fn in (check_with_constant_message, check_with_value_error, check_value,
            check_with_string_message, check_message_of_a_local, check_without_message,
            check_is_size_with_max):
    register(f"check_message/{_fn.__name__}", _fn, CHECK_CALLS, **CAPTURE)


def torch_compile_graphs_and_breaks(fn: Callable) -> tuple[int, int]:
    """torch.compile's recorded (graphs, breaks) over CHECK_CALLS, capture on."""
    theirs = recorded(f"data_dependent/check_message/{fn.__name__}")
    return theirs["graphs"], theirs["breaks"]


@pytest.mark.parametrize("fn, counts, tc", [
    # torch.compile keeps these in one graph and raises "Runtime assertion failed for
    # expression u0 <= 9" (RuntimeError), losing the message and the exception type: graphlift
    # breaks at the check, and eager's check raises eager's error.
    (check_with_constant_message, (2, 1), (1, 0)),
    (check_with_value_error, (2, 1), (1, 0)),
    (check_value, (2, 1), (1, 0)),
    (check_with_string_message, (2, 1), (2, 1)),
    # A closure over a value of the frame: torch.compile resumes after the check (2, 1);
    # graphlift cannot make the lambda outside the frame and runs the frame eagerly.
    (check_message_of_a_local, (0, 1), (2, 1)),
])
def test_a_check_with_a_message_raises_eagers_exception_and_message(fn, counts, tc):
    expected = [raised(fn, args) for args in CHECK_CALLS]
    graphs, breaks, _ = graphlift_counts(fn, CHECK_CALLS, **CAPTURE)
    with graphlift.config.patch(**CAPTURE):
        compiled = graphlift.compile(fn)
        assert [raised(compiled, args) for args in CHECK_CALLS] == expected
    assert expected[1] is not None and expected[0] is None
    assert (graphs, breaks) == counts
    assert torch_compile_graphs_and_breaks(fn) == tc


@pytest.mark.parametrize("fn, tc", [
    (check_without_message, (2, 1)),  # torch.compile breaks on an explicit None message
    (check_is_size_with_max, (1, 0)),
])
@pytest.mark.filterwarnings("ignore:_check_is_size will be removed:FutureWarning")
def test_a_check_without_a_message_stays_an_assert_of_the_graph(fn, tc):
    """The graph's assert raises RuntimeError, as eager's check does (its words differ:
    "Runtime assertion failed for expression u0 <= 9")."""
    expected = [outcome(fn, args) for args in CHECK_CALLS]
    graphs, breaks, got = graphlift_counts(fn, CHECK_CALLS, **CAPTURE)
    for e, g in zip(expected, got):
        assert_same(e, g)
    assert (graphs, breaks) == (1, 0)
    assert torch_compile_graphs_and_breaks(fn) == tc
    with graphlift.config.patch(**CAPTURE):
        error = raised(graphlift.compile(fn), CHECK_CALLS[1])
    assert error[0] is RuntimeError and "Runtime assertion failed" in error[1]


# -- strides of tensors with unbacked sizes ------------------------------------------------------
def nonzero_and_its_strides(x):
    y = torch.nonzero(x > 0)  # (u0, 2), column-major: strides (1, u0)
    return y * 2, y.stride()


def nonzero_flattened(x):
    return torch.nonzero(x > 0).view(-1)  # a view eager allows only for 0 or 1 rows


def masked_rows_by_stride(x):
    y = x[x.sum(1) > 0]  # (u0, 3), strides (3, 1)
    return y * y.stride(0), y.t().reshape(-1), y[:, 1:].contiguous()


def rows_with(*counts: int) -> list[tuple]:
    """3x3 inputs with ``count`` rows of positive sum (and positive entries)."""
    calls = []
    for count in counts:
        x = -torch.ones(3, 3)
        x[:count] = torch.arange(1., 3 * count + 1).reshape(count, 3)
        calls.append((x,))
    return calls


def _stride_calls() -> list[tuple]:
    one_positive = -torch.ones(3, 3)
    one_positive[1, 2] = 1.0  # nonzero: one row
    return [*rows_with(2, 0, 1, 3), (one_positive,)]


STRIDE_CALLS = _stride_calls()


@pytest.mark.parametrize("key, fn, calls", registered("unbacked_strides", [
    (fn, STRIDE_CALLS) for fn in (nonzero_and_its_strides, nonzero_flattened,
                                  masked_rows_by_stride)], **CAPTURE))
def test_strides_of_unbacked_sizes_match_eager_for_every_size(key, fn, calls):
    """Sizes 0 and 1 make strides degenerate (nonzero of one row has strides (1, 1)); the entry
    compiled for one size must serve the others with eager's values and strides, or break."""
    check(key, fn, calls, **CAPTURE)
    with graphlift.config.patch(**CAPTURE):
        compiled = graphlift.compile(fn)
        for args in calls:
            expected, got = outcome(fn, args), outcome(compiled, args)
            for e, g in zip(pytree.tree_leaves(expected), pytree.tree_leaves(got)):
                if isinstance(e, torch.Tensor):
                    assert e.stride() == g.stride() and e.shape == g.shape
