"""Guard and recompile messages point at the user's code (issue 17).

Each guard that a traced line relied on names that line (``L['n'] == 2  # for i in range(n):
at f.py:5``), as torch.compile's guard log does: the test checks that both name the same line
(what torch.compile's own guard log names for the same function is recorded: tests/reference).
A value that became dynamic but is still guarded says why; guards of resume functions never show
graphlift's internal names.
"""

import contextlib
import linecache
import logging
import re

import pytest
import torch
from reference import measure, recorded

import graphlift
from graphlift import logs


def line_of(fn, text: str) -> int:
    """The line number of ``text`` within ``fn``'s source."""
    first = fn.__code__.co_firstlineno
    for number in range(first, first + 50):
        if text in linecache.getline(__file__, number):
            return number
    raise AssertionError(text)


def loops(x, n):
    y = x * 2
    for i in range(n):
        y = y + i
    return y


@contextlib.contextmanager
def captured(logger_name: str):
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def graphlift_logs():
    logs.set_logs(guards=True, recompiles=True)
    with captured("graphlift") as records:
        yield records
    logs.set_logs()


def torch_guard_origin(fn, args, guard: str) -> dict:
    """The ``# line  # file:N in f`` comment torch.compile's guard log puts after ``guard``: the
    line's text, and its number counted from ``fn``'s first line (the recording stays true when
    lines above ``fn`` move)."""
    torch._logging.set_logs(guards=True)
    try:
        with captured("torch._dynamo.guards.__guards") as records:
            torch.compile(fn, backend="eager")(*args)
    finally:
        torch._logging.set_logs()
    text = "\n".join(records)
    match = re.search(re.escape(guard) + r"\s+# (?P<line>.*?)  # .*?:(?P<number>\d+) in ", text)
    if match is None:
        return None  # no such guard, or no comment after it
    return {"line": match["line"], "offset": int(match["number"]) - fn.__code__.co_firstlineno}


def _torch_compile_origin_of_n() -> dict | None:
    return torch_guard_origin(loops, (torch.ones(3), 2), "L['n'] == 2")


measure("guard_messages/guard_origin_of_range_n", _torch_compile_origin_of_n)


def test_each_guard_names_the_line_that_read_the_value_as_torch_compile_does(graphlift_logs):
    graphlift.compile(loops)(torch.ones(3), 2)
    text = "\n".join(graphlift_logs)
    line = line_of(loops, "for i in range(n)")
    assert f"  - L['n'] == 2  # for i in range(n):  at {__file__}:{line}" in text.splitlines()
    assert f"  - L['x'].size()[0] == 3  # y = x * 2  at {__file__}:{line - 1}" in text.splitlines()
    assert recorded("guard_messages/guard_origin_of_range_n") == \
        {"line": "for i in range(n):", "offset": line - loops.__code__.co_firstlineno}


def test_the_recompile_reason_names_the_line_and_why_a_dynamic_value_stays_guarded(
        graphlift_logs):
    compiled = graphlift.compile(loops)
    for n in (2, 3, 4):
        compiled(torch.ones(3), n)
    line = line_of(loops, "for i in range(n)")
    text = "\n".join(graphlift_logs)
    assert f"    - 0/0: L['n'] == 2 (now 3)  # for i in range(n):  at {__file__}:{line}" \
        in text.splitlines()
    # n became dynamic after the second call, but range(n) needs the value: still guarded.
    assert f"    - 0/1: L['n'] == 3 (now 4)  # for i in range(n):  at {__file__}:{line} " \
        "(was dynamic; this line needs the exact value, so the value is guarded)" \
        in text.splitlines()
    assert graphlift.stats(compiled).compiles == 3


def leaves_a_tensor_on_the_stack(x, n):
    k = n
    y = x.sin() * len([print("break"), k])
    return y


def test_guards_of_a_resume_function_show_no_internal_names(graphlift_logs, capsys):
    compiled = graphlift.compile(leaves_a_tensor_on_the_stack)
    assert torch.equal(compiled(torch.ones(3), 2), leaves_a_tensor_on_the_stack(torch.ones(3), 2))
    text = "\n".join(graphlift_logs)
    guard_lines = [line for line in text.splitlines() if line.startswith("  - ")]
    assert any("<stack value" in line for line in guard_lines)  # a value the break left
    assert not any("__gl_" in line for line in guard_lines), guard_lines
    for entry in graphlift.cache_entries(compiled):
        assert not any("__gl_" in guard for guard in entry.guards)


def test_guards_the_call_itself_fixes_carry_no_line():
    """Global state is read by no line of the user's: those guards show no origin."""
    compiled = graphlift.compile(loops)
    compiled(torch.ones(3), 2)
    (entry,) = graphlift.cache_entries(compiled)
    shown = entry.compiled_guards.shown_texts()
    assert "torch.is_grad_enabled() == True" in shown


STATE: dict = {}


def counts_the_state(x):
    for _ in STATE:
        x = x + 1
    return x


def test_what_a_miss_sees_now_is_shown_short(graphlift_logs):
    """A tensor is shown by its type, shape and dtype and a long list cut short: a miss on an
    optimizer's state (keyed by Parameters) once printed every Parameter's data."""
    compiled = graphlift.compile(counts_the_state)
    compiled(torch.ones(2))
    STATE.update({torch.nn.Parameter(torch.ones(2, 3)): 0, **{i: i for i in range(10)}})
    try:
        compiled(torch.ones(2))
    finally:
        STATE.clear()
    reasons = [line for line in graphlift_logs for line in line.splitlines() if "(now " in line]
    line = line_of(counts_the_state, "for _ in STATE")
    assert reasons == ["    - 0/0: list(G['STATE']) == [] (now [Parameter(shape=[2, 3], "
                       "dtype=torch.float32), 0, 1, 2, 3, 4, ...])  # for _ in STATE:  at "
                       f"{__file__}:{line}"], reasons
