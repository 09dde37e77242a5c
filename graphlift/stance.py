"""Stances: how compiled functions behave right now, as ``torch.compiler.set_stance`` sets them.

=========================  ======================================================================
``default``                a hit runs its entry; a miss compiles
``force_eager``            every call runs the original function: no lookup, no compile
``eager_on_recompile``     a hit runs its entry; a miss runs eagerly instead of compiling
``fail_on_recompile``      a hit runs its entry; a miss raises :class:`graphlift.RecompileError`
``eager_then_compile``     the first miss of each code object runs eagerly and its argument sizes
                           are remembered, so that the first compile already makes dynamic what
                           differs between the two calls (no static compile thrown away)
``aot_eager_then_compile`` the same, but the first miss compiles with ``aot_eager``
=========================  ======================================================================

``force_backend=`` (with ``default`` only) compiles every miss with that backend instead of the
wrapper's. ``skip_guard_eval_unsafe=True`` is accepted and changes nothing: graphlift always
checks every guard, which is always correct.

The stance is process-wide, like torch's. Two places set it: :func:`set_stance` here, and
``torch.compiler.set_stance``, which graphlift reads where torch keeps it (the ``_stance`` global
of ``torch._dynamo.eval_frame``); graphlift's own stance wins while it is not ``default``. The
hit path of every compiled wrapper pays one test for both::

    __gl_ts[0]["_stance"] is __gl_ts[1]   # HIT_PATH: torch's globals, the stance taken as default

While it holds, nothing but ``default`` is in force and the wrapper runs its entry. Any change of
either stance breaks it, and the call goes to the miss path, which asks :func:`current`. Until the
program loads ``torch._dynamo`` (graphlift never does), a placeholder stands in for torch's globals.

:func:`error_on_graph_break` is here too: like a stance, it changes what compiling does for a
region of the program, not for one function.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from graphlift.backends import lookup_backend
from graphlift.cache import ExtraState
from graphlift.convert_frame import CompileOptions, FrameSignature, compile_options
from graphlift.exc import RecompileError, Unsupported
from graphlift.graph_break import GraphBreak, listeners
from graphlift.sources import LocalSource

# The stances, each with what a miss does under it (the module docstring says more).
STANCES = {
    "default": "compile",
    "force_eager": "run the original function, without a cache lookup",
    "eager_on_recompile": "run eagerly",
    "fail_on_recompile": "raise RecompileError",
    "eager_then_compile": "run the first call eagerly, then compile",
    "aot_eager_then_compile": "compile the first call with aot_eager, then compile",
}


@dataclass(frozen=True)
class Stance:
    """One setting of :func:`set_stance` (or of ``torch.compiler.set_stance``)."""

    name: str = "default"
    skip_guard_eval_unsafe: bool = False  # accepted; graphlift checks every guard regardless
    force_backend: str | Callable | None = None

    @property
    def is_default(self) -> bool:
        return self.name == "default" and self.force_backend is None

    @property
    def force_eager(self) -> bool:
        return self.name == "force_eager"

    def options_for(self, options: CompileOptions) -> CompileOptions:
        """The options a miss compiles with: the wrapper's, or with ``force_backend``."""
        if self.force_backend is None:
            return options
        return compile_options(self.force_backend, options.fullgraph, options.dynamic,
                               options.recompile_limit)


DEFAULT = Stance()


def make_stance(stance: str = "default", skip_guard_eval_unsafe: bool = False,
                force_backend: str | Callable | None = None) -> Stance:
    """A checked :class:`Stance`: an unknown name or a misplaced backend fails here."""
    if stance not in STANCES:
        raise ValueError(f"unknown stance {stance!r}; the stances are {', '.join(STANCES)}")
    if not isinstance(skip_guard_eval_unsafe, bool):
        raise TypeError(f"skip_guard_eval_unsafe must be True or False, got "
                        f"{skip_guard_eval_unsafe!r}")
    if force_backend is not None:
        if stance != "default":
            raise ValueError(f"force_backend= goes with the default stance only, not {stance!r}")
        lookup_backend(force_backend)  # an unknown name fails here
    return Stance(stance, skip_guard_eval_unsafe, force_backend)


# -- the state, and the hit path's one test -------------------------------------------------------
_own = DEFAULT  # graphlift.set_stance's stance
_SLOW = object()  # never any torch stance: while it is HIT_PATH[1], every call takes the miss path
_NO_TORCH: dict[str, Any] = {"_stance": None}  # torch's globals until torch._dynamo is loaded
HIT_PATH: list[Any] = [_NO_TORCH, None]
_torch_default: list[Any] = [None]  # the torch stance object taken for default
_torch_seen: list[Any] = [None, DEFAULT]  # the last torch stance object read, as a Stance


def _sync() -> None:
    HIT_PATH[1] = _torch_default[0] if _own.is_default else _SLOW


def fast_path_open() -> bool:
    """The hit path's test: whether a wrapper runs its entry without asking for the stance."""
    return HIT_PATH[0]["_stance"] is HIT_PATH[1]


def current() -> Stance:
    """The stance in force: graphlift's own if it is not default, else torch's."""
    if not _own.is_default:
        return _own
    theirs = HIT_PATH[0]["_stance"]
    if theirs is _torch_default[0]:
        return DEFAULT
    if _torch_seen[0] is not theirs:  # every call misses while it is in force: convert once
        _torch_seen[:] = [theirs, make_stance(theirs.stance, bool(theirs.skip_guard_eval_unsafe),
                                              theirs.backend)]
    stance = _torch_seen[1]
    if stance.is_default:  # a new default object (set_stance("default")): the hit path takes it
        _torch_default[0] = theirs
        _sync()
    return stance


def _set(stance: Stance) -> Stance:
    global _own
    prior, _own = _own, stance
    _sync()
    return prior


def _bind_torch(eval_frame: types.ModuleType) -> None:
    """Read torch's stance from now on: ``eval_frame`` is ``torch._dynamo.eval_frame``."""
    theirs = vars(eval_frame).get("_stance")
    if theirs is None:  # not the torch 2.13 this reads
        warnings.warn("torch._dynamo.eval_frame has no _stance: graphlift cannot read "
                      "torch.compiler.set_stance with this torch", stacklevel=2)
        return
    HIT_PATH[0] = vars(eval_frame)
    default = theirs.stance == "default" and theirs.backend is None
    _torch_default[0] = theirs if default else _SLOW
    _sync()


_TORCH_EVAL_FRAME = "torch._dynamo.eval_frame"


class _BindTorchWhenLoaded(importlib.abc.MetaPathFinder):
    """Binds torch's stance right after ``torch._dynamo.eval_frame`` runs, then leaves.

    graphlift must not import ``torch._dynamo`` itself (most of a second), and the hit path must
    not look it up in ``sys.modules`` on every call, so the import tells us instead.
    """

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> Any:
        if name != _TORCH_EVAL_FRAME:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            run_module(module)
            _bind_torch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if _TORCH_EVAL_FRAME in sys.modules:
    _bind_torch(sys.modules[_TORCH_EVAL_FRAME])
else:
    sys.meta_path.insert(0, _BindTorchWhenLoaded())


# -- set_stance ----------------------------------------------------------------------------------
class StanceSetting(contextlib.ContextDecorator):
    """What :func:`set_stance` returns: already in force; a ``with`` block or a decorator too.

    As with torch's: the stance in force before the call comes back when the block ends (or the
    decorated function returns); as a decorator it is in force only inside the function.
    """

    def __init__(self, stance: Stance) -> None:
        self.stance = stance
        self.prior = _set(stance)

    def __enter__(self) -> StanceSetting:
        _set(self.stance)
        return self

    def __exit__(self, *exc: object) -> None:
        _set(self.prior)

    def __call__(self, fn: Callable) -> Callable:
        _set(self.prior)  # decorating does not change the stance outside the function
        return super().__call__(fn)


def set_stance(stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
               force_backend: str | Callable | None = None) -> StanceSetting:
    """Set the stance of every compiled function, as ``torch.compiler.set_stance`` does.

    ``stance`` is one of :data:`STANCES`; ``force_backend`` (default stance only) compiles every
    miss with that backend. Takes effect at once; usable as ``with graphlift.set_stance(...):``
    and ``@graphlift.set_stance(...)``. An unknown stance or backend raises here.
    """
    return StanceSetting(make_stance(stance, skip_guard_eval_unsafe, force_backend))


# -- the miss path -------------------------------------------------------------------------------
# Code objects whose first call under eager_then_compile has run: the next miss compiles.
_first_calls: weakref.WeakSet[ExtraState] = weakref.WeakSet()


def options_to_compile(stance: Stance, fn: types.FunctionType, state: ExtraState,
                       options: CompileOptions, args: tuple,
                       reasons: list[str]) -> CompileOptions | None:
    """What a miss does under ``stance``: the options to compile with, or None to run eagerly."""
    if stance.name == "eager_on_recompile":
        return None
    if stance.name == "fail_on_recompile":
        failures = "".join(f"\n    - {reason}" for reason in reasons)
        raise RecompileError(f"Detected recompile of function {fn.__name__} in {state.location} "
                             f"while the stance is 'fail_on_recompile'" +
                             (f"\n    triggered by the following guard failure(s):{failures}"
                              if reasons else " (it was never compiled)"))
    if stance.name.endswith("eager_then_compile") and state not in _first_calls:
        _first_calls.add(state)
        if stance.name == "aot_eager_then_compile":
            # Compiling remembers the sizes, as the eager first call does below.
            return compile_options("aot_eager", options.fullgraph, options.dynamic,
                                   options.recompile_limit)
        _remember_sizes(fn, state, args)
        return None
    return options


def _remember_sizes(fn: types.FunctionType, state: ExtraState, args: tuple) -> None:
    """What the first compile needs to tell which sizes and ints differ between two calls."""
    names = FrameSignature.of(fn.__code__).arg_names
    for name, value in zip(names, args[2:]):
        if isinstance(value, torch.Tensor):
            state.shape_memory.merge_sizes(LocalSource(name), tuple(value.shape))
        elif type(value) is int:
            state.shape_memory.merge_scalar(LocalSource(name), value)


def reset() -> None:
    """Forget which code objects ran their first call (``graphlift.reset``)."""
    _first_calls.clear()


# -- error_on_graph_break ------------------------------------------------------------------------
class _BreakPolicy(threading.local):
    """Per thread: whether a graph break raises while this thread compiles."""

    error = False


_policy = _BreakPolicy()
_TORCH_UTILS = "torch._dynamo.utils"  # where torch keeps its error_on_graph_break setting


class ErrorOnGraphBreak(contextlib.ContextDecorator):
    """What :func:`error_on_graph_break` returns: a ``with`` block or a decorator."""

    def __init__(self, error: bool) -> None:
        if not isinstance(error, bool):
            raise TypeError(f"error_on_graph_break takes True or False, got {error!r}")
        self.error = error
        self.priors: list[bool] = []

    def __enter__(self) -> ErrorOnGraphBreak:
        self.priors.append(_policy.error)
        _policy.error = self.error
        return self

    def __exit__(self, *exc: object) -> None:
        _policy.error = self.priors.pop()


def error_on_graph_break(error: bool = True) -> ErrorOnGraphBreak:
    """Inside the block, a graph break met while compiling raises :class:`graphlift.Unsupported`.

    Like ``fullgraph=True``, for every function compiled in the block (this thread); unlike it,
    functions compiled outside are unaffected, and entries compiled before are still run.
    ``error_on_graph_break(False)`` turns it off inside an outer block. torch's own
    ``torch._dynamo.error_on_graph_break(True)`` counts too.
    """
    return ErrorOnGraphBreak(error)


def _breaks_raise() -> bool:
    torch_utils = sys.modules.get(_TORCH_UTILS)
    torch_says = getattr(torch_utils, "_get_error_on_graph_break", None)
    return _policy.error or bool(torch_says is not None and torch_says())


def _raise_on_break(record: GraphBreak) -> None:
    """A listener of every graph break: raises it while :func:`error_on_graph_break` is on."""
    if _breaks_raise():
        hints = record.hints if _ERROR_HINT in record.hints else (*record.hints, _ERROR_HINT)
        raise Unsupported(record.explanation, break_type=record.break_type.value, hints=hints,
                          location=record.location, source_line=record.source_line)


_ERROR_HINT = "error_on_graph_break is on: leave its block to let the graph break"


listeners.append(_raise_on_break)
