"""Dynamic shapes: automatic dynamic, mark_dynamic / mark_static, dynamic=True/False, 0/1
specialization, symbolic arithmetic in the graph, and the guards the ShapeEnv's assumptions become.

Every call runs eagerly and compiled and compares the results (values and types); graph and
compile counts come from ``CompileCounter`` and ``graphlift.stats``, never from log text. Log
text is checked only where the log is what the test is about.
"""

import logging
import sys
from pathlib import Path

import pytest
import torch
from corpus.harness import assert_same

import graphlift.output_graph  # the test of the ShapeEnv patches it before any compile
from graphlift.testing import CompileCounter


def run(compiled, fn, *args):
    """Call eager and compiled on the same arguments; results must match in value and type."""
    expected = fn(*args)
    got = compiled(*args)
    assert_same(expected, got)
    return got


def compiled_with_counter(fn, **options):
    counter = CompileCounter()
    return graphlift.compile(fn, backend=counter, **options), counter


@pytest.fixture
def recompile_log(caplog):
    graphlift.set_logs(recompiles=True)
    caplog.set_level(logging.INFO, logger="graphlift")
    yield lambda: [r.getMessage() for r in caplog.records if r.name == "graphlift.recompiles"]


def double_plus_length(x):
    return x * 2 + x.shape[0]


# -- automatic dynamic -------------------------------------------------------------------------
def test_sizes_2_to_20_on_one_dimension_give_two_graphs():
    compiled, counter = compiled_with_counter(double_plus_length)
    for n in range(2, 21):
        run(compiled, double_plus_length, torch.randn(n, 3))
    assert counter.frame_count == 2
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.graphs, stats.hits) == (2, 2, 17)
    first, second = counter.graphs
    assert "size" not in first.code  # the first compile is static: the size is a constant
    assert "size(0)" in second.code  # the second reads it inside the graph


def test_a_static_compile_makes_no_shape_env(monkeypatch):
    """The ShapeEnv is made when a size or int first becomes a symbol, never for a static trace
    (making one imports torch.fx.experimental.validator)."""
    made = []
    real = graphlift.output_graph.new_shape_env
    monkeypatch.setattr(graphlift.output_graph, "new_shape_env",
                        lambda *args: made.append(1) or real(*args))
    compiled, counter = compiled_with_counter(double_plus_length)
    run(compiled, double_plus_length, torch.randn(4, 3))
    assert made == []
    run(compiled, double_plus_length, torch.randn(5, 3))  # the size becomes a symbol
    assert made == [1] and counter.frame_count == 2
    run(compiled, double_plus_length, torch.randn(6, 3))
    assert made == [1] and counter.frame_count == 2


def test_only_the_dimension_that_changed_becomes_dynamic():
    compiled, counter = compiled_with_counter(double_plus_length)
    for n in (4, 5, 6):
        run(compiled, double_plus_length, torch.randn(n, 3))
    guards = graphlift.cache_entries(compiled)[0].guards
    assert "2 <= L['x'].size()[0]" in guards
    assert "L['x'].size()[1] == 3" in guards
    run(compiled, double_plus_length, torch.randn(5, 4))  # dimension 1 changes now
    assert counter.frame_count == 3
    guards = graphlift.cache_entries(compiled)[0].guards
    assert "2 <= L['x'].size()[1]" in guards and "L['x'].size()[1] == 3" not in guards


def test_recompile_log_names_the_dimension_that_changed(recompile_log):
    compiled = graphlift.compile(double_plus_length)
    run(compiled, double_plus_length, torch.randn(10))
    run(compiled, double_plus_length, torch.randn(8))
    (message,) = recompile_log()
    assert message.splitlines()[2:] == [
        "    - 0/0: L['x'].size()[0] == 10 (now 8)"
        f"  # return x * 2 + x.shape[0]  at {__file__}:42",
        "    dynamic from now on (automatic dynamic shapes):",
        "    - L['x'].size()[0]: now 8, before 10",
    ]


def scale(x, n):
    return x * n + n // 2


def test_int_arguments_1_to_20_give_two_graphs():
    compiled, counter = compiled_with_counter(scale)
    for n in range(1, 21):
        run(compiled, scale, torch.randn(3), n)
    assert counter.frame_count == 2
    assert graphlift.stats(compiled).compiles == 2
    placeholders = [n for n in counter.graphs[1].graph.nodes if n.op == "placeholder"]
    assert [p.meta["source"] for p in placeholders] == ["L['x']", "L['n']"]


def test_int_that_is_specialized_recompiles_for_each_value_and_stays_correct():
    def repeat(x, n):
        for _ in range(n):  # range() needs a real int: the symbol is specialized
            x = x + 1
        return x

    compiled, counter = compiled_with_counter(repeat)
    for n in (2, 3, 4, 3):
        run(compiled, repeat, torch.zeros(2), n)
    assert graphlift.stats(compiled).compiles == 3
    assert any("L['n'] == 4" in e.guards for e in graphlift.cache_entries(compiled))


def test_a_float_argument_becomes_dynamic_on_the_second_compile():
    compiled, counter = compiled_with_counter(scale)
    for factor in (1.5, 2.5, 3.5):
        run(compiled, lambda x, n: x * n + n // 2, torch.randn(3), factor)
    assert counter.frame_count == 2


def test_float_arguments_stay_static_under_dynamic_false():
    compiled, counter = compiled_with_counter(scale, dynamic=False)
    for factor in (1.5, 2.5, 3.5):
        run(compiled, lambda x, n: x * n + n // 2, torch.randn(3), factor)
    assert counter.frame_count == 3


# -- 0/1 specialization ------------------------------------------------------------------------
def test_batch_of_one_gets_its_own_entry(recompile_log):
    compiled, counter = compiled_with_counter(double_plus_length)
    x = torch.randn(4, 3)
    graphlift.mark_dynamic(x, 0)
    run(compiled, double_plus_length, x)
    for batch in (1, 5, 1, 7, 2):
        run(compiled, double_plus_length, torch.randn(batch, 3))
    assert counter.frame_count == 2
    assert graphlift.stats(compiled).compiles == 2
    (message,) = recompile_log()
    assert "    - 0/0: 2 <= L['x'].size()[0] (now 1; sizes 0 and 1 are always specialized, so " \
           "this size gets an entry of its own)" in message.splitlines()
    entries = {e.compile_id: e.guards for e in graphlift.cache_entries(compiled)}
    assert "L['x'].size()[0] == 1" in entries["0/1"]


def test_size_zero_is_specialized_too():
    compiled, counter = compiled_with_counter(double_plus_length, dynamic=True)
    for n in (0, 3, 0, 4):
        run(compiled, double_plus_length, torch.randn(n, 2))
    assert counter.frame_count == 2


# -- mark_dynamic, mark_static, dynamic=True/False ---------------------------------------------
def test_mark_dynamic_gives_one_graph():
    compiled, counter = compiled_with_counter(double_plus_length)
    for n in range(2, 21):
        x = torch.randn(n, 3)
        graphlift.mark_dynamic(x, 0)
        run(compiled, double_plus_length, x)
    assert counter.frame_count == 1
    assert graphlift.stats(compiled).compiles == 1


def test_a_marked_first_call_serves_unmarked_tensors():
    compiled, counter = compiled_with_counter(double_plus_length)
    x = torch.randn(6, 3)
    graphlift.mark_dynamic(x, [0])
    run(compiled, double_plus_length, x)
    for n in (2, 9, 30):
        run(compiled, double_plus_length, torch.randn(n, 3))
    assert counter.frame_count == 1


def only_eight(x):
    if x.shape[0] == 8:  # a branch on the size: specializes it
        return x + 1
    return x - 1


def test_mark_dynamic_on_a_dimension_that_tracing_specializes_raises():
    x = torch.randn(8)
    graphlift.mark_dynamic(x, 0)
    with pytest.raises(graphlift.ConstraintViolationError) as info:
        graphlift.compile(only_eight)(x)
    message = str(info.value)
    line = only_eight.__code__.co_firstlineno + 1
    assert message.splitlines()[:2] == [
        "L['x'].size()[0] was marked dynamic (mark_dynamic), but tracing specialized it to the "
        "constant 8:",
        f"  - L['x'].size()[0] == 8, assumed at {__file__}:{line} (if x.shape[0] == 8:  # a "
        f"branch on the size: specializes it)",
    ]
    assert "Remove the mark_dynamic call" in message


def test_specialization_without_mark_dynamic_is_not_an_error():
    compiled, counter = compiled_with_counter(only_eight, dynamic=True)
    for n in (8, 5, 8, 6):
        run(compiled, only_eight, torch.randn(n))
    assert counter.frame_count == 2  # one entry for 8, one (!= 8) for the rest


def test_mark_static_keeps_a_dimension_static_under_dynamic_true():
    compiled, counter = compiled_with_counter(double_plus_length, dynamic=True)
    for n in (3, 4, 5):
        x = torch.randn(n, n)
        graphlift.mark_static(x, 0)
        run(compiled, double_plus_length, x)
    assert counter.frame_count == 3
    guards = graphlift.cache_entries(compiled)[0].guards
    assert "L['x'].size()[0] == 5" in guards and "2 <= L['x'].size()[1]" in guards


def test_mark_dynamic_and_mark_static_undo_each_other():
    x = torch.randn(3, 4)
    graphlift.mark_dynamic(x, (0, -1))
    graphlift.mark_static(x, 1)
    assert x._graphlift_dynamic_dims == {0} and x._graphlift_static_dims == {1}
    with pytest.raises(IndexError):
        graphlift.mark_dynamic(x, 2)


def test_dynamic_true_is_dynamic_from_the_first_compile():
    compiled, counter = compiled_with_counter(scale, dynamic=True)
    for n in range(2, 12):
        run(compiled, scale, torch.randn(n), n)
    assert counter.frame_count == 1


def test_dynamic_false_never_is():
    compiled, counter = compiled_with_counter(double_plus_length, dynamic=False)
    for n in range(2, 6):
        x = torch.randn(n)
        graphlift.mark_dynamic(x, 0)  # ignored under dynamic=False
        run(compiled, double_plus_length, x)
    assert counter.frame_count == 4


# -- symbolic arithmetic inside the graph ------------------------------------------------------
def size_arithmetic(x, y):
    n = x.shape[0]
    a = x.view(-1, 2) * (n * 2)
    b = x.reshape(n // 2, 2).sum(0)
    c = x[: n // 2] + torch.arange(n // 2)
    d = y[:, : y.size(1) - 1]
    e = torch.zeros(n, 3) + len(x)
    f = x.new_ones(x.shape) * x.numel()
    g = -n + int(n) % 3
    return a, b, c, d, e, f, g, n * 3, x.shape, y.shape[1:]


def test_symbolic_arithmetic_on_sizes_is_correct_for_every_size():
    compiled, counter = compiled_with_counter(size_arithmetic)
    for n in range(2, 41, 2):
        run(compiled, size_arithmetic, torch.randn(n), torch.randn(3, n + 1))
    assert counter.frame_count == 2
    code = counter.graphs[1].code
    assert "size(0)" in code and "size(1)" in code and "arange" in code


def test_sizes_of_several_dimensions_through_view_and_permute():
    def heads(x, n_heads):
        batch, seq, dim = x.shape
        q = x.view(batch, seq, n_heads, dim // n_heads).transpose(1, 2)
        scores = q @ q.transpose(-2, -1) / (dim // n_heads) ** 0.5
        return scores.softmax(-1).transpose(1, 2).reshape(batch, seq, -1)

    compiled, counter = compiled_with_counter(heads)
    for batch, seq in [(2, 5), (3, 7), (4, 2), (2, 9), (5, 3)]:
        run(compiled, heads, torch.randn(batch, seq, 8), 2)
    assert counter.frame_count == 2


def test_symbolic_slice_bound_from_an_int_argument():
    def prefix(x, n):
        return x[:n] * 2, x[n:].sum()

    compiled, counter = compiled_with_counter(prefix)
    for n in range(2, 9):
        run(compiled, prefix, torch.arange(10.0), n)
    assert counter.frame_count == 2


def test_returned_sizes_are_ints_and_sizes():
    def sizes(x):
        return x.shape[0] * 2, x.size(), x.size(1) + 1, len(x)

    compiled, counter = compiled_with_counter(sizes, dynamic=True)
    for n in (2, 3, 4):
        run(compiled, sizes, torch.randn(n, n + 2))
    assert counter.frame_count == 1


def test_a_symbolic_size_lives_across_a_graph_break():
    def broken(x):
        n = x.shape[0] * 2
        graphlift.graph_break()
        return x + n, n

    compiled = graphlift.compile(broken)
    for n in range(2, 10):
        run(compiled, broken, torch.randn(n))
    assert graphlift.stats(compiled).compiles == 2


def test_graphs_with_symbols_through_aot_eager():
    def fn(x, n):
        return (x * n).sum(0) + x.shape[1]

    compiled = graphlift.compile(fn, backend="aot_eager", dynamic=True)
    for shape, n in [((4, 3), 2), ((5, 6), 3), ((2, 9), 7)]:
        run(compiled, fn, torch.randn(*shape), n)
    assert graphlift.stats(compiled).compiles == 1


# -- guards from the ShapeEnv ------------------------------------------------------------------
def same_or_concatenated(x, y):
    if x.shape[0] == y.shape[0]:
        return x + y
    return torch.cat([x, y])


def test_guards_fail_when_a_relation_between_dimensions_changes(recompile_log):
    compiled, counter = compiled_with_counter(same_or_concatenated, dynamic=True)
    for a, b in [(4, 4), (5, 7), (6, 6), (3, 8), (9, 9)]:
        run(compiled, same_or_concatenated, torch.randn(a), torch.randn(b))
    assert counter.frame_count == 2
    equal, unequal = sorted(graphlift.cache_entries(compiled), key=lambda e: e.compile_id)
    assert "L['x'].size()[0] == L['y'].size()[0]" in equal.guards
    assert "L['x'].size()[0] != L['y'].size()[0]" in unequal.guards
    (message,) = recompile_log()
    assert "    - 0/0: L['x'].size()[0] == L['y'].size()[0] " \
           "(now L['x'].size()[0] = 5, L['y'].size()[0] = 7)" in message.splitlines()


def test_guards_read_with_sources_and_compile_into_one_function():
    compiled = graphlift.compile(size_arithmetic, dynamic=True)
    run(compiled, size_arithmetic, torch.randn(6), torch.randn(3, 7))
    entry = graphlift.cache_entries(compiled)[0]
    assert "4 <= L['x'].size()[0]" in entry.guards  # reshape(n // 2, 2): n // 2 is not 0 or 1
    assert "(L['x'].size()[0] % 2) == 0" in entry.guards  # view(-1, 2) needs an even size
    assert "L['y'].stride()[0] == L['y'].size()[1]" in entry.guards
    assert entry.guard_source.count("def ") == 1
    assert "(__gl_s0 := x.size()[0])" in entry.guard_source
    with pytest.raises(RuntimeError):
        size_arithmetic(torch.randn(7), torch.randn(3, 7))  # odd: eager raises too
    assert not entry.check(compiled, {}, torch.randn(7), torch.randn(3, 7))


def test_strides_of_a_dynamic_tensor_are_guarded():
    def column_sums(x):
        return (x * 2).sum(0)

    compiled, counter = compiled_with_counter(column_sums, dynamic=True)
    for shape, transposed in [((4, 3), False), ((3, 5), True), ((6, 3), False), ((5, 7), True)]:
        x = torch.randn(*shape)
        run(compiled, column_sums, x.t() if transposed else x)
    assert counter.frame_count == 2  # one for contiguous, one for transposed inputs


def test_a_view_input_with_dynamic_sizes():
    def times_length(x):
        return x * x.shape[0]

    compiled, counter = compiled_with_counter(times_length, dynamic=True)
    base = torch.randn(20)
    for start in range(2, 8):
        run(compiled, times_length, base[start:])
    assert counter.frame_count == 1


# -- a model from the zoo ----------------------------------------------------------------------
ZOO = Path(__file__).resolve().parents[1] / "benchmarks" / "models"


@pytest.mark.skipif(not ZOO.exists(), reason="needs benchmarks/models (the model zoo)")
def test_zoo_gpt_with_varying_batch_and_sequence_compiles_at_most_twice():
    sys.path.insert(0, str(ZOO.parent))
    from models import make

    case = make("gpt")
    model = case.model.eval()
    counter = CompileCounter()
    compiled = graphlift.compile(model, backend=counter)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for batch, seq in [(2, 8), (3, 5), (4, 12), (2, 3), (5, 15), (3, 9)]:
            idx = torch.randint(0, 64, (batch, seq), generator=generator)
            torch.testing.assert_close(compiled(idx), model(idx))
    assert counter.frame_count == 2
    assert graphlift.stats(compiled).compiles == 2


def test_none_checks_on_a_symbolic_int_do_not_specialize_it():
    def maybe_scale(x, n=None):
        if n is None:
            n = 1
        if n is not None and n > 0:
            return x * n
        return x

    compiled, counter = compiled_with_counter(maybe_scale)
    for n in (2, 3, 4, 5, -3):
        run(compiled, maybe_scale, torch.ones(3), n)
    # Static for 2, then n >= 1 for the rest; -3 fails that guard (its entry returns x: no graph).
    assert (graphlift.stats(compiled).compiles, counter.frame_count) == (3, 2)


def test_int_attributes_of_modules_stay_static_under_dynamic_true():
    class Heads(torch.nn.Module):
        def __init__(self, heads):
            super().__init__()
            self.heads = heads

        def forward(self, x):
            return x.view(x.shape[0], self.heads, -1).sum(-1)

    module = Heads(2)
    counter = CompileCounter()
    compiled = graphlift.compile(module, backend=counter, dynamic=True)
    for batch in (3, 5, 9):
        run(compiled, module, torch.randn(batch, 8))
    assert counter.frame_count == 1
    guards = graphlift.cache_entries(compiled)[0].guards
    assert "L['self'].heads == 2" in guards and "2 <= L['x'].size()[0]" in guards
