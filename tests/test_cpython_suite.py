"""CPython's own test suite compiled (benchmarks/cpython_suite.py), on its smallest module.

The runner takes ``test_bool`` from the running interpreter's ``test`` package and runs each test
method eagerly, compiled by graphlift, and compiled with ``fullgraph=True``, in a process of its
own. No test that passes eagerly may fail compiled (a wrong result), and graphlift must pass
under ``fullgraph=True`` at least the tests torch.compile passes there (its figures recorded per
CPython version in ``benchmarks/cpython_suite_torch.json`` by ``--frontend torch --record``).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
RUNNER = ROOT / "benchmarks" / "cpython_suite.py"
MODULE = "test_bool"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("cpython_suite") / "outcomes.json"
    done = subprocess.run([sys.executable, str(RUNNER), MODULE, "--json", str(out),
                           "--timeout", "60"], capture_output=True, text=True, timeout=600,
                          cwd=str(ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    (result,) = json.loads(out.read_text())
    assert "error" not in result, result
    return result


def _summary(result: dict) -> dict:
    sys.path.insert(0, str(RUNNER.parent))
    try:
        import cpython_suite
    finally:
        sys.path.remove(str(RUNNER.parent))
    return cpython_suite.summary(result), cpython_suite.torch_figures().get(MODULE)


def test_no_wrong_result(outcomes) -> None:
    """Every test that passes eagerly passes compiled (breaks allowed)."""
    counts, _ = _summary(outcomes)
    assert counts["eager_passed"] >= 25, counts  # the module ran: 30 tests on 3.11
    assert counts["wrong"] == [] and counts["timeouts"] == [], counts
    assert counts["passed"] == counts["eager_passed"]


def test_fullgraph_passes_at_least_torch_compiles(outcomes) -> None:
    """Under fullgraph=True graphlift passes as many of the module's tests as torch.compile."""
    counts, theirs = _summary(outcomes)
    if theirs is None:
        pytest.skip(f"no torch.compile figures recorded for CPython {sys.version_info[:2]}")
    assert theirs["eager_passed"] == counts["eager_passed"]
    assert counts["fullgraph"] >= theirs["fullgraph_passed"], (counts, theirs)


def test_outcomes_are_per_test(outcomes) -> None:
    """Each test has its outcome, and its graphs and breaks under graphlift."""
    tests = outcomes["tests"]
    assert "BoolTest.test_math" in tests
    passed = [test for test in tests.values() if test["outcome"] == "pass"]
    assert all({"graphs", "breaks", "fullgraph", "causes"} <= set(test) for test in passed)
