"""The structured trace: ``GRAPHLIFT_TRACE=DIR`` logs every compile in torch's ``TORCH_TRACE``
format, so that ``tlparse`` (``pip install tlparse``) renders it as a web page::

    GRAPHLIFT_TRACE=/tmp/trace python train.py
    tlparse /tmp/trace/dedicated_log_torch_trace_*.log -o tl_out     # then open tl_out/index.html

Each process writes one file, ``DIR/dedicated_log_torch_trace_<random>.log``, opened at its first
record (a forked child opens its own). A record is one line: a glog-style prefix, then a JSON
object whose first key names the record (its metadata); the compile id follows as ``frame_id``,
``frame_compile_id`` and ``attempt``. A record with a payload says so with the payload's MD5 in
``has_payload``, and the payload follows, each line after a tab::

    V1201 10:32:00.806412 18917 graphlift/structured_trace.py:0] {"dynamo_output_graph": {...},
        "frame_id": 0, "frame_compile_id": 1, "attempt": 0, "has_payload": "363ff44a..."}
    \tclass GraphModule_0_1(torch.nn.Module):
    \t    def forward(self, L_x: "f32[s77][1]cpu", L_n: "Sym(s86)"):

(the JSON is one line). The records of one compile, by the names tlparse knows them by::

    str                        a file name, interned for the stacks ([name, index])
    artifact recompile_reasons why the code object's entries did not serve the call
    dynamo_start               the user's stack at that call, the compiled function last
    dynamo_output_graph        the graph as readable code, each node's source line
    dynamo_guards              the guards, one {"code": ...} each
    artifact graphlift_guard_source      the generated check function
    artifact dynamo_graph_break_reason   each graph break, with its id (GL0004) and page
    chromium_event             a begin and an end per phase (tlparse's chromium_events.json)
    compilation_metrics        times, counts, the breaks (as restart reasons) or the failure

A process also logs ``artifact graphlift_version`` once, and ``artifact
graphlift_recompile_limit`` when a limit stops a code object from compiling again.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import linecache
import os
import sys
import tempfile
import time
import types
import weakref
from typing import TYPE_CHECKING, Any

import torch

from graphlift import cache
from graphlift.testing import count_ops

if TYPE_CHECKING:
    from graphlift.cache import CacheEntry, ExtraState
    from graphlift.graph_break import GraphBreak
    from graphlift.progress import CompileTiming

ENV_VAR = "GRAPHLIFT_TRACE"
FILE_PREFIX = "dedicated_log_torch_trace_"  # what tlparse and torch's tools look for
PACKAGE = os.path.dirname(os.path.abspath(__file__))


class TraceWriter:
    """Writes records to this process's file in ``directory``."""

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(directory)
        self.pid: int | None = None
        self.path: str | None = None
        self.file: Any = None
        self.strings: dict[str, int] = {}

    def record(self, name: str, meta: dict[str, Any] | list, payload: Any = None,
               compile_id: str | None = None) -> None:
        """One record: ``{name: meta}``, the compile id, then the payload (text, or JSON)."""
        self._open()
        envelope: dict[str, Any] = {name: meta}
        if compile_id is not None:
            frame, index = compile_id.split("/")
            envelope.update(frame_id=int(frame), frame_compile_id=int(index), attempt=0)
        if payload is not None and not isinstance(payload, str):
            payload = "[\n" + ",\n".join(json.dumps(item, default=repr) for item in payload) + \
                "\n]" if isinstance(payload, list) else json.dumps(payload, indent=0, default=repr)
        if payload is not None:
            envelope["has_payload"] = hashlib.md5(payload.encode("utf-8"),
                                                  usedforsecurity=False).hexdigest()
        now = datetime.datetime.now()
        line = (f"V{now:%m%d %H:%M:%S}.{now.microsecond:06d} {self.pid} "
                f"graphlift/structured_trace.py:0] {json.dumps(envelope, default=repr)}")
        if payload is not None:
            line += "".join(f"\n\t{text}" for text in payload.split("\n"))
        self.file.write(line + "\n")
        self.file.flush()

    def intern(self, filename: str) -> int:
        """The index of ``filename`` in the string table, logging it the first time."""
        self._open()
        index = self.strings.get(filename)
        if index is None:
            index = self.strings[filename] = len(self.strings)
            self.record("str", [filename, index])
        return index

    def _open(self) -> None:
        if self.pid == os.getpid():
            return
        # A first record, or the first in a forked child: a file (and string table) of its own.
        self.pid, self.strings = os.getpid(), {}
        os.makedirs(self.directory, exist_ok=True)
        handle, self.path = tempfile.mkstemp(prefix=FILE_PREFIX, suffix=".log",
                                             dir=self.directory)
        self.file = os.fdopen(handle, "w", encoding="utf-8")
        self.record("artifact", {"name": "graphlift_version", "encoding": "json"},
                    {"graphlift": _version(), "torch": torch.__version__,
                     "python": sys.version.split()[0]})


_writer: TraceWriter | None = None


def enable(directory: str) -> TraceWriter:
    """Trace every compile from now on into ``directory``."""
    global _writer
    _writer = TraceWriter(directory)
    return _writer


def disable() -> None:
    global _writer
    if _writer is not None and _writer.file is not None and _writer.pid == os.getpid():
        _writer.file.close()
    _writer = None


def writer() -> TraceWriter | None:
    """The active writer, or None when tracing is off."""
    return _writer


def configure_from_env() -> None:
    """Apply ``GRAPHLIFT_TRACE`` (called once at import). Child processes trace too."""
    directory = os.environ.get(ENV_VAR)
    if directory:
        enable(directory)


# -- what one compile logs (called by graphlift.events) ------------------------------------------
def compiled(fn: types.FunctionType, state: ExtraState, entry: CacheEntry, reasons: list[str],
             timing: CompileTiming | None) -> None:
    """A compile made ``entry``; ``reasons`` say why the older entries did not serve the call."""
    out = _writer
    compile_id = entry.compile_id
    breaks = _new_breaks(state)
    _start(out, fn, compile_id, reasons)
    graph = entry.graph
    if graph is not None:
        out.record("dynamo_output_graph", {"sizes": _sizes(graph)},
                   graph.print_readable(print_output=False, include_stride=True,
                                        include_device=True), compile_id)
    out.record("dynamo_guards", {}, [{"code": guard} for guard in entry.guards], compile_id)
    out.record("artifact", {"name": "graphlift_guard_source", "encoding": "string"},
               entry.guard_source, compile_id)
    for record in breaks:
        out.record("artifact", {"name": "dynamo_graph_break_reason", "encoding": "string"},
                   record.log_text(fn.__qualname__), compile_id)
    _phases(out, compile_id, timing)
    eager = [record for record in breaks if record.outcome.startswith("the whole frame")]
    nodes = list(graph.graph.nodes) if graph is not None else []
    _metrics(out, fn, state, compile_id, timing, {
        "guard_count": len(entry.guards),
        "graph_op_count": count_ops(graph) if graph is not None else 0,
        "graph_node_count": len(nodes),
        "graph_input_count": sum(node.op == "placeholder" for node in nodes),
        "options": entry.options.describe(),
        "restart_reasons": [str(record) for record in breaks if record not in eager],
        "graph_breaks": [record.id for record in breaks],
        **(_failure("Unsupported", f"{eager[0]} ({eager[0].outcome})",
                    eager[0].location) if eager else {}),
    })


def failed(fn: types.FunctionType, state: ExtraState, error: BaseException, reasons: list[str],
           timing: CompileTiming | None) -> None:
    """A compile raised ``error`` (``fullgraph``, a backend failure) instead of making an entry."""
    out = _writer
    compile_id = f"{state.frame_id}/{state.compile_count - 1}"
    _new_breaks(state)
    _start(out, fn, compile_id, reasons)
    _phases(out, compile_id, timing)
    location = getattr(error, "location", None)
    _metrics(out, fn, state, compile_id, timing,
             _failure(type(error).__name__, str(error), location))


def limit_hit(fn: types.FunctionType, state: ExtraState, which: str, limit: int,
              reasons: list[str]) -> None:
    """A recompile limit refused to compile; logged under the code object's latest compile."""
    latest = max(state.entries, key=lambda e: int(e.compile_id.split("/")[1]), default=None)
    text = "\n".join([f"graphlift hit config.{which} ({limit}): {fn.__qualname__} "
                      f"({state.location}) runs eagerly on a miss from now on",
                      *(f"- {reason}" for reason in reasons)])
    _writer.record("artifact", {"name": "graphlift_recompile_limit", "encoding": "string"}, text,
                   latest.compile_id if latest is not None else None)


# Per code object: its list of break records (reset() makes a new one) and how many were logged.
_breaks_seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _new_breaks(state: ExtraState) -> list[GraphBreak]:
    """The break records of ``state`` added since the last compile logged."""
    seen, count = _breaks_seen.get(state, (None, 0))
    if seen is not state.breaks:
        count = 0
    _breaks_seen[state] = (state.breaks, len(state.breaks))
    return state.breaks[count:]


# -- pieces --------------------------------------------------------------------------------------
def _start(out: TraceWriter, fn: types.FunctionType, compile_id: str,
           reasons: list[str]) -> None:
    if reasons:
        out.record("artifact", {"name": "recompile_reasons", "encoding": "json"}, reasons,
                   compile_id)
    out.record("dynamo_start", {"stack": _user_stack(out, fn)}, None, compile_id)


def _user_stack(out: TraceWriter, fn: types.FunctionType) -> list[dict[str, Any]]:
    """The calling frames outside graphlift, outermost first, then ``fn`` itself."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith((PACKAGE + os.sep, "<graphlift")):
            frames.append((filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    code = fn.__code__
    stack = [{"line": line, "name": name, "filename": out.intern(filename),
              "loc": linecache.getline(filename, line).strip()}
             for filename, line, name in reversed(frames)]
    stack.append({"line": code.co_firstlineno, "name": code.co_name,
                  "filename": out.intern(code.co_filename)})
    return stack


def _sizes(graph: torch.fx.GraphModule) -> dict[str, list]:
    """Each tensor node's sizes (symbols as their names), as tlparse shows them."""
    sizes = {}
    for node in graph.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor):
            sizes[node.name] = [dim if isinstance(dim, int) else str(dim) for dim in value.shape]
    return sizes


def _phases(out: TraceWriter, compile_id: str, timing: CompileTiming | None) -> None:
    """A begin and an end event per phase, in microseconds since the epoch."""
    if timing is None:
        return
    offset = time.time() - time.perf_counter()
    spans = [("graphlift compile", timing.start, timing.end or time.perf_counter()),
             *((name, start, end) for name, start, end in timing.phases if end is not None)]
    for name, start, end in spans:
        for phase, at in (("B", start), ("E", end)):
            out.record("chromium_event", {}, {
                "name": name, "ts": (at + offset) * 1e6, "args": {"compile_id": compile_id},
                "ph": phase, "cat": "graphlift", "tid": 0, "pid": 0}, compile_id)


def _metrics(out: TraceWriter, fn: types.FunctionType, state: ExtraState, compile_id: str,
             timing: CompileTiming | None, fields: dict[str, Any]) -> None:
    code = fn.__code__
    seconds = timing.seconds() if timing is not None else {}
    out.record("compilation_metrics", {
        "compile_id": compile_id, "co_name": code.co_name, "co_filename": code.co_filename,
        "co_firstlineno": code.co_firstlineno, "cache_size": len(state.entries),
        "accumulated_cache_size": cache.accumulated_compiles(),
        "start_time": time.time() - timing.elapsed() if timing is not None else None,
        "entire_frame_compile_time_s": timing.elapsed() if timing is not None else None,
        "backend_compile_time_s": seconds.get("backend"), "phase_seconds": seconds,
        "dynamo_time_before_restart_s": _before_restart(timing),
        "fail_type": None, "fail_reason": None, "fail_user_frame_filename": None,
        "fail_user_frame_lineno": None, "restart_reasons": [], **fields,
    }, None, compile_id)


def _before_restart(timing: CompileTiming | None) -> float | None:
    """The first translation's seconds when the frame was traced again up to a break."""
    translations = [end - start for name, start, end in (timing.phases if timing else ())
                    if name == "translate" and end is not None]
    return translations[0] if len(translations) > 1 else None


def _failure(kind: str, reason: str, location: str | None) -> dict[str, Any]:
    filename, _, line = (location or "").rpartition(":")
    return {"fail_type": kind, "fail_reason": reason,
            "fail_user_frame_filename": filename or None,
            "fail_user_frame_lineno": int(line) if line.isdigit() else None}


def _version() -> str:
    from importlib import metadata  # deferred: importing it costs more than the rest of this module

    try:
        return metadata.version("graphlift")
    except metadata.PackageNotFoundError:
        return "unknown"

