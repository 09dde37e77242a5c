"""The counting backends count graphs and calling nodes, and still run the graph."""

import torch
import torch.fx

from graphlift.testing import CompileCounter, CompileCounterWithBackend, count_ops


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 3


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = Scale()

    def forward(self, x, y):
        # call_function (torch.sin, add), call_method (relu), call_module (scale): 4 ops
        return (self.scale(torch.sin(x).relu() + y),)


def traced_model() -> torch.fx.GraphModule:
    """A hand-made graph with every kind of calling node; leaf module kept as call_module."""
    return torch.fx.symbolic_trace(Model())


def test_count_ops_counts_only_calling_nodes():
    gm = traced_model()
    ops = sorted(node.op for node in gm.graph.nodes)
    assert ops.count("placeholder") == 2 and ops.count("output") == 1
    assert count_ops(gm) == 4


def test_compile_counter_counts_and_runs_eagerly():
    counter = CompileCounter()
    x, y = torch.randn(5), torch.randn(5)
    first, second = traced_model(), traced_model()
    compiled = counter(first, [x, y])
    counter(second, [x, y])
    torch.testing.assert_close(compiled(x, y), Model()(x, y))
    assert (counter.frame_count, counter.op_count) == (2, 8)
    assert counter.graphs == [first, second]
    counter.clear()
    assert (counter.frame_count, counter.op_count, counter.graphs) == (0, 0, [])


def test_compile_counter_with_backend_delegates():
    counter = CompileCounterWithBackend("aot_eager")
    x, y = torch.randn(5), torch.randn(5)
    compiled = counter(traced_model(), [x, y])
    torch.testing.assert_close(compiled(x, y), Model()(x, y))
    assert (counter.frame_count, counter.op_count) == (1, 4)
