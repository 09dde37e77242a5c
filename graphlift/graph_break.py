"""Graph breaks as structured records, shared by logs, ``explain()``, stats and the doctor.

A break either splits the frame (the graph so far runs, the instruction runs eagerly, a resume
function continues) or, where the frame cannot be split there, makes the whole frame run eagerly;
``outcome`` says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphlift import logs
from graphlift.break_types import BreakType, break_id, break_type_of, doc_link, reference
from graphlift.exc import Unsupported


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
        break_type = break_type_of(error.break_type)
        stack = tuple(f"  {line}" for line in error.stack_lines())
        if not stack and error.location:
            stack = (f"  File {error.location}",)
            if error.source_line:
                stack = (*stack, f"    {error.source_line}")
        return cls(break_type, error.location, error.source_line, error.explanation,
                   tuple(error.hints), stack, outcome)

    @property
    def id(self) -> str:
        """The break type's stable id (``GL0004``): its section in docs/graph_breaks.md."""
        return break_id(self.break_type)

    @property
    def doc_link(self) -> str:
        return doc_link(self.break_type)

    def log_text(self, function_name: str) -> str:
        lines = [
            f"Graph break in user code at {self.location or '<unknown>'}",
            f"Graph Break Reason: {self.break_type.value}: {self.explanation}",
        ]
        lines.extend(f"  Hint: {hint}" for hint in self.hints)
        lines.append(f"  See: {reference(self.break_type)}")
        lines.append(f"In {function_name}: {self.outcome}.")
        if self.user_stack:
            lines.append("User code traceback:")
            lines.extend(self.user_stack)
        return "\n".join(lines)

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.id} {self.break_type.value}{where}: {self.explanation}"


# Callbacks told about every break while they are registered (explain() collects through this).
listeners: list = []


def report(record: GraphBreak, function_name: str) -> None:
    """Log a break under the ``graph_breaks`` artifact and tell the listeners."""
    for listener in listeners:
        listener(record)
    if logs.enabled("graph_breaks"):
        logs.emit("graph_breaks", record.log_text(function_name))
