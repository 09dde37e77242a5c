"""Objects of user subclasses of builtins: ``class Registry(dict)``, transformers'
``ModelOutput(OrderedDict)`` dataclasses, ``class Path(list)``, ``class Tag(str)``.

Such an object is a user object (instance attributes, Python methods, ``super()``, a
``__setattr__`` of its own) that also *is* a value of its builtin base. Its tracker keeps the two
parts apart: ``attrs`` (or the real object, for an input) holds the instance dict, and ``storage``
a tracker of the builtin value (a DictVariable, OrderedDictVariable, ListVariable, TupleVariable,
SetVariable or a constant). Python methods of the class are traced as for any user object; the
C methods of the builtin (``super().get``, ``dict.__setitem__(self, k, v)``, a ``__len__`` the
class does not override) apply to the storage with the builtin's semantics
(:mod:`graphlift.variables.methods`), so an override never runs where CPython would not run it.

Objects made in the frame are rebuilt after the graph through the builtin's own ``__new__`` and
methods (:func:`rebuild_subclass`), never the class's ``__init__``. Objects from the inputs are
guarded by type and, for dicts, lists and tuples, by their keys or length read through the
builtin (``list(dict.keys(x))``); their items are read through ``dict.__getitem__``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from graphlift.exc import Unsupported
from graphlift.rebuild import Codegen
from graphlift.sources import AttrSource, BaseItemSource, Source
from graphlift.variables.base import MISSING, Builder, VariableTracker, lookup_class_attr
from graphlift.variables.builtins import BuiltinVariable
from graphlift.variables.collections import DefaultDictVariable, OrderedDictVariable
from graphlift.variables.constant import ConstantVariable, is_constant_value, wrap_constant
from graphlift.variables.containers import DictVariable, ListVariable, SetVariable, TupleVariable
from graphlift.variables.methods import call_builtin_method
from graphlift.variables.objects import (
    BUILTIN_SUBCLASS_NEW,
    UserObjectVariable,
    builtin_base,
    is_user_class,
)

DICT_BASES = (dict, collections.OrderedDict, collections.defaultdict)
IMMUTABLE_BASES = (tuple, frozenset, str, int, float)


class BuiltinSubclassVariable(UserObjectVariable):
    """An object of a user subclass of a builtin: a user object plus its builtin part."""

    def __init__(self, value: Any, storage: VariableTracker, source: Source | None = None,
                 cls: type | None = None) -> None:
        super().__init__(value, source, cls)
        self.base = builtin_base(self.cls)
        self.storage = storage

    def describe(self) -> str:
        return f"{self.cls.__qualname__}({self.storage.describe()})"

    def call_builtin_method(self, tx, owner, name, args, kwargs):
        if owner is object:
            return super().call_builtin_method(tx, owner, name, args, kwargs)
        if name == "__getitem__" and self.base in DICT_BASES and len(args) == 1:
            missing = self._missing(tx, args[0])
            if missing is not None:
                return missing
        result = call_builtin_method(tx, self, self.storage, owner, name, args, kwargs)
        return self if result is self.storage else result  # ``__ior__`` returns the object

    def _missing(self, tx, key: VariableTracker) -> VariableTracker | None:
        """``dict.__getitem__`` of a subclass calls the class's ``__missing__`` for a key that
        is absent (defaultdict's own ``__missing__`` is the storage's)."""
        hook = lookup_class_attr(self.cls, "__missing__")
        if hook is MISSING or hook is collections.defaultdict.__missing__ or \
                key.as_constant() in self.storage.items:
            return None
        return self.special_method(tx, "__missing__").call(tx, [key], {})

    def generic_getattr(self, tx, name):
        if name == "default_factory" and self.base is collections.defaultdict and \
                name not in self.attrs:
            return self.storage.default_factory
        return super().generic_getattr(tx, name)

    def mapping_items(self, tx):
        # CPython's dict merge reads a dict subclass directly while it keeps dict's __iter__.
        if self.base is not collections.OrderedDict and \
                lookup_class_attr(self.cls, "__iter__") is dict.__iter__:
            return self.storage.items
        return None

    def reconstruct(self, codegen: Codegen) -> str:
        if not self.is_new:
            return super().reconstruct(codegen)
        return codegen.remember(self, self._rebuild_subclass)

    def _rebuild_subclass(self, codegen: Codegen) -> str:
        if isinstance(self.storage, ConstantVariable) or isinstance(self.storage, SetVariable):
            value = self.storage.reconstruct(codegen)
        else:
            value = self.storage.reconstruct_literal(codegen)
        attrs = ", ".join(f"{name!r}: {value.reconstruct(codegen)}"
                          for name, value in self.attrs.items())
        return (f"{codegen.constant(rebuild_subclass)}({codegen.constant(self.cls)}, "
                f"{codegen.constant(self.base)}, {value}, {{{attrs}}})")


def rebuild_subclass(cls: type, base: type, value: Any, attrs: dict[str, Any]) -> Any:
    """Recreate an object of a builtin's subclass made inside a compiled frame, after the graph
    ran: the builtin's ``__new__`` and methods only, none of the subclass's overrides."""
    if base in IMMUTABLE_BASES:
        obj = base.__new__(cls, value)
    else:
        obj = base.__new__(cls)
        if base is collections.defaultdict:
            collections.defaultdict.__init__(obj, value.default_factory)
        if base is list:
            list.extend(obj, value)
        elif base is set:
            set.update(obj, value)
        else:
            for key, item in dict.items(value):
                base.__setitem__(obj, key, item)  # OrderedDict's keeps the order
    for name, item in attrs.items():
        object.__setattr__(obj, name, item)
    return obj


# -- construction: base.__new__(cls, *args) (rows of objects.BUILTIN_SUBCLASS_NEW) -------------
def _empty(make: Callable[[], VariableTracker]) -> Callable:
    """A mutable builtin: ``__new__`` ignores its arguments and ``__init__`` fills the value."""
    def new(tx, cls, args, kwargs):
        return BuiltinSubclassVariable(None, make(), cls=cls)

    return new


def _immutable(base: type) -> Callable:
    """An immutable builtin: ``__new__`` makes the value from the arguments."""
    def new(tx, cls, args, kwargs):
        storage = BuiltinVariable(base).call(tx, list(args), dict(kwargs))
        return BuiltinSubclassVariable(None, storage, cls=cls)

    return new


BUILTIN_SUBCLASS_NEW.update({
    dict: _empty(lambda: DictVariable({})),
    collections.OrderedDict: _empty(lambda: OrderedDictVariable({})),
    collections.defaultdict: _empty(lambda: DefaultDictVariable({}, ConstantVariable(None))),
    list: _empty(lambda: ListVariable([])),
    set: _empty(lambda: SetVariable([])),
    tuple: _immutable(tuple),
    frozenset: _immutable(frozenset),
    str: _immutable(str),
    int: _immutable(int),
    float: _immutable(float),
})


# -- objects from the inputs (a row of the builder's WRAP_ROWS) -------------------------------
def is_builtin_subclass_object(value: Any) -> bool:
    """An object of a user class that subclasses dict, list, tuple... (see the module doc)."""
    cls = type(value)
    return builtin_base(cls) is not None and is_user_class(cls) and \
        cls.__module__ != "collections"


def wrap_builtin_subclass(builder: Builder, value: Any,
                          source: Source) -> VariableTracker:
    """An input object of a builtin's subclass: guarded by type, its builtin part read through
    the builtin's methods (keys or length guarded), its attributes read through the object."""
    guards = builder.tx.guards
    guards.type_match(source, value)
    base = builtin_base(type(value))
    if base in DICT_BASES:
        keys = list(base.keys(value))
        if not all(is_constant_value(k) for k in keys):
            raise Unsupported(f"an input {type(value).__qualname__} whose keys are not "
                              "constants")
        guards.dict_keys(source, keys, through=base)
        items = {k: builder.wrap(dict.__getitem__(value, k), BaseItemSource(source, k, "dict"))
                 for k in keys}
        if base is collections.OrderedDict:
            storage = OrderedDictVariable(items, source)
        elif base is collections.defaultdict:
            factory = builder.wrap(collections.defaultdict.default_factory.__get__(value),
                                   AttrSource(source, "default_factory"))
            storage = DefaultDictVariable(items, factory, source)
        else:
            storage = DictVariable(items, source)
    elif base in (list, tuple):
        guards.length_check(source, base.__len__(value), through=base)
        items = [builder.wrap(base.__getitem__(value, i), BaseItemSource(source, i,
                                                                          base.__name__))
                 for i in range(base.__len__(value))]
        storage = ListVariable(items, source) if base is list else TupleVariable(items, source)
    elif base in (set, frozenset):
        items = list(base.__iter__(value))
        if not all(is_constant_value(v) for v in items):
            raise Unsupported(f"an input {type(value).__qualname__} whose items are not "
                              "constants")
        guards.set_items(source, items, through=base)
        storage = SetVariable([wrap_constant(v) for v in items], frozen=base is frozenset,
                              source=source)
    else:
        raise Unsupported(f"an input object of {type(value).__qualname__}, a subclass of "
                          f"{base.__name__}, is not traced")
    return BuiltinSubclassVariable(value, storage, source)
