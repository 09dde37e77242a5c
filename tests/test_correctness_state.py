"""State a graph depends on, against eager: autograd flags, ambient modes, the RNG state, and
real objects that tracing must leave alone.

Each case is a *scenario*: a function that takes a way to compile (``lambda fn: fn`` for eager)
and returns what the program can see afterwards, as plain values (tensors as rounded lists). The
test runs it eagerly and under graphlift (aot_eager, the backend that traces autograd, behind a
counter) and compares; the same scenario under torch.compile is the recorded measure, whose
graph count the test compares with graphlift's (tests/reference).

PYTEST_DONT_REWRITE: the cases' bytecode must be what the user wrote.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import torch
from reference import measure, recorded
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import graphlift
from graphlift.testing import CompileCounterWithBackend

BACKEND = "aot_eager"
Compile = Callable[[Callable], Callable]


def values(t: torch.Tensor) -> list:
    return torch.round(t.detach(), decimals=5).tolist()


def eager(fn: Callable) -> Callable:
    return fn


def graphlift_run(scenario: Callable[[Compile], Any]) -> tuple[Any, int]:
    """What ``scenario`` sees under graphlift, and the graphs it compiled."""
    counter = CompileCounterWithBackend(BACKEND)
    seen = scenario(functools.partial(graphlift.compile, backend=counter))
    return seen, counter.frame_count


def torch_compile_run(scenario: Callable[[Compile], Any]) -> dict[str, Any]:
    """A measure: what ``scenario`` sees under torch.compile, and its graph count."""
    import torch._dynamo.testing

    counter = torch._dynamo.testing.CompileCounterWithBackend(BACKEND)
    seen = scenario(functools.partial(torch.compile, backend=counter))
    return {"seen": seen, "graphs": counter.frame_count}


def register(key: str, scenario: Callable[[Compile], Any]) -> Callable[[Compile], Any]:
    measure(f"correctness_state/{key}", functools.partial(torch_compile_run, scenario))
    return scenario


def check(key: str, scenario: Callable[[Compile], Any]) -> tuple[int, dict[str, Any]]:
    """graphlift sees what eager sees; returns (graphlift's graphs, torch.compile's figures)."""
    ours, graphs = graphlift_run(scenario)
    assert ours == scenario(eager)
    return graphs, recorded(f"correctness_state/{key}")


# == requires_grad_() inside the frame ==========================================================
def requires_grad_input(compile: Compile) -> Any:
    def f(x):
        x.requires_grad_()
        return x * 2

    x = torch.arange(3.0)
    out = compile(f)(x)
    out.sum().backward()
    return [out.requires_grad, out.grad_fn is not None, x.requires_grad, values(x.grad)]


def requires_grad_intermediate(compile: Compile) -> Any:
    def f(x):
        y = x * 2
        y.requires_grad_()
        return y

    out = compile(f)(torch.arange(3.0))
    return [out.requires_grad, out.is_leaf, values(out)]


def requires_grad_unchanged(compile: Compile) -> Any:
    def f(x):
        x.requires_grad_(False)  # already False: nothing to do, no break
        return x * 2

    out = compile(f)(torch.arange(3.0))
    return [out.requires_grad, values(out)]


register("requires_grad_input", requires_grad_input)
register("requires_grad_intermediate", requires_grad_intermediate)
register("requires_grad_unchanged", requires_grad_unchanged)


def test_requires_grad_on_an_input_keeps_autograd() -> None:
    graphs, theirs = check("requires_grad_input", requires_grad_input)
    assert graphs == theirs["graphs"]


def test_requires_grad_on_an_intermediate_is_returned_requiring_grad() -> None:
    graphs, theirs = check("requires_grad_intermediate", requires_grad_intermediate)
    assert graphs == theirs["graphs"]


def test_requires_grad_that_changes_nothing_stays_in_the_graph() -> None:
    graphs, theirs = check("requires_grad_unchanged", requires_grad_unchanged)
    assert graphs == theirs["graphs"] == 1


# == ambient modes ============================================================================
class MulPlusOne(TorchFunctionMode):
    """Adds one to every product: a mode that changes values."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out + 1 if func in (torch.mul, torch.Tensor.mul) else out


class DispatchMulPlusOne(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out + 1 if func is torch.ops.aten.mul.Tensor else out


class OpLog(TorchDispatchMode):
    """Logs the aten ops it sees, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def sin_twice(x):
    return [torch.sin(x) * 2]


def under_mode_then_without(mode: type, compile: Compile) -> Any:
    fn = compile(sin_twice)
    x = torch.ones(3)
    with mode():
        first = fn(x)
    second = fn(x)
    with mode():
        third = fn(x)
    return [[values(t) for t in out] for out in (first, second, third)]


def without_mode_then_under(mode: type, compile: Compile) -> Any:
    fn = compile(sin_twice)
    x = torch.ones(3)
    first = fn(x)
    with mode():
        second = fn(x)
    return [[values(t) for t in out] for out in (first, second)]


def logged_first_call(compile: Compile) -> Any:
    fn = compile(sin_twice)
    with OpLog() as log:
        fn(torch.ones(3))
    with OpLog() as again:
        fn(torch.ones(3))
    return [log.ops, again.ops]


MODE_CASES = {
    "function_mode_first": functools.partial(under_mode_then_without, MulPlusOne),
    "function_mode_later": functools.partial(without_mode_then_under, MulPlusOne),
    "dispatch_mode_first": functools.partial(under_mode_then_without, DispatchMulPlusOne),
    "dispatch_mode_later": functools.partial(without_mode_then_under, DispatchMulPlusOne),
}
for _key, _scenario in MODE_CASES.items():
    register(_key, _scenario)
register("dispatch_mode_log", logged_first_call)


def test_a_function_mode_around_the_call_is_seen_and_guarded() -> None:
    # torch.compile traces through a TorchFunctionMode (a graph per mode state); graphlift runs
    # a call under a mode eagerly (docs/coverage.md), so only the calls without one compile.
    for key in ("function_mode_first", "function_mode_later"):
        graphs, theirs = check(key, MODE_CASES[key])
        assert (graphs, theirs["graphs"]) == (1, 2), key


def test_a_dispatch_mode_around_the_call_is_seen_and_guarded() -> None:
    # torch.compile runs a call under a TorchDispatchMode eagerly too, and never compiles a
    # frame it first met under one: graphlift compiles it at the first call without a mode.
    graphs, theirs = check("dispatch_mode_first", MODE_CASES["dispatch_mode_first"])
    assert (graphs, theirs["graphs"]) == (1, 0)
    graphs, theirs = check("dispatch_mode_later", MODE_CASES["dispatch_mode_later"])
    assert graphs == theirs["graphs"] == 1


def test_a_dispatch_mode_sees_the_program_not_the_tracing() -> None:
    graphs, theirs = check("dispatch_mode_log", logged_first_call)
    ours, _ = graphlift_run(logged_first_call)
    assert ours == theirs["seen"] == [["ones", "sin", "mul"]] * 2
    assert graphs == theirs["graphs"]


class FunctionLog(TorchFunctionMode):
    """Logs the torch functions it sees, by name (attribute reads show as ``__get__``)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(getattr(func, "__name__", "?"))
        return func(*args, **(kwargs or {}))


def linear_twice(x, lin):
    return lin(x) * 2


def function_logged_after_a_compile(compile: Compile) -> Any:
    torch.manual_seed(0)
    lin = torch.nn.Linear(2, 2)
    fn = compile(linear_twice)
    x = torch.ones(3, 2)
    fn(x, lin)
    with FunctionLog() as log:
        out = fn(x, lin)
    return [log.names, values(out)]


register("function_mode_log_after_a_compile", function_logged_after_a_compile)


def test_a_function_mode_sees_the_program_not_the_guards() -> None:
    # Found by the fuzzer (generator version 4): the entry's guards read the module's
    # parameters' requires_grad in Python before the mode-stack check failed, so the caller's
    # mode logged three ``__get__`` calls the program never made.
    graphs, theirs = check("function_mode_log_after_a_compile", function_logged_after_a_compile)
    ours, _ = graphlift_run(function_logged_after_a_compile)
    assert ours[0] == theirs["seen"][0] == ["linear", "mul"]
    assert (graphs, theirs["graphs"]) == (1, 2)  # torch.compile traces through the mode


def grows_while_iterating(x, lin):
    table = {"a": x}
    for _ in table:  # RuntimeError (changed size) while tracing: the frame runs eagerly
        table["b"] = lin(x) * 2
    return x


def function_logged_at_an_eager_frame(compile: Compile) -> Any:
    torch.manual_seed(0)
    lin = torch.nn.Linear(2, 2)
    fn = compile(grows_while_iterating)
    x = torch.ones(3, 2)
    seen = []
    for mode in (contextlib.nullcontext, FunctionLog):
        with mode() as log:
            try:
                fn(x, lin)
            except RuntimeError as error:
                seen.append(str(error))
    return [log.names, seen]


register("function_mode_log_at_an_eager_frame", function_logged_at_an_eager_frame)


def test_a_function_mode_sees_no_guards_of_a_frame_that_runs_eagerly() -> None:
    # Found by the fuzzer too: an entry that runs its frame eagerly had no mode-stack guards,
    # so its tensor guards ran in Python under the caller's mode (``stride``, ``__get__``).
    ours, graphs = graphlift_run(function_logged_at_an_eager_frame)
    assert ours == function_logged_at_an_eager_frame(eager)
    theirs = recorded("correctness_state/function_mode_log_at_an_eager_frame")
    assert ours[0] == theirs["seen"][0]
    assert graphs == 0


def test_an_entry_guards_the_mode_stacks() -> None:
    fn = graphlift.compile(sin_twice)
    fn(torch.ones(3))
    (entry,) = graphlift.cache_entries(fn)
    shown = list(entry.guards)
    assert "torch._C._len_torch_function_stack() == 0" in shown
    assert "torch._C._len_torch_dispatch_stack() == 0" in shown


# == the RNG state ============================================================================
def replayed_draw(x):
    state = torch.get_rng_state()
    a = torch.rand(3)
    torch.set_rng_state(state)
    b = torch.rand(3)
    return x + a, x + b


def rng_replay(compile: Compile) -> Any:
    fn = compile(replayed_draw)
    seen = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        a, b = fn(torch.zeros(3))
        seen.append([values(a), values(b), values(torch.rand(2))])  # the generator after
    return seen


register("rng_replay", rng_replay)


def test_restoring_the_rng_state_replays_the_draws() -> None:
    graphs, theirs = check("rng_replay", rng_replay)
    assert graphs == theirs["graphs"]


def set_deterministic(x):
    torch.use_deterministic_algorithms(True)
    return x + 1


def set_deterministic_in_c(x):
    torch._C._set_deterministic_algorithms(True)
    return x + 1


def deterministic_switch(setter: Callable, compile: Compile) -> Any:
    fn = compile(setter)
    seen = []
    try:
        for _ in range(2):
            torch.use_deterministic_algorithms(False)
            fn(torch.zeros(2))
            seen.append(torch.are_deterministic_algorithms_enabled())
    finally:
        torch.use_deterministic_algorithms(False)
    return seen


SWITCH_CASES = {
    "deterministic_switch": functools.partial(deterministic_switch, set_deterministic),
    "deterministic_switch_c": functools.partial(deterministic_switch, set_deterministic_in_c),
}
for _key, _scenario in SWITCH_CASES.items():
    register(_key, _scenario)


def test_a_process_switch_is_set_on_every_call() -> None:
    # torch.compile leaves the switch unset ([False, False]: docs/coverage.md); graphlift breaks
    # at the setter, which runs eagerly.
    for key, scenario in SWITCH_CASES.items():
        graphs, theirs = check(key, scenario)
        assert scenario(eager) == [True, True] != theirs["seen"], key
        assert graphs == theirs["graphs"] == 1, key


# == nothing runs on the program's real objects while tracing ==================================
def scheduled_steps(compile: Compile) -> Any:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, 2)  # wraps opt.step in a torch function

    def step(x):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    fn = compile(step)
    for _ in range(4):
        fn(torch.ones(1, 3))
        scheduler.step()
    state = opt.state[model.weight]
    return [state["step"].item(), sorted(state), values(model.weight), values(model.bias),
            sorted(vars(model))]


def compiled_then_eager_step(compile: Compile) -> Any:
    """A compiled step stores the state it makes, and an eager step then reads it. The first
    optimizer's first step makes state at a call graphlift runs eagerly; the second optimizer's
    is the traced one that makes it."""
    torch.manual_seed(0)
    models = [torch.nn.Linear(3, 2) for _ in range(2)]
    opts = [torch.optim.Adam(model.parameters(), lr=0.1) for model in models]
    torch.optim.lr_scheduler.LambdaLR(opts[1], lambda epoch: 0.9 ** epoch)
    for model in models:
        model(torch.ones(1, 3)).sum().backward()

    def step(opt):
        opt.step()

    compiled = compile(step)
    for opt in opts:
        compiled(opt)
    fakes = [type(v).__name__ for s in opts[1].state.values() for v in s.values()
             if type(v) is not torch.Tensor]
    opts[1].step()  # eagerly: reads the state the compiled step stored
    return [fakes, opts[1].state[models[1].weight]["step"].item(), values(models[1].weight)]


register("scheduled_steps", scheduled_steps)
register("compiled_then_eager_step", compiled_then_eager_step)


def check_close(key: str, scenario: Callable[[Compile], Any]) -> tuple[int, dict[str, Any]]:
    """``check`` for a compiled optimizer step: torch's kernels take another branch when
    compiling (the step count stays a tensor), so the weights (rounded to 5 decimals) may be one
    unit of the last decimal off, as torch.compile's are; everything else is eager's."""
    ours, graphs = graphlift_run(scenario)
    assert _close(ours, scenario(eager)), (ours, scenario(eager))
    return graphs, recorded(f"correctness_state/{key}")


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1.5e-5
    return a == b


def test_a_scheduler_wrapped_step_runs_once_per_call() -> None:
    graphs, theirs = check_close("scheduled_steps", scheduled_steps)
    # Both trace the scheduler's wrapper and the step; graphlift runs the first step, which
    # makes the state, eagerly (torch.compile makes it for real while tracing): the same graphs.
    assert (graphs, theirs["graphs"]) == (3, 3)
    assert graphlift_run(scheduled_steps)[0] == theirs["seen"]  # torch.compile's very values


def test_a_compiled_step_stores_real_state() -> None:
    graphs, theirs = check_close("compiled_then_eager_step", compiled_then_eager_step)
    # The state it stores is real: the eager step reads it. torch.compile compiles the step
    # for each optimizer; graphlift runs the first eagerly (it makes the state).
    assert (graphs, theirs["graphs"]) == (1, 2)
    assert graphlift_run(compiled_then_eager_step)[0] == theirs["seen"]


def test_torch_functions_closing_over_program_objects_are_not_graph_nodes() -> None:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    torch.optim.lr_scheduler.StepLR(opt, 1)
    decision = graphlift.trace_rules.lookup(opt.step)
    # torch.optim is traced: the scheduler's wrapper of the step too, its writes in the ledger.
    assert decision.rule is graphlift.trace_rules.TORCH_INLINE
    autocast_helper = torch.autocast("cpu")(sin_twice)  # a torch decorator's closure: inert
    assert graphlift.trace_rules.lookup(autocast_helper).rule is graphlift.trace_rules.TORCH_PYTHON
