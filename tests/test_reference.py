"""The recording of torch.compile's figures is what torch.compile does (see tests/reference).

Every measure the suite registers runs again here, in fresh processes of the running CPython
(torch.compile never runs in the suite's own processes), split in shards so that the two
pytest workers share them; a figure that differs from its recording, a registered figure with
no recording and a recorded one that no test registers fail, each named with both values.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import reference

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARDS = 3


@pytest.mark.parametrize("shard", [f"{i}/{SHARDS}" for i in range(1, SHARDS + 1)])
def test_the_recording_is_what_torch_compile_does(shard):
    run = subprocess.run([sys.executable, "-m", "tests.reference", "check", "--shard", shard],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    differs = [line for line in run.stdout.splitlines() if line.startswith("DIFFERS")]
    assert run.returncode == 0, "\n".join(differs) or run.stdout[-3000:] + run.stderr[-3000:]


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
    data = reference._recording.__wrapped__(reference.VERSION)
    assert data, f"no recording for CPython {reference.VERSION}: make reference"


def test_the_suite_would_see_a_torch_compile_run():
    """conftest's check fails a test that ran torch.compile: shown in a process of its own."""
    script = ("import sys; sys.path.insert(0, 'tests'); import torch, conftest; "
              "before = conftest.torch_compile_has_run(); "
              "torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2)); "
              "print(before, conftest.torch_compile_has_run())")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.stdout.split() == ["False", "True"], run.stderr[-2000:]
