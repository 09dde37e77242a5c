"""Regional compilation (issue 19): module instances alike share cache entries.

A module passed as an argument is guarded by its structure, not its identity, and its
parameters are graph inputs read from the instance at each call. Every test compares compiled
with eager (outputs, gradients) and the compile counts with torch.compile's, which are recorded
(tests/reference).
"""

import copy
import functools
import json
import shutil
import types

import pytest
import torch
import torch.nn.functional as F
from reference import measure, recorded
from torch import nn
from torch._higher_order_ops.invoke_subgraph import invoke_subgraph

import graphlift
from graphlift.backends import configure, takes_subgraphs
from graphlift.testing import CompileCounter


def same(a, b):
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


class Block(nn.Module):
    def __init__(self, dim=8, eps=1e-5, p=0.5):
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=eps)
        self.fc = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(2 * dim, dim)
        self.drop = nn.Dropout(p)
        self.scale = 2

    def forward(self, x):
        return x + self.drop(self.proj(F.gelu(self.fc(self.ln(x))))) * self.scale


def torch_compiles(run) -> dict:
    """The graphs torch.compile (backend eager) makes while ``run(compile)`` runs, and whether
    it agreed with eager (every check of ``run`` held): a measure's figure (tests/reference)."""
    torch.manual_seed(0)
    counter = CompileCounter()
    try:
        run(lambda m: torch.compile(m, backend=counter))
        agreed = True
    except AssertionError:
        agreed = False
    return {"graphs": counter.frame_count, "same_as_eager": agreed}


def graphlift_compiles(run):
    counter = CompileCounter()
    run(lambda m: graphlift.compile(m, backend=counter))
    return counter.frame_count


# The runs whose torch.compile figures are recorded, by key: ``run(compile)`` makes its own
# modules and inputs (seeded), compiles them with ``compile`` and checks them against eager.
RUNS: dict = {}


def compared(name):
    """Register the decorated ``run(compile)`` as ``regional/<name>``, torch.compile's figures
    for it as that key's measure."""
    def register(run):
        key = f"regional/{name}"
        RUNS[key] = run
        measure(key, functools.partial(torch_compiles, run))
        return run

    return register


def both(key):
    """(graphlift's graphs, torch.compile's recorded graphs) for the run ``key``; torch.compile
    agreed with eager."""
    theirs = recorded(key)
    assert theirs["same_as_eager"], f"{key}: torch.compile disagreed with eager (recorded)"
    torch.manual_seed(0)
    return graphlift_compiles(RUNS[key]), theirs["graphs"]


# -- one compile for identical blocks ------------------------------------------------------------
TWELVE_BLOCKS = []  # the blocks of the last run of twelve_blocks


@compared("twelve_blocks")
def twelve_blocks(compile):
    blocks = [Block().eval() for _ in range(12)]
    TWELVE_BLOCKS[:] = blocks
    x = torch.randn(2, 8)
    compiled = [compile(b) for b in blocks]
    outs = [c(x) for c in compiled]
    for out, block in zip(outs, blocks):
        same(out, block(x))
    assert not torch.allclose(outs[0], outs[1])  # the blocks really differ
    for c in compiled:  # second round: every block a cache hit
        c(x)


def test_twelve_blocks_compile_once_each_with_its_own_weights():
    assert both("regional/twelve_blocks") == (1, 1)
    entry = graphlift.cache_entries(graphlift.compile(TWELVE_BLOCKS[0]))[0]
    assert any(g.startswith("nn_module_structure(L['self']) == ") for g in entry.guards)
    assert "L['self'] is" not in " ".join(entry.guards)  # no identity guard
    assert "._parameters['weight']" in entry.run_source  # parameters read by path


@compared("decoder_of_blocks_through_a_module_list")
def decoder_of_blocks(compile):
    layers = nn.ModuleList(Block().eval() for _ in range(4))
    x = torch.randn(2, 8)
    for i, layer in enumerate(layers):
        layers[i] = compile(layer)
    y = x
    with torch.no_grad():  # else every block but the first gets an input requiring grad
        for layer in layers:
            y = layer(y)
    for i, layer in enumerate(layers):
        layers[i] = getattr(layer, "_orig_mod", layer)
    expected = x
    for layer in layers:
        expected = layer(expected)
    same(y, expected)


def test_a_decoder_of_blocks_through_a_module_list():
    assert both("regional/decoder_of_blocks_through_a_module_list") == (1, 1)


def apply_plus_one(m, x):
    return m(x) + 1


@compared("fresh_module_argument_each_call")
def fresh_module_argument_each_call(compile):
    x = torch.randn(2, 8)
    fn = compile(apply_plus_one)
    for _ in range(3):
        m = Block().eval()
        same(fn(m, x), apply_plus_one(m, x))


def test_a_fresh_module_argument_each_call_compiles_once():
    assert both("regional/fresh_module_argument_each_call") == (1, 1)


# -- what differs is guarded ---------------------------------------------------------------------
@compared("other_shapes")
def other_shapes(compile):
    small, wide = Block(8).eval(), Block(16).eval()
    for block, x in ((small, torch.randn(2, 8)), (wide, torch.randn(2, 16))):
        same(compile(block)(x), block(x))


def test_other_shapes_recompile():
    assert both("regional/other_shapes") == (2, 2)


@compared("eval_mode_of_one_block")
def eval_mode_of_one_block(compile):
    trained, evaluated = Block(p=0.0), Block(p=0.0).eval()
    x = torch.randn(2, 8)
    for block in (trained, evaluated, trained):
        same(compile(block)(x), block(x))


def test_eval_mode_of_one_block_is_guarded():
    assert both("regional/eval_mode_of_one_block") == (2, 2)


def test_a_hook_on_one_block_is_seen():
    torch.manual_seed(0)
    plain, hooked = Block().eval(), Block().eval()
    hooked.fc.register_forward_hook(lambda module, args, out: out * 3)
    x = torch.randn(2, 8)
    counter = CompileCounter()
    for block in (plain, hooked, plain, hooked):
        same(graphlift.compile(block, backend=counter)(x), block(x))
    assert counter.frame_count == 2


def test_torch_layer_hyperparameters_are_part_of_the_structure():
    torch.manual_seed(0)
    a, b = Block(eps=1e-5).eval(), Block(eps=1e-1).eval()
    x = torch.randn(2, 8)
    counter = CompileCounter()
    for block in (a, b):
        same(graphlift.compile(block, backend=counter)(x), block(x))
    assert counter.frame_count == 2  # LayerNorm.eps is not guarded one by one, yet differs


@compared("plain_attributes_per_instance")
def plain_attributes_per_instance(compile):
    a, b = Block().eval(), Block().eval()
    b.scale = 3
    x = torch.randn(2, 8)
    for block in (a, b):
        same(compile(block)(x), block(x))


def test_plain_attributes_are_guarded_per_instance():
    assert both("regional/plain_attributes_per_instance") == (2, 2)


def test_tied_and_untied_weights_are_told_apart():
    class Tied(nn.Module):
        def __init__(self, tie):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False)
            if tie:
                self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    torch.manual_seed(0)
    tied, untied = Tied(True).eval(), Tied(False).eval()
    x = torch.randn(2, 4)
    counter = CompileCounter()
    for m in (tied, untied, tied):
        same(graphlift.compile(m, backend=counter)(x), m(x))
    assert counter.frame_count == 2


def test_recompile_limit_counts_per_structure():
    blocks = [Block(dim).eval() for dim in range(2, 12)]

    def apply(m, x):
        return m(x)

    fn = graphlift.compile(apply, backend=CompileCounter())
    for block in blocks:
        x = torch.randn(2, block.ln.normalized_shape[0])
        same(fn(block, x), block(x))
    stats = graphlift.stats(fn)
    assert stats.compiles == 10 and not stats.recompile_limit_hit


def test_a_structure_miss_is_explained(caplog):
    graphlift.set_logs(recompiles=True)
    try:
        x = torch.randn(2, 8)
        graphlift.compile(Block().eval())(x)
        graphlift.compile(Block(eps=0.1).eval())(x)
    finally:
        graphlift.set_logs(recompiles=False)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "graphlift.recompiles")
    assert "nn_module_structure(L['self']) ==" in text and "(now " in text


# -- parameters are read at call time ------------------------------------------------------------
def test_parameters_mutated_in_place_or_replaced_are_seen():
    torch.manual_seed(0)
    blocks = [Block().eval() for _ in range(2)]
    counter = CompileCounter()
    compiled = [graphlift.compile(b, backend=counter) for b in blocks]
    x = torch.randn(2, 8)
    compiled[0](x)
    with torch.no_grad():
        blocks[1].fc.weight.mul_(2)  # in place
    same(compiled[1](x), blocks[1](x))
    blocks[0].proj.weight = nn.Parameter(torch.randn(8, 16))  # replaced, same shape
    same(compiled[0](x), blocks[0](x))
    assert counter.frame_count == 1
    blocks[0].proj = nn.Linear(16, 8, bias=False)  # replaced by another structure
    same(compiled[0](x), blocks[0](x))
    same(compiled[1](x), blocks[1](x))
    assert counter.frame_count == 2


def test_gradients_reach_each_blocks_own_parameters():
    torch.manual_seed(0)
    blocks = nn.ModuleList(Block(p=0.0) for _ in range(3))
    reference = copy.deepcopy(blocks)
    counter = CompileCounter()
    compiled = [graphlift.compile(b, backend=counter) for b in blocks]
    x = torch.randn(4, 8, requires_grad=True)  # every block's input requires grad: one entry
    x_ref = x.detach().clone().requires_grad_(True)
    y = x
    for c in compiled:
        y = c(y)
    y.square().sum().backward()
    z = x_ref
    for r in reference:
        z = r(z)
    z.square().sum().backward()
    same(y, z)
    same(x.grad, x_ref.grad)
    for p, q in zip(blocks.parameters(), reference.parameters()):
        same(p.grad, q.grad)
    assert counter.frame_count == 1


def test_requires_grad_flipped_on_one_block_is_guarded():
    torch.manual_seed(0)
    a, b = Block(p=0.0), Block(p=0.0)
    b.fc.weight.requires_grad_(False)
    counter = CompileCounter()
    x = torch.randn(2, 8)
    for block in (a, b):
        graphlift.compile(block, backend=counter)(x).sum().backward()
    assert b.fc.weight.grad is None and a.fc.weight.grad is not None
    assert counter.frame_count == 2


def test_identity_pinning_stays_available():
    blocks = [Block().eval() for _ in range(3)]
    x = torch.randn(2, 8)
    counter = CompileCounter()
    with graphlift.config.patch(share_module_entries=False):
        for block in blocks:
            same(graphlift.compile(block, backend=counter)(x), block(x))
    assert counter.frame_count == 3


# -- nested_compile_region: one trace for a block called many times ------------------------------
@graphlift.nested_compile_region
def layer(block, x):
    return block(x)


class Stack(nn.Module):
    def __init__(self, depth=6, dim=8, call=None):
        super().__init__()
        self.h = nn.ModuleList(Block(dim, p=0.0) for _ in range(depth))
        self.call = call or layer

    def forward(self, x):
        for block in self.h:
            x = self.call(block, x)
        return x


def _torch_compile_region_six_times() -> dict:
    """torch.compile's figures for a stack of six blocks through its own nested_compile_region."""
    torch.manual_seed(0)
    stack = Stack().eval()
    torch_stack = copy.deepcopy(stack)
    torch_stack.call = torch.compiler.nested_compile_region(lambda block, x: block(x))
    x = torch.randn(2, 8)
    with torch.no_grad():
        return torch_compiles(lambda compile: same(compile(torch_stack)(x), stack(x)))


measure("regional/region_called_six_times", _torch_compile_region_six_times)


def test_a_region_called_six_times_is_traced_once():
    torch.manual_seed(0)
    stack = Stack().eval()
    x = torch.randn(2, 8)
    before = (graphlift.region_stats(layer).traced, graphlift.region_stats(layer).reused)
    counter = CompileCounter()
    with torch.no_grad():
        same(graphlift.compile(stack, backend=counter)(x), stack(x))
    stats = graphlift.region_stats(layer)
    assert (stats.traced - before[0], stats.reused - before[1]) == (1, 5)
    assert counter.frame_count == 1
    assert layer(stack.h[0], x) is not None  # eagerly the function itself
    assert recorded("regional/region_called_six_times") == {"graphs": 1, "same_as_eager": True}


def test_a_marked_forward_method_is_reused_and_gradients_match():
    class Marked(Block):
        forward = graphlift.nested_compile_region(_copy_function(Block.forward))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.h = nn.ModuleList(Marked(p=0.0) for _ in range(4))

        def forward(self, x):
            for block in self.h:
                x = block(x)
            return x.square().sum()

    torch.manual_seed(0)
    model = Model()
    reference = copy.deepcopy(model)
    x = torch.randn(3, 8, requires_grad=True)  # every block's input requires grad: one key
    graphlift.compile(model, backend=CompileCounter())(x).backward()
    reference(x).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        same(p.grad, q.grad)
    stats = graphlift.region_stats(Marked.forward)
    assert (stats.traced, stats.reused) == (1, 3)


def _copy_function(fn):
    """Another function object over the same code: a region mark (and its counters) of its own."""
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)


def test_a_block_that_differs_is_traced_again_and_guarded():
    torch.manual_seed(0)
    region = graphlift.nested_compile_region(_copy_function(layer))
    stack = Stack(depth=4, call=region).eval()
    stack.h[2].scale = 5  # a plain attribute: the rebased guard fails for this block
    x = torch.randn(2, 8)
    counter = CompileCounter()
    compiled = graphlift.compile(stack, backend=counter)
    with torch.no_grad():
        same(compiled(x), stack(x))
        stats = graphlift.region_stats(region)
        assert (stats.traced, stats.reused) == (2, 2)
        stack.h[3].scale = 7  # after compiling: the rebased guard of block 3 fails now
        same(compiled(x), stack(x))
    assert counter.frame_count == 2


def test_other_argument_shapes_are_traced_again():
    torch.manual_seed(0)
    region = graphlift.nested_compile_region(_copy_function(layer))
    small, wide = Block(8).eval(), Block(16).eval()

    def run(a, b, x, y):
        return region(a, x), region(b, y), region(a, x * 2)

    x, y = torch.randn(2, 8), torch.randn(2, 16)
    compiled = graphlift.compile(run, backend=CompileCounter())
    with torch.no_grad():
        for got, want in zip(compiled(small, wide, x, y), run(small, wide, x, y)):
            same(got, want)
    stats = graphlift.region_stats(region)
    assert (stats.traced, stats.reused) == (2, 1)


def test_a_region_with_side_effects_is_traced_every_call():
    log = []

    @graphlift.nested_compile_region
    def noisy(block, x):
        log.append(1)
        return block(x)

    torch.manual_seed(0)
    stack = Stack(depth=3, call=noisy).eval()
    x = torch.randn(2, 8)
    with torch.no_grad():
        expected = stack(x)
        log.clear()
        same(graphlift.compile(stack, backend=CompileCounter())(x), expected)
    assert log == [1, 1, 1]
    assert graphlift.region_stats(noisy).reused == 0


# -- nested_compile_region as one subgraph: invoke_subgraph for aot_eager and inductor ----------
def subgraph_calls(gm):
    """(the graph's subgraph modules, the subgraph each invoke_subgraph call runs)."""
    calls = [n.args[0].target for n in gm.graph.nodes if n.target is invoke_subgraph]
    return sorted(name for name, _ in gm.named_children()), calls


def outer_ops(gm):
    """The outer graph's operations, as op kinds and call targets' names."""
    return [(n.op, getattr(n.target, "__name__", n.target)) for n in gm.graph.nodes
            if n.op not in ("placeholder", "output")]


def graphlift_graphs(model, args, backend):
    graphlift.reset()
    compiled = graphlift.compile(model, backend=backend)
    out = compiled(*args)
    return out, [(subgraph_calls(e.graph), outer_ops(e.graph))
                 for e in reversed(graphlift.cache_entries(compiled))]


def training_step(model, x, run):
    """``run(model, (x,))``'s (loss, graphs) and the gradients of x and of every parameter."""
    x = x.detach().clone().requires_grad_(True)
    model.zero_grad()
    loss, graphs = run(model, (x,))
    loss.backward()
    return loss.detach(), graphs, [x.grad, *(p.grad for p in model.parameters())]


class Loss(nn.Module):
    def __init__(self, stack):
        super().__init__()
        self.stack = stack

    def forward(self, x):
        return self.stack(x).square().sum()


def region_model(depth, call=None):
    torch.manual_seed(0)
    return Loss(Stack(depth=depth, call=call))


def _torch_compile_aot_eager_regions() -> dict:
    """torch.compile's training step (backend aot_eager) over four blocks through its own
    nested_compile_region: whether its loss was eager's, and the graphs its backend received."""
    import torch._dynamo

    def torch_graphs(model, args):
        graphs = []

        def capture(gm, example_inputs):
            graphs.append((subgraph_calls(gm), outer_ops(gm)))
            return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

        return torch.compile(model, backend=capture)(*args), graphs

    torch.manual_seed(0)
    x = torch.randn(3, 8)
    expected, _, _ = training_step(region_model(4), x, lambda m, a: (m(*a), None))
    torch_model = region_model(4, torch.compiler.nested_compile_region(_copy_function(layer)))
    torch_loss, torch_seen, _ = training_step(torch_model, x, torch_graphs)
    return {"same_loss": torch.allclose(torch_loss, expected, atol=1e-6, rtol=1e-5),
            "graphs": torch_seen}


measure("regional/aot_eager_one_subgraph_per_block", _torch_compile_aot_eager_regions)


def test_aot_eager_gets_one_subgraph_called_per_block_as_torch_compile_makes_it():
    x = torch.randn(3, 8)
    model = region_model(4)
    expected, _, grads = training_step(copy.deepcopy(model), x, lambda m, a: (m(*a), None))
    before = graphlift.region_stats(layer).traced
    loss, graphs, got = training_step(model, x, lambda m, a: graphlift_graphs(m, a, "aot_eager"))
    same(loss, expected)
    for a, b in zip(got, grads):
        same(a, b)
    assert graphlift.region_stats(layer).traced - before == 1
    theirs = recorded("regional/aot_eager_one_subgraph_per_block")  # tests/reference
    assert theirs["same_loss"]
    torch_seen = theirs["graphs"]
    graphs = json.loads(json.dumps(graphs))  # as recorded: tuples become lists
    assert len(graphs) == len(torch_seen) == 1
    assert graphs[0][0] == torch_seen[0][0] == [["subgraph_0"], ["subgraph_0"] * 4]
    assert graphs[0][1] == torch_seen[0][1]  # get_attr, invoke_subgraph, getitem per block


def test_eager_and_user_backends_get_the_calls_inlined():
    x = torch.randn(3, 8)
    for backend in ("eager", CompileCounter()):
        model = region_model(4)
        expected, _, grads = training_step(copy.deepcopy(model), x,
                                           lambda m, a: (m(*a), None))
        loss, graphs, got = training_step(model, x,
                                          lambda m, a, b=backend: graphlift_graphs(m, a, b))
        same(loss, expected)
        for a, b in zip(got, grads):
            same(a, b)
        assert graphs[0][0] == ([], [])
        assert ("call_function", "layer_norm") in graphs[0][1]


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="inductor on CPU needs a C++ compiler")
def test_inductor_compiles_the_subgraph_and_its_gradients_match():
    x = torch.randn(3, 8)
    model = region_model(2)
    expected, _, grads = training_step(copy.deepcopy(model), x, lambda m, a: (m(*a), None))
    loss, graphs, got = training_step(model, x, lambda m, a: graphlift_graphs(m, a, "inductor"))
    torch.testing.assert_close(loss, expected, atol=1e-4, rtol=1e-4)
    for a, b in zip(got, grads):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert graphs[0][0] == (["subgraph_0"], ["subgraph_0"] * 2)


def test_a_block_that_differs_is_inlined_beside_the_subgraph_calls():
    region = graphlift.nested_compile_region(_copy_function(layer))
    model = region_model(4, region)
    model.stack.h[2].scale = 5  # its rebased guard fails: traced as usual
    x = torch.randn(3, 8)
    expected, _, grads = training_step(copy.deepcopy(model), x, lambda m, a: (m(*a), None))
    loss, graphs, got = training_step(model, x, lambda m, a: graphlift_graphs(m, a, "aot_eager"))
    same(loss, expected)
    for a, b in zip(got, grads):
        same(a, b)
    assert graphs[0][0] == (["subgraph_0"], ["subgraph_0"] * 3)
    assert graphs[0][1].count(("call_function", "layer_norm")) == 1  # block 2, inline


def test_regions_inside_regions_and_tuple_outputs():
    @graphlift.nested_compile_region
    def inner(block, x):
        y = block(x)
        return y, y.sum(-1)

    @graphlift.nested_compile_region
    def outer(a, b, x):
        y, s = inner(a, x)
        z, t = inner(b, y)
        return z * 2, s + t, (z + 1, 3)

    class Pairs(nn.Module):
        def __init__(self):
            super().__init__()
            self.h = nn.ModuleList(Block(p=0.0) for _ in range(6))

        def forward(self, x):
            total = x.sum() * 0
            for i in range(0, len(self.h), 2):
                x, s, (w, three) = outer(self.h[i], self.h[i + 1], x)
                total = total + s.sum() + w.mean() * three
            return total + x.square().sum()

    torch.manual_seed(0)
    model = Pairs()
    x = torch.randn(3, 8, requires_grad=True)
    expected = model(x)
    grads = torch.autograd.grad(expected, [x, *model.parameters()])
    graphlift.reset()
    compiled = graphlift.compile(model, backend="aot_eager")
    got = compiled(x)
    same(got, expected)
    for a, b in zip(torch.autograd.grad(got, [x, *model.parameters()]), grads):
        same(a, b)
    (gm,) = [e.graph for e in graphlift.cache_entries(compiled)]
    assert subgraph_calls(gm) == (["subgraph_1"], ["subgraph_1"] * 3)
    assert subgraph_calls(gm.subgraph_1) == (["subgraph_0"], ["subgraph_0"] * 2)
    assert (graphlift.region_stats(outer).traced, graphlift.region_stats(outer).reused) == (1, 2)
    assert graphlift.region_stats(inner).traced == 1


def test_outputs_sharing_memory_stay_inline():
    @graphlift.nested_compile_region
    def twice(block, x):
        y = block(x)
        return y, y[0]  # a view of the other output: invoke_subgraph cannot return it

    class Rows(Stack):
        def forward(self, x):
            for block in self.h:
                x, row = twice(block, x)
                x = x + row
            return x

    torch.manual_seed(0)
    model, x = Rows(depth=3).eval(), torch.randn(3, 8)
    compiled = graphlift.compile(model, backend="aot_eager")
    with torch.no_grad():
        same(compiled(x), model(x))
    assert subgraph_calls(graphlift.cache_entries(compiled)[0].graph) == ([], [])
    assert graphlift.region_stats(twice).reused == 2


def test_with_a_cache_dir_regions_are_inlined_and_the_entry_warm_starts(tmp_path):
    x = torch.randn(3, 8)
    model = region_model(3).eval()
    with torch.no_grad():
        expected = model(x)
    graphlift.reset()
    with graphlift.config.patch(cache_dir=str(tmp_path / "cache")), torch.no_grad():
        compiled = graphlift.compile(model, backend="aot_eager")
        same(compiled(x), expected)
        assert subgraph_calls(graphlift.cache_entries(compiled)[0].graph) == ([], [])
        graphlift.reset()
        same(compiled(x), expected)
    stats = graphlift.stats(Loss.forward)
    assert (stats.compiles, stats.loaded) == (0, 1)


def test_which_backends_take_subgraphs():
    assert takes_subgraphs("aot_eager") and takes_subgraphs("inductor")
    assert takes_subgraphs(configure("inductor", "max-autotune-no-cudagraphs", None))
    assert not takes_subgraphs("eager") and not takes_subgraphs(CompileCounter())


# -- changes made in place after a module's structure was memoized -----------------------------
class Hooked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.drop = nn.Dropout(0.5)
        self.register_buffer("w", torch.full((3,), 2.0))

    def forward(self, x):
        y = self.drop(self.fc(x).relu())
        if "w" in self._buffers:
            y = y * self.w
        return y


def apply_module(block, x):
    return block(x)


# change made after the first call: (graphlift's graphs, torch.compile's graphs or None where
# torch.compile serves a stale entry: a forward (pre-)hook on a submodule and a global hook). A
# backward hook: graphlift breaks at the hooked submodule and compiles its forward on its own
# (3 graphs); torch.compile keeps its entry (1).
IN_PLACE_CHANGES = {
    "forward_hook_on_a_submodule": (
        lambda b: b.fc.register_forward_hook(lambda m, i, o: o * 100), 2, None),
    "forward_pre_hook_on_a_submodule": (
        lambda b: b.fc.register_forward_pre_hook(lambda m, i: (i[0] * 3,)), 2, None),
    "backward_hook_on_a_submodule": (
        lambda b: b.fc.register_full_backward_hook(lambda m, gi, go: None), 3, 1),
    "buffer_deleted": (lambda b: delattr(b, "w"), 2, 2),
    "forward_of_a_submodule_replaced": (
        lambda b: setattr(b.fc, "forward", lambda x: x * 7), 2, 2),
    "dropout_put_in_training": (lambda b: b.drop.train(), 2, 2),
    "parameter_replaced": (
        lambda b: b.fc._parameters.__setitem__("weight", nn.Parameter(torch.zeros(3, 3))), 1, 1),
    "submodule_replaced_by_a_sequential": (
        lambda b: b._modules.__setitem__("fc", nn.Sequential(nn.Linear(3, 3), nn.Tanh())), 2, 2),
    "submodule_replaced_by_another_linear": (
        lambda b: b._modules.__setitem__("fc", nn.Linear(3, 3, bias=False)), 2, 2),
    "global_forward_hook": (lambda b: torch.nn.modules.module.register_module_forward_hook(
        lambda m, i, o: o + 1 if isinstance(m, nn.Linear) else o), 1, None),
}


def changed_in_place(compile, change):
    """A block compiled and called, changed by ``change``, then called again: (the compiled
    call's output, eager's); the first call's outputs agree (``same``)."""
    torch.manual_seed(0)
    block, x = Hooked().eval(), torch.randn(2, 3)
    compiled = compile(apply_module)
    same(compiled(block, x), apply_module(block, x))
    handle = change(block)
    try:
        torch.manual_seed(1)
        out = compiled(block, x)
        torch.manual_seed(1)
        expected = apply_module(block, x)
        return out, expected
    finally:
        if isinstance(handle, torch.utils.hooks.RemovableHandle):
            handle.remove()


def _torch_compile_change_in_place(name: str) -> dict:
    """torch.compile's graphs over ``changed_in_place``, whether its first call agreed with
    eager, and whether its call after the change did."""
    change, outs = IN_PLACE_CHANGES[name][0], []
    figures = torch_compiles(lambda c: outs.append(changed_in_place(c, change)))
    return {"graphs": figures["graphs"], "first_same_as_eager": figures["same_as_eager"],
            "changed_same_as_eager": bool(outs) and torch.allclose(*outs[0])}


for _name in IN_PLACE_CHANGES:
    measure(f"regional/changed_in_place/{_name}",
            functools.partial(_torch_compile_change_in_place, _name))


def test_changes_made_in_place_after_the_first_call_are_seen():
    for name, (change, graphlift_graphs, torch_graphs) in IN_PLACE_CHANGES.items():
        graphlift.reset()
        outs = []
        ours = graphlift_compiles(lambda c, change=change, outs=outs: outs.append(
            changed_in_place(c, change)))
        same(*outs[0])
        assert ours == graphlift_graphs, name
        theirs = recorded(f"regional/changed_in_place/{name}")  # tests/reference
        assert theirs["first_same_as_eager"], name
        if torch_graphs is not None:
            assert theirs["graphs"] == torch_graphs, name
        else:  # torch.compile keeps serving the entry traced before the hook
            assert not theirs["changed_same_as_eager"], name


def test_a_hook_added_to_one_of_two_blocks_sharing_an_entry_is_seen():
    torch.manual_seed(0)
    a, b, x = Hooked().eval(), Hooked().eval(), torch.randn(2, 3)
    graphlift.reset()
    compiled = graphlift.compile(apply_module)
    same(compiled(a, x), a(x))
    same(compiled(b, x), b(x))
    b.fc.register_forward_hook(lambda m, i, o: -o)
    same(compiled(a, x), a(x))
    same(compiled(b, x), b(x))
    assert graphlift.stats(compiled).compiles == 2
