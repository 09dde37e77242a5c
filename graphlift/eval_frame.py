"""Interception and the cache lookup: what runs on every call of a compiled function.

CPython 3.11 offers no frame-evaluation hook to Python code, so ``graphlift.compile(fn)``
intercepts calls with a generated wrapper that has ``fn``'s exact signature (Python binds the
arguments, in C). The wrapper checks the head of the code object's cache chain and calls its run
function; anything else goes to :func:`_on_miss`::

    def f(x, n=2):                                   # same signature as the user's f
        __gl_e = __gl_state.head
        if __gl_e is not None and __gl_e.options is __gl_opts \
                and __gl_e.check(__gl_fn, __gl_G, x, n):
            __gl_state.stats.hits += 1
            return __gl_e.run(__gl_fn, __gl_G, x, n)
        return __gl_miss((__gl_fn, __gl_G, x, n))

Every name the wrapper adds starts with ``__gl_`` so that it cannot shadow a parameter.
``__gl_G`` is ``fn.__globals__``: guards and run functions get the globals from the call.

On a miss the other entries are tried in order (a hit moves to the front), then a new entry is
compiled and put at the head, unless a recompile limit says the frame should run eagerly.
"""

from __future__ import annotations

import builtins
import functools
import time
import types
from collections.abc import Callable
from typing import Any

import torch

from graphlift import cache, events, logs
from graphlift.backends import lookup_backend
from graphlift.cache import CacheEntry, ExtraState
from graphlift.config import config
from graphlift.convert_frame import (
    CompileOptions,
    FrameSignature,
    compile_options,
    convert_frame,
    eager_run,
)
from graphlift.exc import RecompileError, RecompileLimitExceeded
from graphlift.sources import FN_NAME, GLOBALS_NAME

WRAPPED_ATTR = "_graphlift_fn"  # on a wrapper: the original function


def compile(fn: Callable | None = None, *, backend: str | Callable = "eager",
            fullgraph: bool = False, dynamic: bool | None = None) -> Callable:
    """Compile ``fn``: usable as ``compile(fn)``, ``@compile`` and ``@compile(backend=...)``.

    ``backend`` is ``"eager"``, ``"aot_eager"``, ``"inductor"`` or a callable
    ``(gm, example_inputs) -> callable``. ``fullgraph=True`` raises :class:`graphlift.Unsupported`
    instead of running a frame eagerly. ``dynamic`` is accepted for torch.compile compatibility;
    dynamic shapes are not implemented yet, so every size is static.
    """
    lookup_backend(backend)  # an unknown name fails here, not on the first call
    options = compile_options(backend, fullgraph, dynamic)
    if fn is None:
        return functools.partial(_compile, options=options)
    return _compile(fn, options)


def _compile(fn: Callable, options: CompileOptions) -> Callable:
    fn = getattr(fn, WRAPPED_ATTR, fn)
    if isinstance(fn, types.MethodType):
        return types.MethodType(_compile(fn.__func__, options), fn.__self__)
    if isinstance(fn, torch.nn.Module):
        return _compile_module(fn, options)
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"graphlift.compile expects a Python function, method or nn.Module, "
                        f"got {type(fn).__name__}")
    return make_wrapper(fn, options)


def _compile_module(module: torch.nn.Module, options: CompileOptions) -> torch.nn.Module:
    """Compile ``module.forward`` in place of the module's forward, on a wrapper module."""
    compiled_forward = _compile(module.forward, options)

    class OptimizedModule(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self._orig_mod = module

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return compiled_forward(*args, **kwargs)

        def __getattr__(self, name: str) -> Any:
            if name == "_orig_mod":
                return super().__getattr__(name)
            return getattr(self._orig_mod, name)

    return OptimizedModule()


NESTED_ATTR = "_graphlift_nested"  # on a function: {options: its wrapper} for nested calls


def compiled_wrapper(fn: types.FunctionType, options: CompileOptions) -> Callable:
    """The wrapper that compiles ``fn`` when a compiled frame calls it eagerly (after a break).

    This is what a frame-evaluation hook would do: user code reached from a compiled function is
    compiled too, with the same options. One wrapper per function and options, kept on ``fn``
    itself: a table of them would keep every such function alive, since a wrapper refers to its
    function (a WeakKeyDictionary never drops a key that its own value refers to).
    """
    per_options = fn.__dict__.get(NESTED_ATTR)
    if per_options is None:
        per_options = fn.__dict__[NESTED_ATTR] = {}
    wrapper = per_options.get(options)
    if wrapper is None:
        wrapper = per_options[options] = make_wrapper(fn, options)
    return wrapper


def make_wrapper(fn: types.FunctionType, options: CompileOptions) -> Callable:
    """Generate the intercepting wrapper for ``fn`` (see the module docstring)."""
    state = cache.get_state(fn.__code__)
    signature = FrameSignature.of(fn.__code__)
    namespace: dict[str, Any] = {
        "__gl_state": state,
        "__gl_opts": options,
        FN_NAME: fn,
        GLOBALS_NAME: fn.__globals__,
        "__gl_miss": functools.partial(_on_miss, fn, state, options,
                                       eager_run(fn.__code__, signature)[0]),
    }
    params = ", ".join(signature.params)
    source = (
        f"def {_safe_name(fn)}({_parameter_list(fn, namespace)}):\n"
        f"    __gl_e = __gl_state.head\n"
        f"    if __gl_e is not None and __gl_e.options is __gl_opts and __gl_e.check({params}):\n"
        f"        __gl_state.stats.hits += 1\n"
        f"        return __gl_e.run({params})\n"
        f"    return __gl_miss(({params},))\n"
    )
    code = builtins.compile(source, f"<graphlift wrapper of {fn.__qualname__}>", "exec")
    exec(code, namespace)  # noqa: S102
    wrapper = functools.wraps(fn)(namespace[_safe_name(fn)])
    wrapper.__dict__.pop(NESTED_ATTR, None)  # copied from fn.__dict__; it belongs to fn
    setattr(wrapper, WRAPPED_ATTR, fn)
    wrapper._graphlift_source = source
    return wrapper


def _safe_name(fn: types.FunctionType) -> str:
    return fn.__name__ if fn.__name__.isidentifier() else "compiled_fn"


def _parameter_list(fn: types.FunctionType, namespace: dict[str, Any]) -> str:
    """``fn``'s parameters as source text; defaults become names bound in ``namespace``.

    Defaults are read once, here: changing ``fn.__defaults__`` later is not seen by the wrapper.
    """
    code = fn.__code__
    names = code.co_varnames
    positional = names[:code.co_argcount]
    defaults = fn.__defaults__ or ()
    first_default = len(positional) - len(defaults)
    parts = []
    for i, name in enumerate(positional):
        if i >= first_default:
            namespace[f"__gl_d{i}"] = defaults[i - first_default]
            parts.append(f"{name}=__gl_d{i}")
        else:
            parts.append(name)
        if i + 1 == code.co_posonlyargcount:
            parts.append("/")
    index = code.co_argcount
    keyword_only = names[index:index + code.co_kwonlyargcount]
    index += code.co_kwonlyargcount
    if code.co_flags & 0x04:
        parts.append(f"*{names[index]}")
        index += 1
    elif keyword_only:
        parts.append("*")
    kwdefaults = fn.__kwdefaults__ or {}
    for name in keyword_only:
        if name in kwdefaults:
            namespace[f"__gl_kd_{name}"] = kwdefaults[name]
            parts.append(f"{name}=__gl_kd_{name}")
        else:
            parts.append(name)
    if code.co_flags & 0x08:
        parts.append(f"**{names[index]}")
    return ", ".join(parts)


# -- the miss path -----------------------------------------------------------------------------
def _on_miss(fn: types.FunctionType, state: ExtraState, options: CompileOptions,
             run_eagerly: Callable, args: tuple) -> Any:
    """The head entry's guards failed: try the others, then compile or fall back."""
    start = time.perf_counter()
    entries = state.entries
    for index in range(1, len(entries)):  # the head failed on the fast path
        entry = entries[index]
        if entry.options is options and _passes(entry, args):
            state.move_to_front(index)
            state.stats.guard_seconds += time.perf_counter() - start
            state.stats.hits += 1
            return entry.run(*args)
    state.stats.guard_seconds += time.perf_counter() - start
    state.stats.misses += 1
    if state.run_only:
        return run_eagerly(*args)
    reasons = _failure_reasons(state, options, args)
    if entries and not _may_recompile(fn, state, options, reasons):
        return run_eagerly(*args)
    if not _under_accumulated_limit(fn, state, options, reasons):
        return run_eagerly(*args)
    entry = convert_frame(fn, state, args, options)
    events.on_compile(fn, state, entry, reasons)
    state.push_front(entry)
    return entry.run(*args)


def _passes(entry: CacheEntry, args: tuple) -> bool:
    try:
        return bool(entry.check(*args))
    except Exception:  # a guard that cannot run (an attribute gone) is a failed guard
        return False


def _failure_reasons(state: ExtraState, options: CompileOptions, args: tuple) -> list[str]:
    """``"0/0: L['n'] == 3 (now 4)"`` for each existing entry, in lookup order."""
    reasons = []
    for entry in state.entries:
        if entry.options is not options:
            failure = f"compiled with {entry.options.describe()} (now {options.describe()})"
        else:
            failure = entry.compiled_guards.first_failure(args) or "guards passed on recheck"
        reasons.append(f"{entry.compile_id}: {failure}")
    return reasons


def _may_recompile(fn: types.FunctionType, state: ExtraState, options: CompileOptions,
                   reasons: list[str]) -> bool:
    """Log the recompile, or refuse it: error_on_recompile raises, the limit falls back."""
    if config.error_on_recompile:
        raise RecompileError(f"Recompiling function {fn.__name__} in {state.location} "
                             f"(error_on_recompile=True)\n" + _reason_lines(reasons))
    if len(state.entries) >= config.recompile_limit:
        _hit_limit(fn, state, options, "recompile_limit", config.recompile_limit, reasons)
        return False
    if logs.enabled("recompiles"):
        logs.emit("recompiles", f"Recompiling function {fn.__name__} in {state.location}\n"
                  f"    triggered by the following guard failure(s):\n{_reason_lines(reasons)}")
    return True


def _under_accumulated_limit(fn: types.FunctionType, state: ExtraState,
                             options: CompileOptions, reasons: list[str]) -> bool:
    limit = config.accumulated_recompile_limit
    if cache.accumulated_compiles() < limit:
        return True
    _hit_limit(fn, state, options, "accumulated_recompile_limit", limit, reasons)
    return False


def _reason_lines(reasons: list[str]) -> str:
    return "\n".join(f"    - {reason}" for reason in reasons)


LIKELY_CAUSES = """Likely causes, each with its fix:
  - a Python scalar (int, float, bool, str) that varies between calls is baked into the graph
    as a constant: pass it as a tensor (graphlift has no dynamic scalars yet).
  - tensor sizes that vary between calls: pad or bucket them to a few sizes (graphlift has no
    dynamic shapes yet, so every size is its own entry).
  - global state that flips between calls (grad mode, autocast, default dtype): pin it around
    the calls.
  - a new function or module object on every call: define it once, outside the loop."""


def _hit_limit(fn: types.FunctionType, state: ExtraState, options: CompileOptions, which: str,
               limit: int, reasons: list[str]) -> None:
    """Warn once (or raise), then put the code object in run-only mode until reset()."""
    events.on_limit(fn, state, which, limit, reasons)
    latest = max(state.entries, key=lambda e: int(e.compile_id.split("/")[1]), default=None)
    last_reason = next((r for r, e in zip(reasons, state.entries) if e is latest), "none")
    message = (f"graphlift hit config.{which} ({limit})\n"
               f"   function: {fn.__name__!r} ({state.location})\n"
               f"   last reason: {last_reason}\n"
               f'To log all recompilation reasons, use GRAPHLIFT_LOGS="recompiles".\n'
               f"{LIKELY_CAUSES}")
    if config.fail_on_recompile_limit_hit or options.fullgraph:
        raise RecompileLimitExceeded(message)
    state.run_only = True
    if not state.stats.recompile_limit_hit:
        state.stats.recompile_limit_hit = True
        logs.log.warning(message)


# -- public queries ----------------------------------------------------------------------------
def _code_of(fn: Callable) -> types.CodeType:
    fn = getattr(fn, WRAPPED_ATTR, fn)
    if isinstance(fn, types.MethodType):
        fn = getattr(fn.__func__, WRAPPED_ATTR, fn.__func__)
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TypeError(f"expected a function or a graphlift-compiled function, got {fn!r}")
    return code


def cache_entries(fn: Callable) -> list[CacheEntry]:
    """The cache entries of ``fn``'s code object, in lookup order (most recently used first)."""
    state = cache.peek_state(_code_of(fn))
    return list(state.entries) if state is not None else []


def stats(fn: Callable) -> cache.Stats:
    """Counters and per-phase seconds for ``fn``'s code object (zeros if never compiled)."""
    state = cache.peek_state(_code_of(fn))
    return state.stats if state is not None else cache.Stats()


def reset() -> None:
    """Clear every cache entry, counter and limit state in the process."""
    cache.reset_all()
