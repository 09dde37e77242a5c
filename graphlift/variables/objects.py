"""Python modules, classes and objects of user classes met while tracing.

Objects read from the inputs are guarded by type and read attribute by attribute; objects created
inside the frame (``Point(1, 2)``, a dataclass) are modelled entirely: their attributes live in
the tracker and are rebuilt if the object leaves the frame.
"""

from __future__ import annotations

import functools
import types
from typing import TYPE_CHECKING, Any

import torch

from graphlift import trace_rules
from graphlift.exc import Unsupported
from graphlift.sources import AttrSource
from graphlift.trace_rules import is_torch_module
from graphlift.variables.base import (
    MISSING,
    TracedException,
    VariableTracker,
    lookup_class_attr,
    raise_real,
)
from graphlift.variables.constant import ConstantVariable, is_constant_value, wrap_constant
from graphlift.variables.containers import TupleVariable
from graphlift.variables.context import GradModeVariable, make_autocast, set_grad_mode
from graphlift.variables.exceptions import ExceptionVariable
from graphlift.variables.functions import UserFunctionVariable, UserMethodVariable

if TYPE_CHECKING:
    from graphlift.codegen import OutputCodegen

# Iterating a user object stops being traced after this many items (an endless iterator).
MAX_ITERATION = 10_000


def is_user_class(cls: type) -> bool:
    module = getattr(cls, "__module__", "") or ""
    return module not in ("builtins",) and not module.startswith("torch")


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

    def reconstruct(self, codegen: OutputCodegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.module)


def bind_class_attr(tx, obj: VariableTracker, cls: type, name: str, attr: Any,
                    attr_source) -> VariableTracker:
    """What ``obj.name`` gives for a class attribute ``attr``: methods bind, properties run."""
    if isinstance(attr, staticmethod):
        if attr_source is not None:  # the source reads the function itself: guarded by code
            return tx.builder.wrap(attr.__func__, attr_source)
        return UserFunctionVariable(attr.__func__)
    if isinstance(attr, classmethod):
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
    if hasattr(type(attr), "__get__") and not is_constant_value(attr):
        raise Unsupported(f"descriptor {cls.__qualname__}.{name} of type "
                          f"{type(attr).__name__} is not traced")
    return tx.wrap_unguarded(attr) if attr_source is None else tx.builder.wrap(attr, attr_source)


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
        if attr is MISSING:
            if source is not None:
                tx.guards.attr_absent(self.source, name)
            raise Unsupported(f"type object {self.cls.__qualname__!r} has no attribute {name!r}",
                              break_type="user_exception")
        if isinstance(attr, types.FunctionType):  # unbound: called with an explicit self
            return UserFunctionVariable(attr) if source is None else tx.builder.wrap(attr, source)
        if isinstance(attr, property):
            raise Unsupported("property object read from a class")
        return bind_class_attr(tx, self, self.cls, name, attr, source)

    def call(self, tx, args, kwargs):
        constructor = CONSTRUCTORS.get(self.cls)
        if constructor is not None:
            return constructor(tx, args, kwargs)
        if issubclass(self.cls, tuple) and hasattr(self.cls, "_fields"):
            return _make_namedtuple(tx, self.cls, args, kwargs)
        if issubclass(self.cls, BaseException):
            return ExceptionVariable(self.cls, args)
        decision = trace_rules.lookup(self.cls)
        if decision.kind is trace_rules.Kind.SKIP:
            raise trace_rules.skip_error(self.cls, decision)
        if is_user_class(self.cls) and not issubclass(self.cls, torch.nn.Module):
            return _make_object(tx, self.cls, args, kwargs)
        raise Unsupported(f"constructing {self.cls.__qualname__} while tracing",
                          break_type="unsupported_call")

    def reconstruct(self, codegen: OutputCodegen) -> str:
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
    torch.Size: _fold_constructor(torch.Size),  # torch.Size([2, 3]) is a constant
    torch.device: _fold_constructor(torch.device),  # torch.device("cpu") is a constant
    torch.finfo: _fold_object(torch.finfo),  # torch.finfo(dtype).eps: attributes are constants
    torch.iinfo: _fold_object(torch.iinfo),
}


def register_constructors(rows: dict[type, Any]) -> None:
    """Add construction rules for classes modelled by a module above this one (collections)."""
    CONSTRUCTORS.update(rows)
    trace_rules.MODELLED_CLASSES.update(rows)


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
    """``cls(*args)`` for a plain user class: a new object, then its ``__init__`` inlined."""
    if lookup_class_attr(cls, "__new__") not in (MISSING, object.__dict__["__new__"]):
        raise Unsupported(f"{cls.__qualname__} defines __new__; not traced")
    obj = UserObjectVariable(None, cls=cls)
    init = lookup_class_attr(cls, "__init__")
    disabled = trace_rules.override(init)  # torch.compiler.disable(cls) disables __init__
    if disabled is not None and disabled.kind is trace_rules.Kind.SKIP:
        raise trace_rules.skip_error(init, disabled)
    if isinstance(init, types.FunctionType):
        UserFunctionVariable(init).call(tx, [obj, *args], kwargs)
    elif args or kwargs:
        raise Unsupported(f"TypeError: {cls.__qualname__}() takes no arguments",
                          break_type="user_exception")
    return obj


class UserObjectVariable(VariableTracker):
    """An object of a user class.

    With a ``value`` it was read from the inputs: its type is guarded and attributes are read from
    the real object. Without one it was created in the frame and ``attrs`` holds its state.
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

    def truthy(self, tx) -> bool:
        if lookup_class_attr(self.cls, "__bool__") is MISSING and \
                lookup_class_attr(self.cls, "__len__") is MISSING:
            return True
        return super().truthy(tx)

    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return ClassVariable(self.cls)
        class_attr = lookup_class_attr(self.cls, name)
        data_descriptor = hasattr(type(class_attr), "__set__")
        if not data_descriptor and not self.is_new:
            instance_dict = getattr(self.value, "__dict__", {})
            if name in instance_dict:
                return self._wrap_attr(tx, name, instance_dict[name])
        if isinstance(class_attr, types.MemberDescriptorType) and not self.is_new:
            try:  # a __slots__ attribute of an object from the inputs: read it for real
                return self._wrap_attr(tx, name, class_attr.__get__(self.value, self.cls))
            except AttributeError as error:
                self._guard_absent(tx, name)
                raise raise_real(error) from error
        if class_attr is MISSING:
            if lookup_class_attr(self.cls, "__getattr__") is not MISSING:
                raise Unsupported(f"{self.cls.__qualname__}.__getattr__ is not traced")
            self._guard_absent(tx, name)
            raise raise_real(AttributeError(
                f"{self.cls.__qualname__!r} object has no attribute {name!r}"))
        source = None
        if self.source is not None:
            source = AttrSource(AttrSource(self.source, "__class__"), name)
            if not data_descriptor and hasattr(self.value, "__dict__"):
                tx.guards.not_shadowed(self.source, name)  # o.method = ... later would win
        return bind_class_attr(tx, self, self.cls, name, class_attr, source)

    def _guard_absent(self, tx, name: str) -> None:
        """The object from the inputs has no attribute ``name``: a later call's object may."""
        if self.source is not None and not self.is_new:
            tx.guards.attr_absent(self.source, name)

    def _wrap_attr(self, tx, name: str, value: Any) -> VariableTracker:
        if self.source is None:
            return tx.wrap_unguarded(value)
        return tx.builder.wrap(value, AttrSource(self.source, name))

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        if not self.is_new and self.source is None:
            raise Unsupported(f"attribute assignment on {self!r}, which has no source to "
                              "write it back through", break_type="side_effect")
        descriptor = lookup_class_attr(self.cls, name)
        if isinstance(descriptor, property) and descriptor.fset is not None:
            UserFunctionVariable(descriptor.fset).call(tx, [self, value], {})
            return
        slot = isinstance(descriptor, types.MemberDescriptorType) and self.is_new
        if hasattr(type(descriptor), "__set__") and not slot:
            raise Unsupported(f"assignment through descriptor {self.cls.__qualname__}.{name}")
        if not self.is_new:
            # An input object: the ledger writes the attribute back after the graph runs.
            tx.output.side_effects.store(AttrSource(self.source, name), value, owner=self)
        self.attrs[name] = value

    def unpack(self, tx) -> list[VariableTracker]:
        """Iterate a user object: its ``__iter__`` (a generator or an iterator object)."""
        if not isinstance(lookup_class_attr(self.cls, "__iter__"), types.FunctionType):
            return super().unpack(tx)
        iterator = self.var_getattr(tx, "__iter__").call(tx, [], {})
        if not isinstance(iterator, UserObjectVariable):
            return iterator.unpack(tx)
        return iterator.drain(tx)

    def drain(self, tx) -> list[VariableTracker]:
        """Call ``__next__`` until it raises StopIteration (bounded, like every loop traced)."""
        items = []
        next_method = self.var_getattr(tx, "__next__")
        while len(items) < MAX_ITERATION:
            try:
                items.append(next_method.call(tx, [], {}))
            except TracedException as error:
                if issubclass(error.cls, StopIteration):
                    return items
                raise
        raise Unsupported(f"iterating a {self.cls.__qualname__} gave more than {MAX_ITERATION} "
                          "items while tracing")

    def call(self, tx, args, kwargs):
        if issubclass(self.cls, torch.nn.Module):
            # Modules from the inputs are NNModuleVariables; this one was not modelled as one.
            raise Unsupported(f"calling the module {self.cls.__qualname__} reached as a plain "
                              "object", break_type="unsupported_call")
        call = lookup_class_attr(self.cls, "__call__")
        if not isinstance(call, types.FunctionType):
            raise Unsupported(f"calling a {self.cls.__qualname__} object")
        return self.var_getattr(tx, "__call__").call(tx, args, kwargs)

    def reconstruct(self, codegen: OutputCodegen) -> str:
        if not self.is_new:
            return super().reconstruct(codegen)
        return codegen.remember(self, self._rebuild)

    def _rebuild(self, codegen: OutputCodegen) -> str:
        attrs = ", ".join(f"{name!r}: {value.reconstruct(codegen)}"
                          for name, value in self.attrs.items())
        return f"{codegen.constant(rebuild_object)}({codegen.constant(self.cls)}, {{{attrs}}})"


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
        if isinstance(self.obj, ClassVariable):
            obj_type = self.obj.cls
        attr = lookup_class_attr(obj_type, name, start_after=self.cls)
        if attr is MISSING:
            raise Unsupported(f"'super' object has no attribute {name!r}",
                              break_type="user_exception")
        if attr is object.__init__:
            return NoOpVariable()
        return bind_class_attr(tx, self.obj, obj_type, name, attr, None)


class NoOpVariable(VariableTracker):
    """A call with no effect and result None (``object.__init__`` through ``super()``)."""

    def call(self, tx, args, kwargs):
        return ConstantVariable(None)
