"""Verify mode: catch a cache entry that returns what eager would not (``config.verify = N``).

On every Nth cache hit of an entry that may be run twice, the entry runs on the call's
arguments (on clones of those its graph mutates in place) and then the original function runs
eagerly on the real arguments, every compiled function it calls running eagerly too. The two
outcomes are compared: the result (nested tuples, lists and dicts, tensors by value with the
tolerances of ``torch.testing.assert_close`` for their dtype, Python values by value), the
mutated arguments, grad mode, autocast and the default dtype, and the type of an exception
raised. The call returns eager's outcome, so a verified call is always right.

A difference is reported once per entry (a warning naming the difference, the guards, the graph
and a reproducer file; the recording for ``graphlift doctor``; ``stats(fn).verify_failures``),
and the entry is replaced by one that runs the function eagerly under the same guards: the calls
it served run eagerly from then on. Entries never verified (their ``skip_reason``):

- a ledger with side effects, or a graph break (code that runs eagerly after the graph: a
  print, a resume function): running the function a second time would repeat the effects;
- a graph that draws random numbers: its values depend on the generator's state, and a second
  run draws different ones (inductor draws them differently from eager too);
- a graph that mutates an input that is not an argument of the frame (a module's buffer, a
  global tensor): no clone can keep the eager run from mutating it a second time;
- entries that run the frame eagerly, and entries loaded from ``config.cache_dir``.

Off (``verify = 0``, the default), the hit path pays one dict subscript.
"""

from __future__ import annotations

import cmath
import inspect
import itertools
import math
import os
import pickle
import sys
import tempfile
import textwrap
import threading
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from graphlift import events, logs
from graphlift.cache import CacheEntry, ExtraState
from graphlift.config import config
from graphlift.convert_frame import FrameSignature, GlobalState, eager_run
from graphlift.sources import LocalSource

# Where reproducers are written (a test may point it elsewhere).
REPRO_DIR = os.path.join(tempfile.gettempdir(), "graphlift-verify")

# Random operations that torch does not tag ``nondeterministic_seeded`` at the ATen level
# (composites); every ATen op with the tag counts too (rand, randn, bernoulli, dropout...).
RANDOM_NAMES = frozenset({
    "gumbel_softmax",  # F.gumbel_softmax samples Gumbel noise
    "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout",  # F.* over feature_dropout
    "fractional_max_pool2d", "fractional_max_pool3d",  # random pooling regions
    "manual_seed", "seed", "set_rng_state",  # reseeding inside the graph
})

# Python floats and complex numbers are compared as float64 and complex128 tensors are.
_PY_RTOL = _PY_ATOL = 1e-7
_MAX_DEPTH = 16  # nesting of containers and objects compared before giving up (cycles)


class _Verifying(threading.local):
    depth = 0  # inside a verified call: nested hits are not verified again


_verifying = _Verifying()
_hits: weakref.WeakKeyDictionary[CacheEntry, int] = weakref.WeakKeyDictionary()
_skips: weakref.WeakKeyDictionary[CacheEntry, str | None] = weakref.WeakKeyDictionary()
_repro_ids = itertools.count()


@dataclass
class Outcome:
    """What one run of a call gave: its value, or the exception it raised."""

    value: Any = None
    error: BaseException | None = None


def run(fn: types.FunctionType, state: ExtraState, entry: CacheEntry, args: tuple,
        reference: Callable[..., Any]) -> Any:
    """A cache hit of ``entry`` under verify mode: run it, or verify it on every Nth hit.

    ``reference(*args)`` runs the original function eagerly (``args``: the function, its
    globals, then the bound arguments, as guards and run functions take them).
    """
    every = config.verify
    if not every or _verifying.depth or entry.verify_plan is None:
        return entry.run(*args)
    count = _hits[entry] = _hits.get(entry, 0) + 1
    if count % every or skip_reason(entry) is not None:
        return entry.run(*args)
    _verifying.depth += 1
    try:
        return _verified_call(fn, state, entry, args, reference)
    finally:
        _verifying.depth -= 1


def skip_reason(entry: CacheEntry) -> str | None:
    """Why verify mode never runs ``entry`` twice, or None when it may (decided once)."""
    if entry not in _skips:
        _skips[entry] = _skip_reason(entry)
    return _skips[entry]


def _skip_reason(entry: CacheEntry) -> str | None:
    plan = entry.verify_plan
    if plan is None:
        return "the entry runs the frame eagerly, or was loaded from config.cache_dir"
    if plan.side_effects:
        return "its side effects would be made twice"
    if plan.graph_break:
        return "code runs eagerly after its graph (a graph break)"
    if entry.graph is not None and draws_random(entry.graph):
        return "its graph draws random numbers"
    outside = [source.name() for source in plan.mutated if not isinstance(source, LocalSource)]
    if outside:
        return f"its graph mutates {outside[0]}, which is not an argument of the frame"
    return None


def draws_random(gm: torch.fx.GraphModule) -> bool:
    """Whether a node of ``gm`` (or of its subgraphs) draws random numbers."""
    return any(_is_random(node) for module in gm.modules()
               if isinstance(module, torch.fx.GraphModule) for node in module.graph.nodes)


def _is_random(node: torch.fx.Node) -> bool:
    if node.op not in ("call_function", "call_method"):
        return False
    target = node.target
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    if isinstance(target, torch._ops.OpOverload):
        return torch.Tag.nondeterministic_seeded in target.tags
    if name in RANDOM_NAMES:
        return True
    packet = getattr(torch.ops.aten, name, None) if name else None
    return isinstance(packet, torch._ops.OpOverloadPacket) and any(
        torch.Tag.nondeterministic_seeded in getattr(packet, overload).tags
        for overload in packet.overloads())


def _verified_call(fn: types.FunctionType, state: ExtraState, entry: CacheEntry, args: tuple,
                   reference: Callable[..., Any]) -> Any:
    """Run ``entry`` on clones of what it mutates, then eager on the real arguments; compare."""
    names = FrameSignature.of(fn.__code__).params
    mutated = [names.index(source.local_name) for source in entry.verify_plan.mutated
               if source.local_name in names]
    before = {index: clone(args[index]) for index in mutated}  # for the reproducer
    compiled_args = list(args)
    for index in mutated:
        compiled_args[index] = clone(args[index])
    start = GlobalState.capture()
    compiled = _outcome(entry.run, compiled_args)
    compiled_state = GlobalState.capture()
    start.restore()
    expected = _outcome(reference, args)
    state.stats.verified += 1
    found = outcome_difference(compiled, expected)
    for index in mutated:
        found = found or difference(compiled_args[index], args[index],
                                    f"argument {names[index]} after the call")
    if found is None and compiled_state != GlobalState.capture():
        found = (f"global state after the call: {_describe_state(compiled_state)} where eager "
                 f"leaves {_describe_state(GlobalState.capture())}")
    if found is not None:
        inputs = [before.get(index, value) for index, value in enumerate(args)]
        _report(fn, state, entry, found, inputs, compiled)
    if expected.error is not None:
        raise expected.error
    return expected.value


def _outcome(call: Callable[..., Any], args: list | tuple) -> Outcome:
    try:
        return Outcome(call(*args))
    except Exception as error:  # the user's (or graphlift's) error is compared, then re-raised
        return Outcome(error=error)


def _describe_state(state: GlobalState) -> str:
    return f"grad mode {state.grad}, default dtype {state.default_dtype}, autocast " + \
        ", ".join(f"{device} {on}" for device, on, _ in state.autocast)


def clone(value: Any) -> Any:
    """A copy of a tensor argument that an in-place operation can change: a leaf stays a leaf
    (an in-place op on a leaf that requires grad must fail as it does on the original)."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.is_leaf:
        return value.detach().clone().requires_grad_(value.requires_grad)
    return value.clone()


# -- comparing outcomes ------------------------------------------------------------------------
def outcome_difference(compiled: Outcome, expected: Outcome) -> str | None:
    """How the compiled outcome differs from eager's, in a sentence, or None."""
    if compiled.error is not None or expected.error is not None:
        if compiled.error is None:
            return f"eager raised {_error_text(expected.error)}; the compiled entry returned " \
                   f"{_short(compiled.value)}"
        if expected.error is None:
            return f"the compiled entry raised {_error_text(compiled.error)}; eager returned " \
                   f"{_short(expected.value)}"
        if type(compiled.error) is not type(expected.error):
            return f"the compiled entry raised {_error_text(compiled.error)}; eager raised " \
                   f"{_error_text(expected.error)}"
        return None
    return difference(compiled.value, expected.value)


def difference(actual: Any, expected: Any, path: str = "result", depth: int = 0) -> str | None:
    """Where ``actual`` (compiled) differs from ``expected`` (eager), or None.

    Tensors compare by type, shape, dtype, device, ``requires_grad`` and values (the dtype's
    ``torch.testing.assert_close`` tolerances, NaN equal to NaN); tuples, lists and dicts by
    type, length or keys (in order) and items; floats as float64 does; other values with ``==``;
    objects without ``__eq__`` of their own by type and attributes. Values that cannot be
    compared count as equal: verify mode reports only differences it is sure of.
    """
    if actual is expected or depth > _MAX_DEPTH:
        return None
    if type(actual) is not type(expected):
        return f"{path}: {type(actual).__name__} {_short(actual)} where eager gives " \
               f"{type(expected).__name__} {_short(expected)}"
    if isinstance(expected, torch.Tensor):
        return _tensor_difference(actual, expected, path)
    if isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            return f"{path}: {len(actual)} items where eager gives {len(expected)}"
        return next((found for i, (a, e) in enumerate(zip(actual, expected))
                     if (found := difference(a, e, f"{path}[{i}]", depth + 1))), None)
    if isinstance(expected, dict):
        if list(actual) != list(expected):
            return f"{path}: keys {list(actual)!r} where eager gives {list(expected)!r}"
        return next((found for key in expected
                     if (found := difference(actual[key], expected[key], f"{path}[{key!r}]",
                                             depth + 1))), None)
    if isinstance(expected, (float, complex)):
        if _close(actual, expected):
            return None
        return f"{path}: {actual!r} where eager gives {expected!r}"
    if type(expected).__eq__ is object.__eq__:
        # Compared by identity, so each run's own object differs: compare what it holds, where
        # it has a __dict__ (a generator, a lock, a C object made by each run: nothing to say).
        if not hasattr(expected, "__dict__"):
            return None
        return difference(vars(actual), vars(expected), f"{path} attributes", depth + 1)
    try:
        equal = actual == expected
    except Exception:  # not comparable: nothing to say
        return None
    if isinstance(equal, bool) and not equal:
        return f"{path}: {_short(actual)} where eager gives {_short(expected)}"
    return None


def _close(actual: float | complex, expected: float | complex) -> bool:
    both_nan = cmath.isnan(actual) and cmath.isnan(expected)
    return both_nan or abs(actual - expected) <= _PY_ATOL + _PY_RTOL * abs(expected) or \
        (math.isinf(abs(expected)) and actual == expected)


def _tensor_difference(actual: torch.Tensor, expected: torch.Tensor, path: str) -> str | None:
    for what in ("shape", "dtype", "device", "requires_grad"):
        a, e = getattr(actual, what), getattr(expected, what)
        if a != e:
            return f"{path}: {what} {a} where eager gives {e}"
    if expected.device.type == "meta":
        return None  # no values to compare
    try:
        if torch.equal(actual, expected):
            return None  # the common case, at a fraction of assert_close's cost
        torch.testing.assert_close(actual.detach(), expected.detach(), equal_nan=True,
                                   check_stride=False)
    except AssertionError as mismatch:
        detail = " ".join(str(mismatch).split())
        return f"{path}: values differ ({detail}); compiled {_short(actual)}, eager " \
               f"{_short(expected)}"
    except Exception:  # a layout or subclass assert_close cannot compare: nothing to say
        return None
    return None


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, torch.Tensor) else \
        repr(value.detach()).replace("\n", " ")
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


# -- reporting a difference --------------------------------------------------------------------
def _report(fn: types.FunctionType, state: ExtraState, entry: CacheEntry, found: str,
            inputs: list, compiled: Outcome) -> None:
    """Warn once for this entry, record the failure, and make the entry run eagerly."""
    state.stats.verify_failures += 1
    try:
        path = write_reproducer(fn, entry, found, inputs, compiled)
    except Exception as error:  # an unwritable folder: the warning still says what differs
        path = f"(not written: {type(error).__name__}: {error})"
    _run_eagerly_from_now_on(fn, state, entry)
    events.on_verify_failure(fn, state, entry, found, path)
    graph = entry.graph.code.strip() if entry.graph is not None else "(no graph)"
    guards = "\n".join(f"    - {text}" for text in entry.compiled_guards.shown_texts())
    logs.warn(f"graphlift verify: cache entry {entry.compile_id} of {fn.__qualname__!r} "
              f"({state.location}) returned a result that differs from eager; the calls it "
              f"served run eagerly from now on.\n"
              f"   difference: {found}\n"
              f"   reproducer: {path}\n"
              f"   guards:\n{guards}\n"
              f"   graph:\n{textwrap.indent(graph, '    ')}\n"
              f"This is a bug in graphlift: please report it with the reproducer.")


def _run_eagerly_from_now_on(fn: types.FunctionType, state: ExtraState,
                             entry: CacheEntry) -> None:
    """Replace ``entry`` by one that runs ``fn`` eagerly, serving exactly the calls it served."""
    run_fn, source = eager_run(fn.__code__, FrameSignature.of(fn.__code__))
    eager = CacheEntry(entry.compile_id, entry.options, entry.compiled_guards, run_fn, source,
                       None)
    eager.check = entry.check  # the same calls: even a check a test weakened on purpose
    with state.lock:
        state.replace(entry, eager)


def write_reproducer(fn: types.FunctionType, entry: CacheEntry, found: str, inputs: list,
                     compiled: Outcome) -> str:
    """Write ``<REPRO_DIR>/<name>.py`` and its data (``.pt``): run on its own, the script calls
    the function eagerly on the saved inputs, compares with what the entry returned, prints the
    difference and exits 1 (0 once they agree)."""
    os.makedirs(REPRO_DIR, exist_ok=True)
    stem = f"repro_{_identifier(fn.__name__)}_{entry.compile_id.replace('/', '_')}_" \
           f"{os.getpid()}_{next(_repro_ids)}"
    call_args, call_kwargs = _call_arguments(fn, inputs[2:])
    data = os.path.join(REPRO_DIR, stem + ".pt")
    torch.save({"args": call_args, "kwargs": call_kwargs,
                "compiled": _picklable(compiled)}, data)
    script = os.path.join(REPRO_DIR, stem + ".py")
    with open(script, "w", encoding="utf-8") as file:
        file.write(_REPRO_TEMPLATE.format(
            qualname=fn.__qualname__, compile_id=entry.compile_id,
            found=_comment(found),
            guards=_comment("\n".join(entry.compiled_guards.shown_texts())),
            graph=_comment(entry.graph.code.strip() if entry.graph is not None
                           else "(no graph)"),
            load=_function_loader(fn), data=os.path.basename(data)))
    return script


def _comment(text: str) -> str:
    return "\n".join(f"#     {line}".rstrip() for line in text.splitlines())


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _call_arguments(fn: types.FunctionType, values: list) -> tuple[list, dict]:
    """The frame's bound arguments (``co_varnames`` order) as a call's args and kwargs."""
    args: list = []
    kwargs: dict = {}
    for parameter, value in zip(inspect.signature(fn).parameters.values(), values):
        kind = parameter.kind
        if kind is parameter.VAR_POSITIONAL:
            args.extend(value)
        elif kind is parameter.VAR_KEYWORD:
            kwargs.update(value)
        elif kind is parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = value
        else:
            args.append(value)
    return args, kwargs


def _picklable(outcome: Outcome) -> Outcome:
    """The outcome, with an exception that cannot be pickled replaced by its text."""
    if outcome.error is None:
        return outcome
    try:
        pickle.dumps(outcome.error)
        return Outcome(error=outcome.error)
    except Exception:
        return Outcome(error=RuntimeError(_error_text(outcome.error)))


def _function_loader(fn: types.FunctionType) -> str:
    """Source lines that bind ``fn`` to the user's function: imported by module and qualname,
    or (``__main__``, a function made inside another) its source, without its globals."""
    module = sys.modules.get(fn.__module__)
    path = getattr(module, "__file__", None)
    if fn.__module__ != "__main__" and "<locals>" not in fn.__qualname__ and path:
        root = os.path.dirname(os.path.abspath(path))
        for _ in range(fn.__module__.count(".")):
            root = os.path.dirname(root)
        return (f"sys.path.insert(0, {root!r})\n"
                f"fn = importlib.import_module({fn.__module__!r})\n"
                f"for name in {fn.__qualname__!r}.split('.'):\n"
                f"    fn = getattr(fn, name)\n"
                f"fn = getattr(fn, '_graphlift_fn', fn)  # the original, not a compiled wrapper\n")
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        source = f"raise SystemExit('the source of {fn.__qualname__} is not available')\n"
    return (f"# {fn.__qualname__} cannot be imported: its source follows, without the globals\n"
            f"# and closure it had (add what it needs).\n{source}"
            f"fn = {fn.__name__}\nfn = getattr(fn, '_graphlift_fn', fn)\n")


_REPRO_TEMPLATE = '''# graphlift verify mode: cache entry {compile_id} of {qualname} returned a
# result that differs from eager. Run this file: it calls the function eagerly on the saved
# inputs, compares with what the entry returned, prints the difference and exits 1.
#
# Difference:
{found}
#
# Guards the entry was served under:
{guards}
#
# Graph:
{graph}
import importlib
import os
import sys

import torch

from graphlift.verify import Outcome, outcome_difference

{load}
here = os.path.dirname(os.path.abspath(__file__))
data = torch.load(os.path.join(here, {data!r}), weights_only=False)
try:
    expected = Outcome(fn(*data["args"], **data["kwargs"]))
except Exception as error:
    expected = Outcome(error=error)
found = outcome_difference(data["compiled"], expected)
if found is not None:
    print("graphlift's compiled result differs from eager:", found)
    sys.exit(1)
print("eager now agrees with what the compiled entry returned")
'''


# -- test hooks --------------------------------------------------------------------------------
def drop_guard(entry: CacheEntry, text: str) -> None:
    """For tests of verify mode: serve ``entry`` without its guard ``text`` (its string in
    ``entry.guards``), making a deliberately wrong entry."""
    guards = entry.compiled_guards
    index = guards.texts().index(text)
    kept = [check for i, check in enumerate(guards._per_guard_checks()) if i != index]
    entry.check = lambda *args: all(check(*args) for check in kept)
