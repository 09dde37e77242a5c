"""The doctor's report: one run's recording turned into plain, JSON-ready data.

:func:`run` runs the script with recording on and returns :func:`build_report`'s dict. Everything
here is data and the reasoning behind it (grouping breaks, triaging the failing guard of each
recompiling function, the time summary, the verdict); :mod:`graphlift.doctor.render` turns it into
text, JSON and HTML, and this module never imports it. The report's keys: ``script``, ``args``,
``exit_code``, ``seconds``, ``recorded``, ``verdict`` (``problem``: one of :data:`PROBLEMS`, and
``summary``), ``verify_failures`` (entries verify mode caught returning what eager does not,
each with its difference and reproducer), ``graph_breaks``, ``recompiles``, ``time``, and the raw
``compiles`` and ``limits`` of the recording (guards and graph code per cache entry, for the HTML
page).
"""

from __future__ import annotations

import ast
import enum
import json
import linecache
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from graphlift import events

# The verdict's closed set: what to look at first, in the routine's order. Wrong results found
# by verify mode (GRAPHLIFT_VERIFY=N) come before everything: a fast wrong answer is no answer.
PROBLEMS = ("wrong_results", "nothing_compiled", "graph_breaks", "recompiles", "backend")


# -- triage of a failing guard -------------------------------------------------------------------
class Cause(enum.Enum):
    """Why a guard keeps failing: the closed set of triage categories, each with its advice."""

    SCALAR = "scalar"
    SIZE = "size"
    GLOBAL_STATE = "global_state"
    IDENTITY = "identity"
    MODULE_STRUCTURE = "module_structure"
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
    # "nn_module_structure(L['self']) == 3": a module argument built differently
    (re.compile(r"^nn_module_structure\("), Cause.MODULE_STRUCTURE),
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
    # "400 mutated inputs from L['x'] on are distinct objects, ..." (one guard for many pairs)
    (re.compile(r"^\d+ mutated inputs from "), Cause.ALIASING),
    # "L['n'] == 3", "L['flag'] is True": a Python value compared by value
    (re.compile(r" (==|is) "), Cause.SCALAR),
)


@dataclass(frozen=True)
class Advice:
    problem: str
    fix: str


ADVICE: dict[Cause, Advice] = {
    Cause.SCALAR: Advice(  # the fix is SCALAR_FIXES's, by the kind of value
        "a Python scalar compared by value keeps failing: something that varies was baked "
        "into the graph as a constant", "pass it as a tensor, or keep it to a few values"),
    Cause.SIZE: Advice(
        "a size guard keeps failing: automatic dynamic should have taken over on the second "
        "compile", "if it did not, suspect 0/1 specialization (a batch of 1) or a mark_static"),
    Cause.GLOBAL_STATE: Advice(
        "global state (grad mode, autocast, default dtype) flips between calls",
        "pin it: set it once around all the calls, not differently for some of them"),
    Cause.IDENTITY: Advice(
        "a module or function identity changes: a new object on every call",
        "define it once, outside the loop, and pass the same object every time"),
    Cause.MODULE_STRUCTURE: Advice(
        "module arguments differ in structure (classes, parameter shapes or dtypes, hooks, "
        "torch.nn hyperparameters): each structure gets an entry of its own",
        "build the blocks alike, or expect one entry per kind of block"),
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


# The fix for a scalar compared by value depends on what kind of value it is: an int or a float
# can become dynamic (a float not under aot_eager or inductor, which specialize it); a bool or a
# str is specialized by value always (as in torch.compile).
SCALAR_FIXES: dict[str, str] = {
    "int": "compute with a tensor, or keep it to a few values: automatic dynamic makes a varying "
           "int a symbol, except where the code needs its value (see the note)",
    "float": "pass it as a tensor (torch.tensor(value)), or keep it out of Python branches and "
             "conversions: automatic dynamic makes a varying float a graph input, except where "
             "the code needs its value or under aot_eager and inductor",
    "bool": "pass it as a tensor and use torch.where, or branch outside the compiled function",
    "str": "keep it to a few values (each one is a graph of its own), or choose outside the "
           "compiled function and pass a tensor",
    "other": "pass it as a tensor, or keep it to a few values",
}


def scalar_kind(values: list[str]) -> str:
    """``"int"``, ``"float"``, ``"bool"``, ``"str"`` or ``"other"`` for a scalar's values seen."""
    def kind(text: str) -> str:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return "other"
        return next((name for name, cls in (("bool", bool), ("int", int), ("float", float),
                                             ("str", str)) if isinstance(value, cls)), "other")

    kinds = {kind(value) for value in values}
    if kinds == {"int", "float"}:
        return "float"  # a float that happened to be whole somewhere
    return kinds.pop() if len(kinds) == 1 else "other"


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
    origin: str | None = None  # "y = x * n  at demo.py:5": the user's line behind the guard

    @classmethod
    def parse(cls, reason: str) -> Failure:
        match = _REASON.match(reason)
        compile_id, guard, now, origin = match.group("compile_id", "guard", "now", "origin")
        return cls(compile_id, guard, now, *split_guard(guard), origin)

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


# "0/1: L['n'] == 3 (now 4)  # y = x * n  at demo.py:5": the now and the origin are optional.
_REASON = re.compile(r"^(?P<compile_id>[^:]*): (?P<guard>.*?)(?: \(now (?P<now>.*?)\))?"
                     r"(?:  # (?P<origin>.*))?$", re.S)
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
        env = {**os.environ, events.ENV_VAR: path, **_pythonpath()}
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


def _pythonpath() -> dict[str, str]:
    """PYTHONPATH for the script, when graphlift runs from a source tree: that tree first, so that
    the script records with the same graphlift as the doctor that reads the recording. (An
    installed graphlift is found on the script's path already.)"""
    home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.basename(home) in ("site-packages", "dist-packages"):
        return {}
    return {"PYTHONPATH": os.pathsep.join([home, *filter(None, [os.environ.get("PYTHONPATH")])])}


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
        "internal_errors": recording.get("internal_errors", []),  # graphlift's own failures
        "verify_failures": recording.get("verify_failures", []),
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
            "id": first["id"], "docs": first["docs"],
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
    number = line_number(location)
    if number is None:
        return []
    path = location.rpartition(":")[0]
    lines = [[n, linecache.getline(path, n).rstrip("\n")]
             for n in range(max(1, number - around), number + around + 1)]
    while lines and not lines[-1][1]:
        lines.pop()
    return lines


def line_number(location: str) -> int | None:
    """The line of ``file:line``; None when the location has none (``<unknown>``)."""
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
    kind = scalar_kind(top["values"]) if cause is Cause.SCALAR else None
    return {
        "function": function, "location": location, "compiles": len(item["entries"]),
        "limit_hit": bool(item["limits"]), "limits": item["limits"],
        "failures": len(failures), "top_guard": top, "guards": guards,
        "cause": cause.value, "problem": advice.problem, "scalar_kind": kind,
        "fix": SCALAR_FIXES[kind] if kind else advice.fix,
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
    wrong = report["verify_failures"]
    if wrong:
        return {"problem": "wrong_results",
                "summary": f"verify mode caught {len(wrong)} cache entr"
                           f"{'y' if len(wrong) == 1 else 'ies'} returning what eager does not "
                           f"({', '.join(sorted({w['function'] for w in wrong}))}): a bug in "
                           f"graphlift; those calls now run eagerly. Report it with the "
                           f"reproducer below."}
    if not report["compiles"]:
        why = ("the script did not import graphlift, or exited without running atexit "
               "handlers (os._exit, a crash)" if not report["recorded"]
               else "no compiled function was called")
        return {"problem": "nothing_compiled", "summary": f"graphlift compiled nothing: {why}."}
    if breaks:
        count = sum(group["count"] for group in breaks)
        summary = (f"{count} graph break{plural(count)} at {len(breaks)} "
                   f"location{plural(breaks)}: fix these first.")
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


def plural(count: int | list) -> str:
    """The plural ending for ``count`` things (or as many as a list holds)."""
    count = count if isinstance(count, int) else len(count)
    return "" if count == 1 else "s"
