"""The differential harness: run a corpus function eagerly and compiled, and compare everything.

A :class:`Case` names a small function and how to make its arguments. :func:`run_case` runs it
eagerly and under ``graphlift.compile(fullgraph=True)`` twice, with fresh inputs of the same
shapes each time (call ``i`` seeds torch with ``i`` before making the arguments, so eager and
compiled see equal values, and the two calls see different ones). It checks equal results (values,
types, nested containers), equal side effects on the arguments, equal exceptions, the number of
graphs captured, and that the second call did not recompile. The bytecode is checked for the
opcodes a case claims to exercise.

Cases are usually written with :func:`case`, whose argument templates are deep-copied on every
call; ``R(2, 3)`` in a template becomes a fresh ``torch.randn(2, 3)``.
"""

from __future__ import annotations

import copy
import dataclasses
import dis
import math
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch

import graphlift
from graphlift import bytecode
from graphlift.testing import CompileCounter

Args = tuple[tuple, dict]


@dataclass(frozen=True)
class Case:
    """One corpus function and how to call it.

    ``make_args`` returns fresh ``(args, kwargs)`` on every call. ``graphs`` is the number of graphs
    torch.compile captures for ``fn`` (normally 1). ``opcodes`` must appear in ``fn``'s bytecode,
    nested code objects included. ``fallback`` (a reason) marks a construct that is expected to
    fall back: fullgraph must raise ``graphlift.Unsupported`` and the eager fallback must agree.
    """

    name: str
    fn: Callable
    make_args: Callable[[], Args]
    graphs: int = 1
    opcodes: tuple[str, ...] = ()
    fallback: str | None = None
    # Why graphlift compiles anew on the second call where torch.compile does not (a known gap,
    # checked as such: two compiles, each with the expected graphs).
    recompiles: str | None = None


@dataclass(frozen=True)
class R:
    """A template slot that becomes ``torch.randn(*shape)`` (or randint for integer dtypes)."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    requires_grad: bool = False

    def __init__(self, *shape: int, dtype: torch.dtype = torch.float32,
                 requires_grad: bool = False) -> None:
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "requires_grad", requires_grad)

    def make(self) -> torch.Tensor:
        if self.dtype.is_floating_point:
            value = torch.randn(*self.shape, dtype=self.dtype)
        elif self.dtype is torch.bool:
            value = torch.randn(*self.shape) > 0
        else:
            value = torch.randint(-5, 6, self.shape, dtype=self.dtype)
        return value.requires_grad_(self.requires_grad)


def fresh(template: Any) -> Any:
    """A new copy of ``template`` with every ``R`` slot replaced by a new random tensor."""
    if isinstance(template, R):
        return template.make()
    if type(template) in (list, tuple):
        return type(template)(fresh(t) for t in template)
    if isinstance(template, tuple) and hasattr(template, "_fields"):  # a namedtuple
        return type(template)(*(fresh(t) for t in template))
    if type(template) is dict:
        return {k: fresh(v) for k, v in template.items()}
    return copy.deepcopy(template)


def case(fn: Callable, *args: Any, graphs: int = 1, opcodes: tuple[str, ...] | list[str] = (),
         fallback: str | None = None, name: str | None = None, recompiles: str | None = None,
         **kwargs: Any) -> Case:
    """A :class:`Case` whose arguments are made from the templates ``args`` and ``kwargs``."""
    return Case(name or fn.__name__, fn, lambda: (fresh(args), fresh(kwargs)), graphs,
                tuple(opcodes), fallback, recompiles)


def case_ids(cases: list[Case]) -> list[str]:
    """Test ids; names must be unique within a file."""
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"duplicate case names: {duplicates}"
    return names


# -- comparing ---------------------------------------------------------------------------------
def assert_same(eager: Any, compiled: Any, path: str = "result") -> None:
    """Equal values, equal types, recursively through containers and plain objects."""
    assert type(eager) is type(compiled), \
        f"{path}: type {type(compiled).__name__}, eager gives {type(eager).__name__}"
    if isinstance(eager, torch.Tensor):
        torch.testing.assert_close(compiled, eager, equal_nan=True, msg=lambda m: f"{path}: {m}")
        assert compiled.requires_grad == eager.requires_grad, f"{path}: requires_grad differs"
    elif isinstance(eager, (list, tuple)):
        assert len(compiled) == len(eager), f"{path}: {len(compiled)} items, eager {len(eager)}"
        for i, (e, c) in enumerate(zip(eager, compiled)):
            assert_same(e, c, f"{path}[{i}]")
    elif isinstance(eager, dict):
        assert list(compiled) == list(eager), f"{path}: keys {list(compiled)}, eager {list(eager)}"
        for key in eager:
            assert_same(eager[key], compiled[key], f"{path}[{key!r}]")
    elif isinstance(eager, float) and math.isnan(eager):
        assert math.isnan(compiled), f"{path}: {compiled!r}, eager nan"
    elif dataclasses.is_dataclass(eager) or _is_plain_object(eager):
        assert_same(vars(eager), vars(compiled), f"{path}.__dict__")
    else:
        assert compiled == eager, f"{path}: {compiled!r}, eager gives {eager!r}"


def _is_plain_object(value: Any) -> bool:
    """An instance of a user class (compared by its attributes, not by identity)."""
    return (hasattr(value, "__dict__") and not isinstance(value, (type, types.FunctionType,
                                                                  types.ModuleType))
            and type(value).__eq__ is object.__eq__)


@dataclass
class Outcome:
    """What one call did: its result or exception, and its arguments afterwards."""

    result: Any = None
    error: BaseException | None = None
    args: Args = ((), {})


def call(fn: Callable, args: Args) -> Outcome:
    """Call ``fn``; a user exception is recorded, graphlift's own errors propagate."""
    positional, keywords = args
    try:
        result = fn(*positional, **keywords)
    except graphlift.GraphliftError:
        raise
    except Exception as error:  # the user's exception, compared with eager's
        return Outcome(error=error, args=args)
    return Outcome(result=result, args=args)


def assert_same_outcome(eager: Outcome, compiled: Outcome) -> None:
    if eager.error is not None or compiled.error is not None:
        assert type(compiled.error) is type(eager.error), \
            f"compiled raised {compiled.error!r}, eager raised {eager.error!r}"
        assert str(compiled.error) == str(eager.error)
    else:
        assert_same(eager.result, compiled.result)
    assert_same(eager.args, compiled.args, "arguments after the call")


# -- bytecode ----------------------------------------------------------------------------------
def opnames(code: types.CodeType) -> set[str]:
    """Opcode names in ``code`` and in every code object nested in its constants: CPython's
    own and the instruction layer's normalized ones (3.12's POP_JUMP_IF_TRUE is
    POP_JUMP_FORWARD_IF_TRUE there)."""
    names = {inst.opname for inst in dis.get_instructions(code)}
    names |= {inst.opname for inst in bytecode.decode(code)}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= opnames(const)
    return names


def exists_here(opname: str) -> bool:
    """Whether this CPython's compiler can emit ``opname`` (raw, or as a normalized name)."""
    return any(opname == raw or opname in bytecode.canonical_names(raw)
               for raw in bytecode.all_opnames())


def check_opcodes(c: Case) -> None:
    absent = sorted(name for name in c.opcodes if not exists_here(name))
    if absent:
        pytest.skip(f"{absent} do not exist in Python {sys.version_info[0]}."
                    f"{sys.version_info[1]}")
    missing = set(c.opcodes) - opnames(c.fn.__code__)
    assert not missing, f"{c.name}: opcodes {sorted(missing)} are not in the bytecode"


# -- running -----------------------------------------------------------------------------------
def make_args(c: Case, seed: int) -> Args:
    torch.manual_seed(seed)
    return c.make_args()


def run_case(c: Case) -> None:
    """Eager vs compiled, twice; graph count; no recompile. See the module docstring."""
    check_opcodes(c)
    if c.fallback is not None:
        run_fallback_case(c)
        return
    graphlift.reset()
    counter = CompileCounter()
    compiled = graphlift.compile(c.fn, backend=counter, fullgraph=True)
    for seed in (0, 1):
        eager = call(c.fn, make_args(c, seed))
        assert_same_outcome(eager, call(compiled, make_args(c, seed)))
    compiles = 2 if c.recompiles else 1
    assert counter.frame_count == c.graphs * compiles, \
        f"{counter.frame_count} graphs captured, expected {c.graphs * compiles}"
    assert graphlift.stats(compiled).compiles == compiles, \
        "the second call recompiled" if compiles == 1 else "the known recompile did not happen"


def run_fallback_case(c: Case) -> None:
    """fullgraph refuses the frame; without fullgraph the eager fallback agrees with eager."""
    graphlift.reset()
    strict = graphlift.compile(c.fn, backend=CompileCounter(), fullgraph=True)
    with pytest.raises(graphlift.Unsupported):
        positional, keywords = make_args(c, 0)
        strict(*positional, **keywords)
    graphlift.reset()
    compiled = graphlift.compile(c.fn, backend=CompileCounter())
    for seed in (0, 1):
        assert_same_outcome(call(c.fn, make_args(c, seed)), call(compiled, make_args(c, seed)))
