"""Tensors and the torch callables that put nodes into the graph.

A tensor operation runs on fake tensors first: that gives the result's metadata without touching
real data. Only when the result holds a tensor or a symbolic size, or the operation writes into a
tensor or has another effect (what :class:`EffectRecorder` sees it do on fake tensors), does a node
go into the graph; metadata queries such as ``x.dim()`` fold to constants, and so do sizes, except
dynamic ones (see :mod:`graphlift.variables.symbolic`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    UnsupportedOperatorException,
)
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, free_unbacked_symbols
from torch.utils._python_dispatch import TorchDispatchMode

from graphlift import trace_rules
from graphlift.config import config
from graphlift.exc import Unsupported
from graphlift.output_graph import storage_ref
from graphlift.polyfills.optim import TENSOR_SCALAR_STAND_INS
from graphlift.rebuild import Codegen
from graphlift.sources import AttrSource
from graphlift.variables.base import Translator, VariableTracker, lookup_class_attr, raise_real
from graphlift.variables.constant import ConstantVariable, is_constant_value, wrap_constant
from graphlift.variables.containers import (
    BaseListVariable,
    DictVariable,
    ListVariable,
    TupleVariable,
)
from graphlift.variables.context import set_grad_mode
from graphlift.variables.functions import UserFunctionVariable
from graphlift.variables.symbolic import (
    SizeVariable,
    SliceVariable,
    SymNodeVariable,
    concrete,
    data_dependent_guard,
    is_symbolic,
    shape_variable,
    specialize,
)

# Tensor attributes read from the fake tensor as constants while tracing.
METADATA_ATTRS = frozenset({
    "shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_cpu", "is_sparse",
    "is_quantized", "is_meta", "layout", "is_leaf", "is_nested", "is_mkldnn",
})

# Tensor attributes that are new tensors: they become graph nodes (getattr on the tensor).
TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag"})

# Methods whose answer depends on tensor data or leaves the graph's world: graph break.
DATA_DEPENDENT_METHODS = {
    "item": "reads a tensor's value into Python",
    "tolist": "reads a tensor's values into Python",
    "numpy": "converts to a NumPy array outside the graph",
    "__bool__": "reads a tensor's value into Python",
    "__int__": "reads a tensor's value into Python",
    "__float__": "reads a tensor's value into Python",
    "__index__": "reads a tensor's value into Python",
    "data_ptr": "exposes a real memory address",
    "backward": "runs autograd outside the graph",
    "retain_grad": "changes autograd state of a real tensor",
    "untyped_storage": "exposes real storage",
}


# operator functions that mutate their first argument in place.
INPLACE_OPERATORS = frozenset({
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.imatmul, operator.iand, operator.ior, operator.ixor,
    operator.ilshift, operator.irshift, operator.setitem,
})


class TensorVariable(VariableTracker):
    """A tensor in the graph: its FX node and the fake tensor that carries its metadata."""

    # The real tensor of a graph input (set by the builder): its identity as a dict key.
    input_value: torch.Tensor | None = None
    # The tensor subclass this tensor is an object of, for the program (None: torch.Tensor or
    # the input's own class). The graph works on plain tensors; see variables/torch_function.py.
    subclass: type | None = None
    # The Python attributes the frame stored on a subclass's object it made (None elsewhere).
    attrs: dict[str, VariableTracker] | None = None

    def __init__(self, node: torch.fx.Node, fake: torch.Tensor, source=None) -> None:
        super().__init__(source)
        self.node = node
        self.fake = fake
        node.meta["example_value"] = fake

    def describe(self) -> str:
        return f"{self.node.name}: {tuple(self.fake.shape)} {self.fake.dtype}"

    def python_type(self) -> type:
        # Inputs remember their real class (Parameter); results of ops are plain tensors.
        if self.subclass is not None:
            return self.subclass
        return self.node.meta.get("real_type", torch.Tensor)

    def truthy(self, tx: Translator) -> bool:
        raise Unsupported(
            "branching on a tensor's value (bool(tensor)) depends on data",
            break_type="data_dependent_branch",
            hints=("use torch.where, or move the branch out of the compiled function",),
        )

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        if self.subclass is not None and SUBCLASS_GETATTR:
            return SUBCLASS_GETATTR[0](tx, self, name)
        return self.tensor_getattr(tx, name)

    def tensor_getattr(self, tx: Translator, name: str) -> VariableTracker:
        """``self.name`` as ``torch.Tensor`` answers it (a subclass's own lookup comes first)."""
        if name == "shape":
            return shape_variable(tx, self)
        if name == "__class__":  # x.__class__.__name__: the tracked class, as type(x)
            return tx.wrap_unguarded(self.python_type())
        if name in METADATA_ATTRS:
            return wrap_constant(getattr(self.fake, name))
        if name == "grad_fn" and not self.fake.requires_grad:
            return ConstantVariable(None)  # no autograd history: requires_grad is guarded
        if name == "grad":
            return self._grad(tx)
        if name in TENSOR_ATTRS:
            return call_torch(tx, "call_function", getattr, [self, ConstantVariable(name)], {})
        if callable(getattr(torch.Tensor, name, None)):
            return TensorMethodVariable(self, name)
        if not hasattr(torch.Tensor, name):
            return self._instance_attr(tx, name)
        raise Unsupported(f"tensor attribute {name!r} is not supported while tracing")

    def _instance_attr(self, tx: Translator, name: str) -> VariableTracker:
        """An attribute the program set on a tensor (``x.scale = 2.0``): an input's is read from
        its instance dict and guarded like any attribute, its absence guarded as absent (so
        ``getattr(x, "scale", 1.0)`` and ``hasattr`` see a later call's tensor). A tensor made
        by the graph has none: ops and views return tensors with an empty ``__dict__``, and an
        attribute store on a tensor is a graph break."""
        missing = AttributeError(f"'Tensor' object has no attribute {name!r}")
        if self.source is None:
            raise raise_real(missing)
        instance_dict = self._real_input(tx, name).__dict__
        if name in instance_dict:
            return tx.builder.wrap(instance_dict[name], AttrSource(self.source, name))
        tx.guards.attr_absent(self.source, name)
        raise raise_real(missing)

    def _grad(self, tx: Translator) -> VariableTracker:
        """``p.grad`` of an input leaf (an optimizer step, gradient clipping): its gradient, a
        graph input of its own, or None, guarded like any attribute (so a backward between
        calls recompiles). Elsewhere a break: a tensor made by the graph has no gradient yet,
        and a non-leaf's ``.grad`` warns on every eager call."""
        if self.source is None:
            raise Unsupported("the .grad of a tensor made in the frame")
        real = self._real_input(tx, "grad")
        if real.grad_fn is not None:
            raise Unsupported(f"the .grad of {self.source.name()}, which is not a leaf")
        return tx.builder.wrap(real.grad, AttrSource(self.source, "grad"))

    def _real_input(self, tx: Translator, name: str) -> torch.Tensor:
        """The real tensor behind this input, to read attribute ``name`` from."""
        if self.input_value is not None:  # a subclass's object, fed to the graph as a Tensor
            return self.input_value
        real = next((graph_input.example for graph_input in tx.output.inputs
                     if graph_input.node is self.node), None)
        if not isinstance(real, torch.Tensor):
            raise Unsupported(f"attribute {name!r} of the tensor {self.source.name()}, whose "
                              "value is not a graph input here")
        return real

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        if self.subclass is not None and not tx.output.torch_function_disabled:
            # Tensor.__iter__ as eager runs it: dim() and unbind(0), each dispatched.
            if call_torch(tx, "call_method", "dim", [self], {}).as_constant() == 0:
                raise Unsupported("iteration over a 0-d tensor")
            return call_torch(tx, "call_method", "unbind", [self, ConstantVariable(0)],
                              {}).unpack(tx)
        if self.fake.dim() == 0:
            raise Unsupported("iteration over a 0-d tensor")
        return [call_torch(tx, "call_function", operator.getitem, [self, ConstantVariable(i)], {})
                for i in range(specialize(tx.output, self.fake.shape[0]))]

    def reconstruct(self, codegen: Codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        if self.subclass is not None:  # the graph's plain output, made an object of the class
            return codegen.remember(self, self._rebuild)
        return codegen.graph_output(self)

    def _rebuild(self, codegen: Codegen) -> str:
        """A subclass's object made in the frame, rebuilt once (identity kept) with the
        attributes the frame stored on it."""
        attrs = ", ".join(f"{name!r}: {value.reconstruct(codegen)}"
                          for name, value in (self.attrs or {}).items())
        return f"{codegen.constant(rebuild_subclass_object)}({codegen.graph_output(self)}, " \
            f"{codegen.constant(self.subclass)}, {{{attrs}}})"

    def store_attr(self, tx: Translator, name: str, value: VariableTracker) -> None:
        """``y.name = value`` on a subclass's object made in the frame: into its instance
        dict. Anywhere else (an input, a plain tensor, a name torch.Tensor or the class gives a
        setter) a graph break."""
        if self.subclass is None or self.source is not None or self.attrs is None or \
                hasattr(type(lookup_class_attr(self.subclass, name)), "__set__"):
            raise Unsupported(f"attribute assignment on {self!r}", break_type="side_effect")
        tx.output.side_effects.write_local(self)
        self.attrs[name] = value


def rebuild_subclass_object(tensor: torch.Tensor, cls: type, attrs: dict) -> torch.Tensor:
    """The graph's plain output as an object of ``cls`` holding ``attrs`` (run at return)."""
    result = torch._C.TensorBase.as_subclass(tensor, cls)
    result.__dict__.update(attrs)
    return result


# Filled by variables/torch_function.py (above this module): the attribute lookup of a tensor
# subclass's object, and the ``__torch_function__`` dispatch of a torch call given one (it
# returns None where no argument is such an object).
SUBCLASS_GETATTR: list[Callable] = []
TORCH_FUNCTION_DISPATCH: list[Callable] = []


class TensorMethodVariable(VariableTracker):
    """``x.view`` before it is called: calling it adds a ``call_method`` node."""

    def __init__(self, tensor: TensorVariable, name: str) -> None:
        super().__init__()
        self.tensor, self.name = tensor, name

    def describe(self) -> str:
        return f"Tensor.{self.name}"

    def reconstruct(self, codegen: Codegen) -> str:
        """The bound method, rebuilt from its tensor (alive across a graph break)."""
        return f"{self.tensor.reconstruct(codegen)}.{self.name}"

    def call(self, tx, args, kwargs):
        special = self.name in SPECIAL_METHODS or self.name in CALLABLE_METHODS or \
            self.name in ARRAY_METHODS
        if special and has_own_torch_function(self.tensor.subclass) and \
                not tx.output.torch_function_disabled:
            # Their handlers below would skip the subclass's __torch_function__: eager runs it.
            raise Unsupported(f"Tensor.{self.name}() of a {self.tensor.subclass.__qualname__}, "
                              "whose own __torch_function__ eager calls for it")
        captured = CAPTURED_SCALAR_METHODS.get(self.name)
        if captured is not None and tx.output.captures_scalars:
            return captured(tx, self.tensor, args, kwargs)
        to_array = ARRAY_METHODS.get(self.name) if config.trace_numpy else None
        if to_array is not None:
            return to_array(tx, self.tensor, args, kwargs)
        takes_callable = CALLABLE_METHODS.get(self.name)
        if takes_callable is not None:
            return takes_callable(tx, self.tensor, args, kwargs)
        # Refused at the call, not the attribute load, so the frame can split at the call.
        if self.name in DATA_DEPENDENT_METHODS:
            raise Unsupported(f"Tensor.{self.name}() {DATA_DEPENDENT_METHODS[self.name]}",
                              break_type="data_dependent")
        if self.name == "requires_grad_":
            return _requires_grad_(self.tensor, args, kwargs)
        return call_torch(tx, "call_method", self.name, [self.tensor, *args], kwargs)


def has_own_torch_function(cls: type | None) -> bool:
    """Whether ``cls`` (a tensor subclass, or None) has a ``__torch_function__`` other than
    torch.Tensor's."""
    if cls is None:
        return False
    function = getattr(lookup_class_attr(cls, "__torch_function__"), "__func__", None)
    return function is not TENSOR_TORCH_FUNCTION


# torch.Tensor's own __torch_function__ (the function of its classmethod).
TENSOR_TORCH_FUNCTION = torch.Tensor.__dict__["__torch_function__"].__func__


def _requires_grad_(tensor: TensorVariable, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``x.requires_grad_(flag)``: a no-op when the flag is already ``flag``, else a graph break
    (as in torch.compile). A graph node cannot do it: a backend that traces autograd (AOT)
    drops the flag of an input, and an intermediate leaves the graph without it."""
    flag = _argument(args, kwargs, 0, "requires_grad")
    wanted = True if flag is None else flag.as_constant()
    if bool(wanted) == tensor.fake.requires_grad:
        return tensor
    raise Unsupported("Tensor.requires_grad_() changes a tensor's autograd flag",
                      hints=("call requires_grad_() before calling the compiled function",))


def _item(tx: Translator, tensor: TensorVariable, args: list[VariableTracker],
          kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``t.item()`` in the graph: an unbacked SymInt, SymFloat or SymBool (``u0``)."""
    return call_torch(tx, "call_method", "item", [tensor, *args], kwargs)


def _tolist(tx: Translator, tensor: TensorVariable, args: list[VariableTracker],
            kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``t.tolist()`` in the graph: nested lists of ``item()`` of each element. Integer tensors
    only, as in torch.compile 2.13 (float items would be SymFloats the backends refuse)."""
    if args or kwargs:
        raise raise_real(TypeError("tolist() takes no arguments"))
    if tensor.fake.dtype not in INTEGER_DTYPES:
        raise Unsupported(f"Tensor.tolist() of a {tensor.fake.dtype} tensor: only integer "
                          "tensors are captured", break_type="data_dependent")

    def items(t: VariableTracker) -> VariableTracker:
        if t.fake.dim() == 0:
            return _item(tx, t, [], {})
        return ListVariable([items(row) for row in t.unpack(tx)])

    return items(tensor)


# Tensor methods that take a Python callable, filled by variables/higher_order.py (above this
# module, where bodies are traced): ``t.register_hook(hook)``.
CALLABLE_METHODS: dict[str, Callable] = {}

# Filled by variables/numpy.py (above this module): ``t.numpy()``, and the torch functions that
# take an ndarray (``torch.from_numpy(a)``); a handler returns None to decline.
ARRAY_METHODS: dict[str, Callable] = {}
ARRAY_TORCH_FUNCTIONS: dict[Any, Callable] = {}

def _array_handler(fn: Any) -> Callable | None:
    try:
        return ARRAY_TORCH_FUNCTIONS.get(fn)
    except TypeError:  # an unhashable callable
        return None


INTEGER_DTYPES = frozenset({torch.int8, torch.int16, torch.int32, torch.int64})


# Tensor methods with handlers of their own in TensorMethodVariable.call (not call_torch).
SPECIAL_METHODS = frozenset({"item", "tolist", "requires_grad_", *DATA_DEPENDENT_METHODS})

# Methods that read tensor data into Python, kept in the graph as unbacked symbols when
# capture_scalar_outputs is on (or fullgraph=True); otherwise they are DATA_DEPENDENT_METHODS.
CAPTURED_SCALAR_METHODS = {
    "item": _item,
    "tolist": _tolist,
}


class TorchCallableVariable(VariableTracker):
    """A torch function (``torch.sin``, ``F.relu``, ``operator.add`` on tensors): one graph node."""

    callable_kind = True

    def __init__(self, fn: Any, source=None) -> None:
        super().__init__(source)
        self.fn = fn

    def describe(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))

    def python_type(self) -> type:
        return type(self.fn)

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        if name in ("__name__", "__qualname__", "__module__"):  # fixed for a torch callable
            return wrap_constant(getattr(self.fn, name))
        return super().var_getattr(tx, name)

    def call(self, tx, args, kwargs):
        from_array = _array_handler(self.fn)
        result = from_array(tx, args, kwargs) if from_array is not None else None
        if result is not None:
            return result
        switch = STATE_SWITCHES.get(self.fn)
        if switch is not None:
            return switch(tx, args, kwargs)
        if self.fn in STATE_READERS and not args and not kwargs:
            value = self.fn()  # folded, and guarded: the switch may be flipped between calls
            if not _set_by_trace(tx, self.fn):
                tx.guards.global_switch(self.fn, f"torch.{self.describe()}()", value)
            return wrap_constant(value)
        reason = trace_rules.stateful_reason(self.fn)
        if reason is not None:
            raise Unsupported(f"torch.{self.describe()} {reason}", break_type="skipped_function")
        if trace_rules.hashable(self.fn) and self.fn in NOT_DIFFERENTIABLE_IN_GRAPH:
            _refuse_differentiating(self.fn, args, kwargs)
        if trace_rules.hashable(self.fn) and self.fn in USER_CHECKS:
            if _check_passes(tx, self.fn, args, kwargs):
                return ConstantVariable(None)
            _refuse_unfaithful_check(self.fn, args, kwargs)
        return call_torch(tx, "call_function", self.fn, args, kwargs)

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.constant(self.fn)


# Torch ops that AOTAutograd (aot_eager, inductor) cannot differentiate when they are graph
# nodes: the node runs eagerly at a graph break when grad is on and an argument requires grad.
# torch.compile runs the whole frame eagerly there (nn.LSTM's weakref checks break it first).
NOT_DIFFERENTIABLE_IN_GRAPH = {
    # CPU torch.lstm returns None where its traced forward saved a tensor for backward:
    # AOTAutograd's runtime asserts ("expected all tensors_saved_with_vc_check to be Tensors")
    torch.lstm: "AOTAutograd's forward of torch.lstm saves None for backward",
}


def _refuse_differentiating(fn: Any, args: list[VariableTracker],
                            kwargs: dict[str, VariableTracker]) -> None:
    """A break for a NOT_DIFFERENTIABLE_IN_GRAPH op whose result would require grad."""
    fakes = pytree.tree_leaves([to_fake(a) for a in [*args, *kwargs.values()]])
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                       for t in fakes):
        raise Unsupported(f"torch.{fn.__name__} with grad: {NOT_DIFFERENTIABLE_IN_GRAPH[fn]}, "
                          "so it runs eagerly", break_type="unsupported_operator",
                          hints=("run it under torch.no_grad() to keep it in the graph",))



# torch's checks whose condition may be data-dependent (an unbacked SymBool): the positions of
# their condition, message and exception type (None: fixed by the function, given here).
# Traced, such a check is an assert of the graph (torch's deferred runtime asserts), which
# raises RuntimeError with its own message ("Runtime assertion failed for expression u0 <= 9").
USER_CHECKS: dict[Any, tuple[int, int, int | type]] = {
    torch._check: (0, 1, RuntimeError),
    torch._check_with: (1, 2, 0),  # the exception type is its first argument
    torch._check_value: (0, 1, ValueError),
    torch._check_index: (0, 1, IndexError),
    torch._check_type: (0, 1, TypeError),
    torch._check_not_implemented: (0, 1, NotImplementedError),
}


def _check_passes(tx: Translator, fn: Any, args: list[VariableTracker],
                  kwargs: dict[str, VariableTracker]) -> bool:
    """Whether a check's condition is known to hold while tracing: a constant, or a backed
    symbolic bool (guarded to keep its value). It then returns None and its message function
    is never called, as in eager (``F.multi_head_attention_forward`` checks a padding mask's
    shape with a lambda message). One known to fail is a graph break: eager's check raises
    its own error."""
    cond_at, message_at, _ = USER_CHECKS[fn]
    cond = _argument(args, kwargs, cond_at, "cond")
    if isinstance(cond, SymNodeVariable):
        message = _argument(args, kwargs, message_at, "message")
        if free_unbacked_symbols(cond.value) or message is None or message.is_constant():
            return False  # an assert of the graph, or a break (_refuse_unfaithful_check)
        holds = specialize(tx.output, cond.value)  # with a message: a guard, not a break
    elif cond is not None and cond.is_constant():
        holds = cond.as_constant()
    else:
        return False
    if not isinstance(holds, bool):
        return False
    if not holds:
        raise Unsupported(f"torch.{fn.__name__}() fails here, so it raises when run",
                          break_type="torch_error")
    return True


def _refuse_unfaithful_check(fn: Any, args: list[VariableTracker],
                             kwargs: dict[str, VariableTracker]) -> None:
    """A check on a data-dependent condition stays an assert of the graph only where that
    assert raises as eager does: RuntimeError without a message of the user's. With a message
    (a function, or a string, which eager refuses with TypeError when the check fails) or
    another exception type, it is a graph break and eager's check runs on the real value
    (torch.compile keeps a constant message's check in the graph and loses the message and
    the exception type)."""
    cond_at, message_at, error = USER_CHECKS[fn]
    cond = _argument(args, kwargs, cond_at, "cond")
    if not (isinstance(cond, SymNodeVariable) and is_symbolic(cond.value)):
        return
    message = _argument(args, kwargs, message_at, "message")
    if isinstance(error, int):
        error_type = _argument(args, kwargs, error, "error_type")
        error = error_type.as_constant() if error_type is not None and \
            error_type.is_constant() else None
    has_message = message is not None and not (message.is_constant() and
                                               message.as_constant() is None)
    if has_message or error is not RuntimeError:
        raise Unsupported(
            f"torch.{fn.__name__}() of a data-dependent condition with a message or an "
            "exception other than RuntimeError: the graph's assert would raise RuntimeError "
            "with a message of its own", break_type="data_dependent")


def _argument(args: list, kwargs: dict, index: int, name: str) -> VariableTracker | None:
    return args[index] if index < len(args) else kwargs.get(name)


def _set_grad_enabled(tx: Translator, args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``torch._C._set_grad_enabled(mode)`` called as a statement (a context manager written with
    it): the trace follows the switch, and the graph makes it at the same point."""
    (mode,) = [*args, *kwargs.values()]
    set_grad_mode(tx, bool(mode.as_constant()))
    return ConstantVariable(None)


# Torch functions that switch global state the graph can switch too: one handler per row. (Any
# other call that returns None has no value to fold, so a graph break would be its only
# faithful form; the rows here keep the common ones in the graph.)
STATE_SWITCHES = {
    torch._C._set_grad_enabled: _set_grad_enabled,  # what no_grad()/enable_grad() call inside
}


def _set_by_trace(tx: Translator, fn: Any) -> bool:
    """Whether a switch reader's answer is set by a block the trace is inside: inside
    ``with torch.inference_mode(m)`` the mode is ``m`` whatever it was at the call, so a guard
    on it (checked at the call) would fail every time."""
    return fn is torch.is_inference_mode_enabled and \
        tx.output.in_real_context(torch._C._InferenceMode)


# Torch functions that read a process-wide switch: the value is folded under a guard. (Grad mode
# and autocast are not here: the trace switches them itself, and the entry guards their state at
# the call.)
STATE_READERS = frozenset({
    torch.are_deterministic_algorithms_enabled,
    torch.is_deterministic_algorithms_warn_only_enabled,
    torch.get_deterministic_debug_mode,
    torch.get_float32_matmul_precision,
    torch.get_default_dtype,  # also guarded with grad mode when the frame makes a graph
    torch.is_anomaly_enabled,
    torch.is_anomaly_check_nan_enabled,
    torch.is_inference_mode_enabled,
    torch.get_num_threads,
})


# -- the one place where tensor operations are traced ------------------------------------------
def call_torch(tx: Translator, op: str, target: Any, args: list[VariableTracker],
               kwargs: dict[str, VariableTracker],
               fake_result: Callable[[list, dict], Any] | None = None) -> VariableTracker:
    """Run ``target`` on fake tensors, add a node if the result involves tensors, wrap it.

    ``fake_result(fake_args, fake_kwargs)``, when given, computes the result's metadata instead
    of running ``target`` (``allow_in_graph`` functions, whose body must not run).
    """
    dispatched = TORCH_FUNCTION_DISPATCH[0](tx, op, target, args, kwargs) \
        if TORCH_FUNCTION_DISPATCH and fake_result is None else None
    if dispatched is not None:
        return dispatched
    stand_in = _tensor_scalar_stand_in(op, target, args, kwargs)
    if stand_in is not None:
        return UserFunctionVariable(stand_in).call(tx, args, kwargs)
    fake_args = [to_fake(a) for a in args]
    fake_kwargs = {k: to_fake(v) for k, v in kwargs.items()}
    effects = EffectRecorder([*fake_args, *fake_kwargs.values()])
    if fake_result is not None:
        result = fake_result(fake_args, fake_kwargs)
        effects.effectful = True  # an allow_in_graph body is opaque: it may do anything
    else:
        result = _run_fake(tx, op, target, fake_args, fake_kwargs, effects)
    tx.output.note_guards()
    mutates = _is_mutating(op, target, kwargs) or bool(effects.written)
    # A call that writes into a tensor or has other effects is a node even when its result is
    # a constant (None): folding it away would lose the write.
    keep = mutates or effects.effectful
    if not keep and not _contains_graph_value(result):
        return wrap_constant(concrete(result))
    arg = to_fx if fake_result is not None else _torch_arg  # an opaque body gets what it got
    node = tx.output.create_node(op, target, tuple(arg(a) for a in args),
                                 {k: arg(v) for k, v in kwargs.items()}, keep)
    node.meta["example_value"] = result
    tx.output.bind_unbacked(node, result)
    if mutates and args:
        tx.mark_mutated(args[0])
    for fake in effects.written:
        tx.output.mark_mutated(fake)
    return wrap_result(tx, node, result, args)


def _tensor_scalar_stand_in(op: str, target: Any, args: list,
                            kwargs: dict) -> Callable | None:
    """The stand-in of a kernel given a tensor where it reads a number (polyfills/optim.py)."""
    name = target if op == "call_method" else getattr(target, "__name__", None)
    row = TENSOR_SCALAR_STAND_INS.get(name) if isinstance(name, str) else None
    if row is None:
        return None
    stand_in, where = row
    scalar = kwargs.get(where) if isinstance(where, str) else \
        (args[where] if len(args) > where else None)
    return stand_in if isinstance(scalar, TensorVariable) else None


def _run_fake(tx, op, target, fake_args, fake_kwargs, effects: EffectRecorder):
    name = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
    try:
        # The Python dispatcher runs the SymInt-aware Python kernels of composite ops: without
        # it their C++ kernels read sizes as ints (F.pad calls aten.size), pinning symbols.
        with tx.output.fake_mode, enable_python_dispatcher(), effects:
            if op == "call_method":
                return getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
            return target(*fake_args, **fake_kwargs)
    except GuardOnDataDependentSymNode as error:
        raise data_dependent_guard(error) from error
    except (DataDependentOutputException, DynamicOutputShapeException) as error:
        raise Unsupported(f"{name}: output depends on tensor data ({type(error).__name__})",
                          break_type="data_dependent") from error
    except UnsupportedOperatorException as error:
        raise Unsupported(f"{name}: operator not supported by fake tensors: {error}",
                          break_type="unsupported_operator") from error
    except Unsupported:
        raise
    except Exception as error:
        raise Unsupported(f"{name} raised {type(error).__name__} while tracing: {error}",
                          break_type="torch_error",
                          hints=("the same call probably raises when run eagerly",)) from error


class EffectRecorder(TorchDispatchMode):
    """Watches the aten ops one traced call runs on fake tensors, for what its result cannot
    show: writes into the call's own tensor arguments (a custom op or a torch function that fills
    an argument and returns None), and effects beyond the outputs (a random draw, a collective,
    an op that returns nothing)."""

    def __init__(self, arguments: list[Any]) -> None:
        super().__init__()
        tensors = [a for a in pytree.tree_leaves(arguments) if isinstance(a, torch.Tensor)]
        self._arguments = {ref: t for t in tensors if (ref := storage_ref(t)) is not None}
        self.written: list[torch.Tensor] = []  # arguments written into, each once
        self.effectful = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        if func.namespace in UNANNOTATED_WRITERS:
            self._wrote(pytree.tree_leaves((args, kwargs)))
        elif schema.is_mutable:
            for i, argument in enumerate(schema.arguments):
                if argument.alias_info is not None and argument.alias_info.is_write:
                    value = args[i] if i < len(args) else kwargs.get(argument.name)
                    self._wrote(pytree.tree_leaves(value))
        if func.namespace in UNANNOTATED_WRITERS or not schema.returns or \
                torch.Tag.nondeterministic_seeded in func.tags:
            self.effectful = True
        return func(*args, **kwargs)

    def _wrote(self, values: list[Any]) -> None:
        for value in values:
            argument = self._arguments.get(storage_ref(value)) \
                if isinstance(value, torch.Tensor) else None
            if argument is not None and all(argument is not w for w in self.written):
                self.written.append(argument)


# Operator namespaces whose ops write into their tensor arguments without saying so in the
# schema: c10d's collectives (allreduce_ fills its tensors in place).
UNANNOTATED_WRITERS = frozenset({"c10d"})


def _is_mutating(op: str, target: Any, kwargs: dict) -> bool:
    if "out" in kwargs:
        return True
    if op == "call_method":
        return target.endswith("_") and not target.startswith("_")
    if target in INPLACE_OPERATORS:
        return True
    name = getattr(target, "__name__", "")
    return name.endswith("_") and not name.startswith("_")


def _contains_graph_value(value: Any) -> bool:
    """A tensor or a symbolic size: something only the graph can compute at run time."""
    if isinstance(value, torch.Tensor) or is_symbolic(value):
        return True
    if isinstance(value, (tuple, list)):
        return any(_contains_graph_value(v) for v in value)
    return False


def wrap_result(tx: Translator, node: torch.fx.Node, result: Any,
                args: list[VariableTracker]) -> VariableTracker:
    """Fake result -> trackers; an op that returns its (mutated) input gives back that input."""
    if isinstance(result, torch.Tensor):
        for arg in args:
            if isinstance(arg, TensorVariable) and arg.fake is result:
                return arg
        return TensorVariable(node, result)
    if is_symbolic(result):
        return SymNodeVariable(node, result, tx.output)
    if isinstance(result, (tuple, list)):
        items = [wrap_result(tx, tx.output.getitem_node(node, i), item, args)
                 if _contains_graph_value(item) else wrap_constant(concrete(item))
                 for i, item in enumerate(result)]
        if isinstance(result, list):
            return ListVariable(items)
        if isinstance(result, torch.Size):
            return SizeVariable(items)
        return TupleVariable(items, tuple_class=type(result))
    result = concrete(result)
    if result is None or is_constant_value(result):
        return ConstantVariable(result)
    raise Unsupported(f"torch op returned {type(result).__name__}, which graphlift cannot track")


# Python types that torch's argument parser reads as dtypes (``x.to(bool)``,
# ``torch.zeros(2, dtype=int)``): the node gets the dtype, which the graph's code can name (FX
# would print the class as ``<class 'bool'>``, which does not parse).
PYTHON_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64,
                 complex: torch.complex128}


def _torch_arg(v: VariableTracker) -> Any:
    """``to_fx`` for a torch operation's argument: a Python type given as a dtype is the dtype."""
    value = to_fx(v)
    return PYTHON_DTYPES.get(value, value) if isinstance(value, type) else value


def to_fx(v: VariableTracker) -> Any:
    """The FX argument for a tracker: a node for tensors, the value for constants."""
    if isinstance(v, (TensorVariable, SymNodeVariable)):
        return v.node
    if isinstance(v, SliceVariable):
        return slice(*(to_fx(p) for p in v.parts))
    if isinstance(v, SizeVariable):
        return tuple(to_fx(i) for i in v.items)  # a torch.Size cannot hold nodes
    if isinstance(v, BaseListVariable):
        return v.python_container(to_fx(i) for i in v.items)
    if isinstance(v, DictVariable):
        return {k: to_fx(i) for k, i in v.items.items()}
    if v.is_constant():
        return v.as_constant()
    raise Unsupported(f"cannot pass {v!r} to a torch operation")


def to_fake(v: VariableTracker) -> Any:
    """The value torch sees while tracing: a fake tensor for tensors, the value for constants."""
    if isinstance(v, TensorVariable):
        return v.fake
    if isinstance(v, SymNodeVariable):
        return v.value
    if isinstance(v, SliceVariable):
        return slice(*(to_fake(p) for p in v.parts))
    if isinstance(v, BaseListVariable):
        return v.python_container(to_fake(i) for i in v.items)
    if isinstance(v, DictVariable):
        return {k: to_fake(i) for k, i in v.items.items()}
    if v.is_constant():
        return v.as_constant()
    raise Unsupported(f"cannot pass {v!r} to a torch operation")
