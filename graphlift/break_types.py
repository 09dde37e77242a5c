"""The graph-break registry: the closed set of break types, each with a stable id and a page.

Every type has an id (``GL0001`` ...) written in :data:`REGISTRY`, never derived from the enum's
order: ids are what users search for and link to, so a new type takes the next free id and a
retired one leaves its id unused. ``docs/graph_breaks.md`` has one section per id (what it
means, common causes, fixes, an example), and every message about a break -- ``fullgraph``'s
:class:`~graphlift.exc.Unsupported`, the ``graph_breaks`` log, ``explain()`` and the doctor --
prints the id and the section's address (:func:`reference`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


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
    DATA_DEPENDENT_GUARD = "data_dependent_guard"  # Python needs an unbacked symbol's value
    HIGHER_ORDER_BODY = "higher_order_body"  # a torch.cond / scan / checkpoint body not traced


@dataclass(frozen=True)
class BreakInfo:
    """A break type's registry row: its id and the hint shown when the error carries none."""

    id: str
    hint: str


# One row per type. Never change an id: docs, logs and users' notes refer to it.
REGISTRY: dict[BreakType, BreakInfo] = {
    BreakType.UNSUPPORTED: BreakInfo(
        "GL0001", "rewrite the construct, or accept the break; see docs/coverage.md"),
    BreakType.UNSUPPORTED_OPCODE: BreakInfo(
        "GL0002", "move this statement out of the compiled function"),
    BreakType.UNSUPPORTED_CALL: BreakInfo(
        "GL0003", "call it outside the compiled function, or allow it in the graph"),
    BreakType.SKIPPED_FUNCTION: BreakInfo(
        "GL0004", "move the call out of the hot path (print, logging, I/O)"),
    BreakType.DATA_DEPENDENT: BreakInfo(
        "GL0005", "keep values as tensors (torch.where instead of .item() and if)"),
    BreakType.DATA_DEPENDENT_BRANCH: BreakInfo(
        "GL0006", "use torch.where, or branch outside the compiled function"),
    BreakType.SIDE_EFFECT: BreakInfo(
        "GL0007", "return the new value instead of mutating outside state"),
    BreakType.UNSUPPORTED_OPERATOR: BreakInfo(
        "GL0008", "this operator has no fake-tensor kernel; call it outside"),
    BreakType.TORCH_ERROR: BreakInfo(
        "GL0009", "run the function eagerly: the same call probably raises there too"),
    BreakType.USER_EXCEPTION: BreakInfo(
        "GL0010", "the frame raises; it runs eagerly so the error is the real one"),
    BreakType.FORCED: BreakInfo(
        "GL0011", "remove graphlift.graph_break() to capture one graph"),
    BreakType.DATA_DEPENDENT_GUARD: BreakInfo(
        "GL0012", "state what you know with torch._check(...), or use torch.where / torch.cond"),
    BreakType.HIGHER_ORDER_BODY: BreakInfo(
        "GL0013", "make the function pure: return new values instead of writing outside it"),
}

# The page with one section per id, relative to the repository root.
DOCS_PAGE = "docs/graph_breaks.md"


def break_type_of(value: str | BreakType) -> BreakType:
    """The type named ``value``; an unknown name is the catch-all ``UNSUPPORTED``."""
    if isinstance(value, BreakType):
        return value
    try:
        return BreakType(value)
    except ValueError:
        return BreakType.UNSUPPORTED


def break_id(value: str | BreakType) -> str:
    """``"GL0004"`` for ``skipped_function``."""
    return REGISTRY[break_type_of(value)].id


def doc_link(value: str | BreakType) -> str:
    """The type's section of the docs page: ``docs/graph_breaks.md#gl0004``."""
    return f"{DOCS_PAGE}#{break_id(value).lower()}"


def reference(value: str | BreakType) -> str:
    """What messages print after ``See:``: ``GL0004, docs/graph_breaks.md#gl0004``."""
    return f"{break_id(value)}, {doc_link(value)}"


def default_hints(value: str | BreakType) -> tuple[str, ...]:
    """The standard hint for a break type."""
    return (REGISTRY[break_type_of(value)].hint,)
