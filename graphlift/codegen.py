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

import ast
import functools
from collections.abc import Callable
from typing import Any

from graphlift.sources import Source
from graphlift.variables.base import VariableTracker

# Values that print as Python literals which read back exactly.
_LITERAL_TYPES = (int, bool, type(None))


def _is_literal(expr: str) -> bool:
    try:
        ast.literal_eval(expr)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


class OutputCodegen:
    """Collects what the run function needs while the return value is reconstructed."""

    def __init__(self) -> None:
        # The globals dict arrives as a parameter (``__gl_G``), never bound here: see
        # convert_frame.FrameSignature.
        self.namespace: dict[str, Any] = {}
        self.outputs: list[VariableTracker] = []
        self.statements: list[str] = []  # temporaries, in the order they were needed
        self._remembered: dict[int, str] = {}
        self._building: set[int] = set()

    def constant(self, value: Any) -> str:
        """An expression for a constant: a literal when exact, else a name bound to the value."""
        if type(value) in _LITERAL_TYPES or (type(value) is str and len(value) < 80):
            return repr(value)
        name = f"__gl_k{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def source_expr(self, source: Source) -> str:
        """The source as an expression; a pinned object (a module's parameter) is bound here."""
        return source.render(self.constant)

    def graph_output(self, tensor: VariableTracker) -> str:
        """``__gl_out[i]``: the tensor becomes the graph's i-th output (once, however often)."""
        for i, existing in enumerate(self.outputs):
            if existing is tensor:
                return f"__gl_out[{i}]"
        self.outputs.append(tensor)
        return f"__gl_out[{len(self.outputs) - 1}]"

    def hoist(self, expr: str) -> str:
        """Evaluate ``expr`` now, before the side-effect ledger writes back (old values)."""
        if expr.isidentifier() or _is_literal(expr):
            return expr
        name = f"__gl_h{len(self.statements)}"
        self.statements.append(f"{name} = {expr}")
        return name

    def remember(self, tracker: VariableTracker, build: Callable[[OutputCodegen], str]) -> str:
        """Build a new mutable object once into a temporary, so every use shares one object."""
        key = id(tracker)
        if key in self._remembered:
            return self._remembered[key]
        if key in self._building:
            from graphlift.exc import Unsupported

            raise Unsupported("an object that contains itself cannot leave the compiled frame")
        self._building.add(key)
        expr = build(self)
        self._building.discard(key)
        name = f"__gl_t{len(self._remembered)}"
        self.statements.append(f"{name} = {expr}")
        self._remembered[key] = name
        return name

    def eager_call(self, fn: VariableTracker, args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker], options: Any) -> str:
        """A call to run eagerly at a graph break; user functions go through their own cache."""
        parts = [self.callable_arg(a, options) for a in args]
        parts += [f"{k}={self.callable_arg(v, options)}" for k, v in kwargs.items()]
        return f"{self.callable_expr(fn, options)}({', '.join(parts)})"

    def callable_expr(self, fn: VariableTracker, options: Any) -> str:
        """The callee of an eager call; a user function becomes its compiled wrapper."""
        from graphlift.variables.functions import UserFunctionVariable, UserMethodVariable
        from graphlift.variables.nn_module import NNModuleVariable
        from graphlift.variables.tensor import TensorMethodVariable

        if isinstance(fn, UserFunctionVariable):
            return self.compiled(fn, options)
        if isinstance(fn, UserMethodVariable) and isinstance(fn.fn, UserFunctionVariable):
            wrapper = self.compiled(fn.fn, options)
            return f"{self.constant(functools.partial)}({wrapper}, {fn.obj.reconstruct(self)})"
        if isinstance(fn, TensorMethodVariable):
            return f"{fn.tensor.reconstruct(self)}.{fn.name}"
        if isinstance(fn, NNModuleVariable) and fn.source is not None:
            from graphlift.eval_frame import compiled_module_call

            module = fn.reconstruct(self)
            return f"{self.constant(compiled_module_call)}({module}, {self.constant(options)})"
        return fn.reconstruct(self)

    def callable_arg(self, value: VariableTracker, options: Any) -> str:
        """An argument of an eager call: user functions passed along are compiled too."""
        from graphlift.variables.functions import UserFunctionVariable

        if isinstance(value, UserFunctionVariable):
            return self.compiled(value, options)
        return value.reconstruct(self)

    def compiled(self, fn: VariableTracker, options: Any) -> str:
        """The graphlift wrapper of a user function (nested frames are compiled, not traced).

        Looked up when the entry runs, through the function's source where it has one: a
        wrapper held by the entry would keep the function, and through its globals maybe the
        entry's own code object, alive for good (see convert_frame.FrameSignature).
        """
        from graphlift.eval_frame import compiled_wrapper

        function = fn.reconstruct(self)
        return f"{self.constant(compiled_wrapper)}({function}, {self.constant(options)})"

    def build(self, params: tuple[str, ...], tail: list[str], graph: Callable | None,
              input_sources: list[Source]) -> tuple[Callable, str]:
        """Write and exec the run function: call the graph, then ``tail`` (which returns)."""
        lines = [f"def __gl_run({', '.join(params)}):"]
        if graph is not None:
            self.namespace["__gl_graph"] = graph
            call_args = ", ".join(self.source_expr(s) for s in input_sources)
            lines.append(f"    __gl_out = __gl_graph({call_args})")
        lines.extend(f"    {statement}" for statement in tail)
        source = "\n".join(lines) + "\n"
        exec(compile(source, "<graphlift run>", "exec"), self.namespace)  # noqa: S102
        return self.namespace["__gl_run"], source
