"""graphlift's exceptions: what the user may see, each carrying enough to act on."""

from __future__ import annotations

from graphlift.break_types import reference


class GraphliftError(RuntimeError):
    """Base class of every error graphlift raises on its own behalf."""


class Unsupported(GraphliftError):
    """Tracing met something it cannot follow; the frame falls back (or raises under fullgraph).

    ``break_type`` is one of :class:`graphlift.break_types.BreakType`'s values; ``location`` is the
    user's ``file:line`` and ``source_line`` the text there, when known.
    """

    def __init__(
        self,
        explanation: str,
        *,
        break_type: str = "unsupported",
        hints: tuple[str, ...] = (),
        location: str | None = None,
        source_line: str | None = None,
    ) -> None:
        super().__init__(explanation)
        self.explanation = explanation
        self.break_type = break_type
        self.hints = hints
        self.location = location
        self.source_line = source_line
        # Offset of the compiled frame's instruction that was running (the call site, for a
        # break inside an inlined function): where a graph break would split the frame.
        self.root_offset: int | None = None
        # (translator id, (file, line, function, source line)) for each traced frame the error
        # passed through, innermost first: the user's stack at the break.
        self.user_frames: list[tuple[int, tuple[str, int, str, str | None]]] = []

    def __str__(self) -> str:
        lines = [f"{self.break_type}: {self.explanation}"]
        if self.location:
            lines.append(f"  at {self.location}")
            if self.source_line:
                lines.append(f"    {self.source_line}")
        if len(self.user_frames) > 1:
            lines.append("  user stack (most recent call last):")
            lines.extend(f"    {line}" for line in self.stack_lines())
        lines.extend(f"  hint: {h}" for h in self.hints)
        lines.append(f"  see: {reference(self.break_type)}")
        return "\n".join(lines)

    def stack_lines(self) -> list[str]:
        """The user's frames, outermost first, in traceback form."""
        lines = []
        for _, (filename, line, name, source) in reversed(self.user_frames):
            lines.append(f'File "{filename}", line {line}, in {name}')
            if source:
                lines.append(f"  {source}")
        return lines


class InternalError(GraphliftError):
    """graphlift failed while compiling, under ``config.raise_internal_errors`` (or fullgraph);
    the original error is chained as __cause__. Without the setting the frame runs eagerly."""


class BackendCompilerFailed(GraphliftError):
    """The backend raised while compiling a graph; the original error is chained as __cause__."""


class RecompileError(GraphliftError):
    """A recompile happened while ``config.error_on_recompile`` was set."""


class RecompileLimitExceeded(GraphliftError):
    """A code object hit a recompile limit while failing on it was requested."""


class GuardBuildError(GraphliftError):
    """A guard could not be built for a value the graph depends on."""


class FirstCallRunsEagerly(GraphliftError):
    """The trace met state the call itself makes on its first run (an optimizer's state, made by
    its first step): this call runs eagerly, and the next compiles with the state there. Raised
    at most once per code object; never reaches the user."""


class ConstraintViolationError(GraphliftError):
    """A dimension marked dynamic (``graphlift.mark_dynamic``) was specialized while tracing."""
