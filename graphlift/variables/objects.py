"""Python modules, classes, user objects and user functions met while tracing."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from graphlift.exc import Unsupported
from graphlift.sources import AttrSource
from graphlift.variables.base import VariableTracker

if TYPE_CHECKING:
    from graphlift.codegen import OutputCodegen


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
        from graphlift.variables.builder import is_torch_module, wrap_unguarded

        try:
            value = getattr(self.module, name)
        except AttributeError as error:
            raise Unsupported(f"module {self.module.__name__!r} has no attribute {name!r}",
                              break_type="user_exception") from error
        # torch's own namespaces are trusted not to be monkey-patched between calls.
        if self.source is None or is_torch_module(self.module):
            return wrap_unguarded(tx, value)
        return tx.builder.wrap(value, AttrSource(self.source, name))

    def reconstruct(self, codegen: OutputCodegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.module)


class ClassVariable(VariableTracker):
    """A class used as a value: in ``isinstance`` checks, as a type to compare against."""

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

    def reconstruct(self, codegen: OutputCodegen) -> str:
        return codegen.constant(self.cls)


class UserObjectVariable(VariableTracker):
    """An object of a user class read from the inputs: its type is guarded, attributes read."""

    def __init__(self, value: Any, source=None) -> None:
        super().__init__(source)
        self.value = value

    def describe(self) -> str:
        return type(self.value).__qualname__

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name):
        cls = type(self.value)
        class_attr = _lookup_class_attr(cls, name)
        instance_dict = getattr(self.value, "__dict__", {})
        if isinstance(class_attr, (property, types.MemberDescriptorType)) or \
                hasattr(type(class_attr), "__set__"):
            raise Unsupported(f"descriptor {cls.__qualname__}.{name} (properties are not traced "
                              "yet)")
        if name in instance_dict:
            return self._wrap_attr(tx, name, instance_dict[name])
        if class_attr is _MISSING:
            if hasattr(cls, "__getattr__"):
                raise Unsupported(f"{cls.__qualname__}.__getattr__ is not traced yet")
            raise Unsupported(f"{cls.__qualname__!r} object has no attribute {name!r}",
                              break_type="user_exception")
        if isinstance(class_attr, (types.FunctionType, staticmethod, classmethod)):
            raise Unsupported(f"calling method {cls.__qualname__}.{name} (inlining of user "
                              "methods is not supported yet)", break_type="unsupported_call")
        return self._wrap_attr(tx, name, getattr(self.value, name))

    def _wrap_attr(self, tx, name: str, value: Any) -> VariableTracker:
        from graphlift.variables.builder import wrap_unguarded

        if self.source is None:
            return wrap_unguarded(tx, value)
        return tx.builder.wrap(value, AttrSource(self.source, name))


_MISSING = object()


def _lookup_class_attr(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _MISSING


class UserFunctionVariable(VariableTracker):
    """A Python function written by the user."""

    def __init__(self, fn: types.FunctionType, source=None) -> None:
        super().__init__(source)
        self.fn = fn

    def describe(self) -> str:
        return self.fn.__qualname__

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tx, args, kwargs):
        raise Unsupported(f"call to user function {self.fn.__qualname__} (inlining is not "
                          "supported yet)", break_type="unsupported_call")

    def reconstruct(self, codegen: OutputCodegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.fn)
