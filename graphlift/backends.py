"""Backends: what turns a captured FX graph into the callable a compiled frame runs.

A backend is any callable ``backend(gm, example_inputs) -> compiled``. ``gm`` is the
``torch.fx.GraphModule`` graphlift captured, returning a tuple; ``example_inputs`` are the
REAL tensors (and Python scalars) of the call that triggered the compile, in placeholder order.
``compiled`` is called with the graph's inputs as positional arguments, or as one list when it
carries ``_boxed_call = True`` (see :func:`call_graph_callable`).

Backends are looked up by name in ``_BACKENDS``, a table with one row per backend; users add
rows with :func:`register_backend`. Heavy torch modules are imported inside the backend that
needs them, so that ``import graphlift`` stays cheap and never imports ``torch._dynamo``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, get_origin

import torch
import torch.fx

BackendFn = Callable[[torch.fx.GraphModule, list], Callable]


def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Run the graph as captured, through its generated ``forward``."""
    # gm.forward, not gm: nn.Module.__call__ costs about 1.9 µs more per call.
    return gm.forward


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Trace forward and backward with AOTAutograd, then run both graphs as traced.

    Checks what ``inductor`` relies on (functionalization, input mutation, the joint graph)
    without code generation. The graph must return a tuple or list: AOTAutograd refuses others.
    """
    # Imported here: it imports torch._dynamo and takes most of a second.
    from torch._functorch.aot_autograd import aot_module_simplified

    # Real example inputs are fine: AOTAutograd makes its own FakeTensorMode when the inputs
    # carry none, so no TracingContext is needed. It traces with fakes; inputs are not mutated.
    with subgraph_tracing(gm):
        compiled = aot_module_simplified(
            gm,
            example_inputs,
            fw_compiler=_boxed_forward,
            bw_compiler=_boxed_forward,
            # Keep input mutations (x.add_(1) under no_grad) in the graph, as aot_eager in
            # torch does; otherwise AOTAutograd copies the result back after the graph.
            keep_inference_input_mutations=True,
        )
    return _positional(compiled)


def inductor(gm: torch.fx.GraphModule, example_inputs: list, *,
             config_patches: dict | None = None) -> Callable:
    """Compile with TorchInductor (C++ via the system compiler on CPU; seconds per graph).

    ``compile_fx`` takes ownership of ``gm`` and may change it. It accepts graphs that do not
    return a tuple, and real example inputs (it fakes them itself). ``config_patches`` are
    inductor settings for this compile: what ``mode=`` and ``options=`` become (:func:`configure`).
    """
    from torch._inductor.compile_fx import compile_fx

    with subgraph_tracing(gm):
        return _positional(compile_fx(gm, example_inputs, config_patches=config_patches))


def subgraph_tracing(gm: torch.fx.GraphModule) -> contextlib.AbstractContextManager:
    """A tracing context for a graph that calls ``invoke_subgraph`` (nested compile regions),
    when none is active. AOTAutograd keeps the subgraphs it traced, by identifier, in the
    tracing context: without one it traces the subgraph again at every call (a 32-block stack
    then compiles about 4x slower than the same graph inlined)."""
    from torch._guards import TracingContext, tracing

    if TracingContext.try_get() is not None or not calls_subgraphs(gm):
        return contextlib.nullcontext()
    from torch._subclasses.fake_tensor import FakeTensorMode

    return tracing(TracingContext(FakeTensorMode()))


def calls_subgraphs(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph holds subgraph modules (``invoke_subgraph`` calls)."""
    return any(True for _ in gm.named_children())


def _boxed_forward(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """AOTAutograd's inner compiler: its runtime calls compiled graphs with one list."""
    from functorch.compile import make_boxed_func

    return make_boxed_func(gm.forward)


def _positional(compiled: Callable) -> Callable:
    """Mark an AOTAutograd result as taking positional arguments, which it does.

    Its outer wrapper is built with ``functools.wraps`` around the boxed inner function, which
    copies the inner ``_boxed_call = True`` onto a function that takes ``*args``. Calling it with
    a list, as the stale flag says, fails. torch.compile never reads the flag at this level.
    """
    compiled._boxed_call = False
    return compiled


# The backends known by name. Each row: name, function, and what it is for.
_BACKENDS: dict[str, BackendFn] = {
    "eager": eager,  # no compilation: the fastest path on a cache hit, and the reference
    "aot_eager": aot_eager,  # AOTAutograd without codegen: isolates frontend vs inductor bugs
    "inductor": inductor,  # fused kernels; slow first call, fast steady state
}


# Named backends that see every dynamic float as a constant: AOTAutograd's pass that turns
# ``item()`` arithmetic into tensor operations specializes what it cannot turn (a float leaving
# the graph), and inductor's graph cache then serves a graph made for another value. For these a
# float stays a guarded constant; other backends get it as torch.compile gives it, a 0-d float64
# tensor input read by ``item()``.
FLOAT_SPECIALIZING = frozenset({"aot_eager", "inductor"})


# Named backends whose compile caches (inductor's FX graph cache and AOTAutograd's cache, under
# ``TORCHINDUCTOR_CACHE_DIR``) serve a graph only when it comes with a tracing context whose fake
# mode has a ShapeEnv: without one inductor bypasses them ("No shape env"). A static graph is
# handed to these with one, empty, so a cold compile fills the caches that a warm start
# (graphlift.persist) then finds. Not "eager": making a ShapeEnv imports torch._dynamo (0.8 s),
# which a static eager compile otherwise never needs.
CACHING_BACKENDS = frozenset({"inductor"})


def fills_caches_with_shape_env(backend: str | BackendFn) -> bool:
    """Whether ``backend`` keeps compile caches that need a ShapeEnv (:data:`CACHING_BACKENDS`)."""
    return isinstance(backend, str) and backend in CACHING_BACKENDS


def keeps_floats_dynamic(backend: str | BackendFn) -> bool:
    """Whether a float that changes between compiles may become a graph input for ``backend``."""
    return not (isinstance(backend, str) and backend in FLOAT_SPECIALIZING)


# Named backends that take a nested compile region as one subgraph called through torch's
# ``invoke_subgraph`` (as torch.compile hands it to them): AOTAutograd traces the subgraph once
# and inductor compiles it once. Every other backend gets each call's nodes inlined:
# ``eager`` because torch's eager ``invoke_subgraph`` cannot differentiate ("fake_mode should be
# enabled for HOPs", under torch.compile too), and a user's backend because it may not know the
# operator.
SUBGRAPH_BACKENDS = frozenset({"aot_eager", "inductor"})


def takes_subgraphs(backend: str | BackendFn) -> bool:
    """Whether ``backend`` (a name, or inductor with ``mode=``/``options=``) gets nested compile
    regions as ``invoke_subgraph`` calls."""
    if isinstance(backend, ConfiguredBackend):
        return backend.fn is inductor
    return isinstance(backend, str) and backend in SUBGRAPH_BACKENDS


def register_backend(name: str, fn: BackendFn) -> None:
    """Make ``fn`` available as ``backend=name``; a taken name raises ValueError."""
    if name in _BACKENDS:
        raise ValueError(f"backend {name!r} is already registered")
    if not callable(fn):
        raise TypeError(f"backend {name!r} must be callable, got {type(fn).__name__}")
    _BACKENDS[name] = fn


def list_backends() -> list[str]:
    """The registered backend names, sorted."""
    return sorted(_BACKENDS)


def lookup_backend(backend: str | BackendFn) -> BackendFn:
    """Resolve a backend name to its function; a callable is returned unchanged."""
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name or a callable, got {type(backend).__name__}")
    try:
        return _BACKENDS[backend]
    except KeyError:
        known = ", ".join(list_backends())
        raise ValueError(f"unknown backend {backend!r}; known backends: {known}") from None


def call_graph_callable(compiled: Callable) -> Callable:
    """Return a function taking the graph inputs as ``*args`` that runs ``compiled``.

    A compiled graph with ``_boxed_call = True`` takes one list (which it may clear, to free
    inputs early) and gets a wrapper. Any other is returned itself: a wrapper frame would cost
    every call about 50 ns for nothing.
    """
    if not getattr(compiled, "_boxed_call", False):
        return compiled

    def call_boxed(*args: object) -> object:
        return compiled(list(args))

    return call_boxed


# -- torch.compile's mode= and options= ------------------------------------------------------
class ConfiguredBackend:
    """A backend called with the ``mode=`` or ``options=`` that torch.compile would pass it.

    ``__name__`` says both (``inductor(mode='max-autotune')``): recompile reasons and the
    doctor name the backend by it.
    """

    def __init__(self, fn: Callable, name: str, settings: dict[str, Any]) -> None:
        self.fn = fn
        self.settings = settings
        shown = ", ".join(f"{key}={value!r}" for key, value in settings.items())
        self.__name__ = f"{name}({shown})"

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return self.fn(gm, example_inputs, **self.settings)


# One ConfiguredBackend per backend and settings, so that compiles with equal settings share
# cache entries (entries are matched to their wrapper's backend by identity).
_configured: dict[tuple, ConfiguredBackend] = {}


def configure(backend: str | BackendFn, mode: str | None,
              options: dict[str, Any] | None) -> str | BackendFn:
    """``backend`` with torch.compile's ``mode=`` or ``options=``, checked now, at the call.

    As in torch.compile: ``inductor`` turns the mode into its settings and takes the options as
    settings (an unknown name or a value of the wrong type is refused); ``eager`` and
    ``aot_eager`` ignore both, with a warning; any other backend is called with ``mode=...`` or
    ``options=...`` as keywords. Giving both is refused.
    """
    fn = lookup_backend(backend)  # an unknown name fails here
    if mode is None and options is None:
        return backend
    if mode is not None and options is not None:
        raise ValueError("give mode= or options=, not both (as torch.compile requires)")
    if mode is not None and not isinstance(mode, str):
        raise TypeError(f"mode must be a string, got {type(mode).__name__}")
    if options is not None and not (isinstance(options, dict) and
                                    all(isinstance(key, str) for key in options)):
        raise TypeError(f"options must be a dict with string keys, got {options!r}")
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
    if fn in (eager, aot_eager):
        logging.getLogger("graphlift").warning(
            "backend %r takes no settings: ignoring %s", name,
            f"mode={mode!r}" if mode is not None else f"options={options!r}")
        return backend
    if fn is inductor:
        settings = {"config_patches": _inductor_settings(mode, options)}
    else:
        settings = {"mode": mode} if mode is not None else {"options": dict(options)}
    try:
        key = (backend if isinstance(backend, str) else id(backend), mode,
               tuple(sorted((options or {}).items())))
        hash(key)
    except TypeError:  # an option value that cannot be hashed: this compile's own backend
        return ConfiguredBackend(fn, name, settings)
    if key not in _configured:
        _configured[key] = ConfiguredBackend(fn, name, settings)
    return _configured[key]


def _inductor_settings(mode: str | None, options: dict[str, Any] | None) -> dict[str, Any]:
    """Inductor's settings for a mode, or the options checked against inductor's config."""
    # Imported here: inductor takes seconds to import, and only this backend needs it.
    from torch._inductor import config as inductor_config
    from torch._inductor import list_mode_options

    if mode is not None:
        modes = list_mode_options()
        if mode not in modes:
            raise ValueError(f"unknown mode {mode!r} for inductor; known modes: "
                             f"{', '.join(modes)}")
        return dict(modes[mode])
    known = inductor_config.get_config_copy()
    settings = {}
    for key, value in options.items():
        name = key.replace("-", "_")
        if name not in known:
            raise ValueError(f"unknown inductor option {key!r}; inductor's options are the "
                             f"settings of torch._inductor.config")
        expected = inductor_config.get_type(name)
        if get_origin(expected) is None and isinstance(expected, type) and \
                not isinstance(value, expected):
            raise TypeError(f"inductor option {key!r} must be {expected.__name__}, got "
                            f"{type(value).__name__}")
        settings[name] = value
    return settings
