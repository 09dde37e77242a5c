"""Guards: their text, and that each property they assert recompiles when it changes.

A changed property must recompile (a new cache entry) and the compiled result must still equal
eager; an unchanged one must hit.
"""

import contextlib
import functools
import gc
import io
import logging
import math
import types

import pytest
import torch
from corpus.harness import assert_same
from reference import measure, recorded

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


@pytest.mark.parametrize("cpp", [True, False], ids=["cpp_tensor_guards", "python_checks"])
@pytest.mark.parametrize("changed", sorted(TENSOR_CHANGES))
def test_tensor_property_change_recompiles(changed, cpp):
    graphlift.config.cpp_tensor_guards = cpp
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


# -- tensor checks in C++ on a hit ------------------------------------------------------------
def add3(x, y, z):
    return x + y * z


def test_tensor_checks_run_in_cpp_on_a_hit_and_python_stays_readable():
    compiled = graphlift.compile(add3)
    args = (torch.randn(3), torch.randn(2, 3), torch.randn(1, 3).t().contiguous().t())
    check_same(compiled, add3, *args)
    check_same(compiled, add3, *(a.clone() for a in args))
    (entry,) = graphlift.cache_entries(compiled)
    guards = entry.compiled_guards
    assert "__gl_tensors(x, y, z)" in guards.fast_source
    assert "x.dtype is" not in guards.fast_source and "type(x) is" not in guards.fast_source
    assert "type(x) is" in entry.guard_source
    assert "x.dtype is" in entry.guard_source and "__gl_tensors" not in entry.guard_source
    assert graphlift.stats(compiled).hits == 1
    with graphlift.config.patch(cpp_tensor_guards=False):
        graphlift.reset()
        check_same(compiled, add3, *args)
        assert graphlift.cache_entries(compiled)[0].compiled_guards.fast_source is None


def test_cpp_checks_keep_dynamic_sizes_free():
    compiled = graphlift.compile(add3)
    for n in (3, 4, 5, 6):
        check_same(compiled, add3, torch.randn(n), torch.randn(n), torch.randn(n))
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits) == (2, 2)
    assert "__gl_tensors" in graphlift.cache_entries(compiled)[0].compiled_guards.fast_source
    check_same(compiled, add3, torch.randn(7, 2), torch.randn(7, 2), torch.randn(7, 2))
    assert graphlift.stats(compiled).compiles == 3  # a new rank misses


def _torch_compile_conjugate_view() -> int:
    """torch.compile's graphs over a complex tensor, then its lazily conjugated view."""
    import torch._dynamo.testing

    torch.manual_seed(0)
    x = torch.randn(4, dtype=torch.complex64)
    theirs = torch._dynamo.testing.CompileCounter()
    tc = torch.compile(double, backend=theirs)
    tc(x)
    tc(x.conj())
    return theirs.frame_count


measure("guards/conjugate_view", _torch_compile_conjugate_view)


def test_conjugate_view_recompiles_like_torch_compile():
    """TensorGuards compares dispatch keys: a lazily conjugated view gets an entry of its own,
    as under torch.compile (recorded: tests/reference), and the miss is explained."""
    x = torch.randn(4, dtype=torch.complex64)
    counter = CompileCounter()
    compiled = graphlift.compile(double, backend=counter)
    check_same(compiled, double, x)
    with graphlift.config.patch(error_on_recompile=True):
        with pytest.raises(graphlift.RecompileError) as info:
            compiled(x.conj())
    assert "dispatch keys differ" in str(info.value)
    check_same(compiled, double, x.conj())
    assert counter.frame_count == recorded("guards/conjugate_view") == 2


class Tagged(torch.Tensor):
    pass


class Loud:
    """Not a tensor: any attribute read of it prints, which a guard must never cause."""

    def __getattr__(self, name):
        print("read", name)
        raise AttributeError(name)

    def __mul__(self, other):
        return 0


OTHER_TYPES = {
    "float": lambda: 2.5,
    "parameter": lambda: torch.nn.Parameter(torch.randn(3), requires_grad=False),
    "subclass": lambda: torch.randn(3).as_subclass(Tagged),
    "object": Loud,
}


def _torch_compile_another_type(other) -> dict:
    """torch.compile on a tensor, then on another type: the frames it converted (without a graph
    for a float, or with __mul__'s frame) and its graphs."""
    import torch._dynamo.testing
    import torch._dynamo.utils

    torch.manual_seed(0)
    torch._dynamo.utils.counters.clear()
    theirs = torch._dynamo.testing.CompileCounter()
    tc = torch.compile(double, backend=theirs)
    with contextlib.redirect_stdout(io.StringIO()):
        tc(torch.randn(3))
        tc(other())
    return {"frames_ok": torch._dynamo.utils.counters["frames"]["ok"],
            "graphs": theirs.frame_count}


for _name, _other in OTHER_TYPES.items():
    measure(f"guards/another_tensor_type/{_name}",
            functools.partial(_torch_compile_another_type, _other))


@pytest.mark.parametrize("name", list(OTHER_TYPES))
def test_tensor_type_checks_left_to_cpp_still_miss_on_another_type(name, capsys):
    """A tensor's ``type(x) is torch.Tensor`` runs inside TensorGuards on a hit (it compares the
    exact type before reading anything): another type misses as under torch.compile (recorded:
    tests/reference), the miss names the type guard, and nothing is read from the other
    object."""
    other = OTHER_TYPES[name]
    counter = CompileCounter()
    compiled = graphlift.compile(double, backend=counter)
    check_same(compiled, double, torch.randn(3))
    assert "type(x)" not in graphlift.cache_entries(compiled)[0].compiled_guards.fast_source
    with graphlift.config.patch(error_on_recompile=True):
        with pytest.raises(graphlift.RecompileError) as info:
            compiled(other())
    assert "type(L['x']) is torch.Tensor" in str(info.value)
    assert capsys.readouterr().out == ""
    check_same(compiled, double, other())
    theirs = recorded(f"guards/another_tensor_type/{name}")
    assert graphlift.stats(compiled).compiles == 2 and theirs["frames_ok"] >= 2
    if type(other()) is torch.nn.Parameter:  # graphlift runs a subclass's frame eagerly
        assert counter.frame_count == theirs["graphs"] == 2


def test_tensor_type_check_stays_in_python_where_a_check_reads_through_the_tensor():
    from graphlift.guards import _InCpp, _left_in_python, _TypeInCpp

    def head():
        return [_TypeInCpp("type(x) is T", "x"), _InCpp("x.dtype is D"),
                _TypeInCpp("type(xs) is T", "xs")]

    assert _left_in_python(head(), ["x", "xs"]) == []
    assert _left_in_python([*head(), "x.tag == 1"], ["x", "xs"]) == ["type(x) is T", "x.tag == 1"]
    assert _left_in_python(head(), ["x", "xs", "x.grad"]) == ["type(x) is T"]
    assert _left_in_python([*head(), "y.x == 1"], ["x", "xs"]) == ["y.x == 1"]
    # A check ahead of the type check ran before it in the Python source too.
    assert _left_in_python(["x.tag == 1", *head()], ["x", "xs"]) == ["x.tag == 1"]


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


LAZY_TABLE: dict = {}


def _lazy_module():
    """A module whose own ``__getattr__`` records every name asked of it in ``LAZY_TABLE`` (as a
    lazy module imports what it is asked for)."""
    import types

    module = types.ModuleType("lazy_module")

    def lazy(name):
        LAZY_TABLE["asked " + name] = True
        raise AttributeError(name)

    module.__getattr__ = lazy
    return module


def reads_the_lazy_table(x):
    return x + LAZY_TABLE["k"]


def test_guarding_a_module_runs_none_of_its_code():
    """A dict holding a module is guarded item by item: describing the module's identity guard
    read its __qualname__ through the module's own __getattr__ (the program's code, at compile
    time), which here grew the dict being wrapped (an internal error); in a lazy module it
    imports."""
    LAZY_TABLE.clear()
    LAZY_TABLE.update(m=_lazy_module(), k=2)
    compiled = graphlift.compile(reads_the_lazy_table)
    with graphlift.config.patch(raise_internal_errors=True):
        for _ in range(2):
            assert torch.equal(compiled(torch.ones(2)), torch.full((2,), 3.0))
    assert sorted(LAZY_TABLE) == ["k", "m"]
    assert graphlift.stats(compiled).compiles == 1
    LAZY_TABLE.clear()
