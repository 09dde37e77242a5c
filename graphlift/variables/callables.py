"""Trackers for the trace rules' decisions about callables, and the one function that makes them.

:func:`wrap_callable` asks :func:`graphlift.trace_rules.lookup` what to do with a function, method,
class or operator met while tracing, and returns the tracker that does it:

=================  ==========================================================================
``INLINE``         ``UserFunctionVariable`` / ``UserMethodVariable`` (``ClassVariable`` for classes)
``POLYFILL``       :class:`PolyfillVariable`: calls inline the stand-in
``BUILTIN``        ``BuiltinVariable`` (``ClassVariable`` for classes with a native constructor)
``GRAPH``          ``TorchCallableVariable``; :class:`AllowedFunctionVariable` for allow_in_graph;
                   ``HigherOrderVariable`` for torch.cond and the other higher-order operators
``SKIP``           :class:`SkippedFunctionVariable`: a call is a graph break naming the rule
=================  ==========================================================================
"""

from __future__ import annotations

import types
from typing import Any

from torch._dispatch.python import enable_python_dispatcher

from graphlift import trace_rules
from graphlift.exc import FirstCallRunsEagerly, Unsupported
from graphlift.rebuild import Codegen
from graphlift.sources import AttrSource, Source
from graphlift.trace_rules import Decision, Kind
from graphlift.variables import autograd  # noqa: F401  (registers Function.apply's handler)
from graphlift.variables.base import Translator, VariableTracker, lookup_class_attr, raise_real
from graphlift.variables.builtins import BuiltinVariable
from graphlift.variables.constant import is_constant_value, wrap_constant
from graphlift.variables.custom_ops import OPERATOR_TYPES, wrap_operator
from graphlift.variables.distributed import DistributedFunctionVariable
from graphlift.variables.functions import UserFunctionVariable, UserMethodVariable
from graphlift.variables.higher_order import HigherOrderVariable
from graphlift.variables.iterators import GeneratorVariable, LazyIteratorVariable
from graphlift.variables.numpy import NumpyFunctionVariable
from graphlift.variables.objects import ClassVariable, UserObjectVariable, bind_class_attr
from graphlift.variables.tensor import TorchCallableVariable, call_torch

# Kinds of values the trace rules classify (callable instances of user classes are objects).
CALLABLE_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                  types.MethodDescriptorType, types.WrapperDescriptorType,
                  types.MethodWrapperType, types.ClassMethodDescriptorType, type,
                  *OPERATOR_TYPES)


def is_classified_callable(value: Any) -> bool:
    """Whether ``value`` is decided by the trace rules (rather than tracked as an object)."""
    return isinstance(value, CALLABLE_TYPES) or trace_rules.is_overridden(value) or \
        (callable(value) and trace_rules.is_third_party(value))


def wrap_callable(tx: Translator, value: Any,
                  source: Source | None = None) -> VariableTracker:
    """The tracker for a callable, as the trace rules decide. The caller installs its guard."""
    decision = trace_rules.lookup(value)
    kind = decision.kind
    if decision.rule is trace_rules.NUMPY_FUNCTION:
        return NumpyFunctionVariable(value, decision.target, source)
    if kind is Kind.POLYFILL:
        return PolyfillVariable(value, decision.target, source)
    if decision.rule is trace_rules.HIGHER_ORDER:
        return HigherOrderVariable(value, decision.target, source)
    if kind is Kind.BUILTIN and decision.rule is not trace_rules.MODELLED_CLASS:
        return BuiltinVariable(value, source)  # builtin types (int, list) included
    if isinstance(value, type):
        return ClassVariable(value, source)  # ClassVariable.call consults the rules
    if kind is Kind.SKIP:
        return SkippedFunctionVariable(value, decision, source)
    if decision.rule in (trace_rules.DISTRIBUTED_COLLECTIVE, trace_rules.DISTRIBUTED_QUERY):
        return DistributedFunctionVariable(value, source)
    if kind is Kind.GRAPH:
        if decision.rule is trace_rules.ALLOW_IN_GRAPH:
            return AllowedFunctionVariable(value, source)
        if isinstance(value, OPERATOR_TYPES):  # custom ops, torch.ops packets and overloads
            return wrap_operator(value, source)
        return TorchCallableVariable(value, source)
    if isinstance(value, types.MethodType):
        fn = _wrap_part(tx, value.__func__, source, "__func__")
        return UserMethodVariable(fn, _wrap_part(tx, value.__self__, source, "__self__"))
    if decision.target is not None:  # a compile wrapper (graphlift's, torch's): its function
        return _wrap_part(tx, decision.target, source, trace_rules.original_attr(value))
    if not isinstance(value, types.FunctionType):
        return SkippedFunctionVariable(value, Decision(Kind.SKIP, trace_rules.C_FUNCTION), source)
    return UserFunctionVariable(value, source)


def _wrap_part(tx: Translator, value: Any, source: Source | None,
               attr: str) -> VariableTracker:
    """A part of a callable (a bound method's function or object), guarded through its source."""
    if source is None:
        return tx.wrap_unguarded(value)
    return tx.builder.wrap(value, AttrSource(source, attr))


class SkippedFunctionVariable(VariableTracker):
    """A callable the trace rules skip: calling it is a graph break that names the rule."""

    callable_kind = True

    def __init__(self, fn: Any, decision: Decision, source: Source | None = None) -> None:
        super().__init__(source)
        self.fn = fn
        self.decision = decision

    def describe(self) -> str:
        return getattr(self.fn, "__qualname__", None) or repr(self.fn)

    def python_type(self) -> type:
        return type(self.fn)

    def call(self, tx, args, kwargs):
        if self.decision.rule is trace_rules.OPTIMIZER_FIRST_STEP:
            if tx.output.may_run_first_call_eagerly:
                raise FirstCallRunsEagerly(self.decision.rule.why)
            return wrap_constant(None)  # this code object ran one call eagerly already
        if self.decision.rule is trace_rules.POLYFILL_DECLINED and args:
            original = args[0]
            raise trace_rules.skip_error(original.describe(), self.decision)
        raise trace_rules.skip_error(self.fn, self.decision)

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return wrap_constant(getattr(self.fn, name, None))
        raise Unsupported(f"attribute {name!r} of the skipped function {self.describe()}")

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.fn)


class PolyfillVariable(VariableTracker):
    """A C function or class with a pure-Python stand-in: calls run the stand-in instead."""

    callable_kind = True

    def __init__(self, original: Any, polyfill: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.original = original
        self.polyfill = polyfill

    def describe(self) -> str:
        return getattr(self.original, "__qualname__", None) or repr(self.original)

    def python_type(self) -> type:
        return type(self.original)

    def is_constant(self) -> bool:
        # A class (itertools.chain) is a constant: isinstance() arguments, identity tests.
        return isinstance(self.original, type)

    def as_constant(self) -> Any:
        if isinstance(self.original, type):
            return self.original
        return super().as_constant()

    def call(self, tx, args, kwargs):
        if trace_rules.constant_foldable(self.original) and \
                all(value.is_constant() for value in [*args, *kwargs.values()]):
            return self._fold(tx, args, kwargs)
        if getattr(self.polyfill, "_graphlift_lazy", False):
            return make_lazy_iterator(self.polyfill, args, kwargs)
        if isinstance(self.polyfill, type):
            return ClassVariable(self.polyfill).call(tx, args, kwargs)
        result = UserFunctionVariable(self.polyfill).call(tx, args, kwargs)
        if isinstance(result, GeneratorVariable):
            result.stand_for(self.original)  # itertools.chain(...) is a chain to the program
        return result

    def _fold(self, tx, args, kwargs) -> VariableTracker:
        """The original called for real on constants (``can_constant_fold_through``); a result
        that is no constant (a class: ``typing.get_origin(int | None)``) is wrapped as a value
        made here, unguarded."""
        try:
            value = self.original(*(a.as_constant() for a in args),
                                  **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as error:
            raise raise_real(error) from error
        return wrap_constant(value) if is_constant_value(value) else tx.wrap_unguarded(value)

    def var_getattr(self, tx, name):
        try:
            value = getattr(self.original, name)
        except AttributeError as error:
            raise Unsupported(f"{self.describe()} has no attribute {name!r}",
                              break_type="user_exception") from error
        return tx.wrap_unguarded(value)

    def reconstruct(self, codegen: Codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        return codegen.constant(self.original)


class StandInObjectVariable(UserObjectVariable):
    """A real C object from the inputs (a partial, an itemgetter) seen as its polyfill's object.

    Its attributes are the stand-in's state, read once by the builder; its methods come from the
    stand-in class, which is graphlift's own code, so they are not guarded through the object.
    """

    def var_getattr(self, tx, name):
        if name in self.attrs:
            return self.attrs[name]
        attr = lookup_class_attr(self.cls, name)
        if not callable(attr):
            raise Unsupported(f"{self.python_type().__name__!r} object has no attribute {name!r}",
                              break_type="user_exception")
        return bind_class_attr(tx, self, self.cls, name, attr, None)

    def store_attr(self, tx, name, value):
        raise Unsupported(f"assigning to an attribute of {self.source.name()}, a "
                          f"{self.python_type().__name__} from the inputs",
                          break_type="side_effect")


def make_lazy_iterator(stand_in: type, args: list[VariableTracker],
                       kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``itertools.count(...)``: the stand-in object, made for real and stepped lazily.

    Constant arguments are passed as values. The first ``_graphlift_object_args`` arguments may be
    any tracker (``repeat``'s object: the stand-in hands the same tracker back for every item).
    """
    objects = getattr(stand_in, "_graphlift_object_args", 0)
    numbers = [*args[objects:], *kwargs.values()]
    if not all(v.is_constant() for v in numbers):
        raise Unsupported(f"{stand_in._graphlift_real_class.__name__}() with arguments that "
                          "are not constants")
    values = [*args[:objects], *(a.as_constant() for a in args[objects:])]
    try:
        obj = stand_in(*values, **{k: v.as_constant() for k, v in kwargs.items()})
    except (TypeError, ValueError) as error:
        raise raise_real(error) from error
    return LazyIteratorVariable(obj)


class AllowedFunctionVariable(VariableTracker):
    """A function passed to ``graphlift.allow_in_graph``: one opaque node, its body never runs.

    The node's output metadata comes from, in order: the ``fake=`` function given to
    ``allow_in_graph``; reading the function's bytecode in a sandbox translator (its nodes,
    guards and side effects are thrown away, and nothing of it executes); calling it on fake
    tensors (only when the sandbox cannot follow it: its Python body then runs once).
    """

    callable_kind = True

    def __init__(self, fn: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.fn = fn

    def describe(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))

    def python_type(self) -> type:
        return type(self.fn)

    def call(self, tx, args, kwargs):
        def fake_result(fake_args: list, fake_kwargs: dict) -> Any:
            fake = trace_rules.fake_impl(self.fn)
            if fake is not None:
                return self._run(tx, fake, fake_args, fake_kwargs, "its fake= function")
            if isinstance(self.fn, types.FunctionType):
                result = tx.sandbox_outputs(self.fn, args, kwargs)
                if result is not None:
                    return result
            return self._run(tx, self.fn, fake_args, fake_kwargs, "it")

        return call_torch(tx, "call_function", self.fn, args, kwargs, fake_result=fake_result)

    def _run(self, tx, fn, fake_args, fake_kwargs, what: str) -> Any:
        try:
            with tx.output.fake_mode, enable_python_dispatcher():  # as call_torch runs ops
                return fn(*fake_args, **fake_kwargs)
        except Exception as error:
            raise Unsupported(
                f"allow_in_graph function {self.describe()}: {what} raised "
                f"{type(error).__name__} on fake tensors: {error}", break_type="torch_error",
                hints=("pass allow_in_graph(fn, fake=...) computing the outputs' shapes",),
            ) from error

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.fn)
