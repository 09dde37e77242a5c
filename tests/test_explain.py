"""explain(): one run from a clean cache, reported as graphs, ops, guards and break reasons."""

import torch

import graphlift
from graphlift.graph_break import BreakType


def sin_plus(x, n):
    return torch.sin(x) + n * x


def prints(x):
    print("side effect")
    return x + 1


PRINT_LOCATION = f"{__file__}:{prints.__code__.co_firstlineno + 1}"


def test_one_graph():
    x = torch.randn(3)
    result = graphlift.explain(sin_plus)(x, 2)
    assert (result.graph_count, result.graph_break_count, result.break_reasons) == (1, 0, [])
    assert result.op_count == 3
    assert result.ops_per_graph == [["torch.sin", "_operator.mul", "_operator.add"]]
    assert isinstance(result.graphs[0], torch.fx.GraphModule)
    assert "L['n'] == 2" in result.guards and "L['x'].size()[0] == 3" in result.guards
    assert result.compile_ids == ["0/0"]


def test_graph_from_explain_matches_eager():
    x = torch.randn(3)
    (graph,) = graphlift.explain(sin_plus)(x, 2).graphs
    (got,) = graph(x)
    torch.testing.assert_close(got, sin_plus(x, 2))


def test_keyword_arguments():
    result = graphlift.explain(sin_plus)(torch.randn(3), n=4)
    assert result.graph_count == 1 and "L['n'] == 4" in result.guards


def prints_in_a_loop(x):
    for _ in range(2):
        print("side effect")
    return x + 1


def test_graph_break_names_the_location(capsys):
    result = graphlift.explain(prints)(torch.randn(3))
    assert capsys.readouterr().out == "side effect\n"
    assert (result.graph_count, result.graph_break_count, result.op_count) == (1, 1, 1)
    (reason,) = result.break_reasons
    assert reason.break_type is BreakType.SKIPPED_FUNCTION
    assert reason.location == PRINT_LOCATION
    assert reason.source_line == 'print("side effect")'
    assert "print()" in reason.explanation


def test_a_frame_that_runs_eagerly_has_no_graph(capsys):
    result = graphlift.explain(prints_in_a_loop)(torch.randn(3))
    assert capsys.readouterr().out == "side effect\n" * 2
    assert (result.graph_count, result.graph_break_count, result.op_count) == (0, 1, 0)
    line = prints_in_a_loop.__code__.co_firstlineno + 2
    assert result.break_reasons[0].location == f"{__file__}:{line}"


def test_str_is_readable(capsys):
    text = str(graphlift.explain(sin_plus)(torch.randn(3), 2))
    assert text.splitlines()[:6] == [
        "Graph Count: 1",
        "Graph Break Count: 0",
        "Op Count: 3",
        "Ops per Graph 1:",
        "  torch.sin",
        "  _operator.mul",
    ]
    assert "Guards:\n  - " in text and "  - L['n'] == 2" in text
    broken = str(graphlift.explain(prints)(torch.randn(3)))
    assert "Graph Break Count: 1" in broken
    line = prints.__code__.co_firstlineno + 1
    assert "Break Reason 1:" in broken and f'File "{__file__}", line {line}, in prints' in broken
    assert '    print("side effect")' in broken


def test_explain_starts_and_ends_with_a_clean_cache():
    compiled = graphlift.compile(sin_plus)
    for n in (1, 2):
        compiled(torch.randn(3), n)
    result = graphlift.explain(sin_plus)(torch.randn(3), 3)
    assert result.graph_count == 1 and len(result.compile_ids) == 1
    assert graphlift.cache_entries(sin_plus) == []


def test_explain_of_a_compiled_function_and_a_method():
    class Scale:
        def __init__(self):
            self.factor = 3.0

        def forward(self, x):
            return x * self.factor

    assert graphlift.explain(graphlift.compile(sin_plus))(torch.randn(3), 2).graph_count == 1
    result = graphlift.explain(Scale().forward)(torch.randn(3))
    assert (result.graph_count, result.op_count) == (1, 1)
