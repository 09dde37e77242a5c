"""The fuzzer's own parts catch what they claim to: generation, comparison, minimizing."""

import ast

import numpy as np
import pytest
import torch
from torch._higher_order_ops import while_loop

import graphlift

from . import minimizer
from .compare import differences
from .runner import Difference, Outcome, build_args, compare, eager_hops, load, run_program, unload
from .versions import generate


def test_generation_is_seeded_and_valid():
    first, again, other = generate(7), generate(7), generate(8)
    assert first == again
    assert first.source != other.source
    ast.parse(first.source)
    assert first.calls[0] == first.calls[1], "the second call repeats the first (a cache hit)"
    sized = first.variants[:4]  # version 3 on: a fifth repeats the first's arguments on purpose
    assert len(set(sized)) == len(sized), "every variant has its own seed"


def test_a_helper_called_with_a_starred_list_keeps_its_shape():
    # Seed 304237 once crashed the generator: the starred-list call of a variadic helper
    # returned its source without the shape, so the source's first letter became a "shape".
    for seed in (304237, *range(304200, 304230)):
        ast.parse(generate(seed, version=1).source)


def test_programs_define_their_entry_and_build_their_arguments():
    for seed in range(20):
        program = generate(seed)
        namespace = load(program, "eager")
        try:
            assert callable(namespace[program.entry])
            args, kwargs = build_args(program, program.calls[-1], namespace)
            assert isinstance(args, tuple) and isinstance(kwargs, dict)
        finally:
            unload(program)


@pytest.mark.parametrize(("eager", "compiled"), [
    (torch.ones(2), torch.ones(2, dtype=torch.float64)),
    (torch.ones(2), torch.ones(2) + 1e-3),
    (torch.ones(2), torch.ones(1, 2)),
    (torch.ones(2, requires_grad=True), torch.ones(2)),
    ([1, 2], (1, 2)),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    ({1, 2}, {1, 3}),
    (0.5, 0.5001),
    (True, 1),
])
def test_differences_are_found(eager, compiled):
    assert differences(eager, compiled)


def test_equal_values_have_no_differences():
    value = [torch.ones(2), {"k": (1, "s", None)}, float("nan"), {3, 4}]
    assert not differences(value, [torch.ones(2), {"k": (1, "s", None)}, float("nan"), {3, 4}])
    assert not differences(torch.tensor([1.0]), torch.tensor([1.0 + 1e-7]))


def _outcome(**fields) -> Outcome:
    base = {"args": ((), {}), "state": {}}
    return Outcome(**{**base, **fields})


def test_outcomes_are_classified_by_severity():
    ok = _outcome(result=1, stdout="a\n")
    assert compare(ok, _outcome(result=1, stdout="a\n"), "<user>") is None
    assert compare(ok, _outcome(result=2, stdout="b\n"), "<user>").kind == "value"
    assert compare(ok, _outcome(result=1, stdout="b\n"), "<user>").kind == "print"
    assert compare(ok, _outcome(result=1, stdout="a\n", state={"G": 1}), "<user>").kind == \
        "side_effect"
    raised = _outcome(error=ValueError("bad"))
    assert compare(raised, _outcome(error=ValueError("worse")), "<user>").kind == "exception"
    assert compare(raised, _outcome(result=1), "<user>").kind == "exception"


def test_an_error_raised_inside_graphlift_is_internal():
    try:
        graphlift.compile(lambda x: x, backend="no such backend")
    except ValueError as error:
        found = compare(_outcome(result=1), _outcome(error=error), "<user>")
    assert found.kind == "internal"
    assert "graphlift/" in found.detail


def test_a_program_that_compiles_correctly_shows_no_difference():
    program = generate(0).replace(source="import torch\n\ndef f(x):\n    return x * 2\n",
                                  entry="f", variants=("torch.manual_seed(0)\n"
                                                       "args = (torch.randn(2),)\nkwargs = {}",),
                                  calls=(0, 0))
    result = run_program(program)
    assert result.difference is None and result.calls == 2


def test_a_compile_that_fails_inside_graphlift_is_counted(monkeypatch):
    # graphlift falls back to eager with a warning: no difference, but the report counts it.
    from graphlift import convert_frame

    from .campaign import Report

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug inside graphlift")
    monkeypatch.setattr(convert_frame, "_convert", broken)
    program = generate(0).replace(source="import torch\n\ndef f(x):\n    return x * 2\n",
                                  entry="f", variants=("args = (torch.ones(2),)\nkwargs = {}",),
                                  calls=(0, 0))
    with graphlift.config.patch(raise_internal_errors=False):  # as campaigns run (the default)
        result = run_program(program)
    assert result.difference is None and result.stats["internal_errors"] >= 1
    report = Report()
    report.add(program, result)
    assert report.internal_error_seeds == [program.seed]
    assert f"fell back to eager: {result.stats['internal_errors']} (programs: 0)" in \
        report.render()


def test_minimizer_keeps_the_statements_the_difference_needs(monkeypatch):
    # A stand-in runner: the "difference" persists while the source still calls torch.cos.
    def fake_run(candidate, timeout):
        class Result:
            difference = Difference("value", 0, "", "value") if "cos" in candidate.source \
                else None
        return Result()
    monkeypatch.setattr(minimizer, "run_program", fake_run)
    program = generate(0).replace(
        source="import torch\n\ndef f(x):\n    a = x + 1\n    b = torch.cos(a * 2)\n"
               "    c = b.sum()\n    if c > 0:\n        print(c)\n    return a, b\n",
        entry="f", calls=(0, 0, 1), variants=("args = (1,)\nkwargs = {}",) * 2)
    small = minimizer.minimize(program, Difference("value", 2, "", "value"), seconds=30)
    body = ast.parse(small.source).body[-1].body
    assert "cos" in small.source and len(body) == 1, small.source
    assert small.calls == (1,)


def test_minimizer_skips_edits_that_ast_cannot_unparse():
    # Replacing an f-string's formatted part by its inner call leaves a tree ast.unparse
    # refuses (ValueError on 3.11, AttributeError on 3.10): the candidate is skipped.
    program = generate(0).replace(source="def f(x):\n    print(f'{str(x)}')\n")
    tree = ast.parse(program.source)
    joined = next(node for node in ast.walk(tree) if isinstance(node, ast.JoinedStr))
    joined.values[0] = joined.values[0].value
    made = minimizer._with_tree(program, tree)
    try:
        ast.unparse(tree)
    except (ValueError, AttributeError):
        assert made is None
    else:  # a CPython whose unparse accepts it: the candidate is kept
        assert made is not None


def test_eager_cond_and_while_loop_have_their_python_meaning_without_torch_compile(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("torch.compile was called")

    monkeypatch.setattr(torch, "compile", refuse)
    x = torch.tensor([1.0, -2.0])
    with pytest.raises(AssertionError, match="torch.compile was called"):
        torch.cond(x.sum() > 0, lambda a: a + 1, lambda a: a - 1, (x,))  # torch's own eager cond
    with eager_hops():
        assert torch.cond(x.sum() > 0, lambda a: a + 1, lambda a: a - 1, (x,)).tolist() == \
            [0.0, -3.0]
        i, a = while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2), (torch.tensor(0), x))
        assert int(i) == 3 and a.tolist() == [8.0, -16.0]
        w = torch.ones(2, requires_grad=True)
        picked = torch.cond(x.sum() < 0, lambda a: a * 2, lambda a: a * w, (x,))
        assert picked.tolist() == [2.0, -4.0] and picked.requires_grad, "as the operator"
        _, same = while_loop(lambda i, a: i < 0, lambda i, a: (i + 1, a), (torch.tensor(0), x))
        assert same is not x and same.tolist() == x.tolist(), "no step: a copy, as the operator"


def test_ndarray_arguments_are_compared_by_value():
    a = np.ones((2, 3), dtype=np.float32)
    assert not differences((a,), (a.copy(),))
    assert differences((a,), (a * 2,))
    assert differences((a,), (a.astype(np.float64),))
