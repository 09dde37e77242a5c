"""Custom operators and ``torch.ops`` packets: graph nodes targeting the dispatcher's operator.

torch.compile puts a custom operator into the graph as the operator itself, run on fake tensors
through its fake kernel, and a backend that traces autograd (``aot_eager``, ``inductor``) goes
through the operator's autograd kernel and functionalizes the arguments it mutates. graphlift
does the same; the node targets are torch.compile's:

=====================================  ===============================================
called as                              node target
=====================================  ===============================================
``my_op(x)`` (a ``CustomOpDef``)       its overload ``torch.ops.ns.my_op.default``
``torch.ops.ns.my_op(x)``              the packet ``torch.ops.ns.my_op``
``torch.ops.ns.my_op.default(x)``      the overload (``.Tensor``, ``.Scalar``... alike)
=====================================  ===============================================

An operator that fake tensors cannot run (a ``custom_op`` without ``register_fake``, a
``Library`` fragment with only a CPU kernel) is a graph break that says so, and the call runs
eagerly; torch.compile raises for the first and breaks for the second.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._library import utils as library_utils
from torch._library.custom_ops import CustomOpDef

from graphlift.exc import Unsupported
from graphlift.sources import AttrSource
from graphlift.variables.base import Translator, VariableTracker
from graphlift.variables.constant import is_constant_value, wrap_constant
from graphlift.variables.tensor import TorchCallableVariable, call_torch

# Attributes of a packet or an overload that are plain data, folded to constants.
CONSTANT_ATTRS = frozenset({"__name__", "__qualname__", "__module__", "_qualified_op_name",
                            "_overloadname", "_name", "_namespace", "_op_name"})


class OpPacketVariable(TorchCallableVariable):
    """``torch.ops.ns.op``: called, one node targeting the packet (dispatch picks the
    overload when the graph runs); ``.default``, ``.Tensor``... are its overloads."""

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        packet = self.fn
        if name == "default" or name in packet.overloads():
            overload = getattr(packet, name)
            source = AttrSource(self.source, name) if self.source is not None else None
            return OpOverloadVariable(overload, source)
        return _constant_attr(self, packet, name)


class OpOverloadVariable(TorchCallableVariable):
    """``torch.ops.ns.op.overload``: called, one node targeting the overload."""

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        if name == "overloadpacket":
            return OpPacketVariable(self.fn.overloadpacket)
        return _constant_attr(self, self.fn, name)


class CustomOpVariable(TorchCallableVariable):
    """A ``torch.library.custom_op`` function (a ``CustomOpDef``): a call is one node targeting
    its overload, as in torch.compile. The object itself stays what the program holds (it is
    pinned by identity where it was read, and rebuilt from there)."""

    def describe(self) -> str:
        return f"custom_op {self.fn._qualname}"

    def call(self, tx, args, kwargs):
        _refuse_without_fake_kernel(self.fn)
        return call_torch(tx, "call_function", self.fn._opoverload, args, kwargs)

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        if name == "_opoverload":
            return OpOverloadVariable(self.fn._opoverload)
        return _constant_attr(self, self.fn, name)


def _constant_attr(tracker: VariableTracker, owner: Any, name: str) -> VariableTracker:
    """A data attribute of an operator object (its name, its namespace) as a constant; any
    other attribute is not modelled."""
    value = getattr(owner, name, None) if name in CONSTANT_ATTRS else None
    if value is None or not is_constant_value(value):
        raise Unsupported(f"attribute {name!r} of {tracker!r}")
    return wrap_constant(value)


def _refuse_without_fake_kernel(op: CustomOpDef) -> None:
    """A custom op without a fake kernel cannot be traced: a graph break naming the fix (its
    own fake kernel raises RuntimeError on fake tensors, which reads like the user's error).
    One that returns nothing and only mutates gets a trivial fake kernel from torch."""
    if op._abstract_fn is not None or library_utils.can_generate_trivial_fake_impl(
            op._opoverload):
        return
    raise Unsupported(
        f"custom operator {op._qualname} has no fake kernel, so its output's shape cannot be "
        "known while tracing (torch.compile raises here)", break_type="unsupported_operator",
        hints=(f"register one with @{op._init_fn.__name__}.register_fake",))


def is_custom_op(value: Any) -> bool:
    """A ``torch.library.custom_op`` function."""
    return isinstance(value, CustomOpDef)


def wrap_operator(value: Any, source: Any = None) -> VariableTracker:
    """The tracker for a dispatcher operator object: a custom op, a packet or an overload."""
    if isinstance(value, CustomOpDef):
        return CustomOpVariable(value, source)
    if isinstance(value, torch._ops.OpOverloadPacket):
        return OpPacketVariable(value, source)
    return OpOverloadVariable(value, source)


OPERATOR_TYPES = (CustomOpDef, torch._ops.OpOverloadPacket, torch._ops.OpOverload)
