"""Tuples, lists and dicts whose items are trackers.

Containers built inside the frame are modelled here and mutated freely while tracing (nobody
outside the frame can see them yet). Containers read from the frame's inputs are not mutated:
that needs the side-effect ledger, so such a mutation is reported as unsupported.
"""

from __future__ import annotations

import enum
import inspect
import operator
import types
from collections.abc import Iterable
from typing import Any

from graphlift.exc import Unsupported
from graphlift.rebuild import Codegen
from graphlift.variables.base import (
    TracedException,
    Translator,
    VariableTracker,
    lookup_class_attr,
    raise_real,
)
from graphlift.variables.constant import (
    CONTAINER_WRAPPERS,
    ConstantVariable,
    is_constant_value,
    wrap_constant,
)


class BaseListVariable(VariableTracker):
    """Shared behaviour of tuples and lists."""

    container: type = list

    def __init__(self, items: list[VariableTracker], source=None) -> None:
        super().__init__(source)
        self.items = list(items)

    def describe(self) -> str:
        return f"{len(self.items)} items"

    def python_container(self, values: Iterable[Any]) -> Any:
        return self.container(values)

    def python_type(self) -> type:
        return self.container

    def is_constant(self) -> bool:
        return all(i.is_constant() for i in self.items)

    def as_constant(self) -> Any:
        return self.python_container(i.as_constant() for i in self.items)

    def truthy(self, tx: Translator) -> bool:
        return bool(self.items)

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        return list(self.items)

    def getitem(self, tx: Translator, index: VariableTracker) -> VariableTracker:
        key = index.as_constant()
        if isinstance(key, slice):
            try:
                items = self.items[key]
            except (ValueError, TypeError) as error:  # a zero step, a str bound
                raise raise_real(error) from error
            return type(self)(items) if type(self) is not TupleVariable else TupleVariable(items)
        try:
            return self.items[key]
        except (IndexError, TypeError):
            # CPython's error for this container's type ("tuple index out of range"), raised
            # in the frame (catchable there, like eager's)
            real = (tuple if isinstance(self, TupleVariable) else list)(range(len(self.items)))
            try:
                real[key]
            except (IndexError, TypeError) as error:
                raise raise_real(error) from error
            raise

    def reconstruct(self, codegen: Codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)  # mutations are written back by the ledger
        return codegen.remember(self, self.reconstruct_literal)

    def reconstruct_literal(self, codegen: Codegen) -> str:
        """A new container with the tracked items."""
        return self._literal(", ".join(i.reconstruct(codegen) for i in self.items))

    mutated = False

    def _literal(self, body: str) -> str:
        return f"[{body}]"


class TupleVariable(BaseListVariable):
    container = tuple

    def __init__(self, items, source=None, tuple_class: type = tuple) -> None:
        super().__init__(items, source)
        self.tuple_class = tuple_class

    def python_type(self) -> type:
        return self.tuple_class

    def python_container(self, values: Iterable[Any]) -> Any:
        values = tuple(values)
        if self.tuple_class is tuple:
            return values
        return self.tuple_class(values) if _is_structseq(self.tuple_class) \
            else self.tuple_class(*values)

    def var_getattr(self, tx, name):
        fields = getattr(self.tuple_class, "_fields", None) or _structseq_fields(self.tuple_class)
        if fields and name in fields:
            return self.items[fields.index(name)]
        if name == "_fields" and fields:
            return wrap_constant(tuple(fields))
        if fields:
            attr = lookup_class_attr(self.tuple_class, name)
            if isinstance(attr, property):  # a property of a typing.NamedTuple
                return tx.bind_class_attr(self, self.tuple_class, name, attr, None)
        return TupleMethodVariable(self, name)

    def _literal(self, body: str) -> str:
        if self.tuple_class is tuple:
            return f"({body},)" if self.items else "()"
        raise NotImplementedError  # reconstruct() handles named tuples with the codegen

    def reconstruct(self, codegen: Codegen) -> str:
        if self.tuple_class is tuple or self.source is not None:
            return super().reconstruct(codegen)
        body = ", ".join(i.reconstruct(codegen) for i in self.items)
        cls = codegen.constant(self.tuple_class)
        if _is_structseq(self.tuple_class):
            return f"{cls}(({body},))"
        return f"{cls}({body})"


class ListVariable(BaseListVariable):
    container = list

    def var_getattr(self, tx, name):
        return ListMethodVariable(self, name)

    def check_mutable(self, tx) -> None:
        """About to mutate: an input list is recorded in the side-effect ledger."""
        if self.source is not None:
            tx.output.side_effects.mutate_container(self)
        else:
            tx.output.side_effects.write_local(self)
        self.mutated = True


class MethodNames:
    """``__name__`` and ``__qualname__`` of a bound method of a builtin container (``[].append``):
    unittest's ``assertRaises(E, f, ...)`` reads ``f.__name__``. Mixed into the method trackers
    below, before VariableTracker."""

    def _owner(self) -> type:
        return next(base for base in self.obj.python_type().__mro__
                    if base.__module__ == "builtins")  # a namedtuple's methods are tuple's

    def var_getattr(self, tx, name):
        owner = self._owner()
        if name in ("__name__", "__qualname__") and hasattr(owner, self.name):
            return ConstantVariable(getattr(getattr(owner, self.name), name))
        return super().var_getattr(tx, name)

    def check_arguments(self, args: list, kwargs: dict) -> None:
        """Raise, in the program, CPython's TypeError for a call with the wrong arguments
        (``d.get()``): the real method refuses placeholders before looking at them."""
        method = getattr(self._owner(), self.name, None)
        if method is None:
            return  # no such method: the call itself refuses
        try:
            inspect.signature(method).bind(None, *args, **kwargs)
            return
        except (TypeError, ValueError):  # refused, or no signature (dict.pop): the real call says
            pass
        try:
            method(self._owner()(), *[_Argument()] * len(args),
                   **{key: _Argument() for key in kwargs})
        except TypeError as error:
            if _Argument.__name__ not in str(error):  # refused by count, not for its argument
                raise raise_real(error) from None
        except Exception:
            pass


class _Argument:
    """What check_arguments passes for each argument, on a new empty container."""


class TupleMethodVariable(MethodNames, VariableTracker):
    def __init__(self, obj: TupleVariable, name: str) -> None:
        super().__init__()
        self.obj, self.name = obj, name

    def call(self, tx, args, kwargs):
        self.check_arguments(args, kwargs)
        obj = self.obj
        if self.name in ("count", "index") and obj.is_constant():
            return _fold_method(obj.as_constant(), self.name, args)
        fields = getattr(obj.tuple_class, "_fields", None)
        if fields and self.name == "_replace":
            values = dict(zip(fields, obj.items))
            values.update(kwargs)
            return TupleVariable([values[f] for f in fields], tuple_class=obj.tuple_class)
        if fields and self.name == "_asdict":
            return DictVariable(dict(zip(fields, obj.items)))
        if fields:
            attr = lookup_class_attr(obj.tuple_class, self.name)
            if isinstance(attr, types.FunctionType):
                return tx.bind_class_attr(obj, obj.tuple_class, self.name, attr, None).call(
                    tx, args, kwargs)
        if self.name in _TUPLE_DUNDERS:  # t.__getitem__(i) is t[i]
            return _LIST_DUNDERS[self.name](tx, obj, *args)
        raise Unsupported(f"tuple.{self.name}")


class ListMethodVariable(MethodNames, VariableTracker):
    """Methods of a list built in the frame, applied to the tracked items."""

    def __init__(self, obj: ListVariable, name: str) -> None:
        super().__init__()
        self.obj, self.name = obj, name

    def describe(self) -> str:
        return f"list.{self.name}"

    def call(self, tx, args, kwargs):
        self.check_arguments(args, kwargs)
        as_syntax = _LIST_DUNDERS.get(self.name)
        if as_syntax is not None:  # u.__iadd__(v) is u += v
            return as_syntax(tx, self.obj, *args)
        items = self.obj.items
        if self.name in ("append", "extend", "insert", "pop", "clear", "reverse", "sort",
                         "remove"):
            self.obj.check_mutable(tx)
        if self.name == "append":
            items.append(args[0])
        elif self.name == "extend":
            items.extend(args[0].iterate(tx))  # item by item: a generator sees the list grow
        elif self.name == "insert":
            _fold_method(items, "insert", args[:1], args[1])
        elif self.name == "pop":
            return _fold_method(items, "pop", args, wrap=False)
        elif self.name == "clear":
            items.clear()
        elif self.name == "reverse":
            items.reverse()
        elif self.name == "copy":
            return ListVariable(list(items))
        elif self.name == "sort":
            items[:] = sort_trackers(tx, items, kwargs, in_place=True)
        elif self.name == "remove":
            target = args[0].as_constant()
            for i, item in enumerate(items):
                if item.is_constant() and item.as_constant() == target:
                    del items[i]
                    break
            else:
                raise raise_real(ValueError("list.remove(x): x not in list"))
        elif self.name in ("index", "count") and all(i.is_constant() for i in items):
            return _fold_method(self.obj.as_constant(), self.name, args)
        else:
            raise Unsupported(f"list.{self.name}")
        return ConstantVariable(None)


def _list_store(tx, obj, index, value) -> VariableTracker:
    tx.store_subscript(obj, index, value)
    return ConstantVariable(None)


def _list_delete(tx, obj, index) -> VariableTracker:
    tx.delete_subscript(obj, index)
    return ConstantVariable(None)


# A list's special methods called by name (``assertRaises(TypeError, u.__iadd__, None)``): what
# the matching syntax does.
_LIST_DUNDERS: dict[str, Any] = {
    "__iadd__": lambda tx, obj, other: tx.binary_op(operator.iadd, obj, other),  # obj += other
    "__imul__": lambda tx, obj, other: tx.binary_op(operator.imul, obj, other),  # obj *= n
    "__add__": lambda tx, obj, other: tx.binary_op(operator.add, obj, other),  # obj + other
    "__mul__": lambda tx, obj, other: tx.binary_op(operator.mul, obj, other),  # obj * n
    "__getitem__": lambda tx, obj, index: tx.subscript(obj, index),  # obj[index]
    "__setitem__": _list_store,  # obj[index] = value
    "__delitem__": _list_delete,  # del obj[index]
    "__contains__": lambda tx, obj, item: ConstantVariable(tx.contains(obj, item)),
}


# A tuple's special methods called by name: those of the list above that do not write.
_TUPLE_DUNDERS = frozenset({"__add__", "__mul__", "__getitem__", "__contains__"})


def _fold_method(obj: Any, name: str, args: list[VariableTracker], *extra: VariableTracker,
                 wrap: bool = True) -> VariableTracker | Any:
    """``obj.name(*constant args, *extra)`` for real; what it raises (``[1].index(5)``: a
    ValueError) is the program's own exception, raised inside the trace as eager would."""
    try:
        result = getattr(obj, name)(*(a.as_constant() for a in args), *extra)
    except (ValueError, IndexError, TypeError) as error:
        raise raise_real(error) from error
    return wrap_constant(result) if wrap else result


class SetVariable(VariableTracker):
    """A set built in the frame, of constants (tensors hash by identity: not modelled)."""

    def __init__(self, items: list[VariableTracker], frozen: bool = False,
                 source=None) -> None:
        super().__init__(source)
        self.frozen = frozen
        self.items: dict[Any, VariableTracker] = {}
        for item in items:
            self.add(item)

    def add(self, item: VariableTracker) -> None:
        if not item.is_constant():
            raise Unsupported(f"set of {item!r}: only constants are modelled in sets")
        self.items.setdefault(item.as_constant(), item)

    def describe(self) -> str:
        return f"{len(self.items)} items"

    def python_type(self) -> type:
        return frozenset if self.frozen else set

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.python_type()(self.items)

    def truthy(self, tx) -> bool:
        return bool(self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return [wrap_constant(v) for v in set(self.items)]

    def var_getattr(self, tx, name):
        return SetMethodVariable(self, name)

    mutated = False

    def check_mutable(self, tx) -> None:
        """About to mutate: an input set is recorded in the side-effect ledger."""
        if self.source is not None:
            tx.output.side_effects.mutate_container(self)
        else:
            tx.output.side_effects.write_local(self)
        self.mutated = True

    def reconstruct(self, codegen: Codegen) -> str:
        if self.frozen:  # one object per tracker: ``frozenset(fs) is fs`` holds after a break
            return codegen.remember(self, lambda codegen: codegen.constant(
                frozenset(self.items)))
        if self.source is not None:
            return codegen.source_expr(self.source)  # mutations are written back by the ledger
        return codegen.remember(self, self.reconstruct_literal)

    def reconstruct_literal(self, codegen: Codegen) -> str:
        """A new set with the tracked items."""
        return f"set({codegen.constant(tuple(self.items))})"


class SetMethodVariable(MethodNames, VariableTracker):
    """Set methods: mutations on the tracked set, queries folded on its constants."""

    # Every method that changes the set in place (the in-place operators return the set itself).
    MUTATING = frozenset({"add", "update", "discard", "remove", "clear", "pop",
                          "intersection_update", "difference_update",
                          "symmetric_difference_update", "__ior__", "__iand__", "__isub__",
                          "__ixor__"})

    def __init__(self, obj: SetVariable, name: str) -> None:
        super().__init__()
        self.obj, self.name = obj, name

    # The methods that consume each argument whole, in order (isdisjoint and issuperset may stop
    # early in an iterator): a generator's items are drawn in the trace.
    WHOLE_ARGUMENTS = frozenset({"union", "intersection", "difference", "symmetric_difference",
                                 "issubset", "update", "intersection_update",
                                 "difference_update", "symmetric_difference_update"})

    def call(self, tx, args, kwargs):
        self.check_arguments(args, kwargs)
        values = self._arguments(tx, args)
        real = self.obj.python_type()(self.obj.items)
        try:
            result = getattr(real, self.name)(*values)
        except (AttributeError, KeyError, TypeError) as error:
            raise raise_real(error) from error
        if self.name in self.MUTATING and not self.obj.frozen:
            self.obj.check_mutable(tx)
            self.obj.items = {v: wrap_constant(v) for v in real}
        if result is real:  # s.__ior__(t) is s
            return self.obj
        if result is NotImplemented:
            return ConstantVariable(NotImplemented)
        if isinstance(result, (set, frozenset)):
            return SetVariable([wrap_constant(v) for v in result])
        return wrap_constant(result)


    def _arguments(self, tx, args: list[VariableTracker]) -> list[Any]:
        """The arguments as values; an iterable that is not a constant (a generator) is drawn
        item by item where the method consumes it whole, and every argument before it is an
        iterable constant (else CPython fails before drawing it)."""
        if self.name not in self.WHOLE_ARGUMENTS or all(a.is_constant() for a in args):
            return [a.as_constant() for a in args]
        values = []
        for arg in args:
            if arg.is_constant():
                if not isinstance(arg.as_constant(), (tuple, frozenset, str, bytes, range)):
                    raise Unsupported(f"set.{self.name} of a non-iterable before an iterator")
                values.append(arg.as_constant())
            elif arg.python_type() in _NOT_ITERABLE:
                raise raise_real(TypeError(f"'{arg.python_type().__name__}' object is not "
                                           "iterable"))
            else:
                values.append(tuple(self._drawn(tx, arg)))
        return values

    def _drawn(self, tx, arg: VariableTracker) -> list[Any]:
        try:
            items = list(arg.iterate(tx))
        except TracedException:
            if self.name in self.MUTATING:  # CPython kept what it added before the error
                raise Unsupported(f"set.{self.name} of an iterator that raises") from None
            raise
        return [item.as_constant() for item in items]


# Types whose objects cannot be iterated (set.union(len) raises TypeError).
_NOT_ITERABLE = frozenset({types.FunctionType, types.BuiltinFunctionType, types.MethodType})


class KeyedItems(dict):
    """A dict tracker's items: a dict that counts the keys inserted into it.

    An iterator over the dict needs to know whether a key went in while it was iterating, even
    when the dict looks the same afterwards (``del d[k]; d[k] = v``): CPython's iterator then
    depends on the real dict's hash table (see ``iterators.CheckedIteratorVariable``).
    """

    inserts = 0

    def __setitem__(self, key: Any, value: VariableTracker) -> None:
        if key not in self:
            self.inserts += 1
        super().__setitem__(key, value)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def __ior__(self, other: Any) -> KeyedItems:
        self.update(other)
        return self


class DictVariable(VariableTracker):
    """A dict built in the frame, keyed by constants."""

    def __init__(self, items: dict[Any, VariableTracker], source=None) -> None:
        super().__init__(source)
        self.items = KeyedItems(items)

    def describe(self) -> str:
        return f"{len(self.items)} keys"

    def python_type(self) -> type:
        return dict

    def is_constant(self) -> bool:
        return all(v.is_constant() for v in self.items.values()) and \
            not any(isinstance(k, TensorKey) for k in self.items)

    def as_constant(self) -> Any:
        return {k: v.as_constant() for k, v in self.items.items()}

    def truthy(self, tx: Translator) -> bool:
        return bool(self.items)

    def unpack(self, tx):
        return [key_tracker(tx, k) for k in self.items]

    def mapping_items(self, tx) -> dict[Any, VariableTracker]:
        return self.items

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = hashable_key(index)
        if key not in self.items:
            raise raise_real(KeyError(key))
        return self.items[key]

    def var_getattr(self, tx, name):
        return DictMethodVariable(self, name)

    def reconstruct(self, codegen: Codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)  # mutations are written back by the ledger
        return codegen.remember(self, self.reconstruct_literal)

    def reconstruct_literal(self, codegen: Codegen) -> str:
        body = ", ".join(f"{key_literal(codegen, k)}: {v.reconstruct(codegen)}"
                         for k, v in self.items.items())
        return "{" + body + "}"

    mutated = False

    def check_mutable(self, tx) -> None:
        """About to mutate: an input dict is recorded in the side-effect ledger."""
        if self.source is not None:
            tx.output.side_effects.mutate_container(self)
        else:
            tx.output.side_effects.write_local(self)
        self.mutated = True


class TensorKey:
    """A dict key that is a tensor from the inputs (an optimizer's state is keyed by its
    parameters): hashed and compared by the real tensor's identity, as a dict compares tensors;
    ``tracker`` is the tensor's tracker (iteration gives it, code reads it from its source)."""

    __slots__ = ("tensor", "tracker")

    def __init__(self, tensor: Any, tracker: VariableTracker) -> None:
        self.tensor, self.tracker = tensor, tracker

    def __hash__(self) -> int:
        return id(self.tensor)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorKey) and other.tensor is self.tensor

    def __repr__(self) -> str:
        return f"TensorKey({self.tracker!r})"


def key_tracker(tx: Translator, key: Any) -> VariableTracker:
    """A tracker for a dict's key: a constant, a tensor from the inputs (:class:`TensorKey`),
    or a class, function or module of a registry dict (its identity is guarded with the dict's
    keys)."""
    if isinstance(key, TensorKey):
        return key.tracker
    if type(key) is tuple:
        return TupleVariable([key_tracker(tx, item) for item in key])
    if is_constant_value(key) or isinstance(key, enum.Enum):
        return wrap_constant(key)
    return tx.wrap_unguarded(key)


def key_literal(codegen: Codegen, key: Any) -> str:
    """A key of a dict tracker's items in generated code."""
    return key.tracker.reconstruct(codegen) if isinstance(key, TensorKey) \
        else codegen.constant(key)


# Where a tracker of a function or a module keeps the object itself (a registry dict's key).
_KEY_OBJECT_ATTRIBUTES = (
    ("fn", (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
            types.WrapperDescriptorType)),  # user, builtin and skipped functions
    ("module", (types.ModuleType,)),  # a Python module
    ("original", (types.BuiltinFunctionType, types.FunctionType)),  # a polyfilled function
)


def key_value(key: VariableTracker) -> Any:
    """The Python value a tracker stands for as a dict key: a constant's, a tensor from the
    inputs as a :class:`TensorKey`, or the function or module itself (``del registry[len]``)."""
    tensor = getattr(key, "input_value", None)
    if tensor is not None:
        return TensorKey(tensor, key)
    if key.is_constant():
        return key.as_constant()
    for attribute, kinds in _KEY_OBJECT_ATTRIBUTES:
        value = getattr(key, attribute, None)
        if isinstance(value, kinds):
            return value
    return key.as_constant()  # refused: not a constant known while tracing


def hashable_key(key: VariableTracker) -> Any:
    """A dict key's value; eager's ``TypeError: unhashable type`` for a list, a dict..."""
    value = key_value(key)
    try:
        hash(value)
    except TypeError as error:
        raise raise_real(error) from error
    return value


class DictMethodVariable(MethodNames, VariableTracker):
    """Methods of a dict of trackers."""

    def __init__(self, obj: DictVariable, name: str) -> None:
        super().__init__()
        self.obj, self.name = obj, name

    # Methods whose first argument is a key: an unhashable one is the program's TypeError.
    KEYED = frozenset({"get", "__contains__", "setdefault", "pop", "__getitem__"})

    def call(self, tx, args, kwargs):
        self.check_arguments(args, kwargs)
        items = self.obj.items
        name = self.name
        key = hashable_key(args[0]) if name in self.KEYED and args else None
        if name in ("keys", "values", "items"):
            return DictViewVariable(self.obj, name)
        if name == "get":
            default = args[1] if len(args) > 1 else ConstantVariable(None)
            return items.get(key, default)
        if name == "__contains__":
            return ConstantVariable(key in items)
        if name == "copy":
            return DictVariable(dict(items))
        self.obj.check_mutable(tx)
        if name == "popitem":
            if not items:
                raise raise_real(KeyError("popitem(): dictionary is empty"))
            key, value = items.popitem()
            return TupleVariable([key_tracker(tx, key), value])
        if name == "update":
            if len(args) > 1:
                raise raise_real(TypeError(f"update expected at most 1 argument, got "
                                           f"{len(args)}"))
            if args:
                items.update((hashable_key(k), v) for k, v in mapping_pairs(tx, args[0]))
            items.update(kwargs)
            return ConstantVariable(None)
        if name == "setdefault":
            default = args[1] if len(args) > 1 else ConstantVariable(None)
            return items.setdefault(key, default)
        if name == "pop":
            if key in items:
                return items.pop(key)
            if len(args) > 1:
                return args[1]
            raise raise_real(KeyError(key))
        if name == "clear":
            items.clear()
            return ConstantVariable(None)
        raise Unsupported(f"dict.{name}")


class DictViewVariable(VariableTracker):
    """``d.keys()``, ``d.values()``, ``d.items()``: live views, read from the dict tracker at each
    use, so keys added after the view was taken are in it (``len``, ``in``, iteration)."""

    def __init__(self, mapping: DictVariable, kind: str, source=None) -> None:
        super().__init__(source)
        self.dict, self.kind = mapping, kind

    def describe(self) -> str:
        return f"{self.kind} of {self.dict!r}"

    def python_type(self) -> type:
        return type(getattr(self.dict.python_type()(), self.kind)())  # dict_keys, odict_items...

    def is_constant(self) -> bool:
        return self.kind == "keys" or self.dict.is_constant()

    def as_constant(self) -> Any:
        """A real view of the same kind over the current items (``&``, ``==``, ``in`` fold)."""
        values = {k: v.as_constant() for k, v in self.dict.items.items()} \
            if self.kind != "keys" else dict.fromkeys(self.dict.items)
        return getattr(values, self.kind)()

    def truthy(self, tx: Translator) -> bool:
        return bool(self.dict.items)

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        items = self.dict.items
        if self.kind == "keys":
            return [key_tracker(tx, k) for k in items]
        if self.kind == "values":
            return list(items.values())
        return [TupleVariable([key_tracker(tx, k), v]) for k, v in items.items()]

    def var_getattr(self, tx, name):
        if name == "mapping":
            raise Unsupported("dict view .mapping (a read-only proxy) is not modelled")
        return ConstantVariable(self.as_constant()).var_getattr(tx, name)  # isdisjoint...

    def reconstruct(self, codegen: Codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)  # the very view object from the inputs
        return f"{self.dict.reconstruct(codegen)}.{self.kind}()"  # a view of the same dict


# The exact types of a plain dict's views -> the method that makes them.
DICT_VIEW_TYPES = {type(getattr({}, kind)()): kind for kind in ("keys", "values", "items")}


def mapping_pairs(tx: Translator, other: VariableTracker,
                  mapping_only: bool = False) -> list[tuple[VariableTracker, VariableTracker]]:
    """The (key, value) pairs that ``dict.update(other)`` reads: a dict's items directly, a
    mapping's through ``keys()`` and subscripts, else the pairs that iterating ``other`` gives
    (``{**other}`` takes mappings only)."""
    items = other.mapping_items(tx)
    if items is not None:  # keys as they are (a class or a function is a key too)
        return [(k.tracker if isinstance(k, TensorKey) else ConstantVariable(k), v)
                for k, v in items.items()]
    if _has_keys(other):
        keys = other.var_getattr(tx, "keys").call(tx, [], {}).unpack(tx)
        return [(key, tx.subscript(other, key)) for key in keys]
    if mapping_only:
        raise raise_real(TypeError(f"'{other.python_type().__name__}' object is not a mapping"))
    pairs = []
    for pair in other.unpack(tx):
        parts = pair.unpack(tx)
        if len(parts) != 2:
            raise raise_real(ValueError(f"dictionary update sequence element #{len(pairs)} has "
                                        f"length {len(parts)}; 2 is required"))
        pairs.append((parts[0], parts[1]))
    return pairs


def _has_keys(value: VariableTracker) -> bool:
    """Whether Python reads ``value`` as a mapping (its type has ``keys``)."""
    try:
        return hasattr(value.python_type(), "keys")
    except Unsupported:
        return False


def _is_structseq(cls: type) -> bool:
    return hasattr(cls, "n_sequence_fields")


def _structseq_fields(cls: type) -> tuple[str, ...]:
    """Field names of a C struct sequence (torch.return_types.topk...), in index order."""
    if not _is_structseq(cls):
        return ()
    probe = cls(tuple(range(cls.n_sequence_fields)))
    names = [name for name in dir(cls)
             if type(getattr(cls, name, None)).__name__ == "member_descriptor"]
    by_index = {getattr(probe, name): name for name in names
                if isinstance(getattr(probe, name), int)}
    return tuple(by_index[i] for i in range(cls.n_sequence_fields))


def sort_trackers(tx, items: list[VariableTracker], kwargs,
                  in_place: bool = False) -> list[VariableTracker]:
    """Stable sort of trackers by constant values or by a key function giving constants.

    Values that do not compare (``[1, (2,)]``) raise CPython's TypeError in the program for
    ``sorted()``, whose list is new; ``list.sort`` then leaves the list in an order of its
    algorithm's own, so that is a graph break (the sort runs eagerly)."""
    key = kwargs.get("key")
    reverse = kwargs.get("reverse", ConstantVariable(False)).as_constant()
    if key is None or (key.is_constant() and key.as_constant() is None):
        if not all(i.is_constant() for i in items):
            raise Unsupported("sorted() of values that are not constants")
        keys = [i.as_constant() for i in items]
    else:
        keys = [key.call(tx, [i], {}).as_constant() for i in items]
    try:
        order = sorted(range(len(items)), key=lambda i: keys[i], reverse=reverse)
    except TypeError as error:
        if in_place:
            raise Unsupported("list.sort() of values that do not compare") from error
        raise raise_real(error) from error
    return [items[i] for i in order]



CONTAINER_WRAPPERS.update({
    tuple: lambda value: TupleVariable([wrap_constant(v) for v in value]),
    list: lambda value: ListVariable([wrap_constant(v) for v in value]),
    dict: lambda value: DictVariable({k: wrap_constant(v) for k, v in value.items()}),
    set: lambda value: SetVariable([wrap_constant(v) for v in value]),
    frozenset: lambda value: SetVariable([wrap_constant(v) for v in value], frozen=True),
})
