"""VariableTracker: the symbolic value the translator pushes on its stack instead of a real one.

Trackers are called by layers above them: the translator (``graphlift.translator``) and the code
generator (``graphlift.codegen``). They get each as an argument, ``tx`` and ``codegen``, typed as
a protocol of what a tracker may ask of it: :class:`Translator` here, ``rebuild.Codegen``. The
variables layer never names the modules above it; ``tests/test_layers.py`` checks that, and that
the real classes have every member a protocol names.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from graphlift.exc import Unsupported
from graphlift.rebuild import Codegen
from graphlift.sources import Source

if TYPE_CHECKING:
    from graphlift.guards import GuardBuilder
    from graphlift.output_graph import OutputGraph


_BIRTHS = itertools.count()


def births() -> int:
    """A number above every tracker's ``born`` so far (trackers made later have larger ones)."""
    return next(_BIRTHS)


class VariableTracker:
    """Base class. ``source`` is set when the value was read from the frame's inputs.

    Subclasses override the operations they support; the defaults raise :class:`Unsupported`,
    which makes the frame fall back to eager with that reason.
    """

    # True on trackers of functions, methods and classes: ``callable()`` of them is True.
    callable_kind = False

    def __init__(self, source: Source | None = None) -> None:
        self.source = source
        self.born = next(_BIRTHS)  # creation order: what a higher-order body may change


    def __repr__(self) -> str:
        where = f" from {self.source.name()}" if self.source else ""
        return f"{type(self).__name__}({self.describe()}{where})"

    def describe(self) -> str:
        return ""

    # -- what the value is ---------------------------------------------------------------------
    def python_type(self) -> type:
        raise Unsupported(f"type() of {self!r} is not known while tracing")

    def is_constant(self) -> bool:
        """True when the value is a Python constant known while tracing."""
        return False

    def as_constant(self) -> Any:
        raise Unsupported(f"{self!r} is not a constant known while tracing")

    def truthy(self, tx: Translator) -> bool:
        """The value of ``bool(v)`` while tracing, for branches."""
        raise Unsupported(f"cannot branch on {self!r} while tracing",
                          break_type="data_dependent_branch")

    # -- operations ----------------------------------------------------------------------------
    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of {self!r}")

    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        raise Unsupported(f"calling {self!r}")

    def call_method(self, tx: Translator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return self.var_getattr(tx, name).call(tx, args, kwargs)

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        """The items, for unpacking, ``*args`` and iteration."""
        raise Unsupported(f"cannot iterate over or unpack {self!r}")

    def iterate(self, tx: Translator) -> Iterator[VariableTracker]:
        """The items one at a time, as an iterating C function pulls them (``list.extend``):
        an iterator makes each item only when the consumer asks for it."""
        return iter(self.unpack(tx))

    def mapping_items(self, tx: Translator) -> dict[Any, VariableTracker] | None:
        """The items that CPython's dict merge reads directly (``dict.update(v)``, ``{**v}``):
        those of a dict, or of a dict subclass that keeps dict's ``__iter__``; else None."""
        return None

    # -- leaving the graph ---------------------------------------------------------------------
    def reconstruct(self, codegen: Codegen) -> str:
        """A Python expression that rebuilds this value after the graph has run."""
        if self.source is not None:
            return codegen.source_expr(self.source)
        raise Unsupported(f"cannot return {self!r} from a compiled frame")


class NullVariable(VariableTracker):
    """The NULL that CPython 3.11 pushes below a callable (PUSH_NULL, LOAD_GLOBAL with NULL)."""

    def describe(self) -> str:
        return "NULL"


class TracedException(Exception):
    """Raised inside the translator when the traced program raises; unwinds via the table.

    It carries the exception's tracker, or the real exception that folding a constant operation
    raised: the translator that catches it makes its tracker (trackers of exceptions build on the
    containers, which raise through here, so this module cannot make them).
    """

    def __init__(self, exception: VariableTracker | None = None,
                 real: BaseException | None = None) -> None:
        super().__init__(exception.describe() if exception is not None else repr(real))
        self.exception = exception
        self.real = real

    @property
    def cls(self) -> type:
        """The class of the exception raised."""
        return self.exception.cls if self.exception is not None else type(self.real)


def raise_real(error: BaseException) -> TracedException:
    """A traced version of an exception that folding a constant operation raised for real."""
    return TracedException(real=error)


MISSING = object()  # lookup_class_attr: the class has no such attribute


def lookup_class_attr(cls: type, name: str, start_after: type | None = None) -> Any:
    """``name`` in the MRO of ``cls`` without invoking descriptors (after ``start_after``)."""
    mro = cls.__mro__
    if start_after is not None:
        mro = mro[mro.index(start_after) + 1:]
    for klass in mro:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING


# -- what a tracker may ask of the layers above it ---------------------------------------------
class Translator(Protocol):
    """The frame being traced, as a tracker gets it (``tx``): ``translator.InstructionTranslator``
    for the compiled frame, ``translator.InliningTranslator`` for an inlined callee."""

    output: OutputGraph
    """The FX graph, fake tensors and side-effect ledger the frame traces into."""
    guards: GuardBuilder
    """The cache entry's guards: what the graph assumes about the inputs."""
    builder: Builder
    """Wraps a value read from the inputs in its tracker, with its guards."""
    code: types.CodeType
    """The code object of the frame."""
    f_globals: dict[str, Any]
    """The frame's globals."""
    symbolic_locals: dict[str, VariableTracker]
    """The frame's locals that have trackers (read or assigned so far)."""
    unread_arguments: dict[str, Any]
    """The real values of the arguments not read yet (wrapped, and guarded, when first read)."""
    cells: dict[str, Cell]
    """The frame's cells by name: its free variables and the cells it made."""

    def root(self) -> RootTranslator:
        """The translator of the compiled frame itself."""

    def inline_call(self, fn: VariableTracker, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """Trace a call to the user function ``fn`` into the graph; returns its result."""

    def wrap_unguarded(self, value: Any) -> VariableTracker:
        """A tracker for a value reached through something already guarded."""

    def bind_class_attr(self, obj: VariableTracker, cls: type, name: str, attr: Any,
                        attr_source: Source | None) -> VariableTracker:
        """What ``obj.name`` gives for the class attribute ``attr`` (methods bind)."""

    def is_same(self, left: VariableTracker, right: VariableTracker) -> bool:
        """``left is right`` where the answer is certain (guarded for two inputs)."""

    def sandbox_outputs(self, fn: types.FunctionType, args: list[VariableTracker],
                        kwargs: dict[str, VariableTracker]) -> Any:
        """The fake outputs of ``fn(*args, **kwargs)`` traced into a throwaway graph."""

    def mark_mutated(self, value: VariableTracker) -> None:
        """Record that the graph mutates ``value`` in place (for aliasing guards and DCE)."""

    def binary_op(self, op: Any, left: VariableTracker, right: VariableTracker) -> \
            VariableTracker:
        """``op(left, right)`` for an ``operator`` function (``operator.add``, ``operator.iadd``),
        as BINARY_OP runs it."""

    def compare(self, symbol: str, left: VariableTracker, right: VariableTracker) -> \
            VariableTracker:
        """``left <symbol> right`` (``"<"``, ``"=="``...), as COMPARE_OP runs it."""

    def contains(self, container: VariableTracker, item: VariableTracker) -> bool:
        """``item in container``, as CONTAINS_OP runs it."""

    def subscript(self, obj: VariableTracker, index: VariableTracker) -> VariableTracker:
        """``obj[index]``, as BINARY_SUBSCR runs it."""

    def store_subscript(self, obj: VariableTracker, index: VariableTracker,
                        value: VariableTracker) -> None:
        """``obj[index] = value``, as STORE_SUBSCR runs it."""

    def delete_subscript(self, obj: VariableTracker, index: VariableTracker) -> None:
        """``del obj[index]``, as DELETE_SUBSCR runs it."""


class RootTranslator(Translator, Protocol):
    """The translator of the compiled frame (``tx.root()``), which also knows the real call."""

    frame_fn: types.FunctionType
    """The compiled function."""
    frame_arguments: dict[str, Any]
    """The real values of its arguments, by name."""


class Builder(Protocol):
    """What a tracker may ask of ``tx.builder`` (``builder.VariableBuilder``)."""

    tx: Translator
    """The translator the builder wraps values for."""

    def wrap(self, value: Any, source: Source) -> VariableTracker:
        """The tracker for ``value`` found at ``source``; the same source gives the same
        tracker."""

    def value_at(self, source: Source) -> Any:
        """The object the trace wrapped at ``source`` (``MISSING`` if it wrapped none there)."""


class Cell(Protocol):
    """A cell of the frame (``tx.cells[name]``, a ``functions.CellVariable``)."""

    def load(self, tx: Translator, name: str) -> VariableTracker:
        """The cell's contents (``name`` is the variable, for the error when it is empty)."""

