"""Context managers modelled for ``with`` blocks: grad mode, inference mode and autocast."""

from __future__ import annotations

import inspect

import torch

from graphlift.exc import Unsupported
from graphlift.resume import GRAD_MODE_EXITS
from graphlift.variables.base import Translator, VariableTracker
from graphlift.variables.constant import ConstantVariable


class GradModeVariable(VariableTracker):
    """``torch.no_grad()``, ``torch.enable_grad()``, ``torch.set_grad_enabled(b)``.

    Entering sets grad mode for the rest of the trace (fake tensors must see it) and puts a
    ``torch._C._set_grad_enabled`` node in the graph, so the compiled code switches at the same
    point; exiting restores the mode that was active before.
    """

    def __init__(self, mode: bool, applied_now: bool = False, previous: bool | None = None) -> \
            None:
        super().__init__()
        self.mode = mode
        self.previous = previous
        self.applied_now = applied_now

    def describe(self) -> str:
        return f"grad mode {self.mode}"

    def python_type(self) -> type:
        return torch.set_grad_enabled if self.applied_now else \
            (torch.no_grad if not self.mode else torch.enable_grad)

    def enter(self, tx: Translator) -> VariableTracker:
        if not self.applied_now:
            self.previous = torch.is_grad_enabled()
            set_grad_mode(tx, self.mode)
        return ConstantVariable(None)

    def exit(self, tx: Translator) -> VariableTracker:
        set_grad_mode(tx, self.previous)
        return ConstantVariable(None)

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return ContextMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")


class ContextMethodVariable(VariableTracker):
    """The bound ``__enter__`` / ``__exit__`` of a modelled context manager."""

    def __init__(self, manager: VariableTracker, name: str) -> None:
        super().__init__()
        self.manager, self.name = manager, name

    def call(self, tx, args, kwargs):
        if self.name == "__enter__":
            return self.manager.enter(tx)
        return self.manager.exit(tx)

    def reconstruct(self, codegen) -> str:
        """At a graph break inside the block: an exit that restores the mode from before."""
        if self.name != "__exit__" or not isinstance(self.manager, GradModeVariable):
            raise Unsupported(f"{self.manager.describe()}.{self.name} cannot leave the compiled "
                              "frame (a break inside this with block runs the frame eagerly)")
        return codegen.constant(GRAD_MODE_EXITS[bool(self.manager.previous)])


def set_grad_mode(tx: Translator, mode: bool) -> None:
    """Switch grad mode for the trace and in the graph (a no-op node is skipped)."""
    if torch.is_grad_enabled() == mode:
        return
    torch._C._set_grad_enabled(mode)
    tx.output.create_node("call_function", torch._C._set_grad_enabled, (mode,), {},
                          mutates=True)


class AutocastVariable(VariableTracker):
    """``torch.autocast(device_type, dtype, enabled, cache_enabled)`` as a ``with`` block.

    Entering switches autocast on for the rest of the trace (so fake tensors see the same dtypes)
    and puts ``torch.amp._enter_autocast`` in the graph; exiting puts ``_exit_autocast``, so the
    compiled code switches at the same points. The real switch made while tracing is undone by
    ``OutputGraph.restore_global_state`` whatever happens.
    """

    def __init__(self, arguments: tuple) -> None:
        super().__init__()
        self.arguments = arguments  # device_type, dtype, enabled, cache_enabled
        self.node = None

    def describe(self) -> str:
        return f"autocast{self.arguments}"

    def python_type(self) -> type:
        return torch.autocast

    def enter(self, tx: Translator) -> VariableTracker:
        tx.output.enter_real_context(torch.amp.autocast_mode._enter_autocast(*self.arguments))
        self.node = tx.output.create_node("call_function", torch.amp._enter_autocast,
                                          self.arguments, {}, mutates=True)
        return ConstantVariable(None)

    def exit(self, tx: Translator) -> VariableTracker:
        tx.output.exit_real_context()
        tx.output.create_node("call_function", torch.amp._exit_autocast, (self.node,), {},
                              mutates=True)
        return ConstantVariable(None)

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return ContextMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")


class InferenceModeVariable(VariableTracker):
    """``torch.inference_mode(mode)`` as a ``with`` block (or through its decorator).

    Entering switches inference mode for real for the rest of the trace, so that fake tensors
    see what eager's tensors see (no autograd history), and puts
    ``torch.autograd.grad_mode._enter_inference_mode`` in the graph; exiting puts
    ``_exit_inference_mode`` on the context that node returned, so the compiled code switches
    at the same points. A graph break inside the block runs the frame eagerly (its exit cannot
    be rebuilt outside the graph).
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = mode
        self.node = None

    def describe(self) -> str:
        return f"inference_mode({self.mode})"

    def python_type(self) -> type:
        return torch.inference_mode

    def enter(self, tx: Translator) -> VariableTracker:
        tx.output.enter_real_context(torch.autograd.grad_mode._enter_inference_mode(self.mode))
        self.node = tx.output.create_node("call_function",
                                          torch.autograd.grad_mode._enter_inference_mode,
                                          (self.mode,), {}, mutates=True)
        return ConstantVariable(None)

    def exit(self, tx: Translator) -> VariableTracker:
        tx.output.exit_real_context()
        tx.output.create_node("call_function", torch.autograd.grad_mode._exit_inference_mode,
                              (self.node,), {}, mutates=True)
        return ConstantVariable(None)

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return ContextMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")


class DisableTorchFunctionSubclassVariable(VariableTracker):
    """``torch._C.DisableTorchFunctionSubclass()`` as a ``with`` block: torch calls inside it
    go to the kernels, not to a tensor subclass's ``__torch_function__``, and return plain
    tensors (the graph works on plain tensors anyway, so it needs no node). A graph break
    inside the block runs the frame eagerly (its exit cannot be rebuilt outside the graph)."""

    def describe(self) -> str:
        return "DisableTorchFunctionSubclass()"

    def python_type(self) -> type:
        return torch._C.DisableTorchFunctionSubclass

    def enter(self, tx: Translator) -> VariableTracker:
        tx.output.torch_function_disabled += 1
        return ConstantVariable(None)

    def exit(self, tx: Translator) -> VariableTracker:
        tx.output.torch_function_disabled -= 1
        return ConstantVariable(None)

    def var_getattr(self, tx, name):
        if name in ("__enter__", "__exit__"):
            return ContextMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")


def make_inference_mode(tx: Translator, args: list, kwargs: dict) -> InferenceModeVariable:
    """``torch.inference_mode(mode=True)``; the mode must be a constant known while tracing
    (a function given as ``mode``, the decorator form written without parentheses, is not a
    with block: refused)."""
    mode = (args[0] if args else kwargs.get("mode"))
    value = True if mode is None else mode.as_constant() if mode.is_constant() else None
    if not isinstance(value, bool):
        raise Unsupported("torch.inference_mode() with a mode that is not a constant bool")
    return InferenceModeVariable(value)


def make_autocast(tx: Translator, args: list, kwargs: dict) -> AutocastVariable:
    """Bind torch.autocast's arguments (all must be constants known while tracing)."""
    bound = inspect.signature(torch.autocast.__init__).bind(
        None, *(a.as_constant() for a in args), **{k: v.as_constant() for k, v in kwargs.items()})
    bound.apply_defaults()
    values = bound.arguments
    dtype = values["dtype"]
    if dtype is None:
        dtype = torch.get_autocast_dtype(values["device_type"])
    cache = values["cache_enabled"]
    if cache is None:
        cache = torch.is_autocast_cache_enabled()
    return AutocastVariable((values["device_type"], dtype, values["enabled"], cache))
