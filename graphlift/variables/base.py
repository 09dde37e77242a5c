"""VariableTracker: the symbolic value the translator pushes on its stack instead of a real one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from graphlift.exc import Unsupported
from graphlift.sources import Source

if TYPE_CHECKING:
    from graphlift.codegen import OutputCodegen
    from graphlift.translator import InstructionTranslator


class VariableTracker:
    """Base class. ``source`` is set when the value was read from the frame's inputs.

    Subclasses override the operations they support; the defaults raise :class:`Unsupported`,
    which makes the frame fall back to eager with that reason.
    """

    # True on trackers of functions, methods and classes: ``callable()`` of them is True.
    callable_kind = False

    def __init__(self, source: Source | None = None) -> None:
        self.source = source

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

    def truthy(self, tx: InstructionTranslator) -> bool:
        """The value of ``bool(v)`` while tracing, for branches."""
        raise Unsupported(f"cannot branch on {self!r} while tracing",
                          break_type="data_dependent_branch")

    # -- operations ----------------------------------------------------------------------------
    def var_getattr(self, tx: InstructionTranslator, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of {self!r}")

    def call(self, tx: InstructionTranslator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        raise Unsupported(f"calling {self!r}")

    def call_method(self, tx: InstructionTranslator, name: str, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return self.var_getattr(tx, name).call(tx, args, kwargs)

    def unpack(self, tx: InstructionTranslator) -> list[VariableTracker]:
        """The items, for unpacking, ``*args`` and iteration."""
        raise Unsupported(f"cannot iterate over or unpack {self!r}")

    def iterate(self, tx: InstructionTranslator) -> Iterator[VariableTracker]:
        """The items one at a time, as an iterating C function pulls them (``list.extend``):
        an iterator makes each item only when the consumer asks for it."""
        return iter(self.unpack(tx))

    def mapping_items(self, tx: InstructionTranslator) -> dict[Any, VariableTracker] | None:
        """The items that CPython's dict merge reads directly (``dict.update(v)``, ``{**v}``):
        those of a dict, or of a dict subclass that keeps dict's ``__iter__``; else None."""
        return None

    # -- leaving the graph ---------------------------------------------------------------------
    def reconstruct(self, codegen: OutputCodegen) -> str:
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
