"""The recording of torch.compile's figures is current (see tests/reference).

torch is pinned, so a recorded figure stays what torch.compile gives while the test code of its
measure is unchanged; each figure is recorded with that code's fingerprint. Here, in a fresh
process of the running CPython (torch.compile never runs in the suite's processes, and here not
at all), every registered measure's fingerprint is compared with the recorded one: a measure
edited without recording anew, a registered figure with no recording and a recorded one that
no test registers fail, each named. ``python -m tests.reference check`` measures every figure
again (after a change of torch or of the interpreter).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import reference
from reference.fingerprint import fingerprint

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_recording_is_current():
    run = subprocess.run([sys.executable, "-m", "tests.reference", "current"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    stale = [line for line in run.stdout.splitlines() if line.startswith("STALE")]
    assert run.returncode == 0, "\n".join(stale) or run.stdout[-3000:] + run.stderr[-3000:]


def _scaled(x, k=2):
    return x * k


def _scaled_more(x, k=2):
    return x * k + 1


def test_a_fingerprint_follows_the_code_a_measure_runs(monkeypatch):
    def measure_a():
        return _scaled(1)

    def measure_b():
        return _scaled(1, k=3)

    assert fingerprint(measure_a) == fingerprint(measure_a)
    assert fingerprint(measure_a) != fingerprint(measure_b)  # its own code
    before = fingerprint(measure_a)
    monkeypatch.setitem(globals(), "_scaled", _scaled_more)  # the helper it calls, changed
    assert fingerprint(measure_a) != before


def test_the_staleness_report_names_each_kind():
    figures = {"a": 1, "b": 2, "gone": 3}
    recorded_prints = {"a": "f1", "b": "old"}
    problems = reference.stale(figures, recorded_prints, {"a": "f1", "b": "f2", "new": "f3"})
    assert [p.split(":")[0] for p in problems] == ["b", "new", "gone"]
    assert "changed since it was recorded" in problems[0]
    assert "not recorded" in problems[1] and "no test registers it" in problems[2]


def test_the_comparison_names_each_kind_of_difference():
    figures = {"a": {"graphs": 1}, "b": 2, "gone": 3}
    measured = {"a": {"graphs": 1}, "b": 5, "new": 0}
    problems = reference.differences(figures, measured, registered={"a", "b", "new"})
    assert [p.split(":")[0] for p in problems] == ["b", "new", "gone"]
    assert "recorded 2, torch.compile now gives 5" in problems[0]
    assert reference.differences(figures, {"a": {"graphs": 1}}) == []


def test_a_key_is_registered_once_and_read_only_when_recorded():
    def count() -> int:
        return 1

    key = "reference_self_check/never_recorded"
    assert reference.measure(key, count) == key
    try:
        with pytest.raises(ValueError, match="registered twice"):
            reference.measure(key, lambda: 2)
        with pytest.raises(LookupError, match="no recording of torch.compile's"):
            reference.recorded(key)
    finally:
        del reference.MEASURES[key]


def test_the_recording_names_the_pinned_torch():
    data = reference._data.__wrapped__(reference.VERSION)
    assert data["figures"], f"no recording for CPython {reference.VERSION}: make reference"


def test_the_suite_would_see_a_torch_compile_run():
    """conftest's check fails a test that ran torch.compile: shown in a process of its own."""
    script = ("import sys; sys.path.insert(0, 'tests'); import torch, conftest; "
              "before = conftest.torch_compile_has_run(); "
              "torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2)); "
              "print(before, conftest.torch_compile_has_run())")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.stdout.split() == ["False", "True"], run.stderr[-2000:]
