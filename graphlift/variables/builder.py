"""Wrapping real values into trackers: the one place where guards on inputs are installed.

``VariableBuilder.wrap(value, source)`` decides what kind of tracker a value read from the frame
becomes, and records the guard that keeps that decision valid on later calls. The table below is
in priority order; the first matching row wins.
"""

from __future__ import annotations

import builtins
import functools
import types
from typing import TYPE_CHECKING, Any

import torch

from graphlift.exc import Unsupported
from graphlift.resume import GradModeExit
from graphlift.sources import AttrSource, ItemSource, Source
from graphlift.variables.base import VariableTracker
from graphlift.variables.builtins import BuiltinVariable
from graphlift.variables.constant import ConstantVariable, is_constant_value
from graphlift.variables.containers import DictVariable, ListVariable, TupleVariable
from graphlift.variables.exceptions import ContextMethodVariable, GradModeVariable
from graphlift.variables.functions import PartialVariable, UserFunctionVariable
from graphlift.variables.objects import ClassVariable, PythonModuleVariable, UserObjectVariable
from graphlift.variables.tensor import TensorVariable, TorchCallableVariable

if TYPE_CHECKING:
    from graphlift.translator import InstructionTranslator

_BUILTIN_IDS = frozenset(id(v) for v in vars(builtins).values())


def is_torch_module(module: types.ModuleType) -> bool:
    name = module.__name__
    return name == "torch" or name.startswith("torch.")


# Kinds of callables that can be a graph node's target (not classes, not module instances).
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                   types.WrapperDescriptorType, types.MethodWrapperType,
                   torch._ops.OpOverloadPacket, torch._ops.OpOverload)


def is_pure_c_function(value: Any) -> bool:
    """A C function of math/operator: folded on constants (operator's also run on tensors)."""
    from graphlift.variables.builtins import PURE_MODULES

    return isinstance(value, types.BuiltinFunctionType) and \
        getattr(value, "__module__", None) in PURE_MODULES


def is_torch_callable(value: Any) -> bool:
    """A function from torch's namespaces (C bindings and Python functions such as F.relu)."""
    if not isinstance(value, _FUNCTION_TYPES):
        return False
    module = getattr(value, "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


def is_builtin(value: Any) -> bool:
    return id(value) in _BUILTIN_IDS and (callable(value) or isinstance(value, type))


class VariableBuilder:
    """Wraps values read from the frame's inputs, guarding what the trace relies on."""

    def __init__(self, tx: InstructionTranslator) -> None:
        self.tx = tx
        self._by_source: dict[Source, VariableTracker] = {}

    def wrap(self, value: Any, source: Source) -> VariableTracker:
        """The tracker for ``value`` found at ``source``; the same source gives the same tracker."""
        if source in self._by_source:
            return self._by_source[source]
        tracker = self._wrap(value, source)
        self._by_source[source] = tracker
        return tracker

    def _wrap(self, value: Any, source: Source) -> VariableTracker:
        guards = self.tx.guards
        if isinstance(value, torch.Tensor):
            return self._wrap_tensor(value, source)
        if is_constant_value(value):
            guards.constant_match(source, value)
            return ConstantVariable(value, source)
        if type(value) in (list, tuple):
            guards.type_match(source, value)
            guards.length_check(source, len(value))
            items = [self.wrap(v, ItemSource(source, i)) for i, v in enumerate(value)]
            kind = ListVariable if type(value) is list else TupleVariable
            return kind(items, source)
        if type(value) is dict and all(is_constant_value(k) for k in value):
            guards.type_match(source, value)
            guards.dict_keys(source, list(value))
            return DictVariable({k: self.wrap(v, ItemSource(source, k)) for k, v in value.items()},
                                source)
        if type(value) is functools.partial:
            guards.type_match(source, value)
            fn = self.wrap(value.func, AttrSource(source, "func"))
            args = self.wrap(value.args, AttrSource(source, "args"))
            kwargs = self.wrap(value.keywords, AttrSource(source, "keywords"))
            return PartialVariable(fn, args.unpack(self.tx), dict(kwargs.items), source)
        if isinstance(value, GradModeExit):
            # A resume function that starts inside a grad-mode with block.
            guards.id_match(source, value)
            manager = GradModeVariable(torch.is_grad_enabled(), previous=value.previous)
            return ContextMethodVariable(manager, "__exit__")
        if isinstance(value, types.ModuleType):
            guards.id_match(source, value)
            return PythonModuleVariable(value, source)
        if is_torch_callable(value):
            guards.id_match(source, value)
            return TorchCallableVariable(value, source)
        if is_builtin(value) or is_pure_c_function(value):
            guards.id_match(source, value)
            return BuiltinVariable(value, source)
        if isinstance(value, types.FunctionType):
            guards.id_match(source, value)
            return UserFunctionVariable(value, source)
        if isinstance(value, type):
            guards.id_match(source, value)
            return ClassVariable(value, source)
        guards.type_match(source, value)
        return UserObjectVariable(value, source)

    def _wrap_tensor(self, value: torch.Tensor, source: Source) -> VariableTracker:
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            raise Unsupported(f"tensor subclass {type(value).__name__} at {source.name()}")
        output = self.tx.output
        existing = output.input_for(value)
        if existing is not None:
            # The same tensor reached twice: one graph input, and a guard that it stays shared.
            self.tx.guards.same_object(source, existing.source)
            return self._by_source[existing.source]
        self.tx.guards.tensor_match(source, value)
        graph_input = output.add_input(source, value)
        graph_input.node.meta["real_type"] = type(value)
        return TensorVariable(graph_input.node, graph_input.fake, source)


def wrap_unguarded(tx: InstructionTranslator, value: Any) -> VariableTracker:
    """Wrap a value reached through something already guarded (torch's namespace, a constant)."""
    if isinstance(value, torch.Tensor):
        raise Unsupported("a tensor reached without a source cannot become a graph input")
    if is_constant_value(value):
        return ConstantVariable(value)
    if isinstance(value, types.ModuleType):
        return PythonModuleVariable(value)
    if is_torch_callable(value):
        return TorchCallableVariable(value)
    if is_builtin(value) or is_pure_c_function(value):
        return BuiltinVariable(value)
    if isinstance(value, types.FunctionType):
        return UserFunctionVariable(value)
    if isinstance(value, type):
        return ClassVariable(value)
    return UserObjectVariable(value)
