"""Graph breaks as structured records, shared by logs, ``explain()``, stats and the doctor.

A break either splits the frame (the graph so far runs, the instruction runs eagerly, a resume
function continues) or, where the frame cannot be split there, makes the whole frame run eagerly;
``outcome`` says which.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from graphlift import logs
from graphlift.exc import Unsupported


class BreakType(enum.Enum):
    """The closed set of reasons a frame cannot be captured as one graph."""

    UNSUPPORTED = "unsupported"  # a construct graphlift does not follow yet
    UNSUPPORTED_OPCODE = "unsupported_opcode"  # an opcode listed in translator.UNSUPPORTED
    UNSUPPORTED_CALL = "unsupported_call"  # a call graphlift cannot inline or put in the graph
    SKIPPED_FUNCTION = "skipped_function"  # a function the trace rules skip (I/O, RNG state...)
    DATA_DEPENDENT = "data_dependent"  # an op whose output depends on tensor data (.item())
    DATA_DEPENDENT_BRANCH = "data_dependent_branch"  # if/while on a tensor's value
    SIDE_EFFECT = "side_effect"  # a mutation of state outside the frame
    UNSUPPORTED_OPERATOR = "unsupported_operator"  # an aten op fake tensors cannot run
    TORCH_ERROR = "torch_error"  # a torch op raised while tracing (probably raises eagerly too)
    USER_EXCEPTION = "user_exception"  # the frame raises (NameError, IndexError...) while tracing
    FORCED = "forced"  # the user called graphlift.graph_break()


# What to do about each kind of break: the hint shown when the error carries none of its own.
DEFAULT_HINTS = {
    BreakType.UNSUPPORTED: "rewrite the construct, or accept the break; see the README's report",
    BreakType.UNSUPPORTED_OPCODE: "move this statement out of the compiled function",
    BreakType.UNSUPPORTED_CALL: "call it outside the compiled function, or allow it in the graph",
    BreakType.SKIPPED_FUNCTION: "move the call out of the hot path (print, logging, I/O)",
    BreakType.DATA_DEPENDENT: "keep values as tensors (torch.where instead of .item() and if)",
    BreakType.DATA_DEPENDENT_BRANCH: "use torch.where, or branch outside the compiled function",
    BreakType.SIDE_EFFECT: "return the new value instead of mutating outside state",
    BreakType.UNSUPPORTED_OPERATOR: "this operator has no fake-tensor kernel; call it outside",
    BreakType.TORCH_ERROR: "run the function eagerly: the same call probably raises there too",
    BreakType.USER_EXCEPTION: "the frame raises; it runs eagerly so the error is the real one",
    BreakType.FORCED: "remove graphlift.graph_break() to capture one graph",
}


def default_hints(break_type: str) -> tuple[str, ...]:
    """The standard hint for a break type (unknown types get none)."""
    try:
        return (DEFAULT_HINTS[BreakType(break_type)],)
    except ValueError:
        return ()


def graph_break() -> None:
    """Force a graph break here: the graph so far is compiled and a new one starts after it.

    Running eagerly (outside graphlift) it does nothing.
    """


@dataclass(frozen=True)
class GraphBreak:
    """One break: what kind, where in the user's code, why, and what to do about it."""

    break_type: BreakType
    location: str | None
    source_line: str | None
    explanation: str
    hints: tuple[str, ...] = ()
    user_stack: tuple[str, ...] = field(default=())
    # What graphlift did: split the frame and resumed after the instruction, or ran it eagerly.
    outcome: str = "the whole frame runs eagerly"

    @classmethod
    def from_unsupported(cls, error: Unsupported,
                         outcome: str = "the whole frame runs eagerly") -> GraphBreak:
        try:
            break_type = BreakType(error.break_type)
        except ValueError:
            break_type = BreakType.UNSUPPORTED
        stack = tuple(f"  {line}" for line in error.stack_lines())
        if not stack and error.location:
            stack = (f"  File {error.location}",)
            if error.source_line:
                stack = (*stack, f"    {error.source_line}")
        return cls(break_type, error.location, error.source_line, error.explanation,
                   tuple(error.hints), stack, outcome)

    def log_text(self, function_name: str) -> str:
        lines = [
            f"Graph break in user code at {self.location or '<unknown>'}",
            f"Graph Break Reason: {self.break_type.value}: {self.explanation}",
        ]
        lines.extend(f"  Hint: {hint}" for hint in self.hints)
        lines.append(f"In {function_name}: {self.outcome}.")
        if self.user_stack:
            lines.append("User code traceback:")
            lines.extend(self.user_stack)
        return "\n".join(lines)

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.break_type.value}{where}: {self.explanation}"


# Callbacks told about every break while they are registered (explain() collects through this).
listeners: list = []


def report(record: GraphBreak, function_name: str) -> None:
    """Log a break under the ``graph_breaks`` artifact and tell the listeners."""
    for listener in listeners:
        listener(record)
    if logs.enabled("graph_breaks"):
        logs.emit("graph_breaks", record.log_text(function_name))
