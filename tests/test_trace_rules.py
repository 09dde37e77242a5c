"""Trace rules: ``lookup`` for each kind of callable, and the switches that overrule it.

Each switch of issue 7's table is tested by running the function eagerly and compiled, comparing
the results, and counting graphs with ``CompileCounter``: ``allow_in_graph`` (one opaque node, the
body never runs while compiling), ``disable`` (always eager, and with ``recursive=True`` so is
everything it calls) and ``config.patch`` over the rule settings (changed inside, restored after,
also on exceptions).
"""

import collections
import colorsys
import contextlib
import copy
import functools
import heapq
import io
import itertools
import logging
import math
import operator
import os
import struct
import threading
import time

import numpy
import pytest
import torch
import torch.nn.functional as F
from reference import measure, recorded
from test.support import import_helper

import graphlift
from graphlift import config, trace_rules, translator  # noqa: F401  (trackers register their rules on import)
from graphlift.testing import CompileCounter
from graphlift.trace_rules import Kind

# functools.py's own partial (a Python class), as a fresh import without _functools has it.
PY_FUNCTOOLS = import_helper.import_fresh_module("functools", blocked=["_functools"])
# The C partial of a fresh _functools: another class than functools.partial, not polyfilled.
C_FUNCTOOLS = import_helper.import_fresh_module("functools", fresh=["_functools"])


def user_helper(x):
    return x * 2


@torch.no_grad()
def no_grad_helper(x):
    return x + 1


# -- lookup: representative functions of each kind --------------------------------------------
@pytest.mark.parametrize("fn, kind, rule", [
    (user_helper, Kind.INLINE, "user_code"),
    (F.relu, Kind.INLINE, "torch_inline"),  # torch.nn.functional written in Python
    (torch.nn.Linear.forward, Kind.INLINE, "torch_inline"),  # an nn.Module forward
    (no_grad_helper, Kind.INLINE, "torch_inline"),  # @torch.no_grad(): torch.utils._contextlib
    (itertools.chain, Kind.POLYFILL, "polyfill"),
    (itertools.chain.from_iterable, Kind.POLYFILL, "polyfill"),
    (heapq.heappush, Kind.POLYFILL, "polyfill"),
    (copy.deepcopy, Kind.POLYFILL, "polyfill"),  # stdlib Python, replaced by its stand-in
    (collections.deque.rotate, Kind.POLYFILL, "polyfill"),
    (functools.partial, Kind.POLYFILL, "polyfill"),
    (PY_FUNCTOOLS.partial, Kind.INLINE, "stdlib_traced"),  # with its methods
    (PY_FUNCTOOLS.partial.__call__, Kind.INLINE, "stdlib_traced"),
    (C_FUNCTOOLS.partial, Kind.SKIP, "stdlib"),
    (len, Kind.BUILTIN, "python_builtin"),
    (sum, Kind.BUILTIN, "python_builtin"),
    (math.sqrt, Kind.BUILTIN, "pure_c_function"),
    (operator.add, Kind.BUILTIN, "pure_c_function"),  # folded on constants, a node on tensors
    (struct.pack, Kind.BUILTIN, "pure_c_function"),  # folded on constants
    (struct.iter_unpack, Kind.SKIP, "stdlib"),  # an iterator: state, never folded
    (dict.fromkeys, Kind.BUILTIN, "constant_class_method"),
    (collections.deque, Kind.BUILTIN, "modelled_class"),
    (torch.no_grad, Kind.BUILTIN, "modelled_class"),
    (torch.sin, Kind.GRAPH, "torch_op"),
    (F.conv2d, Kind.GRAPH, "torch_op"),  # torch.nn.functional with a C binding
    (torch.ops.aten.add.Tensor, Kind.GRAPH, "torch_op"),
    (torch.Tensor.add, Kind.GRAPH, "tensor_method"),
    (torch.einsum, Kind.GRAPH, "torch_python"),  # torch.functional: kept whole
    (print, Kind.SKIP, "io_builtin"),
    (open, Kind.SKIP, "io_builtin"),
    (id, Kind.BUILTIN, "python_builtin"),  # of an input: a constant, pinned by identity
    (dir, Kind.SKIP, "unhandled_builtin"),
    (logging.info, Kind.SKIP, "stdlib"),
    (time.time, Kind.SKIP, "stdlib"),  # a C function of the standard library
    (os.path.join, Kind.SKIP, "stdlib"),
    (numpy.sum, Kind.GRAPH, "numpy"),  # traced through torch._numpy (config.trace_numpy)
    (numpy.random.rand, Kind.SKIP, "third_party"),  # NumPy's own random stream
    (torch.manual_seed, Kind.SKIP, "torch_global_state"),
    (torch.nn.Linear, Kind.SKIP, "torch_class"),
    (graphlift.reset, Kind.SKIP, "graphlift"),
    ([].append, Kind.SKIP, "c_method"),
])
def test_lookup(fn, kind, rule):
    decision = trace_rules.lookup(fn)
    assert (decision.kind, decision.rule.name) == (kind, rule), decision.explain()
    assert rule in decision.explain() and kind.value in decision.explain()


def test_rules_are_a_closed_table_with_unique_names():
    names = [rule.name for rule in trace_rules.RULES]
    assert len(names) == len(set(names))
    for rule in trace_rules.RULES:
        assert isinstance(rule.kind, Kind) and rule.why and "\n" not in rule.why
        if rule.kind is Kind.SKIP:
            assert rule.hint, f"a skip rule says how to overrule it: {rule.name}"


def test_lookup_of_a_bound_method_is_decided_by_its_function():
    class Box:
        def grow(self, x):
            return x + 1

    assert trace_rules.lookup(Box().grow).rule is trace_rules.USER_CODE
    assert trace_rules.lookup(logging.getLogger("x").info).rule is trace_rules.STDLIB
    handle = torch.nn.Linear(1, 1).register_forward_hook(lambda *args: None)
    assert trace_rules.lookup(handle.remove).rule is trace_rules.TORCH_BOUND_METHOD
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    # torch disables its optimizers' zero_grad and step itself (torch._disable_dynamo).
    assert trace_rules.lookup(optimizer.zero_grad).rule is trace_rules.TORCH_DISABLED


def test_lookup_names_the_stand_in():
    from graphlift.polyfills import builtins
    from graphlift.polyfills import itertools as itertools_polyfills

    assert trace_rules.lookup(itertools.islice).target is itertools_polyfills.islice
    assert trace_rules.lookup(sum).target is builtins.sum  # the fallback of the native handler


def test_lookup_of_a_compiled_function_inlines_the_original():
    compiled = graphlift.compile(user_helper)
    decision = trace_rules.lookup(compiled)
    assert decision.kind is Kind.INLINE and decision.target is user_helper


def test_a_compiled_function_called_while_tracing_is_inlined():
    class Scaler:
        def __init__(self):
            self.factor = 3

        def scale(self, x):
            return x * self.factor

    scaler = Scaler()
    helper = graphlift.compile(user_helper)
    method = graphlift.compile(scaler.scale)

    def f(x):
        return helper(x) + method(x)

    eager, compiled, counter = run(f, torch.randn(3), fullgraph=True)
    assert_same(eager, compiled)
    assert counter.frame_count == 1 and counter.op_count == 3  # both bodies in one graph


def test_use_polyfills_off_skips_the_originals():
    with config.patch(use_polyfills=False):
        assert trace_rules.lookup(itertools.chain).rule is trace_rules.STDLIB
        assert trace_rules.lookup(heapq.heappush).kind is Kind.SKIP
        assert trace_rules.lookup(sum).target is None
    assert trace_rules.lookup(itertools.chain).kind is Kind.POLYFILL


def run(fn, *args, fullgraph=False):
    """(eager result, compiled result, CompileCounter) from a clean cache."""
    graphlift.reset()
    counter = CompileCounter()
    compiled = graphlift.compile(fn, backend=counter, fullgraph=fullgraph)(*args)
    return fn(*args), compiled, counter


def assert_same(eager, compiled):
    if isinstance(eager, torch.Tensor):
        torch.testing.assert_close(compiled, eager)
    elif isinstance(eager, (tuple, list)):
        assert type(compiled) is type(eager) and len(compiled) == len(eager)
        for e, c in zip(eager, compiled):
            assert_same(e, c)
    else:
        assert compiled == eager


def test_a_skipped_call_is_a_graph_break_naming_the_rule():
    def f(x):
        y = x.sin()
        stamp = time.time()  # noqa: F841
        return y + 1

    x = torch.randn(4)
    eager, compiled, counter = run(f, x)
    assert_same(eager, compiled)
    assert counter.frame_count == 2  # before and after the break
    (reason,) = graphlift.explain(f)(x).break_reasons
    assert reason.break_type.value == "skipped_function"
    assert "time.time() skipped by trace rule 'stdlib'" in reason.explanation
    assert any("inline_modules" in hint for hint in reason.hints)
    with pytest.raises(graphlift.Unsupported, match="trace rule 'stdlib'"):
        graphlift.compile(f, fullgraph=True)(x)


def test_the_graph_breaks_log_names_the_rule(caplog):
    def f(x):
        logging.getLogger("graphlift.tests.user").debug("step")
        return x + 1

    caplog.set_level(logging.INFO, logger="graphlift")
    graphlift.set_logs(graph_breaks=True)
    torch.testing.assert_close(graphlift.compile(f)(torch.ones(2)), torch.full((2,), 2.0))
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "graphlift.graph_breaks")
    assert "skipped_function: logging.getLogger() skipped by trace rule 'stdlib'" in text
    assert "graphlift.config.inline_modules" in text


def test_a_no_grad_decorated_helper_is_inlined_into_one_graph():
    def f(x):
        return no_grad_helper(x) * 3

    x = torch.randn(3, requires_grad=True)
    eager, compiled, counter = run(f, x, fullgraph=True)
    assert_same(eager, compiled)
    assert compiled.requires_grad == eager.requires_grad
    assert counter.frame_count == 1


def test_python_functions_of_torch_nn_functional_are_inlined():
    def f(x):
        return F.relu(x) + F.softmax(x, dim=-1)

    x = torch.randn(2, 5)
    eager, compiled, counter = run(f, x, fullgraph=True)
    assert_same(eager, compiled)
    targets = [n.target for n in counter.graphs[0].graph.nodes if n.op == "call_function"]
    assert F.relu not in targets and F.softmax not in targets  # their bodies were traced


# -- allow_in_graph ------------------------------------------------------------------------------
class CountingBackend(CompileCounter):
    """A CompileCounter that also records how often ``calls`` grew before each compile."""

    def __init__(self, calls: list) -> None:
        super().__init__()
        self.calls = calls
        self.calls_at_compile: list[int] = []

    def __call__(self, gm, example_inputs):
        self.calls_at_compile.append(len(self.calls))
        return super().__call__(gm, example_inputs)


def test_allow_in_graph_is_one_node_whose_body_never_runs_while_tracing():
    calls = []

    @graphlift.allow_in_graph
    def opaque(x):
        calls.append(1)  # the counter: real calls only
        return x.sin() * 2 + 1

    def f(x):
        return opaque(x + 1) * 3

    backend = CountingBackend(calls)
    compiled = graphlift.compile(f, backend=backend, fullgraph=True)
    x = torch.randn(4)
    result = compiled(x)
    assert backend.calls_at_compile == [0]  # tracing and compiling ran none of opaque's body
    assert len(calls) == 1  # the graph's one real call
    torch.testing.assert_close(result, f(x))
    assert len(calls) == 2  # and eager's
    assert backend.frame_count == 1 and backend.op_count == 3  # add, opaque, mul
    targets = [n.target for n in backend.graphs[0].graph.nodes if n.op == "call_function"]
    assert opaque in targets and torch.sin not in targets  # one opaque node, nothing inside
    compiled(torch.randn(4))
    assert len(calls) == 3 and backend.frame_count == 1  # a cache hit calls it once more


def test_allow_in_graph_with_a_fake_function_for_what_graphlift_cannot_follow():
    calls = []

    def opaque(x):
        calls.append(1)
        return x * numpy.float32(2.0).item()  # numpy: graphlift could not trace this

    graphlift.allow_in_graph(opaque, fake=lambda x: torch.empty_like(x))
    try:
        def f(x):
            a, b = x.split(2)
            return opaque(a) + b

        backend = CountingBackend(calls)
        x = torch.randn(4)
        result = graphlift.compile(f, backend=backend, fullgraph=True)(x)
        assert backend.calls_at_compile == [0] and len(calls) == 1
        torch.testing.assert_close(result, f(x))
        assert backend.frame_count == 1
    finally:
        trace_rules.disallow_in_graph(opaque)
    assert trace_rules.lookup(opaque).kind is Kind.INLINE


@graphlift.config.patch(trace_numpy=False)  # NumPy untraced: the sandbox cannot follow it
def test_allow_in_graph_without_fake_falls_back_to_running_on_fake_tensors():
    """Documented fallback: the sandbox cannot follow it, so its body runs once on fakes."""
    calls = []

    @graphlift.allow_in_graph
    def opaque(x):
        calls.append(1)
        return x * float(numpy.float32(2.0))

    backend = CountingBackend(calls)
    x = torch.randn(3)
    result = graphlift.compile(lambda t: opaque(t) - 1, backend=backend, fullgraph=True)(x)
    assert backend.calls_at_compile == [1]
    torch.testing.assert_close(result, x * 2 - 1)
    assert backend.frame_count == 1


def noisy(x):
    print("body runs")
    return x * 2


def printed_per_call(compiled) -> list[int]:
    """How many times each of two calls of ``compiled`` printed ``noisy``'s line."""
    counts = []
    for _ in range(2):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            compiled(torch.ones(2))
        counts.append(out.getvalue().count("body runs"))
    return counts


def _torch_compile_prints_of_allowed() -> list[int]:
    """torch.compile's prints per call of a function calling ``noisy``, allowed in its graph."""
    import torch._dynamo

    torch._dynamo.allow_in_graph(noisy)
    try:
        return printed_per_call(torch.compile(lambda t: noisy(t) + 1, fullgraph=True,
                                              backend=CompileCounter()))
    finally:
        torch._dynamo.disallow_in_graph(noisy)


measure("trace_rules/allow_in_graph_body_that_prints", _torch_compile_prints_of_allowed)


def test_allow_in_graph_body_that_prints_runs_once_while_compiling_as_under_torch_compile():
    """The sandbox cannot follow a print, so the body runs once on fake tensors at compile time
    (docs/guide.md says so); torch.compile runs an allow_in_graph body on fakes too (recorded:
    tests/reference)."""
    graphlift.allow_in_graph(noisy)
    try:
        ours = printed_per_call(graphlift.compile(lambda t: noisy(t) + 1, fullgraph=True))
    finally:
        trace_rules.disallow_in_graph(noisy)
    theirs = recorded("trace_rules/allow_in_graph_body_that_prints")
    assert ours == theirs == [2, 1]  # compiling: once on fakes, once for real; then a hit


def test_allow_in_graph_returns_tuples_and_takes_keywords():
    @graphlift.allow_in_graph
    def pair(x, *, scale):
        return x * scale, x.sum()

    def f(x):
        a, b = pair(x, scale=2.0)
        return a + b

    eager, compiled, counter = run(f, torch.randn(3), fullgraph=True)
    assert_same(eager, compiled)
    assert counter.frame_count == 1


# -- disable -------------------------------------------------------------------------------------
def test_disabled_function_is_a_graph_break_with_the_users_reason():
    @graphlift.disable(reason="talks to the parameter server")
    def fetch(x):
        return x * 10

    def f(x):
        return fetch(x.cos()) + 1

    x = torch.randn(3)
    eager, compiled, counter = run(f, x)
    assert_same(eager, compiled)
    assert counter.frame_count == 2  # cos, then + 1: fetch ran eagerly between them
    (reason,) = graphlift.explain(f)(x).break_reasons
    assert "disabled by the user" in reason.explanation
    assert "talks to the parameter server" in reason.explanation
    assert trace_rules.lookup(fetch).rule is trace_rules.DISABLED
    with pytest.raises(graphlift.Unsupported, match="disabled by the user"):
        graphlift.compile(f, fullgraph=True)(x)


def test_compiling_a_disabled_function_gives_it_back():
    @graphlift.disable
    def f(x):
        return x + 1

    assert graphlift.compile(f) is f
    assert graphlift.compile(backend="eager")(f) is f
    torch.testing.assert_close(graphlift.compile(f)(torch.ones(2)), torch.full((2,), 2.0))
    assert graphlift.stats(f).compiles == 0


def test_disable_recursive_runs_compiled_functions_it_calls_eagerly():
    inner_counter = CompileCounter()
    inner = graphlift.compile(lambda x: x.exp() + 1, backend=inner_counter)
    x = torch.randn(3)
    inner(x)  # compiled and cached before the disabled call
    assert inner_counter.frame_count == 1 and graphlift.stats(inner).hits == 0

    @graphlift.disable
    def outer(x):
        return inner(x) * 2

    torch.testing.assert_close(outer(x), (x.exp() + 1) * 2)
    stats = graphlift.stats(inner)
    assert (stats.hits, stats.compiles, inner_counter.frame_count) == (0, 1, 1)  # original ran
    inner(x)
    assert graphlift.stats(inner).hits == 1  # compiled again outside the disabled call


def test_disable_recursive_also_stops_compiles_of_new_functions():
    counter = CompileCounter()

    @graphlift.disable
    def outer(x):
        return graphlift.compile(lambda t: t * 3, backend=counter)(x)

    torch.testing.assert_close(outer(torch.ones(2)), torch.full((2,), 3.0))
    assert counter.frame_count == 0


def test_disable_not_recursive_lets_what_it_calls_compile():
    inner_counter = CompileCounter()
    inner = graphlift.compile(lambda x: x.exp() + 1, backend=inner_counter)

    @graphlift.disable(recursive=False)
    def outer(x):
        return inner(x) * 2

    x = torch.randn(3)
    torch.testing.assert_close(outer(x), (x.exp() + 1) * 2)
    assert inner_counter.frame_count == 1
    assert trace_rules.lookup(outer).kind is Kind.SKIP


def test_disable_in_one_thread_does_not_touch_another():
    counter = CompileCounter()
    compiled = graphlift.compile(lambda x: x + 1, backend=counter)
    x = torch.ones(2)
    compiled(x)
    inside, release = threading.Event(), threading.Event()

    @graphlift.disable
    def waiting():
        inside.set()
        release.wait(10)
        return compiled(x)  # this thread: the original function

    worker = threading.Thread(target=waiting)
    worker.start()
    assert inside.wait(10)
    hits = graphlift.stats(compiled).hits
    compiled(x)  # the main thread, while the worker is inside the disabled call
    assert graphlift.stats(compiled).hits == hits + 1
    release.set()
    worker.join(10)
    assert graphlift.stats(compiled).hits == hits + 1 and counter.frame_count == 1


def test_disable_a_module_disables_its_forward():
    model = graphlift.disable(torch.nn.Linear(3, 2), reason="kept eager")
    x = torch.randn(1, 3)

    def f(x):
        return model(x).relu()

    eager, compiled, counter = run(f, x)
    assert_same(eager, compiled)
    assert counter.frame_count == 1  # relu after the break; the module ran eagerly
    assert "kept eager" in str(graphlift.explain(f)(x).break_reasons[0])


# -- config.patch over the rule settings ---------------------------------------------------------
def uses_colorsys(x):
    hue = colorsys.rgb_to_hsv(0.2, 0.4, 0.4)[0]  # pure Python in the standard library
    return x * hue


def test_inline_modules_traces_a_skipped_module_inside_the_block_only():
    x = torch.randn(3)
    eager, compiled, counter = run(uses_colorsys, x)
    assert_same(eager, compiled)
    assert graphlift.explain(uses_colorsys)(x).graph_break_count == 1  # stdlib: skipped
    with config.patch(inline_modules=("colorsys",)):
        assert config.inline_modules == ("colorsys",)
        eager, compiled, counter = run(uses_colorsys, x, fullgraph=True)
        assert_same(eager, compiled)
        assert counter.frame_count == 1
        assert trace_rules.lookup(colorsys.rgb_to_hsv).rule is trace_rules.CONFIG_INLINE
    assert config.inline_modules == ()
    assert trace_rules.lookup(colorsys.rgb_to_hsv).rule is trace_rules.STDLIB


def test_skip_modules_skips_user_code_and_restores_on_exceptions():
    def f(x):
        return user_helper(x) + 1

    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="boom"):
        with config.patch(skip_modules=(__name__,)):
            assert config.skip_modules == (__name__,)
            eager, compiled, counter = run(f, x)
            assert_same(eager, compiled)
            reason = graphlift.explain(f)(x).break_reasons[0]
            assert "config.skip_modules" in reason.explanation
            raise RuntimeError("boom")
    assert config.skip_modules == ()
    eager, compiled, counter = run(f, x, fullgraph=True)
    assert_same(eager, compiled)
    assert counter.frame_count == 1


def test_use_polyfills_as_a_decorator():
    def f(x):
        return list(itertools.chain([x], [x + 1]))

    @config.patch(use_polyfills=False)
    def compile_without_polyfills(x):
        assert config.use_polyfills is False
        return run(f, x)

    eager, compiled, counter = compile_without_polyfills(torch.ones(2))
    assert_same(eager, compiled)
    assert counter.frame_count == 1  # x + 1 before the skipped chain; nothing after it
    assert config.use_polyfills is True
    eager, compiled, counter = run(f, torch.ones(2), fullgraph=True)
    assert_same(eager, compiled)
