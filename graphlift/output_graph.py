"""The graph being captured: an FX graph, its fake-tensor mode, its inputs and its compile.

Every tensor the translator sees is a :class:`~graphlift.variables.TensorVariable` holding an FX
node and a fake tensor with the same metadata. Real tensors enter only as graph inputs
(placeholders, each tied to the :class:`~graphlift.sources.Source` that reaches it again at run
time); operations run on fake tensors while tracing, so shapes and dtypes are known constants.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode

from graphlift import logs
from graphlift.backends import call_graph_callable, lookup_backend
from graphlift.exc import BackendCompilerFailed
from graphlift.side_effects import SideEffects
from graphlift.sources import Source, placeholder_name


@dataclass
class GraphInput:
    """A placeholder of the graph and where its value comes from on every call."""

    source: Source
    node: torch.fx.Node
    example: torch.Tensor  # the real tensor seen while tracing
    fake: torch.Tensor


class OutputGraph:
    """Owns the FX graph, the fake mode and the inputs for one translation."""

    def __init__(self) -> None:
        self.graph = torch.fx.Graph()
        self.fake_mode = FakeTensorMode()
        self.inputs: list[GraphInput] = []
        self._input_by_id: dict[int, GraphInput] = {}
        self.mutated_inputs: set[int] = set()  # indexes into self.inputs
        self.side_effects = SideEffects()

    # -- inputs --------------------------------------------------------------------------------
    def input_for(self, value: torch.Tensor) -> GraphInput | None:
        """The existing input for this very tensor object, if it was already lifted."""
        return self._input_by_id.get(id(value))

    def add_input(self, source: Source, value: torch.Tensor) -> GraphInput:
        """Lift a real tensor into a placeholder; placeholders stay ahead of every other node."""
        fake = self.fake_mode.from_tensor(value, static_shapes=True)
        first_op = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        name = placeholder_name(source)
        if first_op is None:
            node = self.graph.placeholder(name)
        else:
            with self.graph.inserting_before(first_op):
                node = self.graph.placeholder(name)
        node.meta["example_value"] = fake
        node.meta["source"] = source.name()
        graph_input = GraphInput(source, node, value, fake)
        self.inputs.append(graph_input)
        self._input_by_id[id(value)] = graph_input
        return graph_input

    def mark_mutated(self, fake: torch.Tensor) -> None:
        """The graph mutates this tensor in place; if it is an input, remember which."""
        for i, graph_input in enumerate(self.inputs):
            if graph_input.fake is fake:
                self.mutated_inputs.add(i)

    # -- nodes ---------------------------------------------------------------------------------
    def create_node(self, op: str, target: Any, args: tuple, kwargs: dict,
                    mutates: bool = False) -> torch.fx.Node:
        node = self.graph.create_node(op, target, args, kwargs)
        node.meta["mutates"] = mutates
        return node

    def finish(self, outputs: list[torch.fx.Node]) -> None:
        """Add the output node, drop dead nodes and unused inputs (their guards stay)."""
        self.graph.output(tuple(outputs))
        for node in reversed(list(self.graph.nodes)):
            if node.op in ("call_function", "call_method") and not node.users \
                    and not node.meta.get("mutates"):
                self.graph.erase_node(node)
        for graph_input in list(self.inputs):
            if not graph_input.node.users:
                self.graph.erase_node(graph_input.node)
                self.inputs.remove(graph_input)

    @property
    def op_count(self) -> int:
        """Operations in the graph, counted like torch.compile's CompileCounter does."""
        return sum(1 for n in self.graph.nodes
                   if n.op in ("call_function", "call_method", "call_module"))

    def getitem_node(self, node: torch.fx.Node, index: int) -> torch.fx.Node:
        """One output of a multi-output op (torch.split, torch.max with dim)."""
        return self.graph.call_function(operator.getitem, (node, index))

    # -- compile -------------------------------------------------------------------------------
    def compile(
        self, backend: str | Callable, name: str
    ) -> tuple[torch.fx.GraphModule, Callable, float]:
        """Hand the finished graph to the backend; return (module, callable, seconds)."""
        gm = torch.fx.GraphModule(torch.nn.Module(), self.graph, class_name=name)
        if logs.enabled("graph_code"):
            logs.emit("graph_code", f"TRACED GRAPH {name}\n{gm.code}")
        examples = [graph_input.example for graph_input in self.inputs]
        backend_fn = lookup_backend(backend)
        start = time.perf_counter()
        try:
            compiled = backend_fn(gm, examples)
        except Exception as error:
            label = backend if isinstance(backend, str) else getattr(backend, "__name__", backend)
            raise BackendCompilerFailed(
                f"backend {label!r} raised {type(error).__name__}: {error}"
            ) from error
        return gm, call_graph_callable(compiled), time.perf_counter() - start
