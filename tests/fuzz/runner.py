"""Run one program eagerly and compiled, call by call, and name the first difference.

Each side gets its own copy of the program's module (so globals and class attributes are
compared after every call) and its own copy of each call's arguments, built from the same seed.
A call's outcome is its result or exception (with its ``__cause__`` and ``__context__``), what it
printed, its arguments afterwards and the module's globals afterwards. The first call that
differs gives the program's :class:`Difference`, in this order of severity: an internal
graphlift error, a wrong exception, a wrong value, a wrong print, a wrong side effect, a second
call that compiled again although it repeated the first on the same state.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import linecache
import logging
import os
import re
import signal
import sys
import time
import traceback
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import torch
import torch._higher_order_ops.utils as hop_utils
import torch.utils._pytree as pytree

import graphlift
from graphlift import cache
from graphlift.testing import CompileCounter

from .compare import differences, program_state
from .generator import Program

# Difference classes, most severe first, with the report's words for each.
KINDS = {
    "internal": "internal graphlift error",
    "exception": "wrong exception",
    "value": "wrong value",
    "print": "wrong print output",
    "side_effect": "wrong side effect (arguments or globals)",
    "recompile": "an identical second call compiled again",
    "timeout": "timeout (eager finished)",
}

GRAPHLIFT_DIR = os.path.dirname(os.path.abspath(graphlift.__file__)) + os.sep


@dataclass
class Difference:
    """How compiled differed from eager at call ``call`` (an index into ``program.calls``)."""

    kind: str
    call: int
    detail: str
    signature: str  # what groups equal-looking differences in the report
    eager: str = "returned"  # or the type of eager's exception: minimizing keeps it


@dataclass
class Outcome:
    result: Any = None
    error: BaseException | None = None
    stdout: str = ""
    args: Any = None
    state: dict = field(default_factory=dict)


@dataclass
class RunResult:
    difference: Difference | None
    seconds: float
    eager_errors: int = 0  # calls where eager raised (the program meant to, or could not help it)
    calls: int = 0
    skipped: bool = False  # eager ran past the time limit
    hit_checked: bool = False  # the second call repeated the first on equal state: must hit
    stats: dict = field(default_factory=dict)


class ProgramTimeout(BaseException):
    """A program ran past its time (a BaseException: user code catching Exception keeps it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(signum, frame):
        raise ProgramTimeout(f"over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def quiet_torch_logs() -> Iterator[None]:
    """Fake tensors log each failed meta kernel with its traceback; the run records the error."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _python_meaning(wrapper, args: tuple, kwargs: dict | None = None):
    """What torch's eager ``torch.cond`` / ``while_loop`` compute, without the torch.compile
    call they make to compute it (the fuzzer never runs torch.compile in its process). As the
    operators' outputs, none is one of their inputs (a loop that runs no step gives copies),
    and a ``cond`` output requires grad where either branch's does: the operator runs both
    branches' autograd (``torch.where`` picks the taken branch's values exactly; the bodies the
    generator writes have no side effects)."""
    if wrapper.__name__ == "_cond_op_wrapper":
        pred, true_fn, false_fn, operands = args
        taken = pred.reshape(())
        out = pytree.tree_map(lambda a, b: torch.where(taken, a, b), true_fn(*operands),
                              false_fn(*operands))
        inputs = operands
    elif wrapper.__name__ == "_while_loop_op_wrapper":
        cond_fn, body_fn, carried, additional = args
        inputs = (*carried, *additional)
        while cond_fn(*carried, *additional):
            carried = tuple(body_fn(*carried, *additional))
        out = carried
    else:
        raise NotImplementedError(f"no Python meaning for {wrapper.__name__} in the fuzzer")
    given = {id(t) for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)}
    return pytree.tree_map_only(torch.Tensor, lambda t: t.clone() if id(t) in given else t, out)


@contextlib.contextmanager
def eager_hops() -> Iterator[None]:
    """torch's higher-order operators run eagerly (in eager runs and in frames graphlift runs
    eagerly) by their Python meaning: eagerly, torch compiles each call with torch.compile."""
    with mock.patch.object(hop_utils, "_hop_compile_and_call", _python_meaning):
        yield


def filename(program: Program, side: str) -> str:
    return f"/fuzz/prog_{program.seed}_{side}.py"


def load(program: Program, side: str) -> dict:
    """Exec the program's module for one side, registered in sys.modules (dataclasses looks
    its module up) and in linecache (tracebacks and graph-break messages show its lines)."""
    path = filename(program, side)
    linecache.cache[path] = (len(program.source), None, program.source.splitlines(True), path)
    module = types.ModuleType(f"fuzzprog_{program.seed}_{side}")
    module.__file__ = path
    sys.modules[module.__name__] = module
    exec(compile(program.source, path, "exec"), module.__dict__)  # noqa: S102
    return module.__dict__


def unload(program: Program) -> None:
    for side in ("eager", "compiled"):
        sys.modules.pop(f"fuzzprog_{program.seed}_{side}", None)
        linecache.cache.pop(filename(program, side), None)


def build_args(program: Program, variant: int, namespace: dict) -> tuple[tuple, dict]:
    scope: dict = {}
    exec(program.variants[variant], namespace, scope)  # noqa: S102
    return scope["args"], scope["kwargs"]


def ambient_mode(program: Program, variant: int,
                 namespace: dict) -> contextlib.AbstractContextManager:
    """The mode the program enters around the call of ``variant`` (a fresh instance of the
    side's own class), or a null context."""
    text = program.ambient[variant] if program.ambient else ""
    return eval(text, namespace) if text else contextlib.nullcontext()  # noqa: S307


def invoke(fn, args: tuple, kwargs: dict, namespace: dict,
           mode: contextlib.AbstractContextManager | None = None) -> Outcome:
    """Call ``fn`` with its printed output captured, inside ``mode`` where one is given (a
    TorchFunctionMode or TorchDispatchMode the caller enters around the call)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            with mode or contextlib.nullcontext():
                result, error = fn(*args, **kwargs), None
        except Exception as e:  # the user's exception (or graphlift's), compared with eager's
            result, error = None, e
    return Outcome(result, error, out.getvalue(), (args, kwargs), program_state(namespace))


def run_program(program: Program, timeout: float = 20.0) -> RunResult:
    """Eager vs compiled for every call of ``program``; stops at the first difference.

    A compiled call that runs past its time is tried once more with three times the time (a
    busy machine is not a hang) before it counts as a timeout.
    """
    result = _run_once(program, timeout)
    if result.difference and result.difference.kind == "timeout":
        result = _run_once(program, 3 * timeout)
    return result


def _run_once(program: Program, timeout: float) -> RunResult:
    start = time.perf_counter()
    graphlift.reset()
    result = RunResult(None, 0.0)
    try:
        with warnings.catch_warnings(), quiet_torch_logs(), eager_hops():
            warnings.simplefilter("ignore")
            _run_calls(program, result, timeout)
    finally:
        graphlift.reset()
        unload(program)
        result.seconds = time.perf_counter() - start
    return result


def _run_calls(program: Program, result: RunResult, timeout: float) -> None:
    eager_ns, compiled_ns = load(program, "eager"), load(program, "compiled")
    eager_fn = eager_ns[program.entry]
    backend = CompileCounter() if program.counter else "eager"
    compiled_fn = graphlift.compile(compiled_ns[program.entry], backend=backend)
    states = []  # eager's program state before each call (after building its arguments)
    for index, variant in enumerate(program.calls):
        result.calls += 1
        started = time.perf_counter()
        try:
            with time_limit(timeout):
                eager_args = build_args(program, variant, eager_ns)
                states.append(_snapshot(eager_ns))
                eager = invoke(eager_fn, *eager_args, eager_ns,
                               ambient_mode(program, variant, eager_ns))
        except ProgramTimeout:  # the program itself is too slow: nothing to compare
            result.skipped = True
            return
        budget = max(timeout, 20 * (time.perf_counter() - started))
        compiles = cache.accumulated_compiles()
        try:
            with time_limit(budget):
                compiled = invoke(compiled_fn, *build_args(program, variant, compiled_ns),
                                  compiled_ns, ambient_mode(program, variant, compiled_ns))
        except ProgramTimeout as e:
            result.difference = Difference("timeout", index, str(e), "timeout")
            return
        result.eager_errors += eager.error is not None
        found = compare(eager, compiled, filename(program, "compiled"))
        if not found and _repeats_first_call(program, index, states):
            result.hit_checked = True
            found = _cache_miss(cache.accumulated_compiles() - compiles)
        if found:
            outcome = type(eager.error).__name__ if eager.error else "returned"
            result.difference = dataclasses.replace(found, call=index, eager=outcome)
            break
    stats = graphlift.stats(compiled_fn)
    result.stats = {"graphs": stats.graphs, "graph_breaks": stats.graph_breaks,
                    "eager_frames": stats.eager_frames, "compiles": stats.compiles,
                    "internal_errors": stats.internal_errors}


def _snapshot(namespace: dict) -> dict | None:
    try:
        return copy.deepcopy(program_state(namespace))
    except Exception:  # state that cannot be copied: no cache-hit check for this program
        return None


def _repeats_first_call(program: Program, index: int, states: list) -> bool:
    """Whether call ``index`` repeats the first call on the same program state (then it must
    run from the cache: nothing a guard can read changed)."""
    return (index == 1 and program.calls[0] == program.calls[1]
            and states[0] is not None and states[1] is not None
            and not differences(states[0], states[1], "state"))


def _cache_miss(compiles: int) -> Difference | None:
    if compiles == 0:
        return None
    return Difference("recompile", 0, f"{compiles} compiles on the second call, which "
                      "repeated the first on the same program state", "recompile")


# -- comparing outcomes ----------------------------------------------------------------------
def compare(eager: Outcome, compiled: Outcome, user_file: str) -> Difference | None:
    """The most severe difference between two outcomes of one call, or None."""
    found = _compare_errors(eager.error, compiled.error, user_file)
    if found:
        return found
    if eager.error is None:
        problems = differences(eager.result, compiled.result)
        problems += _alias_differences(eager, compiled)
        if problems:
            return Difference("value", 0, "\n".join(problems), "value: " + _shape(problems[0]))
    if _printed(eager.stdout) != _printed(compiled.stdout):
        return Difference("print", 0, f"printed {compiled.stdout!r}\n    eager   {eager.stdout!r}",
                          "print")
    problems = differences(eager.args, compiled.args, "arguments")
    problems += differences(eager.state, compiled.state, "globals")
    if problems:
        return Difference("side_effect", 0, "\n".join(problems),
                          "side effect: " + _shape(problems[0]))
    return None


def _printed(text: str) -> str:
    """Printed output without object addresses (``<generator object ... at 0x7f...>``), which
    differ between any two runs."""
    return re.sub(r" at 0x[0-9a-f]+", " at 0x…", text)


def _compare_errors(e: BaseException | None, c: BaseException | None,
                    user_file: str) -> Difference | None:
    if c is not None and (e is None or type(e) is not type(c)):
        origin = graphlift_origin(c, user_file)
        if origin:
            detail = (f"{type(c).__name__}: {c}\n    at {origin}\n    eager: "
                      f"{_error_text(e) if e else 'returned normally'}\n" + _tail(c))
            return Difference("internal", 0, detail,
                              f"internal: {type(c).__name__}: {_shape(_first_line(c))}"
                              f" at {origin.split(' ')[0]}")
    if e is None and c is None:
        return None
    if e is None or c is None or type(e) is not type(c) or str(e) != str(c):
        detail = (f"compiled {_error_text(c) if c else 'returned normally'}\n"
                  f"    eager    {_error_text(e) if e else 'returned normally'}")
        sig = (f"exception: compiled {type(c).__name__ if c else 'no error'}, "
               f"eager {type(e).__name__ if e else 'no error'}")
        return Difference("exception", 0, detail, sig)
    if _chain(e) != _chain(c):
        return Difference("exception", 0, f"compiled chain {_chain(c)}\n    eager    chain "
                          f"{_chain(e)}", f"exception chain: {type(e).__name__}")
    return None


def _chain(error: BaseException, depth: int = 4) -> list[tuple]:
    """The exceptions chained to ``error`` (``from``: __cause__, implicit: __context__)."""
    links: list[tuple] = []
    while error is not None and len(links) < depth:
        cause, context = error.__cause__, error.__context__
        links.append((type(cause).__name__ if cause else None, _first_line(cause) if cause
                      else "", type(context).__name__ if context else None,
                      error.__suppress_context__))
        error = cause or context
    return links


def graphlift_origin(error: BaseException, user_file: str) -> str | None:
    """Where graphlift raised ``error``: its innermost frame in graphlift after the last frame of
    the user's program (None when the error is the program's own)."""
    frames = traceback.extract_tb(error.__traceback__)
    last_user = max((i for i, f in enumerate(frames) if f.filename == user_file), default=-1)
    inner = [f for f in frames[last_user + 1:] if _is_graphlift_file(f.filename)]
    if inner:
        frame = inner[-1]
        return f"{_relative(frame.filename)}:{frame.lineno} ({frame.name})"
    if type(error).__module__.startswith("graphlift"):
        return f"{type(error).__module__} (raised as {type(error).__name__})"
    return None


def _is_graphlift_file(path: str) -> bool:
    return path.startswith(GRAPHLIFT_DIR) or path.startswith("<graphlift")


def _relative(path: str) -> str:
    return "graphlift/" + path[len(GRAPHLIFT_DIR):] if path.startswith(GRAPHLIFT_DIR) else path


def _alias_differences(eager: Outcome, compiled: Outcome) -> list[str]:
    """A returned argument must be the caller's object itself, in both runs alike."""
    found = []
    for (path, e), (_, c) in zip(_returned(eager.result), _returned(compiled.result)):
        ea, ca = _argument_index(e, eager.args), _argument_index(c, compiled.args)
        if ea != ca:
            found.append(f"{path}: " + (f"is argument {ea} in eager" if ea is not None else
                                        "a new object in eager") + ", " +
                         (f"argument {ca} compiled" if ca is not None else
                          "a new object compiled"))
    return found


def _returned(value: Any) -> list[tuple[str, Any]]:
    items = [("result", value)]
    if type(value) in (tuple, list):
        items += [(f"result[{i}]", v) for i, v in enumerate(value)]
    elif type(value) is dict:
        items += [(f"result[{k!r}]", v) for k, v in value.items()]
    return [(p, v) for p, v in items if not isinstance(v, (int, float, str, bool, type(None)))]


def _argument_index(value: Any, args: tuple[tuple, dict]) -> str | None:
    positional, keywords = args
    for i, a in enumerate(positional):
        if a is value:
            return str(i)
    for k, a in keywords.items():
        if a is value:
            return k
    return None


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {_first_line(e)}"


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else ""


def _tail(e: BaseException, frames: int = 6) -> str:
    lines = traceback.format_tb(e.__traceback__)[-frames:]
    return "    " + "".join(lines).replace("\n", "\n    ").rstrip()


def _shape(text: str) -> str:
    """``text`` with its numbers and quoted names blurred, to group differences."""
    text = text.splitlines()[0] if text else ""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"\d+", "N", text)
    return text[:140]
