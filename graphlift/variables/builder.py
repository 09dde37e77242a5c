"""Wrapping real values into trackers: the one place where guards on inputs are installed.

``VariableBuilder.wrap(value, source)`` decides what kind of tracker a value read from the frame
becomes, and records the guard that keeps that decision valid on later calls. The decision is
the table ``WRAP_ROWS``: (test, build) rows in priority order, where the first row whose test
matches builds the tracker and installs its guards. ``wrap_unguarded`` does the same with
``UNGUARDED_ROWS`` for values that need no guard of their own.
"""

from __future__ import annotations

import collections
import enum
import functools
import gc
import os
import types
import typing
import weakref
from typing import Any

import torch

from graphlift import trace_rules
from graphlift.config import config
from graphlift.exc import Unsupported
from graphlift.guards import has_instance_dict
from graphlift.polyfills import POLYFILLS
from graphlift.resume import GradModeExit
from graphlift.sources import (
    AttrSource,
    DictKeySource,
    DictValueSource,
    ItemSource,
    KeyedItemSource,
    PlainTensorSource,
    Source,
    SourceKind,
    ViewDictSource,
    as_plain_tensor,
    is_module_member,
)
from graphlift.variables.base import MISSING, Translator, VariableTracker, lookup_class_attr
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
from graphlift.variables.containers import (
    DICT_VIEW_TYPES,
    DictVariable,
    DictViewVariable,
    ListVariable,
    SetVariable,
    TensorKey,
    TupleVariable,
)
from graphlift.variables.context import ContextMethodVariable, GradModeVariable
from graphlift.variables.distributed import is_distributed_value, wrap_distributed
from graphlift.variables.functions import LruCacheVariable
from graphlift.variables.nn_module import NNModuleVariable, wrap_module
from graphlift.variables.numpy import is_traceable_array, wrap_array_input
from graphlift.variables.objects import (
    BuiltinMethodVariable,
    EnvironVariable,
    PythonModuleVariable,
    UserObjectVariable,
    WeakRefVariable,
)
from graphlift.variables.subclasses import is_builtin_subclass_object, wrap_builtin_subclass
from graphlift.variables.symbolic import wrap_scalar_input
from graphlift.variables.tensor import TensorMethodVariable, TensorVariable
from graphlift.variables.torch_function import (
    as_subclass,
    has_disabled_torch_function,
    is_traceable_subclass,
)


class VariableBuilder:
    """Wraps values read from the frame's inputs, guarding what the trace relies on."""

    def __init__(self, tx: Translator) -> None:
        self.tx = tx
        self._by_source: dict[Source, VariableTracker] = {}
        self._values: dict[Source, Any] = {}  # what each source held when it was wrapped
        self._mutable_by_id: dict[int, VariableTracker] = {}
        self._subclass_inputs: dict[int, VariableTracker] = {}  # id -> a subclass's object

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
            self._values[source] = value
            return aliased
        tracker = self._wrap(value, source)
        self._values[source] = value
        if _has_identity(value):
            tracker.real_object = value  # for ``is`` tests between two inputs
            self._mutable_by_id[id(value)] = tracker
        self._by_source[source] = tracker
        return tracker

    def value_at(self, source: Source) -> Any:
        """The object the trace wrapped at ``source`` (``MISSING`` if it wrapped none there)."""
        return self._values.get(source, MISSING)

    def tracker_of(self, value: Any) -> VariableTracker | None:
        """The tracker of the object ``value`` if the trace read it from the inputs, else None."""
        tracker = self._mutable_by_id.get(id(value))
        return tracker if tracker is not None and tracker.real_object is value else None

    def mutable_inputs(self) -> list[VariableTracker]:
        """Trackers of the lists, dicts and objects read from the inputs, one per object."""
        return list(self._mutable_by_id.values())

    def _wrap(self, value: Any, source: Source) -> VariableTracker:
        """The build of the first row of ``WRAP_ROWS`` whose test matches (the last always does)."""
        build = next(build for test, build in WRAP_ROWS if test(value))
        return build(self, value, source)


# -- the builds of WRAP_ROWS: each installs its row's guards and returns the tracker ----------
def _wrap_tensor(builder: VariableBuilder, value: torch.Tensor,
                 source: Source) -> VariableTracker:
    """A tensor: a graph input, guarded on its metadata (or pinned as a module's)."""
    if type(value) not in (torch.Tensor, torch.nn.Parameter) and \
            not has_disabled_torch_function(type(value)):
        return _wrap_subclass_tensor(builder, value, source)
    output, guards = builder.tx.output, builder.tx.guards
    existing = output.input_for(value)
    if existing is not None:
        # The same tensor reached twice: one graph input, and a guard that it stays shared.
        guards.same_object(source, existing.source)
        return builder._by_source[existing.source]
    graph_input = output.add_input(source, value)  # decides which dimensions are dynamic
    if is_module_member(source):
        # A module's parameter or buffer: the module guards prove which object it is (pinned)
        # or its shape, dtype and device (structural).
        guards.nn_module_tensor(source, value)
    else:
        guards.tensor_match(source, value, graph_input.dynamic_dims)
    graph_input.node.meta["real_type"] = type(value)
    variable = TensorVariable(graph_input.node, graph_input.fake, source)
    variable.input_value = value
    return variable


def _wrap_subclass_tensor(builder: VariableBuilder, value: torch.Tensor,
                          source: Source) -> VariableTracker:
    """An object of a tensor subclass whose torch calls are traced (variables/torch_function.py):
    guarded on its exact class, and fed to the graph as the plain tensor over its memory (the
    graph's operations must not dispatch to the subclass again). Its Python attributes are read
    from its instance dict, guarded as any attribute."""
    cls = type(value)
    if not is_traceable_subclass(cls) or is_module_member(source):
        raise Unsupported(f"tensor subclass {cls.__name__} at {source.name()}")
    guards = builder.tx.guards
    existing = builder._subclass_inputs.get(id(value))
    if existing is not None:  # one object reached twice: one tracker, guarded to stay one
        guards.same_object(source, existing.source)
        return existing
    guards.type_match(source, value)
    plain = builder.wrap(as_plain_tensor(value), PlainTensorSource(source))
    variable = as_subclass(plain, cls)
    variable.source, variable.input_value, variable.attrs = source, value, None
    builder._subclass_inputs[id(value)] = variable  # the value stays alive in _values
    return variable


def _wrap_tensor_method(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """A bound tensor method carried across a graph break (``f = x.add``): the tensor is the
    input, the method name a constant."""
    builder.tx.guards.constant_match(AttrSource(source, "__name__"), value.__name__)
    tensor = builder.wrap(value.__self__, AttrSource(source, "__self__"))
    return TensorMethodVariable(tensor, value.__name__)


def _wrap_builtin_method(builder: VariableBuilder, value: Any,
                         source: Source) -> VariableTracker:
    """A C method of a builtin type bound to an object (``get = d.get`` carried across a graph
    break): the object is the input, the method's name a constant."""
    builder.tx.guards.constant_match(AttrSource(source, "__name__"), value.__name__)
    obj = builder.wrap(value.__self__, AttrSource(source, "__self__"))
    return BuiltinMethodVariable(builtin_descriptor(value), obj)


def _wrap_ndarray(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """An ndarray: a graph input over its memory (``torch.from_numpy``), traced as NumPy."""
    return wrap_array_input(builder.tx, value, source)


def _wrap_number(builder: VariableBuilder, value: int | float,
                 source: Source) -> VariableTracker:
    """An int or float that changes between calls may become a symbol; else a lazily guarded
    constant."""
    symbolic = wrap_scalar_input(builder.tx, value, source)
    return symbolic if symbolic is not None else _wrap_lazy(builder, value, source)


def _wrap_lazy(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """A scalar guarded on its value when first read: one that the frame passes on or
    overwrites unread (``D["a"] = n``, a start time carried across a break) never recompiles.

    Only where something else proves that the value is there: an argument, or an item of a list
    or dict (their length and keys are guarded). An attribute or a global is guarded at once,
    since its value guard is also what proves it exists (``hasattr(o, "flag")`` reads no value).
    """
    if source.kind not in LAZY_SOURCE_KINDS:
        return _wrap_constant(builder, value, source)
    return LazyConstantVariable(value, source, builder.tx.guards)


LAZY_SOURCE_KINDS = frozenset({SourceKind.LOCAL, SourceKind.ITEM, SourceKind.DICT_VALUE})


def _wrap_constant(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """A constant (None, a bool, a str, a tuple of constants...), guarded by value."""
    builder.tx.guards.constant_match(source, value)
    return ConstantVariable(value, source)


def _wrap_sequence(builder: VariableBuilder, value: list | tuple,
                   source: Source) -> VariableTracker:
    """A list, tuple or namedtuple: item by item, guarded by its type and length."""
    guards = builder.tx.guards
    guards.type_match(source, value)
    guards.length_check(source, len(value))
    items = [builder.wrap(v, ItemSource(source, i)) for i, v in enumerate(value)]
    if type(value) is list:
        return ListVariable(items, source)
    return TupleVariable(items, source, tuple_class=type(value))


def _wrap_dict(builder: VariableBuilder, value: dict, source: Source) -> VariableTracker:
    """A dict with constant keys: item by item, guarded by its type and its keys in order."""
    guards = builder.tx.guards
    guards.type_match(source, value)
    items = list(value.items())  # wrapping a value may import a module: sys.modules grows
    guards.dict_keys(source, [k for k, _ in items])
    return DictVariable({k: builder.wrap(v, ItemSource(source, k)) for k, v in items}, source)


def _wrap_registry_dict(builder: VariableBuilder, value: dict,
                        source: Source) -> VariableTracker:
    """A dict keyed by classes, functions, modules or enum members too (``registry.get(
    type(obj))``): its keys guarded one by one by identity (constants by type and value), its
    values wrapped as any dict's."""
    guards = builder.tx.guards
    guards.type_match(source, value)
    guards.dict_keys_identical(source, list(value))
    # A key whose repr is no expression is reached by position (the keys' order is guarded).
    return DictVariable({k: builder.wrap(v, ItemSource(source, k) if is_constant_value(k)
                                         else DictValueSource(source, i))
                         for i, (k, v) in enumerate(value.items())}, source)


def _wrap_dict_view(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """A dict view (live across a graph break): a view tracker over its dict's tracker."""
    builder.tx.guards.type_match(source, value)
    mapping = builder.wrap(gc.get_referents(value)[0], ViewDictSource(source))
    if not isinstance(mapping, DictVariable):
        return UserObjectVariable(value, source)  # a dict keyed by objects: not modelled
    return DictViewVariable(mapping, DICT_VIEW_TYPES[type(value)], source)


def _wrap_set(builder: VariableBuilder, value: set, source: Source) -> VariableTracker:
    """A set of constants: guarded by its type and its items in iteration order."""
    guards = builder.tx.guards
    guards.type_match(source, value)
    guards.set_items(source, list(value))
    return SetVariable([wrap_constant(v) for v in value], source=source)


def _wrap_collection(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """A deque, OrderedDict or defaultdict from the inputs: read through its items."""
    guards = builder.tx.guards
    guards.type_match(source, value)
    if type(value) is collections.deque:
        guards.length_check(source, len(value))
        guards.constant_match(AttrSource(source, "maxlen"), value.maxlen)
        items = [builder.wrap(v, ItemSource(source, i)) for i, v in enumerate(value)]
        return DequeVariable(items, source, maxlen=value.maxlen)
    if value and type(value) is collections.defaultdict and \
            all(type(k) in (torch.Tensor, torch.nn.Parameter) for k in value):
        items = _tensor_keyed_items(builder, value, source)
    elif not all(is_constant_value(k) for k in value):
        return UserObjectVariable(value, source)
    else:
        guards.dict_keys(source, list(value))
        items = {k: builder.wrap(v, ItemSource(source, k)) for k, v in value.items()}
    if type(value) is collections.OrderedDict:
        return OrderedDictVariable(items, source)
    factory = builder.wrap(value.default_factory, AttrSource(source, "default_factory"))
    return DefaultDictVariable(items, factory, source)


def _tensor_keyed_items(builder: VariableBuilder, value: dict,
                        source: Source) -> dict[TensorKey, VariableTracker]:
    """The items of a dict keyed by tensors (an optimizer's state, keyed by its parameters): its
    length is guarded; a key the trace read before (a parameter) has its value looked up by it
    (a guard that reads the value fails where the key is missing); any other key is a tensor
    input read at its position, and its value too."""
    builder.tx.guards.length_check(source, len(value))
    items = {}
    for position, (key, item) in enumerate(value.items()):
        existing = builder.tx.output.input_for(key)
        if existing is not None:  # a parameter read before: its entry is looked up by it
            tracker = builder._by_source[existing.source]
            item_source: Source = KeyedItemSource(source, existing.source)
        else:
            tracker = builder.wrap(key, DictKeySource(source, position))
            item_source = DictValueSource(source, position)
        items[TensorKey(key, tracker)] = builder.wrap(item, item_source)
    return items


def _wrap_weakref(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """A weak reference: pinned by identity; calling it gives its object's tracker."""
    builder.tx.guards.id_match(source, value)
    return WeakRefVariable(value, source)


def _wrap_stand_in(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """A real partial or itemgetter from the inputs, as an object of its polyfill class."""
    stand_in = stand_in_class(value)
    state, readable = stand_in._graphlift_state(value)
    if readable:  # partial: func, args and keywords are attributes of the real object
        builder.tx.guards.type_match(source, value)
        attrs = {k: builder.wrap(v, AttrSource(source, k)) for k, v in state.items()}
    else:  # immutable C objects without attributes: pinned by identity
        builder.tx.guards.id_match(source, value)
        attrs = {k: wrap_constant(v) for k, v in state.items()}
    obj = StandInObjectVariable(value, source, cls=stand_in)
    obj.attrs.update(attrs)
    return obj


def _wrap_grad_mode_exit(builder: VariableBuilder, value: GradModeExit,
                         source: Source) -> VariableTracker:
    """A resume function that starts inside a grad-mode with block: the block's ``__exit__``."""
    builder.tx.guards.id_match(source, value)
    manager = GradModeVariable(torch.is_grad_enabled(), previous=value.previous)
    return ContextMethodVariable(manager, "__exit__")


def _wrap_python_module(builder: VariableBuilder, value: types.ModuleType,
                        source: Source) -> VariableTracker:
    """A Python module, pinned by identity; its attributes are read (and guarded) through it."""
    builder.tx.guards.id_match(source, value)
    return PythonModuleVariable(value, source)


def _wrap_callable(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """A function, method or class: the trace rules decide its tracker."""
    guards = builder.tx.guards
    if type(value) is types.FunctionType and value.__globals__ is builder.tx.f_globals:
        # By code, not identity: a closure made anew for each call is the same function
        # to the trace, whose cells and defaults are read (and guarded) through sources.
        guards.type_match(source, value)
        guards.id_match(AttrSource(source, "__code__"), value.__code__)
        guards.same_globals(AttrSource(source, "__globals__"))
    elif not isinstance(value, types.MethodType):  # new on every attribute read: its
        guards.id_match(source, value)  # __func__ and __self__ are guarded instead
    return wrap_callable(builder.tx, value, source)


def _wrap_lru_cache(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """A ``functools.lru_cache`` wrapper, pinned by identity (calls trace the wrapped function)."""
    builder.tx.guards.id_match(source, value)
    return LruCacheVariable(value, source)


def _wrap_nn_module(builder: VariableBuilder, value: torch.nn.Module,
                    source: Source) -> VariableTracker:
    """An ``nn.Module``, pinned by identity or guarded by its structure: see nn_module."""
    return wrap_module(builder.tx, value, source)


def _wrap_enum(builder: VariableBuilder, value: enum.Enum, source: Source) -> VariableTracker:
    """An enum member: a singleton, compared by identity and never changed."""
    builder.tx.guards.id_match(source, value)
    return ConstantVariable(value, source)


def _wrap_distributed(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """A process group, ``dist.group``, a reduce op or a modelled torch.distributed function:
    pinned by identity (see variables/distributed.py)."""
    return wrap_distributed(builder.tx, value, source)


def _wrap_environ(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """``os.environ``, pinned by identity; each variable read is guarded on its value."""
    builder.tx.guards.id_match(source, value)
    return EnvironVariable(value, source)


def _wrap_object(builder: VariableBuilder, value: Any, source: Source) -> VariableTracker:
    """Any other object: guarded by its type, its attributes read (and guarded) through it."""
    builder.tx.guards.type_match(source, value)
    return UserObjectVariable(value, source)


def _is_tensor_method(value: Any) -> bool:
    """A method bound to a tensor (``x.add``), a C method object."""
    return isinstance(value, types.BuiltinMethodType) and \
        isinstance(getattr(value, "__self__", None), torch.Tensor)


def builtin_descriptor(method: Any) -> Any:
    """The C method of a builtin type (``dict.get``) that ``method`` is bound from, or None."""
    if not isinstance(method, types.BuiltinMethodType) or \
            isinstance(method.__self__, (type, types.ModuleType)):
        return None
    descriptor = lookup_class_attr(type(method.__self__), method.__name__)
    if not trace_rules.is_builtin_method(descriptor):
        return None
    return descriptor if descriptor.__get__(method.__self__) == method else None


def _is_sequence(value: Any) -> bool:
    """A list, a tuple or a namedtuple (not a subclass of list or of tuple otherwise)."""
    return type(value) in (list, tuple) or \
        (isinstance(value, tuple) and hasattr(type(value), "_fields"))


def _is_constant_keyed_dict(value: Any) -> bool:
    """A plain dict whose keys are all constants (so they can be guarded by value)."""
    return type(value) is dict and all(is_constant_value(k) for k in value)


def is_identity_key(key: Any) -> bool:
    """A dict key that compares by identity and hashes the same for its whole life: a class
    (whose metaclass keeps type's ``==`` and hash), a function, a builtin function of a module,
    a builtin type's method (``str.upper``), a module, an enum member, a special form of typing
    (``Union``, ``Literal``: singletons that compare by identity), or a tuple of such and of
    constants."""
    if type(key) is tuple:
        return all(is_constant_value(item) or is_identity_key(item) for item in key)
    if isinstance(key, type):
        meta = type(key)
        return meta.__eq__ is type.__eq__ and meta.__hash__ is type.__hash__
    if isinstance(key, types.BuiltinFunctionType):
        return key.__self__ is None or isinstance(key.__self__, types.ModuleType)
    return isinstance(key, (types.FunctionType, types.ModuleType, enum.Enum,
                            types.MethodDescriptorType, types.WrapperDescriptorType,
                            typing._SpecialForm))


def _is_registry_dict(value: Any) -> bool:
    """A plain dict keyed by constants and by objects of :func:`is_identity_key`."""
    return type(value) is dict and \
        all(is_constant_value(k) or is_identity_key(k) for k in value)


# -- the wrap table ------------------------------------------------------------------------------
# (test of the value, build of its guards and tracker), in priority order: VariableBuilder._wrap
# calls the build of the first row whose test matches.
WRAP_ROWS = (
    # Graph inputs, and the commonest input: first.
    (lambda v: isinstance(v, torch.Tensor), _wrap_tensor),
    # Before the callable row, which would pin a method object that is new on every read.
    (_is_tensor_method, _wrap_tensor_method),
    # Before the callable row, like the tensor methods: ``d.get`` of a dict or user object.
    (lambda v: builtin_descriptor(v) is not None, _wrap_builtin_method),
    # An ndarray (config.trace_numpy): a graph input over its memory; other arrays are objects.
    (is_traceable_array, _wrap_ndarray),
    # Before the constant row, where it falls back to; exact types, so a bool is no int symbol.
    (lambda v: type(v) in (int, float), _wrap_number),
    # Before the constant row: guarded when first used, so a scalar never read costs no guard.
    (lambda v: type(v) in (bool, str, type(None)), _wrap_lazy),
    # Before the sequence row, so a tuple of constants is one constant, not a tuple of items.
    (is_constant_value, _wrap_constant),
    # A namedtuple is a tuple that keeps its class; a list or tuple subclass is an object.
    (_is_sequence, _wrap_sequence),
    # A dict keyed by anything else (objects, tensors) falls to the object row.
    (_is_constant_keyed_dict, _wrap_dict),
    # A dict keyed by classes, functions, modules or enum members: keys guarded by identity.
    (_is_registry_dict, _wrap_registry_dict),
    # Exact types: keys(), values() and items() of a plain dict (an OrderedDict's are objects).
    (lambda v: type(v) in DICT_VIEW_TYPES, _wrap_dict_view),
    # A set of anything else (objects, tensors) falls to the object row.
    (lambda v: type(v) is set and all(is_constant_value(i) for i in v), _wrap_set),
    # Exact types (an OrderedDict is not a plain dict above); subclasses are objects.
    (lambda v: type(v) in _COLLECTIONS, _wrap_collection),
    # Before the object row: a C partial or itemgetter becomes an object of its polyfill.
    (lambda v: stand_in_class(v) is not None, _wrap_stand_in),
    # Before the object row: graphlift's own callable object, modelled as the block's exit.
    (lambda v: isinstance(v, GradModeExit), _wrap_grad_mode_exit),
    # Before the object row: a module is pinned by identity, not by type.
    (lambda v: isinstance(v, types.ModuleType), _wrap_python_module),
    # Before the callable and object rows: a process group, dist.group, a collective, pinned
    # by identity (variables/distributed.py).
    (is_distributed_value, _wrap_distributed),
    # Functions, methods, classes. Before the nn.Module row: a module given to allow_in_graph,
    # or one of a skipped library, goes by the trace rules.
    (is_classified_callable, _wrap_callable),
    # Before the object row: a module's parameters and submodules are pinned through it.
    (lambda v: isinstance(v, torch.nn.Module), _wrap_nn_module),
    # Before the object row: an lru_cache'd function is called like the function it wraps.
    (lambda v: isinstance(v, functools._lru_cache_wrapper), _wrap_lru_cache),
    # Members are singletons, pinned by identity; an IntEnum member is no exact int, so it
    # comes this far.
    (lambda v: isinstance(v, enum.Enum), _wrap_enum),
    # After the enum row (a str-mixin enum member is a str subclass): a user object that is
    # also a dict, list, tuple... (a transformers ModelOutput, a registry dict).
    (is_builtin_subclass_object, wrap_builtin_subclass),
    # Before the object row: reads fold, guarded on the variable's value.
    (lambda v: v is os.environ, _wrap_environ),
    # A weak reference (a closure cell of LRScheduler's wrapper of optimizer.step): pinned by
    # identity, so its object is the one it had while tracing.
    (lambda v: type(v) is weakref.ref, _wrap_weakref),
    # Last, and matches everything: any other object is a user object.
    (lambda v: True, _wrap_object),
)


def _has_identity(value: Any) -> bool:
    """Objects whose identity matters to a trace that mutates them: lists, dicts, sets, user
    objects."""
    return type(value) in (list, dict, set) or (
        not isinstance(value, (torch.Tensor, type, types.ModuleType, types.FunctionType,
                               types.BuiltinFunctionType, tuple, frozenset, enum.Enum))
        and not is_constant_value(value) and has_instance_dict(value))


def wrap_unguarded(tx: Translator, value: Any) -> VariableTracker:
    """Wrap a value reached through something already guarded (torch's namespace, a constant):
    the build of the first row of ``UNGUARDED_ROWS`` whose test matches."""
    build = next(build for test, build in UNGUARDED_ROWS if test(value))
    return build(tx, value)


# -- the builds of UNGUARDED_ROWS: trackers without a source, so without guards ---------------
def _refuse_tensor(tx: Translator, value: torch.Tensor) -> VariableTracker:
    """A tensor: refused, since a graph input needs a source to be fed from and guarded at."""
    raise Unsupported("a tensor reached without a source cannot become a graph input")


def _unguarded_constant(tx: Translator, value: Any) -> VariableTracker:
    """A constant or an enum member."""
    return ConstantVariable(value)


def _unguarded_python_module(tx: Translator,
                             value: types.ModuleType) -> VariableTracker:
    """A Python module, its attributes read through it."""
    return PythonModuleVariable(value)


def _unguarded_tuple(tx: Translator, value: tuple) -> VariableTracker:
    """A tuple, its items wrapped unguarded too."""
    return TupleVariable([wrap_unguarded(tx, v) for v in value])


def _unguarded_dict(tx: Translator, value: dict) -> VariableTracker:
    """A dict with constant keys, its values wrapped unguarded too."""
    return DictVariable({k: wrap_unguarded(tx, v) for k, v in value.items()})


def _unguarded_nn_module(tx: Translator, value: torch.nn.Module) -> VariableTracker:
    """An ``nn.Module``."""
    return NNModuleVariable(value)


def _unguarded_lru_cache(tx: Translator, value: Any) -> VariableTracker:
    """A ``functools.lru_cache`` wrapper."""
    return LruCacheVariable(value)


def _unguarded_environ(tx: Translator, value: Any) -> VariableTracker:
    """``os.environ``: each variable read guards its own value."""
    return EnvironVariable(value)


def _unguarded_weakref(tx: Translator, value: Any) -> VariableTracker:
    """A weak reference: calling it gives the tracker of its object (see WeakRefVariable)."""
    return WeakRefVariable(value)


def _unguarded_object(tx: Translator, value: Any) -> VariableTracker:
    """Any other object, its attributes read through it."""
    return UserObjectVariable(value)


# (test of the value, build of its tracker), in priority order: wrap_unguarded calls the build
# of the first row whose test matches.
UNGUARDED_ROWS = (
    # First: a tensor is never wrapped without a source.
    (lambda v: isinstance(v, torch.Tensor), _refuse_tensor),
    # Before the tuple row, so a tuple of constants is one constant.
    (is_constant_value, _unguarded_constant),
    # Reached through a guarded namespace (torch.nn through torch): no guard of its own.
    (lambda v: isinstance(v, types.ModuleType), _unguarded_python_module),
    # Before the callable and object rows, as in WRAP_ROWS.
    (is_distributed_value, wrap_distributed),
    # Functions, methods and classes: the trace rules (wrap_callable takes no source here).
    # Before the nn.Module row, as in WRAP_ROWS.
    (is_classified_callable, wrap_callable),
    # Of classes, say: graphlift's polyfills read such globals.
    (lambda v: type(v) is tuple, _unguarded_tuple),
    # A class attribute such as a dataclass's __dataclass_fields__ (read, never written).
    (_is_constant_keyed_dict, _unguarded_dict),
    # Before the object row: its parameters and submodules are read through it.
    (lambda v: isinstance(v, torch.nn.Module), _unguarded_nn_module),
    # An lru_cache'd function reached through a guarded module.
    (lambda v: isinstance(v, functools._lru_cache_wrapper), _unguarded_lru_cache),
    # Members are singletons: constants (an IntEnum member is not an exact int).
    (lambda v: isinstance(v, enum.Enum), _unguarded_constant),
    # Reached through a guarded os module: each read is guarded on its own.
    (lambda v: v is os.environ, _unguarded_environ),
    # A closure's weak reference to a program object (LRScheduler's to its optimizer).
    (lambda v: type(v) is weakref.ref, _unguarded_weakref),
    # Last, and matches everything: any other object is a user object.
    (lambda v: True, _unguarded_object),
)


# Containers of the collections module that have their own trackers.
_COLLECTIONS = (collections.deque, collections.OrderedDict, collections.defaultdict)


# C classes whose objects have a polyfill class standing in for them (partial, itemgetter...).
_STAND_INS = {cls: stand_in for cls, stand_in in POLYFILLS.items()
              if isinstance(cls, type) and hasattr(stand_in, "_graphlift_state")}


def stand_in_class(value: Any) -> type | None:
    """The polyfill class standing in for ``value``'s C class, if polyfills are on."""
    stand_in = _STAND_INS.get(type(value))
    return stand_in if stand_in is not None and config.use_polyfills else None
