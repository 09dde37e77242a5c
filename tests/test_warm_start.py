"""Warm start: entries saved to ``config.cache_dir`` serve a later process without tracing.

One test runs two real processes; the others stand in for "a new process" with
``graphlift.reset()``, which drops every entry and makes the next miss read the directory again.
Every loaded entry must give what eager gives; anything that does not match is traced as usual,
and a file the cache did not write is never run.
"""

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from corpus.harness import assert_same
from reference import measure, recorded

import graphlift
from graphlift import persist
from graphlift.convert_frame import compile_options
from graphlift.testing import CompileCounter

ROOT = Path(__file__).resolve().parent.parent
SCALE = 3


def scaled(x, y, n):
    return torch.sin(x) * n + y * SCALE


@pytest.fixture
def cache(tmp_path):
    directory = tmp_path / "cache"
    graphlift.config.cache_dir = str(directory)
    return directory


@pytest.fixture
def warnings(caplog):
    caplog.set_level(logging.WARNING, logger="graphlift")
    return lambda: [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def call(compiled, fn, *args):
    expected = fn(*args)
    got = compiled(*args)
    assert_same(expected, got)
    return got


def counts(fn):
    stats = graphlift.stats(fn)
    return stats.compiles, stats.loaded, stats.hits


ARGS = (torch.randn(3), torch.randn(3), 2)


# -- two processes -----------------------------------------------------------------------------
CHILD = """
import json, sys
import torch
import graphlift
torch.manual_seed(0)
def f(x, w):
    return torch.relu(x @ w).sum(dim=-1) + x.shape[0]
x, w = torch.randn(4, 5), torch.randn(5, 3)
out = graphlift.compile(f)(x, w)
assert torch.equal(out, f(x, w))
stats = graphlift.stats(f)
print(json.dumps({"compiles": stats.compiles, "loaded": stats.loaded,
                  "dynamo": "torch._dynamo" in sys.modules}))
"""


def run_child(cache_dir: Path) -> dict:
    env = dict(os.environ, GRAPHLIFT_CACHE_DIR=str(cache_dir), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_a_second_process_runs_the_saved_entry_without_tracing(tmp_path):
    first = run_child(tmp_path)
    assert (first["compiles"], first["loaded"]) == (1, 0)
    second = run_child(tmp_path)
    assert (second["compiles"], second["loaded"]) == (0, 1)
    assert not second["dynamo"]  # no trace: no fake tensors, so torch._dynamo is never imported


MODULE_CHILD = """
import json, sys
import torch
import graphlift
from graphlift import module_structure
class Block(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = torch.nn.LayerNorm(dim)
        self.fc = torch.nn.Linear(dim, dim)
    def forward(self, x):
        return x + torch.relu(self.fc(self.ln(x)))
class Stack(torch.nn.Module):
    def __init__(self, dim, n):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(dim) for _ in range(n))
    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
for width in range(int(sys.argv[1])):  # other structures numbered first: other ids
    module_structure.structure_id(torch.nn.Linear(width + 7, 1))
torch.manual_seed(0)
model, x = Stack(5, 3).eval(), torch.randn(2, 5)
out = graphlift.compile(model)(x)
assert torch.equal(out, model(x))
stats = graphlift.stats(Stack.forward)
print(json.dumps({"compiles": stats.compiles, "loaded": stats.loaded,
                  "dynamo": "torch._dynamo" in sys.modules,
                  "trackers": "graphlift.variables" in sys.modules,
                  "sympy": "sympy" in sys.modules}))
"""


def test_a_second_process_runs_a_saved_module_entry(tmp_path):
    env = dict(os.environ, GRAPHLIFT_CACHE_DIR=str(tmp_path), OMP_NUM_THREADS="1")

    def run(shift):
        done = subprocess.run([sys.executable, "-c", MODULE_CHILD, str(shift)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=300, check=True)
        return json.loads(done.stdout.splitlines()[-1])

    assert run(0) == {"compiles": 1, "loaded": 0, "dynamo": True, "trackers": True, "sympy": True}
    # The structure-id guard runs without the variable trackers (graphlift.module_structure).
    assert run(4) == {"compiles": 0, "loaded": 1, "dynamo": False, "trackers": False,
                      "sympy": False}


CALLABLE_CHILD = """
import json, sys
import torch
import graphlift
calls = []
def my_backend(gm, examples):
    calls.append({"code": gm.code, "examples": [list(t.shape) for t in examples]})
    return gm.forward
torch.manual_seed(0)
def f(x, w):
    return torch.relu(x @ w).sum(dim=-1) + x.shape[0]
x, w = torch.randn(4, 5), torch.randn(5, 3)
out = graphlift.compile(f, backend=my_backend)(x, w)
assert torch.equal(out, f(x, w))
stats = graphlift.stats(f)
print(json.dumps({"compiles": stats.compiles, "loaded": stats.loaded, "calls": calls,
                  "dynamo": "torch._dynamo" in sys.modules}))
"""


def test_a_second_process_hands_the_saved_graph_to_a_callable_backend_again(tmp_path):
    """The frontend's work (graph, guards, run function) is loaded; only the backend runs."""
    env = dict(os.environ, GRAPHLIFT_CACHE_DIR=str(tmp_path), OMP_NUM_THREADS="1")

    def run():
        done = subprocess.run([sys.executable, "-c", CALLABLE_CHILD], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300, check=True)
        return json.loads(done.stdout.splitlines()[-1])

    first, second = run(), run()
    assert (first["compiles"], first["loaded"]) == (1, 0)
    assert (second["compiles"], second["loaded"]) == (0, 1)
    assert first["calls"] == second["calls"]  # the same graph, examples of the same sizes
    assert first["calls"][0]["examples"] == [[4, 5], [5, 3]]
    assert not second["dynamo"]  # no trace: no fake tensors


def counting_backend(gm, examples):
    """A module-level backend: saved under its import path."""
    BACKEND_CALLS.append([(tuple(t.shape), float(t.abs().sum())) for t in examples])
    return gm.forward


BACKEND_CALLS: list = []


def test_a_callable_backend_is_called_again_on_the_loaded_graph(cache):
    BACKEND_CALLS.clear()
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    compiled = graphlift.compile(linear_relu, backend=counting_backend)
    call(compiled, linear_relu, x, w)
    graphlift.reset()
    call(compiled, linear_relu, x, w)
    assert counts(linear_relu) == (0, 1, 0)
    cold, loaded = BACKEND_CALLS
    assert [shape for shape, _ in loaded] == [shape for shape, _ in cold] == [(4, 5), (5, 3)]
    assert [total for _, total in loaded] == [0.0, 0.0]  # zeros of the saved metadata
    call(compiled, linear_relu, torch.randn(4, 5), torch.randn(5, 3))
    assert counts(linear_relu) == (0, 1, 1) and len(BACKEND_CALLS) == 2


def test_a_backend_not_reachable_by_import_is_not_saved(cache):
    seen = []

    def local_backend(gm, examples):
        seen.append(1)
        return gm.forward

    for backend in (local_backend, lambda gm, examples: gm.forward):
        graphlift.reset()
        call(graphlift.compile(linear_relu, backend=backend), linear_relu, torch.randn(2, 5),
             torch.randn(5, 3))
        assert counts(linear_relu)[:2] == (1, 0)
    assert not list(cache.glob("*.json")) and seen == [1]


def test_a_callable_backend_has_a_file_of_its_own():
    eager = persist.entry_key(scaled.__code__, compile_options("eager", False, None))
    own = persist.entry_key(scaled.__code__, compile_options(counting_backend, False, None))
    assert own != eager
    assert persist.saved_as(counting_backend) == f"{__name__}.counting_backend"
    assert persist.saved_as(lambda gm, examples: gm) is None


# -- what matches and what does not ------------------------------------------------------------
def test_a_reloaded_entry_hits_and_gives_eager_results(cache):
    compiled = graphlift.compile(scaled)
    call(compiled, scaled, *ARGS)
    assert counts(scaled) == (1, 0, 0)
    graphlift.reset()
    call(compiled, scaled, *ARGS)
    call(compiled, scaled, torch.randn(3), torch.randn(3), 2)
    assert counts(scaled) == (0, 1, 1)
    entry = graphlift.cache_entries(scaled)[0]
    assert "L['n'] == 2" in entry.guards
    assert "__gl_tensors(x, y)" in entry.compiled_guards.fast_source


def test_a_changed_global_fails_the_loaded_guard_and_traces(cache, monkeypatch):
    compiled = graphlift.compile(scaled)
    call(compiled, scaled, *ARGS)
    graphlift.reset()
    monkeypatch.setitem(scaled.__globals__, "SCALE", 4)
    call(compiled, scaled, *ARGS)
    assert counts(scaled) == (1, 1, 0)
    graphlift.reset()
    call(compiled, scaled, *ARGS)  # now both entries are saved: the second one serves
    assert counts(scaled) == (0, 2, 0)


def test_a_different_tensor_misses_the_loaded_entry(cache):
    compiled = graphlift.compile(scaled, dynamic=False)
    call(compiled, scaled, *ARGS)
    graphlift.reset()
    call(compiled, scaled, torch.randn(3, dtype=torch.float64), torch.randn(3), 2)
    assert counts(scaled) == (1, 1, 0)


def test_dynamic_entries_are_saved_and_serve_new_sizes(cache):
    compiled = graphlift.compile(scaled)
    for n in (3, 4):
        call(compiled, scaled, torch.randn(n), torch.randn(n), 2)
    graphlift.reset()
    call(compiled, scaled, torch.randn(7), torch.randn(7), 2)
    assert counts(scaled) == (0, 2, 0)


def test_other_options_use_another_file(cache):
    call(graphlift.compile(scaled), scaled, *ARGS)
    graphlift.reset()
    call(graphlift.compile(scaled, fullgraph=True), scaled, *ARGS)
    assert counts(scaled) == (1, 0, 0)


def helper(x):
    return x * 2


def uses_helper(x):
    return helper(x) + 1


def test_an_edited_helper_is_traced_again(cache, monkeypatch):
    """The guard on a global function compares its code object: the loader rebinds the saved one
    to the function's code now, and refuses it when its contents differ."""
    compiled = graphlift.compile(uses_helper)
    call(compiled, uses_helper, torch.randn(3))
    graphlift.reset()
    call(compiled, uses_helper, torch.randn(3))
    assert counts(uses_helper)[:2] == (0, 1)
    graphlift.reset()
    monkeypatch.setattr(helper, "__code__", (lambda x: x * 3).__code__)
    call(compiled, uses_helper, torch.randn(3))
    assert counts(uses_helper)[:2] == (1, 0)


# -- graph breaks ------------------------------------------------------------------------------
def with_break(x, n):
    y = torch.sin(x) * n
    print("between", n)
    return torch.cos(y) + 1


@pytest.fixture
def traces(monkeypatch):
    """How many frames (functions and resume functions) graphlift traces from now on."""
    from graphlift import eval_frame

    count = [0]
    real = eval_frame.convert_frame

    def counting(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(eval_frame, "convert_frame", counting)
    return count


def _torch_compile_with_break() -> dict:
    """torch.compile's graphs for ``with_break``, and whether it agreed with eager."""
    torch.manual_seed(0)
    x = torch.randn(3)
    counter = CompileCounter()
    with contextlib.redirect_stdout(io.StringIO()):
        expected, got = with_break(x, 2), torch.compile(with_break, backend=counter)(x, 2)
    return {"graphs": counter.frame_count, "same_as_eager": torch.allclose(expected, got)}


measure("warm_start/with_break", _torch_compile_with_break)


def test_an_entry_with_a_graph_break_loads_with_its_resume_function(cache, traces, capsys):
    x = torch.randn(3)
    theirs = recorded("warm_start/with_break")  # tests/reference
    assert theirs["same_as_eager"]
    graphlift_counter = CompileCounter()
    call(graphlift.compile(with_break, backend=graphlift_counter), with_break, x, 2)
    assert graphlift_counter.frame_count == theirs["graphs"] == 2  # both split at print
    graphlift.reset()
    traces[0] = 0
    compiled = graphlift.compile(with_break)
    call(compiled, with_break, x, 2)
    assert traces[0] == 2 and len(list(cache.glob("*.json"))) == 2  # the frame, its resume fn
    graphlift.reset()
    traces[0] = 0
    capsys.readouterr()
    call(compiled, with_break, x, 2)
    call(compiled, with_break, torch.randn(3), 2)
    assert capsys.readouterr().out == "between 2\n" * 4  # eager's print, compiled's print
    assert traces[0] == 0  # neither the frame nor its resume function traced again
    assert counts(with_break) == (0, 1, 1)
    call(compiled, with_break, x, 3)  # another n: the frame is traced, its loaded resume
    assert traces[0] == 1  # function (which does not read n) serves


# -- backends that compile the loaded graph ------------------------------------------------------
def linear_relu(x, w):
    return torch.relu(x @ w).sum(dim=-1) + 1


def grads_of(compiled, x, w):
    w = w.detach().requires_grad_()
    out = compiled(x, w)
    out.sum().backward()
    return out.detach(), w.grad


def test_an_aot_eager_entry_is_compiled_again_from_saved_examples(cache):
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    expected = grads_of(linear_relu, x, w)
    compiled = graphlift.compile(linear_relu, backend="aot_eager")
    assert_same(expected, grads_of(compiled, x, w))
    (saved,) = persist.read_entries(cache, saved_file(cache).stem)
    assert [e["sizes"] for e in saved["examples"]] == [[4, 5], [5, 3]]
    assert [e["requires_grad"] for e in saved["examples"]] == [False, True]
    graphlift.reset()
    assert_same(expected, grads_of(compiled, x, w))  # the loaded graph's backward too
    assert counts(linear_relu) == (0, 1, 0)


def test_an_entry_with_symbolic_sizes_is_not_saved_for_aot_eager(cache, guard_logs):
    compiled = graphlift.compile(linear_relu, backend="aot_eager", dynamic=True)
    call(compiled, linear_relu, torch.randn(4, 5), torch.randn(5, 3))
    assert "a graph input of symbolic size" in guard_logs.text \
        or "a graph input that is not a tensor" in guard_logs.text
    assert not list(cache.glob("*.json"))


def test_inductor_gets_the_same_graph_and_fake_inputs_cold_and_loaded(cache, monkeypatch):
    """What inductor's FX graph and AOTAutograd caches need to serve a graph (they are bypassed
    without a ShapeEnv): static fake inputs under a tracing context whose fake mode has one. The
    cold compile gets them too, with the same graph code and input metadata as the loaded
    compile, so the cold process fills the caches that the first warm process then hits.
    A stand-in records the calls (a real inductor compile takes minutes on the loaded machine;
    benchmarks/warm_start.py --backend inductor runs it and reports the cache hits)."""
    from torch._guards import TracingContext
    from torch._subclasses.fake_tensor import FakeTensor

    from graphlift import backends

    seen = []

    def recorder(gm, examples):
        context = TracingContext.try_get()
        mode = context and context.fake_mode
        seen.append((gm.code, examples, mode and mode.shape_env,
                     all(e.fake_mode is mode for e in examples)))
        # AOTAutograd's cache serves graphs whose nodes carry their fake values.
        assert all(isinstance(n.meta.get("example_value"), FakeTensor)
                   for n in gm.graph.nodes if n.op in ("placeholder", "call_method"))
        return gm.forward

    monkeypatch.setitem(backends._BACKENDS, "inductor", recorder)
    x, w = torch.randn(4, 5), torch.randn(3, 5).t()  # w: a transposed (strided) input
    compiled = graphlift.compile(linear_relu, backend="inductor")
    expected = grads_of(linear_relu, x, w)
    assert_same(expected, grads_of(compiled, x, w))
    graphlift.reset()
    assert_same(expected, grads_of(compiled, x, w))
    assert counts(linear_relu) == (0, 1, 0)
    assert len(seen) == 2
    for _, examples, shape_env, same_mode in seen:  # cold, then loaded
        assert shape_env is not None and not shape_env.backed_var_to_val  # static: no symbol
        assert same_mode and all(isinstance(e, FakeTensor) for e in examples)
        assert [(e.shape, e.stride(), e.requires_grad) for e in examples] == \
            [((4, 5), (5, 1), False), ((5, 3), (1, 5), True)]
    assert seen[0][0] == seen[1][0]


def test_a_static_eager_compile_makes_no_shape_env(monkeypatch):
    """Only backends whose caches need it get a ShapeEnv on a static graph: for "eager" it
    would import torch._dynamo for nothing (a cold start's cost)."""
    from torch._guards import TracingContext

    from graphlift import backends

    seen = []

    def recorder(gm, examples):
        seen.append((TracingContext.try_get(), examples))
        return gm.forward

    monkeypatch.setitem(backends._BACKENDS, "eager", recorder)
    x, w = torch.randn(4, 5), torch.randn(5, 3)
    call(graphlift.compile(linear_relu, backend="eager"), linear_relu, x, w)
    ((context, examples),) = seen
    assert context is None
    assert examples[0] is x and examples[1] is w  # the real tensors, as before


# -- what is not saved -------------------------------------------------------------------------
PINNED = torch.nn.Linear(3, 2)


def apply_pinned(x):
    return PINNED(x)


@pytest.fixture
def guard_logs(caplog):
    graphlift.set_logs(guards=True)
    caplog.set_level(logging.INFO, logger="graphlift")
    yield caplog
    graphlift.set_logs(guards=False)


def test_a_module_pinned_as_a_global_is_saved_by_its_name(cache, monkeypatch):
    from graphlift import module_structure

    compiled = graphlift.compile(apply_pinned)
    x = torch.randn(4, 3)
    call(compiled, apply_pinned, x)
    graphlift.reset()
    # another process's count:
    monkeypatch.setattr(module_structure.STRUCTURE_VERSION, "value", 1000)
    call(compiled, apply_pinned, x)
    assert counts(apply_pinned) == (0, 1, 0)
    assert "nn_module_structure_version == 1000" in graphlift.cache_entries(apply_pinned)[0].guards
    with torch.no_grad():
        PINNED.weight.mul_(2)  # in place: the graph reads the module's own parameter
    call(compiled, apply_pinned, x)
    assert counts(apply_pinned) == (0, 1, 1)
    monkeypatch.setattr(PINNED, "bias", torch.nn.Parameter(torch.zeros(2)))  # reassigned
    call(compiled, apply_pinned, x)
    assert counts(apply_pinned) == (1, 1, 1)


def test_a_loaded_entry_goes_when_its_pinned_module_dies(cache):
    """As a traced entry does: it holds the module's parameters, and must neither keep them
    alive nor serve another module that reuses the address."""
    import gc
    import weakref

    global PINNED
    original = PINNED
    try:  # not monkeypatch: it would keep the replaced module alive to restore it
        PINNED = torch.nn.Linear(3, 2)
        compiled = graphlift.compile(apply_pinned)
        x = torch.randn(4, 3)
        call(compiled, apply_pinned, x)
        graphlift.reset()
        call(compiled, apply_pinned, x)
        assert counts(apply_pinned) == (0, 1, 0)
        assert len(graphlift.cache_entries(apply_pinned)) == 1
        dying = weakref.ref(PINNED)
        PINNED = torch.nn.Linear(3, 2)
        gc.collect()
        assert dying() is None  # the loaded entry did not keep it
        assert graphlift.cache_entries(apply_pinned) == []
        call(compiled, apply_pinned, x)  # the new module: traced
        assert counts(apply_pinned)[0] == 1
    finally:
        PINNED = original


def test_a_module_in_a_closure_is_guarded_by_structure_and_saved(cache, guard_logs):
    # A free variable's module is guarded like an argument's (its structure, not its
    # identity), so the entry is portable: another process's closure over another module of
    # that structure runs it, its parameters read as inputs.
    linear = torch.nn.Linear(3, 2)

    def apply_closure(x):
        return linear(x)

    compiled = graphlift.compile(apply_closure)
    call(compiled, apply_closure, torch.randn(4, 3))
    assert "nn_module_structure(L['linear'])" in guard_logs.text
    assert len(list(cache.glob("*.json"))) == 1


def test_a_module_pinned_by_identity_in_a_closure_is_not_saved(cache, guard_logs):
    holder = types.SimpleNamespace(linear=torch.nn.Linear(3, 2))

    def apply_held(x):
        return holder.linear(x)

    compiled = graphlift.compile(apply_held)
    call(compiled, apply_held, torch.randn(4, 3))
    assert "a module pinned by identity at" in guard_logs.text
    assert not list(cache.glob("*.json"))


def apply_block(block, x):
    return block(x).relu()


# -- modules guarded by their structure (regional compilation) -------------------------------------
class Block(torch.nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.ln = torch.nn.LayerNorm(dim)
        self.fc = torch.nn.Linear(dim, dim)
        self.scale = 2

    def forward(self, x):
        return x + torch.nn.functional.gelu(self.fc(self.ln(x))) * self.scale


@pytest.fixture
def new_numbering(monkeypatch):
    """Stand in for a new process's structure ids: empty tables, and a call that numbers
    ``n`` other structures first (so the loaded key gets another int than the saved one)."""
    from graphlift import module_structure

    def renumber(n):
        for name, empty in (("_structure_ids", {}), ("_structure_keys", []),
                            ("_structure_memo", {})):
            monkeypatch.setattr(module_structure, name, empty)
        for width in range(n):
            module_structure.structure_id(torch.nn.Linear(width + 7, 1))
    return renumber


def structure_guard(fn):
    (text,) = [g for g in graphlift.cache_entries(fn)[0].guards
               if g.startswith("nn_module_structure(")]
    return text


def test_an_entry_guarding_a_module_by_structure_loads_under_new_ids(cache, new_numbering):
    # Numbered from empty tables on both sides: how many structures earlier tests in this
    # worker numbered must not decide the saved int (it could be 5 by chance).
    new_numbering(0)
    compiled = graphlift.compile(apply_block)
    block, x = torch.nn.Linear(3, 2), torch.randn(4, 3)
    call(compiled, apply_block, block, x)
    saved = structure_guard(apply_block)
    assert saved.endswith(" == 0")
    graphlift.reset()
    new_numbering(5)
    call(compiled, apply_block, block, x)
    call(compiled, apply_block, torch.nn.Linear(3, 2), x)  # another instance alike: a hit
    assert counts(apply_block) == (0, 1, 1)
    loaded = structure_guard(apply_block)
    assert loaded != saved and loaded.endswith(" == 5")  # the int numbered here, not the saved one
    call(compiled, apply_block, torch.nn.Linear(3, 5), x)  # another structure: traced
    assert counts(apply_block) == (1, 1, 1)


def test_a_module_whose_structure_differs_misses_the_loaded_entry(cache, new_numbering):
    compiled = graphlift.compile(apply_block)
    x = torch.randn(4, 3)
    call(compiled, apply_block, torch.nn.Linear(3, 2), x)
    graphlift.reset()
    new_numbering(0)  # the other structure gets the int the saved entry had
    call(compiled, apply_block, torch.nn.Linear(3, 2, bias=False), x)
    assert counts(apply_block) == (1, 1, 0)


def four_blocks():
    """Four blocks alike and an input, and ``forward(compile)``: the input through the blocks,
    each compiled with ``compile``."""
    torch.manual_seed(0)
    blocks = [Block().eval() for _ in range(4)]
    x = torch.randn(2, 4)

    def forward(compile):
        y = x
        with torch.no_grad():  # else every block but the first gets an input requiring grad
            for block in map(compile, blocks):
                y = block(y)
        return y

    return blocks, forward


def _torch_compile_blocks() -> dict:
    """torch.compile's graphs for four blocks compiled one by one, and whether it agreed with
    eager."""
    _, forward = four_blocks()
    counter = CompileCounter()
    expected, got = forward(lambda m: m), forward(lambda m: torch.compile(m, backend=counter))
    return {"graphs": counter.frame_count, "same_as_eager": torch.allclose(expected, got)}


measure("warm_start/blocks_compiled_one_by_one", _torch_compile_blocks)


def test_blocks_compiled_one_by_one_warm_start_with_one_loaded_entry(cache, new_numbering):
    blocks, forward = four_blocks()
    expected = forward(lambda m: m)
    theirs = recorded("warm_start/blocks_compiled_one_by_one")  # tests/reference
    assert theirs["same_as_eager"]
    assert_same(expected, forward(graphlift.compile))
    assert graphlift.stats(Block.forward).compiles == theirs["graphs"] == 1
    graphlift.reset()
    new_numbering(3)
    assert_same(expected, forward(graphlift.compile))
    stats = graphlift.stats(Block.forward)
    assert (stats.compiles, stats.loaded, stats.hits) == (0, 1, 3)
    blocks[2].scale = 3  # a plain attribute the trace read: its guard misses
    expected = forward(lambda m: m)
    assert_same(expected, forward(graphlift.compile))
    assert graphlift.stats(Block.forward).compiles == 1


@graphlift.nested_compile_region
def layer(block, x):
    return block(x)


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(3))

    def forward(self, x):
        for block in self.blocks:
            x = layer(block, x)
        return x


def test_an_entry_with_nested_compile_regions_warm_starts(cache, new_numbering):
    """The entry's guards read the region function's module globals (saved by module name)."""
    torch.manual_seed(0)
    model, x = Stack().eval(), torch.randn(2, 4)
    with torch.no_grad():
        compiled = graphlift.compile(model)
        call(compiled, model, x)
        assert graphlift.region_stats(layer).reused == 2
        graphlift.reset()
        new_numbering(2)
        call(compiled, model, x)
    stats = graphlift.stats(Stack.forward)
    assert (stats.compiles, stats.loaded) == (0, 1)


def test_a_function_made_at_run_time_is_not_saved(cache):
    def make():
        def local(x):
            return x + 1
        return local

    def outer(x):
        return helper(x) * 2

    helper = make()
    compiled = graphlift.compile(outer)
    call(compiled, outer, torch.randn(2))
    graphlift.reset()
    call(compiled, outer, torch.randn(2))
    assert counts(outer)[:2] == (1, 0)
    assert not list(cache.glob("*.json"))


# -- files the cache did not write -------------------------------------------------------------
def saved_file(cache: Path) -> Path:
    (path,) = cache.glob("*.json")
    return path


def test_a_tampered_file_is_ignored_with_a_warning_and_never_run(cache, warnings):
    compiled = graphlift.compile(scaled)
    call(compiled, scaled, *ARGS)
    path = saved_file(cache)
    header, payload = path.read_bytes().split(b"\n", 1)
    # Code that would run if the file were trusted: it sets a global.
    planted = payload.replace(b"def __gl_run(", b"PLANTED = 1\\ndef __gl_run(", 1)
    assert planted != payload
    path.write_bytes(header + b"\n" + planted)
    graphlift.reset()
    call(compiled, scaled, *ARGS)
    assert counts(scaled) == (1, 0, 0)
    assert "PLANTED" not in scaled.__globals__
    assert any("ignores the cache file" in w and "never run" in w for w in warnings())


def test_a_truncated_file_is_ignored_with_a_warning(cache, warnings):
    compiled = graphlift.compile(scaled)
    call(compiled, scaled, *ARGS)
    path = saved_file(cache)
    path.write_bytes(path.read_bytes()[:50])
    graphlift.reset()
    call(compiled, scaled, *ARGS)
    assert counts(scaled) == (1, 0, 0)
    assert any("ignores the cache file" in w for w in warnings())


def test_a_file_of_another_function_is_ignored(cache, warnings):
    compiled = graphlift.compile(scaled)
    call(compiled, scaled, *ARGS)
    path = saved_file(cache)
    persist.write_entries(cache, "0" * 64, persist.read_entries(cache, path.stem))
    (cache / ("0" * 64 + ".json")).replace(path)  # signed, but saved for another key
    graphlift.reset()
    call(compiled, scaled, *ARGS)
    assert counts(scaled) == (1, 0, 0)
    assert any("written for another code object" in w for w in warnings())


def test_a_directory_others_may_write_is_not_used(tmp_path, warnings):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    graphlift.config.cache_dir = str(shared)
    compiled = graphlift.compile(scaled)
    call(compiled, scaled, *ARGS)
    assert not list(shared.iterdir())
    assert any("may be changed by other users" in w for w in warnings())


def test_the_key_follows_the_code_and_the_options():
    def twin(x, y, n):
        return torch.sin(x) * n + y * SCALE

    eager = compile_options("eager", False, None)
    key = persist.entry_key(scaled.__code__, eager)
    assert key == persist.entry_key(scaled.__code__, compile_options("eager", False, None))
    assert key != persist.entry_key(twin.__code__, eager)  # another line, another name
    assert key != persist.entry_key(scaled.__code__, compile_options("eager", True, None))
    assert key != persist.entry_key(scaled.__code__, compile_options("eager", False, False))
