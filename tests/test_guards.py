"""Guards: their text, and that each property they assert recompiles when it changes.

A changed property must recompile (a new cache entry) and the compiled result must still equal
eager; an unchanged one must hit.
"""

import gc
import logging
import math
import types

import pytest
import torch
from corpus.harness import assert_same

import graphlift
from graphlift.testing import CompileCounter

SCALE = 2
WEIGHT = torch.ones(3)


def check_same(compiled_fn, fn, *args):
    expected = fn(*args)
    got = compiled_fn(*args)
    assert_same(expected, got)
    return got


def scale(x, n):
    return x * n


def double(x):
    return x * 2


def uses_globals(x):
    return x * WEIGHT + SCALE


# -- guard text --------------------------------------------------------------------------------
def test_guard_strings_for_a_tensor_and_an_int():
    compiled = graphlift.compile(scale, dynamic=False)
    compiled(torch.randn(8, 2), 3)
    (entry,) = graphlift.cache_entries(compiled)
    for text in [
        "type(L['x']) is torch.Tensor",
        "L['x'].dtype == torch.float32",
        "L['x'].device == device(type='cpu')",
        "L['x'].requires_grad == False",
        "L['x'].dim() == 2",
        "L['x'].size()[0] == 8",
        "L['x'].size()[1] == 2",
        "L['x'].stride()[0] == 2",
        "L['x'].stride()[1] == 1",
        "type(L['n']) is int",
        "L['n'] == 3",
        "torch.is_grad_enabled() == True",
        "torch.is_autocast_enabled() == False",
        "torch.get_default_dtype() == torch.float32",
    ]:
        assert text in entry.guards
    assert entry.guard_source.startswith("def __gl_guards(")


def test_guard_strings_for_globals():
    compiled = graphlift.compile(uses_globals)
    compiled(torch.randn(3))
    guards = graphlift.cache_entries(compiled)[0].guards
    assert "G['SCALE'] == 2" in guards
    assert "G['WEIGHT'].size()[0] == 3" in guards


# -- every tensor property recompiles ----------------------------------------------------------
BASE = torch.randn(4, 4)

TENSOR_CHANGES = {
    "dtype": BASE.double(),
    "device": BASE.to("meta"),
    "requires_grad": BASE.clone().requires_grad_(),
    "shape": torch.randn(4, 5),
    "ndim": torch.randn(16),
    "stride": torch.randn(4, 4).t(),
}


@pytest.mark.parametrize("changed", sorted(TENSOR_CHANGES))
def test_tensor_property_change_recompiles(changed):
    counter = CompileCounter()
    compiled = graphlift.compile(double, backend=counter, dynamic=False)
    check_same(compiled, double, BASE)
    check_same(compiled, double, torch.randn(4, 4))
    other = TENSOR_CHANGES[changed]
    expected, got = double(other), compiled(other)
    if other.is_meta:
        assert (got.device, got.shape, got.dtype) == (expected.device, expected.shape,
                                                      expected.dtype)
    else:
        assert_same(expected, got)
    assert counter.frame_count == 2
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits) == (2, 1)
    check_same(compiled, double, torch.randn(4, 4))  # the first entry still hits
    assert graphlift.stats(compiled).compiles == 2


def test_requires_grad_change_gives_gradients_like_eager():
    compiled = graphlift.compile(double)
    compiled(torch.randn(3))
    x = torch.randn(3, requires_grad=True)
    compiled(x).sum().backward()
    got = x.grad.clone()
    x.grad = None
    double(x).sum().backward()
    assert_same(x.grad, got)


def test_grad_mode_flip_recompiles_and_names_grad_mode(caplog):
    graphlift.set_logs(recompiles=True)
    caplog.set_level(logging.INFO, logger="graphlift")
    compiled = graphlift.compile(double)
    x = torch.randn(3, requires_grad=True)
    check_same(compiled, double, x)
    with torch.no_grad():
        got = check_same(compiled, double, x)
    assert not got.requires_grad
    assert graphlift.stats(compiled).compiles == 2
    (record,) = [r for r in caplog.records if r.name == "graphlift.recompiles"]
    assert "- 0/0: torch.is_grad_enabled() == True (now False)" in record.getMessage()
    check_same(compiled, double, x)  # grad mode back on: the first entry hits
    with torch.no_grad():
        check_same(compiled, double, x)
    assert graphlift.stats(compiled).hits == 2


def test_default_dtype_change_recompiles():
    def ones_like_default(x):
        return x + torch.ones(3)

    compiled = graphlift.compile(ones_like_default)
    x = torch.randn(3, dtype=torch.float64)
    check_same(compiled, ones_like_default, x)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        check_same(compiled, ones_like_default, x)
    finally:
        torch.set_default_dtype(previous)
    assert graphlift.stats(compiled).compiles == 2


# -- Python values -----------------------------------------------------------------------------
@pytest.mark.parametrize(("first", "second"), [
    (3, 4), (3, 3.0), (True, 1), (2.5, 3.5), ("a", "b"), (None, 2),
])
def test_python_value_change_recompiles(first, second):
    def pick(x, v):
        if v is None:
            return x
        if isinstance(v, str):
            return x + len(v) + (v == "a")
        return x * v

    compiled = graphlift.compile(pick, dynamic=False)
    x = torch.randn(3)
    check_same(compiled, pick, x, first)
    check_same(compiled, pick, x, first)
    check_same(compiled, pick, x, second)
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits) == (2, 1)


def test_negative_zero_is_not_zero():
    def reciprocal_of_product(x, f):
        return 1 / (x * f)

    compiled = graphlift.compile(reciprocal_of_product, dynamic=False)
    x = torch.ones(2)
    check_same(compiled, reciprocal_of_product, x, 0.0)
    got = check_same(compiled, reciprocal_of_product, x, -0.0)
    assert torch.equal(got, torch.full((2,), -math.inf))
    assert graphlift.stats(compiled).compiles == 2


def test_nan_hits_its_own_entry():
    compiled = graphlift.compile(scale, dynamic=False)
    x = torch.ones(2)
    for _ in range(3):
        check_same(compiled, scale, x, math.nan)
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits) == (1, 2)


# -- globals -----------------------------------------------------------------------------------
def test_global_constant_change_recompiles(monkeypatch):
    compiled = graphlift.compile(uses_globals)
    x = torch.randn(3)
    check_same(compiled, uses_globals, x)
    monkeypatch.setattr(__import__(__name__), "SCALE", 5)
    check_same(compiled, uses_globals, x)
    assert graphlift.stats(compiled).compiles == 2


def test_global_tensor_is_a_graph_input_not_a_constant():
    counter = CompileCounter()
    compiled = graphlift.compile(uses_globals, backend=counter)
    x = torch.randn(3)
    check_same(compiled, uses_globals, x)
    WEIGHT.add_(1)
    try:
        check_same(compiled, uses_globals, x)
    finally:
        WEIGHT.sub_(1)
    assert graphlift.stats(compiled).compiles == 1
    placeholders = [n for n in counter.graphs[0].graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 2


def test_functions_sharing_code_read_their_own_globals():
    other = types.FunctionType(uses_globals.__code__, {"WEIGHT": torch.zeros(3), "SCALE": 7})
    x = torch.randn(3)
    for fn in (uses_globals, other, uses_globals, other):
        check_same(graphlift.compile(fn), fn, x)
    stats = graphlift.stats(other)
    assert (stats.compiles, stats.hits) == (2, 2)


def test_a_dead_global_function_does_not_match_none():
    namespace = {}
    exec(  # noqa: S102 - a function that only this namespace refers to
        "def helper(x):\n"
        "    return x * 2\n"
        "def f(x):\n"
        "    if helper is None:\n"
        "        return x\n"
        "    return helper(x)\n",
        namespace,
    )
    fn = namespace["f"]
    compiled = graphlift.compile(fn)
    x = torch.randn(3)
    check_same(compiled, fn, x)
    namespace["helper"] = None  # the helper dies; its guard must not match None
    gc.collect()
    check_same(compiled, fn, x)
    assert graphlift.stats(compiled).compiles == 2


def test_a_global_function_replaced_recompiles():
    namespace = {}
    exec("def helper(x):\n    return x * 2\ndef f(x):\n    return helper(x)\n",  # noqa: S102
         namespace)
    fn = namespace["f"]
    compiled = graphlift.compile(fn)
    x = torch.randn(3)
    check_same(compiled, fn, x)
    exec("def helper(x):\n    return x * 3\n", namespace)  # noqa: S102
    check_same(compiled, fn, x)
    assert graphlift.stats(compiled).compiles == 2


# -- aliasing ----------------------------------------------------------------------------------
def add(x, y):
    return x + y


def add_in_place(x, y):
    x.add_(1)
    return x + y


def test_same_tensor_twice_is_guarded():
    compiled = graphlift.compile(add)
    x = torch.randn(3)
    check_same(compiled, add, x, x)
    assert "L['y'] is L['x']" in graphlift.cache_entries(compiled)[0].guards
    check_same(compiled, add, x, torch.randn(3))
    check_same(compiled, add, x, x)
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits) == (2, 1)


def test_mutated_input_is_guarded_against_aliasing():
    compiled = graphlift.compile(add_in_place)
    eager_x, compiled_x = torch.zeros(3), torch.zeros(3)
    assert_same(add_in_place(eager_x, torch.ones(3)), compiled(compiled_x, torch.ones(3)))
    assert_same(eager_x, compiled_x)
    assert "L['x'] is not L['y']" in graphlift.cache_entries(compiled)[0].guards
    eager_x, compiled_x = torch.zeros(3), torch.zeros(3)
    assert_same(add_in_place(eager_x, eager_x), compiled(compiled_x, compiled_x))
    assert_same(eager_x, compiled_x)
    assert graphlift.stats(compiled).compiles == 2


# -- what a miss reports -----------------------------------------------------------------------
def test_first_failure_says_what_the_value_is_now():
    compiled = graphlift.compile(scale, dynamic=False)
    compiled(torch.randn(3), 3)
    with graphlift.config.patch(error_on_recompile=True):
        with pytest.raises(graphlift.RecompileError) as info:
            compiled(torch.randn(3), 4)
    assert "- 0/0: L['n'] == 3 (now 4)" in str(info.value)


def test_first_failure_names_the_tensor_size():
    compiled = graphlift.compile(double)
    compiled(torch.randn(3))
    with graphlift.config.patch(error_on_recompile=True):
        with pytest.raises(graphlift.RecompileError) as info:
            compiled(torch.randn(5))
    assert "- 0/0: L['x'].size()[0] == 3 (now 5)" in str(info.value)
