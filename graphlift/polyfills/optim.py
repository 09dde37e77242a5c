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


def use_grad_stand_in(wrapper: Callable) -> Callable:
    """The stand-in of one ``_use_grad`` wrapper: the step it wraps, under the grad mode."""
    stand_in = wrapper.__dict__.get(_STAND_IN_ATTR)
    if stand_in is None:
        step = wrapper.__wrapped__

        def use_grad(*args: Any, **kwargs: Any) -> Any:
            with torch.set_grad_enabled(args[0].defaults["differentiable"]):
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
