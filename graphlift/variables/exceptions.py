"""Exception objects raised and caught inside a traced frame (raising: ``base.TracedException``)."""

from __future__ import annotations

import types

from graphlift.exc import Unsupported
from graphlift.variables.base import TracedException, VariableTracker
from graphlift.variables.constant import ConstantVariable, wrap_constant
from graphlift.variables.containers import TupleVariable


class ExceptionVariable(VariableTracker):
    """An exception object created while tracing (``ValueError("bad")``)."""

    def __init__(self, cls: type, args: list[VariableTracker]) -> None:
        super().__init__()
        self.cls = cls
        self.args = list(args)
        self.cause: VariableTracker | None = None  # raise ... from cause
        self.context: VariableTracker | None = None  # the exception being handled when raised
        self.suppress_context = False  # raise ... from (anything, None included)

    def describe(self) -> str:
        return self.cls.__name__

    def python_type(self) -> type:
        return self.cls

    def var_getattr(self, tx, name):
        if name == "args":
            return TupleVariable(self.args)
        if name in ("__cause__", "__context__"):
            value = self.cause if name == "__cause__" else self.context
            return value if value is not None else ConstantVariable(None)
        if name == "__suppress_context__":
            return ConstantVariable(self.suppress_context)
        if name == "with_traceback":
            return _WithTracebackVariable(self)
        raise Unsupported(f"attribute {name!r} of a traced exception")

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        # contextlib's __exit__ resets the traceback it was given: traced exceptions have none
        # known (one that leaves the frame makes the frame run eagerly, with the real
        # traceback); its own traceback given back changes nothing.
        own = isinstance(value, TracebackVariable) and value.exception is self
        if name != "__traceback__" or not (own or (value.is_constant() and
                                                   value.as_constant() is None)):
            raise Unsupported(f"assigning {name!r} of a traced exception")

    @classmethod
    def from_real(cls, error: BaseException) -> ExceptionVariable:
        """The tracker of an exception that folding a constant operation raised for real."""
        try:
            args = [wrap_constant(a) for a in error.args]
        except Unsupported:
            args = []
        return cls(type(error), args)

    def as_real(self) -> BaseException:
        """The exception eager Python would raise, for messages."""
        try:
            return self.cls(*(a.as_constant() for a in self.args))
        except Unsupported:
            return self.cls()


class TracebackVariable(VariableTracker):
    """The traceback of an exception raised while tracing, as a ``with`` block's ``__exit__``
    gets it: no real traceback exists, so it is only known not to be None (``tb is None``),
    and can be passed on and given back to its exception; any other use is a break."""

    def __init__(self, exception: VariableTracker) -> None:
        super().__init__()
        self.exception = exception

    def describe(self) -> str:
        return f"traceback of {self.exception.describe()}"

    def python_type(self) -> type:
        return types.TracebackType


class _WithTracebackVariable(VariableTracker):
    """``exc.with_traceback`` of a traced exception: with None (unittest's ``assertRaises``
    stores the exception so) it returns the exception itself, whose traceback is None."""

    def __init__(self, exception: ExceptionVariable) -> None:
        super().__init__()
        self.exception = exception

    def call(self, tx, args, kwargs):
        if len(args) != 1 or kwargs or not (args[0].is_constant() and
                                            args[0].as_constant() is None):
            raise Unsupported("with_traceback() of a traced exception, other than with None")
        return self.exception


def set_cause(exception: ExceptionVariable, cause: VariableTracker) -> None:
    """``raise exception from cause``, as CPython sets it: a class is instantiated, None
    only suppresses the context, anything else is eager's TypeError."""
    if cause.is_constant() and cause.as_constant() is None:
        exception.cause = None
    elif isinstance(cause, ExceptionVariable):
        exception.cause = cause
    elif cause.is_constant() and isinstance(cause.as_constant(), type) and \
            issubclass(cause.as_constant(), BaseException):
        exception.cause = ExceptionVariable(cause.as_constant(), [])
    elif cause.is_constant():  # raise ... from 5
        raise TracedException(ExceptionVariable(
            TypeError, [ConstantVariable("exception causes must derive from BaseException")]))
    else:
        raise Unsupported(f"raise ... from {cause!r}")
    exception.suppress_context = True


def tracker_of(error: TracedException) -> ExceptionVariable:
    """The tracker of a traced exception (one raised by folding gets it here, once)."""
    if error.exception is None:
        error.exception = ExceptionVariable.from_real(error.real)
    return error.exception


def stop_iteration_error(stop: ExceptionVariable) -> ExceptionVariable:
    """What a StopIteration leaving a generator's frame becomes (PEP 479)."""
    error = ExceptionVariable(RuntimeError, [ConstantVariable("generator raised StopIteration")])
    error.cause = error.context = stop
    return error
