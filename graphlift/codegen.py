"""Code generation for cache hits: the Python function that calls the graph and rebuilds results.

For each cache entry graphlift writes one small function, for example::

    def __gl_run(__gl_fn, __gl_G, x, n):
        __gl_out = __gl_graph(x, __gl_G['w'])
        return (__gl_out[0], 3)

It takes the frame's arguments by name, passes the graph its inputs (read back through their
sources), and rebuilds the return value from graph outputs, constants and the inputs themselves,
so that a tensor argument returned as-is is the very same object, as in eager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphlift.sources import Source
from graphlift.variables.base import VariableTracker

# Values that print as Python literals which read back exactly.
_LITERAL_TYPES = (int, bool, type(None))


class OutputCodegen:
    """Collects what the run function needs while the return value is reconstructed."""

    def __init__(self) -> None:
        # The globals dict arrives as a parameter (``__gl_G``), never bound here: see
        # convert_frame.FrameSignature.
        self.namespace: dict[str, Any] = {}
        self.outputs: list[VariableTracker] = []

    def constant(self, value: Any) -> str:
        """An expression for a constant: a literal when exact, else a name bound to the value."""
        if type(value) in _LITERAL_TYPES or (type(value) is str and len(value) < 80):
            return repr(value)
        name = f"__gl_k{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def source_expr(self, source: Source) -> str:
        return source.expr()

    def graph_output(self, tensor: VariableTracker) -> str:
        """``__gl_out[i]``: the tensor becomes the graph's i-th output (once, however often)."""
        for i, existing in enumerate(self.outputs):
            if existing is tensor:
                return f"__gl_out[{i}]"
        self.outputs.append(tensor)
        return f"__gl_out[{len(self.outputs) - 1}]"

    def build(self, params: tuple[str, ...], return_expr: str, graph: Callable | None,
              input_sources: list[Source]) -> tuple[Callable, str]:
        """Write and exec the run function; returns it with its source."""
        lines = [f"def __gl_run({', '.join(params)}):"]
        if graph is not None:
            self.namespace["__gl_graph"] = graph
            call_args = ", ".join(s.expr() for s in input_sources)
            lines.append(f"    __gl_out = __gl_graph({call_args})")
        lines.append(f"    return {return_expr}")
        source = "\n".join(lines) + "\n"
        exec(compile(source, "<graphlift run>", "exec"), self.namespace)  # noqa: S102
        return self.namespace["__gl_run"], source
