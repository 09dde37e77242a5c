"""Python constants known while tracing: ints, floats, strings, None, dtypes, shapes, slices."""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable
from typing import Any

import torch

from graphlift.constants import is_constant_value
from graphlift.exc import Unsupported
from graphlift.rebuild import Codegen
from graphlift.variables.base import Translator, VariableTracker, raise_real


class ConstantVariable(VariableTracker):
    """A constant; operations on constants are folded while tracing."""

    def __init__(self, value: Any, source=None) -> None:
        super().__init__(source)
        self.value = value

    def describe(self) -> str:
        return repr(self.value)

    def python_type(self) -> type:
        return type(self.value)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.value

    def truthy(self, tx: Translator) -> bool:
        return bool(self.value)

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            attr = getattr(self.value, name)
        except AttributeError as error:
            raise Unsupported(f"{self.value!r} has no attribute {name!r}") from error
        if callable(attr):
            return ConstantMethodVariable(self, name)
        return wrap_constant(attr)

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        if isinstance(self.value, (tuple, str, torch.Size, range, frozenset, bytes)):
            return [wrap_constant(v) for v in self.value]
        return super().unpack(tx)

    def reconstruct(self, codegen: Codegen) -> str:
        value = self.value
        if type(value) in (str, bytes) and len(value) > 1 and not _is_interned(value):
            # The very object, not a literal: a string made in the frame (``a[:3] + b[3:]``)
            # must stay another object than an equal one after a break (``a is c``).
            return codegen.bind(value)
        return codegen.constant(value)


def _is_interned(value: str | bytes) -> bool:
    """Whether a literal of ``value`` in generated code is this very object: the compiler
    interns name-like string constants, so a literal is the one interned copy."""
    if type(value) is not str or not value.isidentifier() or not value.isascii():
        return False
    return compile(repr(value), "<interned>", "eval").co_consts[0] is value


class LazyConstantVariable(ConstantVariable):
    """A scalar read from the inputs whose value guard is installed only when the value is used.

    A value that only moves through the frame (``start = time.perf_counter()`` carried across a
    graph break and never read) is passed on through its source, unguarded, so a new value does
    not recompile. Any read of ``value`` (folding, comparisons, printing) installs the guard first.
    """

    def __init__(self, value: Any, source, guards) -> None:
        VariableTracker.__init__(self, source)
        self._value = value
        self._guards = guards

    @property
    def value(self) -> Any:
        if self._guards is not None:
            self._guards.constant_match(self.source, self._value)
            self._guards = None
        return self._value

    def reconstruct(self, codegen: Codegen) -> str:
        if self._guards is not None:
            # Never read: passed on as it is, read before the ledger writes back (``lst.pop()``
            # carried to a break must not read the list after the pop).
            return codegen.hoist(codegen.source_expr(self.source))
        return super().reconstruct(codegen)


class ConstantMethodVariable(VariableTracker):
    """A method of a constant (``"a,b".split``, ``size.numel``): folded when called."""

    def __init__(self, obj: ConstantVariable, name: str) -> None:
        super().__init__()
        self.obj, self.name = obj, name

    def describe(self) -> str:
        return f"{self.obj.value!r}.{self.name}"

    def call(self, tx, args, kwargs):
        # An iterator argument ("".join(reversed(s))) is consumed, as the real method would.
        values = [[i.as_constant() for i in a.unpack(tx)] if _is_iterator(a) else a.as_constant()
                  for a in args]
        kw = {k: v.as_constant() for k, v in kwargs.items()}
        try:
            result = operator.methodcaller(self.name, *values, **kw)(self.obj.value)
        except Exception as error:
            raise raise_real(error) from error  # "abc".index("z"): the program's ValueError
        return wrap_constant(result)


def _is_iterator(value: VariableTracker) -> bool:
    # Duck-typed: iterator trackers (variables/iterators.py) build on constants, not the reverse.
    return hasattr(value, "next_item")


# How a constant container becomes a tracker of its items (so items stay separate trackers).
# Filled by variables/containers.py, whose trackers hold constants: one row per container type.
CONTAINER_WRAPPERS: dict[type, Callable[[Any], VariableTracker]] = {}


def wrap_constant(value: Any) -> VariableTracker:
    """A tracker for a constant result; tuples become TupleVariables so items stay separate."""
    if type(value) is tuple:
        return CONTAINER_WRAPPERS[tuple](value)
    if is_constant_value(value) or isinstance(value, enum.Enum):  # members are singletons
        return ConstantVariable(value)
    wrap = CONTAINER_WRAPPERS.get(type(value))
    if wrap is not None:
        return wrap(value)
    raise Unsupported(f"value of type {type(value).__name__} is not a constant graphlift can fold")
