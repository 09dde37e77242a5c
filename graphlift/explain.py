"""``graphlift.explain(fn)(*args)``: compile once from a clean cache and report what happened."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch.fx

from graphlift import cache
from graphlift.break_types import reference
from graphlift.eval_frame import _code_of, compile
from graphlift.graph_break import GraphBreak, listeners
from graphlift.testing import count_ops


@dataclass
class ExplainOutput:
    """What one run captured: graphs, breaks, ops and guards."""

    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list[GraphBreak] = field(default_factory=list)
    op_count: int = 0
    ops_per_graph: list[list[str]] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    compile_ids: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            for i, record in enumerate(self.break_reasons, 1):
                lines.append(f"  Break Reason {i}:")
                lines.append(f"    Reason: {record.break_type.value}: {record.explanation}")
                lines.append(f"    See: {reference(record.break_type)}")
                lines.extend(f"    {line}" for line in record.user_stack)
        for i, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"Ops per Graph {i}:")
            lines.extend(f"  {op}" for op in ops)
        if self.guards:
            lines.append("Guards:")
            lines.extend(f"  - {guard}" for guard in self.guards)
        return "\n".join(lines)


def explain(fn: Callable) -> Callable[..., ExplainOutput]:
    """``explain(fn)(*args, **kwargs)`` runs ``fn`` once compiled, from a clean cache of its
    code object, and returns an :class:`ExplainOutput`. The cache is cleared again afterwards."""

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        state = cache.get_state(_code_of(fn))
        result = ExplainOutput()

        def recording_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
            result.graphs.append(gm)
            return gm.forward

        state.clear()
        # Breaks in resume functions and in user functions compiled on their own count too.
        listeners.append(result.break_reasons.append)
        try:
            compile(fn, backend=recording_backend)(*args, **kwargs)
            result.graph_count = len(result.graphs)
            result.graph_break_count = len(result.break_reasons)
            result.op_count = sum(count_ops(gm) for gm in result.graphs)
            result.ops_per_graph = [[_op_name(n) for n in gm.graph.nodes
                                     if n.op.startswith("call")] for gm in result.graphs]
            for entry in _entries_with_resumes(state):
                result.compile_ids.append(entry.compile_id)
                result.guards.extend(entry.guards)
        finally:
            listeners.remove(result.break_reasons.append)
            state.clear()
        return result

    return run


def _entries_with_resumes(state: cache.ExtraState) -> list:
    """The frame's entries, then those of its resume functions (and theirs), in that order."""
    entries, seen, pending = [], set(), [state]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        entries.extend(current.entries)
        for point in current.resume_points.values():
            resumed = cache.peek_state(point.code)
            if resumed is not None:
                pending.append(resumed)
    return entries


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, str):
        return f"Tensor.{target}"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", repr(target))
    return f"{module}.{name}" if module else name
