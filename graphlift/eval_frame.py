"""Interception and the cache lookup: what runs on every call of a compiled function.

CPython 3.11 offers no frame-evaluation hook to Python code, so ``graphlift.compile(fn)``
intercepts calls with a generated wrapper that has ``fn``'s exact signature (Python binds the
arguments, in C). The wrapper checks the head of the code object's cache chain and calls its run
function; anything else goes to :func:`_on_miss`::

    def f(x, n=2):                                   # same signature as the user's f
        try:
            __gl_e = __gl_state.head
            if __gl_e is not None and __gl_e.options is __gl_opts and not __gl_off[0] \
                    and __gl_ts[0]['_stance'] is __gl_ts[1]:
                try:
                    __gl_hit = __gl_e.check(__gl_fn, __gl_G, x, n)
                except Exception:                    # a guard that cannot run has failed
                    __gl_hit = False
                if __gl_hit:
                    __gl_state.stats.hits += 1
                    if __gl_cfg['verify']:           # verify mode (graphlift.verify)
                        return __gl_verify(__gl_e, (__gl_fn, __gl_G, x, n))
                    return __gl_e.run(__gl_fn, __gl_G, x, n)
            return __gl_miss((__gl_fn, __gl_G, x, n))
        except BaseException as __gl_x:              # costs nothing until something raises
            __gl_trim(__gl_x)                        # graphlift's frames out of the traceback
            raise                                    # (the call is skipped at 3.12's depth limit)

Every name the wrapper adds starts with ``__gl_`` so that it cannot shadow a parameter.
``__gl_G`` is ``fn.__globals__``: guards and run functions get the globals from the call.
``__gl_off[0]`` counts the threads inside ``graphlift.disable(recursive=True)``: while one is,
every call takes the miss path, where a disabled thread runs the original function.
``__gl_ts`` is :data:`graphlift.stance.HIT_PATH`: the test fails while a stance other than
``default`` is in force (graphlift's or torch's), and the miss path then does what it says.
``__gl_cfg`` is the dict ``graphlift.config`` reads from: ``config.verify`` costs the hit path one
subscript while it is 0.

On a miss the other entries are tried in order (a hit moves to the front), then a new entry is
compiled and put at the head, unless a recompile limit says the frame should run eagerly.
"""

from __future__ import annotations

import builtins
import ctypes
import functools
import operator
import os
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

import torch

from graphlift import (
    cache,
    eager_callees,
    events,
    logs,
    persist,
    progress,
    stance,
    trace_rules,
    verify,
)
from graphlift.backends import configure
from graphlift.cache import CacheEntry, ExtraState
from graphlift.config import config, live_values
from graphlift.convert_frame import (
    EAGER_RUN_FILE,
    USER_FACING_ERRORS,
    CompileOptions,
    FrameSignature,
    compile_options,
    convert_frame,
    eager_run,
    modes_active,
)
from graphlift.exc import (
    FirstCallRunsEagerly,
    GraphliftError,
    InternalError,
    RecompileError,
    RecompileLimitExceeded,
)
from graphlift.rebuild import FrameWrappers
from graphlift.resume import RESUME_ATTR
from graphlift.sources import FN_NAME, GLOBALS_NAME, LocalSource

WRAPPED_ATTR = "_graphlift_fn"  # on a wrapper: the original function
DISABLED_ATTR = "_graphlift_disabled"  # on a graphlift.disable wrapper: the user's reason


class _DisabledState(threading.local):
    """Per thread: how many recursive ``graphlift.disable`` calls it is inside."""

    depth = 0


_disabled = _DisabledState()
# Threads inside a recursive disable, process-wide. The hit path's one extra test (about 10 ns):
# while it is not 0, every compiled wrapper goes to _on_miss, which looks at its own thread.
_disabled_threads = [0]
_disabled_lock = threading.Lock()


def enter_disabled() -> None:
    """Start running eagerly: compiled functions called from here on run their original."""
    if _disabled.depth == 0:
        with _disabled_lock:
            _disabled_threads[0] += 1
    _disabled.depth += 1


def exit_disabled() -> None:
    """Undo one :func:`enter_disabled`."""
    _disabled.depth -= 1
    if _disabled.depth == 0:
        with _disabled_lock:
            _disabled_threads[0] -= 1


def compile(fn: Callable | None = None, *, backend: str | Callable = "eager",
            fullgraph: bool = False, dynamic: bool | None = None, mode: str | None = None,
            options: dict[str, Any] | None = None, disable: bool = False,
            recompile_limit: int | None = None) -> Callable:
    """Compile ``fn``: usable as ``compile(fn)``, ``@compile`` and ``@compile(backend=...)``.

    ``fn`` is a function, a method, an ``nn.Module`` (its calls), or any other callable (a C
    function such as ``torch.sin``, a ``functools.partial``): those get a frame of their own
    that calls them, as torch.compile gives them. ``backend`` is ``"eager"``, ``"aot_eager"``,
    ``"inductor"`` or a callable ``(gm, example_inputs) -> callable``. ``mode`` and ``options``
    reach the backend as torch.compile passes them (:func:`graphlift.backends.configure`).
    ``fullgraph=True`` raises :class:`graphlift.Unsupported` instead of running a frame eagerly.
    ``dynamic=None`` (automatic dynamic) compiles static first, then makes dynamic each size or
    int that changes between compiles; ``dynamic=True`` makes every size and int dynamic from the
    first compile (sizes 0 and 1 stay static); ``dynamic=False`` never does, ignoring
    ``mark_dynamic`` too (see :mod:`graphlift.dynamic_shapes`). ``recompile_limit`` replaces
    ``config.recompile_limit`` for this compile. ``disable=True`` compiles nothing: ``fn`` comes
    back unchanged. Every setting is checked here, not at the first call.
    """
    _check_settings(fullgraph, dynamic, disable, recompile_limit)
    backend = configure(backend, mode, options)  # an unknown name fails here too
    if disable:
        return fn if fn is not None else _unchanged
    compile_settings = compile_options(backend, fullgraph, dynamic, recompile_limit)
    if fn is None:
        return functools.partial(_compile, options=compile_settings)
    return _compile(fn, compile_settings)


def _check_settings(fullgraph: Any, dynamic: Any, disable: Any, recompile_limit: Any) -> None:
    """Refuse what torch.compile would misread (``fullgraph="yes"`` is truthy, not a setting)."""
    for name, value in (("fullgraph", fullgraph), ("disable", disable)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")
    if dynamic is not None and not isinstance(dynamic, bool):
        raise TypeError(f"dynamic must be None (automatic dynamic), True or False, "
                        f"got {dynamic!r}")
    if recompile_limit is not None and (type(recompile_limit) is not int or
                                        recompile_limit < 1):
        raise TypeError(f"recompile_limit must be a positive int or None (config."
                        f"recompile_limit), got {recompile_limit!r}")


def _unchanged(fn: Callable) -> Callable:
    """``compile(disable=True)`` as a decorator."""
    return fn


def _compile(fn: Callable, options: CompileOptions) -> Callable:
    if isinstance(fn, OptimizedModule):
        fn = fn._orig_mod  # compiled again: the module itself, with the new options
    fn = getattr(fn, WRAPPED_ATTR, fn)
    nonrecursive = eager_callees.non_recursive_disabled(fn)
    if nonrecursive is not None and config.compile_eager_callees:
        return _eager_with_compiled_callees(fn, nonrecursive, options)
    while (original := trace_rules.torch_original(fn)) is not None:
        fn = original  # torch's wrappers: torch.compile(torch.compiler.disable(f)) compiles f
    if isinstance(fn, types.FunctionType) and DISABLED_ATTR in fn.__dict__:
        return fn  # graphlift.disable: it always runs eagerly
    if isinstance(fn, types.MethodType):
        if fn.__func__ in _MODULE_CALLS and isinstance(fn.__self__, torch.nn.Module):
            return OptimizedModule(fn.__self__, options).forward  # module.compile() compiles this
        return types.MethodType(_compile(fn.__func__, options), fn.__self__)
    if isinstance(fn, torch.nn.Module):
        return _compile_module(fn, options)
    if isinstance(fn, types.FunctionType):
        return make_wrapper(fn, options)
    if callable(fn):
        return make_wrapper(_frame_calling(fn), options)
    raise TypeError(f"graphlift.compile expects a callable, got {type(fn).__name__}")


def _eager_with_compiled_callees(fn: types.FunctionType, original: types.FunctionType,
                                 options: CompileOptions) -> Callable:
    """``compile(disable(f, recursive=False))``: ``f`` runs its own code eagerly and what it
    calls is compiled, as torch.compile does (the frame is skipped, the hook stays on)."""
    eager = eager_callees.eager_function(original, options, WRAPPERS)

    @functools.wraps(fn)
    def disabled_frame(*args: Any, **kwargs: Any) -> Any:
        return eager(*args, **kwargs)

    disabled_frame.__dict__.pop(eager_callees.ROUTES_ATTR, None)
    return disabled_frame


# A module's bound __call__ or _call_impl: compiled as the module's calls, hooks and all.
_MODULE_CALLS = (torch.nn.Module.__call__, torch.nn.Module._call_impl)


def _frame_calling(target: Callable) -> types.FunctionType:
    """A new Python function that calls ``target``: the frame compiled for a C function, a
    ``functools.partial`` or a callable object, which have no frame of their own.

    Its code object is made here, so that its cache and recompile count are its own.
    """
    name = getattr(target, "__name__", None) or type(target).__name__
    safe = name if name.isidentifier() else "compiled_call"
    source = f"def {safe}(*args, **kwargs):\n    return __gl_target(*args, **kwargs)\n"
    namespace: dict[str, Any] = {"__gl_target": target}
    exec(builtins.compile(source, f"<graphlift call of {name}>", "exec"), namespace)  # noqa: S102
    return namespace[safe]


def _compile_module(module: torch.nn.Module, options: CompileOptions) -> torch.nn.Module:
    """``compile(module)``: a wrapper module whose calls run the module compiled."""
    cls = DDPOptimizedModule if _is_ddp(module) or _is_fsdp(module) else OptimizedModule
    return torch_compatible(cls)(module, options)


def _is_ddp(module: torch.nn.Module) -> bool:
    return torch.distributed.is_available() and \
        isinstance(module, torch.nn.parallel.DistributedDataParallel)


def _is_fsdp(module: torch.nn.Module) -> bool:
    """A module made by FSDP2's ``fully_shard`` (its class subclasses ``FSDPModule``)."""
    if not torch.distributed.is_available():
        return False
    fsdp = sys.modules.get("torch.distributed.fsdp")  # not imported: no fully_shard module
    return fsdp is not None and isinstance(module, fsdp.FSDPModule)


def _call_module(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """What a compiled module call runs: what calling the module runs (hooks, forward).

    ``_call_impl``, not ``self(...)``: run eagerly, it must not go back through the module's
    ``_compiled_call_impl`` (``module.compile()``), which leads here.
    """
    return self._call_impl(*args, **kwargs)


class CompileContext:
    """A compiled module's ``dynamo_ctx``: compiles what it is called with, with the module's
    options, as torch's wrapper's ``dynamo_ctx`` does (Lightning compiles a LightningModule's
    ``forward`` and ``training_step`` with it)."""

    def __init__(self, options: CompileOptions) -> None:
        self.options = options

    def __call__(self, fn: Callable) -> Callable:
        return _compile(fn, self.options)


# What a compiled module keeps as its own; any other attribute is read from, written to and
# deleted on the original module, as torch's wrapper does.
_OWN_ATTRIBUTES = frozenset({"_orig_mod", "dynamo_ctx", "forward", "__dict__"})
_OWN_PREFIX = "_graphlift_"


class OptimizedModule(torch.nn.Module):
    """What ``graphlift.compile(module)`` returns: torch.compile's wrapper, as code sees it.

    Calling it runs ``module(*args, **kwargs)`` compiled: the module's ``forward`` frame is
    compiled (every submodule call in it is inlined, so the whole tree is one graph); when the
    module has forward hooks, a frame that calls the module is compiled instead, hooks and all.
    As torch's wrapper, it holds the module as the submodule ``_orig_mod``, so ``state_dict()``,
    ``named_parameters()`` and ``named_modules()`` name everything ``_orig_mod.``-first and
    ``load_state_dict`` takes such names; ``train()``, ``eval()``, ``to()`` and ``apply()``
    reach the module, and ``training`` is the module's flag. Other attributes are read from,
    set on and deleted from the module; ``len()`` is the module's; ``dynamo_ctx`` compiles with
    the same options; pickling (``torch.save``) keeps the module and the options.
    ``graphlift.stats(wrapper)`` and ``cache_entries(wrapper)`` read the cache of the forward's
    code object. :func:`torch_compatible` makes it a ``torch._dynamo.OptimizedModule`` too.
    """

    def __init__(self, module: torch.nn.Module, options: CompileOptions) -> None:
        # nn.Module's, named: in torch_compatible's class, torch's wrapper comes next in the MRO.
        torch.nn.Module.__init__(self)
        # Read on every call, from the instance dict: no Module.__getattr__ on the hit path.
        self.__dict__["_graphlift_module"] = module
        self.__dict__["_graphlift_options"] = options
        self._orig_mod = module
        self.dynamo_ctx = CompileContext(options)
        forward = module.forward
        plain = isinstance(forward, types.MethodType) and forward.__self__ is module and \
            isinstance(forward.__func__, types.FunctionType)
        self.__dict__["_graphlift_hooked"] = compiled_wrapper(_call_module, options)
        self.__dict__["_graphlift_forward"] = _compile(forward.__func__, options) if plain \
            else None  # a forward set on the instance: the module call is compiled instead
        # What stats() and cache_entries() read.
        self.__dict__[WRAPPED_ATTR] = forward.__func__ if plain else _call_module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        module = self._graphlift_module
        try:
            if self._graphlift_forward is not None and eager_callees.has_backward_hooks(module):
                return hooks_around_compiled_forward(module, self._graphlift_forward, *args,
                                                     **kwargs)
            if self._graphlift_forward is None or eager_callees.has_hooks(module):
                return self._graphlift_hooked(module, *args, **kwargs)
            return self._graphlift_forward(module, *args, **kwargs)
        except BaseException as error:
            try:
                trim_traceback(error)  # this frame too: the traceback reads as eager's
            except RecursionError:  # 3.12 at the recursion limit: a wrapper above trims
                pass
            raise

    @property
    def training(self) -> bool:  # type: ignore[override]
        """The original module's flag: ``wrapper.eval()`` and ``module.eval()`` are one switch."""
        return self._graphlift_module.training

    @training.setter
    def training(self, mode: bool) -> None:
        module = self.__dict__.get("_graphlift_module")
        if module is not None:  # Module.__init__ sets it before the module is attached
            module.training = mode

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        module = self.__dict__.get("_graphlift_module")
        if module is None:  # before __init__ attached it (unpickling, copying)
            raise AttributeError(name)
        return getattr(module, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._keeps(name):
            torch.nn.Module.__setattr__(self, name, value)
        else:
            setattr(self._graphlift_module, name, value)

    def __delattr__(self, name: str) -> None:
        if self._keeps(name):
            torch.nn.Module.__delattr__(self, name)
        else:
            delattr(self._graphlift_module, name)

    @classmethod
    def _keeps(cls, name: str) -> bool:
        """Whether attribute ``name`` is the wrapper's own (else the module's)."""
        return name in _OWN_ATTRIBUTES or name.startswith(_OWN_PREFIX) or hasattr(cls, name)

    def __len__(self) -> int:
        module = self._graphlift_module
        if not hasattr(type(module), "__len__"):
            raise TypeError(f"{type(module).__name__} does not support len()")
        return len(module)

    def __dir__(self) -> list[str]:
        own = self._graphlift_module.__dir__()
        return own + [name for name in torch.nn.Module.__dir__(self) if name not in own]

    def __reduce__(self) -> tuple[Callable, tuple]:
        options = self._graphlift_options
        return (_unpickle_module, (self._orig_mod, options.backend, options.fullgraph,
                                   options.dynamic, options.recompile_limit))


def _unpickle_module(module: torch.nn.Module, backend: str | Callable, fullgraph: bool,
                     dynamic: bool | None, recompile_limit: int | None) -> torch.nn.Module:
    """A pickled compiled module, compiled again with its options (entries are not kept)."""
    return _compile_module(module, compile_options(backend, fullgraph, dynamic, recompile_limit))


# Set by the drop-in switch: compiled modules are torch's class too, even before anything has
# imported torch._dynamo (code written for torch.compile checks for its wrapper's class).
torch_classes = [False]
_compatible_classes: dict[type, type] = {}


def torch_compatible(cls: type) -> type:
    """``cls``, or where code may check for torch's wrapper class (``torch._dynamo`` imported,
    or the drop-in switch on), a subclass of ``cls`` and of ``torch._dynamo.OptimizedModule``,
    of the same name: ``isinstance(m, torch._dynamo.OptimizedModule)`` then holds.

    ``cls``'s methods come first; the call is ``nn.Module``'s, as ``cls``'s is. Importing
    ``torch._dynamo`` takes most of a second, so it is imported here only for the drop-in
    switch: code that checks for torch's class has imported it already.
    """
    if not torch_classes[0] and "torch._dynamo.eval_frame" not in sys.modules:
        return cls
    made = _compatible_classes.get(cls)
    if made is None:
        from torch._dynamo.eval_frame import OptimizedModule as TorchOptimizedModule

        made = _compatible_classes[cls] = type(cls.__name__, (cls, TorchOptimizedModule), {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__,
            "__doc__": cls.__doc__, "__call__": torch.nn.Module.__call__})
    return made


class DDPOptimizedModule(OptimizedModule):
    """``compile(DDP(model))`` or ``compile(fully_shard(model))``: the wrapper's own call runs
    eagerly and the model's ``forward`` is compiled.

    DDP's forward, and FSDP2's pre- and post-forward hooks, are bookkeeping around one call of
    the model's ``forward`` (DDP's reducer and buffer broadcasts; FSDP's all-gather of the
    parameters and their resharding), so they run as they are: torch.compile skips DDP's frames
    and a frame-evaluation hook compiles the frame of the model's ``forward``. Without such a
    hook, the model's ``forward`` is set on the model instance for the duration of the call (and
    removed after), so the wrapper's call of it runs the compiled forward. Inside DDP it is
    compiled during DDP's forward, so ``config.optimize_ddp`` splits its graphs at DDP's buckets.
    A model with a ``forward`` of its own set on the instance runs uncompiled.
    """

    def __init__(self, module: torch.nn.Module, options: CompileOptions) -> None:
        inner = module.module if _is_ddp(module) else module
        super().__init__(inner, options)
        self.__dict__["_graphlift_outer"] = module
        self.__dict__["_graphlift_inner"] = inner
        self._orig_mod = module
        self.__dict__["_graphlift_module"] = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        outer, inner, compiled = self._graphlift_outer, self._graphlift_inner, \
            self._graphlift_forward
        if compiled is None or "forward" in inner.__dict__:
            return outer(*args, **kwargs)
        inner.__dict__["forward"] = types.MethodType(compiled, inner)
        try:
            return outer(*args, **kwargs)
        finally:
            del inner.__dict__["forward"]


def compiled_module_call(module: torch.nn.Module, options: CompileOptions) -> Callable:
    """``module`` called at a graph break: its ``forward`` frame is compiled on its own.

    This is the frame that a frame-evaluation hook would see next, so a break deeper inside it
    splits that frame in turn. Module instances of one class share ``forward``'s code object;
    each gets entries of its own (pinned by identity; the recompile limit counts per instance).
    A module with hooks, or with a ``forward`` of its own, is called as it is.
    """
    forward = type(module).forward
    if "forward" in module.__dict__ or not isinstance(forward, types.FunctionType) or \
            not _plain_call(module):
        return module
    if eager_callees.has_backward_hooks(module):
        return functools.partial(hooks_around_compiled_forward, module,
                                 compiled_wrapper(forward, options))
    if eager_callees.has_hooks(module):
        return module
    return functools.partial(compiled_wrapper(forward, options), module)


def hooks_around_compiled_forward(module: torch.nn.Module, forward: Callable, *args: Any,
                                  **kwargs: Any) -> Any:
    """``module(*args, **kwargs)`` with its hooks run eagerly and ``forward`` (its compiled
    ``forward`` frame) called in between: what a frame-evaluation hook gives a module whose
    backward hooks no trace models (torch.compile compiles the ``forward`` frame that
    ``Module._call_impl`` calls). The compiled forward is set on the instance for the call, as
    :class:`DDPOptimizedModule` does; a module with a ``forward`` of its own runs as it is."""
    if "forward" in module.__dict__:
        return module._call_impl(*args, **kwargs)
    module.__dict__["forward"] = types.MethodType(forward, module)
    try:
        return module._call_impl(*args, **kwargs)
    finally:
        del module.__dict__["forward"]


def _plain_call(module: torch.nn.Module) -> bool:
    """Whether calling ``module`` is ``Module.__call__``, not a class's own (or a disabled) one."""
    cls = type(module)
    return cls.__call__ is torch.nn.Module.__call__ and \
        cls._call_impl is torch.nn.Module._call_impl


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
    run_eagerly = eager_run(fn.__code__, signature)[0]
    namespace: dict[str, Any] = {
        "__gl_state": state,
        "__gl_opts": options,
        "__gl_off": _disabled_threads,
        "__gl_ts": stance.HIT_PATH,
        FN_NAME: fn,
        GLOBALS_NAME: fn.__globals__,
        "__gl_miss": functools.partial(_on_miss, fn, state, options, run_eagerly),
        "__gl_cfg": live_values(config),
        "__gl_verify": functools.partial(verify.run, fn, state,
                                         reference=_reference(run_eagerly)),
        "__gl_trim": trim_traceback,
    }
    params = ", ".join(signature.params)
    source = (
        f"def {_safe_name(fn)}({_parameter_list(fn, namespace)}):\n"
        f"    try:\n"
        f"        __gl_e = __gl_state.head\n"
        f"        if __gl_e is not None and __gl_e.options is __gl_opts and not __gl_off[0] \\\n"
        f"                and __gl_ts[0]['_stance'] is __gl_ts[1]:\n"
        f"            try:\n"
        f"                __gl_hit = __gl_e.check({params})\n"
        f"            except Exception:\n"
        f"                __gl_hit = False\n"
        f"            if __gl_hit:\n"
        f"                __gl_state.stats.hits += 1\n"
        f"                if __gl_cfg['verify']:\n"
        f"                    return __gl_verify(__gl_e, ({params},))\n"
        f"                return __gl_e.run({params})\n"
        f"        return __gl_miss(({params},))\n"
        f"    except BaseException as __gl_x:\n"
        # 3.12 leaves no Python frame to spare at the recursion limit: the call of __gl_trim
        # would chain a second RecursionError to the user's (a wrapper above trims instead).
        f"        try:\n"
        f"            __gl_trim(__gl_x)\n"
        f"        except RecursionError:\n"
        f"            pass\n"
        f"        raise\n"  # bare: re-raising adds no entry for this frame (see trim_traceback)
    )
    code = builtins.compile(source, f"{WRAPPER_FILE_PREFIX}{fn.__qualname__}>", "exec")
    exec(code, namespace)  # noqa: S102
    wrapper = functools.wraps(fn)(namespace[_safe_name(fn)])
    for attr in (NESTED_ATTR, RESUME_ATTR, eager_callees.ROUTES_ATTR):
        wrapper.__dict__.pop(attr, None)  # copied from fn.__dict__ by wraps; they belong to fn
    setattr(wrapper, WRAPPED_ATTR, fn)
    wrapper._graphlift_source = source
    return wrapper



# What generated code calls to compile user functions it runs eagerly, and resume functions:
# passed down to code generation, which sits below this layer.
def route_callee(fn: Any, options: CompileOptions) -> Any:
    """What an eager frame compiled with ``options`` calls for ``fn`` (see eager_callees)."""
    if not config.compile_eager_callees:
        return fn
    return eager_callees.router(options, WRAPPERS)(fn)


WRAPPERS = FrameWrappers(function=compiled_wrapper, module_call=compiled_module_call,
                         code=make_wrapper, route=route_callee)


WRAPPER_FILE_PREFIX = "<graphlift wrapper of "
# graphlift's own frames, dropped from the tracebacks of errors that leave a wrapper: the
# package's files and the generated interception code (wrappers, eager runs). Run functions
# stay: they carry the user's file and line (see convert_frame). torch hides its own frames the
# same way; ``config.verbose`` keeps every frame.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_GENERATED_PLUMBING = (WRAPPER_FILE_PREFIX, EAGER_RUN_FILE)


def _is_plumbing(tb: types.TracebackType) -> bool:
    filename = tb.tb_frame.f_code.co_filename
    return filename.startswith(_PACKAGE_DIR) or filename.startswith(_GENERATED_PLUMBING)


def trim_traceback(error: BaseException) -> None:
    """Drop graphlift's frames from ``error``'s traceback, this wrapper's own frame included.

    Each wrapper calls this in its handler and then re-raises with a bare ``raise``, which adds
    no traceback entry: the caller's entry then points straight at the user's frames (or the
    run function, which reads as the user's line), so a compiled function's traceback reads
    like eager's and a compiled recursion folds like eager's. The frames below the last
    wrapper that trimmed are clean already: the walk stops there (``_GL_TRIMMED``), so a deep
    recursion costs one step per level. Chained exceptions (a backend's own error under
    ``BackendCompilerFailed``) are trimmed too. graphlift's own failures (``InternalError``,
    a ``TranslationError`` under ``raise_internal_errors``) keep every frame: their traceback is
    the bug report. So does everything under ``config.verbose``.
    """
    try:
        verbose = config.verbose
    except RecursionError:  # 3.12: no frame to spare for config's __getattr__; trim anyway
        verbose = False
    if verbose or _is_graphlifts_own_bug(error):
        return
    error.__traceback__ = _trimmed(error.__traceback__, getattr(error, _GL_TRIMMED, None))
    _RERAISED_TRACEBACK[sys.version_info[:2]](error)
    try:
        setattr(error, _GL_TRIMMED, error.__traceback__)
    except AttributeError:  # an exception class with __slots__: walk it all next time
        pass
    seen = {id(error)}
    chained = error.__cause__ or error.__context__
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        chained.__traceback__ = _trimmed(chained.__traceback__, None)
        chained = chained.__cause__ or chained.__context__


def _handled_traceback_310(error: BaseException) -> None:
    """3.10's bare ``raise`` re-raises the traceback its except block caught (the thread's
    handled-exception triple), not ``error.__traceback__``: the trimmed one goes there too."""
    triple = (type(error), error, error.__traceback__)
    for item in triple:  # PyErr_SetExcInfo steals the three references
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(item))
    ctypes.pythonapi.PyErr_SetExcInfo(*map(ctypes.py_object, triple))


# What a bare ``raise`` re-raises besides the exception itself, per version (see trim_traceback).
_RERAISED_TRACEBACK: dict[tuple[int, int], Callable[[BaseException], None]] = {
    (3, 10): _handled_traceback_310,
    **dict.fromkeys(((3, 11), (3, 12), (3, 13)), lambda error: None),  # the exception's own
}


def _is_graphlifts_own_bug(error: BaseException) -> bool:
    return isinstance(error, InternalError) or (
        isinstance(error, GraphliftError) and not isinstance(error, USER_FACING_ERRORS))


_GL_TRIMMED = "_graphlift_trimmed_tb"  # on an error: the head of its already-clean traceback


def _trimmed(tb: types.TracebackType | None,
             clean: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without graphlift's entries, walking down to ``clean`` (already trimmed)."""
    while tb is not None and tb is not clean and _is_plumbing(tb):
        tb = tb.tb_next
    head = keep = tb
    while keep is not None and keep is not clean:
        nxt = keep.tb_next
        while nxt is not None and nxt is not clean and _is_plumbing(nxt):
            nxt = nxt.tb_next
        keep.tb_next = nxt
        keep = nxt
    return head


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
# The builtins as graphlift found them. graphlift's own Python code (guards, the cache, the
# translator) calls builtins by name, so while a program has replaced one (CPython's
# test_functools wraps builtins.len in an lru_cache for a while) a miss runs the frame eagerly
# instead of compiling or trying other entries with the program's len.
# Only the builtin functions and classes: ``_`` (the REPL's last value), ``help`` or ``exit``
# may change without graphlift calling them.
_BUILTIN_NAMES, _BUILTIN_VALUES = zip(*(
    (name, value) for name, value in vars(builtins).items()
    if not name.startswith("_") and isinstance(value, type | types.BuiltinFunctionType)))


def builtins_replaced() -> bool:
    """Whether the program has rebound (or deleted) a builtin (``builtins.len = ...``)."""
    return any(map(operator.is_not, map(vars(builtins).get, _BUILTIN_NAMES), _BUILTIN_VALUES))


def _on_miss(fn: types.FunctionType, state: ExtraState, options: CompileOptions,
             run_eagerly: Callable, args: tuple) -> Any:
    """The head entry's guards failed: try the others, then compile or fall back."""
    first = 1  # the head failed on the fast path
    if _disabled_threads[0]:  # some thread is inside graphlift.disable(recursive=True)
        if _disabled.depth:
            return run_eagerly(*args)  # this one: nothing it calls is compiled
        first = 0  # another one: the fast path did not try the head
    if not stance.fast_path_open():
        first = 0  # a stance was set: the fast path did not try the head either
    now = stance.current()
    if now.force_eager or modes_active():  # no entry runs under a mode (see modes_active)
        return run_eagerly(*args)
    if builtins_replaced():
        if logs.enabled("recompiles"):
            logs.emit("recompiles", f"{fn.__qualname__} runs eagerly: the program has replaced "
                      "a builtin (graphlift's guards and compiler call builtins by name)")
        return run_eagerly(*args)
    options = now.options_for(options)  # force_backend
    entry = _lookup(state, options, args, first)
    if entry is not None and config.verify:  # a hit further down the chain
        return verify.run(fn, state, entry, args, _reference(run_eagerly))
    if entry is None:
        with state.lock:
            # Another thread may have compiled, or hit a limit, while this one waited.
            entry = _lookup(state, options, args, 0) or \
                _compile_entry(fn, state, options, args, now)
    if entry is None:
        return run_eagerly(*args)
    return entry.run(*args)


def _reference(run_eagerly: Callable) -> Callable:
    """What verify mode compares a hit with: the frame run eagerly, every compiled function it
    calls running its original code too (as inside ``graphlift.disable``)."""
    def reference(*args: Any) -> Any:
        enter_disabled()
        try:
            return run_eagerly(*args)
        finally:
            exit_disabled()

    return reference


def _lookup(state: ExtraState, options: CompileOptions, args: tuple,
            first: int) -> CacheEntry | None:
    """The first entry from ``first`` on whose guards pass (made the head), or None."""
    start = time.perf_counter()
    entries = state.entries  # replaced, never changed in place: safe to read unlocked
    found = next((entry for entry in entries[first:]
                  if entry.options is options and _passes(entry, args)), None)
    state.stats.guard_seconds += time.perf_counter() - start
    if found is not None:
        state.stats.hits += 1
        if found is not state.head:
            with state.lock:
                state.move_to_front(found)
    return found


def _compile_entry(fn: types.FunctionType, state: ExtraState, options: CompileOptions,
                   args: tuple, now: stance.Stance) -> CacheEntry | None:
    """A new head entry for this call, or None where a limit or the stance ``now`` says to run
    eagerly."""
    state.stats.misses += 1
    if state.run_only:
        return None
    loaded = _load_saved(fn, state, options, args)
    if loaded is not None:
        return loaded
    entries = state.entries
    reasons = _failure_reasons(state, options, args)
    if entries and not (_may_recompile(fn, state, options, reasons, args)
                        and _under_accumulated_limit(fn, state, options, reasons)):
        return None
    options = stance.options_to_compile(now, fn, state, options, args, reasons)
    if options is None:
        return None
    try:
        with progress.compiling(f"{fn.__qualname__} ({state.location})") as timing:
            entry = convert_frame(fn, state, args, options, WRAPPERS)
    except FirstCallRunsEagerly as why:  # this call makes the state its trace read
        if logs.enabled("recompiles"):
            logs.emit("recompiles", f"{fn.__qualname__} ({state.location}) runs eagerly this "
                      f"call, compiled from the next: {why}")
        return None
    except Exception as error:
        if isinstance(error, RecursionError) and not options.fullgraph:
            # Compiling takes more stack than the call had left (a deep recursion of the
            # user's): this call runs eagerly, as it would without graphlift; a later one
            # compiles.
            return None
        events.on_compile_failed(fn, state, error, reasons, timing)
        raise
    events.on_compile(fn, state, entry, reasons, timing)
    if entry.internal_error is not None:
        _report_internal_error(fn, state, entry)
    state.push_front(entry)
    persist.forget_with_modules(state, entry)
    persist.save(fn, state, entry)
    return entry


def _load_saved(fn: types.FunctionType, state: ExtraState, options: CompileOptions,
                args: tuple) -> CacheEntry | None:
    """On the first miss of these options in this process, the entries saved by an earlier one
    (``config.cache_dir``) join the chain; the first whose guards pass serves this call."""
    loaded = persist.load(fn, state, options)
    for entry in reversed(loaded):
        state.push_front(entry)
    state.stats.loaded += len(loaded)
    found = next((entry for entry in loaded if _passes(entry, args)), None)
    if found is not None:
        state.move_to_front(found)
    return found


REPORT_HINT = ("This is a bug in graphlift, not in your code: please report it with the "
               "traceback above and the function it names. Set "
               "graphlift.config.raise_internal_errors = True to raise it instead.")


def _report_internal_error(fn: types.FunctionType, state: ExtraState,
                           entry: CacheEntry) -> None:
    """graphlift failed compiling ``fn``, which runs eagerly: record it, warn once per code
    object (the traceback, and how to report it)."""
    events.on_internal_error(fn, state, entry.compile_id, entry.internal_error)
    if state.stats.internal_errors == 1:
        logs.warn(f"graphlift failed internally while compiling {fn.__qualname__!r} "
                  f"({state.location}); it runs eagerly instead.\n"
                  f"{entry.internal_error}{REPORT_HINT}")


def _entries_counted(fn: types.FunctionType, state: ExtraState, args: tuple) -> int:
    """Entries that count toward ``recompile_limit`` for this call.

    As in torch.compile, the limit counts per module instance: an entry that pinned a different
    module at one of the frame's arguments (another transformer block running the same
    ``forward``) does not count, nor one made for a module argument of another structure.
    """
    params = FrameSignature.of(fn.__code__).params
    count = 0
    for entry in state.entries:
        guards = entry.compiled_guards
        pinned = [(params.index(source.local_name), ref) for source, ref in guards.module_roots
                  if isinstance(source, LocalSource) and source.local_name in params]
        shaped = [(params.index(source.local_name), structure, sid)
                  for source, structure, sid in guards.structure_roots
                  if isinstance(source, LocalSource) and source.local_name in params]
        if all(args[index] is ref() for index, ref in pinned) and \
                all(_same_structure(args[index], structure, sid)
                    for index, structure, sid in shaped):
            count += 1
    return count


def _same_structure(module: Any, structure: Callable[[Any], int], sid: int) -> bool:
    """Whether an argument has the structure an entry was compiled for (an entry made for
    blocks of another width does not count toward this block's limit)."""
    try:
        return structure(module) == sid
    except Exception:  # not a module any more
        return False


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
                   reasons: list[str], args: tuple) -> bool:
    """Log the recompile, or refuse it: error_on_recompile raises, the limit falls back."""
    if config.error_on_recompile:
        raise RecompileError(f"Recompiling function {fn.__name__} in {state.location} "
                             f"(error_on_recompile=True)\n" + _reason_lines(reasons))
    limit = options.recompile_limit or config.recompile_limit
    if _entries_counted(fn, state, args) >= limit:
        _hit_limit(fn, state, options, "recompile_limit", limit, reasons)
        return False
    if logs.enabled("recompiles"):
        logs.emit("recompiles", f"Recompiling function {fn.__name__} in {state.location}\n"
                  f"    triggered by the following guard failure(s):\n{_reason_lines(reasons)}"
                  f"{_dynamic_lines(fn, state, options, args)}")
    return True


def _dynamic_lines(fn: types.FunctionType, state: ExtraState, options: CompileOptions,
                   args: tuple) -> str:
    """The sizes and ints that changed since the last compile: automatic dynamic takes them."""
    if options.dynamic is not None:
        return ""  # dynamic=False keeps them static; under dynamic=True they already are
    changes = state.shape_memory.changes(FrameSignature.of(fn.__code__).params, args)
    if not changes:
        return ""
    return "\n    dynamic from now on (automatic dynamic shapes):\n" + _reason_lines(changes)


def _under_accumulated_limit(fn: types.FunctionType, state: ExtraState,
                             options: CompileOptions, reasons: list[str]) -> bool:
    """Whether the process may recompile once more: first compiles never count, so that a
    long-running process keeps compiling new functions; a crowd of recompiling ones is stopped."""
    limit = config.accumulated_recompile_limit
    if cache.accumulated_recompiles() < limit:
        return True
    _hit_limit(fn, state, options, "accumulated_recompile_limit", limit, reasons)
    return False


def _reason_lines(reasons: list[str]) -> str:
    return "\n".join(f"    - {reason}" for reason in reasons)


LIKELY_CAUSES = """Likely causes, each with its fix:
  - a Python bool or str that varies between calls is baked into the graph as a constant
    (so is a float under aot_eager or inductor): pass it as a tensor. (A varying int or
    float becomes dynamic on its own.)
  - a size or int that varies but is specialized while tracing (a branch on it, range(n), a
    list index; the guard names it): remove that use, or pad or bucket the sizes.
  - sizes that vary under compile(dynamic=False), or sizes 0 and 1 (always specialized): drop
    dynamic=False, or pad to at least 2.
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
        logs.warn(message)


# -- public queries ----------------------------------------------------------------------------
def _code_of(fn: Callable) -> types.CodeType:
    if isinstance(fn, torch.nn.Module) and fn.__dict__.get("_compiled_call_impl") is not None:
        fn = fn.__dict__["_compiled_call_impl"]  # module.compile(): its compiled calls
    if isinstance(fn, types.MethodType) and isinstance(fn.__self__, OptimizedModule):
        fn = fn.__self__  # what compiling a module's __call__ or _call_impl gives
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
    stance.reset()
    eager_callees.reset()
