"""``torch.autograd.Function.apply``: custom autograd functions (BLOOM's GeLU, ...) in the graph.

Eager ``apply`` runs the class's ``forward`` with grad mode off, and when an input requires grad
attaches the class's ``backward`` to the outputs. The trace does the same in two ways:

- **no input requires grad** (inference, ``no_grad``): the outputs carry no backward, so
  ``forward`` is inlined with grad mode off, its context a fresh ``FunctionCtx`` object (what
  ``save_for_backward`` and friends store on it is dropped with it); its operations join the
  graph, as under torch.compile;
- **an input requires grad** (training): ``cls.apply`` is one node of the graph, its output
  metadata from running it on fake tensors. A backend that differentiates (``aot_eager``,
  ``inductor``) traces through the node, so ``backward`` becomes part of its backward graph;
  backend ``eager`` calls ``apply`` itself. torch.compile instead puts a higher-order operator
  holding the forward and backward graphs in the graph (also one node).

Partial: ``forward`` and ``backward`` are not traced by graphlift in the second case, so Python
side effects of ``forward`` (prints, global stores) happen once more while compiling, on fake
tensors, and a ``forward`` that fake tensors cannot run is a graph break.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.function import FunctionCtx

from graphlift.exc import Unsupported
from graphlift.variables.base import Translator, VariableTracker
from graphlift.variables.constant import ConstantVariable
from graphlift.variables.containers import TupleVariable
from graphlift.variables.context import set_grad_mode
from graphlift.variables.functions import CALL_HANDLERS, UserFunctionVariable
from graphlift.variables.objects import ClassVariable, UserObjectVariable
from graphlift.variables.tensor import TensorVariable, call_torch, to_fake

# The function under the ``Function.apply`` classmethod, which ``cls.apply`` binds to ``cls``.
FUNCTION_APPLY = torch.autograd.Function.apply.__func__


def apply_autograd_function(tx: Translator, args: list[VariableTracker],
                            kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``cls.apply(*args)``: ``args[0]`` is the class, the rest its arguments."""
    owner, *rest = args
    if not isinstance(owner, ClassVariable) or \
            not issubclass(owner.cls, torch.autograd.Function):
        raise Unsupported("torch.autograd.Function.apply on something other than a Function "
                          "subclass")
    cls = owner.cls
    if kwargs:
        raise Unsupported(f"{cls.__qualname__}.apply() with keyword arguments")
    if _any_requires_grad(rest) and torch.is_grad_enabled():
        return call_torch(tx, "call_function", apply_node(cls), rest, {})
    return _inline_forward(tx, cls, rest)


# Function subclass -> the function its graph nodes call (FX names a node's target by module
# and name, which a bound ``cls.apply`` would give as ``torch.autograd.function.apply``).
_APPLY_NODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def apply_node(cls: type) -> Callable[..., Any]:
    """The graph node's target for ``cls.apply``: a function of this module named after cls."""
    target = _APPLY_NODES.get(cls)
    if target is None:
        owner = weakref.ref(cls)  # the table's value must not keep its key alive

        def target(*args: Any) -> Any:
            return owner().apply(*args)

        target.__name__ = target.__qualname__ = f"{cls.__name__}_apply"
        _APPLY_NODES[cls] = target
    return target


def _any_requires_grad(args: list[VariableTracker]) -> bool:
    """Whether a tensor argument (or one inside a tuple or list argument) requires grad."""
    for arg in args:
        if isinstance(arg, TensorVariable) and to_fake(arg).requires_grad:
            return True
        if isinstance(arg, TupleVariable) and _any_requires_grad(list(arg.items)):
            return True
    return False


def _inline_forward(tx: Translator, cls: type,
                    args: list[VariableTracker]) -> VariableTracker:
    """``cls.forward`` inlined with grad mode off, as ``apply`` runs it; no backward is needed."""
    forward = UserFunctionVariable(cls.forward)
    if _has_setup_context(cls):
        call_args = args  # forward(*args); setup_context only fills the context
    else:
        ctx = UserObjectVariable(None, cls=FunctionCtx)
        ctx.attrs["needs_input_grad"] = ConstantVariable(tuple(False for _ in args))
        call_args = [ctx, *args]
    previous = torch.is_grad_enabled()
    set_grad_mode(tx, False)
    try:
        result = forward.call(tx, call_args, {})
    except BaseException:
        torch._C._set_grad_enabled(previous)  # the trace stops here; leave grad mode as it was
        raise
    set_grad_mode(tx, previous)
    return result


def _has_setup_context(cls: type) -> bool:
    """Whether ``cls`` defines ``setup_context`` (then ``forward`` takes no context)."""
    own = getattr(cls.setup_context, "__func__", cls.setup_context)
    base = torch.autograd.function._SingleLevelFunction.setup_context
    return own is not getattr(base, "__func__", base)


CALL_HANDLERS[FUNCTION_APPLY] = apply_autograd_function


