"""compile() and the code-object cache: the wrapper, hits and misses, MRU order, fallback, reset.

Every test runs the function eagerly and compiled and compares the results; counts come from
``graphlift.stats``, ``graphlift.cache_entries`` and ``CompileCounter``, never from timing.
"""

import builtins
import contextlib
import dataclasses
import functools
import gc
import inspect
import io
import weakref

import pytest
import torch
from corpus.harness import assert_same

import graphlift
from graphlift import cache
from graphlift.testing import CompileCounter

THIS_FILE = __file__


def check_same(compiled_fn, fn, *args, **kwargs):
    """Call both, compare results, and return the compiled result."""
    expected = fn(*args, **kwargs)
    got = compiled_fn(*args, **kwargs)
    assert_same(expected, got)
    return got


# -- the three forms of compile() --------------------------------------------------------------
def add_one(x):
    """Adds one."""
    return x + 1


def test_compile_as_a_call():
    counter = CompileCounter()
    compiled = graphlift.compile(add_one, backend=counter)
    check_same(compiled, add_one, torch.randn(3))
    assert counter.frame_count == 1


def test_compile_as_a_bare_decorator():
    @graphlift.compile
    def double(x):
        return x * 2

    x = torch.randn(3)
    assert_same(x * 2, double(x))
    assert graphlift.stats(double).graphs == 1


def test_compile_as_a_decorator_with_arguments():
    counter = CompileCounter()

    @graphlift.compile(backend=counter)
    def double(x):
        return x * 2

    x = torch.randn(3)
    assert_same(x * 2, double(x))
    assert counter.frame_count == 1 and counter.op_count == 1


def test_wrapper_keeps_the_function_metadata():
    compiled = graphlift.compile(add_one)
    for attribute in functools.WRAPPER_ASSIGNMENTS:
        assert getattr(compiled, attribute) == getattr(add_one, attribute)
    assert compiled.__wrapped__ is add_one
    assert inspect.signature(compiled) == inspect.signature(add_one)


def test_compiling_a_compiled_function_compiles_the_original():
    counter = CompileCounter()
    twice = graphlift.compile(graphlift.compile(add_one), backend=counter)
    check_same(twice, add_one, torch.randn(3))
    assert twice.__wrapped__ is add_one
    assert counter.frame_count == 1


# -- straight-line code: compiled == eager -----------------------------------------------------
def torch_functions(x, y):
    return torch.sin(x) + torch.cos(y) * torch.tanh(x)


def methods_with_kwargs(x):
    return x.sum(dim=0, keepdim=True), x.clamp(min=-0.5, max=0.5), x.transpose(0, 1)


def scalar_arithmetic(x):
    return 2 - x / 3 + x * 1.5 - 4 ** 0.5 + x ** 2


def subscripts(x):
    return x[0], x[:, 1], x[1:3, ::2], x[-1, 0], x[None, 0]


def tuple_and_list(x, y):
    return (x + y, [x * y, x - y], x.shape[0])


def returns_none(x):
    x.sum()


def reads_shape_as_constants(x):
    if x.dim() == 2 and x.shape[1] == 3 and x.dtype == torch.float32:
        return x.reshape(x.shape[0] * x.shape[1])
    return x


STRAIGHT_LINE = [
    (torch_functions, 2),
    (methods_with_kwargs, 1),
    (scalar_arithmetic, 1),
    (subscripts, 1),
    (tuple_and_list, 2),
    (reads_shape_as_constants, 1),
]


@pytest.mark.parametrize(("fn", "n_tensors"), STRAIGHT_LINE,
                         ids=lambda v: getattr(v, "__name__", ""))
def test_straight_line_code_matches_eager_in_one_graph(fn, n_tensors):
    counter = CompileCounter()
    compiled = graphlift.compile(fn, backend=counter, fullgraph=True)
    check_same(compiled, fn, *[torch.randn(4, 3) for _ in range(n_tensors)])
    assert counter.frame_count == 1
    assert graphlift.stats(compiled).eager_frames == 0


def test_none_is_returned():
    compiled = graphlift.compile(returns_none, fullgraph=True)
    assert compiled(torch.randn(3)) is None


def test_a_tensor_argument_returned_as_is_is_the_same_object():
    def identity_and_double(x):
        return x, x * 2

    compiled = graphlift.compile(identity_and_double)
    x = torch.randn(3)
    same, doubled = compiled(x)
    assert same is x
    assert_same(x * 2, doubled)


# -- hits, misses, MRU order -------------------------------------------------------------------
def test_same_shapes_with_new_values_hit_the_cache():
    counter = CompileCounter()
    compiled = graphlift.compile(torch_functions, backend=counter)
    for _ in range(3):
        check_same(compiled, torch_functions, torch.randn(4), torch.randn(4))
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits, stats.misses, stats.calls) == (1, 2, 1, 3)
    assert counter.frame_count == 1
    assert len(graphlift.cache_entries(compiled)) == 1


def test_printed_stats_start_with_calls():
    compiled = graphlift.compile(add_one)
    for _ in range(3):
        compiled(torch.ones(2))
    assert str(graphlift.stats(compiled)).startswith(
        "Stats(calls=3, hits=2, misses=1, compiles=1, graphs=1, eager_frames=0, graph_breaks=0, "
        "recompile_limit_hit=False, internal_errors=0, loaded=0, guard_seconds=")


def test_stats_for_a_function_never_called_are_zero():
    assert graphlift.stats(add_one).calls == 0
    assert graphlift.cache_entries(add_one) == []


def test_entries_are_in_most_recently_used_order():
    def scale(x, n):
        return x * n

    compiled = graphlift.compile(scale, dynamic=False)
    x = torch.randn(3)
    for n in (1, 2, 3):
        check_same(compiled, scale, x, n)
    assert [e.compile_id for e in graphlift.cache_entries(compiled)] == ["0/2", "0/1", "0/0"]
    check_same(compiled, scale, x, 1)
    assert [e.compile_id for e in graphlift.cache_entries(compiled)] == ["0/0", "0/2", "0/1"]
    check_same(compiled, scale, x, 2)
    assert [e.compile_id for e in graphlift.cache_entries(compiled)] == ["0/1", "0/0", "0/2"]
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits) == (3, 2)


def test_entries_expose_guards_and_graph():
    compiled = graphlift.compile(torch_functions)
    compiled(torch.randn(2), torch.randn(2))
    (entry,) = graphlift.cache_entries(compiled)
    assert entry.compile_id == "0/0"
    assert "L['x'].size()[0] == 2" in entry.guards
    assert isinstance(entry.graph, torch.fx.GraphModule)


# -- closures sharing one code object ----------------------------------------------------------
def make_scalers():
    scalers = []
    for k in (2, 3):
        def scaler(x, k=k):
            return x * k
        scalers.append(scaler)
    return scalers


def make_closure(k):
    def scale(x):
        return x * k
    return scale


def test_closures_share_the_cache_and_cell_guards_tell_them_apart():
    closures = [make_closure(k) for k in (2, 3, 4)]
    assert len({c.__code__ for c in closures}) == 1
    compiled = [graphlift.compile(c, dynamic=False) for c in closures]
    x = torch.randn(3)
    for c, fn in zip(compiled, closures):
        check_same(c, fn, x)
    entries = graphlift.cache_entries(compiled[0])
    assert entries == graphlift.cache_entries(compiled[2])
    assert len(entries) == 3
    assert "L['k'] == 2" in entries[-1].guards
    for c, fn in zip(compiled, closures):  # every closure now hits its own entry
        check_same(c, fn, x)
    stats = graphlift.stats(compiled[1])
    assert (stats.compiles, stats.hits) == (3, 3)


def test_functions_with_one_code_share_the_cache_and_default_guards_tell_them_apart():
    first, second = make_scalers()
    assert first.__code__ is second.__code__
    x = torch.randn(3)
    for fn in (first, second, first, second):
        check_same(graphlift.compile(fn, dynamic=False), fn, x)
    stats = graphlift.stats(first)
    assert (stats.compiles, stats.hits) == (2, 2)


# -- signatures --------------------------------------------------------------------------------
def keyword_only(x, *, scale, shift=1.0):
    return x * scale + shift


def positional_only(x, y=2, /, z=3):
    return x * y + z


def star_args(x, *rest):
    return x + rest[0] * rest[1]


def star_kwargs(x, **options):
    return x * options["scale"]


def default_none(x, bias=None):
    if bias is None:
        return x * 2
    return x * 2 + bias


@pytest.mark.parametrize(("fn", "args", "kwargs"), [
    (keyword_only, (), {"scale": 2}),
    (keyword_only, (), {"scale": 2, "shift": -1.0}),
    (positional_only, (), {}),
    (positional_only, (5,), {"z": 1}),
    (star_args, (torch.ones(3), 4), {}),
    (star_kwargs, (), {"scale": 3}),
    (default_none, (), {}),
    (default_none, (torch.ones(3),), {}),
    (default_none, (), {"bias": torch.ones(3)}),
], ids=lambda v: getattr(v, "__name__", None))
def test_signatures_bind_like_the_original(fn, args, kwargs):
    compiled = graphlift.compile(fn)
    x = torch.randn(3)
    assert inspect.signature(compiled) == inspect.signature(fn)
    check_same(compiled, fn, x, *args, **kwargs)
    check_same(compiled, fn, torch.randn(3), *args, **kwargs)
    assert graphlift.stats(compiled).hits == 1


def test_binding_errors_are_the_original_ones():
    compiled = graphlift.compile(keyword_only)
    with pytest.raises(TypeError) as eager_error:
        keyword_only(torch.ones(1))
    with pytest.raises(TypeError) as compiled_error:
        compiled(torch.ones(1))
    assert str(compiled_error.value) == str(eager_error.value)


def test_a_parameter_named_like_a_wrapper_local():
    # The wrapper once kept the head entry in a local named `e`, shadowing this argument.
    def add(x, e):
        return x + e

    compiled = graphlift.compile(add)
    x = torch.randn(3)
    check_same(compiled, add, x, 1)
    check_same(compiled, add, x, 1)
    assert graphlift.stats(compiled).hits == 1


# -- methods -----------------------------------------------------------------------------------
class Affine:
    def __init__(self, weight, bias):
        self.weight = weight
        self.bias = bias

    def forward(self, x):
        return x * self.weight + self.bias


def test_compiled_bound_method():
    affine = Affine(torch.randn(3), 0.5)
    compiled = graphlift.compile(affine.forward)
    x = torch.randn(3)
    check_same(compiled, affine.forward, x)
    check_same(compiled, affine.forward, torch.randn(3))
    affine.weight.mul_(2)  # an attribute tensor is a graph input: no recompile
    check_same(compiled, affine.forward, x)
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits) == (1, 2)
    affine.bias = 1.5  # a constant attribute is guarded
    check_same(compiled, affine.forward, x)
    assert graphlift.stats(compiled).compiles == 2


# -- backends ----------------------------------------------------------------------------------
def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown backend 'nope'; known backends: .*eager"):
        graphlift.compile(add_one, backend="nope")


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_named_backends_match_eager(backend):
    compiled = graphlift.compile(torch_functions, backend=backend)
    check_same(compiled, torch_functions, torch.randn(4), torch.randn(4))
    check_same(compiled, torch_functions, torch.randn(4), torch.randn(4))
    assert graphlift.stats(compiled).compiles == 1


def test_a_failing_backend_surfaces_the_users_error():
    def broken_backend(gm, example_inputs):
        raise KeyError("my backend is broken")

    compiled = graphlift.compile(add_one, backend=broken_backend)
    with pytest.raises(graphlift.BackendCompilerFailed) as info:
        compiled(torch.randn(3))
    cause = info.value.__cause__
    assert isinstance(cause, KeyError) and cause.args == ("my backend is broken",)
    message = str(info.value)
    assert "broken_backend" in message and "KeyError" in message
    assert "my backend is broken" in message


def test_wrappers_with_different_backends_do_not_share_entries():
    first, second = CompileCounter(), CompileCounter()
    x = torch.randn(3)
    check_same(graphlift.compile(add_one, backend=first), add_one, x)
    check_same(graphlift.compile(add_one, backend=second), add_one, x)
    check_same(graphlift.compile(add_one, backend=first), add_one, x)  # same options: a hit
    assert (first.frame_count, second.frame_count) == (1, 1)
    stats = graphlift.stats(add_one)
    assert (stats.compiles, stats.hits) == (2, 1)


# -- what cannot be traced ---------------------------------------------------------------------
def prints(x):
    print("inside")
    return x + 1


def prints_in_a_loop(x):
    for _ in range(2):
        print("inside")  # a break inside a loop cannot be resumed: the frame runs eagerly
    return x + 1


def branches_on_item(x):
    if x.sum().item() > 0:
        return x + 1
    return x - 1


def line_of(fn, offset=1):
    return f"{THIS_FILE}:{fn.__code__.co_firstlineno + offset}"


def test_unsupported_construct_runs_the_frame_eagerly(capsys):
    compiled = graphlift.compile(prints_in_a_loop)
    x = torch.randn(3)
    for _ in range(2):
        check_same(compiled, prints_in_a_loop, x)
        assert capsys.readouterr().out == "inside\n" * 4
    stats = graphlift.stats(compiled)
    assert (stats.eager_frames, stats.graph_breaks, stats.graphs) == (1, 1, 0)
    assert (stats.compiles, stats.hits) == (1, 1)
    assert graphlift.cache_entries(compiled)[0].graph is None


@pytest.mark.parametrize("fn", [prints, branches_on_item])
def test_graph_break_matches_eager(fn, capsys):
    compiled = graphlift.compile(fn)
    for x in (torch.ones(3), -torch.ones(3), torch.ones(3)):
        check_same(compiled, fn, x)
    stats = graphlift.stats(compiled)
    assert (stats.graph_breaks, stats.compiles, stats.hits) == (1, 1, 2)
    assert capsys.readouterr().out == ("inside\n" * 6 if fn is prints else "")


@pytest.mark.parametrize(("fn", "line"), [
    (prints, line_of(prints)),
    (prints_in_a_loop, line_of(prints_in_a_loop, 2)),
    (branches_on_item, line_of(branches_on_item)),
])
def test_fullgraph_raises_unsupported_naming_the_line(fn, line):
    compiled = graphlift.compile(fn, fullgraph=True)
    with pytest.raises(graphlift.Unsupported) as info:
        compiled(torch.ones(3))
    assert line in str(info.value)
    assert info.value.location == line


def test_fullgraph_is_not_served_by_an_eager_entry_of_another_wrapper(capsys):
    graphlift.compile(prints_in_a_loop)(torch.ones(3))
    with pytest.raises(graphlift.Unsupported):
        graphlift.compile(prints_in_a_loop, fullgraph=True)(torch.ones(3))
    assert capsys.readouterr().out == "inside\n" * 2


def doubles_loudly(x):
    print("doubling")
    return x * 2


def calls_after_a_break(x):
    print("break")
    return doubles_loudly(x + 1) + 1


def test_a_function_called_at_a_break_is_compiled_on_its_own(capsys):
    compiled = graphlift.compile(calls_after_a_break)
    for _ in range(3):
        check_same(compiled, calls_after_a_break, torch.randn(3))
    assert capsys.readouterr().out == "break\ndoubling\n" * 6
    stats = graphlift.stats(doubles_loudly)
    assert (stats.compiles, stats.hits, stats.graph_breaks) == (1, 2, 1)


def test_a_backend_that_is_not_hashable():
    @dataclasses.dataclass
    class Backend:  # eq=True makes instances unhashable
        calls: int = 0

        def __call__(self, gm, example_inputs):
            self.calls += 1
            return gm.forward

    backend = Backend()
    compiled = graphlift.compile(calls_after_a_break, backend=backend)
    with contextlib.redirect_stdout(io.StringIO()):
        check_same(compiled, calls_after_a_break, torch.randn(3))
    assert backend.calls == 3  # x + 1 before the call, x * 2 in it, + 1 after it


# -- reset and lifetime ------------------------------------------------------------------------
def test_reset_empties_the_cache_and_counters():
    compiled = graphlift.compile(add_one)
    compiled(torch.randn(3))
    assert len(graphlift.cache_entries(compiled)) == 1
    graphlift.reset()
    assert graphlift.cache_entries(compiled) == []
    assert graphlift.stats(compiled).calls == 0
    check_same(compiled, add_one, torch.randn(3))
    assert graphlift.stats(compiled).compiles == 1
    assert graphlift.cache_entries(compiled)[0].compile_id == "0/0"


SOURCE = """
import torch

SCALE = 3


def helper(x):
    return x * SCALE


class Model:
    def __init__(self):
        self.weight = torch.ones(3)

    def forward(self, x):
        return helper(x) + self.weight
"""


def make_module_function():
    """A function and its code object that nothing else refers to (exec makes new code)."""
    namespace = {}
    exec(compile(SOURCE, "<leak test>", "exec"), namespace)  # noqa: S102
    return namespace


@pytest.mark.parametrize("name", ["helper", "forward"])
def test_extra_state_is_freed_with_the_function_and_its_code(name):
    namespace = make_module_function()
    model = namespace["Model"]()
    fn = namespace["helper"] if name == "helper" else model.forward
    compiled = graphlift.compile(fn)
    x = torch.randn(3)
    check_same(compiled, fn, x)
    check_same(compiled, fn, x)
    code = fn.__code__
    state = cache.peek_state(code)
    assert state is not None and state.stats.hits == 1
    state_ref = weakref.ref(state)
    del namespace, model, fn, compiled, code, state
    gc.collect()
    assert state_ref() is None, gc.get_referrers(state_ref())


def test_get_state_is_freed_with_an_uncalled_function():
    namespace = make_module_function()
    compiled = graphlift.compile(namespace["helper"])
    state_ref = weakref.ref(cache.get_state(namespace["helper"].__code__))
    del namespace, compiled
    gc.collect()
    assert state_ref() is None


def test_a_miss_while_the_program_replaced_a_builtin_runs_eagerly():
    # graphlift's guards and compiler call builtins by name: while a program has rebound one
    # (CPython's test_lru_reentrancy_with_len wraps len in an lru_cache, which refuses the sets
    # and lists graphlift measures), a miss runs the frame eagerly; once it is back, the next
    # miss compiles. torch.compile (C++ guards) compiles here: 1 graph where graphlift has 0
    # until len is restored (docs/coverage.md).
    def f(x, items):
        return x * len(items)

    counter = CompileCounter()
    compiled = graphlift.compile(f, backend=counter)
    x, original = torch.ones(2), builtins.len
    builtins.len = functools.lru_cache(4)(original)
    try:
        assert torch.equal(compiled(x, (1, 2)), f(x, (1, 2)))
        assert (counter.frame_count, graphlift.stats(f).compiles) == (0, 0)
    finally:
        builtins.len = original
    assert torch.equal(compiled(x, (1, 2, 3)), x * 3)
    assert (counter.frame_count, graphlift.stats(f).compiles) == (1, 1)

