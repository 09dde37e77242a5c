"""User overrides of the trace rules: ``allow_in_graph``, ``disable`` and ``substitute_in_graph``.

Both act through :mod:`graphlift.trace_rules`: an allowed function is a ``GRAPH`` decision (one
opaque node), a disabled one a ``SKIP`` decision whose graph break says it was disabled by the
user. ``disable`` also makes the function run eagerly when it is called directly or through
``graphlift.compile``, and (``recursive=True``) makes every compiled function it calls run its
original code, through a per-thread flag that the compiled wrappers check.
``substitute_in_graph`` adds a row to :data:`graphlift.polyfills.POLYFILLS`: a Python stand-in
traced in place of a function (a C one, usually) that graphlift cannot see into.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any

import torch

from graphlift import eager_callees, eval_frame, polyfills, trace_rules


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
    ``reason``. With ``recursive=True`` nothing it calls is compiled either: graphlift-compiled
    functions called from inside it run their original code, and ``graphlift.compile`` of it
    returns it unchanged. With ``recursive=False``, as under torch.compile, ``fn`` runs its own
    code eagerly when a compiled function (or ``graphlift.compile`` of it) calls it, and the
    user functions and modules it calls are compiled (``config.compile_eager_callees``); called
    from plain Python, nothing is compiled. An ``nn.Module`` gets its ``forward`` disabled and
    is returned itself.
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
        if isinstance(fn, types.FunctionType):  # a compiled frame's call of it: fn's callees
            setattr(disabled, eager_callees.NONRECURSIVE_ATTR, fn)  # compiled (eager_callees)
    setattr(disabled, eval_frame.DISABLED_ATTR, reason or "")
    return disabled


def substitute_in_graph(original: Callable, *, can_constant_fold_through: bool = False,
                        skip_signature_check: bool = False) -> Callable[[Callable], Callable]:
    """Trace the decorated Python function in place of ``original``, as torch.compile does.

    ``@graphlift.substitute_in_graph(operator.indexOf)`` over ``def indexOf(a, b, /): ...``:
    calls of ``operator.indexOf`` met while tracing inline the stand-in instead of breaking the
    graph; eagerly the original still runs. The decorator returns a function that calls
    ``original`` (met while tracing, it too is replaced). The stand-in must take the same
    parameters (names, kinds and defaults; ``*args, **kwargs`` on either side matches anything)
    unless ``skip_signature_check``. With ``can_constant_fold_through``, a call whose arguments
    are all constants runs ``original`` for real and the result is a constant. A function that
    already has a stand-in is refused. ``torch.compiler.substitute_in_graph`` counts too.
    """
    if not callable(original):
        raise TypeError(f"substitute_in_graph expects a callable, got {type(original).__name__}")

    def register(stand_in: Callable) -> Callable:
        if not isinstance(stand_in, types.FunctionType):
            raise TypeError(f"@substitute_in_graph(...) expects a Python function, got "
                            f"{type(stand_in).__name__}")
        if not skip_signature_check:
            _check_same_parameters(original, stand_in)

        @functools.wraps(stand_in)
        def call_original(*args: Any, **kwargs: Any) -> Any:
            return original(*args, **kwargs)

        polyfills.add_polyfill(original, stand_in, can_constant_fold_through)
        polyfills.add_polyfill(call_original, stand_in, can_constant_fold_through)
        return call_original

    return register


def _check_same_parameters(original: Callable, stand_in: types.FunctionType) -> None:
    try:
        expected = inspect.signature(original)
    except ValueError:
        return  # a C function without a text signature: nothing to compare with
    shapes = {_parameter_shape(expected), _parameter_shape(inspect.signature(stand_in))}
    if len(shapes) > 1 and _ANYTHING not in shapes:
        raise TypeError(f"the stand-in {stand_in.__qualname__}{inspect.signature(stand_in)} "
                        f"does not take the parameters of {original!r}{expected}")


def _parameter_shape(signature: inspect.Signature) -> tuple:
    """Names, kinds and defaults; the names of ``*args`` and ``**kwargs`` do not matter."""
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return tuple((p.kind, None if p.kind in variadic else p.name, p.default)
                 for p in signature.parameters.values())


_ANYTHING = _parameter_shape(inspect.signature(lambda *args, **kwargs: None))
