"""User overrides of the trace rules: ``allow_in_graph`` and ``disable``.

Both act through :mod:`graphlift.trace_rules`: an allowed function is a ``GRAPH`` decision (one
opaque node), a disabled one a ``SKIP`` decision whose graph break says it was disabled by the
user. ``disable`` also makes the function run eagerly when it is called directly or through
``graphlift.compile``, and (``recursive=True``) makes every compiled function it calls run its
original code, through a per-thread flag that the compiled wrappers check.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch

from graphlift import eval_frame, trace_rules


def allow_in_graph(fn: Callable | None = None, *, fake: Callable | None = None) -> Callable:
    """Make every call to ``fn`` one opaque node in the graph; returns ``fn`` unchanged.

    graphlift never executes ``fn``'s body while compiling and never traces it into the graph.
    The node's output metadata comes from ``fake`` when given (a function with ``fn``'s signature
    that runs on fake tensors: ``lambda x: torch.empty_like(x)``); otherwise graphlift reads
    ``fn``'s bytecode in a sandbox whose nodes, guards and side effects are thrown away; only if
    that sandbox cannot follow ``fn`` is ``fn`` called on fake tensors (its Python body then runs
    once per compile, as under torch.compile). Every call stays in the graph, its result used
    or not, as in eager: the body may have effects graphlift cannot see.

    Usable as ``@allow_in_graph``, ``@allow_in_graph(fake=...)`` and ``allow_in_graph(fn)``.
    """
    if fn is None:
        return functools.partial(allow_in_graph, fake=fake)
    if not callable(fn):
        raise TypeError(f"graphlift.allow_in_graph expects a callable, got {type(fn).__name__}")
    fn = getattr(fn, eval_frame.WRAPPED_ATTR, fn)
    trace_rules.register_allowed(fn, fake)
    return fn


def disable(fn: Callable | None = None, *, recursive: bool = True,
            reason: str | None = None) -> Any:
    """Run ``fn`` eagerly, always; returns the function to call instead of ``fn``.

    A call to it while tracing is a graph break that says "disabled by the user" and gives
    ``reason``; ``graphlift.compile`` of it returns it unchanged. With ``recursive=True`` nothing
    it calls is compiled either: graphlift-compiled functions called from inside it run their
    original code. An ``nn.Module`` gets its ``forward`` disabled and is returned itself.
    Usable as ``@disable``, ``@disable(reason=...)`` and ``disable(fn)``.
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)
    if isinstance(fn, torch.nn.Module):
        fn.forward = disable(fn.forward, recursive=recursive, reason=reason)
        return fn
    if not callable(fn):
        raise TypeError(f"graphlift.disable expects a callable, got {type(fn).__name__}")
    fn = getattr(fn, eval_frame.WRAPPED_ATTR, fn)
    if isinstance(fn, types.MethodType):
        return types.MethodType(disable(fn.__func__, recursive=recursive, reason=reason),
                                fn.__self__)
    if recursive:
        @functools.wraps(fn)
        def disabled(*args: Any, **kwargs: Any) -> Any:
            eval_frame.enter_disabled()
            try:
                return fn(*args, **kwargs)
            finally:
                eval_frame.exit_disabled()
    else:
        @functools.wraps(fn)
        def disabled(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)
    setattr(disabled, eval_frame.DISABLED_ATTR, reason or "")
    return disabled
