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

Two modules, imported one way (``render`` reads ``report``, never the reverse)::

    report   run the script; the recording -> the report, a JSON-ready dict (triage, verdict, time)
    render   the report -> text (the terminal), JSON (``--json``), a self-contained HTML page

:func:`run` returns the report; :func:`format_text`, :func:`format_json` and :func:`format_html`
render it. The report's keys are listed in :mod:`graphlift.doctor.report`.
"""

from graphlift.doctor.render import format_html, format_json, format_text, write_html
from graphlift.doctor.report import PROBLEMS, Cause, Failure, build_report, exit_status, run, triage

__all__ = [
    "PROBLEMS",
    "Cause",
    "Failure",
    "build_report",
    "exit_status",
    "format_html",
    "format_json",
    "format_text",
    "run",
    "triage",
    "write_html",
]
