"""Custom operators and ``torch.ops`` overloads as graph nodes, against eager and torch.compile.

Each case runs eagerly and compiled (results, the arguments afterwards, gradients where an input
requires grad) and checks the graphs, the breaks and the operator targets of the nodes the
backend receives against torch.compile's, recorded (tests/reference). The operators live in the
namespace ``gl_customops`` so no other test file's definitions meet them. The backward registered
for ``scaled_sin`` is deliberately not the true derivative: equal gradients prove the operator's
own autograd formula ran.
"""

from __future__ import annotations

import functools

import pytest
import torch
from corpus.harness import assert_same, assert_same_outcome, call
from reference import measure, recorded

import graphlift
from graphlift.testing import CompileCounterWithBackend


# -- the operators -------------------------------------------------------------------------------
@torch.library.custom_op("gl_customops::scaled_sin", mutates_args=())
def scaled_sin(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x.sin() * scale


@scaled_sin.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _setup_scaled_sin(ctx, inputs, output):
    x, scale = inputs
    ctx.save_for_backward(x)
    ctx.scale = scale


def _backward_scaled_sin(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * x.cos() * ctx.scale * 3, None  # 3x the true derivative, on purpose


scaled_sin.register_autograd(_backward_scaled_sin, setup_context=_setup_scaled_sin)


@torch.library.custom_op("gl_customops::split_halves", mutates_args=())
def split_halves(x: torch.Tensor, ys: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.shape[0] // 2
    total = sum(ys)
    return x[:n] + total[:n], x[n:].clone()


@split_halves.register_fake
def _(x, ys):
    n = x.shape[0] // 2
    return x.new_empty(n), x.new_empty(x.shape[0] - n)


@torch.library.custom_op("gl_customops::add_into", mutates_args=("out",))
def add_into(x: torch.Tensor, out: torch.Tensor) -> None:
    out.add_(x)  # no fake kernel needed: torch makes one for an op that only mutates


@torch.library.custom_op("gl_customops::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x.cos()


LIB = torch.library.Library("gl_customops", "FRAGMENT")
LIB.define("twice(Tensor x) -> Tensor")
LIB.define("shift.Tensor(Tensor x, Tensor other) -> Tensor")
LIB.define("shift.Scalar(Tensor x, Scalar other) -> Tensor")
LIB.define("cpu_only(Tensor x) -> Tensor")
LIB.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
LIB.impl("shift.Tensor", lambda x, other: x + other, "CompositeExplicitAutograd")
LIB.impl("shift.Scalar", lambda x, other: x + other, "CompositeExplicitAutograd")
LIB.impl("cpu_only", lambda x: x * 3, "CPU")  # no Meta or fake kernel: fake tensors cannot run it
torch.library.register_fake("gl_customops::twice", lambda x: torch.empty_like(x), lib=LIB)
torch.library.register_fake("gl_customops::shift.Tensor", lambda x, o: torch.empty_like(x),
                            lib=LIB)
torch.library.register_fake("gl_customops::shift.Scalar", lambda x, o: torch.empty_like(x),
                            lib=LIB)

ADDMM = torch.ops.aten.addmm.default  # an overload held in a global


# -- the programs ----------------------------------------------------------------------------------
def calls_custom_op(x):
    return scaled_sin(x, 2.0) + 1


def calls_packet(x):
    return torch.ops.gl_customops.scaled_sin(x, 0.5) * x


def calls_overload(x):
    return torch.ops.gl_customops.scaled_sin.default(x, 0.5) - 1


def tuple_and_list(x, y):
    first, second = split_halves(x, [y, y * 2])
    return first.sum() + second.sum()


def mutates_argument(x, out):
    add_into(x * 2, out)
    return out + 1


def mutates_intermediate(x):
    y = torch.zeros_like(x)
    torch.ops.gl_customops.add_into(x, y)
    torch.ops.gl_customops.add_into.default(x, y)
    return y


def library_ops(x):
    a = torch.ops.gl_customops.twice(x)
    b = torch.ops.gl_customops.twice.default(x)
    c = torch.ops.gl_customops.shift.Tensor(x, a)
    d = torch.ops.gl_customops.shift.Scalar(x, 3)
    return a + b + c + d + torch.ops.gl_customops.shift(x, 1.5)


def aten_overloads(x, a, b):
    y = torch.ops.aten.addmm.default(x, a, b) + torch.ops.aten.add.Tensor(x, 1)
    return ADDMM(y, a, b).relu()


def overload_attributes(x):
    packet = torch.ops.gl_customops.twice
    name = packet.default.overloadpacket.__name__
    return x + (1 if name == "twice" else 2), scaled_sin._opoverload(x, 1.0)


class WithCustomOp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return scaled_sin(self.linear(x), 0.5).sum()


MODULE = WithCustomOp()


def in_module(x):
    return MODULE(x)


def _t(*shape, seed=0, grad=False):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return t.requires_grad_(grad)


# name -> (program, arguments for call i); each case runs on both backends.
CASES = {
    "custom_op": (calls_custom_op, lambda i: (_t(4, seed=i),)),
    "packet": (calls_packet, lambda i: (_t(4, seed=i),)),
    "overload": (calls_overload, lambda i: (_t(4, seed=i),)),
    "tuple_and_list": (tuple_and_list, lambda i: (_t(6, seed=i), _t(6, seed=i + 9))),
    "mutates_argument": (mutates_argument, lambda i: (_t(3, seed=i), _t(3, seed=i + 5))),
    "mutates_intermediate": (mutates_intermediate, lambda i: (_t(3, seed=i),)),
    "library_ops": (library_ops, lambda i: (_t(3, seed=i),)),
    "aten_overloads": (aten_overloads, lambda i: (_t(2, 2, seed=i), _t(2, 2, seed=i + 1),
                                                  _t(2, 2, seed=i + 2))),
    "overload_attributes": (overload_attributes, lambda i: (_t(3, seed=i),)),
    "in_module": (in_module, lambda i: (_t(2, 4, seed=i),)),
}
# Cases whose gradients are compared too (their float inputs require grad).
TRAINING = ("custom_op", "packet", "overload", "in_module")
BACKENDS = ("eager", "aot_eager")


def _args(case: str, i: int, grad: bool) -> tuple:
    args = CASES[case][1](i)
    return tuple(a.requires_grad_(grad) for a in args)


def _targets(gms) -> list[str]:
    """The operator targets of the nodes, in order: what the backend is asked to run."""
    return [str(node.target) for gm in gms for node in gm.graph.nodes
            if isinstance(node.target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))]


def _torch_compile_case(case: str, backend: str, grad: bool) -> dict:
    """torch.compile's graphs, breaks and operator targets for one call. A measure."""
    import torch._dynamo.testing
    import torch._dynamo.utils

    torch._dynamo.utils.counters.clear()
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend)
    gms = []

    def backend_fn(gm, example_inputs):
        gms.append(gm)
        return counter(gm, example_inputs)

    fn = CASES[case][0]
    torch.compile(fn, backend=backend_fn)(*_args(case, 0, grad))
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    return {"graphs": counter.frame_count, "breaks": breaks, "targets": _targets(gms)}


for _case in CASES:
    for _backend in BACKENDS:
        measure(f"custom_ops/{_case}/{_backend}",
                functools.partial(_torch_compile_case, _case, _backend, False))
for _case in TRAINING:
    measure(f"custom_ops/training/{_case}",
            functools.partial(_torch_compile_case, _case, "aot_eager", True))


def _compile(fn, backend: str):
    counter = CompileCounterWithBackend(backend)
    return graphlift.compile(fn, backend=counter), counter


def _figures(counter, breaks: list) -> dict:
    return {"graphs": counter.frame_count, "breaks": len(breaks),
            "targets": _targets(counter.graphs)}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_operator_is_a_node_as_in_torch_compile(case, backend, breaks):
    fn = CASES[case][0]
    compiled, counter = _compile(fn, backend)
    for i in range(2):  # the second call runs the cached graph
        eager = call(fn, (_args(case, i, False), {}))
        got = call(compiled, (_args(case, i, False), {}))
        assert_same_outcome(eager, got)
    assert _figures(counter, breaks) == recorded(f"custom_ops/{case}/{backend}")
    assert counter.frame_count == 1 and not breaks


@pytest.mark.parametrize("case", TRAINING)
def test_gradients_through_the_operator_equal_eager(case, breaks):
    fn = CASES[case][0]
    compiled, counter = _compile(fn, "aot_eager")
    MODULE.zero_grad()
    for i in range(2):
        grads = []
        for run in (fn, compiled):
            args = _args(case, i, True)
            result = run(*args)
            total = result if isinstance(result, torch.Tensor) else result[0]
            total.sum().backward()
            grads.append([a.grad for a in args] + [p.grad.clone() for p in MODULE.parameters()
                                                   if p.grad is not None])
            MODULE.zero_grad()
        assert_same(grads[0], grads[1], "gradients")
    assert _figures(counter, breaks) == recorded(f"custom_ops/training/{case}")


def test_mutated_input_is_written_back_under_aot_eager():
    # aot_eager functionalizes the write into ``out``: the caller must still see it.
    compiled, _ = _compile(mutates_argument, "aot_eager")
    x, out = _t(3), torch.zeros(3)
    expected_out = torch.zeros(3)
    expected = mutates_argument(x, expected_out)
    assert_same(compiled(x, out), expected)
    assert_same(out, expected_out, "out")
    assert torch.equal(out, x * 2)


# -- operators fake tensors cannot run: a graph break that says why, the call runs eagerly ----
def calls_no_fake(x):
    return no_fake(x) + 1


def calls_cpu_only(x):
    return torch.ops.gl_customops.cpu_only(x) + 1


UNTRACEABLE = {"no_fake": calls_no_fake, "cpu_only": calls_cpu_only}


def _torch_compile_untraceable(name: str) -> dict:
    """What torch.compile does with an operator without a fake kernel. A measure."""
    import torch._dynamo.utils

    torch._dynamo.utils.counters.clear()
    gms = []
    try:
        torch.compile(UNTRACEABLE[name], backend=lambda gm, _: gms.append(gm) or gm)(_t(3))
    except Exception as error:  # noqa: BLE001  (what torch raises is the figure)
        return {"raises": type(error).__name__}
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    return {"breaks": breaks}


for _name in UNTRACEABLE:
    measure(f"custom_ops/untraceable/{_name}", functools.partial(_torch_compile_untraceable,
                                                                _name))


@pytest.mark.parametrize("name", sorted(UNTRACEABLE))
def test_operator_without_fake_kernel_breaks_with_a_clear_reason(name):
    fn = UNTRACEABLE[name]
    compiled, counter = _compile(fn, "eager")
    x = _t(3)
    assert_same(compiled(x), fn(x))
    explained = graphlift.explain(fn)(x)
    assert explained.graph_break_count == 1
    reason = explained.break_reasons[0]
    assert reason.break_type.value == "unsupported_operator"
    assert "cpu_only" in reason.explanation or "no fake kernel" in reason.explanation
    theirs = recorded(f"custom_ops/untraceable/{name}")
    if name == "no_fake":
        # torch.compile raises (no fake impl registered); graphlift runs the call eagerly
        # and tells how to fix it.
        assert theirs == {"raises": "TorchRuntimeError"}
        assert reason.hints == ("register one with @no_fake.register_fake",)
    else:
        assert theirs["breaks"] == explained.graph_break_count
