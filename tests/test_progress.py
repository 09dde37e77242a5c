"""Progress of long compiles: past ``config.progress_seconds`` a compile says what it is doing.

No test depends on how fast the machine is: the mark is set to 0 (every compile is "long") or
out of reach, and the one test of the timer thread waits for the timer's message before letting
the compile go on.
"""

from __future__ import annotations

import logging
import re
import threading

import pytest
import torch

import graphlift
from graphlift import progress

LOGGER = "graphlift.progress"


def scale_then_print(x, n):
    y = torch.sin(x) * n
    print("halfway")
    return y + 1


@pytest.fixture
def progress_log(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    return lambda: [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_a_compile_under_the_mark_logs_nothing(progress_log, capsys):
    with graphlift.config.patch(progress_seconds=1e9):
        graphlift.compile(scale_then_print)(torch.ones(3), 2)
    assert progress_log() == []


def test_a_long_compile_logs_each_phase_and_their_seconds(progress_log, capsys):
    compiled = graphlift.compile(scale_then_print, backend="aot_eager")
    with graphlift.config.patch(progress_seconds=0.0):
        torch.testing.assert_close(compiled(torch.ones(3), 2), scale_then_print(torch.ones(3), 2))
    lines = progress_log()
    label = f"scale_then_print ({__file__}:{scale_then_print.__code__.co_firstlineno})"
    started = [line for line in lines if line.startswith(f"compiling {label}: in ")]
    # At the print the frame is traced a second time, up to the break, then compiled.
    assert [line.split(": in ")[1].split(" after")[0] for line in started] == [
        "setup", "translate", "setup", "translate", "backend 'aot_eager'", "guards", "codegen"]
    assert all(re.search(r" after \d+\.\d\d s( \(\w+ took \d+\.\d\d s\))?$", line)
               for line in started)
    (summary,) = [line for line in lines if line.startswith(f"compiled {label} in ")]
    phases = summary.split(": ", 1)[1].split(", ")
    assert [phase.split()[0] for phase in phases] == [
        "setup", "translate", "backend", "guards", "codegen"]
    assert all(re.fullmatch(r"\w+ \d+\.\d\d s", phase) for phase in phases)
    # The resume function after the break is a compile of its own.
    assert any(line.startswith("compiled __resume_at_") for line in lines)


def test_the_timer_names_a_phase_while_it_runs(progress_log, capsys):
    """The backend below waits until a thread other than the compiling one has logged: only the
    timer can, while the compile is inside the backend (or a phase before it)."""
    heard = threading.Event()

    class TimerListener(logging.Handler):
        def emit(self, record):
            if threading.current_thread() is not threading.main_thread():
                heard.set()

    def waiting_backend(gm, example_inputs):
        assert heard.wait(60), "the progress timer never logged"
        return gm.forward

    listener = TimerListener()
    logging.getLogger(LOGGER).addHandler(listener)
    try:
        with graphlift.config.patch(progress_seconds=0.01):
            graphlift.compile(lambda x: x * 2, backend=waiting_backend)(torch.ones(2))
    finally:
        logging.getLogger(LOGGER).removeHandler(listener)
    mark = re.compile(r"compiling \S*<lambda> \(.*\) for \d+\.\d s: (starting|in \w+)")
    assert len([line for line in progress_log() if mark.match(line)]) == 1
    assert re.match(r"compiled \S*<lambda> ", progress_log()[-1])


def test_phases_are_a_closed_set():
    timing = progress.CompileTiming("f (m.py:1)")
    with pytest.raises(ValueError, match="unknown compile phase 'linking'; known: setup, "):
        timing.begin("linking")


def test_the_announcement_names_the_phase_and_what_came_before(progress_log):
    timing = progress.CompileTiming("forward (m.py:12)")
    timing.begin("translate")
    timing.begin("backend", "inductor")
    with graphlift.config.patch(progress_seconds=0.0):
        timing.announce()
        timing.begin("guards")
        timing.finish()
    first, second, last = progress_log()
    assert re.fullmatch(r"compiling forward \(m\.py:12\) for \d+\.\d s: in backend 'inductor' "
                        r"\(translate took \d+\.\d\d s\)", first)
    assert re.fullmatch(r"compiling forward \(m\.py:12\): in guards after \d+\.\d\d s "
                        r"\(backend took \d+\.\d\d s\)", second)
    assert re.fullmatch(r"compiled forward \(m\.py:12\) in \d+\.\d\d s: translate \d+\.\d\d s, "
                        r"backend \d+\.\d\d s, guards \d+\.\d\d s", last)
    assert set(timing.seconds()) == {"translate", "backend", "guards"}


def test_graphlift_logs_progress_turns_the_lines_on(monkeypatch):
    monkeypatch.setenv("GRAPHLIFT_LOGS", "progress")
    graphlift.logs.configure_from_env()
    try:
        assert logging.getLogger(LOGGER).isEnabledFor(logging.INFO)
    finally:
        graphlift.set_logs(progress=False)
    assert not logging.getLogger(LOGGER).isEnabledFor(logging.INFO)
