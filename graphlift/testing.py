"""Test helpers: backends that count what the frontend hands them.

Pass a counter as the frontend's backend, call the compiled function, then read
``counter.frame_count`` (graphs compiled) and ``counter.op_count`` (their calling nodes).
Tests check graph counts and sizes through these numbers, never through log text.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.fx

from graphlift.backends import lookup_backend

# The node ops that do work; placeholder, get_attr and output only move values around.
_OP_KINDS = frozenset({"call_function", "call_method", "call_module"})


def count_ops(gm: torch.fx.GraphModule) -> int:
    """The number of nodes in ``gm`` that call something."""
    return sum(1 for node in gm.graph.nodes if node.op in _OP_KINDS)


class CompileCounter:
    """A backend that records each graph it gets and runs it eagerly.

    ``frame_count`` counts graphs compiled, ``op_count`` their calling nodes in total, and
    ``graphs`` keeps the graph modules in the order they came.
    """

    frame_count: int
    op_count: int
    graphs: list[torch.fx.GraphModule]

    def __init__(self) -> None:
        self.clear()

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        self._record(gm)
        return gm.forward

    def _record(self, gm: torch.fx.GraphModule) -> None:
        self.frame_count += 1
        self.op_count += count_ops(gm)
        self.graphs.append(gm)

    def clear(self) -> None:
        """Forget every graph seen so far."""
        self.frame_count = 0
        self.op_count = 0
        self.graphs = []


class CompileCounterWithBackend(CompileCounter):
    """Counts like :class:`CompileCounter`, then compiles with the backend named ``backend``."""

    def __init__(self, backend: str) -> None:
        super().__init__()
        self.backend = lookup_backend(backend)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        # Counted before compiling: inductor takes ownership of gm and may rewrite it.
        self._record(gm)
        return self.backend(gm, example_inputs)
