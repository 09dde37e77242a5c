"""Wrapping real values into trackers: the one place where guards on inputs are installed.

``VariableBuilder.wrap(value, source)`` decides what kind of tracker a value read from the frame
becomes, and records the guard that keeps that decision valid on later calls. The table below is
in priority order; the first matching row wins.
"""

from __future__ import annotations

import collections
import enum
import types
from typing import TYPE_CHECKING, Any

import torch

from graphlift.config import config
from graphlift.exc import Unsupported
from graphlift.polyfills import POLYFILLS
from graphlift.resume import GradModeExit
from graphlift.sources import AttrSource, ItemSource, Source, is_pinned
from graphlift.variables.base import VariableTracker
from graphlift.variables.callables import (
    StandInObjectVariable,
    is_classified_callable,
    wrap_callable,
)
from graphlift.variables.collections import DefaultDictVariable, DequeVariable, OrderedDictVariable
from graphlift.variables.constant import (
    ConstantVariable,
    LazyConstantVariable,
    is_constant_value,
    wrap_constant,
)
from graphlift.variables.containers import DictVariable, ListVariable, TupleVariable
from graphlift.variables.exceptions import ContextMethodVariable, GradModeVariable
from graphlift.variables.nn_module import NNModuleVariable, wrap_module
from graphlift.variables.objects import PythonModuleVariable, UserObjectVariable
from graphlift.variables.symbolic import wrap_int_input
from graphlift.variables.tensor import TensorMethodVariable, TensorVariable

if TYPE_CHECKING:
    from graphlift.translator import InstructionTranslator

def is_torch_module(module: types.ModuleType) -> bool:
    name = module.__name__
    return name == "torch" or name.startswith("torch.")


class VariableBuilder:
    """Wraps values read from the frame's inputs, guarding what the trace relies on."""

    def __init__(self, tx: InstructionTranslator) -> None:
        self.tx = tx
        self._by_source: dict[Source, VariableTracker] = {}
        self._mutable_by_id: dict[int, VariableTracker] = {}

    def wrap(self, value: Any, source: Source) -> VariableTracker:
        """The tracker for ``value`` found at ``source``; the same source gives the same tracker."""
        if source in self._by_source:
            return self._by_source[source]
        aliased = self._mutable_by_id.get(id(value)) if _has_identity(value) else None
        if aliased is not None:
            # One object reached twice: one tracker, so a mutation through one name is seen
            # through the other, and a guard that the two stay one object.
            self.tx.guards.same_object(source, aliased.source)
            self._by_source[source] = aliased
            return aliased
        tracker = self._wrap(value, source)
        if _has_identity(value):
            tracker.real_object = value  # for ``is`` tests between two inputs
            self._mutable_by_id[id(value)] = tracker
        self._by_source[source] = tracker
        return tracker

    def mutable_inputs(self) -> list[VariableTracker]:
        """Trackers of the lists, dicts and objects read from the inputs, one per object."""
        return list(self._mutable_by_id.values())

    def _wrap(self, value: Any, source: Source) -> VariableTracker:
        guards = self.tx.guards
        if isinstance(value, torch.Tensor):
            return self._wrap_tensor(value, source)
        if isinstance(value, types.BuiltinMethodType) and \
                isinstance(getattr(value, "__self__", None), torch.Tensor):
            # A bound tensor method carried across a graph break (``f = x.add``): the tensor is
            # the input, the method name a constant.
            guards.constant_match(AttrSource(source, "__name__"), value.__name__)
            tensor = self.wrap(value.__self__, AttrSource(source, "__self__"))
            return TensorMethodVariable(tensor, value.__name__)
        if type(value) is int:  # an int that changes between calls may become a symbol
            symbolic = wrap_int_input(self.tx, value, source)
            if symbolic is not None:
                return symbolic
        if type(value) is float:
            return LazyConstantVariable(value, source, guards)  # guarded when first used
        if is_constant_value(value):
            guards.constant_match(source, value)
            return ConstantVariable(value, source)
        if type(value) in (list, tuple) or _is_namedtuple(value):
            guards.type_match(source, value)
            guards.length_check(source, len(value))
            items = [self.wrap(v, ItemSource(source, i)) for i, v in enumerate(value)]
            if type(value) is list:
                return ListVariable(items, source)
            return TupleVariable(items, source, tuple_class=type(value))
        if type(value) is dict and all(is_constant_value(k) for k in value):
            guards.type_match(source, value)
            guards.dict_keys(source, list(value))
            return DictVariable({k: self.wrap(v, ItemSource(source, k)) for k, v in value.items()},
                                source)
        if type(value) in _COLLECTIONS:
            return self._wrap_collection(value, source)
        stand_in = stand_in_class(value)
        if stand_in is not None:
            return self._wrap_stand_in(value, source, stand_in)
        if isinstance(value, GradModeExit):
            # A resume function that starts inside a grad-mode with block.
            guards.id_match(source, value)
            manager = GradModeVariable(torch.is_grad_enabled(), previous=value.previous)
            return ContextMethodVariable(manager, "__exit__")
        if isinstance(value, types.ModuleType):
            guards.id_match(source, value)
            return PythonModuleVariable(value, source)
        if is_classified_callable(value):  # functions, methods, classes: the trace rules
            if type(value) is types.FunctionType and value.__globals__ is self.tx.f_globals:
                # By code, not identity: a closure made anew for each call is the same function
                # to the trace, whose cells and defaults are read (and guarded) through sources.
                guards.type_match(source, value)
                guards.id_match(AttrSource(source, "__code__"), value.__code__)
                guards.same_globals(AttrSource(source, "__globals__"))
            elif not isinstance(value, types.MethodType):  # new on every attribute read: its
                guards.id_match(source, value)  # __func__ and __self__ are guarded instead
            return wrap_callable(self.tx, value, source)
        if isinstance(value, torch.nn.Module):
            return wrap_module(self.tx, value, source)  # pinned by identity: see nn_module
        if isinstance(value, enum.Enum):  # members are singletons: compared, never changed
            guards.id_match(source, value)
            return ConstantVariable(value, source)
        guards.type_match(source, value)
        return UserObjectVariable(value, source)

    def _wrap_collection(self, value: Any, source: Source) -> VariableTracker:
        """A deque, OrderedDict or defaultdict from the inputs: read through its items."""
        guards = self.tx.guards
        guards.type_match(source, value)
        if type(value) is collections.deque:
            guards.length_check(source, len(value))
            guards.constant_match(AttrSource(source, "maxlen"), value.maxlen)
            items = [self.wrap(v, ItemSource(source, i)) for i, v in enumerate(value)]
            return DequeVariable(items, source, maxlen=value.maxlen)
        if not all(is_constant_value(k) for k in value):
            return UserObjectVariable(value, source)
        guards.dict_keys(source, list(value))
        items = {k: self.wrap(v, ItemSource(source, k)) for k, v in value.items()}
        if type(value) is collections.OrderedDict:
            return OrderedDictVariable(items, source)
        factory = self.wrap(value.default_factory, AttrSource(source, "default_factory"))
        return DefaultDictVariable(items, factory, source)

    def _wrap_stand_in(self, value: Any, source: Source, stand_in: type) -> VariableTracker:
        """A real partial or itemgetter from the inputs, as an object of its polyfill class."""
        state, readable = stand_in._graphlift_state(value)
        if readable:  # partial: func, args and keywords are attributes of the real object
            self.tx.guards.type_match(source, value)
            attrs = {k: self.wrap(v, AttrSource(source, k)) for k, v in state.items()}
        else:  # immutable C objects without attributes: pinned by identity
            self.tx.guards.id_match(source, value)
            attrs = {k: wrap_constant(v) for k, v in state.items()}
        obj = StandInObjectVariable(value, source, cls=stand_in)
        obj.attrs.update(attrs)
        return obj

    def _wrap_tensor(self, value: torch.Tensor, source: Source) -> VariableTracker:
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            raise Unsupported(f"tensor subclass {type(value).__name__} at {source.name()}")
        output = self.tx.output
        existing = output.input_for(value)
        if existing is not None:
            # The same tensor reached twice: one graph input, and a guard that it stays shared.
            self.tx.guards.same_object(source, existing.source)
            return self._by_source[existing.source]
        graph_input = output.add_input(source, value)  # decides which dimensions are dynamic
        if is_pinned(source):
            # A module's parameter or buffer: the module guards prove which object it is.
            self.tx.guards.nn_module_tensor(source, value)
        else:
            self.tx.guards.tensor_match(source, value, graph_input.dynamic_dims)
        graph_input.node.meta["real_type"] = type(value)
        return TensorVariable(graph_input.node, graph_input.fake, source)


def _has_identity(value: Any) -> bool:
    """Objects whose identity matters to a trace that mutates them: lists, dicts, user objects."""
    return type(value) in (list, dict) or (
        not isinstance(value, (torch.Tensor, type, types.ModuleType, types.FunctionType,
                               types.BuiltinFunctionType, tuple, frozenset, enum.Enum))
        and not is_constant_value(value) and hasattr(value, "__dict__"))


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def wrap_unguarded(tx: InstructionTranslator, value: Any) -> VariableTracker:
    """Wrap a value reached through something already guarded (torch's namespace, a constant)."""
    if isinstance(value, torch.Tensor):
        raise Unsupported("a tensor reached without a source cannot become a graph input")
    if is_constant_value(value):
        return ConstantVariable(value)
    if isinstance(value, types.ModuleType):
        return PythonModuleVariable(value)
    if is_classified_callable(value):
        return wrap_callable(tx, value)
    if type(value) is tuple:  # of classes, say: graphlift's polyfills read such globals
        return TupleVariable([wrap_unguarded(tx, v) for v in value])
    if type(value) is dict and all(is_constant_value(k) for k in value):
        # A class attribute such as a dataclass's __dataclass_fields__ (read, never written).
        return DictVariable({k: wrap_unguarded(tx, v) for k, v in value.items()})
    if isinstance(value, torch.nn.Module):
        return NNModuleVariable(value)
    if isinstance(value, enum.Enum):
        return ConstantVariable(value)
    return UserObjectVariable(value)


# Containers of the collections module that have their own trackers.
_COLLECTIONS = (collections.deque, collections.OrderedDict, collections.defaultdict)


# C classes whose objects have a polyfill class standing in for them (partial, itemgetter...).
_STAND_INS = {cls: stand_in for cls, stand_in in POLYFILLS.items()
              if isinstance(cls, type) and hasattr(stand_in, "_graphlift_state")}


def stand_in_class(value: Any) -> type | None:
    """The polyfill class standing in for ``value``'s C class, if polyfills are on."""
    stand_in = _STAND_INS.get(type(value))
    return stand_in if stand_in is not None and config.use_polyfills else None
