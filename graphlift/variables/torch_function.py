"""Tensor subclasses with ``__torch_function__``, traced: the subclass's Python runs inline.

An object of a traceable subclass (:func:`is_traceable_subclass`) is a
:class:`~graphlift.variables.tensor.TensorVariable` whose ``subclass`` names its class; the graph
itself only ever sees plain tensors (an input is fed through ``PlainTensorSource``). A torch call
given such an object goes where eager sends it (:func:`dispatch`):

- the subclass's own ``__torch_function__`` (a Python classmethod) is inlined with eager's
  arguments ``(cls, func, types, args, kwargs)``;
- ``torch.Tensor.__torch_function__`` (reached through ``super()`` or inherited by a subclass that
  defines none) is modelled (:class:`TensorTorchFunctionVariable`): the call runs on plain
  tensors, and its tensor results become objects of the class, as ``torch._tensor._convert``
  makes them (a new object, so with an empty ``__dict__``).

A subclass whose ``__torch_function__`` is torch's disabled one (an ``nn.Parameter`` subclass
without its own) is a plain tensor to every torch call: it is traced as ``Parameter`` is
(:func:`has_disabled_torch_function`), its exact class guarded.

Refused (a graph break, so the call runs eagerly): subclasses with ``__torch_dispatch__``
(wrapper subclasses), torch's own subclasses, ``nn.Parameter`` subclasses with their own
``__torch_function__``, calls mixing two subclasses, and the calls whose eager ``func`` object
is not modelled here (see ``_eager_func``).
"""

from __future__ import annotations

import operator
import types
from typing import Any

import torch

from graphlift import trace_rules
from graphlift.exc import Unsupported
from graphlift.variables.base import MISSING, Translator, VariableTracker, lookup_class_attr
from graphlift.variables.constant import ConstantVariable
from graphlift.variables.containers import DictVariable, ListVariable, TupleVariable
from graphlift.variables.functions import UserFunctionVariable
from graphlift.variables.objects import (
    CLASSMETHOD_MODELS,
    ClassVariable,
    bind_class_attr,
    guard_class_attr,
)
from graphlift.variables.symbolic import SizeVariable
from graphlift.variables.tensor import (
    SUBCLASS_GETATTR,
    TENSOR_TORCH_FUNCTION,
    TORCH_FUNCTION_DISPATCH,
    TensorVariable,
    call_torch,
)


def is_traceable_subclass(cls: type) -> bool:
    """A user's subclass of ``torch.Tensor`` whose torch calls this module can trace: its
    ``__torch_function__`` is torch.Tensor's or a Python classmethod, it has no
    ``__torch_dispatch__`` of its own (a wrapper subclass), and it is no ``nn.Parameter``
    (whose module guards and optimizers expect the real class) nor one of torch's own."""
    if not (isinstance(cls, type) and issubclass(cls, torch.Tensor)) or cls is torch.Tensor:
        return False
    if issubclass(cls, torch.nn.Parameter) or cls.__module__.split(".")[0] == "torch":
        return False
    if _own_attr(cls, "__torch_dispatch__"):
        return False
    function = lookup_class_attr(cls, "__torch_function__")
    return isinstance(function, classmethod) and isinstance(function.__func__, types.FunctionType)


def has_disabled_torch_function(cls: type) -> bool:
    """A user's subclass of ``nn.Parameter`` or ``torch.Tensor`` whose ``__torch_function__`` is
    torch's ``_disabled_torch_function_impl`` (as ``nn.Parameter``'s is), with no
    ``__torch_dispatch__`` of its own: its objects behave as plain tensors in every torch call
    (results are plain tensors; no Python of the class runs), so they are traced as
    ``Parameter`` is, their exact class guarded."""
    if not (isinstance(cls, type) and issubclass(cls, torch.Tensor)) or \
            cls.__module__.split(".")[0] == "torch":
        return False
    base = torch.nn.Parameter if issubclass(cls, torch.nn.Parameter) else torch.Tensor
    mro = cls.__mro__
    return lookup_class_attr(cls, "__torch_function__") is torch._C._disabled_torch_function_impl \
        and not any("__torch_dispatch__" in vars(k) for k in mro[:mro.index(base)])


def _own_attr(cls: type, name: str) -> bool:
    """Whether a class of ``cls``'s MRO below torch.Tensor defines ``name``."""
    return any(name in vars(base) for base in cls.__mro__[:cls.__mro__.index(torch.Tensor)])


def as_subclass(tensor: TensorVariable, cls: type) -> TensorVariable:
    """A new object of ``cls`` over ``tensor``'s data (``t.as_subclass(cls)``): the same node."""
    result = TensorVariable(tensor.node, tensor.fake)
    if cls is not torch.Tensor:
        result.subclass, result.attrs = cls, {}
    return result


# -- dispatch -------------------------------------------------------------------------------------
def dispatch(tx: Translator, op: str, target: Any, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """The result of a torch call that eager sends to a ``__torch_function__``, or None when
    it goes straight to the kernel (no argument is a subclass's object, or the trace is inside
    ``torch.Tensor.__torch_function__``)."""
    if op == "call_method" and target == "as_subclass":
        return _as_subclass_call(args, kwargs)
    if tx.output.torch_function_disabled:
        return None
    if trace_rules.hashable(target) and target is torch.overrides.handle_torch_function:
        # A torch function written in Python hands its own call over (F.relu, Tensor.split).
        func, relevant, *args = args
        return _dispatch_to(tx, _single_class(tx, [relevant]), func, args, kwargs)
    cls = _single_class(tx, [*args, *kwargs.values()])
    if cls is None:
        return None
    if trace_rules.hashable(target) and target in HAS_TORCH_FUNCTION:
        return ConstantVariable(True)  # an argument is a subclass's object: it has one
    function = _torch_function_of(tx, cls)
    reversed_name = REVERSED_METHODS.get(target) if trace_rules.hashable(target) else None
    if reversed_name is not None and len(args) == 2 and not kwargs and \
            not isinstance(args[0], TensorVariable):
        # ``1 - x``: eager calls Tensor.__rsub__(x, 1), which is what func is given.
        func = EagerFuncVariable(getattr(torch.Tensor, reversed_name), _reversed_call(op, target))
        args = [args[1], args[0]]
    else:
        func = _eager_func(tx, op, target, args, function)
    return _dispatch_to(tx, cls, func, args, kwargs)


def _single_class(tx: Translator, values: list[VariableTracker]) -> type | None:
    """The one subclass whose objects are among ``values``, or None; two are refused."""
    classes = _overloaded_classes(values)
    if len(classes) > 1:
        raise Unsupported("a torch call given objects of two tensor subclasses "
                          f"({', '.join(c.__qualname__ for c in classes)}) is not traced")
    return classes[0] if classes else None


def _dispatch_to(tx: Translator, cls: type | None, func: VariableTracker,
                 args: list[VariableTracker],
                 kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``cls.__torch_function__(func, (cls,), args, kwargs)``, inlined or modelled."""
    if cls is None:
        raise Unsupported("handle_torch_function() without a tensor subclass's object")
    function = _torch_function_of(tx, cls)
    call_args = [ClassVariable(cls), func, TupleVariable([ClassVariable(cls)]),
                 TupleVariable(list(args)), DictVariable(dict(kwargs))]
    if function is TENSOR_TORCH_FUNCTION:
        result = TensorTorchFunctionVariable(cls).call(tx, call_args[1:], {})
    else:
        result = UserFunctionVariable(function).call(tx, call_args, {})
    if result.is_constant() and result.as_constant() is NotImplemented:
        raise Unsupported(f"{cls.__qualname__}.__torch_function__ returned NotImplemented")
    return result


def _torch_function_of(tx: Translator, cls: type) -> Any:
    """The function of ``cls.__torch_function__``, guarded not to be replaced on the class."""
    attr = lookup_class_attr(cls, "__torch_function__")
    guard_class_attr(tx, cls, "__torch_function__", attr)
    return attr.__func__


# The checks torch's Python functions make before handing a call to __torch_function__: True
# where an argument is a subclass's object (and dispatch is on), as in eager.
HAS_TORCH_FUNCTION = frozenset({
    torch._C._has_torch_function, torch._C._has_torch_function_unary,
    torch._C._has_torch_function_variadic,
})


def _as_subclass_call(args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``t.as_subclass(cls)``, which runs no ``__torch_function__`` in eager."""
    (tensor, cls), rest = args[:2], args[2:]
    if rest or kwargs or not isinstance(cls, ClassVariable) or \
            not (cls.cls is torch.Tensor or is_traceable_subclass(cls.cls)):
        raise Unsupported("as_subclass() to a class whose torch calls are not traced")
    return as_subclass(tensor, cls.cls)


def _overloaded_classes(values: list[VariableTracker]) -> list[type]:
    """The subclasses of the arguments' tensors, in argument order, each once (eager looks at
    tensors given directly and inside lists and tuples)."""
    classes: list[type] = []
    for value in values:
        items = value.items if isinstance(value, (ListVariable, TupleVariable)) else [value]
        for item in items:
            if isinstance(item, TensorVariable) and item.subclass is not None and \
                    item.subclass not in classes:
                classes.append(item.subclass)
    return classes


# operator functions -> the torch.Tensor method eager hands ``__torch_function__`` as ``func``
# when the tensor is the left operand (``x + 1`` is Tensor.add).
OPERATOR_METHODS = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
    operator.floordiv: "__floordiv__", operator.matmul: "matmul", operator.pow: "__pow__",
    operator.neg: "neg", operator.getitem: "__getitem__", operator.setitem: "__setitem__",
    operator.eq: "__eq__", operator.ne: "ne", operator.lt: "lt", operator.le: "le",
    operator.gt: "gt", operator.ge: "ge",
    operator.iadd: "add_", operator.isub: "sub_", operator.imul: "mul_",
    operator.itruediv: "div_",
}


def _eager_func(tx: Translator, op: str, target: Any, args: list[VariableTracker],
                function: Any) -> VariableTracker:
    """The ``func`` eager passes ``__torch_function__`` for this call: a torch.Tensor method,
    or the torch function itself. Where the graph's call is not eager's (an operator with the
    tensor on the right, ``1 - x``, is Tensor.__rsub__; a getter, ``x.T``), only
    torch.Tensor's own ``__torch_function__`` can take it, since its result does not depend on
    ``func``'s identity; a subclass's own one is refused there."""
    if op == "call_method":
        eager = getattr(torch.Tensor, target, None)
        if eager is None:
            raise Unsupported(f"Tensor.{target} on a tensor subclass: no such method of Tensor")
        return EagerFuncVariable(eager, _graph_call(op, target))
    name = OPERATOR_METHODS.get(target) if trace_rules.hashable(target) else None
    if name is not None and args and isinstance(args[0], TensorVariable):
        return EagerFuncVariable(getattr(torch.Tensor, name), _graph_call(op, target))
    if function is TENSOR_TORCH_FUNCTION:
        return tx.wrap_unguarded(target)
    if name is None and getattr(target, "__module__", None) in _TORCH_NAMESPACES:
        return tx.wrap_unguarded(target)
    raise Unsupported(f"{getattr(target, '__name__', target)} on a tensor subclass with its own "
                      "__torch_function__: eager's func for this call is not modelled")


# operator functions -> the torch.Tensor method eager hands ``__torch_function__`` when the
# tensor is the right operand (``1 - x`` is Tensor.__rsub__(x, 1)).
REVERSED_METHODS = {
    operator.add: "add", operator.mul: "mul", operator.sub: "__rsub__",
    operator.truediv: "__rdiv__", operator.floordiv: "__rfloordiv__", operator.pow: "__rpow__",
}


def _graph_call(op: str, target: Any):
    """The graph's own form of a call whose eager ``func`` is a Tensor method (``x ** 2`` is
    ``Tensor.__pow__``, a Python function the graph should not name): the same node."""
    def run(tx: Translator, args: list[VariableTracker],
            kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return call_torch(tx, op, target, list(args), dict(kwargs))
    return run


def _reversed_call(op: str, target: Any):
    """The graph's call behind a reversed operator's ``func``: its operands back in place."""
    def run(tx: Translator, args: list[VariableTracker],
            kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if len(args) != 2 or kwargs:
            raise Unsupported("a reversed operator's func called with other arguments")
        return call_torch(tx, op, target, [args[1], args[0]], {})
    return run


def _getter_call(name: str):
    """The graph's reading of the tensor attribute ``name``, behind its getter's ``func``."""
    def run(tx: Translator, args: list[VariableTracker],
            kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if len(args) != 1 or kwargs or not isinstance(args[0], TensorVariable):
            raise Unsupported(f"the getter of Tensor.{name} called with other arguments")
        if not tx.output.torch_function_disabled and args[0].subclass is not None:
            raise Unsupported(f"the getter of Tensor.{name} called on a subclass's object "
                              "outside torch.Tensor.__torch_function__")
        return as_subclass(args[0], torch.Tensor).tensor_getattr(tx, name)
    return run


class EagerFuncVariable(VariableTracker):
    """The ``func`` eager gives ``__torch_function__`` where no torch callable of the graph is it
    (``Tensor.__rsub__``, the getter of ``Tensor.shape``): its name reads as eager's, and a call
    runs the graph's form of it. An identity test on it is refused (a graph break)."""

    callable_kind = True

    def __init__(self, func: Any, run) -> None:
        super().__init__()
        self.fn, self.run = func, run  # ``fn``, as a TorchCallableVariable's, for ``is``

    def describe(self) -> str:
        return repr(self.fn)

    def python_type(self) -> type:
        return type(self.fn)

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__"):
            return ConstantVariable(getattr(self.fn, name, None))
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def call(self, tx, args, kwargs):
        return self.run(tx, args, kwargs)


# Modules whose functions eager hands __torch_function__ as themselves (torch.add, F.relu).
_TORCH_NAMESPACES = frozenset({"torch", "torch.functional", "torch.nn.functional",
                               "torch._C._nn", "torch._C._VariableFunctions", "torch.special",
                               "torch._C._special", "torch.linalg", "torch._C._linalg", "torch.fft",
                               "torch._C._fft"})



class TensorTorchFunctionVariable(VariableTracker):
    """``torch.Tensor.__torch_function__`` bound to a subclass (``super().__torch_function__``):
    ``func`` runs on the plain tensors, and its tensor results become objects of the class."""

    callable_kind = True

    def __init__(self, cls: type) -> None:
        super().__init__()
        self.cls = cls

    def describe(self) -> str:
        return f"{self.cls.__qualname__}.__torch_function__ (torch.Tensor's)"

    def call(self, tx, args, kwargs):
        names = ("func", "types", "args", "kwargs")
        bound = dict(zip(names, args))
        bound.update(kwargs)
        func, classes = bound["func"], bound["types"]
        call_args = bound.get("args", TupleVariable([]))
        call_kwargs = bound.get("kwargs", ConstantVariable(None))
        if not all(isinstance(c, ClassVariable) for c in classes.unpack(tx)):
            raise Unsupported("__torch_function__ given types that are not classes")
        if not all(issubclass(self.cls, c.cls) for c in classes.unpack(tx)):
            return ConstantVariable(NotImplemented)
        keywords = {} if call_kwargs.is_constant() and call_kwargs.as_constant() is None \
            else _keywords(tx, call_kwargs)
        output = tx.output
        output.torch_function_disabled += 1
        try:
            result = func.call(tx, call_args.unpack(tx), keywords)
        finally:
            output.torch_function_disabled -= 1
        return convert(result, self.cls)


def _keywords(tx: Translator, kwargs: VariableTracker) -> dict[str, VariableTracker]:
    if not isinstance(kwargs, DictVariable) or \
            not all(isinstance(k, str) for k in kwargs.items):
        raise Unsupported("__torch_function__ given kwargs that are not a dict of names")
    return dict(kwargs.items)


def convert(result: VariableTracker, cls: type) -> VariableTracker:
    """``torch._tensor._convert``: tensors not already objects of ``cls`` become ones, inside
    tuples and lists too; anything else is returned as it is."""
    if isinstance(result, TensorVariable):
        return result if issubclass(result.python_type(), cls) else as_subclass(result, cls)
    if isinstance(result, SizeVariable):
        return result
    if isinstance(result, TupleVariable):
        return TupleVariable([convert(i, cls) for i in result.items],
                             tuple_class=result.python_type())
    if isinstance(result, ListVariable):
        return ListVariable([convert(i, cls) for i in result.items])
    return result


# -- attributes -----------------------------------------------------------------------------------
def subclass_getattr(tx: Translator, tensor: TensorVariable, name: str) -> VariableTracker:
    """``x.name`` for a subclass's object: the class's own attributes (methods bind, properties
    run, guarded not to change), else the instance's or torch.Tensor's. A getter of
    torch.Tensor (``x.shape``) goes through ``__torch_function__`` in eager: the subclass's own
    one is refused there (a graph break), torch.Tensor's answers as for a plain tensor."""
    cls = tensor.subclass
    if tensor.attrs and name in tensor.attrs and \
            not hasattr(type(lookup_class_attr(cls, name)), "__set__"):
        return tensor.attrs[name]  # stored by the frame on an object it made
    if name != "__class__" and _own_attr(cls, name):
        attr = lookup_class_attr(cls, name)
        guard_class_attr(tx, cls, name, attr)
        instance = _instance_value(tensor, name)
        if instance is not MISSING and not hasattr(type(attr), "__set__"):
            return tensor.tensor_getattr(tx, name)  # the instance's, over a non-data attribute
        return bind_class_attr(tx, tensor, cls, name, attr, None)
    if name in ("__class__", "__dict__") or callable(getattr(torch.Tensor, name, None)) or \
            not hasattr(torch.Tensor, name):
        return tensor.tensor_getattr(tx, name)
    function = _torch_function_of(tx, cls)
    if function is TENSOR_TORCH_FUNCTION or tx.output.torch_function_disabled:
        result = as_subclass(tensor, torch.Tensor).tensor_getattr(tx, name)
        return result if name in NOWRAP_ATTRS or tx.output.torch_function_disabled \
            else convert(result, cls)
    if name in NOWRAP_ATTRS or name not in GETTER_ATTRS:
        raise Unsupported(f"tensor attribute {name!r} of a {cls.__qualname__}, whose "
                          "__torch_function__ eager calls with the attribute's getter")
    getter = vars(torch._C.TensorBase)[name].__get__
    func = EagerFuncVariable(getter, _getter_call(name))
    result = UserFunctionVariable(function).call(
        tx, [ClassVariable(cls), func, TupleVariable([ClassVariable(cls)]),
             TupleVariable([tensor]), DictVariable({})], {})
    if result.is_constant() and result.as_constant() is NotImplemented:
        raise Unsupported(f"{cls.__qualname__}.__torch_function__ returned NotImplemented")
    return result


# torch.Tensor's getters whose reading through a subclass's own __torch_function__ is traced:
# metadata (the graph folds them) and the tensor attributes that are graph nodes.
GETTER_ATTRS = frozenset({
    "shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_cpu", "is_sparse",
    "is_quantized", "is_meta", "layout", "is_leaf", "is_nested", "T", "mT", "H", "mH",
    "real", "imag",
})


# Getters whose results torch.Tensor.__torch_function__ returns unconverted
# (torch.overrides.get_default_nowrap_functions).
NOWRAP_ATTRS = frozenset({"_base", "grad", "_grad"})


def _instance_value(tensor: TensorVariable, name: str) -> Any:
    real = tensor.input_value
    return MISSING if real is None else real.__dict__.get(name, MISSING)


def _tensor_torch_function_model(cls: type) -> VariableTracker:
    return TensorTorchFunctionVariable(cls)


# The hooks of tensor.py and objects.py, which sit below this module.
TORCH_FUNCTION_DISPATCH.append(dispatch)
SUBCLASS_GETATTR.append(subclass_getattr)
CLASSMETHOD_MODELS[TENSOR_TORCH_FUNCTION] = _tensor_torch_function_model
