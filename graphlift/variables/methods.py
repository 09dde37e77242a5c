"""C methods of builtin types applied to trackers: ``dict.get(d, k)``, ``list.__contains__(l, x)``,
and ``super().__setitem__(k, v)`` inside a dict subclass.

``call_builtin_method(tx, receiver, value, owner, name, args, kwargs)`` runs the method ``name`` of
the builtin type ``owner`` on ``value``, a tracker of a plain builtin value (a DictVariable, a
ListVariable, a constant). ``receiver`` is the object the method was called on: ``value`` itself,
or the user object of a subclass whose builtin part ``value`` is (see
:mod:`graphlift.variables.subclasses`). A few C methods of ``OrderedDict`` call the receiver's own
``__setitem__``; every other method only touches ``value``, with the builtin's semantics.

Special methods are rows of ``SPECIAL_METHODS`` mapping them to the translator's generic
operations (``tx.subscript``, ``tx.contains``...); methods of immutable builtins on constants are
folded by calling the real method; every other name is the tracker's own method.
"""

from __future__ import annotations

import collections
import operator
from collections.abc import Callable

from graphlift.exc import Unsupported
from graphlift.variables.base import Translator, VariableTracker, raise_real
from graphlift.variables.constant import ConstantVariable, wrap_constant
from graphlift.variables.containers import (
    BaseListVariable,
    DictVariable,
    SetVariable,
    mapping_pairs,
)
from graphlift.variables.iterators import IteratorVariable

# Immutable builtins: their methods on constants are folded by calling the real method.
IMMUTABLE_TYPES = frozenset({tuple, frozenset, str, int, float, bool})

# The type family a binary special method accepts as its other operand; any other operand makes
# the C method return NotImplemented or raise, which is not modelled (a graph break).
_OPERAND_FAMILY = {dict: dict, collections.OrderedDict: dict, collections.defaultdict: dict,
                   list: list, tuple: tuple, set: (set, frozenset), frozenset: (set, frozenset)}

NONE = ConstantVariable(None)


def _no_keywords(name: str, kwargs: dict) -> None:
    if kwargs:
        raise raise_real(TypeError(f"{name}() takes no keyword arguments"))


def _arity(name: str, args: list, count: int) -> None:
    if len(args) != count:
        raise raise_real(TypeError(f"expected {count} argument{'s' * (count != 1)}, got "
                                   f"{len(args)}"))


def _getitem(tx, value, owner, key):
    return tx.subscript(value, key)


def _setitem(tx, value, owner, key, item):
    tx.store_subscript(value, key, item)
    return NONE


def _delitem(tx, value, owner, key):
    tx.delete_subscript(value, key)
    return NONE


def _contains(tx, value, owner, item):
    return ConstantVariable(tx.contains(value, item))


def _len(tx, value, owner):
    if isinstance(value, (BaseListVariable, DictVariable, SetVariable)):
        return ConstantVariable(len(value.items))  # without making trackers of the keys
    return ConstantVariable(len(value.unpack(tx)))


def _iter(tx, value, owner):
    return IteratorVariable(value.unpack(tx))


def _in_family(owner: type, other: VariableTracker) -> bool:
    family = _OPERAND_FAMILY.get(owner)
    try:
        other_type = other.python_type()
    except Unsupported:
        return False
    return family is not None and issubclass(other_type, family)


def _builtin_part(other: VariableTracker) -> VariableTracker:
    """The builtin value of an operand: C methods read a subclass object's builtin part, not
    its overridden methods (``list.__eq__(a, Words(...))`` compares the items)."""
    return getattr(other, "storage", other)  # a BuiltinSubclassVariable keeps it as storage


def _comparison(symbol: str) -> Callable:
    """``dict.__eq__(a, b)``: the comparison when ``b`` is of the same family."""
    def row(tx, value, owner, other):
        if not _in_family(owner, other):
            raise Unsupported(f"{owner.__name__}.__{_COMPARE_NAMES[symbol]}__ with a "
                              f"{other!r} operand is not modelled")
        return tx.compare(symbol, value, _builtin_part(other))

    return row


_COMPARE_NAMES = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def _binary(op: Callable, any_iterable: bool = False, int_operand: bool = False) -> Callable:
    """``list.__add__(a, b)``: the operator when ``b`` is of the same family (or an int for
    ``*``, or any iterable for ``list.__iadd__``)."""
    def row(tx, value, owner, other):
        if int_operand:
            accepted = other.is_constant() and isinstance(other.as_constant(), int)
        else:
            accepted = any_iterable or _in_family(owner, other)
        if not accepted:
            raise Unsupported(f"{owner.__name__}.{op.__name__} with a {other!r} operand is "
                              "not modelled")
        return tx.binary_op(op, value, _builtin_part(other))

    return row


def _init(tx, receiver, value, owner, args, kwargs):
    """``dict.__init__(self, ...)``: update; ``list`` and ``set``: clear, then fill."""
    if owner in (dict, collections.OrderedDict, collections.defaultdict):
        if owner is collections.defaultdict:
            factory = args[0] if args else NONE
            value.default_factory = factory
            args = args[1:]
        if len(args) > 1:
            raise raise_real(TypeError(f"{owner.__name__} expected at most 1 argument, got "
                                       f"{len(args)}"))
        return call_builtin_method(tx, receiver, value, owner, "update", args, kwargs)
    if owner in (list, set):
        _no_keywords(owner.__name__, kwargs)
        value.var_getattr(tx, "clear").call(tx, [], {})
        if args:
            fill = "extend" if owner is list else "update"
            value.var_getattr(tx, fill).call(tx, [args[0]], {})
        return NONE
    if owner in IMMUTABLE_TYPES or owner is object:
        return NONE  # their __new__ made the value; __init__ has nothing to do
    raise Unsupported(f"{owner.__name__}.__init__ is not modelled")


# Special methods of builtin types -> row(tx, value, owner, *args). The C method does what the
# operator does on the builtin value itself.
SPECIAL_METHODS: dict[str, Callable] = {
    "__getitem__": _getitem,  # value[key]; a dict subclass's __missing__ is the caller's
    "__setitem__": _setitem,
    "__delitem__": _delitem,
    "__contains__": _contains,
    "__len__": _len,
    "__iter__": _iter,
    "__eq__": _comparison("=="),
    "__ne__": _comparison("!="),
    "__lt__": _comparison("<"),
    "__le__": _comparison("<="),
    "__gt__": _comparison(">"),
    "__ge__": _comparison(">="),
    "__add__": _binary(operator.add),  # list + list, tuple + tuple
    "__iadd__": _binary(operator.iadd, any_iterable=True),  # list += any iterable
    "__mul__": _binary(operator.mul, int_operand=True),
    "__rmul__": _binary(operator.mul, int_operand=True),
    "__imul__": _binary(operator.imul, int_operand=True),
    "__or__": _binary(operator.or_),  # dict | dict, set | set
    "__ior__": _binary(operator.ior),
    "__iand__": _binary(operator.iand),  # set &= set, in place
    "__isub__": _binary(operator.isub),
    "__ixor__": _binary(operator.ixor),
    "__and__": _binary(operator.and_),
    "__sub__": _binary(operator.sub),
    "__xor__": _binary(operator.xor),
}

# Methods of OrderedDict that call the receiver's own __setitem__ (MutableMapping.update does).
_DISPATCHING = {(collections.OrderedDict, "update")}


def call_builtin_method(tx: Translator, receiver: VariableTracker,
                        value: VariableTracker, owner: type, name: str,
                        args: list[VariableTracker],
                        kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``owner.name(receiver, *args, **kwargs)`` where ``value`` is the builtin part of
    ``receiver`` (``receiver`` itself for a plain builtin value)."""
    if name == "__init__":
        return _init(tx, receiver, value, owner, args, kwargs)
    if (owner, name) in _DISPATCHING and receiver is not value:
        return _dispatching_update(tx, receiver, args, kwargs)
    if owner in IMMUTABLE_TYPES and name != "__iter__" and value.is_constant() and \
            all(a.is_constant() for a in [*args, *kwargs.values()]):
        return _fold(owner, name, value, args, kwargs)
    row = SPECIAL_METHODS.get(name)
    if row is not None:
        _no_keywords(name, kwargs)
        _arity(name, args, row.__code__.co_argcount - 3)
        return row(tx, value, owner, *args)
    if name.startswith("__") and name.endswith("__"):
        raise Unsupported(f"{owner.__name__}.{name} is not modelled")
    return value.var_getattr(tx, name).call(tx, args, kwargs)


def _fold(owner: type, name: str, value: VariableTracker, args, kwargs) -> VariableTracker:
    """A method of an immutable builtin on constants: called for real."""
    method = getattr(owner, name)
    try:
        result = method(value.as_constant(), *(a.as_constant() for a in args),
                        **{k: v.as_constant() for k, v in kwargs.items()})
    except Exception as error:
        raise raise_real(error) from error
    return wrap_constant(result)


def _dispatching_update(tx, receiver, args, kwargs) -> VariableTracker:
    """``OrderedDict.update`` on a subclass: every item goes through ``receiver[key] = value``."""
    if len(args) > 1:
        raise raise_real(TypeError(f"update expected at most 1 argument, got {len(args)}"))
    pairs: list[tuple[VariableTracker, VariableTracker]] = []
    if args:
        pairs = mapping_pairs(tx, args[0])
    pairs += [(ConstantVariable(k), v) for k, v in kwargs.items()]
    for key, item in pairs:
        tx.store_subscript(receiver, key, item)
    return NONE


def dict_fromkeys(tx: Translator, make: Callable[[], VariableTracker],
                  args: list[VariableTracker], kwargs: dict) -> VariableTracker:
    """``cls.fromkeys(iterable, value=None)``: a new mapping, each key stored in turn."""
    _no_keywords("fromkeys", kwargs)
    if not 1 <= len(args) <= 2:
        raise raise_real(TypeError(f"fromkeys expected at least 1 argument, got {len(args)}"
                                   if not args else
                                   f"fromkeys expected at most 2 arguments, got {len(args)}"))
    item = args[1] if len(args) > 1 else NONE
    result = make()
    for key in args[0].unpack(tx):
        tx.store_subscript(result, key, item)
    return result


