"""The code-object cache: one ExtraState per code object, holding its chain of cache entries.

The ExtraState lives in CPython's code-object extra slot (see :mod:`graphlift.code_extra`), so it
is shared by every function object made from the same code (closures created in a loop) and is
released with the code object. Reading the slot is slow (~1.6 µs), so wrappers look it up once and
keep a direct reference.
"""

from __future__ import annotations

import itertools
import threading
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import torch.fx

from graphlift import code_extra
from graphlift.dynamic_shapes import ShapeMemory
from graphlift.graph_break import GraphBreak
from graphlift.guards import CompiledGuards
from graphlift.resume import ResumePoint


@dataclass(frozen=True)
class VerifyPlan:
    """What verify mode (``config.verify``, :mod:`graphlift.verify`) must know of an entry's run,
    decided when it was compiled: whether running the function eagerly beside it is safe."""

    side_effects: bool  # the ledger holds writes: an eager run would make them twice
    graph_break: bool  # code runs eagerly after the graph (a print, a resume function)
    mutated: tuple[Any, ...] = ()  # the Sources of the graph inputs the graph mutates in place


@dataclass(eq=False)
class CacheEntry:
    """Compiled code for one set of guards: ``check(*args)`` then ``run(*args)``.

    An entry serves only calls through wrappers with the same ``options`` (compared by identity:
    they are interned), so a graph made for one backend never runs for another, and an entry that
    runs eagerly after a graph break never serves a ``fullgraph=True`` wrapper.
    """

    compile_id: str  # "frame id/compile index", e.g. "0/3"
    options: Any  # the interned convert_frame.CompileOptions it was compiled with
    compiled_guards: CompiledGuards
    run: Callable[..., Any]
    run_source: str
    graph: torch.fx.GraphModule | None  # None when the frame runs eagerly or has no tensor ops
    internal_error: str | None = None  # graphlift failed compiling: its traceback (runs eagerly)
    verify_plan: VerifyPlan | None = None  # None: never verified (runs eagerly, loaded, ...)

    def __post_init__(self) -> None:
        self.check = self.compiled_guards.fn  # bound once: read on every call

    @property
    def guards(self) -> list[str]:
        """The guards as strings in torch.compile's notation (``L['n'] == 3``)."""
        return self.compiled_guards.texts()

    @property
    def guard_source(self) -> str:
        return self.compiled_guards.source

    def __repr__(self) -> str:
        kind = "graph" if self.graph is not None else "no graph"
        return f"CacheEntry({self.compile_id}, {kind}, {len(self.guards)} guards)"


@dataclass
class Stats:
    """Counters and per-phase seconds for one code object; read by tests and tools."""

    hits: int = 0
    misses: int = 0
    compiles: int = 0
    graphs: int = 0
    eager_frames: int = 0  # compiles that ended in running the frame eagerly
    graph_breaks: int = 0
    recompile_limit_hit: bool = False
    internal_errors: int = 0  # compiles where graphlift itself failed (the frame ran eagerly)
    loaded: int = 0  # entries loaded from config.cache_dir (a warm start) instead of compiled
    guard_seconds: float = 0.0  # guard evaluation on the miss path (hits are not timed)
    translate_seconds: float = 0.0
    backend_seconds: float = 0.0
    verified: int = 0  # hits also run eagerly and compared (config.verify)
    verify_failures: int = 0  # of those, the ones that differed (the entry then runs eagerly)

    @property
    def calls(self) -> int:
        return self.hits + self.misses

    def __repr__(self) -> str:  # the dataclass repr would leave out calls, a property
        values = {"calls": self.calls, **{f.name: getattr(self, f.name) for f in fields(self)}}
        return f"Stats({', '.join(f'{name}={value!r}' for name, value in values.items())})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls, "hits": self.hits, "misses": self.misses,
            "compiles": self.compiles, "graphs": self.graphs, "eager_frames": self.eager_frames,
            "graph_breaks": self.graph_breaks, "recompile_limit_hit": self.recompile_limit_hit,
            "internal_errors": self.internal_errors, "loaded": self.loaded,
            "verified": self.verified, "verify_failures": self.verify_failures,
            "seconds": {"guards": self.guard_seconds, "translate": self.translate_seconds,
                        "backend": self.backend_seconds},
        }


class ExtraState:
    """Everything graphlift keeps for one code object."""

    def __init__(self, code: types.CodeType) -> None:
        self.name = code.co_name
        self.location = f"{code.co_filename}:{code.co_firstlineno}"
        # Held on the miss path while looking again and compiling: threads that miss at once
        # compile one after the other, so that the limits hold and none compiles a twin entry.
        # Reentrant: compiling may call the function again (a guard reading a property).
        self.lock = threading.RLock()
        self.clear()
        _live_states.add(self)

    def clear(self) -> None:
        """Drop every entry and counter (``graphlift.reset``)."""
        self.entries: list[CacheEntry] = []
        self.head: CacheEntry | None = None  # entries[0], read by the fast path
        self.frame_id: int | None = None
        self.compile_count = 0
        self.run_only = False  # a recompile limit was hit: misses run eagerly
        # A call ran eagerly because it made state its trace read (exc.FirstCallRunsEagerly).
        self.first_call_ran_eagerly = False
        self.stats = Stats()
        self.breaks: list[GraphBreak] = []
        self.resume_points: dict[tuple, Any] = {}  # (ResumeKey, options) -> ResumePoint
        # options -> the routed copy of the code that runs when the frame runs eagerly as a
        # whole (None: the rewrite cannot follow it); see graphlift.eager_callees.
        self.eager_code: dict[Any, Any] = {}
        self.shape_memory = ShapeMemory()  # sizes and ints earlier compiles saw (automatic dynamic)
        # Options whose saved entries (config.cache_dir) were read in: once each after a reset.
        self.loaded_options: weakref.WeakSet = weakref.WeakSet()

    def resume_point(self, code: types.CodeType, key: Any, options: Any,
                     make_wrapper: Callable) -> ResumePoint:
        """The resume function continuing this code at ``key`` (made once, then reused)."""
        point = self.resume_points.get((key, options))
        if point is None:
            point = ResumePoint(code, key, options, make_wrapper)
            self.resume_points[(key, options)] = point
        return point

    # The chain is replaced, never changed in place, so that a thread reading it unlocked
    # (the miss path's first look) sees one whole version of it.
    def push_front(self, entry: CacheEntry) -> None:
        """Put a new entry at the head (call with ``lock`` held)."""
        self.entries = [entry, *self.entries]
        self.head = entry

    def move_to_front(self, entry: CacheEntry) -> None:
        """Make ``entry`` the head, if it is still in the chain (call with ``lock`` held)."""
        if entry is not self.head and any(e is entry for e in self.entries):
            self.entries = [entry, *(e for e in self.entries if e is not entry)]
            self.head = entry

    def remove(self, entry: CacheEntry) -> None:
        """Drop one entry (a module it pinned has died); absent entries are ignored."""
        self.entries = [e for e in self.entries if e is not entry]
        self.head = self.entries[0] if self.entries else None

    def replace(self, old: CacheEntry, new: CacheEntry) -> None:
        """Put ``new`` where ``old`` is in the chain (call with ``lock`` held)."""
        self.entries = [new if e is old else e for e in self.entries]
        self.head = self.entries[0] if self.entries else None

    def withdraw_compile_id(self) -> None:
        """The compile that took the last id made no entry (its call ran eagerly:
        :class:`graphlift.exc.FirstCallRunsEagerly`); the next compile takes the id again."""
        global _accumulated_compiles, _accumulated_recompiles
        self.compile_count -= 1
        _accumulated_compiles -= 1
        _accumulated_recompiles -= bool(self.entries)

    def next_compile_id(self) -> str:
        global _accumulated_compiles, _accumulated_recompiles
        if self.frame_id is None:
            self.frame_id = next(_frame_ids)
        compile_id = f"{self.frame_id}/{self.compile_count}"
        self.compile_count += 1
        _accumulated_compiles += 1
        _accumulated_recompiles += bool(self.entries)
        return compile_id


_live_states: weakref.WeakSet[ExtraState] = weakref.WeakSet()
_frame_ids = itertools.count()
_accumulated_compiles = 0
_accumulated_recompiles = 0  # compiles of a code object that already had an entry


def get_state(code: types.CodeType) -> ExtraState:
    """The code object's ExtraState, created on first use. Slow: call once per wrapper."""
    state = code_extra.get_extra(code)
    if state is None:
        state = ExtraState(code)
        code_extra.set_extra(code, state)
    return state


def peek_state(code: types.CodeType) -> ExtraState | None:
    """The ExtraState if the code object has one, without creating it."""
    return code_extra.get_extra(code)


def accumulated_compiles() -> int:
    """Compiles across the process since the last reset."""
    return _accumulated_compiles


def accumulated_recompiles() -> int:
    """Recompiles across the process since the last reset: entries beyond a code object's first,
    what ``config.accumulated_recompile_limit`` counts."""
    return _accumulated_recompiles


def reset_all() -> None:
    """Clear every live ExtraState and the process-wide counters."""
    global _frame_ids, _accumulated_compiles, _accumulated_recompiles
    for state in list(_live_states):
        state.clear()
    _frame_ids = itertools.count()
    _accumulated_compiles = _accumulated_recompiles = 0
