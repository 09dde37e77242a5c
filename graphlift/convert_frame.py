"""Frame conversion: one miss becomes one cache entry.

``convert_frame`` runs the translator over the function with the call's arguments, then turns the
result into a :class:`~graphlift.cache.CacheEntry`: the guards compiled into one function, the
graph handed to the backend, and the run function that calls it. A construct the translator cannot
follow gives an entry that runs the frame eagerly under the guards collected so far (running
eagerly is always correct; the guards only decide when graphlift tries again).
"""

from __future__ import annotations

import functools
import time
import traceback
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from graphlift import bytecode, compiler_collectives, eager_callees, logs, progress
from graphlift.backends import keeps_floats_dynamic, takes_subgraphs
from graphlift.cache import CacheEntry, ExtraState, VerifyPlan
from graphlift.config import config
from graphlift.dynamic_shapes import ShapePolicy
from graphlift.exc import (
    BackendCompilerFailed,
    ConstraintViolationError,
    FirstCallRunsEagerly,
    GraphliftError,
    InternalError,
    Unsupported,
)
from graphlift.graph_break import GraphBreak, report
from graphlift.guards import CompiledGuards, GuardBuilder
from graphlift.resume import CO_GENERATOR_LIKE, GradModeExit, resumable_break
from graphlift.side_effects import ErrorReplay
from graphlift.sources import FN_NAME, GLOBALS_NAME

if TYPE_CHECKING:
    from graphlift.codegen import ErrorPathCodegen, OutputCodegen
    from graphlift.output_graph import OutputGraph
    from graphlift.rebuild import FrameWrappers

# Code flags of functions whose call returns a suspended frame, and what that frame is called.
FRAME_OBJECT_KINDS = ((0x20, "generator"), (0x80, "coroutine"), (0x200, "async generator"))


@dataclass(frozen=True, eq=False)
class CompileOptions:
    """What ``graphlift.compile`` was asked for. Make them with :func:`compile_options`.

    Interned, so compared and hashed by identity: a backend need not be hashable (a dataclass
    instance is not), and the hit path compares with ``is``.
    """

    backend: str | Callable
    fullgraph: bool
    dynamic: bool | None
    recompile_limit: int | None = None  # this compile's own limit; None: config.recompile_limit

    def describe(self) -> str:
        backend = self.backend
        if not isinstance(backend, str):
            backend = getattr(backend, "__name__", None) or type(backend).__name__
        return f"backend={backend!r}, fullgraph={self.fullgraph}"


# One CompileOptions per distinct setting, so that the hit path compares options by identity.
# Keyed by the backend's id: an options object holds its backend, so no id is reused while the
# key is alive, and the entry goes when the last wrapper or cache entry using it does.
_interned_options: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def compile_options(backend: str | Callable, fullgraph: bool, dynamic: bool | None,
                    recompile_limit: int | None = None) -> CompileOptions:
    """The shared CompileOptions for these settings."""
    key = (backend if isinstance(backend, str) else id(backend), bool(fullgraph), dynamic,
           recompile_limit)
    options = _interned_options.get(key)
    if options is None:
        options = CompileOptions(backend, bool(fullgraph), dynamic, recompile_limit)
        _interned_options[key] = options
    return options


@dataclass(frozen=True)
class FrameSignature:
    """The parameters of the generated guard and run functions for one code object.

    The function object and its globals come first: guards and run functions reach closure cells
    and globals through them, never through references of their own. A reference from a cache
    entry to the globals would make a cycle through the code object's extra slot, which the
    garbage collector cannot see, so the code object would never be freed.
    """

    arg_names: tuple[str, ...]  # the frame's argument locals, in co_varnames order

    @property
    def params(self) -> tuple[str, ...]:
        return (FN_NAME, GLOBALS_NAME, *self.arg_names)

    @classmethod
    def of(cls, code: types.CodeType) -> FrameSignature:
        count = code.co_argcount + code.co_kwonlyargcount
        count += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
        return cls(code.co_varnames[:count])


def convert_frame(fn: types.FunctionType, state: ExtraState, args: tuple,
                  options: CompileOptions, wrappers: FrameWrappers) -> CacheEntry:
    """Translate ``fn`` for ``args`` (function, its globals, then the bound arguments).

    A first trace that meets something unsupported is retried once, stopping just before the
    offending instruction of the frame: the graph captured until there is compiled, the
    instruction runs eagerly and a resume function carries on (see :mod:`graphlift.resume`).
    Where the frame cannot be split there, the whole frame runs eagerly. ``wrappers`` are the
    interception layer's factories, for the generated code that calls user functions.
    """
    signature = FrameSignature.of(fn.__code__)
    compile_id = state.next_compile_id()
    state.stats.compiles += 1
    saved = GlobalState.capture()
    try:
        return _convert(fn, state, args, options, wrappers, signature, compile_id)
    except (*USER_FACING_ERRORS, RecursionError):  # the caller runs a too-deep frame eagerly
        raise
    except FirstCallRunsEagerly:  # the caller runs this call eagerly; nothing was compiled
        state.withdraw_compile_id()
        state.stats.compiles -= 1
        state.first_call_ran_eagerly = True
        raise
    except Exception as error:  # a bug of graphlift's: see _internal_error
        if not (options.fullgraph or config.raise_internal_errors):
            return _internal_error(fn, state, signature, compile_id, options, error)
        if isinstance(error, GraphliftError):
            raise
        raise InternalError(f"graphlift failed internally while compiling {fn.__qualname__} "
                            f"({state.location}): {type(error).__name__}: {error}") from error
    finally:
        saved.restore()  # tracing and backends must leave global state as they found it


def _convert(fn: types.FunctionType, state: ExtraState, args: tuple, options: CompileOptions,
             wrappers: FrameWrappers, signature: FrameSignature, compile_id: str) -> CacheEntry:
    if logs.enabled("bytecode"):
        logs.emit("bytecode", f"ORIGINAL BYTECODE {fn.__qualname__} {state.location}\n"
                  f"{bytecode.dump(fn.__code__)}")
    if fn.__code__.co_flags & CO_GENERATOR_LIKE:
        return _generator_entry(fn, state, signature, compile_id, options, wrappers)
    attempt = _Attempt(fn, state, args, options, wrappers, signature, compile_id)
    try:
        try:
            return attempt.compile(break_at=None)
        except _AgreedOtherwise:  # the ranks made more values dynamic: trace with them
            return attempt.compile(break_at=None)
    except Unsupported as error:
        if options.fullgraph:
            raise
        reason = resumable_break(fn.__code__, error)
        if reason is None:
            try:
                return attempt.compile(break_at=error.root_offset, error=error)
            except Unsupported as second:
                error, reason = second, getattr(second, "not_resumable",
                                                "a second break before the first one")
        outcome = f"the whole frame runs eagerly ({reason})"
        return _eager_entry(fn, state, signature, attempt.guards, compile_id, options, error,
                            outcome, wrappers)


def modes_active() -> bool:
    """Whether a TorchFunctionMode or TorchDispatchMode is active (the caller's, or an infra
    mode such as FakeTensorMode): such a call runs eagerly. A mode changes what every op does,
    and graphlift does not trace through one (torch.compile traces a TorchFunctionMode's
    ``__torch_function__``; it too runs eagerly under a TorchDispatchMode). Tracing and backend
    compilation under the caller's mode would also show graphlift's own ops to it. Every entry
    guards on both stacks being empty (GuardBuilder.global_state)."""
    return bool(torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack())


# graphlift's errors that are the user's to act on: they reach the user. Anything else raised
# while compiling is a bug of graphlift's, and the frame runs eagerly instead (_internal_error).
USER_FACING_ERRORS = (
    Unsupported,  # only under fullgraph=True, which asks for a graph or an error
    BackendCompilerFailed,  # the backend the user chose failed, as torch.compile reports it
    ConstraintViolationError,  # a mark_dynamic the code does not keep
)


@dataclass(frozen=True)
class GlobalState:
    """The global switches a compile could leave changed: grad mode, the default dtype, and
    autocast (on or off, and its dtype) per device type."""

    grad: bool
    default_dtype: torch.dtype
    autocast: tuple[tuple[str, bool, torch.dtype], ...]

    DEVICES = ("cpu", "cuda")

    @classmethod
    def capture(cls) -> GlobalState:
        return cls(torch.is_grad_enabled(), torch.get_default_dtype(),
                   tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))
                         for d in cls.DEVICES))

    def restore(self) -> None:
        torch._C._set_grad_enabled(self.grad)
        torch.set_default_dtype(self.default_dtype)
        for device, enabled, dtype in self.autocast:
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, dtype)


def _internal_error(fn: types.FunctionType, state: ExtraState, signature: FrameSignature,
                    compile_id: str, options: CompileOptions, error: Exception) -> CacheEntry:
    """graphlift failed while compiling: the frame runs eagerly from now on (an entry without
    guards, for these options), which is always correct. The entry keeps the traceback, which
    the interception layer reports (a warning, the recording); ``stats`` counts it."""
    state.stats.internal_errors += 1
    state.stats.eager_frames += 1
    run, run_source = eager_run(fn.__code__, signature)
    return CacheEntry(compile_id, options, GuardBuilder().compile(signature.params), run,
                      run_source, None, internal_error="".join(traceback.format_exception(error)))


class _AgreedOtherwise(Exception):
    """The first trace's automatic-dynamic decisions differ from what the ranks agreed."""


class _Attempt:
    """One trace of the frame, to the end or to a graph break, made into a cache entry."""

    def __init__(self, fn: types.FunctionType, state: ExtraState, args: tuple,
                 options: CompileOptions, wrappers: FrameWrappers, signature: FrameSignature,
                 compile_id: str) -> None:
        self.fn, self.state, self.args, self.options = fn, state, args, options
        self.wrappers = wrappers
        self.signature, self.compile_id = signature, compile_id
        self.guards = GuardBuilder()
        # config.enable_compiler_collectives: the first trace's sizes go to the other ranks
        # (once per compile, a trace that breaks too); dynamic=True or False decide alone.
        self.to_agree = options.dynamic is None and compiler_collectives.active()

    def _agree(self, policy: ShapePolicy) -> None:
        """Exchange the sizes and ints ``policy`` saw with the other ranks; raises
        _AgreedOtherwise when that makes one dynamic that this trace had static."""
        if not self.to_agree:
            return
        self.to_agree = False
        peers = compiler_collectives.exchange(f"{self.state.location}:{self.fn.__qualname__}",
                                              policy.seen.as_json())
        if self.state.shape_memory.agree(policy.seen, peers):
            raise _AgreedOtherwise

    def compile(self, break_at: int | None, error: Unsupported | None = None) -> CacheEntry:
        # Imported on the first compile, not with graphlift: the translator, every variable
        # tracker, code generation and sympy take longer to import than wrapping a function does.
        from graphlift.codegen import BreakTail, ErrorPathCodegen, OutputCodegen  # deferred: ^
        from graphlift.output_graph import OutputGraph  # deferred: ^
        from graphlift.shape_guards import install_shape_guards  # deferred: ^
        from graphlift.translator import InstructionTranslator  # deferred: ^

        fn, state, signature = self.fn, self.state, self.signature
        progress.phase("setup")
        options = self.options
        policy = ShapePolicy(state.shape_memory, options.dynamic,
                             keeps_floats_dynamic(options.backend))
        output = OutputGraph(policy,
                             capture_scalars=options.fullgraph or config.capture_scalar_outputs,
                             capture_dynamic_shapes=options.fullgraph or
                             config.capture_dynamic_output_shape_ops)
        output.takes_subgraphs = takes_subgraphs(options.backend)
        output.may_run_first_call_eagerly = not state.first_call_ran_eagerly
        self.guards = guards = GuardBuilder()
        guards.locate = output.guard_origin  # each guard names the user's line behind it
        codegen = OutputCodegen(self.wrappers)
        # A call run eagerly at a break reads its caller's module name from the run function's
        # globals (`type(name, bases, ns)` sets `__module__` from it): the user's, as in eager.
        codegen.namespace["__name__"] = self.fn.__globals__.get("__name__")
        start = time.perf_counter()
        grad_mode = torch.is_grad_enabled()
        progress.phase("translate")
        try:
            tracer = InstructionTranslator(fn, dict(zip(signature.arg_names, self.args[2:])),
                                           output, guards, break_at)
            result = tracer.run()
            output.side_effects.freeze()  # nodes that code generation adds are not the program's
            if tracer.break_state is None:
                value = result.reconstruct(codegen)
                # Read before the ledger writes back (it may be an old value), if there is one.
                tail = [f"return {codegen.hoist(value) if output.side_effects else value}"]
            else:
                tail = BreakTail(tracer, codegen, state, self.options).statements()
            replay = output.side_effects.replay(codegen)
            error_path = ErrorPathCodegen(codegen)
            error_writes = error_path.replay_on_error(output.side_effects)
        except Unsupported:
            self._agree(policy)  # before the retry that stops at the break
            raise
        finally:
            output.restore_global_state()
            torch._C._set_grad_enabled(grad_mode)  # tracing follows the frame's grad switches
            state.stats.translate_seconds += time.perf_counter() - start
        self._agree(policy)
        if error is not None:
            _record_break(fn, state, error)
        output.finish([tensor.node for tensor in codegen.outputs])
        grad_mode_after = output.only_grad_mode_switches()
        if grad_mode_after is not None:
            # Nothing but grad-mode switches (a resume function starting in a with block that
            # breaks at once): no graph for that, the run function sets the final mode itself.
            output.drop_all_nodes()
            setter = codegen.constant(torch._C._set_grad_enabled)
            tail = [f"{setter}({grad_mode_after})", *tail]
        has_graph = output.op_count > 0
        # Also without a graph: the trace folds values read from grad mode, autocast and the
        # default dtype (torch.is_grad_enabled(), (x * 2).requires_grad, torch.ones(1).dtype).
        guards.global_state()
        if has_graph:
            _guard_mutated_inputs(output, guards)
        _guard_mutated_objects(output, guards, tracer.builder.mutable_inputs())
        graph_module = graph_callable = None
        if has_graph:
            name = f"GraphModule_{self.compile_id.replace('/', '_')}"
            progress.phase("backend", self.options.backend)
            graph_module, graph_callable, seconds = output.compile(self.options.backend, name)
            state.stats.backend_seconds += seconds
            state.stats.graphs += 1
        progress.phase("guards")
        install_shape_guards(output, guards)  # after the backend, which may assume more
        compiled_guards = guards.compile(signature.params)
        body = [*codegen.statements, *replay, *tail]
        progress.phase("codegen")
        run, run_source = codegen.build(signature.params, body, graph_callable,
                                        [graph_input.source for graph_input in output.inputs],
                                        self._on_graph_error(output, codegen, error_path,
                                                             error_writes))
        # At the user's line of the break (or of the return): a traceback through the entry
        # shows that line where eager shows it, and a recursion's repeated lines fold.
        last = tracer.break_state.inst if tracer.break_state is not None else tracer.inst
        code = fn.__code__
        run.__code__ = bytecode.at_line(run.__code__, code.co_filename, code.co_name,
                                        (last.lineno if last else None) or code.co_firstlineno)
        _log_guards(fn, self.compile_id, compiled_guards)
        plan = VerifyPlan(side_effects=bool(output.side_effects),
                          graph_break=tracer.break_state is not None,
                          mutated=tuple(i.source for i in output.mutated_inputs))
        return CacheEntry(self.compile_id, self.options, compiled_guards, run, run_source,
                          graph_module, verify_plan=plan)


    def _on_graph_error(self, output: OutputGraph, codegen: OutputCodegen,
                        error_path: ErrorPathCodegen,
                        writes: ErrorReplay) -> tuple[list[str], list[str]]:
        """What the run function does when the graph raises: leave grad mode and autocast as
        the frame's with blocks would, and apply the writes eager made before the operation
        that raised. The mode to leave: the one from before the outermost grad-mode block the
        frame starts in (a resume function's GradModeExit), else the mode it was entered in."""
        entered = self.guards.initial_state[0]
        leave = next((a.previous for a in self.args[2:] if isinstance(a, GradModeExit)),
                     entered)
        grad_mode = leave if output.switches_grad_mode() or leave != entered else None
        return codegen.on_graph_error(grad_mode, output.autocast_devices(), writes,
                                      error_path.values, output.node_checkpoints(),
                                      id(output.graph))


def _record_break(fn: types.FunctionType, state: ExtraState, error: Unsupported) -> None:
    outcome = "the graph before it runs, the instruction runs eagerly, a resume function continues"
    record = GraphBreak.from_unsupported(error, outcome)
    state.breaks.append(record)
    state.stats.graph_breaks += 1
    report(record, fn.__qualname__)


# Beyond this many (mutated, other) pairs, one guard checks them all (an optimizer step mutates
# every parameter and state tensor: pairwise guards would grow with the square of their number).
MAX_ALIAS_PAIRS = 16


def _guard_mutated_inputs(output: OutputGraph, guards: GuardBuilder) -> None:
    """An input the graph mutates must not also be another input, or results would differ."""
    mutated = list(dict.fromkeys(graph_input.source for graph_input in output.mutated_inputs))
    others = [i.source for i in output.inputs if i.source not in set(mutated)]
    if len(mutated) * (len(mutated) + len(others)) > MAX_ALIAS_PAIRS:
        guards.none_aliased(mutated, others)
        return
    for source in mutated:
        for other in output.inputs:
            if other.source != source:
                guards.not_aliased(source, other.source)


def _guard_mutated_objects(output: OutputGraph, guards: GuardBuilder,
                           inputs: list) -> None:
    """A list, dict or object the frame mutates must stay distinct from the other inputs of its
    type: were two of them one object, the trace's separate trackers would both be stale."""
    mutated = [*output.side_effects.mutated_containers,
               *(store.owner for store in output.side_effects.stores if store.owner is not None)]
    for tracker in mutated:
        for other in inputs:
            if other is not tracker and other.source is not None and tracker.source is not None \
                    and other.python_type() is tracker.python_type():
                guards.not_aliased(tracker.source, other.source)


def _generator_entry(fn: types.FunctionType, state: ExtraState, signature: FrameSignature,
                     compile_id: str, options: CompileOptions,
                     wrappers: FrameWrappers) -> CacheEntry:
    """A generator or coroutine function runs its original code: calling it makes the real
    generator (coroutine) object, whose frame outlives the call (torch.compile skips these frames
    too). Generators called from a compiled frame are inlined lazily instead."""
    kind = next(name for flag, name in FRAME_OBJECT_KINDS if fn.__code__.co_flags & flag)
    error = Unsupported(f"{fn.__qualname__} is a {kind} function: its frame outlives the call "
                        f"that makes the {kind} object", location=state.location,
                        hints=("call it from a compiled function, which inlines the "
                               f"{kind}'s body" if kind == "generator" else
                               "compile the functions the coroutine calls",))
    if options.fullgraph:
        raise error
    return _eager_entry(fn, state, signature, GuardBuilder(), compile_id, options, error,
                        f"the {kind} function runs its original code", wrappers)


def _eager_entry(fn: types.FunctionType, state: ExtraState, signature: FrameSignature,
                 guards: GuardBuilder, compile_id: str, options: CompileOptions,
                 error: Unsupported, outcome: str, wrappers: FrameWrappers) -> CacheEntry:
    """An entry that runs the function's code, under the guards that led to the break: a
    routed copy whose callees run compiled (:mod:`graphlift.eager_callees`), unless
    ``config.compile_eager_callees`` is off."""
    if config.compile_eager_callees:
        outcome += "; the functions and modules it calls are compiled"
    record = GraphBreak.from_unsupported(error, outcome)
    state.breaks.append(record)
    state.stats.graph_breaks += 1
    state.stats.eager_frames += 1
    report(record, fn.__qualname__)
    guards.mode_stacks()
    compiled_guards = guards.compile(signature.params)
    callee = functools.partial(eager_callees.eager_function, options=options,
                               wrappers=wrappers) if config.compile_eager_callees else None
    run, run_source = eager_run(fn.__code__, signature, callee)
    return CacheEntry(compile_id, options, compiled_guards, run, run_source, None)


EAGER_RUN_FILE = "<graphlift eager run>"


def eager_run(code: types.CodeType, signature: FrameSignature,
              callee: Callable | None = None) -> tuple[Callable, str]:
    """``def __gl_run(__gl_fn, __gl_G, a, args, k, kw): return __gl_fn(a, *args, k=k, **kw)``.

    With ``callee``, ``__gl_eager(__gl_fn)`` is called instead: the function running a routed
    copy of the code (see :func:`graphlift.eager_callees.eager_function`).
    """
    names = signature.arg_names
    positional = list(names[:code.co_argcount])
    keyword_only = names[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    rest = names[code.co_argcount + code.co_kwonlyargcount:]
    call = positional + [f"{k}={k}" for k in keyword_only]
    if code.co_flags & 0x04:
        call.append(f"*{rest[0]}")
        rest = rest[1:]
    if code.co_flags & 0x08:
        call.append(f"**{rest[0]}")
    target = FN_NAME if callee is None else f"__gl_eager({FN_NAME})"
    source = (f"def __gl_run({', '.join(signature.params)}):\n"
              f"    return {target}({', '.join(call)})\n")
    namespace: dict[str, Any] = {} if callee is None else {"__gl_eager": callee}
    exec(compile(source, EAGER_RUN_FILE, "exec"), namespace)  # noqa: S102
    return namespace["__gl_run"], source


def _log_guards(fn: types.FunctionType, compile_id: str, guards: CompiledGuards) -> None:
    if logs.enabled("guards"):
        listing = "\n".join(f"  - {text}" for text in guards.shown_texts())
        fast = "" if guards.fast_source is None else (
            "on a hit it runs as (tensor metadata checked by torch's C++ TensorGuards):\n"
            f"{guards.fast_source}")
        logs.emit("guards", f"GUARDS {compile_id} {fn.__qualname__}:\n{listing}\n"
                  f"generated check function:\n{guards.source}{fast}")
