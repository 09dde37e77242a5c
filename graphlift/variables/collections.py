"""``collections.deque``, ``OrderedDict`` and ``defaultdict`` as trackers.

Each tracker is a list or dict tracker with the primitive operations of its type (``appendleft``,
``popleft``, a ``maxlen``, a ``default_factory``); every other method is found through the trace
rules, which map it to its polyfill in :mod:`graphlift.polyfills.collections` (written with those
primitives) or skip it. Containers read from the inputs are read-only: writing a deque or an
``OrderedDict`` back after the graph runs is not implemented, so mutating one is a graph break.
"""

from __future__ import annotations

import collections
from typing import Any

from graphlift import trace_rules
from graphlift.exc import Unsupported
from graphlift.rebuild import Codegen
from graphlift.variables.base import VariableTracker, raise_real
from graphlift.variables.builtins import BUILTIN_HANDLERS
from graphlift.variables.constant import ConstantVariable
from graphlift.variables.containers import (
    DictMethodVariable,
    DictVariable,
    ListVariable,
    hashable_key,
)
from graphlift.variables.functions import UserMethodVariable
from graphlift.variables.objects import register_constructors

_MADE_BY_LIST_CODE = object()  # maxlen when list code builds a deque (``d + d``, ``d * 2``)


def method_of(tx, obj: VariableTracker, cls: type, name: str) -> VariableTracker:
    """``obj.name`` for a C method of ``cls`` that the tracker does not model itself."""
    try:
        method = getattr(cls, name)
    except AttributeError as error:
        raise Unsupported(f"{cls.__name__!r} object has no attribute {name!r}",
                          break_type="user_exception") from error
    if trace_rules.lookup(method).kind is not trace_rules.Kind.POLYFILL:
        raise Unsupported(f"{cls.__name__}.{name} is modelled by its polyfill only, and "
                          "graphlift.config.use_polyfills is off")
    return UserMethodVariable(tx.wrap_unguarded(method), obj)


def _refuse_input_mutation(container: VariableTracker, kind: str) -> None:
    if container.source is not None:
        raise Unsupported(f"mutating the {kind} {container.source.name()} from the inputs (the "
                          "side-effect ledger writes back lists and dicts only)",
                          break_type="side_effect")


class DequeVariable(ListVariable):
    """A ``collections.deque``: a list tracker with a ``maxlen`` and left-end operations.

    Reading ``items`` trims a bounded deque from the left, so every way list code grows it at
    the right end (``+=``, ``extend``) keeps the maxlen, as deque does.
    """

    PRIMITIVES = frozenset({"append", "appendleft", "pop", "popleft", "clear", "copy"})

    def __init__(self, items: list[VariableTracker], source=None,
                 maxlen: Any = _MADE_BY_LIST_CODE) -> None:
        if maxlen is _MADE_BY_LIST_CODE:
            raise Unsupported("deque concatenation and repetition are not modelled")
        self.maxlen = maxlen
        super().__init__(items, source)

    @property
    def items(self) -> list[VariableTracker]:
        if self.maxlen is not None and len(self._items) > self.maxlen:
            del self._items[:len(self._items) - self.maxlen]
        return self._items

    @items.setter
    def items(self, value: list[VariableTracker]) -> None:
        self._items = value

    def python_type(self) -> type:
        return collections.deque

    def python_container(self, values) -> collections.deque:
        return collections.deque(values, self.maxlen)  # as_constant: a deque, not a list

    def check_mutable(self, tx) -> None:
        _refuse_input_mutation(self, "deque")
        self.mutated = True

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_constant()
        if isinstance(key, slice):
            raise raise_real(TypeError("sequence index must be integer, not 'slice'"))
        if not -len(self.items) <= key < len(self.items):
            raise raise_real(IndexError("deque index out of range"))
        return self.items[key]

    def var_getattr(self, tx, name):
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        if name in self.PRIMITIVES:
            return DequeMethodVariable(self, name)
        return method_of(tx, self, collections.deque, name)

    def reconstruct_literal(self, codegen: Codegen) -> str:
        items = ", ".join(i.reconstruct(codegen) for i in self.items)
        return f"{codegen.constant(collections.deque)}([{items}], {self.maxlen!r})"


class DequeMethodVariable(VariableTracker):
    """The deque operations the polyfills are written with."""

    def __init__(self, obj: DequeVariable, name: str) -> None:
        super().__init__()
        self.obj, self.name = obj, name

    def describe(self) -> str:
        return f"deque.{self.name}"

    def call(self, tx, args, kwargs):
        deque, name = self.obj, self.name
        if name == "copy":
            return DequeVariable(list(deque.items), maxlen=deque.maxlen)
        deque.check_mutable(tx)
        items = deque.items
        if name == "append":
            items.append(args[0])
        elif name == "appendleft":
            items.insert(0, args[0])
            if deque.maxlen is not None and len(items) > deque.maxlen:
                items.pop()
        elif name in ("pop", "popleft"):
            if not items:
                raise raise_real(IndexError("pop from an empty deque"))
            return items.pop() if name == "pop" else items.pop(0)
        else:
            items.clear()
        return ConstantVariable(None)


class OrderedDictVariable(DictVariable):
    """A ``collections.OrderedDict``: a dict tracker (they keep insertion order too)."""

    dict_class: type = collections.OrderedDict
    OWN_METHODS = frozenset({"keys", "values", "items", "get", "__contains__", "update",
                             "setdefault", "pop", "clear"})

    def python_type(self) -> type:
        return self.dict_class

    def check_mutable(self, tx) -> None:
        _refuse_input_mutation(self, self.dict_class.__name__)
        self.mutated = True

    def var_getattr(self, tx, name):
        if name in self.OWN_METHODS:
            return DictMethodVariable(self, name)
        if name == "copy":
            return CopyMethodVariable(self)
        return method_of(tx, self, self.dict_class, name)

    def copy(self) -> DictVariable:
        return type(self)(dict(self.items))

    def reconstruct_literal(self, codegen: Codegen) -> str:
        return f"{codegen.constant(self.dict_class)}({super().reconstruct_literal(codegen)})"


class DefaultDictVariable(OrderedDictVariable):
    """A ``collections.defaultdict``: reading a missing key runs ``__missing__`` (a polyfill)."""

    dict_class = collections.defaultdict

    def __init__(self, items: dict[Any, VariableTracker], default_factory: VariableTracker,
                 source=None) -> None:
        super().__init__(items, source)
        self.default_factory = default_factory

    def var_getattr(self, tx, name):
        if name == "default_factory":
            return self.default_factory
        return super().var_getattr(tx, name)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = hashable_key(index)
        if key in self.items:
            return self.items[key]
        return method_of(tx, self, collections.defaultdict, "__missing__").call(tx, [index], {})

    def copy(self) -> DictVariable:
        return DefaultDictVariable(dict(self.items), self.default_factory)

    def check_mutable(self, tx) -> None:
        """An input defaultdict is written back by the ledger, through dict's own methods (an
        optimizer's state gains its parameters' entries on the first step)."""
        DictVariable.check_mutable(self, tx)

    def reconstruct_literal(self, codegen: Codegen) -> str:
        factory = self.default_factory.reconstruct(codegen)
        items = DictVariable.reconstruct_literal(self, codegen)
        return f"{codegen.constant(collections.defaultdict)}({factory}, {items})"


class CopyMethodVariable(VariableTracker):
    """``od.copy()``: a new container of the same kind with the same items."""

    def __init__(self, obj: OrderedDictVariable) -> None:
        super().__init__()
        self.obj = obj

    def call(self, tx, args, kwargs):
        return self.obj.copy()


# -- constructors (rows of objects.CONSTRUCTORS) ---------------------------------------------
def make_deque(tx, args, kwargs) -> DequeVariable:
    """``collections.deque(iterable=(), maxlen=None)``."""
    iterable = args[0] if args else kwargs.get("iterable")
    maxlen_var = args[1] if len(args) > 1 else kwargs.get("maxlen")
    maxlen = None if maxlen_var is None else maxlen_var.as_constant()
    if maxlen is not None:
        if not isinstance(maxlen, int):
            raise raise_real(TypeError("an integer is required"))
        if maxlen < 0:
            raise raise_real(ValueError("maxlen must be non-negative"))
    items = iterable.unpack(tx) if iterable is not None else []
    return DequeVariable(items, maxlen=maxlen)


def make_ordered_dict(tx, args, kwargs) -> OrderedDictVariable:
    """``collections.OrderedDict(...)``: built like ``dict(...)``."""
    return OrderedDictVariable(BUILTIN_HANDLERS[dict](tx, args, kwargs).items)


def make_defaultdict(tx, args, kwargs) -> DefaultDictVariable:
    """``collections.defaultdict(default_factory=None, ...)``: the rest is built like a dict."""
    factory = args[0] if args else ConstantVariable(None)
    if not (factory.is_constant() and factory.as_constant() is None):
        callable_check = BUILTIN_HANDLERS[callable](tx, [factory], {})
        if not callable_check.as_constant():
            raise raise_real(TypeError("first argument must be callable or None"))
    items = BUILTIN_HANDLERS[dict](tx, list(args[1:]), kwargs).items
    return DefaultDictVariable(items, factory)


register_constructors({
    collections.deque: make_deque,  # a list tracker with maxlen and left-end operations
    collections.OrderedDict: make_ordered_dict,  # a dict tracker
    collections.defaultdict: make_defaultdict,  # a dict tracker; missing keys: __missing__
})
