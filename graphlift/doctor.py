"""``graphlift doctor SCRIPT [ARGS...]``: the debugging routine for slow compiled code, run for you.

When compiled code is slow, the routine is: count graph breaks first; if the graph is whole, look
at recompiles and the guard that keeps failing; if neither, the problem is in the backend. The
doctor runs ``SCRIPT`` in a fresh process with recording on (:mod:`graphlift.events`; the script
compiles what it always compiles), then reports the routine's three steps::

    1. Graph breaks   grouped by location, most frequent first: count, type, file:line and
                      source line, reason, hint. If there are any: fix these first.
    2. Recompiles     per function: compiles, whether a recompile limit was hit, the guard that
                      failed most often, and its triage (a :class:`Cause` with its fix).
    3. Time           per function: compile seconds by phase, cache-hit rate, guard seconds; if
                      neither breaks nor recompiles explain the time, the backend is the suspect.

:func:`run` returns the report as a JSON-ready dict (``--json`` prints it); :func:`format_text`
and :func:`format_html` render it. The report's keys: ``script``, ``args``, ``exit_code``,
``seconds``, ``recorded``, ``verdict`` (``problem``: one of :data:`PROBLEMS`, and ``summary``),
``graph_breaks``, ``recompiles``, ``time``, and the raw ``compiles`` and ``limits`` of the
recording (guards and graph code per cache entry, for the HTML page).
"""

from __future__ import annotations

import bisect
import enum
import html
import json
import linecache
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from graphlift import events

# The verdict's closed set: what to look at first, in the routine's order.
PROBLEMS = ("nothing_compiled", "graph_breaks", "recompiles", "backend")


# -- triage of a failing guard -------------------------------------------------------------------
class Cause(enum.Enum):
    """Why a guard keeps failing: the closed set of triage categories, each with its advice."""

    SCALAR = "scalar"
    SIZE = "size"
    GLOBAL_STATE = "global_state"
    IDENTITY = "identity"
    TYPE = "type"
    TENSOR_PROPERTY = "tensor_property"
    CONTAINER = "container"
    ALIASING = "aliasing"
    OPTIONS = "options"
    OTHER = "other"


# A failing guard's text (graphlift.guards' notation) -> its cause; the first matching row wins.
TRIAGE_RULES: tuple[tuple[re.Pattern[str], Cause], ...] = (
    # "compiled with backend='eager', fullgraph=False": an entry made with other options
    (re.compile(r"^compiled with "), Cause.OPTIONS),
    # "torch.is_grad_enabled() == True", autocast, the default dtype
    (re.compile(r"^torch\.(is_grad_enabled|is_autocast_enabled|get_default_dtype)\(\)"),
     Cause.GLOBAL_STATE),
    # "L['x'].size()[0] == 8", and any symbolic size guard once sizes are dynamic
    (re.compile(r"\.size\(\)\[\d+\]|\.shape\b"), Cause.SIZE),
    # "L['x'].dtype == torch.float32", device, requires_grad, "dim() == 2", "stride()[0] == 1"
    (re.compile(r"\.(dtype|device|requires_grad|dim\(\)|stride\(\))"), Cause.TENSOR_PROPERTY),
    # "type(L['x']) is torch.Tensor"
    (re.compile(r"^type\("), Cause.TYPE),
    # "L['fn'] is <function act>": an ID_MATCH guard
    (re.compile(r" is <"), Cause.IDENTITY),
    # "len(L['xs']) == 3", "list(L['d']) == ['a', 'b']"
    (re.compile(r"^(len|list)\("), Cause.CONTAINER),
    # "L['a'] is L['b']", "L['a'] is not L['b']"
    (re.compile(r" is (not )?[LG]\["), Cause.ALIASING),
    # "L['n'] == 3", "L['flag'] is True": a Python value compared by value
    (re.compile(r" (==|is) "), Cause.SCALAR),
)


@dataclass(frozen=True)
class Advice:
    problem: str
    fix: str


ADVICE: dict[Cause, Advice] = {
    Cause.SCALAR: Advice(
        "a Python scalar compared by value keeps failing: something that varies was baked "
        "into the graph as a constant", "pass it as a tensor, or mark it dynamic"),
    Cause.SIZE: Advice(
        "a size guard keeps failing: automatic dynamic should have taken over on the second "
        "compile", "if it did not, suspect 0/1 specialization (a batch of 1) or a mark_static"),
    Cause.GLOBAL_STATE: Advice(
        "global state (grad mode, autocast, default dtype) flips between calls",
        "pin it: set it once around all the calls, not differently for some of them"),
    Cause.IDENTITY: Advice(
        "a module or function identity changes: a new object on every call",
        "define it once, outside the loop, and pass the same object every time"),
    Cause.TYPE: Advice("an argument's type changes between calls",
                       "pass the same type on every call"),
    Cause.TENSOR_PROPERTY: Advice(
        "a tensor's dtype, device, requires_grad, rank or strides change between calls",
        "convert inputs once before the calls (one dtype and device, .contiguous())"),
    Cause.CONTAINER: Advice("a list's length or a dict's keys change between calls",
                            "keep containers the same shape, or stack them into one tensor"),
    Cause.ALIASING: Advice("arguments are the same object on some calls and not on others",
                           "pass distinct objects (or the same one) consistently"),
    Cause.OPTIONS: Advice("the function is compiled with different options (backend, fullgraph)",
                          "compile it once, with one set of options"),
    Cause.OTHER: Advice("a guard keeps failing",
                        "GRAPHLIFT_LOGS=recompiles,guards shows every entry's guards"),
}


def triage(guard: str) -> Cause:
    """The cause of a failing guard, from its text (``L['n'] == 3`` -> ``Cause.SCALAR``)."""
    return next((cause for pattern, cause in TRIAGE_RULES if pattern.search(guard)), Cause.OTHER)


@dataclass(frozen=True)
class Failure:
    """One recompile reason, ``"0/1: L['n'] == 3 (now 4)"`` (eval_frame._failure_reasons)."""

    compile_id: str
    guard: str  # "L['n'] == 3"
    now: str | None  # "4": what the guard saw at the failing call, as the reason says it
    subject: str  # "L['n']": what the guard looks at, shared by the failures of every entry
    value: str | None  # "3": what the entry was compiled for

    @classmethod
    def parse(cls, reason: str) -> Failure:
        match = _REASON.match(reason)
        compile_id, guard, now = match.group("compile_id", "guard", "now")
        return cls(compile_id, guard, now, *split_guard(guard))

    @property
    def text(self) -> str:
        return self.guard if self.now is None else f"{self.guard} (now {self.now})"

    def values(self) -> list[str]:
        """The values this failure shows: compiled for, then seen now (without any note)."""
        now = None if self.now is None else self.now.split("; ")[0].rpartition(" = ")[2]
        return [v for v in (self.value, now) if v is not None]


def split_guard(guard: str) -> tuple[str, str | None]:
    """``(subject, value)`` of a guard's text: ``L['n'] == 3`` -> ``("L['n']", "3")``; a bound
    has no single value: ``2 <= L['x'].size()[0]`` -> ``("L['x'].size()[0]", None)``."""
    comparison = _COMPARISON.match(guard)
    if comparison is None:
        return guard, None
    left, op, right = comparison.group("left", "op", "right")
    if op in ("==", "is", "is not"):
        return left, right
    if _NUMBER.match(left):
        return _BOUND.split(right)[0], None
    return left, None


_REASON = re.compile(r"^(?P<compile_id>[^:]*): (?P<guard>.*?)(?: \(now (?P<now>.*)\))?$", re.S)
_COMPARISON = re.compile(r"^(?P<left>.+?) (?P<op>==|!=|<=|>=|<|>|is not|is) (?P<right>.+)$",
                         re.S)
_NUMBER = re.compile(r"^-?\d+$")
_BOUND = re.compile(r" (?:<=|>=|<|>) ")


# -- running the script --------------------------------------------------------------------------
def run(script: str, args: Sequence[str] = (), *, stdout: IO | int | None = None,
        stderr: IO | int | None = None) -> dict[str, Any]:
    """Run ``python SCRIPT ARGS`` in a fresh process with recording on; return the report.

    ``stdout`` and ``stderr`` are where the script's own output goes (inherited by default).
    """
    command = [sys.executable, script, *args]
    with tempfile.TemporaryDirectory(prefix="graphlift-doctor-") as folder:
        path = os.path.join(folder, "recording.json")
        env = {**os.environ, events.ENV_VAR: path}
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        start = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr)
        try:
            exit_code = process.wait()
        except KeyboardInterrupt:  # the script got the Ctrl-C too; report what it did
            exit_code = process.wait()
        seconds = time.perf_counter() - start
        recording = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as file:
                recording = json.load(file)
    return build_report(recording, script=script, args=list(args), exit_code=exit_code,
                        seconds=seconds)


def exit_status(report: dict[str, Any]) -> int:
    """The doctor's exit status: the script's (0 when it ran), 128+N for a signal N."""
    code = report["exit_code"]
    return 128 - code if code < 0 else code


# -- the report ----------------------------------------------------------------------------------
def build_report(recording: dict[str, Any] | None, *, script: str, args: list[str],
                 exit_code: int, seconds: float) -> dict[str, Any]:
    """The report (a JSON-ready dict) for one run's recording (None if nothing was recorded)."""
    recording = recording or {}
    compiles = recording.get("compiles", [])
    limits = recording.get("limits", [])
    breaks = graph_breaks(compiles)
    recompiling = recompiles(compiles, limits)
    report = {
        "script": script, "args": args, "exit_code": exit_code, "seconds": seconds,
        "recorded": bool(recording),
        "graph_breaks": breaks, "recompiles": recompiling,
        "time": time_summary(recording.get("functions", []), compiles, seconds,
                             explained_by=[name for name, found in
                                           (("graph_breaks", breaks),
                                            ("recompiles", recompiling)) if found]),
        "compiles": compiles, "limits": limits,
    }
    report["verdict"] = verdict(report)
    return report


def graph_breaks(compiles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Break records grouped by location, most frequent first."""
    groups: dict[str, list[tuple[str, dict]]] = {}
    for record in compiles:
        for brk in record["breaks"]:
            groups.setdefault(brk["location"] or "<unknown>", []).append((record["function"], brk))
    result = []
    for location, items in groups.items():
        common = Counter((b["type"], b["explanation"]) for _, b in items).most_common(1)[0][0]
        first = next(b for _, b in items if (b["type"], b["explanation"]) == common)
        result.append({
            "location": location, "count": len(items), "type": first["type"],
            "source_line": first["source_line"], "reason": first["explanation"],
            "hints": first["hints"], "outcome": first["outcome"],
            "functions": sorted({function for function, _ in items}),
            "other_reasons": sorted({b["explanation"] for _, b in items} - {first["explanation"]}),
            "context": source_context(location),
        })
    result.sort(key=lambda group: -group["count"])
    return result


def source_context(location: str, around: int = 2) -> list[list[Any]]:
    """``[[line number, text], ...]`` around ``file:line``; empty when the file is not readable."""
    number = _line_number(location)
    if number is None:
        return []
    path = location.rpartition(":")[0]
    lines = [[n, linecache.getline(path, n).rstrip("\n")]
             for n in range(max(1, number - around), number + around + 1)]
    while lines and not lines[-1][1]:
        lines.pop()
    return lines


def _line_number(location: str) -> int | None:
    line = location.rpartition(":")[2]
    return int(line) if line.isdigit() else None


def recompiles(compiles: list[dict[str, Any]],
               limits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Functions compiled more than once (or stopped by a limit), most compiles first."""
    per_function: dict[tuple[str, str], dict[str, Any]] = {}

    def item_of(record: dict[str, Any]) -> dict[str, Any]:
        return per_function.setdefault((record["function"], record["location"]),
                                       {"entries": [], "reasons": [], "limits": []})

    for record in compiles:
        item = item_of(record)
        item["entries"].append((record["compile_id"], record["guards"]))
        item["static"] = record["dynamic"] is False  # compile(..., dynamic=False)
        item["reasons"].append(record["reasons"])
    for limit in limits:
        item = item_of(limit)
        item["limits"].append({"which": limit["which"], "limit": limit["limit"]})
        item["reasons"].append(limit["reasons"])
    result = [_triaged(function, location, item)
              for (function, location), item in per_function.items()
              if len(item["entries"]) > 1 or item["limits"]]
    result.sort(key=lambda item: -item["compiles"])
    return result


def _triaged(function: str, location: str, item: dict[str, Any]) -> dict[str, Any]:
    """One function's recompiles: its failing guards by subject, the top one triaged.

    ``item["reasons"]`` holds one list per recompile (or refused recompile), most recently
    used entry first; the example shown for a subject is its first failure in the latest list.
    ``item["entries"]`` holds ``(compile id, guards)`` per compile, oldest first.
    """
    batches = [[Failure.parse(reason) for reason in reasons] for reasons in item["reasons"]]
    failures = [failure for batch in batches for failure in batch]
    guards = []
    for subject, count in Counter(failure.subject for failure in failures).most_common():
        seen = [f for f in failures if f.subject == subject]
        example = next(f for batch in reversed(batches) for f in batch if f.subject == subject)
        guards.append({"subject": subject, "count": count, "example": example.text,
                       "cause": triage(example.guard).value,
                       "values": list(dict.fromkeys(v for f in seen for v in f.values())),
                       "dynamic_from": _dynamic_from(subject, item["entries"])})
    top = guards[0] if guards else None
    cause = Cause(top["cause"]) if top else Cause.OTHER
    advice = ADVICE[cause]
    return {
        "function": function, "location": location, "compiles": len(item["entries"]),
        "limit_hit": bool(item["limits"]), "limits": item["limits"],
        "failures": len(failures), "top_guard": top, "guards": guards,
        "cause": cause.value, "problem": advice.problem, "fix": advice.fix,
        "notes": _notes(cause, top, item.get("static", False)) if top else [],
    }


def _dynamic_from(subject: str, entries: list[tuple[str, list[str]]]) -> str | None:
    """The first later entry that guards ``subject`` without pinning it to one value (automatic
    dynamic made it a symbol there), when the first entry pinned it; else None."""
    def pinned(guards: list[str]) -> bool:
        return any(name == subject and value is not None
                   for name, value in map(split_guard, guards))

    if not entries or not pinned(entries[0][1]):
        return None
    return next((compile_id for compile_id, guards in entries[1:]
                 if not pinned(guards) and any(subject in guard for guard in guards)), None)


def _notes(cause: Cause, top: dict[str, Any], static: bool) -> list[str]:
    """What the values seen and the later entries add to a scalar or size triage."""
    if cause not in (Cause.SCALAR, Cause.SIZE):
        return []
    notes = []
    if static:
        notes.append("compiled with dynamic=False: every value is its own graph")
    elif top["dynamic_from"] is not None:
        notes.append(f"automatic dynamic took over at compile {top['dynamic_from']}: "
                     f"{top['subject']} is a symbol there, not a constant, so other values reuse "
                     "that entry (marking it dynamic up front saves the first recompile)")
    elif cause is Cause.SIZE:
        notes.append("automatic dynamic did not take over: look for graphlift.mark_static or "
                     "compile(..., dynamic=False)")
    elif all(_NUMBER.match(value) for value in top["values"]):
        notes.append(f"automatic dynamic did not take over: the code needs {top['subject']} as a "
                     "Python int (a loop over range() of it, for example), so each value is its "
                     "own graph; keep it to a few values, or compute with a tensor instead")
    if cause is Cause.SIZE and {"0", "1"} & set(top["values"]):
        notes.append("sizes seen include 0 or 1: those are specialized even when a size is "
                     "dynamic (0/1 specialization), so a batch of 1 gets its own entry")
    return notes


def time_summary(functions: list[dict[str, Any]], compiles: list[dict[str, Any]],
                 seconds: float, explained_by: list[str]) -> dict[str, Any]:
    """Compile seconds by phase, hit rate and guard seconds per function; what explains them."""
    rows = []
    for function in functions:
        stats = function["stats"]
        phases = stats["seconds"]
        compile_seconds = phases["translate"] + phases["backend"]
        rows.append({
            "function": function["function"], "location": function["location"],
            "calls": stats["calls"], "hits": stats["hits"], "misses": stats["misses"],
            "hit_rate": stats["hits"] / stats["calls"] if stats["calls"] else 0.0,
            "compiles": stats["compiles"], "graphs": stats["graphs"],
            "seconds": {**phases, "compile": compile_seconds},
        })
    rows.sort(key=lambda row: -(row["seconds"]["compile"] + row["seconds"]["guards"]))
    calls = sum(row["calls"] for row in rows)
    return {
        "functions": rows,
        "compile_seconds": sum(row["seconds"]["compile"] for row in rows),
        "guard_seconds": sum(row["seconds"]["guards"] for row in rows),
        "hit_rate": sum(row["hits"] for row in rows) / calls if calls else 0.0,
        "script_seconds": seconds,
        "explained_by": explained_by,
        "backend_suspect": bool(compiles) and not explained_by,
    }


def verdict(report: dict[str, Any]) -> dict[str, str]:
    """What to look at first: ``problem`` (one of :data:`PROBLEMS`) and a one-line summary."""
    breaks, recompiling = report["graph_breaks"], report["recompiles"]
    if not report["compiles"]:
        why = ("the script did not import graphlift, or exited without running atexit "
               "handlers (os._exit, a crash)" if not report["recorded"]
               else "no compiled function was called")
        return {"problem": "nothing_compiled", "summary": f"graphlift compiled nothing: {why}."}
    if breaks:
        count = sum(group["count"] for group in breaks)
        summary = (f"{count} graph break{_s(count)} at {len(breaks)} location{_s(breaks)}: "
                   f"fix these first.")
        if recompiling:
            summary += f" Then the recompiles of {_names(recompiling)}."
        return {"problem": "graph_breaks", "summary": summary}
    if recompiling:
        return {"problem": "recompiles",
                "summary": f"no graph breaks; recompiles in {_names(recompiling)}: see the "
                           f"guard that keeps failing."}
    return {"problem": "backend",
            "summary": "no graph breaks and no recompiles: if the script is still slow, the "
                       "problem is in the backend (the compiled graphs themselves)."}


def _names(recompiling: list[dict[str, Any]]) -> str:
    return ", ".join(f"{item['function']} ({item['compiles']} compiles)" for item in recompiling)


def _s(count: int | list) -> str:
    """The plural ending for ``count`` things (or as many as a list holds)."""
    count = count if isinstance(count, int) else len(count)
    return "" if count == 1 else "s"


# -- text ----------------------------------------------------------------------------------------
def format_text(report: dict[str, Any]) -> str:
    """The report as a terminal reads it, wrapped to 100 columns."""
    command = " ".join(["python", report["script"], *report["args"]])
    compiles = len(report["compiles"])
    functions = len({(c["function"], c["location"]) for c in report["compiles"]})
    lines = [
        "=" * 100,
        f"graphlift doctor: {command}",
        f"the script exited with code {report['exit_code']} after {report['seconds']:.2f} s; "
        f"graphlift compiled {compiles} time{_s(compiles)} in {functions} function{_s(functions)}",
    ]
    if report["exit_code"] != 0:
        lines += _wrap("the script failed (its error is above): the report covers what ran "
                       "before it stopped", "")
    lines += ["", *_wrap(f"Verdict: {report['verdict']['summary']}", "")]
    lines += _text_breaks(report["graph_breaks"])
    lines += _text_recompiles(report["recompiles"])
    lines += _text_time(report["time"])
    return "\n".join(lines) + "\n"


_DETAIL = " " * 7  # the indent of the lines under one break or one function


def _wrap(text: str, indent: str = _DETAIL) -> list[str]:
    return textwrap.wrap(text, 100, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False) or [indent]


def _text_breaks(breaks: list[dict[str, Any]]) -> list[str]:
    if not breaks:
        return ["", "1. Graph breaks: none."]
    count = sum(group["count"] for group in breaks)
    lines = ["", f"1. Graph breaks: {count} at {len(breaks)} location{_s(breaks)}. "
                 "Fix these first."]
    for group in breaks:
        lines.append(f"   {group['count']}x {group['type']} at {short(group['location'])} "
                     f"(in {', '.join(group['functions'])})")
        if group["source_line"]:
            lines.append(f"{_DETAIL}| {group['source_line']}")
        lines += _wrap(f"reason: {group['reason']}")
        for reason in group["other_reasons"]:
            lines += _wrap(f"also: {reason}")
        for hint in group["hints"]:
            lines += _wrap(f"hint: {hint}")
        lines += _wrap(f"then: {group['outcome']}")
    return lines


def _text_recompiles(recompiling: list[dict[str, Any]]) -> list[str]:
    if not recompiling:
        return ["", "2. Recompiles: none (every function compiled once)."]
    lines = ["", f"2. Recompiles: {len(recompiling)} function{_s(recompiling)}."]
    for item in recompiling:
        limit = "".join(f", hit config.{hit['which']} ({hit['limit']}): later misses run eagerly"
                        for hit in item["limits"][:1])
        lines += _wrap(f"{item['function']} at {short(item['location'])}: "
                       f"{item['compiles']} compiles{limit}", "   ")
        top = item["top_guard"]
        if top is not None:
            lines += _wrap(f"guard that failed most often ({top['count']} of "
                           f"{item['failures']} failures): {top['example']}")
            more = ", ..." if len(top["values"]) > 12 else ""
            lines += _wrap(f"values seen: {', '.join(top['values'][:12])}{more}")
        lines += _wrap(f"triage [{item['cause']}]: {item['problem']}")
        lines += _wrap(f"fix: {item['fix']}")
        for note in item["notes"]:
            lines += _wrap(f"note: {note}")
    return lines


def _text_time(summary: dict[str, Any]) -> list[str]:
    lines = ["", "3. Time"]
    if summary["functions"]:
        lines.append(f"   {'function':<32} {'calls':>6} {'hit rate':>8} {'compiles':>8} "
                     f"{'translate ms':>12} {'backend ms':>10} {'guards ms':>9}")
    for row in summary["functions"]:
        sec = row["seconds"]
        lines.append(f"   {row['function'][:32]:<32} {row['calls']:>6} {row['hit_rate']:>8.0%} "
                     f"{row['compiles']:>8} {sec['translate'] * 1e3:>12.2f} "
                     f"{sec['backend'] * 1e3:>10.2f} {sec['guards'] * 1e3:>9.2f}")
    lines += _wrap(f"compile time {summary['compile_seconds'] * 1e3:.1f} ms, guard evaluation "
                   f"on misses {summary['guard_seconds'] * 1e3:.2f} ms, cache-hit rate "
                   f"{summary['hit_rate']:.0%}, in a {summary['script_seconds']:.2f} s run", "   ")
    lines += _wrap(time_conclusion(summary), "   ")
    return lines


def time_conclusion(summary: dict[str, Any]) -> str:
    """One sentence: what the time is explained by, or that the backend is the suspect."""
    if summary["explained_by"]:
        found = " and ".join(name.replace("_", " ") for name in summary["explained_by"])
        return f"The {found} above cost time: fix them, then run the doctor again."
    if summary["backend_suspect"]:
        return ("Neither graph breaks nor recompiles explain the time: every function compiled "
                "once, as whole graphs. If the script is still slow, the problem is in the "
                "backend: profile the compiled graphs, or try another backend.")
    return "Nothing was compiled, so graphlift spent no time."


def short(location: str | None) -> str:
    """``file:line`` relative to the working directory when the file is under it."""
    if not location:
        return "<unknown>"
    path = location.rpartition(":")[0] or location
    if os.path.isabs(path) and path.startswith(os.getcwd() + os.sep):
        return os.path.relpath(path) + location[len(path):]
    return location


# -- HTML ----------------------------------------------------------------------------------------
def write_html(report: dict[str, Any], path: str) -> None:
    """Write :func:`format_html`'s page to ``path``."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(format_html(report))


def format_html(report: dict[str, Any]) -> str:
    """A self-contained page (inline CSS and script, no network): the three steps, a recompile
    timeline, and the guards and graph code of every cache entry."""
    command = " ".join(["python", report["script"], *report["args"]])
    sections = [
        f"<h1>graphlift doctor</h1><p class=meta>{_e(command)} &middot; exit code "
        f"{report['exit_code']} &middot; {report['seconds']:.2f} s</p>",
        f"<p id=verdict class='verdict {_e(report['verdict']['problem'])}'>"
        f"{_e(report['verdict']['summary'])}</p>",
        _html_breaks(report["graph_breaks"]),
        _html_recompiles(report["recompiles"]),
        _html_time(report["time"]),
        _html_entries(report["compiles"]),
    ]
    data = json.dumps(_timeline_data(report)).replace("<", "\\u003c")
    return (_PAGE.replace("__CSS__", _CSS).replace("__BODY__", "\n".join(sections))
            .replace("__DATA__", data).replace("__SCRIPT__", _SCRIPT))


def _e(text: Any) -> str:
    return html.escape(str(text))


def _html_breaks(breaks: list[dict[str, Any]]) -> str:
    if not breaks:
        return "<section id=breaks><h2>1. Graph breaks</h2><p>None.</p></section>"
    items = []
    for group in breaks:
        line = _line_number(group["location"])
        source = "".join(
            f"<span class='{'hit' if number == line else ''}'>{number:>5} | {_e(text)}\n</span>"
            for number, text in group["context"])
        hints = "".join(f"<li>hint: {_e(hint)}</li>" for hint in group["hints"])
        items.append(
            f"<div class=break><h3><span class=count>{group['count']}&times;</span> "
            f"<code>{_e(group['type'])}</code> at <code>{_e(short(group['location']))}</code> "
            f"in {_e(', '.join(group['functions']))}</h3>"
            f"<pre class=source>{source or _e(group['source_line'] or '')}</pre>"
            f"<p>reason: {_e(group['reason'])}</p><ul>{hints}</ul>"
            f"<p class=dim>then: {_e(group['outcome'])}</p></div>")
    return (f"<section id=breaks><h2>1. Graph breaks</h2><p class=first>Fix these first: "
            f"{sum(g['count'] for g in breaks)} break(s) at {len(breaks)} location(s).</p>"
            f"{''.join(items)}</section>")


def _html_recompiles(recompiling: list[dict[str, Any]]) -> str:
    cards = []
    for item in recompiling:
        top = item["top_guard"]
        limit = "".join(f" &middot; <b>hit config.{_e(hit['which'])} ({hit['limit']})</b>"
                        for hit in item["limits"][:1])
        guard = (f"<p>guard that failed most often ({top['count']} of {item['failures']}): "
                 f"<code>{_e(top['example'])}</code></p><p class=dim>values seen: "
                 f"{_e(', '.join(top['values']))}</p>" if top else "")
        notes = "".join(f"<li>{_e(note)}</li>" for note in item["notes"])
        cards.append(
            f"<div class='recompile {_e(item['cause'])}'><h3>{_e(item['function'])} "
            f"<code>{_e(short(item['location']))}</code></h3>"
            f"<p>{item['compiles']} compiles{limit}</p>{guard}"
            f"<p>triage <span class=cause>{_e(item['cause'])}</span>: {_e(item['problem'])}</p>"
            f"<p>fix: {_e(item['fix'])}</p><ul>{notes}</ul></div>")
    body = "".join(cards) or "<p>None: every function compiled once.</p>"
    return (f"<section id=recompiles><h2>2. Recompiles</h2><h3>Timeline</h3>"
            f"<div id=timeline></div>{body}</section>")


def _html_time(summary: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{_e(row['function'])}</td><td>{row['calls']}</td><td>{row['hit_rate']:.0%}</td>"
        f"<td>{row['compiles']}</td><td>{row['seconds']['translate'] * 1e3:.2f}</td>"
        f"<td>{row['seconds']['backend'] * 1e3:.2f}</td>"
        f"<td>{row['seconds']['guards'] * 1e3:.2f}</td></tr>" for row in summary["functions"])
    return (f"<section id=time><h2>3. Time</h2><table><tr><th>function</th><th>calls</th>"
            f"<th>hit rate</th><th>compiles</th><th>translate ms</th><th>backend ms</th>"
            f"<th>guards ms</th></tr>{rows}</table><p>compile time "
            f"{summary['compile_seconds'] * 1e3:.1f} ms, cache-hit rate {summary['hit_rate']:.0%}"
            f"</p><p class=conclusion>{_e(time_conclusion(summary))}</p></section>")


def _html_entries(compiles: list[dict[str, Any]]) -> str:
    items = []
    for record in compiles:
        anchor = "compile-" + record["compile_id"].replace("/", "-")
        reasons = "".join(f"<li>{_e(reason)}</li>" for reason in record["reasons"])
        guards = "".join(f"<li><code>{_e(guard)}</code></li>" for guard in record["guards"])
        graph = (f"<pre class=graph>{_e(record['graph_code'])}</pre>" if record["graph_code"]
                 else "<p class=dim>no graph</p>")
        breaks = "".join(f"<li>graph break: {_e(b['type'])} at {_e(short(b['location']))}</li>"
                         for b in record["breaks"])
        items.append(
            f"<details class=entry id={anchor}><summary><code>{_e(record['compile_id'])}</code> "
            f"{_e(record['function'])} &middot; {record['op_count']} ops &middot; "
            f"{len(record['guards'])} guards</summary>"
            f"{'<p>recompiled because:</p><ul>' + reasons + '</ul>' if reasons else ''}"
            f"<ul>{breaks}</ul><p>guards:</p><ol class=guards>{guards}</ol>{graph}</details>")
    return (f"<section id=entries><h2>Cache entries</h2>{''.join(items) or '<p>None.</p>'}"
            f"</section>")


def _timeline_data(report: dict[str, Any]) -> dict[str, Any]:
    """What the page's script draws: per function, its compiles and limit hits, placed by
    ``order`` (the how-manieth compile of the run), so that a slow compile crowds nothing."""
    rows: dict[str, dict[str, Any]] = {}
    for order, record in enumerate(report["compiles"]):
        row = rows.setdefault(f"{record['function']} {record['location']}", {
            "function": record["function"], "compiles": [], "limits": []})
        failure = Failure.parse(record["reasons"][0]) if record["reasons"] else None
        row["compiles"].append({
            "id": record["compile_id"], "order": order, "time": record["time"],
            "cause": triage(failure.guard).value if failure else "first",
            "reason": failure.text if failure else "first compile"})
    times = [record["time"] for record in report["compiles"]]
    for limit in report["limits"]:
        row = rows.get(f"{limit['function']} {limit['location']}")
        if row is not None:
            order = bisect.bisect_right(times, limit["time"]) - 0.5
            row["limits"].append({"order": order, "time": limit["time"],
                                  "which": limit["which"]})
    return {"rows": list(rows.values()), "count": len(times), "colors": TIMELINE_COLORS}


# The timeline's dot colour per cause of the recompile ("first": a function's first compile).
TIMELINE_COLORS = {
    "first": "#999999", Cause.SCALAR.value: "#d68910", Cause.SIZE.value: "#8e44ad",
    Cause.GLOBAL_STATE.value: "#2874a6", Cause.IDENTITY.value: "#c0392b",
    Cause.TYPE.value: "#16a085", Cause.TENSOR_PROPERTY.value: "#7d6608",
    Cause.CONTAINER.value: "#1e8449", Cause.ALIASING.value: "#6c3483",
    Cause.OPTIONS.value: "#34495e", Cause.OTHER.value: "#555555",
}

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>graphlift doctor</title><style>__CSS__</style></head>
<body>
__BODY__
<script type="application/json" id="doctor-data">__DATA__</script>
<script>__SCRIPT__</script>
</body></html>
"""

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
code, pre { font: 12px/1.4 ui-monospace, monospace; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; }
.meta, .dim { color: #666; }
.verdict { padding: .6em 1em; border-left: 4px solid #888; background: #f4f4f4; }
.verdict.graph_breaks { border-color: #c0392b; } .verdict.recompiles { border-color: #d68910; }
.verdict.backend { border-color: #2874a6; }
.break, .recompile { border: 1px solid #ddd; border-radius: 4px; padding: 0 1em; margin: .8em 0; }
.count { color: #c0392b; } .source .hit { background: #fdecea; font-weight: bold; }
.cause { background: #fcf3cf; padding: 0 .3em; border-radius: 3px; }
table { border-collapse: collapse; } td, th { border: 1px solid #ddd; padding: .2em .6em; }
td + td { text-align: right; }
.legend span { margin-right: 1.2em; }
#timeline svg text { font: 11px system-ui, sans-serif; } #timeline circle { cursor: pointer; }
details.entry { margin: .3em 0; } details.entry:target { outline: 2px solid #2874a6; }
"""

# Draws the recompile timeline from the JSON data, then marks the page as rendered (data-ok).
_SCRIPT = """
(function () {
  var SVG = 'http://www.w3.org/2000/svg';
  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    parent.appendChild(node);
    return node;
  }
  function draw(box, data) {
    var rows = data.rows, colors = data.colors, used = {};
    if (!rows.length) { box.textContent = 'Nothing was compiled.'; return; }
    var left = 200, width = 640, step = 26, span = Math.max(data.count - 1, 1);
    function x(order) { return left + 10 + Math.max(order, 0) / span * (width - 20); }
    var svg = el('svg', {width: left + width + 10, height: rows.length * step + 30,
                         role: 'img'}, box);
    rows.forEach(function (row, i) {
      var y = 20 + i * step;
      el('text', {x: 4, y: y + 4}, svg).textContent =
        row.function + ' (' + row.compiles.length + ')';
      el('line', {x1: left, x2: left + width, y1: y, y2: y, stroke: '#ddd'}, svg);
      row.limits.forEach(function (l) {
        var mark = el('rect', {x: x(l.order) - 2, y: y - 9, width: 4, height: 18,
                               fill: '#c0392b', 'class': 'limit'}, svg);
        el('title', {}, mark).textContent =
          'hit config.' + l.which + ' at ' + l.time.toFixed(3) + ' s: later misses run eagerly';
      });
      row.compiles.forEach(function (c) {
        used[c.cause] = true;
        var dot = el('circle', {cx: x(c.order), cy: y, r: 5, 'class': 'compile ' + c.cause,
                                fill: colors[c.cause] || colors.other}, svg);
        el('title', {}, dot).textContent =
          c.id + ' at ' + c.time.toFixed(3) + ' s: ' + c.reason;
        dot.addEventListener('click', function () {
          var entry = document.getElementById('compile-' + c.id.replace('/', '-'));
          if (entry) { entry.open = true; entry.scrollIntoView(); }
        });
      });
    });
    el('text', {x: left, y: rows.length * step + 24}, svg).textContent =
      'compiles in the order they happened; hover a dot for the guard that failed, ' +
      'click it for the cache entry';
    var legend = document.createElement('p');
    legend.className = 'legend';
    Object.keys(used).forEach(function (cause) {
      var item = document.createElement('span');
      item.innerHTML = '&#9679; ';
      item.style.color = colors[cause] || colors.other;
      item.appendChild(document.createTextNode(cause === 'first' ? 'first compile' : cause));
      legend.appendChild(item);
    });
    box.appendChild(legend);
  }
  var data = JSON.parse(document.getElementById('doctor-data').textContent);
  draw(document.getElementById('timeline'), data);
  document.body.setAttribute('data-ok', '1');
})();
"""
