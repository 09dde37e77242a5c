"""Recompiles and their limits: the log text, the limit warning, run-only mode, and the knobs.

Messages are checked line by line against the formats in the spine issue; behaviour (compiles,
hits, eager frames) is checked through ``graphlift.stats``, results against eager. Functions are
compiled with ``dynamic=False``: these tests are about specialized ints (automatic dynamic shapes
would make a changing int dynamic on the first recompile).
"""

import logging
import subprocess
import sys

import pytest
import torch
from corpus.harness import assert_same

import graphlift
from graphlift.testing import CompileCounter


def scale(x, n):
    return x * n


LOCATION = f"{scale.__code__.co_filename}:{scale.__code__.co_firstlineno}"
# What each reason names after the guard: the line of scale that read n.
READ_AT = f"  # return x * n  at {scale.__code__.co_filename}:{scale.__code__.co_firstlineno + 1}"


def check_same(compiled_fn, fn, *args):
    expected = fn(*args)
    got = compiled_fn(*args)
    assert_same(expected, got)
    return got


@pytest.fixture
def recompile_logs(caplog):
    """Turn on the ``recompiles`` artifact and capture everything under ``graphlift``."""
    graphlift.set_logs(recompiles=True)
    caplog.set_level(logging.INFO, logger="graphlift")
    yield caplog
    graphlift.set_logs(recompiles=False)


def messages(caplog, name, level=logging.INFO):
    return [r.getMessage() for r in caplog.records if r.name == name and r.levelno == level]


# -- the recompiles log ------------------------------------------------------------------------
def test_changing_an_int_recompiles_and_logs_the_reason(recompile_logs):
    compiled = graphlift.compile(scale, dynamic=False)
    x = torch.randn(3)
    check_same(compiled, scale, x, 3)
    check_same(compiled, scale, x, 3)
    assert messages(recompile_logs, "graphlift.recompiles") == []
    check_same(compiled, scale, x, 4)
    assert graphlift.stats(compiled).compiles == 2
    (message,) = messages(recompile_logs, "graphlift.recompiles")
    assert message.splitlines() == [
        f"Recompiling function scale in {LOCATION}",
        "    triggered by the following guard failure(s):",
        "    - 0/0: L['n'] == 3 (now 4)" + READ_AT,
    ]


def test_one_reason_line_per_entry_in_lookup_order(recompile_logs):
    compiled = graphlift.compile(scale, dynamic=False)
    x = torch.randn(3)
    for n in (1, 2, 3):
        check_same(compiled, scale, x, n)
    last = messages(recompile_logs, "graphlift.recompiles")[-1]
    assert last.splitlines()[2:] == [
        "    - 0/1: L['n'] == 2 (now 3)" + READ_AT,
        "    - 0/0: L['n'] == 1 (now 3)" + READ_AT,
    ]


def test_recompiles_are_silent_when_the_artifact_is_off(caplog):
    caplog.set_level(logging.DEBUG, logger="graphlift")
    compiled = graphlift.compile(scale, dynamic=False)
    for n in (1, 2):
        compiled(torch.randn(3), n)
    assert graphlift.stats(compiled).compiles == 2
    assert [r for r in caplog.records if r.name.startswith("graphlift")] == []


# -- the recompile limit -----------------------------------------------------------------------
def run_past_the_limit(compiled, calls=9):
    """Call with n = 1..calls; every call is compared with eager."""
    x = torch.randn(3)
    for n in range(1, calls + 1):
        check_same(compiled, scale, x, n)
    return x


def test_ninth_distinct_int_hits_the_limit_with_the_warning(recompile_logs):
    compiled = graphlift.compile(scale, dynamic=False)
    run_past_the_limit(compiled)
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.misses, stats.recompile_limit_hit) == (8, 9, True)
    assert len(graphlift.cache_entries(compiled)) == 8
    (warning,) = messages(recompile_logs, "graphlift", logging.WARNING)
    lines = warning.splitlines()
    assert lines[:3] == [
        "graphlift hit config.recompile_limit (8)",
        f"   function: 'scale' ({LOCATION})",
        "   last reason: 0/7: L['n'] == 8 (now 9)" + READ_AT,
    ]
    assert lines[3] == 'To log all recompilation reasons, use GRAPHLIFT_LOGS="recompiles".'
    causes = "\n".join(lines[4:])
    assert causes.startswith("Likely causes, each with its fix:")
    assert "pass it as a tensor" in causes  # each cause comes with its fix
    assert "sizes" in causes and "dynamic=False" in causes
    assert "grad mode" in causes and "pin it" in causes
    assert len(messages(recompile_logs, "graphlift.recompiles")) == 7  # 1 -> 2 ... 7 -> 8


def test_past_the_limit_misses_run_eagerly_and_entries_still_hit(recompile_logs):
    counter = CompileCounter()
    compiled = graphlift.compile(scale, backend=counter, dynamic=False)
    x = run_past_the_limit(compiled)
    for n in (10, 11, 9, 12):  # new values: eager, never compiled
        check_same(compiled, scale, x, n)
    assert counter.frame_count == 8
    for n in (1, 8, 5):  # values with entries: hits
        check_same(compiled, scale, x, n)
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.hits, stats.misses) == (8, 3, 13)
    assert [e.compile_id for e in graphlift.cache_entries(compiled)[:3]] == ["0/4", "0/7", "0/0"]
    assert len(messages(recompile_logs, "graphlift", logging.WARNING)) == 1


def test_warning_appears_once_without_recompile_logs(caplog):
    caplog.set_level(logging.WARNING, logger="graphlift")
    compiled = graphlift.compile(scale, dynamic=False)
    run_past_the_limit(compiled, calls=12)
    assert len(messages(caplog, "graphlift", logging.WARNING)) == 1


def test_reset_lifts_the_limit():
    compiled = graphlift.compile(scale, dynamic=False)
    x = run_past_the_limit(compiled)
    graphlift.reset()
    check_same(compiled, scale, x, 20)
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.recompile_limit_hit) == (1, False)


def test_fail_on_recompile_limit_hit_raises():
    compiled = graphlift.compile(scale, dynamic=False)
    with graphlift.config.patch(fail_on_recompile_limit_hit=True):
        run_past_the_limit(compiled, calls=8)
        with pytest.raises(graphlift.RecompileLimitExceeded, match="recompile_limit \\(8\\)"):
            compiled(torch.randn(3), 9)
    check_same(compiled, scale, torch.randn(3), 8)  # entries still serve hits
    assert graphlift.stats(compiled).compiles == 8


def test_fullgraph_at_the_limit_raises():
    compiled = graphlift.compile(scale, fullgraph=True, dynamic=False)
    run_past_the_limit(compiled, calls=8)
    with pytest.raises(graphlift.RecompileLimitExceeded, match="function: 'scale'"):
        compiled(torch.randn(3), 9)


def test_smaller_patched_limit():
    compiled = graphlift.compile(scale, dynamic=False)
    with graphlift.config.patch(recompile_limit=2):
        run_past_the_limit(compiled, calls=4)
    stats = graphlift.stats(compiled)
    assert (stats.compiles, stats.recompile_limit_hit) == (2, True)


# -- error_on_recompile ------------------------------------------------------------------------
def test_error_on_recompile_raises_with_the_reason():
    compiled = graphlift.compile(scale, dynamic=False)
    x = torch.randn(3)
    with graphlift.config.patch(error_on_recompile=True):
        check_same(compiled, scale, x, 1)  # the first compile is not a recompile
        check_same(compiled, scale, x, 1)
        with pytest.raises(graphlift.RecompileError) as info:
            compiled(x, 2)
    assert str(info.value).splitlines() == [
        f"Recompiling function scale in {LOCATION} (error_on_recompile=True)",
        "    - 0/0: L['n'] == 1 (now 2)" + READ_AT,
    ]
    assert graphlift.stats(compiled).compiles == 1


# -- the process-wide limit --------------------------------------------------------------------
def make_function(i):
    namespace = {}
    exec(f"def f{i}(x, n):\n    return x * n + {i}\n", namespace)  # noqa: S102 - distinct code
    return namespace[f"f{i}"]


def test_accumulated_limit_counts_recompiles_across_functions(caplog):
    caplog.set_level(logging.WARNING, logger="graphlift")
    functions = [make_function(i) for i in range(4)]
    compiled = [graphlift.compile(fn, dynamic=False) for fn in functions]
    x = torch.randn(3)
    with graphlift.config.patch(accumulated_recompile_limit=3):
        for c, fn in zip(compiled, functions):
            check_same(c, fn, x, 1)  # a first compile: never counted
            check_same(c, fn, x, 2)  # a recompile: the fourth one is refused
    assert [graphlift.stats(fn).compiles for fn in functions] == [2, 2, 2, 1]
    assert graphlift.stats(functions[3]).misses == 2
    (warning,) = messages(caplog, "graphlift", logging.WARNING)
    assert warning.splitlines()[:2] == [
        "graphlift hit config.accumulated_recompile_limit (3)",
        "   function: 'f3' (<string>:1)",
    ]


# -- the warning as printed, in a process that did not configure logging -------------------------
LIMIT_SCRIPT = """
import logging, sys
import torch
import graphlift
if sys.argv[1] == "app":
    logging.basicConfig(format="APP %(levelname)s %(name)s: %(message)s")
graphlift.config.recompile_limit = 2
f = graphlift.compile(lambda x, n: x * n, dynamic=False)
for n in range(4):
    f(torch.ones(2), n)
"""


@pytest.mark.parametrize("logging_by", ["graphlift", "app"])
def test_the_limit_warning_as_printed(logging_by):
    result = subprocess.run([sys.executable, "-c", LIMIT_SCRIPT, logging_by],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    first = result.stderr.splitlines()[0]
    if logging_by == "graphlift":  # nothing configured: graphlift prints, with its prefix
        assert first == "[graphlift] graphlift hit config.recompile_limit (2)"
    else:  # the application's format, and no second copy
        assert first == "APP WARNING graphlift: graphlift hit config.recompile_limit (2)"
    assert result.stderr.count("hit config.recompile_limit") == 1
