"""nn.Module support: calls, attributes, containers, hooks, buffers, guards, recompiles, wrappers.

Every test runs the module eagerly and compiled and compares outputs (and gradients, buffers
and side effects where the test is about them), then checks graph and compile counts.
"""

import copy
import logging

import pytest
import torch
import torch.nn.functional as F
from reference import measure, recorded
from torch import nn

import graphlift
from graphlift.module_structure import STRUCTURE_VERSION
from graphlift.testing import CompileCounter


def same(a, b, atol=1e-6):
    torch.testing.assert_close(a, b, atol=atol, rtol=1e-5)


class MLP(nn.Module):
    def __init__(self, width=8, depth=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return self.drop(x)


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return x + torch.relu(self.bn(self.fc(x)))


def compiled(module, backend=None, **kwargs):
    counter = backend or CompileCounter()
    return graphlift.compile(module, backend=counter, **kwargs), counter


# -- calls and attributes ----------------------------------------------------------------------
def test_compiled_module_matches_eager_in_one_graph():
    model = MLP()
    cm, counter = compiled(model, fullgraph=True)
    x = torch.randn(2, 8)
    same(cm(x), model(x))
    same(cm(x + 1), model(x + 1))
    assert counter.frame_count == 1
    assert graphlift.stats(cm).compiles == 1


def test_parameters_are_graph_inputs_so_an_optimizer_step_needs_no_recompile():
    model = MLP()
    reference = copy.deepcopy(model)
    cm, counter = compiled(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    for _ in range(3):
        for m, o in ((cm, opt), (reference, ref_opt)):
            o.zero_grad()
            m(x).pow(2).mean().backward()
            o.step()
    same(cm(x), reference(x))
    assert graphlift.stats(cm).compiles == 1
    placeholders = [n.name for n in graphlift.cache_entries(cm)[0].graph.graph.nodes
                    if n.op == "placeholder"]
    assert "l_self_layers_0_weight" in placeholders


def test_submodules_containers_and_plain_attributes():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
            self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})
            self.scales = nn.ParameterList(nn.Parameter(torch.ones(4) * i) for i in range(3))
            self.factor = 3

        def forward(self, x):
            y = self.seq(x) * self.factor + self.seq[-1](x) + self.scales[len(self.scales) - 1]
            outs = [self.heads[k](y) for k in self.heads]
            outs += [head(y) for head in self.heads.values()]
            return torch.cat(outs, -1) + sum(p.sum() for p in self.scales)

    model = Net()
    cm, counter = compiled(model, fullgraph=True)
    x = torch.randn(3, 4)
    same(cm(x), model(x))
    assert counter.frame_count == 1


def test_named_parameters_and_weight_tying_share_one_input():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.out = nn.Linear(4, 10, bias=False)
            self.out.weight = self.emb.weight

        def forward(self, idx):
            penalty = sum(p.pow(2).sum() for _, p in self.named_parameters())
            return self.out(self.emb(idx)) + penalty

    model = Tied()
    cm, counter = compiled(model, fullgraph=True)
    idx = torch.tensor([[1, 2, 3]])
    same(cm(idx), model(idx))
    graph = graphlift.cache_entries(cm)[0].graph
    assert sum(n.op == "placeholder" for n in graph.graph.nodes) == 2  # idx and the one weight


def test_compiling_forward_a_function_calling_a_module_and_a_module_argument():
    model = MLP()
    x = torch.randn(2, 8)
    counter = CompileCounter()
    forward = graphlift.compile(model.forward, backend=counter, fullgraph=True)
    same(forward(x), model(x))

    def step(m, x):
        return model(x) + m(x)

    fn = graphlift.compile(step, backend=counter, fullgraph=True)
    same(fn(model, x), step(model, x))
    assert counter.frame_count == 2


def test_subclass_forward_with_super_and_a_property():
    class Scaled(nn.Linear):
        @property
        def scale(self):
            return self.out_features / 2

        def forward(self, x):
            return super().forward(x) * self.scale

    model = Scaled(3, 4)
    cm, _ = compiled(model, fullgraph=True)
    x = torch.randn(2, 3)
    same(cm(x), model(x))


def test_plain_attribute_store_in_forward_is_replayed():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.calls = 0

        def forward(self, x):
            self.last_norm = x.norm()
            return self.lin(x)

    model = Counter()
    cm, _ = compiled(model)
    x = torch.randn(2, 2)
    same(cm(x), model(x))
    same(model.last_norm, x.norm())


def test_register_buffer_inside_forward_splits_the_frame():
    class Lazy(nn.Module):
        def forward(self, x):
            self.register_buffer("seen", x.detach().clone())
            return x + 1

    model = Lazy()
    with pytest.raises(graphlift.Unsupported, match="register_buffer"):
        graphlift.compile(model, fullgraph=True)(torch.ones(2))
    cm, _ = compiled(Lazy())
    same(cm(torch.ones(2)), torch.ones(2) + 1)


# -- hooks -------------------------------------------------------------------------------------
def test_forward_pre_hooks_and_hooks_are_traced():
    model = MLP()
    calls = []
    model.layers[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    model.register_forward_hook(lambda m, args, out: out + 1)
    model.layers[1].register_forward_hook(lambda m, args, kwargs, out: out * 3, with_kwargs=True)
    model.layers[2].register_forward_pre_hook(
        lambda m, args, kwargs: ((args[0] - 1,), kwargs), with_kwargs=True)
    model.register_forward_pre_hook(lambda m, args: calls.append(1) if False else None)
    cm, counter = compiled(model, fullgraph=True)
    x = torch.randn(2, 8)
    same(cm(x), model(x))
    assert counter.frame_count == 1
    # With hooks, the frame compiled is graphlift's module call, hooks and all.
    (entry,) = graphlift.cache_entries(graphlift.eval_frame._call_module)
    guards = "\n".join(entry.guards)
    assert "dict.__len__(L['self']._forward_hooks) == 1" in guards
    assert "[k in L['self'].layers[1]._forward_hooks_with_kwargs for k in" in guards


def _double_input(module, args):
    return (args[0] * 2,)


def _call_plus_one(m, x):
    return m(x) + 1


def _hooked_linear() -> nn.Linear:
    m = nn.Linear(3, 3)
    m.register_forward_pre_hook(_double_input)
    return m


def _torch_compile_fresh_hooked_modules() -> dict:
    """torch.compile's graphs for four fresh modules with the same pre-hook."""
    import torch._dynamo.testing

    theirs = torch._dynamo.testing.CompileCounter()
    fn = torch.compile(_call_plus_one, backend=theirs)
    for _ in range(4):
        fn(_hooked_linear(), torch.ones(3))
    return {"graphs": theirs.frame_count}


measure("nn_module/fresh_modules_with_the_same_hooks", _torch_compile_fresh_hooked_modules)


def test_fresh_modules_with_the_same_hooks_hit_the_cache():
    # Hook tables are keyed by handle ids from a process-wide counter: guarding the keys
    # recompiled every fresh module. They are guarded by position and hook identity.
    ours = CompileCounter()
    fn = graphlift.compile(_call_plus_one, backend=ours)
    for _ in range(4):
        m = _hooked_linear()
        same(fn(m, torch.ones(3)), _call_plus_one(m, torch.ones(3)))
    theirs = recorded("nn_module/fresh_modules_with_the_same_hooks")
    assert ours.frame_count == theirs["graphs"] == 1
    # What the positions hold is still guarded: another hook, a kwargs hook, a second hook.
    m = nn.Linear(3, 3)
    m.register_forward_pre_hook(lambda module, args: (args[0] - 1,))
    same(fn(m, torch.ones(3)), _call_plus_one(m, torch.ones(3)))
    m = nn.Linear(3, 3)
    m.register_forward_pre_hook(lambda module, args, kwargs: ((args[0] * 3,), kwargs),
                                with_kwargs=True)
    same(fn(m, torch.ones(3)), _call_plus_one(m, torch.ones(3)))
    m = _hooked_linear()
    m.register_forward_pre_hook(_double_input)
    same(fn(m, torch.ones(3)), _call_plus_one(m, torch.ones(3)))
    assert ours.frame_count == 4


def _closure_over(module):
    def run(x):
        return module(x) + 1
    return run


def _torch_compile_closures_over_fresh_modules() -> dict:
    """torch.compile's graphs for closures made over four fresh modules of one structure."""
    import torch._dynamo.testing

    theirs = torch._dynamo.testing.CompileCounter()
    for _ in range(4):
        torch.compile(_closure_over(nn.Linear(3, 3)), backend=theirs)(torch.ones(3))
    return {"graphs": theirs.frame_count}


measure("nn_module/closures_over_fresh_modules", _torch_compile_closures_over_fresh_modules)


def test_a_module_in_a_closure_cell_is_guarded_by_structure():
    # A function made per call over a fresh module (a callee of a frame that runs eagerly, a
    # factory's closure) is compiled once: the cell's module is guarded like an argument.
    ours = CompileCounter()
    for _ in range(4):
        m = nn.Linear(3, 3)
        same(graphlift.compile(_closure_over(m), backend=ours)(torch.ones(3)), m(torch.ones(3)) + 1)
    assert ours.frame_count == recorded("nn_module/closures_over_fresh_modules")["graphs"] == 1
    m = nn.Linear(3, 4)  # another structure: its own entry
    same(graphlift.compile(_closure_over(m), backend=ours)(torch.ones(3)), m(torch.ones(3)) + 1)
    assert ours.frame_count == 2


def test_backward_hooks_are_refused():
    model = MLP()
    model.layers[0].register_full_backward_hook(lambda m, gi, go: None)
    with pytest.raises(graphlift.Unsupported, match="backward hooks"):
        graphlift.compile(model, fullgraph=True)(torch.randn(2, 8))


# -- buffers and BatchNorm ---------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("grad", [True, False])
def test_batchnorm_running_stats_update_in_the_graph(backend, grad):
    model = nn.Sequential(Residual(), Residual())
    reference = copy.deepcopy(model)
    cm = graphlift.compile(model, backend=backend)
    x = torch.randn(8, 4)
    with torch.set_grad_enabled(grad):
        for _ in range(3):
            same(cm(x), reference(x), atol=1e-5)
    for buffer, expected in zip(model.buffers(), reference.buffers()):
        same(buffer, expected, atol=1e-6)
    assert model[0].bn.num_batches_tracked.item() == 3
    model.eval()
    reference.eval()
    same(cm(x), reference(x), atol=1e-5)
    assert graphlift.stats(cm).compiles == 2  # training flipped


# -- guards and recompiles ---------------------------------------------------------------------
def test_training_flip_recompiles_and_the_log_says_so(caplog):
    graphlift.set_logs(recompiles=True)
    caplog.set_level(logging.INFO, logger="graphlift")
    model = MLP()
    cm, _ = compiled(model)
    x = torch.randn(2, 8)
    cm(x)
    cm.eval()
    assert not model.training
    same(cm(x), model(x))
    cm.train()
    cm(x)
    assert graphlift.stats(cm).compiles == 2
    message = [r.getMessage() for r in caplog.records if r.name == "graphlift.recompiles"][0]
    assert "L['self'].drop.training is True (now False)" in message


@graphlift.config.patch(share_module_entries=False)  # pinned by identity
def test_reassigning_a_parameter_or_submodule_recompiles():
    model = MLP()
    cm, _ = compiled(model)
    x = torch.randn(2, 8)
    cm(x)
    before = STRUCTURE_VERSION.value
    model.layers[1].weight = nn.Parameter(torch.zeros(8, 8))
    assert STRUCTURE_VERSION.value == before + 1
    same(cm(x), model(x))
    model.layers[2] = nn.Linear(8, 8)
    same(cm(x), model(x))
    assert graphlift.stats(cm).compiles == 3


def test_reassigning_a_member_of_a_structurally_guarded_module_is_seen():
    model = MLP()
    cm, _ = compiled(model)
    x = torch.randn(2, 8)
    cm(x)
    model.layers[1].weight = nn.Parameter(torch.zeros(8, 8))
    same(cm(x), model(x))
    model.layers[2] = nn.Linear(8, 8)
    same(cm(x), model(x))
    assert graphlift.stats(cm).compiles == 1  # same structure: members are read by path
    model.layers[2] = nn.Linear(8, 8, bias=False)
    same(cm(x), model(x))
    assert graphlift.stats(cm).compiles == 2


def test_modules_nobody_traced_do_not_invalidate_entries():
    model = MLP()
    cm, _ = compiled(model)
    x = torch.randn(2, 8)
    cm(x)
    nn.CrossEntropyLoss()  # registers a buffer on a module no entry pinned
    nn.Linear(3, 3)
    cm(x)
    assert graphlift.stats(cm).compiles == 1


def test_requires_grad_flip_and_dtype_change_recompile():
    model = MLP()
    cm, _ = compiled(model, backend="aot_eager")
    x = torch.randn(2, 8)
    cm(x).sum().backward()
    model.layers[0].weight.requires_grad_(False)
    model.zero_grad()
    cm(x).sum().backward()
    assert model.layers[0].weight.grad is None and model.layers[1].weight.grad is not None
    model.double()
    same(cm(x.double()), model(x.double()))
    assert graphlift.stats(cm).compiles == 3


@pytest.mark.parametrize("share", [False, True])
def test_module_guards_are_few_and_cheap_to_state(share):
    model = MLP(depth=6)
    with graphlift.config.patch(share_module_entries=share):
        cm, _ = compiled(model)
        with torch.no_grad():
            cm(torch.randn(2, 8))
    source = graphlift.cache_entries(cm)[0].guard_source
    assert "requires_grad is True" not in source  # under no_grad no parameter flag is checked
    assert source.count(" and ") < 30  # no full tensor match per parameter
    guards = graphlift.cache_entries(cm)[0].guards
    if share:
        assert any(g.startswith("nn_module_structure(L['self']) == ") for g in guards)
    else:
        assert "nn_module_structure_version == " + str(STRUCTURE_VERSION.value) in guards


@graphlift.config.patch(share_module_entries=False)  # pinned by identity
def test_recompile_limit_counts_per_module_instance():
    blocks = [Residual().eval() for _ in range(12)]

    def run(block, x):
        return block(x)

    fn = graphlift.compile(run, backend=CompileCounter())
    x = torch.randn(2, 4)
    for block in blocks:
        same(fn(block, x), block(x))
    stats = graphlift.stats(fn)
    assert stats.compiles == 12 and not stats.recompile_limit_hit
    for block in blocks:
        fn(block, x)
    assert graphlift.stats(fn).compiles == 12


@graphlift.config.patch(share_module_entries=False)  # pinned by identity
def test_separately_compiled_blocks_share_forward_but_not_the_limit():
    counter = CompileCounter()
    blocks = [graphlift.compile(Residual().eval(), backend=counter) for _ in range(10)]
    x = torch.randn(2, 4)
    for _ in range(2):
        for block in blocks:
            same(block(x), block._orig_mod(x))
    stats = graphlift.stats(blocks[0])  # one code object: Residual.forward
    assert (stats.compiles, counter.frame_count, stats.recompile_limit_hit) == (10, 10, False)


@graphlift.config.patch(share_module_entries=False)  # pinned by identity
def test_entries_go_when_their_module_dies():
    import gc

    def run(m, x):
        return m(x)

    fn = graphlift.compile(run, backend=CompileCounter())
    model = MLP()
    fn(model, torch.randn(2, 8))
    assert len(graphlift.cache_entries(fn)) == 1
    del model
    gc.collect()
    assert graphlift.cache_entries(fn) == []


def test_structural_entries_outlive_their_first_module_without_keeping_it():
    import gc
    import weakref

    def run(m, x):
        return m(x)

    fn = graphlift.compile(run, backend=CompileCounter())
    model = MLP()
    fn(model, torch.randn(2, 8))
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None  # the entry holds no parameter of the module it was traced with
    other, x = MLP(), torch.randn(2, 8)
    same(fn(other, x), other(x))
    assert graphlift.stats(fn).compiles == 1


# -- the wrapper module ------------------------------------------------------------------------
def test_optimized_module_passes_through():
    model = MLP()
    cm, _ = compiled(model)
    assert cm._orig_mod is model
    # torch.compile's names: the wrapper holds the module as its submodule _orig_mod.
    assert list(cm.state_dict()) == [f"_orig_mod.{name}" for name in model.state_dict()]
    assert [p is q for p, q in zip(cm.parameters(), model.parameters())] == [True] * 6
    assert cm.layers is model.layers
    cm.load_state_dict(cm.state_dict())
    cm.eval()
    assert not model.training and not cm.training
    model.train()
    assert cm.training
    assert isinstance(cm, nn.Module)


# -- training ----------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_training_steps_match_eager(backend):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 3))
    reference = copy.deepcopy(model)
    cm = graphlift.compile(model, backend=backend)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    for _ in range(4):
        for m, o in ((cm, opt), (reference, ref_opt)):
            o.zero_grad()
            F.cross_entropy(m(x), y).backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            same(p.grad, q.grad, atol=1e-5)
        opt.step()
        ref_opt.step()
    assert graphlift.stats(cm).compiles == 1


class _Doubled(nn.Module):  # a user activation adding only methods (transformers' SiLUActivation)
    def forward(self, x):
        return F.silu(x) * 2


class _Announced(nn.Module):  # an __init__ of the user's: must run when the program runs it
    def __init__(self):
        super().__init__()
        print("made")

    def forward(self, x):
        return x + 1


def _makes_a_doubled(x):
    return _Doubled()(x) + 1


def _torch_compile_makes_a_doubled() -> dict:
    """torch.compile's graphs for ``_makes_a_doubled``."""
    import torch._dynamo.testing

    torch.manual_seed(0)
    theirs = torch._dynamo.testing.CompileCounter()
    torch.compile(_makes_a_doubled, backend=theirs)(torch.randn(4))
    return {"graphs": theirs.frame_count}


measure("nn_module/module_adding_only_methods_made_in_the_frame", _torch_compile_makes_a_doubled)


def test_a_user_module_that_adds_only_methods_is_made_in_the_frame(capsys):
    def g(x):
        return _Announced()(x) * 2

    f = _makes_a_doubled
    x = torch.randn(4)
    ours = CompileCounter()
    assert torch.equal(graphlift.compile(f, backend=ours)(x), f(x))
    theirs = recorded("nn_module/module_adding_only_methods_made_in_the_frame")  # tests/reference
    assert ours.frame_count == theirs["graphs"] == 1
    capsys.readouterr()
    assert torch.equal(g(x), graphlift.compile(g)(x))
    assert capsys.readouterr().out == "made\nmade\n"  # eager's __init__ ran once per call
    explained = graphlift.explain(g)(x)
    assert explained.graph_break_count >= 1  # its __init__ is the user's: a break, run eagerly
    assert "made" in capsys.readouterr().out


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, scale=1.0):
        return self.lin(x) * scale


class _CheckpointingBlock(_Block):
    """transformers' GradientCheckpointingLayer: its own ``__call__`` ends in the module's."""

    def __call__(self, *args, **kwargs):
        self.seen = len(args) + len(kwargs)
        return super().__call__(*args, **kwargs)


class _Stack(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.layer = nn.ModuleList([block() for _ in range(2)])

    def forward(self, x, **kwargs):
        for i, layer in enumerate(self.layer):
            x = layer(x, **kwargs) + i
        return x


def _hooked_checkpointing_stack() -> _Stack:
    stack = _Stack(_CheckpointingBlock)
    stack.layer[1].register_forward_hook(lambda mod, args, out: out * 2)
    return stack


def _torch_compile_checkpointing_stack() -> dict:
    """torch.compile's graphs for a stack of blocks with their own ``__call__``."""
    import torch._dynamo.testing

    torch.manual_seed(0)
    stack, x = _hooked_checkpointing_stack(), torch.randn(3, 4)
    theirs = torch._dynamo.testing.CompileCounter()
    torch.compile(stack, backend=theirs)(x, scale=0.5)
    return {"graphs": theirs.frame_count}


measure("nn_module/own_call_inlined_down_to_forward", _torch_compile_checkpointing_stack)


def test_a_module_with_its_own_call_is_inlined_down_to_its_forward():
    stack = _hooked_checkpointing_stack()
    x = torch.randn(3, 4)
    expected = stack(x, scale=0.5)
    for layer in stack.layer:
        del layer.seen
    ours = CompileCounter()
    compiled = graphlift.compile(stack, backend=ours)
    same(compiled(x, scale=0.5), expected)
    assert [layer.seen for layer in stack.layer] == [2, 2]  # the stores replayed
    theirs = recorded("nn_module/own_call_inlined_down_to_forward")  # tests/reference
    assert ours.frame_count == theirs["graphs"] == 1
    assert graphlift.stats(compiled).graph_breaks == 0
