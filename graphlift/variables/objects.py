"""Python modules, classes and objects of user classes met while tracing.

Objects read from the inputs are guarded by type and read attribute by attribute; objects created
inside the frame (``Point(1, 2)``, a dataclass) are modelled entirely: their attributes live in
the tracker and are rebuilt if the object leaves the frame.
"""

from __future__ import annotations

import collections
import enum
import functools
import logging
import operator
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from graphlift import trace_rules
from graphlift.exc import Unsupported
from graphlift.guards import has_instance_dict, instance_dict
from graphlift.rebuild import Codegen
from graphlift.sources import AttrSource, EnvironSource
from graphlift.trace_rules import is_torch_module
from graphlift.variables.base import (
    MISSING,
    TracedException,
    VariableTracker,
    lookup_class_attr,
    raise_real,
)
from graphlift.variables.constant import ConstantVariable, is_constant_value, wrap_constant
from graphlift.variables.containers import DictVariable, TupleVariable
from graphlift.variables.context import (
    DisableTorchFunctionSubclassVariable,
    GradModeVariable,
    make_autocast,
    make_inference_mode,
    set_grad_mode,
)
from graphlift.variables.exceptions import ExceptionVariable
from graphlift.variables.functions import (
    UserFunctionVariable,
    UserMethodVariable,
    definition_source,
)
from graphlift.variables.methods import call_builtin_method
from graphlift.variables.symbolic import SymNodeVariable
from graphlift.variables.tensor import TensorVariable

# Iterating a user object stops being traced after this many items (an endless iterator).
MAX_ITERATION = 10_000
# 3.13 says why a new attribute cannot be set on an object without a __dict__.
_NO_DICT_TO_SET = " and no __dict__ for setting new attributes" if sys.version_info >= (3, 13) \
    else ""


def _no_attribute_to_delete(cls: type, name: str) -> AttributeError:
    """What ``del obj.name`` raises when the instance dict has no ``name``."""
    if sys.version_info[:2] == (3, 10):
        return AttributeError(name)
    if sys.version_info[:2] in ((3, 11), (3, 12), (3, 13)):
        return AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")
    raise NotImplementedError(f"del obj.name's message on Python {sys.version_info[:2]}")


def is_user_class(cls: type) -> bool:
    module = getattr(cls, "__module__", "") or ""
    return module not in ("builtins",) and not module.startswith("torch")


def guard_class_attr(tx, cls: type, name: str, attr: Any, source=None,
                     start_after: type | None = None) -> None:
    """Guard that ``name`` looked up on ``cls`` still gives ``attr`` (MISSING: still nothing),
    so that ``K.a = 7`` or ``Vec.__len__ = ...`` after the call recompiles. A function or a
    constant read through ``source`` is guarded there already; torch's classes and graphlift's
    polyfills are trusted not to be patched, as torch's namespaces are."""
    if source is not None and (isinstance(attr, types.FunctionType) or is_constant_value(attr)):
        return
    module = getattr(cls, "__module__", "") or ""
    if is_user_class(cls) and not module.startswith("graphlift"):
        tx.guards.class_attr(cls, name, attr, start_after)


# Modules of torch whose constant attributes are process-wide switches (guarded when read).
SWITCH_MODULES = ("torch.backends.",)


class PythonModuleVariable(VariableTracker):
    """``torch``, ``math``, a user module: attribute loads resolve to the real attribute."""

    def __init__(self, module: types.ModuleType, source=None) -> None:
        super().__init__(source)
        self.module = module

    def describe(self) -> str:
        return self.module.__name__

    def python_type(self) -> type:
        return types.ModuleType

    def var_getattr(self, tx, name):
        try:
            value = getattr(self.module, name)
        except AttributeError as error:
            if self.source is not None and not is_torch_module(self.module):
                tx.guards.attr_absent(self.source, name)  # hasattr(mod, name) was False
            raise Unsupported(f"module {self.module.__name__!r} has no attribute {name!r}",
                              break_type="user_exception") from error
        if is_constant_value(value) and self.module.__name__.startswith(SWITCH_MODULES):
            # torch.backends.cudnn.benchmark: a switch the user flips, not a fixed name.
            read = functools.partial(getattr, self.module, name)
            tx.guards.global_switch(read, f"{self.module.__name__}.{name}", value)
            return ConstantVariable(value)
        # torch's own namespaces are trusted not to be monkey-patched between calls.
        if self.source is None or is_torch_module(self.module):
            return tx.wrap_unguarded(value)
        return tx.builder.wrap(value, AttrSource(self.source, name))

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.module)


# Classmethods of torch's classes that a model stands in for, filled by the modules above this
# one: function -> build of the tracker of it bound to a class (torch.Tensor.__torch_function__,
# variables/torch_function.py).
CLASSMETHOD_MODELS: dict[Any, Callable[[type], VariableTracker]] = {}


def bind_class_attr(tx, obj: VariableTracker, cls: type, name: str, attr: Any,
                    attr_source) -> VariableTracker:
    """What ``obj.name`` gives for a class attribute ``attr``: methods bind, properties run."""
    if isinstance(attr, staticmethod):
        if attr_source is not None:  # the source reads the function itself: guarded by code
            return tx.builder.wrap(attr.__func__, attr_source)
        if not isinstance(attr.__func__, types.FunctionType):  # a C function made static
            return tx.wrap_unguarded(attr.__func__)  # (Tensor._make_subclass): the rules decide
        return UserFunctionVariable(attr.__func__)
    if isinstance(attr, classmethod):
        model = CLASSMETHOD_MODELS.get(attr.__func__)
        if model is not None:
            return model(cls)
        if not isinstance(attr.__func__, types.FunctionType):  # the same, made a classmethod
            return tx.wrap_unguarded(attr.__get__(None, cls))
        return UserMethodVariable(UserFunctionVariable(attr.__func__), ClassVariable(cls))
    if isinstance(attr, property):
        if attr.fget is None:
            raise Unsupported(f"unreadable property {cls.__qualname__}.{name}",
                              break_type="user_exception")
        return UserFunctionVariable(attr.fget).call(tx, [obj], {})
    if isinstance(attr, types.FunctionType):
        if attr_source is not None:
            fn = tx.builder.wrap(attr, attr_source)
        elif trace_rules.override(attr) is not None:  # a disabled method: a break when called
            fn = tx.wrap_unguarded(attr)
        else:
            fn = UserFunctionVariable(attr)
        return UserMethodVariable(fn, obj)
    if isinstance(attr, C_DESCRIPTORS) and (trace_rules.is_builtin_method(attr) or
                                            attr in TYPE_CHECKS):
        return BuiltinMethodVariable(attr, obj)
    if isinstance(obj, ClassVariable) and isinstance(attr, types.MethodDescriptorType) and \
            issubclass(cls, torch._C.TensorBase):
        return tx.wrap_unguarded(attr)  # torch.Tensor.add read on the class: the trace rules'
    if isinstance(lookup_class_attr(type(attr), "__get__"), types.FunctionType):
        return _python_descriptor_get(tx, obj, cls, attr, attr_source)
    if hasattr(type(attr), "__get__") and not is_constant_value(attr):
        raise Unsupported(f"descriptor {cls.__qualname__}.{name} of type "
                          f"{type(attr).__name__} is not traced")
    return tx.wrap_unguarded(attr) if attr_source is None else tx.builder.wrap(attr, attr_source)


def _python_descriptor_get(tx, obj: VariableTracker, cls: type, attr: Any,
                           attr_source) -> VariableTracker:
    """``type(attr).__get__(attr, obj, cls)`` for a descriptor whose class is written in Python
    (``functools.cached_property``: its polyfill); read on the class, ``obj`` is None."""
    descriptor = tx.wrap_unguarded(attr) if attr_source is None else \
        tx.builder.wrap(attr, attr_source)
    getter = tx.wrap_unguarded(lookup_class_attr(type(attr), "__get__"))
    instance = ConstantVariable(None) if isinstance(obj, ClassVariable) else obj
    return getter.call(tx, [descriptor, instance, ClassVariable(cls)], {})


class ClassVariable(VariableTracker):
    """A class used as a value: ``isinstance`` checks, construction, class attributes."""

    callable_kind = True

    def __init__(self, cls: type, source=None) -> None:
        super().__init__(source)
        self.cls = cls

    def describe(self) -> str:
        return self.cls.__qualname__

    def python_type(self) -> type:
        return type(self.cls)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.cls

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return wrap_constant(getattr(self.cls, name))
        attr = lookup_class_attr(self.cls, name)
        # Through the class's source, the value read is guarded: ``C.scale = 3`` is seen.
        source = AttrSource(self.source, name) if self.source is not None else None
        guard_class_attr(tx, self.cls, name, attr, source)
        if attr is MISSING:
            if source is not None:
                tx.guards.attr_absent(self.source, name)
            raise Unsupported(f"type object {self.cls.__qualname__!r} has no attribute {name!r}",
                              break_type="user_exception")
        if isinstance(attr, types.FunctionType):  # unbound: called with an explicit self
            return UserFunctionVariable(attr) if source is None else tx.builder.wrap(attr, source)
        if isinstance(attr, C_DESCRIPTORS) and trace_rules.is_builtin_method(attr):
            return tx.wrap_unguarded(attr)  # unbound: ``Registry.get(self, k)``
        if isinstance(attr, types.ClassMethodDescriptorType):
            return tx.wrap_unguarded(attr.__get__(None, self.cls))  # ``Registry.fromkeys``
        if isinstance(attr, property):
            raise Unsupported("property object read from a class")
        return bind_class_attr(tx, self, self.cls, name, attr, source)

    def has_attr(self, tx, name: str) -> bool:
        """``hasattr(cls, name)``: in the class's MRO, else in its metaclass's; guarded both
        ways, so a ``Box.flag = 5`` after the call is seen."""
        attr = lookup_class_attr(self.cls, name)
        guard_class_attr(tx, self.cls, name, attr)
        if attr is not MISSING:
            return True
        meta = type(self.cls)
        meta_attr = lookup_class_attr(meta, name)
        guard_class_attr(tx, meta, name, meta_attr)
        if meta_attr is not MISSING:
            return True
        if lookup_class_attr(meta, "__getattr__") is not MISSING:
            raise Unsupported(f"hasattr() on {self.cls.__qualname__}, whose metaclass "
                              f"{meta.__qualname__} defines __getattr__")
        return False

    def call(self, tx, args, kwargs):
        constructor = CONSTRUCTORS.get(self.cls)
        if constructor is not None:
            return constructor(tx, args, kwargs)
        if isinstance(self.cls, enum.EnumMeta) and len(args) == 1 and not kwargs and \
                args[0].is_constant():  # Color(2): the member of that value (a singleton)
            try:
                return ConstantVariable(self.cls(args[0].as_constant()))
            except ValueError as error:
                raise raise_real(error) from error
        if issubclass(self.cls, tuple) and hasattr(self.cls, "_fields"):
            return _make_namedtuple(tx, self.cls, args, kwargs)
        if issubclass(self.cls, BaseException):
            return ExceptionVariable(self.cls, args)
        decision = trace_rules.lookup(self.cls)
        if decision.kind is trace_rules.Kind.SKIP:
            raise trace_rules.skip_error(self.cls, decision)
        if is_user_class(self.cls) and not issubclass(self.cls, torch.nn.Module):
            return _make_object(tx, self.cls, args, kwargs)
        constructor = _found_constructor(self.cls)
        if constructor is not None:
            return constructor(tx, args, kwargs)
        raise Unsupported(f"constructing {self.cls.__qualname__} while tracing",
                          break_type="unsupported_call")

    def unpack(self, tx) -> list[VariableTracker]:
        """The members of an enum class (fixed when the class was made; the class is pinned)."""
        if not isinstance(self.cls, enum.EnumMeta):
            return super().unpack(tx)
        return [ConstantVariable(member) for member in self.cls]

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.constant(self.cls)


def _fold_constructor(cls: type):
    def construct(tx, args, kwargs):
        values = [a.as_constant() for a in args]
        return wrap_constant(cls(*values, **{k: v.as_constant() for k, v in kwargs.items()}))

    return construct


def _fold_object(cls: type):
    """An immutable object of constants: built for real, its attributes read as constants."""
    def construct(tx, args, kwargs):
        values = [a.as_constant() for a in args]
        return ConstantVariable(cls(*values, **{k: v.as_constant() for k, v in kwargs.items()}))

    return construct


def _grad_mode(mode: bool):
    def construct(tx, args, kwargs):
        return GradModeVariable(mode)

    return construct


def _autocast(tx, args, kwargs):
    return make_autocast(tx, args, kwargs)


def _set_grad_enabled(tx, args, kwargs):
    """``torch.set_grad_enabled(b)`` switches at construction, as a statement or a with block."""
    mode = bool((args[0] if args else kwargs["mode"]).as_constant())
    manager = GradModeVariable(mode, applied_now=True, previous=torch.is_grad_enabled())
    set_grad_mode(tx, mode)
    return manager


# Classes with their own construction rule. One row per class.
CONSTRUCTORS = {
    torch.no_grad: _grad_mode(False),  # with torch.no_grad(): grad mode off inside
    torch.enable_grad: _grad_mode(True),  # with torch.enable_grad(): grad mode on inside
    torch.set_grad_enabled: _set_grad_enabled,  # switches immediately; restores on __exit__
    torch.autocast: lambda tx, args, kwargs: _autocast(tx, args, kwargs),  # enter/exit nodes
    torch.inference_mode: make_inference_mode,  # enter/exit nodes, like autocast
    # with it, torch calls skip tensor subclasses' __torch_function__ (no node needed)
    torch._C.DisableTorchFunctionSubclass: lambda tx, args, kwargs:
        DisableTorchFunctionSubclassVariable(),
    torch.Size: _fold_constructor(torch.Size),  # torch.Size([2, 3]) is a constant
    torch.device: _fold_constructor(torch.device),  # torch.device("cpu") is a constant
    torch.finfo: _fold_object(torch.finfo),  # torch.finfo(dtype).eps: attributes are constants
    torch.iinfo: _fold_object(torch.iinfo),
}


def register_constructors(rows: dict[type, Any]) -> None:
    """Add construction rules for classes modelled by a module above this one (collections)."""
    CONSTRUCTORS.update(rows)
    trace_rules.MODELLED_CLASSES.update(rows)


# Rules for families of classes no table can list (user subclasses of a torch class): each takes
# the class and gives its construction rule, or None. Filled by modules above this one.
CONSTRUCTOR_FINDERS: list[Callable[[type], Any]] = []


def _found_constructor(cls: type) -> Any:
    for find in CONSTRUCTOR_FINDERS:
        constructor = find(cls)
        if constructor is not None:
            return constructor
    return None


trace_rules.MODELLED_CLASSES.update(CONSTRUCTORS)


def _make_namedtuple(tx, cls: type, args, kwargs):
    fields = cls._fields
    values = dict(zip(fields, args))
    values.update(kwargs)
    for name, default in getattr(cls, "_field_defaults", {}).items():
        values.setdefault(name, wrap_constant(default))
    if set(values) != set(fields):
        raise Unsupported(f"TypeError constructing {cls.__name__}", break_type="user_exception")
    return TupleVariable([values[f] for f in fields], tuple_class=cls)


def _make_object(tx, cls: type, args, kwargs):
    """``cls(*args)`` for a user class, as ``type.__call__`` does: ``__new__`` makes the object,
    then ``__init__`` runs on it when it is an instance of ``cls``."""
    guard_class_attr(tx, type(cls), "__call__", lookup_class_attr(type(cls), "__call__"))
    guard_class_attr(tx, cls, "__new__", lookup_class_attr(cls, "__new__"))
    if lookup_class_attr(type(cls), "__call__") is not type.__dict__["__call__"]:
        raise Unsupported(f"the metaclass {type(cls).__qualname__} of {cls.__qualname__} "
                          "defines __call__; not traced")
    disabled = trace_rules.override(lookup_class_attr(cls, "__init__"))
    if disabled is not None and disabled.kind is trace_rules.Kind.SKIP:
        raise trace_rules.skip_error(lookup_class_attr(cls, "__init__"), disabled)  # disable(cls)
    new = lookup_class_attr(cls, "__new__")
    if isinstance(new, staticmethod) and isinstance(new.__func__, types.FunctionType):
        obj = UserFunctionVariable(new.__func__).call(tx, [ClassVariable(cls), *args], kwargs)
        if not (isinstance(obj, UserObjectVariable) and issubclass(obj.cls, cls)):
            return obj  # __new__ gave something else: no __init__, as in Python
    elif new in BUILTIN_NEW:
        obj = new_object(tx, cls, args, kwargs)
    else:
        raise Unsupported(f"{cls.__qualname__}.__new__ of type {type(new).__name__} is not "
                          "traced")
    init = lookup_class_attr(obj.cls, "__init__")
    if isinstance(init, types.FunctionType):
        obj.var_getattr(tx, "__init__").call(tx, args, kwargs)
    elif init is object.__init__:
        if (args or kwargs) and not isinstance(new, staticmethod) and \
                builtin_base(obj.cls) is None:
            raise raise_real(TypeError(f"{cls.__name__}() takes no arguments"))
    else:
        BuiltinMethodVariable(init, obj).call(tx, args, kwargs)
    return obj


def new_object(tx, cls: type, args, kwargs) -> UserObjectVariable:
    """``base.__new__(cls, *args)`` for the builtin ``__new__`` that ``cls`` inherits: an empty
    object, or, for a builtin's subclass, one whose builtin part is made by the builtin."""
    if getattr(cls, "__abstractmethods__", ()):
        try:  # object.__new__ refuses before allocating: its message, in this Python's words
            object.__new__(cls)
        except TypeError as error:
            raise raise_real(error) from None
    base = builtin_base(cls)
    if base is None:
        return UserObjectVariable(None, cls=cls)
    return BUILTIN_SUBCLASS_NEW[base](tx, cls, args, kwargs)


# Builtins that user classes subclass, most derived first: the first one in a class's MRO is
# the kind of its objects' builtin part (variables/subclasses.py fills BUILTIN_SUBCLASS_NEW).
BUILTIN_BASES = (collections.OrderedDict, collections.defaultdict, dict, list, tuple, set,
                 frozenset, str, int, float)
BUILTIN_SUBCLASS_NEW: dict[type, Any] = {}
# The C __new__ of object and of each builtin base.
BUILTIN_NEW = frozenset({object.__new__, *(base.__new__ for base in BUILTIN_BASES)})


def builtin_base(cls: type) -> type | None:
    """The builtin base whose value objects of the user class ``cls`` also are, if any (not for
    named tuples and enums, which have their own trackers)."""
    if hasattr(cls, "_fields") or isinstance(cls, enum.EnumMeta):
        return None
    return next((klass for klass in cls.__mro__ if klass in BUILTIN_BASES), None)


class WeakRefVariable(VariableTracker):
    """A ``weakref.ref`` (a closure cell of LRScheduler's wrapper of ``optimizer.step`` holds
    one to its optimizer), pinned by identity or reached through a pinned function. A weak
    reference never changes its object, so calling it gives the trace's tracker of that
    object, which the frame must have reached through its inputs."""

    callable_kind = True

    def __init__(self, ref: Any, source=None) -> None:
        super().__init__(source)
        self.ref = ref

    def describe(self) -> str:
        return "weakref"

    def python_type(self) -> type:
        return type(self.ref)

    def call(self, tx, args, kwargs):
        target = self.ref()
        tracker = tx.builder.tracker_of(target) if target is not None else None
        if args or kwargs or tracker is None:
            raise Unsupported("calling a weak reference to an object the frame did not reach "
                              "through its inputs")
        return tracker


class UserObjectVariable(VariableTracker):
    """An object of a user class.

    With a ``value`` it was read from the inputs: its type is guarded and attributes are read from
    the real object. Without one it was created in the frame and ``attrs`` holds its state.

    Operators, subscripts, ``in``, ``len()``, iteration and truthiness go through the class's
    special methods, looked up on the class as Python does (:meth:`special_method`); attribute
    reads and stores go through ``__getattr__`` and ``__setattr__`` when the class defines them.
    """

    def __init__(self, value: Any, source=None, cls: type | None = None) -> None:
        super().__init__(source)
        self.value = value
        self.cls = cls if cls is not None else type(value)
        self.attrs: dict[str, VariableTracker] = {}
        self.is_new = value is None and cls is not None

    def describe(self) -> str:
        return self.cls.__qualname__

    def python_type(self) -> type:
        # A polyfill's stand-in object reports the C class it stands in for (functools.partial).
        return self.cls.__dict__.get("_graphlift_real_class", self.cls)

    # -- special methods -------------------------------------------------------------------------
    def special_method(self, tx, name: str) -> VariableTracker | None:
        """``type(self).name`` bound to this object, or None when the class has none (special
        methods are looked up on the class, never in the instance dict)."""
        attr = lookup_class_attr(self.cls, name)
        source = self._class_attr_source(name)
        guard_class_attr(tx, self.cls, name, attr, source)
        if attr is MISSING or attr is None:  # ``__hash__ = None`` declares the method absent
            return None
        return bind_class_attr(tx, self, self.cls, name, attr, source)

    def _class_attr_source(self, name: str):
        if self.source is not None:
            return AttrSource(AttrSource(self.source, "__class__"), name)
        if self.is_new and type(lookup_class_attr(self.cls, name)) in (list, dict):
            # A mutable class attribute (a strict dataclass's validators, which its __setattr__
            # reads) must be guarded to be traced: read through the class's path from its module.
            class_source = definition_source(self.cls)
            return AttrSource(class_source, name) if class_source is not None else None
        return None

    def call_builtin_method(self, tx, owner: type, name: str, args: list[VariableTracker],
                            kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``owner.name(self, *args)`` for a C method of a builtin type (``super().__setattr__``,
        ``object.__eq__``); subclasses of builtins apply their builtin's methods."""
        row = OBJECT_METHODS.get(name) if owner is object else None
        if row is None:
            raise Unsupported(f"{owner.__name__}.{name} on a {self.cls.__qualname__} object is "
                              "not traced")
        if kwargs:
            raise raise_real(TypeError(f"{name}() takes no keyword arguments"))
        return row(tx, self, *args)

    def truthy(self, tx) -> bool:
        method = self.special_method(tx, "__bool__")
        if method is not None:
            result = method.call(tx, [], {})
            if not result.is_constant():
                raise Unsupported(f"{self.cls.__qualname__}.__bool__ returned {result!r}",
                                  break_type="data_dependent_branch")
            if not isinstance(result.as_constant(), bool):
                raise raise_real(TypeError(f"__bool__ should return bool, returned "
                                           f"{type(result.as_constant()).__name__}"))
            return result.as_constant()
        if self.special_method(tx, "__len__") is not None:
            return self.length(tx).as_constant() != 0
        return True

    def length(self, tx) -> VariableTracker:
        """``len(self)``: the class's ``__len__``, which must give a non-negative int."""
        method = self.special_method(tx, "__len__")
        if method is None:
            raise raise_real(TypeError(f"object of type '{self.cls.__name__}' has no len()"))
        result = method.call(tx, [], {})
        if isinstance(result, SymNodeVariable):
            return result
        value = result.as_constant()
        if not isinstance(value, int):
            raise raise_real(TypeError(f"'{type(value).__name__}' object cannot be interpreted "
                                       "as an integer"))
        if value < 0:
            raise raise_real(ValueError("__len__() should return >= 0"))
        return ConstantVariable(int(value))

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        method = self.special_method(tx, "__getitem__")
        if method is None:
            raise raise_real(TypeError(f"'{self.cls.__name__}' object is not subscriptable"))
        return method.call(tx, [index], {})

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        method = self.special_method(tx, "__setitem__")
        if method is None:
            raise raise_real(TypeError(f"'{self.cls.__name__}' object does not support item "
                                       "assignment"))
        method.call(tx, [index, value], {})

    def delitem(self, tx, index: VariableTracker) -> None:
        method = self.special_method(tx, "__delitem__")
        if method is None:
            raise raise_real(TypeError(f"'{self.cls.__name__}' object doesn't support item "
                                       "deletion"))
        method.call(tx, [index], {})

    def contains(self, tx, item: VariableTracker) -> bool:
        """``item in self``: ``__contains__``, else a search of what iterating gives."""
        method = self.special_method(tx, "__contains__")
        if method is not None:
            return method.call(tx, [item], {}).truthy(tx)
        if self.special_method(tx, "__iter__") is None and \
                self.special_method(tx, "__getitem__") is None:
            raise raise_real(TypeError(f"argument of type '{self.cls.__name__}' is not "
                                       "iterable"))
        # As PyObject_RichCompareBool: identity first, then element == item.
        return any(tx.is_same(element, item) or tx.compare("==", element, item).truthy(tx)
                   for element in self.unpack(tx))

    def unpack(self, tx) -> list[VariableTracker]:
        """Iterate the object: its ``__iter__``, else ``__getitem__`` from 0 to IndexError."""
        method = self.special_method(tx, "__iter__")
        if method is None:
            if self.special_method(tx, "__getitem__") is not None:
                return self._drain_sequence(tx)
            raise raise_real(TypeError(f"'{self.cls.__name__}' object is not iterable"))
        iterator = method.call(tx, [], {})
        if isinstance(iterator, UserObjectVariable):
            return iterator.drain(tx)
        return iterator.unpack(tx)

    def _drain_sequence(self, tx) -> list[VariableTracker]:
        items: list[VariableTracker] = []
        while len(items) < MAX_ITERATION:
            try:
                items.append(self.getitem(tx, ConstantVariable(len(items))))
            except TracedException as error:
                if issubclass(error.cls, (IndexError, StopIteration)):
                    return items
                raise
        raise Unsupported(f"iterating a {self.cls.__qualname__} gave more than {MAX_ITERATION} "
                          "items while tracing")

    def drain(self, tx) -> list[VariableTracker]:
        """Call ``__next__`` until it raises StopIteration (bounded, like every loop traced)."""
        next_method = self.special_method(tx, "__next__")
        if next_method is None:
            raise raise_real(TypeError(f"iter() returned non-iterator of type "
                                       f"'{self.cls.__name__}'"))
        items = []
        while len(items) < MAX_ITERATION:
            try:
                items.append(next_method.call(tx, [], {}))
            except TracedException as error:
                if issubclass(error.cls, StopIteration):
                    return items
                raise
        raise Unsupported(f"iterating a {self.cls.__qualname__} gave more than {MAX_ITERATION} "
                          "items while tracing")

    # -- attributes ------------------------------------------------------------------------------
    def var_getattr(self, tx, name):
        getattribute = lookup_class_attr(self.cls, "__getattribute__")
        try:
            if isinstance(getattribute, types.FunctionType):  # PretrainedConfig's aliases
                method = self.special_method(tx, "__getattribute__")
                return method.call(tx, [ConstantVariable(name)], {})
            if not isinstance(getattribute, types.WrapperDescriptorType):
                raise Unsupported(f"{self.cls.__qualname__}.__getattribute__ of type "
                                  f"{type(getattribute).__name__} is not traced")
            if not trace_rules.is_builtin_method(getattribute):
                return self._c_getattr(tx, name)
            return self.generic_getattr(tx, name)
        except TracedException as error:
            # Python calls __getattr__ when the normal lookup raised AttributeError.
            hook = lookup_class_attr(self.cls, "__getattr__")
            if not issubclass(error.cls, AttributeError) or \
                    not isinstance(hook, types.FunctionType):
                raise
            return self.special_method(tx, "__getattr__").call(tx, [ConstantVariable(name)], {})

    def _c_getattr(self, tx, name: str) -> VariableTracker:
        """The lookup of a C class with its own ``tp_getattro`` (a ContextVar): the generic
        one, except that a name it does not find may still exist (a graph break)."""
        try:
            return self.generic_getattr(tx, name)
        except TracedException as error:
            if issubclass(error.cls, AttributeError):
                raise Unsupported(f"attribute {name!r} of a {self.cls.__qualname__} object, "
                                  "whose class looks attributes up in C") from None
            raise

    def generic_getattr(self, tx, name: str) -> VariableTracker:
        """``object.__getattribute__(self, name)``: data descriptors, the instance dict, then
        the class."""
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return ClassVariable(self.cls)
        if name == "__dict__":
            return self._instance_dict(tx)
        if name in trace_rules.DEFERRED_LOGGER_METHODS and issubclass(self.cls, logging.Logger):
            return DeferredMethodVariable(self, name)
        class_attr = lookup_class_attr(self.cls, name)
        data_descriptor = hasattr(type(class_attr), "__set__")
        if not data_descriptor and not self.is_new:
            own = instance_dict(self.value)
            if name in own:
                return self._wrap_attr(tx, name, own[name])
        if isinstance(class_attr, types.MemberDescriptorType) and not self.is_new:
            try:  # a __slots__ attribute of an object from the inputs: read it for real
                return self._wrap_attr(tx, name, class_attr.__get__(self.value, self.cls))
            except AttributeError as error:
                self._guard_absent(tx, name)
                raise raise_real(error) from error
        # Not in the instance: the class's (or its absence), which may change after the call.
        guard_class_attr(tx, self.cls, name, class_attr, self._class_attr_source(name))
        if class_attr is MISSING or (isinstance(class_attr, types.MemberDescriptorType) and
                                     self.is_new):
            self._guard_absent(tx, name)
            raise raise_real(AttributeError(
                f"{self.cls.__name__!r} object has no attribute {name!r}"))
        source = self._class_attr_source(name)
        if source is not None and not data_descriptor and has_instance_dict(self.value):
            tx.guards.not_shadowed(self.source, name)  # o.method = ... later would win
        return bind_class_attr(tx, self, self.cls, name, class_attr, source)

    def _guard_absent(self, tx, name: str) -> None:
        """The object from the inputs has no attribute ``name``: a later call's object may.

        ``hasattr`` would run a ``__getattr__`` or ``__getattribute__`` of the class's own; for
        those classes the guard is that the instance dict does not hold the name (the class,
        whose type is guarded, has no such attribute)."""
        if self.source is None or self.is_new:
            return
        hooks = (lookup_class_attr(self.cls, "__getattr__"),
                 lookup_class_attr(self.cls, "__getattribute__"))
        if not any(isinstance(hook, types.FunctionType) for hook in hooks):
            tx.guards.attr_absent(self.source, name)
        elif has_instance_dict(self.value) and lookup_class_attr(self.cls, name) is MISSING:
            tx.guards.not_shadowed(self.source, name)
        else:
            raise Unsupported(f"the absence of {name!r} on {self!r}, whose class looks "
                              "attributes up in Python, cannot be guarded")

    def _instance_dict(self, tx) -> VariableTracker:
        if lookup_class_attr(self.cls, "__dict__") is MISSING:
            raise raise_real(AttributeError(
                f"{self.cls.__name__!r} object has no attribute '__dict__'"))
        if not self.is_new:
            return InputInstanceDictVariable(self)
        return InstanceDictVariable(self)

    def _wrap_attr(self, tx, name: str, value: Any) -> VariableTracker:
        if self.source is None:
            return tx.wrap_unguarded(value)
        return tx.builder.wrap(value, AttrSource(self.source, name))

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``self.name = value``: the class's ``__setattr__`` if it defines one in Python."""
        setter = lookup_class_attr(self.cls, "__setattr__")
        if isinstance(setter, types.FunctionType):
            self.special_method(tx, "__setattr__").call(tx, [ConstantVariable(name), value], {})
        elif setter is object.__setattr__:
            self.generic_setattr(tx, name, value)
        else:
            raise Unsupported(f"{self.cls.__qualname__}.__setattr__ of type "
                              f"{type(setter).__name__} is not traced")

    def generic_setattr(self, tx, name: str, value: VariableTracker) -> None:
        """``object.__setattr__(self, name, value)``: descriptors, else the instance dict."""
        if not self.is_new and self.source is None:
            raise Unsupported(f"attribute assignment on {self!r}, which has no source to "
                              "write it back through", break_type="side_effect")
        descriptor = lookup_class_attr(self.cls, name)
        if isinstance(descriptor, property):
            if descriptor.fset is None:
                raise raise_real(AttributeError(
                    f"property {name!r} of {self.cls.__name__!r} object has no setter"))
            UserFunctionVariable(descriptor.fset).call(tx, [self, value], {})
            return
        setter = lookup_class_attr(type(descriptor), "__set__")
        if isinstance(setter, types.FunctionType):  # a data descriptor written in Python
            descriptor_var = tx.wrap_unguarded(descriptor) if self.source is None else \
                tx.builder.wrap(descriptor, self._class_attr_source(name))
            tx.wrap_unguarded(setter).call(tx, [descriptor_var, self, value], {})
            return
        slot = isinstance(descriptor, types.MemberDescriptorType) and self.is_new
        if hasattr(type(descriptor), "__set__") and not slot:
            raise Unsupported(f"assignment through descriptor {self.cls.__qualname__}.{name}")
        if not slot and lookup_class_attr(self.cls, "__dict__") is MISSING:
            raise raise_real(AttributeError(
                f"{self.cls.__name__!r} object has no attribute {name!r}{_NO_DICT_TO_SET}"))
        if not self.is_new:
            # An input object: the ledger writes the attribute back after the graph runs.
            tx.output.side_effects.store(AttrSource(self.source, name), value, owner=self)
        else:
            tx.output.side_effects.write_local(self)
        self.attrs[name] = value

    def delete_attr(self, tx, name: str) -> None:
        """``del self.name``: the class's ``__delattr__`` if it defines one in Python."""
        deleter = lookup_class_attr(self.cls, "__delattr__")
        if isinstance(deleter, types.FunctionType):
            self.special_method(tx, "__delattr__").call(tx, [ConstantVariable(name)], {})
        elif deleter is object.__delattr__:
            self.generic_delattr(tx, name)
        else:
            raise Unsupported(f"{self.cls.__qualname__}.__delattr__ of type "
                              f"{type(deleter).__name__} is not traced")

    def generic_delattr(self, tx, name: str) -> None:
        """``object.__delattr__(self, name)`` on an object made in the frame: out of its
        instance dict (a deletion on an input object would need the ledger: refused)."""
        if not self.is_new:
            raise Unsupported(f"del of an attribute of {self!r}", break_type="side_effect")
        descriptor = lookup_class_attr(self.cls, name)
        slot = isinstance(descriptor, types.MemberDescriptorType)
        if hasattr(type(descriptor), "__delete__") and not slot:
            raise Unsupported(f"deletion through descriptor {self.cls.__qualname__}.{name}")
        if name not in self.attrs:  # an empty slot says only its name
            raise raise_real(AttributeError(name) if slot else
                             _no_attribute_to_delete(self.cls, name))
        tx.output.side_effects.write_local(self)
        del self.attrs[name]

    def call(self, tx, args, kwargs):
        if issubclass(self.cls, torch.nn.Module):
            # Modules from the inputs are NNModuleVariables; this one was not modelled as one.
            raise Unsupported(f"calling the module {self.cls.__qualname__} reached as a plain "
                              "object", break_type="unsupported_call")
        return self.call_own_dunder(tx, args, kwargs)

    def call_own_dunder(self, tx, args, kwargs) -> VariableTracker:
        """``obj(*args)`` through the class's ``__call__`` written in Python, inlined."""
        call = lookup_class_attr(self.cls, "__call__")
        if not isinstance(call, types.FunctionType):
            raise Unsupported(f"calling a {self.cls.__qualname__} object")
        return self.var_getattr(tx, "__call__").call(tx, args, kwargs)

    def reconstruct(self, codegen: Codegen) -> str:
        if not self.is_new:
            return super().reconstruct(codegen)
        return codegen.remember(self, self._rebuild)

    def _rebuild(self, codegen: Codegen) -> str:
        attrs = ", ".join(f"{name!r}: {value.reconstruct(codegen)}"
                          for name, value in self.attrs.items())
        return f"{codegen.constant(rebuild_object)}({codegen.constant(self.cls)}, {{{attrs}}})"


class EnvironVariable(UserObjectVariable):
    """``os.environ``: a read folds to the variable's value while tracing, guarded on that
    value (``os.environ.get('X') is None``), so setting or changing the variable recompiles.
    Reads are ``os.environ.get(name[, default])``, ``name in os.environ`` and
    ``os.environ[name]``; writes and iteration (the whole environment) are refused."""

    def _read(self, tx, key: VariableTracker) -> str | None:
        name = key.as_constant() if key.is_constant() else None
        if not isinstance(name, str):
            raise Unsupported(f"os.environ read with the key {key!r}")
        value = os.environ.get(name)
        tx.guards.constant_match(EnvironSource(name), value)
        return value

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        value = self._read(tx, index)
        if value is None:
            raise raise_real(KeyError(index.as_constant()))
        return ConstantVariable(value)

    def contains(self, tx, item: VariableTracker) -> bool:
        return self._read(tx, item) is not None

    def var_getattr(self, tx, name):
        if name == "get":
            return _EnvironGetVariable(self)
        raise Unsupported(f"os.environ.{name}: only get, 'in' and subscripts are folded")

    def setitem(self, tx, index, value) -> None:
        raise Unsupported("a write to os.environ", break_type="side_effect")

    def delitem(self, tx, index) -> None:
        raise Unsupported("a write to os.environ", break_type="side_effect")


class _EnvironGetVariable(VariableTracker):
    """``os.environ.get``, bound."""

    def __init__(self, environ: EnvironVariable) -> None:
        super().__init__()
        self.environ = environ

    def call(self, tx, args, kwargs):
        if kwargs or not 1 <= len(args) <= 2:
            raise Unsupported("os.environ.get takes a name and an optional default")
        value = self.environ._read(tx, args[0])
        if value is None:
            return args[1] if len(args) > 1 else ConstantVariable(None)
        return ConstantVariable(value)


def user_operand(*operands: VariableTracker) -> bool:
    """Whether an operator's operands include an object of a plain user class, whose special
    methods Python tries before a tensor's (a builtin subclass, or a class with
    ``__torch_function__``, goes the tensor's or the builtin's way)."""
    return any(isinstance(v, UserObjectVariable) and builtin_base(v.cls) is None and
               not hasattr(v.cls, "__torch_function__") for v in operands)


# The unary operators and their symbols in CPython's TypeError.
_UNARY_SYMBOLS = {operator.neg: "-", operator.pos: "+", operator.invert: "~",
                  operator.abs: "abs()"}


# Binary operators and their symbols in CPython's TypeError (the in-place forms say ``+=``).
BINARY_SYMBOLS = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.matmul: "@",
    operator.truediv: "/", operator.floordiv: "//", operator.mod: "%", operator.pow: "** or pow()",
    operator.lshift: "<<", operator.rshift: ">>", operator.and_: "&", operator.or_: "|",
    operator.xor: "^", operator.iadd: "+=", operator.isub: "-=", operator.imul: "*=",
    operator.imatmul: "@=", operator.itruediv: "/=", operator.ifloordiv: "//=",
    operator.imod: "%=", operator.ipow: "**=", operator.ilshift: "<<=", operator.irshift: ">>=",
    operator.iand: "&=", operator.ior: "|=", operator.ixor: "^=",
}


def gives_way(operand: VariableTracker) -> bool:
    """An operand whose own special methods return NotImplemented for a plain user object: a
    tensor, a number, None, or a user object (a str's ``%`` or a list's ``*`` might accept it)."""
    if user_operand(operand) or isinstance(operand, TensorVariable):
        return True
    return operand.is_constant() and type(operand.as_constant()) in _NUMBERS


_NUMBERS = (int, float, complex, bool, type(None))


def binary_type_error(op: Any, left: VariableTracker, right: VariableTracker) -> Exception:
    """The TypeError of ``left op right`` when neither side's special method applies."""
    return raise_real(TypeError(f"unsupported operand type(s) for {BINARY_SYMBOLS[op]}: "
                                f"'{left.python_type().__name__}' and "
                                f"'{right.python_type().__name__}'"))


def call_unary_dunder(tx, op: Any, value: UserObjectVariable) -> VariableTracker:
    """``-obj``, ``+obj``, ``~obj``, ``abs(obj)``: the class's special method."""
    method = value.special_method(tx, f"__{op.__name__}__")
    if method is None:
        raise raise_real(TypeError(f"bad operand type for {_UNARY_SYMBOLS[op]}: "
                                   f"'{value.cls.__name__}'"))
    return method.call(tx, [], {})


def rebuild_object(cls: type, attrs: dict[str, Any]) -> Any:
    """Recreate an object built inside a compiled frame, after the graph ran."""
    obj = object.__new__(cls)
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    to_real = cls.__dict__.get("_graphlift_to_real")  # a polyfill stand-in: the real object
    return obj if to_real is None else to_real(obj)


class SuperVariable(VariableTracker):
    """``super()`` bound to a class and an object: attribute lookup starts after the class."""

    def __init__(self, cls: type, obj: VariableTracker) -> None:
        super().__init__()
        self.cls, self.obj = cls, obj

    def describe(self) -> str:
        return f"super({self.cls.__qualname__})"

    def var_getattr(self, tx, name):
        obj_type = self.obj.python_type()
        if isinstance(self.obj, ClassVariable) and self.cls in self.obj.cls.__mro__:
            obj_type = self.obj.cls  # super() in a classmethod; in a metaclass's method, its type
        attr = lookup_class_attr(obj_type, name, start_after=self.cls)
        guard_class_attr(tx, obj_type, name, attr, start_after=self.cls)
        if attr is MISSING:
            raise Unsupported(f"'super' object has no attribute {name!r}",
                              break_type="user_exception")
        return bind_class_attr(tx, self.obj, obj_type, name, attr, None)


class DeferredMethodVariable(VariableTracker):
    """A logging method of a ``logging.Logger`` (``logger.warning_once``): a call returns None
    while tracing and runs after the graph (``trace_rules.DEFERRED_LOGGER_METHODS``)."""

    callable_kind = True

    def __init__(self, obj: UserObjectVariable, name: str) -> None:
        super().__init__()
        self.obj, self.name = obj, name

    def describe(self) -> str:
        return f"{self.obj.describe()}.{self.name}"

    def call(self, tx, args, kwargs):
        if self.obj.source is None:
            raise Unsupported(f"{self.describe()}() on a logger reached without a source")
        if not all(v.is_constant() for v in [*args, *kwargs.values()]):
            raise Unsupported(f"{self.describe()}() with arguments that are not constants "
                              "(a logging call runs after the graph, on the values given)",
                              break_type="skipped_function")
        tx.output.side_effects.defer_call(self.obj, self.name, args, kwargs)
        return ConstantVariable(None)

    def reconstruct(self, codegen: Codegen) -> str:
        return f"{self.obj.reconstruct(codegen)}.{self.name}"


class InstanceDictVariable(DictVariable):
    """``obj.__dict__`` of an object made in the frame: its items are the object's attributes
    (one dict, so a store through either is seen through the other)."""

    def __init__(self, owner: UserObjectVariable) -> None:
        super().__init__({})
        self.owner = owner
        self.items = owner.attrs

    def reconstruct(self, codegen: Codegen) -> str:
        return f"{self.owner.reconstruct(codegen)}.__dict__"


class InputInstanceDictVariable(VariableTracker):
    """``obj.__dict__`` of an object from the inputs, read-only: its keys are guarded (so a key's
    presence or absence is known), a value is read like the attribute of that name."""

    READ_ONLY = frozenset({"get", "keys", "items", "values", "copy", "__contains__",
                           "__getitem__", "__len__", "__iter__"})

    def __init__(self, owner: UserObjectVariable) -> None:
        super().__init__()
        self.owner = owner

    def describe(self) -> str:
        return f"{self.owner.describe()}.__dict__"

    def python_type(self) -> type:
        return dict

    def truthy(self, tx) -> bool:
        return bool(self._keys(tx))

    def _keys(self, tx) -> list[str]:
        """The keys now: the real ones (guarded) and those the frame stored."""
        real = list(self.owner.value.__dict__)
        if not self.owner.is_new and self.owner.source is not None:
            tx.guards.dict_keys(AttrSource(self.owner.source, "__dict__"), real)
        return real + [k for k in self.owner.attrs if k not in real]

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_constant()
        if key not in self._keys(tx):
            raise raise_real(KeyError(key))
        return self.owner.generic_getattr(tx, key) if key in self.owner.attrs else \
            self.owner._wrap_attr(tx, key, self.owner.value.__dict__[key])

    def contains(self, tx, item: VariableTracker) -> bool:
        return item.as_constant() in self._keys(tx)

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        """``obj.__dict__[k] = v`` (a cached_property filling its cache): the attribute store
        the ledger replays, when ``obj.k = v`` writes the instance dict the same way."""
        key, cls = index.as_constant(), self.owner.cls
        if not isinstance(key, str) or lookup_class_attr(cls, "__setattr__") is not \
                object.__setattr__ or hasattr(type(lookup_class_attr(cls, key)), "__set__"):
            raise Unsupported(f"storing {key!r} into the __dict__ of {self.owner!r}, an object "
                              "from the inputs", break_type="side_effect")
        self.owner.generic_setattr(tx, key, value)

    def unpack(self, tx) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self._keys(tx)]

    def snapshot(self, tx) -> DictVariable:
        """A copy of the items, for the methods that only read them."""
        return DictVariable({k: self.getitem(tx, ConstantVariable(k)) for k in self._keys(tx)})

    def var_getattr(self, tx, name):
        if name not in self.READ_ONLY:
            raise Unsupported(f"{name} on the __dict__ of {self.owner!r}, an object from the "
                              "inputs (only reads are traced)", break_type="side_effect")
        if name == "get":
            return _DictGetVariable(self)
        return self.snapshot(tx).var_getattr(tx, name)


class _DictGetVariable(VariableTracker):
    """``d.get(key, default=None)`` on a read-only instance dict."""

    def __init__(self, view: InputInstanceDictVariable) -> None:
        super().__init__()
        self.view = view

    def call(self, tx, args, kwargs):
        default = args[1] if len(args) > 1 else ConstantVariable(None)
        if self.view.contains(tx, args[0]):
            return self.view.getitem(tx, args[0])
        return default


# C methods of builtin types, as they appear on classes (``dict.get``, ``object.__setattr__``).
C_DESCRIPTORS = (types.WrapperDescriptorType, types.MethodDescriptorType)


class BuiltinMethodVariable(VariableTracker):
    """A C method of a builtin type bound to a tracked object: ``super().get`` in a dict
    subclass, ``obj.__eq__`` inherited from ``object``."""

    callable_kind = True

    def __init__(self, descriptor: Any, obj: VariableTracker) -> None:
        super().__init__()
        self.descriptor, self.obj = descriptor, obj

    def describe(self) -> str:
        return f"{self.descriptor.__objclass__.__name__}.{self.descriptor.__name__}"

    def python_type(self) -> type:
        if isinstance(self.descriptor, types.WrapperDescriptorType):
            return types.MethodWrapperType
        return types.BuiltinMethodType

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__"):  # d.pop.__name__: the descriptor's
            return ConstantVariable(getattr(self.descriptor, name))
        return super().var_getattr(tx, name)

    def call(self, tx, args, kwargs):
        return call_builtin_descriptor(tx, self.descriptor, [self.obj, *args], kwargs)

    def reconstruct(self, codegen: Codegen) -> str:
        return f"{codegen.constant(self.descriptor)}.__get__({self.obj.reconstruct(codegen)})"


def call_builtin_descriptor(tx, descriptor: Any, args: list[VariableTracker],
                            kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``dict.get(d, k)``: a C method of a builtin type called with its object first."""
    owner, name = descriptor.__objclass__, descriptor.__name__
    check = TYPE_CHECKS.get(descriptor)
    if check is not None:
        if len(args) != 2 or kwargs:  # eager's TypeError, raised when the call runs eagerly
            raise Unsupported(f"type.{name} with {len(args)} arguments",
                              break_type="user_exception")
        return ConstantVariable(check(args[0].as_constant(), args[1]))
    if not args:
        raise raise_real(TypeError(f"unbound method {owner.__name__}.{name}() needs an "
                                   "argument"))
    receiver, rest = args[0], list(args[1:])
    receiver_type = receiver.python_type()
    if not issubclass(receiver_type, owner):
        raise raise_real(TypeError(f"descriptor {name!r} for {owner.__name__!r} objects doesn't "
                                   f"apply to a {receiver_type.__name__!r} object"))
    if isinstance(receiver, UserObjectVariable):
        return receiver.call_builtin_method(tx, owner, name, rest, kwargs)
    return call_builtin_method(tx, receiver, receiver, owner, name, rest, kwargs)


def _type_instancecheck(cls: type, instance: VariableTracker) -> bool:
    """``type.__instancecheck__(cls, obj)``: the check by type alone (no hook runs)."""
    return type.__subclasscheck__(cls, instance.python_type())


def _type_subclasscheck(cls: type, derived: VariableTracker) -> bool:
    """``type.__subclasscheck__(cls, sub)``: the MRO walk alone (no hook runs)."""
    if not derived.is_constant():
        raise raise_real(TypeError("issubclass() arg 1 must be a class"))
    try:
        return type.__subclasscheck__(cls, derived.as_constant())
    except TypeError as error:
        raise raise_real(error) from error


# type's own C checks, which a metaclass's hook reaches through ``super().__instancecheck__``.
TYPE_CHECKS = {
    type.__dict__["__instancecheck__"]: _type_instancecheck,
    type.__dict__["__subclasscheck__"]: _type_subclasscheck,
}


# -- object's own C methods on user objects: (tx, obj, *args) -> tracker ------------------------
def _attribute_name(name: VariableTracker) -> str:
    value = name.as_constant()
    if not isinstance(value, str):
        raise raise_real(TypeError(f"attribute name must be string, not "
                                   f"'{type(value).__name__}'"))
    return value


def _object_setattr(tx, obj, name, value):
    obj.generic_setattr(tx, _attribute_name(name), value)
    return ConstantVariable(None)


def _object_delattr(tx, obj, name):
    obj.generic_delattr(tx, _attribute_name(name))
    return ConstantVariable(None)


def _object_getattribute(tx, obj, name):
    return obj.generic_getattr(tx, _attribute_name(name))


def _object_init(tx, obj, *args):
    if args:  # object_init: extra arguments are an error unless only __new__ is overridden
        if lookup_class_attr(obj.cls, "__init__") is not object.__init__:
            raise raise_real(TypeError("object.__init__() takes exactly one argument (the "
                                       "instance to initialize)"))
        if lookup_class_attr(obj.cls, "__new__") is object.__new__:
            raise raise_real(TypeError(f"{obj.cls.__name__}.__init__() takes exactly one "
                                       "argument (the instance to initialize)"))
    return ConstantVariable(None)


def _object_eq(tx, obj, other):
    return ConstantVariable(True if tx.is_same(obj, other) else NotImplemented)


def _object_ne(tx, obj, other):
    equal = obj.special_method(tx, "__eq__").call(tx, [other], {})
    if equal.is_constant() and equal.as_constant() is NotImplemented:
        return equal
    return ConstantVariable(not equal.truthy(tx))


def _not_implemented(tx, obj, other):
    return ConstantVariable(NotImplemented)


def _none(tx, obj, *args):
    return ConstantVariable(None)


# object's C methods that user objects are traced through (the others read identity, repr...).
OBJECT_METHODS = {
    "__setattr__": _object_setattr,  # the store itself, past the class's __setattr__
    "__delattr__": _object_delattr,  # the deletion itself, past the class's __delattr__
    "__getattribute__": _object_getattribute,  # the lookup itself, without __getattr__
    "__init__": _object_init,  # nothing, or TypeError for arguments it does not take
    "__eq__": _object_eq,  # identity, else NotImplemented
    "__ne__": _object_ne,  # the inverse of the class's __eq__
    "__lt__": _not_implemented,
    "__le__": _not_implemented,
    "__gt__": _not_implemented,
    "__ge__": _not_implemented,
    "__init_subclass__": _none,
}
