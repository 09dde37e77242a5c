"""Python builtins while tracing: a table of handlers, one row per builtin, and constant folding.

A builtin whose arguments are all constants and that has no side effects is folded by calling it
for real (``trace_rules.PURE_BUILTINS``). The handlers cover the cases where an argument is
symbolic.
"""

from __future__ import annotations

import abc
import ast
import builtins
import functools
import inspect
import operator
import sys
import traceback
import types
import typing
from collections.abc import Callable
from typing import Any

import torch

from graphlift import trace_rules
from graphlift.config import config
from graphlift.exc import Unsupported
from graphlift.polyfills import polyfill_for
from graphlift.sources import LocalSource
from graphlift.variables.base import (
    MISSING,
    TracedException,
    Translator,
    VariableTracker,
    lookup_class_attr,
    raise_real,
)
from graphlift.variables.constant import ConstantVariable, wrap_constant
from graphlift.variables.containers import (
    DictVariable,
    ListVariable,
    SetVariable,
    TupleVariable,
    mapping_pairs,
    sort_trackers,
)
from graphlift.variables.exceptions import ExceptionVariable, TracebackVariable
from graphlift.variables.functions import UserFunctionVariable, UserMethodVariable
from graphlift.variables.iterators import (
    EnumerateIteratorVariable,
    GeneratorVariable,
    IteratorVariable,
    LazyIteratorVariable,
    RangeIteratorVariable,
    ReversedListIteratorVariable,
    ZipIteratorVariable,
    iterator_of,
)
from graphlift.variables.methods import dict_fromkeys
from graphlift.variables.objects import (
    BUILTIN_BASES,
    ClassVariable,
    PythonModuleVariable,
    SuperVariable,
    UserObjectVariable,
    call_builtin_descriptor,
    call_unary_dunder,
    guard_class_attr,
    new_object,
    user_operand,
)
from graphlift.variables.symbolic import int_of, size_variable
from graphlift.variables.tensor import TensorVariable, call_torch


def _len(tx, args, kwargs):
    (obj,) = args
    if isinstance(obj, UserObjectVariable):
        return obj.length(tx)
    if isinstance(obj, IteratorVariable):  # iterators have no len(); heapq.nlargest relies on it
        raise raise_real(TypeError(f"object of type '{_iterator_name(obj)}' has no len()"))
    if isinstance(obj, TensorVariable):
        if obj.subclass is not None and not tx.output.torch_function_disabled:
            # Tensor.__len__ hands itself to the subclass's __torch_function__.
            return call_torch(tx, "call_method", "__len__", [obj], {})
        if obj.fake.dim() == 0:
            raise Unsupported("len() of a 0-d tensor", break_type="user_exception")
        return size_variable(tx, obj, 0)  # symbolic when dimension 0 is dynamic
    if isinstance(obj, ConstantVariable) and type(obj.value) is range:
        return fold(len, args, kwargs)  # O(1), and eager's OverflowError past sys.maxsize
    return ConstantVariable(len(obj.unpack(tx)))


def _int(tx, args, kwargs):
    return _converted(tx, "__int__", args, kwargs) or int_of(tx, args, kwargs) or \
        fold(int, args, kwargs)


def _converted(tx, dunder: str, args, kwargs) -> VariableTracker | None:
    """``int(obj)``, ``float(obj)``, ``str(obj)`` of a user object: its conversion method."""
    if len(args) != 1 or kwargs or not isinstance(args[0], UserObjectVariable):
        return None
    method = args[0].special_method(tx, dunder)
    if method is None:
        raise Unsupported(f"{dunder[2:-2]}() of {args[0]!r}, whose class has no {dunder}")
    return method.call(tx, [], {})


def _float(tx, args, kwargs):
    return _converted(tx, "__float__", args, kwargs) or fold(float, args, kwargs)


def _object(tx, args, kwargs):
    if args or kwargs:
        raise raise_real(TypeError("object() takes no arguments"))
    return new_object(tx, object, [], {})


def _isinstance(tx, args, kwargs):
    obj, classes = args
    return ConstantVariable(instance_check(tx, obj, classes.as_constant()))


def _issubclass(tx, args, kwargs):
    derived, classes = args
    return ConstantVariable(subclass_check(tx, derived, classes.as_constant()))


def instance_check(tx, obj: VariableTracker, classes: Any) -> bool:
    """``isinstance(obj, classes)`` in CPython's order: an exact type matches at once, a tuple
    (or a union) is tried item by item, then the metaclass's ``__instancecheck__``: the default
    checks by type, a hook written in Python is inlined, another is not traced."""
    cls = obj.python_type()
    if cls is classes:
        return True
    if type(classes) is type:
        return isinstance_of(cls, classes)
    if isinstance(classes, (tuple, types.UnionType)):
        items = classes if isinstance(classes, tuple) else classes.__args__
        return any(instance_check(tx, obj, item) for item in items)
    return _hooked_check(tx, "__instancecheck__", classes, obj,
                         lambda: isinstance_of(cls, classes))


def subclass_check(tx, derived: VariableTracker, classes: Any) -> bool:
    """``issubclass(derived, classes)`` in CPython's order, as :func:`instance_check`."""
    if isinstance(classes, (tuple, types.UnionType)):
        items = classes if isinstance(classes, tuple) else classes.__args__
        return any(subclass_check(tx, derived, item) for item in items)
    def by_mro() -> bool:
        if not derived.is_constant() or not isinstance(derived.as_constant(), type):
            raise raise_real(TypeError("issubclass() arg 1 must be a class"))
        return issubclass(derived.as_constant(), classes)

    if type(classes) is not type and isinstance(classes, type):
        return _hooked_check(tx, "__subclasscheck__", classes, derived, by_mro)
    return by_mro()


def _hooked_check(tx, hook_name: str, cls: type, subject: VariableTracker,
                  default: Callable[[], bool]) -> bool:
    """The metaclass's ``__instancecheck__`` / ``__subclasscheck__`` of ``cls`` on
    ``subject``; ``default`` gives the answer of the checks that need no tracing."""
    if not isinstance(cls, type):  # eager raises TypeError, or calls the object's own hook
        raise Unsupported(f"the {hook_name} of {cls!r}, which is not a class",
                          break_type="user_exception")
    meta = type(cls)
    hook = lookup_class_attr(meta, hook_name)
    guard_class_attr(tx, meta, hook_name, hook)
    if hook in DEFAULT_TYPE_CHECKS:
        return default()
    if hook is _PROTOCOL_INSTANCECHECK:
        return _protocol_instance_check(tx, cls, subject, default)
    if not isinstance(hook, types.FunctionType):
        raise Unsupported(f"{meta.__qualname__}.{hook_name} of type {type(hook).__name__} is "
                          "not traced")
    result = UserFunctionVariable(hook).call(tx, [ClassVariable(cls), subject], {})
    return result.truthy(tx)  # PyObject_IsTrue of what the hook returned


# Hooks that decide by type as ``type``'s own does (the ABC registry's and typing's protocol
# subclass check, whose hooks and caches work on classes, never on the instance): folded by type.
DEFAULT_TYPE_CHECKS = frozenset({
    type.__dict__["__instancecheck__"], type.__dict__["__subclasscheck__"],
    abc.ABCMeta.__instancecheck__, abc.ABCMeta.__subclasscheck__,
    # 3.12 on: typing's protocol classes have one (3.10 and 3.11 inherit ABCMeta's).
    vars(typing._ProtocolMeta).get("__subclasscheck__", abc.ABCMeta.__subclasscheck__),
})
_PROTOCOL_INSTANCECHECK = vars(typing._ProtocolMeta)["__instancecheck__"]


def _protocol_instance_check(tx, cls: type, obj: VariableTracker,
                             by_type: Callable[[], bool]) -> bool:
    """``isinstance(obj, P)`` for a typing protocol: by type when no member of a runtime
    protocol of methods can come from the object itself (its class has no instance dict, or
    the dict lacks the members, guarded); typing's own check, which reads the instance and the
    caller's frame, is not traced otherwise."""
    if not cls.__dict__.get("_is_protocol", False):
        return by_type()  # a class deriving from a protocol: an ABC
    members = _protocol_members(cls)
    if not getattr(cls, "_is_runtime_protocol", False) or members is None or \
            not all(callable(getattr(cls, name, None)) for name in members) or \
            any(_instance_may_hold(tx, obj, name) for name in members):
        raise Unsupported(f"isinstance() against the protocol {cls.__qualname__} of {obj!r}: "
                          "typing's check of the instance is not traced")
    return by_type()


def _protocol_members(cls: type) -> Any:
    """The names a protocol requires, as this Python's typing computes them."""
    if sys.version_info[:2] in ((3, 10), (3, 11)):
        return typing._get_protocol_attrs(cls)
    if sys.version_info[:2] in ((3, 12), (3, 13)):
        return cls.__protocol_attrs__
    return None  # another Python: not modelled


def _instance_may_hold(tx, obj: VariableTracker, name: str) -> bool:
    """Whether ``obj``'s own attributes may hold ``name`` (guarded where they do not)."""
    if isinstance(obj, UserObjectVariable):
        if obj.is_new:
            return name in obj.attrs
        instance_dict = getattr(obj.value, "__dict__", None)
        if instance_dict is None or obj.source is None:
            return instance_dict is not None
        if name in instance_dict or name in obj.attrs:
            return True
        tx.guards.not_shadowed(obj.source, name)
        return False
    return lookup_class_attr(obj.python_type(), "__dict__") is not MISSING


def isinstance_of(cls: type, classes: Any) -> bool:
    """isinstance() by type: a fake tensor's class never leaks into user checks."""
    return issubclass(cls, classes)


def _type(tx, args, kwargs):
    if len(args) != 1 or kwargs:  # type(name, bases, dict) makes a class: not while tracing
        raise Unsupported("type() with other than one argument (a class made in the frame)")
    (obj,) = args
    cls = obj.python_type()
    # A builtin class stays callable through the builtin handlers: type([])((1, 2)) works.
    return BuiltinVariable(cls) if cls.__module__ == "builtins" else ClassVariable(cls)


def _tensor_math(name: str) -> Callable:
    """abs(x), pow(x, y), round(x): the tensor dunder that the builtin would call."""
    op = {"abs": operator.abs, "pow": operator.pow}[name]

    def handler(tx, args, kwargs):
        if name == "abs" and len(args) == 1 and user_operand(*args):
            return call_unary_dunder(tx, op, args[0])  # abs(obj) is type(obj).__abs__(obj)
        if any(isinstance(a, TensorVariable) for a in args):
            return call_torch(tx, "call_function", op, args, kwargs)
        return fold(getattr(builtins, name), args, kwargs)

    return handler


def _sequence(container: type) -> Callable:
    """tuple(...) / list(...) of something the translator can unpack."""
    def handler(tx, args, kwargs):
        items = args[0].unpack(tx) if args else []
        return TupleVariable(items) if container is tuple else ListVariable(items)

    return handler


def _getattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_constant()
    if len(args) == 3 and not _hasattr(tx, args[:2], {}).as_constant():
        return args[2]
    return obj.var_getattr(tx, name)


def _hasattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_constant()
    if isinstance(obj, ClassVariable):
        return ConstantVariable(obj.has_attr(tx, name))  # guarded: Box.flag = 5 later is seen
    if isinstance(obj, TensorVariable) and hasattr(torch.Tensor, name):
        return ConstantVariable(True)  # other names: the tensor's instance dict, guarded
    if obj.is_constant():
        return ConstantVariable(hasattr(obj.as_constant(), name))
    try:
        obj.var_getattr(tx, name)
    except TracedException as error:
        if issubclass(error.cls, AttributeError):
            return ConstantVariable(False)
        raise
    except Unsupported as error:
        if error.break_type != "user_exception":
            raise
        return ConstantVariable(False)  # the attribute is missing: eager raises AttributeError
    return ConstantVariable(True)


def _setattr(tx, args, kwargs):
    obj, name, value = args[0], args[1].as_constant(), args[2]
    if not isinstance(obj, UserObjectVariable):
        raise Unsupported(f"setattr on {obj!r}", break_type="side_effect")
    obj.store_attr(tx, name, value)
    return ConstantVariable(None)


def _delattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_constant()
    if not isinstance(obj, UserObjectVariable):
        raise Unsupported(f"delattr on {obj!r}", break_type="side_effect")
    obj.delete_attr(tx, name)
    return ConstantVariable(None)


def _super(tx, args, kwargs):
    if args:
        return SuperVariable(args[0].as_constant(), args[1])
    if "__class__" not in tx.cells or not tx.code.co_argcount:
        raise Unsupported("super() without arguments outside a method")
    cls = tx.cells["__class__"].load(tx, "__class__").as_constant()
    first = tx.code.co_varnames[0]
    if first in tx.cells:
        obj = tx.cells[first].load(tx, first)
    else:
        if first not in tx.symbolic_locals and first in tx.unread_arguments:
            # super() before the method read self: wrap it as LOAD_FAST would.
            value = tx.unread_arguments.pop(first)
            tx.symbolic_locals[first] = tx.builder.wrap(value, LocalSource(first))
        obj = tx.symbolic_locals[first]
    return SuperVariable(cls, obj)


def _items(tx, value: VariableTracker) -> list[VariableTracker]:
    return value.unpack(tx)


def _iterator(items: list[VariableTracker]) -> VariableTracker:
    return IteratorVariable(items)


def _zip(tx, args, kwargs):
    if kwargs.get("strict") is None or not kwargs["strict"].as_constant():
        return ZipIteratorVariable([iterator_of(tx, a) for a in args])  # lazy: lists stay live
    columns = [_items(tx, a) for a in args]
    if len({len(c) for c in columns}) > 1:
        raise Unsupported("zip(strict=True) with unequal lengths", break_type="user_exception")
    return _iterator([TupleVariable(list(row)) for row in zip(*columns)])


def _enumerate(tx, args, kwargs):
    start = (args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))).as_constant()
    return EnumerateIteratorVariable(iterator_of(tx, args[0]), start)


def _reversed(tx, args, kwargs):
    (seq,) = args
    if isinstance(seq, GeneratorVariable):
        raise raise_real(TypeError(f"'{_iterator_name(seq)}' object is not reversible"))
    if isinstance(seq, ListVariable) and seq.python_type() is list:
        return ReversedListIteratorVariable(seq)  # live: the loop body may change the list
    if isinstance(seq, UserObjectVariable):
        return _reversed_protocol(tx, seq)
    if isinstance(seq, ConstantVariable) and type(seq.value) is range:
        return RangeIteratorVariable(seq.value[::-1])  # O(1), as CPython's
    return _iterator(list(reversed(_items(tx, seq))))


def _reversed_protocol(tx, seq: UserObjectVariable) -> VariableTracker:
    """``reversed(obj)``: the class's ``__reversed__``, else ``__len__`` and ``__getitem__``
    from the last index down (not the iteration protocol, which may go further)."""
    method = seq.special_method(tx, "__reversed__")
    if method is not None:
        return method.call(tx, [], {})
    length, getitem = seq.special_method(tx, "__len__"), seq.special_method(tx, "__getitem__")
    if length is None or getitem is None:
        raise raise_real(TypeError(f"'{seq.python_type().__name__}' object is not reversible"))
    count = length.call(tx, [], {}).as_constant()
    return _iterator([getitem.call(tx, [ConstantVariable(i)], {})
                      for i in reversed(range(count))])


def _iterator_name(iterator: IteratorVariable) -> str:
    """The class name eager Python's messages give (a plain iterator's class is not tracked)."""
    return iterator.python_type().__name__ if isinstance(iterator, GeneratorVariable) else \
        "iterator"


def _iter(tx, args, kwargs):
    if len(args) != 1:  # iter(function, sentinel) is the polyfill's (USE_POLYFILL_WHEN)
        raise Unsupported("iter() with a sentinel, without polyfills")
    value = args[0]
    if isinstance(value, IteratorVariable):
        return value  # iter(iterator) is the iterator itself: lazy ones stay lazy
    if isinstance(value, UserObjectVariable):
        method = value.special_method(tx, "__iter__")
        if method is None:
            return _iterator(value.unpack(tx))  # the __getitem__ protocol, or TypeError
        iterator = method.call(tx, [], {})
        if isinstance(iterator, IteratorVariable):  # a generator method, or iter(self.items)
            return iterator
        if isinstance(iterator, UserObjectVariable):  # an object with __next__
            return _iterator(iterator.drain(tx))
        raise Unsupported(f"{value.describe()}.__iter__ returned {iterator!r}, not an iterator")
    return iterator_of(tx, value)


def _next(tx, args, kwargs):
    iterator = args[0]
    if not isinstance(iterator, IteratorVariable):
        raise Unsupported(f"next() on {iterator!r}")
    tx.output.side_effects.write_local(iterator)  # it advances
    item = iterator.next_item()
    if item is not None:
        return item
    if len(args) > 1:
        return args[1]
    raise TracedException(ExceptionVariable(StopIteration, iterator.stop_args()))


def _map(tx, args, kwargs):
    fn, columns = args[0], [_items(tx, a) for a in args[1:]]
    return _iterator([fn.call(tx, list(row), {}) for row in zip(*columns)])


def _filter(tx, args, kwargs):
    fn, items = args[0], _items(tx, args[1])
    if fn.is_constant() and fn.as_constant() is None:
        return _iterator([i for i in items if i.truthy(tx)])
    return _iterator([i for i in items if fn.call(tx, [i], {}).truthy(tx)])


def _reduce_binary(op: Callable, name: str) -> Callable:
    """sum() over trackers: tensors add into the graph, constants fold."""
    def handler(tx, args, kwargs):
        items = _items(tx, args[0])
        start = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
        total = start
        for item in items:
            total = tx.binary_op(op, total, item)
        return total

    return handler


def _one_element_tensors(items: list[VariableTracker]) -> bool:
    """Tensors of one element, all of one shape, dtype, device and requires_grad (known
    statically; the result's requires_grad is then eager's whichever item is picked)."""
    if not items or not all(isinstance(i, TensorVariable) for i in items):
        return False
    first = items[0].fake
    return all(isinstance(i.fake.numel(), int) and i.fake.numel() == 1 and
               i.fake.shape == first.shape and i.fake.dtype == first.dtype and
               i.fake.device == first.device and i.fake.requires_grad == first.requires_grad
               for i in items)


def _select_extreme(tx, fn: Callable, items: list[VariableTracker]) -> VariableTracker:
    """``min(a, b, ...)`` of one-element tensors as Python computes it: keep the first, and
    replace it by a later item where ``item < kept`` (``>`` for max) holds, in the graph as
    ``torch.where`` (NaN and ties pick what eager picks). The result is a new tensor of the
    same value, not one of the inputs, as under torch.compile."""
    compare = operator.lt if fn is min else operator.gt
    kept = items[0]
    for item in items[1:]:
        condition = call_torch(tx, "call_function", compare, [item, kept], {})
        kept = call_torch(tx, "call_function", torch.where, [condition, item, kept], {})
    return kept


def _min_max(fn: Callable) -> Callable:
    """min/max of constants fold; of one-element tensors of one shape they select in the
    graph; of other mixes they compare data, so they break."""
    def handler(tx, args, kwargs):
        items = _items(tx, args[0]) if len(args) == 1 else list(args)
        if not kwargs and _one_element_tensors(items):
            return _select_extreme(tx, fn, items)
        if kwargs or not all(i.is_constant() for i in items):
            raise Unsupported(f"{fn.__name__}() over values that are not constants",
                              break_type="data_dependent")
        return wrap_constant(fn(i.as_constant() for i in items))

    return handler


def _all_any(fn: Callable) -> Callable:
    def handler(tx, args, kwargs):
        return ConstantVariable(fn(i.truthy(tx) for i in _items(tx, args[0])))

    return handler


def _sorted(tx, args, kwargs):
    return ListVariable(sort_trackers(tx, _items(tx, args[0]), kwargs))


def _vars(tx, args, kwargs):
    """vars(obj) is obj.__dict__; vars() reads the frame's locals, which a trace does not."""
    if len(args) != 1 or kwargs:
        raise Unsupported("vars() without an object reads the frame's locals",
                          break_type="skipped_function")
    return args[0].var_getattr(tx, "__dict__")


def _id(tx, args, kwargs):
    """id(obj) of an object that existed before the frame: its id, a constant. One read from
    the inputs (it has a source) is guarded to be that very object; a builtin, a module or a
    class is the real one its tracker holds, reached through guarded reads. An object made in
    the frame has no address while tracing: a graph break."""
    (obj,) = args
    fixed = _FIXED_OBJECTS.get(type(obj))
    if fixed is not None:
        return ConstantVariable(id(fixed(obj)))
    if isinstance(obj, ConstantVariable) and type(obj.value) in _SINGLETONS:
        return ConstantVariable(id(obj.value))
    value = tx.builder.value_at(obj.source) if obj.source is not None else MISSING
    if value is MISSING:
        raise Unsupported(f"id() of {obj.describe()}, not an object read from the inputs (one "
                          "made in the frame): its address is only known when the frame runs",
                          break_type="skipped_function")
    tx.guards.id_match(obj.source, value)
    return ConstantVariable(id(value))


def _process_setting(read: Callable[[], Any], text: str) -> Callable:
    """A reader of a setting of the interpreter (``sys.get_int_max_str_digits()``): its value
    now, a constant, guarded to stay the same (the program may change it between calls)."""
    def handler(tx, args, kwargs):
        if args or kwargs:  # CPython's own TypeError, from the real call
            if not all(v.is_constant() for v in [*args, *kwargs.values()]):
                raise Unsupported(f"{text} with arguments")
            try:
                read(*(a.as_constant() for a in args),
                     **{k: v.as_constant() for k, v in kwargs.items()})
            except TypeError as error:
                raise raise_real(error) from error
        value = read()
        tx.guards.global_switch(read, text, value)
        return wrap_constant(value)
    return handler


def _clear_frames(tx, args, kwargs):
    """traceback.clear_frames(tb) (unittest's assertRaises): of None, nothing; of the traceback
    of an exception raised while tracing, nothing either: its frames are the compiled frame,
    still running (CPython's clear() refuses it), and inlined calls that have returned, whose
    locals the trace no longer holds."""
    tb = args[0] if len(args) == 1 and not kwargs else None
    if tb is None or not (isinstance(tb, TracebackVariable) or
                          (tb.is_constant() and tb.as_constant() is None)):
        raise Unsupported("traceback.clear_frames() of a real traceback")
    return ConstantVariable(None)


def _method_type(tx, args, kwargs):
    """types.MethodType(function, obj): the bound method that obj.function would give
    (contextlib.ExitStack binds each context manager's __exit__ this way)."""
    if len(args) != 2 or kwargs or not isinstance(args[0], UserFunctionVariable) or \
            (args[1].is_constant() and args[1].as_constant() is None):
        raise Unsupported(f"types.MethodType{tuple(args)!r}")
    return UserMethodVariable(args[0], args[1])


def _callable(tx, args, kwargs):
    value = args[0]
    if value.callable_kind:
        return ConstantVariable(True)
    if isinstance(value, UserObjectVariable):
        return ConstantVariable(lookup_class_attr(value.cls, "__call__") is not None and
                                callable(lookup_class_attr(value.cls, "__call__")))
    if isinstance(value, TensorVariable) or value.is_constant():
        return ConstantVariable(callable(value.as_constant()) if value.is_constant() else False)
    raise Unsupported(f"callable() of {value!r}")


def _dict(tx, args, kwargs):
    if len(args) > 1:
        raise raise_real(TypeError(f"dict expected at most 1 argument, got {len(args)}"))
    items: dict[Any, VariableTracker] = {}
    if args:
        items.update((k.as_constant(), v) for k, v in mapping_pairs(tx, args[0]))
    items.update(kwargs)
    return DictVariable(items)


def _set(frozen: bool) -> Callable:
    def handler(tx, args, kwargs):
        if frozen and args and args[0].python_type() is frozenset:
            return args[0]  # frozenset(fs) is fs itself, as CPython gives it
        return SetVariable(_items(tx, args[0]) if args else [], frozen=frozen)

    return handler


def _bool(tx, args, kwargs):
    if len(args) == 1 and not kwargs and not args[0].is_constant():
        return ConstantVariable(args[0].truthy(tx))  # __bool__, then __len__
    return fold(bool, args, kwargs)


def _new(base: type) -> Callable:
    """``base.__new__(cls, *args)``: a new object of ``cls``, a subclass of ``base``."""
    def handler(tx, args, kwargs):
        if not args:
            raise raise_real(TypeError(f"{base.__name__}.__new__(): not enough arguments"))
        cls = args[0].as_constant()
        if not isinstance(cls, type) or not issubclass(cls, base):
            raise raise_real(TypeError(f"{base.__name__}.__new__(X): X is not a subtype of "
                                       f"{base.__name__}"))
        rest = list(args[1:])
        c_new = next(vars(k)["__new__"] for k in cls.__mro__
                     if not isinstance(vars(k).get("__new__", staticmethod(None)), staticmethod))
        if c_new is not base.__new__:  # tp_new_wrapper: the builtin part must be base's
            raise raise_real(TypeError(f"{base.__name__}.__new__({cls.__name__}) is not safe, "
                                       f"use {cls.__name__}.__new__()"))
        if cls is base:  # dict.__new__(dict): the builtin; mutable ones ignore the arguments
            keep = base in (tuple, frozenset, str, int, float)
            return BuiltinVariable(base).call(tx, rest if keep else [], kwargs if keep else {})
        if base is tuple and hasattr(cls, "_fields"):  # a namedtuple's _make: a named tuple
            if len(rest) > 1 or kwargs:
                raise raise_real(TypeError(f"tuple expected at most 1 argument, got {len(rest)}"))
            items = rest[0].unpack(tx) if rest else []
            return TupleVariable(list(items), tuple_class=cls)
        if base is object and (rest or kwargs) and \
                lookup_class_attr(cls, "__new__") is not object.__new__:
            raise raise_real(TypeError("object.__new__() takes exactly one argument (the type "
                                       "to instantiate)"))
        if base is object and (rest or kwargs) and \
                lookup_class_attr(cls, "__init__") is object.__init__:
            raise raise_real(TypeError(f"{cls.__name__}() takes no arguments"))
        return new_object(tx, cls, rest, kwargs)

    return handler


def _signature(tx, args, kwargs):
    """``inspect.signature(f)`` of a user function or method: computed from the real function,
    which the trace already pins (its defaults are read, so guarded, through ``f``)."""
    if len(args) != 1 or kwargs:
        raise Unsupported("inspect.signature() with options")
    target = args[0]
    bound = isinstance(target, UserMethodVariable)
    function = target.fn if bound else target
    if not isinstance(function, UserFunctionVariable):
        raise Unsupported(f"inspect.signature() of {target!r}")
    function.defaults(tx)
    function.kwdefaults(tx)
    signature = inspect.signature(function.fn)
    if bound:
        parameters = list(signature.parameters.values())
        if not parameters or parameters[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                        inspect.Parameter.POSITIONAL_OR_KEYWORD):
            raise Unsupported(f"inspect.signature() of {target!r}, a method without self")
        signature = signature.replace(parameters=parameters[1:])
    return SignatureVariable(signature)


class SignatureVariable(VariableTracker):
    """An ``inspect.Signature`` computed while tracing; ``parameters`` is a dict of them."""

    def __init__(self, signature: inspect.Signature) -> None:
        super().__init__()
        self.signature = signature

    def describe(self) -> str:
        return str(self.signature)

    def python_type(self) -> type:
        return inspect.Signature

    def var_getattr(self, tx, name):
        if name == "parameters":
            return DictVariable({k: tx.wrap_unguarded(p)
                                 for k, p in self.signature.parameters.items()})
        raise Unsupported(f"attribute {name!r} of an inspect.Signature")


def _str(tx, args, kwargs):
    if len(args) == 1 and isinstance(args[0], ExceptionVariable):
        return ConstantVariable(str(args[0].as_real()))
    return _converted(tx, "__str__", args, kwargs) or fold(str, args, kwargs)


# builtin -> handler(tx, args, kwargs). One row per builtin with symbolic arguments.
def _eval(tx, args, kwargs):
    """``eval`` of a literal (``eval(repr(False))``): its value, as ``ast.literal_eval`` gives
    it, with no code run; any other source runs eagerly (a graph break)."""
    source = args[0] if len(args) == 1 and not kwargs else None
    if source is not None and source.is_constant() and type(source.as_constant()) is str:
        try:
            value = ast.literal_eval(source.as_constant())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            pass
        else:
            return wrap_constant(value)
    raise trace_rules.skip_error(eval, trace_rules.Decision(trace_rules.Kind.SKIP,
                                                            trace_rules.IO_BUILTIN))


BUILTIN_HANDLERS: dict[Any, Callable] = {
    eval: _eval,  # a literal folds; other code runs eagerly
    len: _len,  # tensors: size of dim 0; containers: number of items
    isinstance: _isinstance,  # by the tracked python type, or the metaclass's hook inlined
    issubclass: _issubclass,  # by the MRO, or the metaclass's hook inlined
    type: _type,  # the tracked python type (Tensor, not FakeTensor)
    abs: _tensor_math("abs"),  # abs(tensor) is tensor.__abs__
    pow: _tensor_math("pow"),  # pow(tensor, n) is tensor ** n
    tuple: _sequence(tuple),  # materialise anything unpackable
    list: _sequence(list),
    getattr: _getattr,  # getattr(obj, "name"[, default])
    hasattr: _hasattr,
    setattr: _setattr,  # on objects: a store (in-frame) or a ledger entry (inputs)
    delattr: _delattr,  # on objects made in the frame: out of the instance dict
    bool: _bool,  # of a user object: its __bool__ or __len__
    inspect.signature: _signature,  # of a user function or method, from the real function
    # True while tracing, as under torch.compile: libraries take their compile-friendly paths.
    torch.compiler.is_compiling: lambda tx, args, kwargs: ConstantVariable(True),
    torch.compiler.is_dynamo_compiling: lambda tx, args, kwargs: ConstantVariable(True),
    torch._utils.is_compiling: lambda tx, args, kwargs: ConstantVariable(True),
    # The C __new__ of object and of each builtin that user classes subclass (super().__new__).
    **{base.__new__: _new(base) for base in (object, *BUILTIN_BASES)},
    super: _super,  # zero-argument super() reads __class__ and the first argument
    zip: _zip,  # iterators over trackers are materialised: lengths are known while tracing
    enumerate: _enumerate,
    reversed: _reversed,
    iter: _iter,
    next: _next,  # exhausted without default: StopIteration raised in the trace
    map: _map,  # the function is called (inlined) for each item
    filter: _filter,
    sum: _reduce_binary(operator.add, "sum"),  # tensors add into the graph
    min: _min_max(min),  # constants only: min of tensors compares data
    max: _min_max(max),
    all: _all_any(all),  # truthiness of each item; tensors break (data-dependent)
    any: _all_any(any),
    sorted: _sorted,  # constants, or a key function that gives constants
    callable: _callable,
    vars: _vars,  # vars(obj): its __dict__ (vars() alone reads the frame: a break)
    traceback.clear_frames: _clear_frames,  # of None or a traced exception's: nothing to do
    id: _id,  # of an input: a constant, the object pinned by identity; of a new object: a break
    # The int <-> str conversion limit (test_int's helpers read it), guarded.
    sys.get_int_max_str_digits: _process_setting(sys.get_int_max_str_digits,
                                                 "sys.get_int_max_str_digits()"),
    types.MethodType: _method_type,  # a Python function bound to an object
    dict: _dict,
    set: _set(frozen=False),
    frozenset: _set(frozen=True),
    str: _str,  # str(exception) inside an except block
    int: _int,  # int(n) of a symbolic int stays symbolic; of an object: __int__; else folds
    float: _float,  # of an object: __float__; else folds
    object: _object,  # a new bare object
}


# The arguments the builtins with handlers and no text signature take: (fewest positional, most
# positional or None for any, the keywords accepted or None for any). The others are read from
# ``inspect.signature``.
ARITY = {
    getattr: (2, 3, frozenset()),  # getattr(obj, name[, default])
    bool: (0, 1, frozenset()),
    super: (0, 2, frozenset()),
    zip: (0, None, frozenset({"strict"})),
    iter: (1, 2, frozenset()),  # iter(obj) or iter(function, sentinel)
    next: (1, 2, frozenset()),  # next(iterator[, default])
    map: (2, None, frozenset()),
    filter: (2, 2, frozenset()),
    min: (1, None, frozenset({"key", "default"})),
    max: (1, None, frozenset({"key", "default"})),
    vars: (0, 1, frozenset()),
    id: (1, 1, frozenset()),
    dict: (0, 1, None),  # dict(mapping_or_pairs, **items)
    set: (0, 1, frozenset()),
    frozenset: (0, 1, frozenset()),
    str: (0, 3, frozenset({"object", "encoding", "errors"})),
    int: (0, 2, frozenset({"base"})),
}


class _Placeholder:
    """An argument that no builtin is given while tracing: it stands for the program's values
    in a call that CPython refuses while parsing its arguments, before using any."""


@functools.cache
def _signature_of(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _accepts(fn: Any, args: list, kwargs: dict) -> bool:
    """Whether the builtin ``fn`` takes this many positional arguments and these keywords."""
    row = ARITY.get(fn)
    if row is not None:
        fewest, most, keywords = row
        return fewest <= len(args) and (most is None or len(args) <= most) and \
            (keywords is None or set(kwargs) <= keywords)
    signature = _signature_of(fn)
    if signature is None:
        return True
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def check_arguments(fn: Any, args: list[VariableTracker], kwargs: dict) -> None:
    """Raise, in the program, the TypeError that eager raises for a call of the builtin ``fn``
    with the wrong number of arguments or an unknown keyword. The message is CPython's own:
    the builtin is called with placeholders, which it refuses before looking at them."""
    if getattr(fn, "__module__", None) != "builtins" or _accepts(fn, args, kwargs):
        return
    try:
        fn(*[_Placeholder()] * len(args), **{k: _Placeholder() for k in kwargs})
    except TypeError as error:
        if _Placeholder.__name__ not in str(error):  # refused before using an argument
            raise raise_real(error) from None
    except Exception:
        pass
    raise Unsupported(f"{fn.__name__}() with {len(args)} arguments and keywords "
                      f"{sorted(kwargs)}: not checked while tracing")


def _check_arity(fn: Callable, args: list[VariableTracker]) -> None:
    """Raise, in the program, CPython's TypeError for a call of ``fn`` (of operator) with the
    wrong number of arguments; placeholders stand for the arguments."""
    try:
        inspect.signature(fn).bind(*args)
    except TypeError:
        try:
            fn(*[_Placeholder()] * len(args))
        except TypeError as error:
            raise raise_real(error) from None


def _steps_through(value: VariableTracker) -> bool:
    """An iterable the handlers cannot materialise: a lazy iterator or a generator (it may never
    end, and its items must come when the consumer asks) or an object of a user class with
    ``__iter__``. Only Python's protocol, item by item, follows it."""
    return isinstance(value, (LazyIteratorVariable, GeneratorVariable)) or (
        isinstance(value, UserObjectVariable) and
        callable(lookup_class_attr(value.cls, "__iter__")))


def _any_steps_through(args: list[VariableTracker], kwargs: dict) -> bool:
    return any(_steps_through(a) for a in args)


def _keywords_or_steps(args: list[VariableTracker], kwargs: dict) -> bool:
    return bool(kwargs) or _any_steps_through(args, kwargs)


def _always(args: list[VariableTracker], kwargs: dict) -> bool:
    return True


# Builtins whose polyfill (graphlift/polyfills/builtins.py) runs instead of the handler, and when.
USE_POLYFILL_WHEN: dict[Any, Callable[[list, dict], bool]] = {
    sum: _any_steps_through,  # sum(CountDown(3)): __iter__, then item by item
    all: _any_steps_through,  # all(repeat(True, 3)) or any(count()): stops early, lazily
    any: _any_steps_through,
    enumerate: _any_steps_through,
    zip: _any_steps_through,  # zip(count(5), "ab"): stops at the shortest without unpacking
    map: _always,  # lazy: f(item) runs when the item is pulled, interleaved with the consumer
    filter: _always,
    min: _keywords_or_steps,  # key= and default= follow Python's rules exactly
    max: _keywords_or_steps,
    iter: lambda args, kwargs: len(args) == 2,  # iter(function, sentinel): lazy, call by call
}



# C functions of pure modules: folded on constants; operator's functions also work on tensors.
PURE_MODULES = frozenset({"math", "cmath", "operator", "_operator"})


def fold(fn: Callable, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> \
        VariableTracker:
    """Call a pure builtin on constants for real and wrap its result."""
    if not all(a.is_constant() for a in args) or not all(v.is_constant() for v in kwargs.values()):
        raise Unsupported(f"builtin {fn.__name__}() with non-constant arguments")
    # Read outside the try: reading a symbol's value may be a graph break (GL0012), not an
    # error of the program.
    values = [a.as_constant() for a in args]
    keywords = {k: v.as_constant() for k, v in kwargs.items()}
    try:
        result = fn(*values, **keywords)
    except Exception as error:
        raise raise_real(error) from error  # int("a") raises ValueError inside the trace
    if isinstance(result, (zip, enumerate, reversed, type(iter([])))):
        result = tuple(result)
    return wrap_constant(result)


def _operator_set(tx: Translator, obj: VariableTracker, index: VariableTracker,
                  value: VariableTracker) -> VariableTracker:
    tx.store_subscript(obj, index, value)
    return ConstantVariable(None)


def _operator_del(tx: Translator, obj: VariableTracker, index: VariableTracker) -> \
        VariableTracker:
    tx.delete_subscript(obj, index)
    return ConstantVariable(None)


def _operator_binary(op: Callable) -> Callable:
    return lambda tx, left, right: tx.binary_op(op, left, right)


# operator's functions on trackers that are not all constants (a list, a dict, a user object):
# what the matching bytecode does, since folding would act on copies of the program's objects
# (``operator.delitem(a, 1)`` must empty the very list). By arity, after CPython's own check.
OPERATOR_AS_BYTECODE: dict[Callable, Callable] = {
    operator.getitem: lambda tx, obj, index: tx.subscript(obj, index),  # obj[index]
    operator.setitem: _operator_set,  # obj[index] = value
    operator.delitem: _operator_del,  # del obj[index]
    operator.contains: lambda tx, obj, item: ConstantVariable(tx.contains(obj, item)),
    operator.is_: lambda tx, a, b: ConstantVariable(tx.is_same(a, b)),  # a is b
    operator.is_not: lambda tx, a, b: ConstantVariable(not tx.is_same(a, b)),  # a is not b
    **{op: _operator_binary(op) for op in (
        operator.add, operator.iadd, operator.sub, operator.isub, operator.mul, operator.imul,
        operator.and_, operator.iand, operator.or_, operator.ior, operator.xor, operator.ixor)},
}


class BuiltinVariable(VariableTracker):
    """A Python builtin function or type."""

    callable_kind = True

    def __init__(self, fn: Any, source=None) -> None:
        super().__init__(source)
        self.fn = fn

    def describe(self) -> str:
        return self.fn.__name__

    def python_type(self) -> type:
        return type(self.fn)

    def is_constant(self) -> bool:
        # Builtin types (int, float, tuple) are valid isinstance() arguments.
        return isinstance(self.fn, type)

    def as_constant(self) -> Any:
        if isinstance(self.fn, type):
            return self.fn
        return super().as_constant()

    def var_getattr(self, tx, name):
        try:
            value = getattr(self.fn, name)
        except AttributeError as error:
            raise Unsupported(f"{self.fn!r} has no attribute {name!r}",
                              break_type="user_exception") from error
        return wrap_constant(value) if not callable(value) else BuiltinVariable(value)

    def call(self, tx: Translator, args, kwargs):
        if isinstance(self.fn, type) and issubclass(self.fn, BaseException):
            return ExceptionVariable(self.fn, args)
        if trace_rules.is_builtin_method(self.fn):  # dict.get(d, k), object.__setattr__(...)
            return call_builtin_descriptor(tx, self.fn, args, kwargs)
        owner = getattr(self.fn, "__self__", None)
        if getattr(self.fn, "__name__", None) == "fromkeys" and isinstance(owner, type) and \
                issubclass(owner, dict):
            return dict_fromkeys(tx, lambda: tx.wrap_unguarded(owner).call(tx, [], {}),
                                 args, kwargs)
        handler = BUILTIN_HANDLERS.get(self.fn)
        if handler is not None:
            check_arguments(self.fn, args, kwargs)
        use_polyfill = USE_POLYFILL_WHEN.get(self.fn)
        if use_polyfill is not None and config.use_polyfills and use_polyfill(args, kwargs):
            result = UserFunctionVariable(polyfill_for(self.fn)).call(tx, args, kwargs)
            if isinstance(result, GeneratorVariable):
                result.stand_for(self.fn)  # zip(...) is a zip object to the program
            return result
        if handler is not None:
            try:
                return handler(tx, args, kwargs)
            except (TypeError, ValueError) as error:
                raise Unsupported(f"{self.fn.__name__}() raised {type(error).__name__}: {error}",
                                  break_type="user_exception") from error
        if self.fn in trace_rules.PURE_BUILTINS or owner in trace_rules.CONSTANT_CLASSES or \
                self.fn in trace_rules.PURE_C_FUNCTIONS:
            return fold(self.fn, args, kwargs)  # dict.fromkeys, str.join, struct.pack...
        module = getattr(self.fn, "__module__", None)
        if module in PURE_MODULES:
            if module.endswith("operator") and any(isinstance(a, TensorVariable) for a in args):
                return call_torch(tx, "call_function", self.fn, args, kwargs)
            # By name: a fresh import of _operator (CPython's tests) has its own functions.
            as_bytecode = OPERATOR_AS_BYTECODE.get(getattr(operator, self.fn.__name__, None))
            if as_bytecode is not None and not kwargs and \
                    not all(isinstance(a, ConstantVariable) for a in args):
                _check_arity(self.fn, args)
                return as_bytecode(tx, *args)
            return fold(self.fn, args, kwargs)
        raise trace_rules.skip_error(self.fn, trace_rules.lookup(self.fn))

    def reconstruct(self, codegen) -> str:
        return codegen.constant(self.fn)


# The rules ask which builtins have a handler here (BUILTIN decisions).
trace_rules.MODELLED_BUILTINS.update(BUILTIN_HANDLERS)


# Constants that are one object each: id(None) is the same in every run.
_SINGLETONS = frozenset({type(None), bool, type(Ellipsis), type(NotImplemented)})

# Trackers that hold the real object they stand for, never one made in the frame: id() of it.
_FIXED_OBJECTS: dict[type, Callable[[Any], Any]] = {
    BuiltinVariable: operator.attrgetter("fn"),  # len, print: the builtins module's own
    PythonModuleVariable: operator.attrgetter("module"),  # a module, by import or attribute
    ClassVariable: operator.attrgetter("cls"),  # a class (one made in the frame is a break)
}
