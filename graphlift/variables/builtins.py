"""Python builtins while tracing: a table of handlers, one row per builtin, and constant folding.

A builtin whose arguments are all constants and that has no side effects is folded by calling it
for real (``PURE_BUILTINS``). The handlers cover the cases where an argument is symbolic.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from graphlift.exc import Unsupported
from graphlift.variables.base import VariableTracker
from graphlift.variables.constant import ConstantVariable, wrap_constant
from graphlift.variables.containers import ListVariable, TupleVariable
from graphlift.variables.tensor import TensorVariable, call_torch

if TYPE_CHECKING:
    from graphlift.translator import InstructionTranslator

# Builtins that may be called for real when every argument is a constant.
PURE_BUILTINS = frozenset({
    abs, all, any, bool, callable, chr, divmod, float, format, hash, hex, int, len, max, min,
    oct, ord, pow, repr, round, sorted, str, sum, tuple, range, slice, complex, bin, isinstance,
    issubclass, type, list, reversed, zip, enumerate,
})


def _len(tx, args, kwargs):
    (obj,) = args
    if isinstance(obj, TensorVariable):
        if obj.fake.dim() == 0:
            raise Unsupported("len() of a 0-d tensor", break_type="user_exception")
        return ConstantVariable(obj.fake.shape[0])
    return ConstantVariable(len(obj.unpack(tx)))


def _isinstance(tx, args, kwargs):
    obj, classes = args
    return ConstantVariable(isinstance_of(obj.python_type(), classes.as_constant()))


def isinstance_of(cls: type, classes: Any) -> bool:
    """isinstance() by type: a fake tensor's class never leaks into user checks."""
    return issubclass(cls, classes)


def _type(tx, args, kwargs):
    from graphlift.variables.objects import ClassVariable

    (obj,) = args
    return ClassVariable(obj.python_type())


def _tensor_math(name: str) -> Callable:
    """abs(x), pow(x, y), round(x): the tensor dunder that the builtin would call."""
    op = {"abs": operator.abs, "pow": operator.pow}[name]

    def handler(tx, args, kwargs):
        if any(isinstance(a, TensorVariable) for a in args):
            return call_torch(tx, "call_function", op, args, kwargs)
        return fold(getattr(builtins, name), args, kwargs)

    return handler


def _sequence(container: type) -> Callable:
    """tuple(...) / list(...) of something the translator can unpack."""
    def handler(tx, args, kwargs):
        items = args[0].unpack(tx) if args else []
        return TupleVariable(items) if container is tuple else ListVariable(items)

    return handler


def _getattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_constant()
    try:
        return obj.var_getattr(tx, name)
    except Unsupported:
        if len(args) == 3 and obj.is_constant() and not hasattr(obj.as_constant(), name):
            return args[2]
        raise


def _hasattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_constant()
    if isinstance(obj, TensorVariable):
        return ConstantVariable(hasattr(torch.Tensor, name) or name in ("shape", "dtype"))
    if obj.is_constant():
        return ConstantVariable(hasattr(obj.as_constant(), name))
    raise Unsupported(f"hasattr on {obj!r}")


# builtin -> handler(tx, args, kwargs). One row per builtin with symbolic arguments.
BUILTIN_HANDLERS: dict[Any, Callable] = {
    len: _len,  # tensors: size of dim 0; containers: number of items
    isinstance: _isinstance,  # decided from the tracked python type
    type: _type,  # the tracked python type (Tensor, not FakeTensor)
    abs: _tensor_math("abs"),  # abs(tensor) is tensor.__abs__
    pow: _tensor_math("pow"),  # pow(tensor, n) is tensor ** n
    tuple: _sequence(tuple),  # materialise anything unpackable
    list: _sequence(list),
    getattr: _getattr,  # getattr(obj, "name"[, default])
    hasattr: _hasattr,
}


def fold(fn: Callable, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> \
        VariableTracker:
    """Call a pure builtin on constants for real and wrap its result."""
    if not all(a.is_constant() for a in args) or not all(v.is_constant() for v in kwargs.values()):
        raise Unsupported(f"builtin {fn.__name__}() with non-constant arguments")
    result = fn(*(a.as_constant() for a in args), **{k: v.as_constant() for k, v in kwargs.items()})
    if isinstance(result, (zip, enumerate, reversed, type(iter([])))):
        result = tuple(result)
    return wrap_constant(result)


class BuiltinVariable(VariableTracker):
    """A Python builtin function or type."""

    def __init__(self, fn: Any, source=None) -> None:
        super().__init__(source)
        self.fn = fn

    def describe(self) -> str:
        return self.fn.__name__

    def python_type(self) -> type:
        return type(self.fn)

    def is_constant(self) -> bool:
        # Builtin types (int, float, tuple) are valid isinstance() arguments.
        return isinstance(self.fn, type)

    def as_constant(self) -> Any:
        if isinstance(self.fn, type):
            return self.fn
        return super().as_constant()

    def call(self, tx: InstructionTranslator, args, kwargs):
        handler = BUILTIN_HANDLERS.get(self.fn)
        if handler is not None:
            try:
                return handler(tx, args, kwargs)
            except (TypeError, ValueError) as error:
                raise Unsupported(f"{self.fn.__name__}() raised {type(error).__name__}: {error}",
                                  break_type="user_exception") from error
        if self.fn in PURE_BUILTINS:
            return fold(self.fn, args, kwargs)
        raise Unsupported(f"builtin {self.fn.__name__}() is not supported while tracing",
                          break_type="skipped_function")

    def reconstruct(self, codegen) -> str:
        return codegen.constant(self.fn)
