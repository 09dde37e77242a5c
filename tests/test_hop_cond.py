"""``torch.cond``: a tensor predicate is one ``cond`` node over two subgraphs, as under
torch.compile; a Python predicate folds to its branch.

Each case runs eagerly (the operator's Python meaning), under graphlift and (recorded) under
torch.compile; see tests/hop_harness.py.

PYTEST_DONT_REWRITE: the cases' bytecode must be what the user wrote.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hop_harness import Collect, check, close, eager, graphlift_run, register
from reference import measure, recorded

import graphlift
from graphlift.backends import lookup_backend

PREFIX = "hop_cond"
SCALE = torch.tensor([0.5, -1.0, 2.0, 3.0])
OFFSET = 1.5


def inputs() -> torch.Tensor:
    return torch.linspace(-1.0, 2.0, 4)


def tensor_predicate(compile):
    def f(x):
        return torch.cond(x.sum() > 0, lambda x: x.sin() * SCALE, lambda x: x.cos() + OFFSET,
                          (x,))

    fn = compile(f)
    return [fn(inputs()), fn(-inputs())]


def branches_read_different_values(compile):
    lin = torch.nn.Linear(4, 4)
    torch.nn.init.constant_(lin.weight, 0.25)
    torch.nn.init.constant_(lin.bias, -0.5)
    bias = torch.ones(4)

    def true_fn(x, y):
        return lin(x) * y

    def false_fn(x, y):
        return x - y + bias

    def f(x, y):
        return torch.cond(x.mean() < y.mean(), true_fn, false_fn, (x, y))

    fn = compile(f)
    return [fn(inputs(), torch.ones(4)), fn(inputs(), -torch.ones(4))]


def python_predicate(compile):
    def f(x, flag):
        return torch.cond(flag, lambda x: x * 2, lambda x: x - 1, (x,))

    fn = compile(f)
    return [fn(inputs(), True), fn(inputs(), False)]


def shape_predicate(compile):
    def f(x):
        return torch.cond(x.shape[0] > 2, lambda x: x.relu(), lambda x: x.neg(), [x])

    return compile(f)(inputs())


def several_outputs(compile):
    def f(x):
        return torch.cond(x[0] > 0, lambda a, b: (a + b, a * b), lambda a, b: (a - b, a / b),
                          (x, x + 2))

    fn = compile(f)
    return [fn(inputs()), fn(inputs() + 3)]


class Branch(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("shift", torch.full((4,), 0.75))
        self.weight = torch.nn.Parameter(torch.arange(4.0))

    def forward(self, x):
        return x * self.weight + self.shift

    def other(self, x):
        return x - self.shift


def module_and_method_branches(compile):
    branch = Branch()

    def f(x):
        return torch.cond(x.max() > 1, branch, branch.other, (x,))

    fn = compile(f)
    return [fn(inputs()), fn(inputs() / 4)]


def partial_branches(compile):
    def scaled(x, factor):
        return x * factor

    def f(x):
        return torch.cond(x.min() > 0, functools.partial(scaled, factor=3.0),
                          lambda x: scaled(x, -1.0), (x,))

    fn = compile(f)
    return [fn(inputs()), fn(inputs() + 2)]


def training_gradients(compile):
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)

    def f(x):
        out = torch.cond(x.sum() > 0, lambda x: lin(x).tanh(), lambda x: (x * SCALE).exp(), (x,))
        return out.sum()

    fn = compile(f)
    seen = []
    for sign in (1.0, -1.0):
        x = (inputs() * sign).requires_grad_()
        loss = fn(x)
        loss.backward()
        grad = lin.weight.grad
        # None where eager's false branch never used lin; the cond node's backward gives zeros
        seen += [loss, x.grad, None if grad is None or not grad.any() else grad.clone()]
        lin.zero_grad()
    return seen


def branches_returning_inputs(compile):
    """An output that is an operand, an outer tensor or a view of one: cloned in the subgraph
    (torch's cond operator refuses outputs that alias). torch.compile refuses the form."""
    def f(x, y):
        return torch.cond(x.sum() > 0, lambda x, y: (x, y[0]), lambda x, y: (SCALE, y[1] * 2),
                          (x, y))

    fn = compile(f)
    return [fn(inputs(), torch.ones(2, 3)), fn(-inputs(), torch.ones(2, 3))]


def nested_cond(compile):
    def inner(x):
        return torch.cond(x[0] > -0.5, torch.sin, lambda x: x * SCALE, (x,))

    def f(x):
        return torch.cond(x.sum() > 0, inner, lambda x: x - OFFSET, (x,))

    fn = compile(f)
    return [fn(inputs()), fn(inputs() - 1), fn(-inputs())]


CASES = [tensor_predicate, branches_read_different_values, python_predicate, shape_predicate,
         several_outputs, module_and_method_branches, partial_branches, training_gradients,
         nested_cond]
for _case in CASES:
    register(PREFIX, _case)




def torch_compile_error(case) -> str | None:
    """A measure: the exception torch.compile raises on ``case``, by name (None: it runs)."""
    from torch._dynamo.backends.registry import lookup_backend as torch_backend

    try:
        case(functools.partial(torch.compile, backend=torch_backend("eager")))
    except Exception as error:
        return type(error).__name__
    return None


measure(f"{PREFIX}/branches_returning_inputs",
        functools.partial(torch_compile_error, branches_returning_inputs))


def test_branches_returning_inputs_give_eagers_values():
    """graphlift clones such outputs; torch.compile raises (its figure is the error)."""
    assert recorded(f"{PREFIX}/branches_returning_inputs") == "UncapturedHigherOrderOpError"
    ours = graphlift_run(branches_returning_inputs)
    assert close(ours["seen"], eager(branches_returning_inputs))
    assert ours["graphs"] == 1 and ours["operators"] == ["cond"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_cond_as_torch_compile(case):
    check(case, recorded(f"{PREFIX}/{case.__name__}"))


def test_tensor_predicate_gives_one_cond_node():
    backend = Collect(lookup_backend("eager"))
    graphlift.compile(lambda x: torch.cond(x.sum() > 0, torch.sin, torch.cos, (x,)),
                      backend=backend, fullgraph=True)(inputs())
    (gm,) = backend.graphs
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert torch.ops.higher_order.cond in targets
    assert sorted(name for name, _ in gm.named_children()) == ["cond_false_0", "cond_true_0"]


def test_writes_in_a_branch_are_refused_naming_the_line():
    seen = []

    def f(x):
        def true_fn(x):
            seen.append(x)  # the refused write
            return x + 1

        return torch.cond(x.sum() > 0, true_fn, lambda x: x - 1, (x,))

    with pytest.raises(graphlift.Unsupported) as info:
        graphlift.compile(f, backend="eager", fullgraph=True)(inputs())
    error = info.value
    assert error.break_type == "higher_order_body"
    assert "GL0013" in str(error) and "the refused write" in (error.source_line or "") + str(error)
    assert seen == []


def test_branches_returning_different_shapes_are_refused():
    def f(x):
        return torch.cond(x.sum() > 0, lambda x: x, lambda x: x[:2], (x,))

    with pytest.raises(graphlift.Unsupported, match="different shapes"):
        graphlift.compile(f, backend="eager", fullgraph=True)(inputs())


def test_a_new_tensor_in_a_read_global_needs_no_recompile():
    global SCALE
    counter = graphlift.testing.CompileCounter()
    fn = graphlift.compile(lambda x: torch.cond(x.sum() > 0, lambda x: x * SCALE, torch.neg,
                                                (x,)), backend=counter)
    before = SCALE
    try:
        first = fn(inputs())
        SCALE = torch.full((4,), 10.0)
        second = fn(inputs())
    finally:
        SCALE = before
    assert counter.frame_count == 1
    assert torch.equal(first, inputs() * before) and torch.equal(second, inputs() * 10.0)


def test_branches_that_change_a_variable_of_the_frame_are_refused():
    def f(x):
        taken = 0

        def true_fn(x):
            nonlocal taken
            taken += 1
            return x + 1

        def false_fn(x):
            nonlocal taken
            taken += 1
            return x - 1

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,)), taken

    with pytest.raises(graphlift.Unsupported, match="a variable of an enclosing function"):
        graphlift.compile(f, backend="eager", fullgraph=True)(inputs())


def test_a_constant_a_branch_reads_is_guarded_by_the_frame():
    global OFFSET
    counter = graphlift.testing.CompileCounter()
    fn = graphlift.compile(lambda x: torch.cond(x.sum() > 0, torch.neg, lambda x: x + OFFSET,
                                                (x,)), backend=counter)
    before = OFFSET
    try:
        first = fn(-inputs())
        OFFSET = 7.0
        second = fn(-inputs())
    finally:
        OFFSET = before
    assert counter.frame_count == 2  # the guard on OFFSET failed: compiled again
    assert torch.equal(first, -inputs() + before) and torch.equal(second, -inputs() + 7.0)


def test_a_branch_that_raises_is_refused_not_raised():
    """Eager raises only when the raising branch runs: traced, both run, so the raise (which a
    try block around the call would catch) must not be taken as the call's outcome."""
    def f(x):
        def checked(x):
            raise ValueError("negative total")

        try:
            return torch.cond(x.sum() > 0, lambda x: x * 2, checked, (x,))
        except ValueError:
            return x - 100

    with pytest.raises(graphlift.Unsupported, match="raises ValueError"):
        graphlift.compile(f, backend="eager", fullgraph=True)(inputs())


def test_in_place_writes_inside_a_branch():
    """Into a tensor the branch made: traced; into its operand: refused (naming the line)."""
    def own(x):
        y = x * 2
        y.add_(1)
        return y

    def operand(x):
        x.add_(1)  # the refused write
        return x * 1

    def f(x):
        return torch.cond(x.sum() > 0, own, lambda x: x - 1, (x,))

    out = graphlift.compile(f, backend="aot_eager", fullgraph=True)(inputs())
    assert torch.equal(out, inputs() * 2 + 1)
    with pytest.raises(graphlift.Unsupported, match="in place") as info:
        graphlift.compile(lambda x: torch.cond(x.sum() > 0, operand, torch.neg, (x,)),
                          backend="eager", fullgraph=True)(inputs())
    assert "line" in str(info.value)


def test_a_write_through_a_view_of_an_operand_is_refused():
    def operand_row(x):
        x[0].add_(1)  # a view made inside the branch, of the operand's memory
        return x * 1

    with pytest.raises(graphlift.Unsupported, match="in place"):
        graphlift.compile(lambda x: torch.cond(x.sum() > 0, operand_row, torch.neg, (x,)),
                          backend="eager", fullgraph=True)(inputs())
