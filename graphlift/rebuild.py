"""Rebuilding values after the graph: what trackers, the side-effect ledger and the code generator
ask of one another.

A tracker rebuilds its value as an expression of the run function (``reconstruct``), through the
code generator it is given (``codegen.OutputCodegen``, which sits above the trackers and the
ledger); the ledger writes back what the frame changed through the same. Neither imports the
code generator: what they may ask of it is :class:`Codegen`, and what the ledger and the code
generator hold of a tracker (``variables.base.VariableTracker``, also above the ledger) is
:class:`Tracker`. ``tests/test_layers.py`` checks that the real classes have every member a
protocol names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from graphlift.sources import Source


class Tracker(Protocol):
    """A value of the trace (``variables.base.VariableTracker``), as the ledger keeps it."""

    source: Source | None
    """Where the value was read from the frame's inputs; None for a value the trace made."""

    def python_type(self) -> type:
        """The value's type (raises ``Unsupported`` where it is not known while tracing)."""

    def is_constant(self) -> bool:
        """Whether the value is a Python constant known while tracing."""

    def reconstruct(self, codegen: Codegen) -> str:
        """An expression that rebuilds the value after the graph has run."""


class Container(Tracker, Protocol):
    """A list, dict or set of the trace (``variables.containers``) whose items the ledger writes
    back to the real one."""

    items: Any
    """The trackers of its items: a list, or a dict by key."""

    def reconstruct_literal(self, codegen: Codegen) -> str:
        """A new container of the same kind with the items (a display: ``[a, b]``)."""


class Codegen(Protocol):
    """The code generator that rebuilds values after the graph (``codegen.OutputCodegen``, or
    ``codegen.ErrorPathCodegen`` on the error path), as a tracker or the ledger may ask of it.
    Each method returns a Python expression of the run function."""

    def constant(self, value: Any) -> str:
        """A constant: a literal when exact, else a name bound to the value."""

    def bind(self, value: Any) -> str:
        """A name bound to ``value`` itself (a literal would be an equal object, not this one)."""

    def source_expr(self, source: Source) -> str:
        """The value at ``source``; a pinned object (a module's parameter) is bound."""

    def graph_output(self, tensor: Tracker) -> str:
        """The value the graph computes for the tracker ``tensor`` (one of its outputs)."""

    def hoist(self, expr: str) -> str:
        """``expr`` evaluated now, before the side-effect ledger writes back (old values)."""

    def remember(self, tracker: Tracker, build: Callable[[Codegen], str]) -> str:
        """The new mutable object ``build`` makes for ``tracker``, built once: every use shares
        one object."""


class ErrorCodegen(Codegen, Protocol):
    """What the ledger also asks of the error path's code generator (``codegen.ErrorPathCodegen``;
    ``side_effects.SideEffects.replay_on_error``)."""

    statements: list[str]
    """The temporaries written so far, in order (a checkpoint that cannot be kept cuts its own)."""

    def take_used(self) -> tuple[int, ...]:
        """The graph values (``__gl_v[j]``) read since the last call."""


@dataclass(frozen=True)
class FrameWrappers:
    """How generated code reaches the interception layer, which sits above code generation:
    ``eval_frame`` passes its wrapper factories down through ``convert_frame``."""

    function: Callable  # (fn, options) -> the compiled wrapper of a user function
    module_call: Callable  # (module, options) -> a call of the module through its compiled forward
    code: Callable  # (fn, options) -> a new wrapper for a function (resume functions)
    # (callable, options) -> what an eager frame calls for it: a disable(recursive=False)
    # function running with its callees compiled, a user function torch disallowed compiled
    route: Callable
