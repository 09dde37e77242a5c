"""torch.optim's wrappers of ``Optimizer.step``, as compiled code runs them.

Every optimizer's ``step`` is wrapped twice by torch: ``Optimizer.profile_hook_step`` (a profiler
range and the step hooks) around ``_use_grad_for_differentiable``'s ``_use_grad`` (grad mode set to
the ``differentiable`` default around the step). ``_use_grad`` also calls
``torch._dynamo.graph_break()`` before and after the step, so that torch.compile's graph of the
step is an inference graph; the graphs before and after those breaks are empty. The stand-ins
here are traced in their place: the step's grad mode as a ``with`` block, without the breaks (one
graph, as torch.compile's), and the profiler range as a block that records nothing (torch.compile
records no profiler event in its graphs either).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.autograd.profiler as _profiler
import torch.optim.optimizer as _optimizer

# The code of torch's _use_grad wrapper, which the trace rules replace by use_grad_stand_in's.
USE_GRAD_CODE = _optimizer._use_grad_for_differentiable(lambda self: None).__code__
_STAND_IN_ATTR = "_graphlift_stand_in"  # on a _use_grad wrapper: its stand-in


def run_first_step_eagerly() -> None:
    """Traced, a step that makes its optimizer's state: the compile gives up and the call runs
    eagerly, once per code object (``trace_rules.OPTIMIZER_FIRST_STEP``); the next call
    compiles the step with the state there, one graph as torch.compile's (which makes the state
    for real while tracing, something graphlift never does). Called for real it does nothing."""


def use_grad_stand_in(wrapper: Callable) -> Callable:
    """The stand-in of one ``_use_grad`` wrapper: the step it wraps, under the grad mode."""
    stand_in = wrapper.__dict__.get(_STAND_IN_ATTR)
    if stand_in is None:
        step = wrapper.__wrapped__

        def use_grad(*args: Any, **kwargs: Any) -> Any:
            optimizer = args[0]
            # A parameter with a gradient and no state yet: this step makes the state (Adam's
            # moments, SGD's momentum buffer), which the steady step's graph reads.
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is not None and not optimizer.state.get(param):
                        run_first_step_eagerly()
            with torch.set_grad_enabled(optimizer.defaults["differentiable"]):
                return step(*args, **kwargs)

        stand_in = wrapper.__dict__[_STAND_IN_ATTR] = use_grad
    return stand_in


class record_function:  # noqa: N801 -- named like the original
    """``torch.autograd.profiler.record_function`` in compiled code: a block that records
    nothing."""

    _graphlift_real_class = _profiler.record_function

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self.args = args

    def __enter__(self) -> record_function:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        return None


# -- torch's kernels given a tensor as a scalar ------------------------------------------------
# When compiling, torch's optimizers keep the learning rate and the step size as tensors and pass
# them where the kernels take a number (``param.add_(grad, alpha=-lr)``, ``addcdiv_(...,
# value=-step_size)``, a foreach op's stacked ``scalars``). The kernels read such a tensor with
# ``item()``, which a graph cannot do, so these stand-ins compute the same with tensor
# arithmetic (as torch.compile's do; the order of the operations differs from the kernels' in
# the last bits).
def add_(self, other, *, alpha=1):
    """``Tensor.add_(other, alpha=tensor)``."""
    return self.add_(other * alpha)


def sub_(self, other, *, alpha=1):
    """``Tensor.sub_(other, alpha=tensor)``."""
    return self.sub_(other * alpha)


def addcdiv_(self, tensor1, tensor2, *, value=1):
    """``Tensor.addcdiv_(tensor1, tensor2, value=tensor)``."""
    return self.add_(torch.div(tensor1, tensor2) * value)


def addcmul_(self, tensor1, tensor2, *, value=1):
    """``Tensor.addcmul_(tensor1, tensor2, value=tensor)``."""
    return self.add_(torch.mul(tensor1, tensor2) * value)


def foreach_addcdiv_(self, tensor1, tensor2, scalars):
    """``torch._foreach_addcdiv_(self, tensor1, tensor2, scalars)`` with a 1-d tensor of
    scalars, one per tensor of the list."""
    torch._foreach_add_(self, torch._foreach_mul(torch._foreach_div(tensor1, tensor2),
                                                 list(scalars.unbind(0))))


def foreach_addcmul_(self, tensor1, tensor2, scalars):
    """``torch._foreach_addcmul_(self, tensor1, tensor2, scalars)``, as above."""
    torch._foreach_add_(self, torch._foreach_mul(torch._foreach_mul(tensor1, tensor2),
                                                 list(scalars.unbind(0))))


# Kernel name -> its stand-in for a tensor scalar; the keyword (or the position) that holds it.
TENSOR_SCALAR_STAND_INS: dict[str, tuple[Callable, str | int]] = {
    "add_": (add_, "alpha"),  # SGD's for-loop step with a tensor lr
    "sub_": (sub_, "alpha"),
    "addcdiv_": (addcdiv_, "value"),  # Adam's, AdamW's, Adagrad's for-loop steps
    "addcmul_": (addcmul_, "value"),
    "_foreach_addcdiv_": (foreach_addcdiv_, 3),  # Adam's and AdamW's foreach steps
    "_foreach_addcmul_": (foreach_addcmul_, 3),
}
