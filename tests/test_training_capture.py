"""Training code captured as torch.compile captures it: results and gradients equal eager's, and
graph counts equal torch.compile's, recorded (tests/reference).

Each case is a function and the calls made to it. The figure compared is the number of graphs
compiled over all the calls (so recompiles too: a size pinned where torch.compile keeps it
symbolic shows up as one graph per size).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from reference import measure, recorded

import graphlift
from graphlift.testing import CompileCounter, CompileCounterWithBackend


def graphs_over(compile: Callable, counter: Any, fn: Callable, calls: list[tuple]) -> list:
    """Call ``compile(fn, backend=counter)`` once per argument tuple; the results."""
    compiled = compile(fn, backend=counter)
    return [compiled(*args) for args in calls]


def _torch_compile_graphs(case: str) -> int:
    """torch.compile's graphs over one case's calls. A measure."""
    import torch._dynamo.testing

    fn, calls = CASES[case]
    counter = torch._dynamo.testing.CompileCounter()
    graphs_over(torch.compile, counter, fn, calls())
    return counter.frame_count


def check_case(case: str) -> None:
    """Eager's results, and torch.compile's graph count."""
    fn, calls = CASES[case]
    counter = CompileCounter()
    args = calls()
    got = graphs_over(graphlift.compile, counter, fn, args)
    expected = [fn(*a) for a in args]
    torch.testing.assert_close(got, expected)
    assert counter.frame_count == recorded(f"training/{case}")


# -- dynamic sizes kept symbolic through ops that take sizes -----------------------------------
def _lengths() -> list[tuple]:
    """One 2-row tensor per length 4 to 8: the second size turns dynamic on the second call."""
    torch.manual_seed(0)
    return [(torch.randn(2, n),) for n in range(4, 9)]


def _int_lengths() -> list[tuple]:
    torch.manual_seed(0)
    return [(torch.randint(0, 9, (2, n)),) for n in range(4, 9)]


def shift_labels(labels):
    """transformers' causal-LM loss: labels padded by one, then shifted."""
    return F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()


def pad_both_sides(x):
    return F.pad(x, (1, 2, 0, 1))


def interpolate_to_twice(x):
    return F.interpolate(x[None], size=x.shape[1] * 2)


def new_full_one_longer(x):
    return x.new_full((x.shape[0], x.shape[1] + 1), 3.0)[:, 1:] + x


def expand_a_column(x):
    return x[:, :1].expand(x.shape[0], x.shape[1]) + x[:, None, :].expand(-1, x.size(1), -1).sum(1)


def repeat_then_cut(x):
    return x.repeat(1, 2)[:, : x.shape[1]] + x


def view_flat(x):
    return x.view(x.shape[0] * x.shape[1]) + x.reshape(-1, x.size(1)).flatten()


CASES: dict[str, tuple[Callable, Callable[[], list[tuple]]]] = {
    "pad_labels": (shift_labels, _int_lengths),
    "pad_both_sides": (pad_both_sides, _lengths),
    "interpolate": (interpolate_to_twice, _lengths),
    "new_full": (new_full_one_longer, _lengths),
    "expand": (expand_a_column, _lengths),
    "repeat": (repeat_then_cut, _lengths),
    "view": (view_flat, _lengths),
}
SIZE_CASES = list(CASES)


@pytest.mark.parametrize("case", SIZE_CASES)
def test_sizes_stay_symbolic_through_ops_that_take_sizes(case):
    check_case(case)


# A tiny causal LM trained over four sequence lengths, labels=input_ids: the loss pads the
# labels (F.pad), which used to pin the sequence length (one graph per length).
LM_LENGTHS = range(4, 8)


def _tiny_llama() -> torch.nn.Module:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(
        "llama", vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, intermediate_size=64, max_position_embeddings=32)
    config.use_cache = False
    config._attn_implementation = "eager"
    return transformers.LlamaForCausalLM(config)


def _train_lm(compile: Callable, counter: Any, model: torch.nn.Module) -> list[torch.Tensor]:
    """Losses over the lengths; the gradients accumulate in ``model``."""
    def step(ids):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach()

    compiled = compile(step, backend=counter) if counter is not None else step
    generator = torch.Generator().manual_seed(1)
    return [compiled(torch.randint(3, 64, (2, n), generator=generator)) for n in LM_LENGTHS]


def _torch_compile_lm_graphs() -> int:
    import torch._dynamo.testing

    counter = torch._dynamo.testing.CompileCounter()
    _train_lm(torch.compile, counter, _tiny_llama())
    return counter.frame_count


measure("training/causal_lm_lengths", _torch_compile_lm_graphs)


def test_causal_lm_trained_over_lengths_compiles_as_torch_compile():
    model = _tiny_llama()
    eager_model = copy.deepcopy(model)
    counter = CompileCounter()
    got = _train_lm(graphlift.compile, counter, model)
    expected = _train_lm(None, None, eager_model)
    torch.testing.assert_close(got, expected)
    for mine, eager in zip(model.parameters(), eager_model.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, eager.grad)
    assert counter.frame_count == recorded("training/causal_lm_lengths")



# -- torch.inference_mode blocks ---------------------------------------------------------------
def _leaf() -> list[tuple]:
    """Two calls on one input that requires grad."""
    torch.manual_seed(0)
    x = torch.randn(3, requires_grad=True)
    return [(x,), (x,)]


def eval_inside_a_step(x):
    """A loss with grad, then a metric under inference mode: no history, an inference tensor."""
    loss = (x * 2).sum()
    with torch.inference_mode():
        metric = x.sin() + 1
    return loss, metric, metric.requires_grad, metric.is_inference()


@torch.inference_mode()
def _inference_helper(x):
    return x.cos() + 1


def decorated_callee(x):
    return _inference_helper(x * 2), (x * 3).sum()


def grad_inside_inference_mode(x):
    with torch.inference_mode():
        with torch.inference_mode(False):
            y = x * 3
        z = x + 1
    return y, z, y.requires_grad, z.requires_grad


CASES.update({
    "inference_mode/eval_inside_a_step": (eval_inside_a_step, _leaf),
    "inference_mode/decorated_callee": (decorated_callee, _leaf),
    "inference_mode/grad_inside": (grad_inside_inference_mode, _leaf),
})
INFERENCE_CASES = [case for case in CASES if case.startswith("inference_mode/")]


@pytest.mark.parametrize("case", INFERENCE_CASES)
def test_inference_mode_blocks_are_traced(case):
    check_case(case)


def test_inference_mode_block_through_aot_eager_keeps_gradients():
    torch.manual_seed(0)
    x = torch.randn(3, requires_grad=True)
    compiled = graphlift.compile(grad_inside_inference_mode, backend="aot_eager")
    y, z, *flags = compiled(x)
    y.sum().backward()
    # (z is no inference tensor here: AOTAutograd makes the graph's outputs, under
    # torch.compile too; the eager backend's z is one, as eager's.)
    assert flags == [True, False]
    torch.testing.assert_close(x.grad, torch.full((3,), 3.0))


def reads_the_mode(x):
    with torch.inference_mode():
        inside = torch.is_inference_mode_enabled()
        y = x + 1
    return y, inside, torch.is_inference_mode_enabled()


CASES["inference_mode/reads_the_mode"] = (reads_the_mode, _leaf)


def test_reading_the_mode_inside_the_block_needs_no_guard():
    """Inside the block the mode is the block's whatever it was at the call: no guard on it, so
    the second call hits (torch.compile guards it there and recompiles: one graph more)."""
    fn, calls = CASES["inference_mode/reads_the_mode"]
    counter = CompileCounter()
    args = calls()
    got = graphs_over(graphlift.compile, counter, fn, args)
    torch.testing.assert_close(got, [fn(*a) for a in args])
    assert (counter.frame_count, recorded("training/inference_mode/reads_the_mode")) == (1, 2)
    with torch.inference_mode():  # called in inference mode: the mode after the block differs
        assert graphlift.compile(fn, backend=counter)(args[0][0])[2] is True


def breaks_inside_the_block(x):
    with torch.inference_mode():
        y = x.sin()
        print("inside")
        y = y + 1
    return y


CASES["inference_mode/break_inside"] = (breaks_inside_the_block, _leaf)


def test_a_break_inside_an_inference_mode_block_runs_the_frame_eagerly(capsys):
    """Partial: torch.compile splits the frame there (two graphs); graphlift runs it eagerly,
    as for a break inside an autocast block."""
    fn, calls = CASES["inference_mode/break_inside"]
    counter = CompileCounter()
    args = calls()
    got = graphs_over(graphlift.compile, counter, fn, args)
    torch.testing.assert_close(got, [fn(*a) for a in args])
    assert capsys.readouterr().out == "inside\n" * 4
    assert (counter.frame_count, recorded("training/inference_mode/break_inside")) == (0, 2)



# -- backward hooks: Tensor.register_hook, module full backward hooks ---------------------------
HOOK_CALLS: list[str] = []  # what each hook saw run, in order: eager's and compiled's must match


def counted_hook(grad):
    HOOK_CALLS.append("tensor")
    return grad * 3


def hook_on_an_input(x):
    x.register_hook(counted_hook)
    return (x * x).sum()


def pure_hook_on_an_intermediate(x):
    y = x * 2
    y.register_hook(lambda grad: grad * 3)
    return (y * y).sum()


def hook_reading_a_tensor_of_the_frame(x):
    scale = x.detach().sum() + 1
    y = x * 2
    y.register_hook(lambda grad: grad * scale)
    return (y * y).sum()


def counted_hook_on_an_intermediate(x):
    """The hook appends to a list: torch.compile breaks there, and so does graphlift."""
    y = x * 2
    y.register_hook(counted_hook)
    return (y * y).sum()


def hook_returning_none(x):
    y = x.sin()
    y.register_hook(lambda grad: None)
    return (y * y).sum()


def hook_then_backward_in_the_frame(x):
    y = x * 2
    y.register_hook(lambda grad: grad * 3)
    loss = (y * y).sum()
    loss.backward()
    return loss.detach()


class Hooked(torch.nn.Module):
    """A layer with a full backward hook that counts its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 2)
        self.register_full_backward_hook(lambda module, grad_in, grad_out:
                                         HOOK_CALLS.append("module"))

    def forward(self, x):
        return self.linear(x).tanh().sum()


class Outer(torch.nn.Module):
    """A compiled module whose submodule has a full backward hook."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.head = torch.nn.Linear(1, 1)

    def forward(self, x):
        return self.head(self.inner(x * 2).reshape(1, 1)).sum()


torch.manual_seed(0)
HOOKED = Hooked()
OUTER = Outer(HOOKED)


def full_backward_hook_in_a_step(x):
    return (HOOKED(x * 2) + 1).sum()


def _hook_input() -> list[tuple]:
    torch.manual_seed(0)
    return [(torch.randn(2, 3, requires_grad=True),) for _ in range(2)]


HOOK_CASES = {
    "hook/input": hook_on_an_input,
    "hook/intermediate_pure": pure_hook_on_an_intermediate,
    "hook/intermediate_reads_a_tensor": hook_reading_a_tensor_of_the_frame,
    "hook/intermediate_counted": counted_hook_on_an_intermediate,
    "hook/intermediate_returns_none": hook_returning_none,
    "hook/backward_in_the_frame": hook_then_backward_in_the_frame,
    "full_backward_hook/in_a_step": full_backward_hook_in_a_step,
    "full_backward_hook/compiled_module": HOOKED,
    "full_backward_hook/compiled_outer_module": OUTER,
}
for _case, _fn in HOOK_CASES.items():
    CASES[_case] = (_fn, _hook_input)


def train_with_hooks(compile: Callable, counter: Any, case: str) -> tuple[list, list, list]:
    """The losses, the inputs' gradients and the hooks' calls over a case's calls; the
    gradients of the frame's backward (hook/backward_in_the_frame) or of one after it."""
    fn, calls = CASES[case]
    compiled = compile(fn, backend=counter) if counter is not None else fn
    HOOK_CALLS.clear()
    HOOKED.zero_grad()
    losses, grads = [], []
    for (x,) in calls():
        loss = compiled(x)
        if loss.requires_grad:
            loss.backward()
        losses.append(loss.detach())
        grads.append(x.grad)
    grads.append(HOOKED.linear.weight.grad)
    return losses, grads, list(HOOK_CALLS)


def _torch_compile_hook_graphs(case: str) -> int:
    import torch._dynamo.testing

    counter = torch._dynamo.testing.CompileCounter()
    train_with_hooks(torch.compile, counter, case)
    return counter.frame_count


# graphlift's graphs where they are not torch.compile's: torch.compile compiles the frame with
# a backward in it once more on the second call (a guard on the gradient the first made).
HOOK_GRAPHS = {"hook/backward_in_the_frame": 2}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("case", list(HOOK_CASES))
def test_backward_hooks_run_as_in_eager(case, backend):
    counter = CompileCounterWithBackend(backend)
    *got, got_calls = train_with_hooks(graphlift.compile, counter, case)
    *expected, expected_calls = train_with_hooks(lambda fn, backend: fn, None, case)
    torch.testing.assert_close(got, expected)
    assert got_calls == expected_calls
    theirs = recorded(f"training/{case}")
    assert (counter.frame_count, theirs) == (HOOK_GRAPHS.get(case, theirs), theirs)


for _case in HOOK_CASES:
    measure(f"training/{_case}", functools.partial(_torch_compile_hook_graphs, _case))


def test_a_hook_handle_used_in_the_frame_runs_it_eagerly():
    """Partial: the handle register_hook returns is not modelled; a frame that keeps it (returns
    it, removes the hook) runs eagerly, where torch.compile traces the input's case."""
    def removes(x):
        handle = x.register_hook(counted_hook)
        handle.remove()
        return (x * x).sum()

    counter = CompileCounter()
    x = torch.ones(3, requires_grad=True)
    HOOK_CALLS.clear()
    graphlift.compile(removes, backend=counter)(x).backward()
    assert counter.frame_count == 0 and HOOK_CALLS == [] and x.grad.tolist() == [2.0] * 3



# -- torch.random.fork_rng ---------------------------------------------------------------------
def seeded_noise_in_a_fork(x):
    """Noise of a fixed seed, drawn in a fork: the program's own stream goes on untouched."""
    a = x.sin()
    with torch.random.fork_rng():
        torch.manual_seed(1)
        noise = torch.rand(3)
    return a + noise + x.cos()


def _noise(h):
    with torch.random.fork_rng():
        torch.manual_seed(3)
        return h + torch.randn_like(h)


torch.manual_seed(0)
NOISY = torch.nn.Linear(3, 3)


def fork_in_a_callee_of_a_step(x):
    loss = NOISY(_noise(NOISY(x).relu())).sum()
    loss.backward()
    return loss.detach() + torch.rand(1)  # a draw of the program's stream after the fork


def _vector() -> list[tuple]:
    torch.manual_seed(0)
    return [(torch.randn(2, 3),) for _ in range(2)]


CASES["fork_rng/seeded_noise"] = (seeded_noise_in_a_fork, _vector)
CASES["fork_rng/in_a_callee_of_a_step"] = (fork_in_a_callee_of_a_step, _vector)


@pytest.mark.parametrize("case", ["fork_rng/seeded_noise", "fork_rng/in_a_callee_of_a_step"])
def test_fork_rng_leaves_the_program_s_stream_as_eager_does(case):
    """torch.compile breaks the graph at fork_rng and runs the block eagerly; so does graphlift
    (graph counts equal; graphlift's explain() names one break more: the resume function that
    enters the fork gives up on contextlib's __enter__)."""
    fn, calls = CASES[case]
    args = calls()
    counter = CompileCounter()
    compiled = graphlift.compile(fn, backend=counter)
    results = []
    for run in (compiled, fn):
        torch.manual_seed(5)
        NOISY.zero_grad()
        results.append(([run(*a) for a in args], torch.rand(2), NOISY.weight.grad))
    torch.testing.assert_close(results[0], results[1])
    assert counter.frame_count == recorded(f"training/{case}")


for _case in CASES:
    if _case not in HOOK_CASES:
        measure(f"training/{_case}", functools.partial(_torch_compile_graphs, _case))


def test_a_hook_on_a_tensor_without_grad_raises_eager_s_error():
    def hooks_a_constant(x):
        y = x * 2
        y.register_hook(lambda grad: grad)
        return y

    x = torch.ones(3)
    with pytest.raises(RuntimeError) as eager:
        hooks_a_constant(x)
    with pytest.raises(RuntimeError) as compiled:
        graphlift.compile(hooks_a_constant, backend="eager")(x)
    assert str(compiled.value) == str(eager.value)
