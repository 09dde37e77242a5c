"""Recording: every compile, graph break and recompile-limit hit of a process, dumped as JSON.

``GRAPHLIFT_RECORD=run.json python script.py`` (what ``graphlift doctor`` does in its fresh
process) turns recording on when graphlift is imported; at exit the recording and every compiled
function's :class:`~graphlift.cache.Stats` are written to ``run.json``. The variable is removed
from the environment once read, so that processes the script starts do not overwrite the file.

Recording off costs one call and one ``None`` test per compile, nothing on a cache hit. The
file holds, with seconds counted from the moment recording started::

    {"version": 1, "argv": [...], "seconds": 1.9,
     "compiles": [{"compile_id": "2/1", "function": "scale", "location": "s.py:10",
                   "time": 0.41, "options": "backend='eager', fullgraph=False",
                   "dynamic": None, "reasons": ["2/0: L['n'] == 2 (now 3)"],
                   "guards": ["type(L['x']) is torch.Tensor", ...], "graph_code": "...",
                   "op_count": 1, "seconds": {"translate": 0.002, "backend": 0.0001},
                   "breaks": [{"type": "skipped_function", "id": "GL0004",
                               "docs": "docs/graph_breaks.md#gl0004", "location": "s.py:7",
                               ...}]}],
     "limits": [{"function": "scale", "location": "s.py:10", "which": "recompile_limit",
                 "limit": 8, "time": 0.6, "reasons": [...]}],
     "internal_errors": [{"compile_id": "3/0", "function": "f", "location": "s.py:20",
                          "time": 0.7, "error": "KeyError: 'x'", "traceback": "..."}],
     "verify_failures": [{"compile_id": "0/0", "function": "f", "location": "s.py:3",
                          "time": 0.9, "difference": "result: ...", "guards": [...],
                          "graph_code": "...", "reproducer": "/tmp/.../repro_f_0_0.py"}],
     "functions": [{"function": "scale", "location": "s.py:10", "stats": {...}}]}

``reasons`` are the recompile reasons as logged under ``recompiles``: the first failing guard of
each entry that was tried, ``"<compile id>: <guard> (now <value>)"``.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from dataclasses import dataclass, field, fields
from typing import Any

from graphlift import logs, structured_trace
from graphlift.cache import CacheEntry, ExtraState, Stats
from graphlift.graph_break import GraphBreak
from graphlift.progress import CompileTiming
from graphlift.testing import count_ops

ENV_VAR = "GRAPHLIFT_RECORD"
VERSION = 1


@dataclass
class _Function:
    """What the recorder keeps per compiled code object."""

    qualname: str
    # Every Stats the state has had: reset() gives a state a new one, and the counters of the
    # old one still belong to this run.
    stats_seen: list[Stats] = field(default_factory=list)
    # At the end of the last compile: seconds spent so far and the number of break records.
    translate: float = 0.0
    backend: float = 0.0
    breaks_seen: list[GraphBreak] | None = None
    break_count: int = 0

    def stats(self, state: ExtraState) -> Stats:
        """The sum of the state's Stats over resets."""
        seen = self.stats_seen
        if not _holds(seen, state.stats):
            seen = [*seen, state.stats]
        total = Stats()
        for name in (f.name for f in fields(Stats)):
            values = [getattr(stats, name) for stats in seen]
            setattr(total, name, any(values) if isinstance(values[0], bool) else sum(values))
        return total


class Recorder:
    """Collects events in memory; :meth:`dump` writes them to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = os.getpid()
        self.start = time.perf_counter()
        self.compiles: list[dict[str, Any]] = []
        self.limits: list[dict[str, Any]] = []
        self.internal_errors: list[dict[str, Any]] = []
        self.verify_failures: list[dict[str, Any]] = []
        self.functions: dict[ExtraState, _Function] = {}

    def now(self) -> float:
        return round(time.perf_counter() - self.start, 6)

    def compiled(self, qualname: str, state: ExtraState, entry: CacheEntry,
                 reasons: list[str]) -> None:
        function = self.functions.setdefault(state, _Function(qualname))
        stats, breaks = state.stats, state.breaks
        if not _holds(function.stats_seen, stats):  # first compile, or cleared since
            function.stats_seen.append(stats)
            function.translate = function.backend = 0.0
        if breaks is not function.breaks_seen:
            function.breaks_seen, function.break_count = breaks, 0
        graph = entry.graph
        self.compiles.append({
            "compile_id": entry.compile_id, "function": qualname, "location": state.location,
            "time": self.now(), "options": entry.options.describe(),
            "dynamic": entry.options.dynamic, "reasons": list(reasons), "guards": entry.guards,
            "graph_code": graph.code.strip() if graph is not None else None,
            "op_count": count_ops(graph) if graph is not None else 0,
            "seconds": {"translate": stats.translate_seconds - function.translate,
                        "backend": stats.backend_seconds - function.backend},
            "breaks": [break_dict(record) for record in breaks[function.break_count:]],
        })
        function.translate, function.backend = stats.translate_seconds, stats.backend_seconds
        function.break_count = len(breaks)

    def limit_hit(self, qualname: str, state: ExtraState, which: str, limit: int,
                  reasons: list[str]) -> None:
        self.limits.append({"function": qualname, "location": state.location, "which": which,
                            "limit": limit, "time": self.now(), "reasons": list(reasons)})

    def internal_error(self, qualname: str, state: ExtraState, compile_id: str,
                       details: str) -> None:
        self.internal_errors.append({
            "compile_id": compile_id, "function": qualname, "location": state.location,
            "time": self.now(), "error": details.rstrip().splitlines()[-1],
            "traceback": details})

    def verify_failed(self, qualname: str, state: ExtraState, entry: CacheEntry,
                      difference: str, reproducer: str) -> None:
        graph = entry.graph
        self.verify_failures.append({
            "compile_id": entry.compile_id, "function": qualname, "location": state.location,
            "time": self.now(), "difference": difference, "guards": entry.guards,
            "graph_code": graph.code.strip() if graph is not None else None,
            "reproducer": reproducer})

    def as_dict(self) -> dict[str, Any]:
        return {"version": VERSION, "argv": list(sys.argv), "seconds": self.now(),
                "compiles": self.compiles, "limits": self.limits,
                "internal_errors": self.internal_errors,
                "verify_failures": self.verify_failures,
                "functions": [{"function": function.qualname, "location": state.location,
                               "stats": function.stats(state).as_dict()}
                              for state, function in self.functions.items()]}

    def dump(self) -> None:
        """Write the recording (atexit); a forked child that reaches atexit writes nothing."""
        if os.getpid() != self.pid:
            return
        partial = f"{self.path}.partial"
        with open(partial, "w", encoding="utf-8") as file:
            json.dump(self.as_dict(), file, indent=1, default=str)
        os.replace(partial, self.path)


def _holds(items: list, item: object) -> bool:
    """Membership by identity (Stats compare equal by value)."""
    return any(member is item for member in items)


def break_dict(record: GraphBreak) -> dict[str, Any]:
    """A graph-break record as JSON."""
    return {"type": record.break_type.value, "id": record.id, "docs": record.doc_link,
            "location": record.location,
            "source_line": record.source_line, "explanation": record.explanation,
            "hints": list(record.hints), "outcome": record.outcome}


_recorder: Recorder | None = None


def enable(path: str) -> Recorder:
    """Record from now on and write ``path`` at exit."""
    global _recorder
    if _recorder is None:
        _recorder = Recorder(os.path.abspath(path))
        atexit.register(_recorder.dump)
    return _recorder


def recorder() -> Recorder | None:
    """The active recorder, or None when recording is off."""
    return _recorder


def configure_from_env() -> None:
    """Apply ``GRAPHLIFT_RECORD`` (called once at import), then remove it from the environment."""
    path = os.environ.pop(ENV_VAR, None)
    if path:
        enable(path)


# -- hooks, called by eval_frame: the recording, and the structured trace (GRAPHLIFT_TRACE) ------
def on_compile(fn: Any, state: ExtraState, entry: CacheEntry, reasons: list[str],
               timing: CompileTiming | None = None) -> None:
    """A miss compiled ``entry``; ``reasons`` say why each older entry did not serve the call."""
    if _recorder is not None:
        _recorder.compiled(fn.__qualname__, state, entry, reasons)
    if structured_trace.writer() is not None:
        _trace(structured_trace.compiled, fn, state, entry, reasons, timing)


def on_compile_failed(fn: Any, state: ExtraState, error: BaseException, reasons: list[str],
                      timing: CompileTiming | None = None) -> None:
    """A miss raised ``error`` while compiling (``fullgraph``, a backend that failed)."""
    if structured_trace.writer() is not None:
        _trace(structured_trace.failed, fn, state, error, reasons, timing)


def on_limit(fn: Any, state: ExtraState, which: str, limit: int, reasons: list[str]) -> None:
    """A recompile was refused: ``config.<which>`` (``limit``) was reached."""
    if _recorder is not None:
        _recorder.limit_hit(fn.__qualname__, state, which, limit, reasons)
    if structured_trace.writer() is not None:
        _trace(structured_trace.limit_hit, fn, state, which, limit, reasons)


def _trace(log: Any, *args: Any) -> None:
    """Write to the structured trace; if that fails (a full disk), stop tracing, not the program."""
    try:
        log(*args)
    except Exception as error:
        structured_trace.disable()
        logs.warn(f"{structured_trace.ENV_VAR}: writing the structured trace failed "
                  f"({type(error).__name__}: {error}); tracing is off from now on")


def on_internal_error(fn: Any, state: ExtraState, compile_id: str, details: str) -> None:
    """graphlift failed while compiling ``fn`` (``details``: the traceback); it runs eagerly."""
    if _recorder is not None:
        _recorder.internal_error(fn.__qualname__, state, compile_id, details)


def on_verify_failure(fn: Any, state: ExtraState, entry: CacheEntry, difference: str,
                      reproducer: str) -> None:
    """Verify mode found ``entry`` returning what eager does not (it runs eagerly from now on)."""
    if _recorder is not None:
        _recorder.verify_failed(fn.__qualname__, state, entry, difference, reproducer)
