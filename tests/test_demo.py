"""``make demo`` tells the truth: the demo runs as a user runs it, and what it prints is checked.

Every sentence the demo prints about what graphlift did is a ``claim`` that the demo checks as it
prints it (a false one stops the demo with an error), so a clean exit means they all held. Here
the run's stdout and stderr are read: each section and claim is there, the logs name the guard
that failed and the limit, and the counters add up to the calls the demo makes.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo.py"


@pytest.fixture(scope="module")
def demo() -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if not name.startswith("GRAPHLIFT")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(DEMO)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


def section(run: subprocess.CompletedProcess, number: int) -> str:
    """The stdout of section ``number`` (up to the next header)."""
    parts = re.split(r"^=== (\d)\. .*$", run.stdout, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))[str(number)]


def test_the_demo_runs_to_the_end_so_every_claim_held(demo):
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "the demo's claim is false" not in demo.stderr
    headers = re.findall(r"^=== (.*?) =+$", demo.stdout, flags=re.M)
    assert [header.split(".")[0] for header in headers] == [*"12345678", "end of the demo"]


CLAIMS = {
    1: ["the first call compiled one entry (0/0) with one graph"],
    2: ["n = 2 and x.shape[0] = 4 were Python constants while tracing: both are in the graph."],
    3: ["the entry serves calls with n == 2 and a float32 x of size 4; the guards compile into "
        "one generated function:"],
    4: ["the guard L['n'] == 2 failed (the reason is logged above), so entry 0/1 was compiled "
        "with n as a graph input instead of a constant:",
        "its guards check that n is an int, not which int."],
    5: ["5 calls, 5 hits, compiles stay 2: entry 0/1 serves any int (0, 1 and 2 included: the "
        "front entry is tried first)"],
    6: ["4 floats, 1 compile: entry 0/2 takes n as a graph input (a 0-d float64 tensor read "
        "with item(), as in torch.compile)",
        "the entries reached the limit (8); from then on a miss runs repeat eagerly",
        "a value seen before still hits its entry: hits 0 -> 1",
        "a new value misses and runs eagerly: misses 10 -> 11, compiles stay 8"],
}


@pytest.mark.parametrize("number", sorted(CLAIMS))
def test_each_section_makes_its_claims(demo, number):
    lines = section(demo, number).splitlines()
    for text in CLAIMS[number]:
        assert text in lines, (number, text)


def test_the_graphs_are_the_ones_the_claims_describe(demo):
    assert "mul = sin * 2" in section(demo, 2) and "add = mul + 4" in section(demo, 2)
    dynamic = section(demo, 4)
    assert "def forward(self, L_x, L_n):" in dynamic and "mul = sin * l_n" in dynamic
    assert "  - L['n'] == 2" in section(demo, 3).splitlines()


def test_the_counters_add_up_to_the_calls_the_demo_makes(demo):
    printed = dict(line.split(None, 1) for line in section(demo, 7).splitlines()
                   if line.strip() and not line.strip().startswith("seconds"))
    # 1 + 1 calls compile (n = 2, then 3); 5 ints hit entry 0/1; 4 floats: the first compiles
    # entry 0/2 (n dynamic at once: it has changed before), 3 hit it. repeat's limit is its own.
    expected = {"calls": "11", "hits": "8", "misses": "3", "compiles": "3", "graphs": "3",
                "eager_frames": "0", "graph_breaks": "0", "recompile_limit_hit": "False",
                "internal_errors": "0"}
    assert {name: printed[name].strip() for name in expected} == expected
    for n in (1, 6):
        assert f"  n={n}: result ok, compiles {n}, entries {n}, run-only False" \
            in section(demo, 6)
    assert "  n=9: result ok, compiles 8, entries 8, run-only True" in section(demo, 6)


def test_the_logs_name_the_failing_guard_and_the_limit(demo):
    err = demo.stderr
    line = DEMO.read_text().splitlines().index("def f(x, n):") + 1
    assert f"[graphlift] Recompiling function f in {DEMO}:{line}" in err.splitlines()
    origin = f"  # return torch.sin(x) * n + x.shape[0]  at {DEMO}:{line + 1}"
    assert f"    - 0/0: L['n'] == 2 (now 3){origin}" in err.splitlines()  # the user's line
    assert "    - L['n']: now 3, before 2" in err.splitlines()  # automatic dynamic took n
    assert f"    - 0/1: type(L['n']) is int (now <class 'float'>){origin}" in err.splitlines()
    assert "[graphlift] graphlift hit config.recompile_limit (8)" in err.splitlines()
    loop = DEMO.read_text().splitlines().index("    for _ in range(n):") + 1
    # Why n, which became dynamic, is still guarded: range(n) needs its value.
    assert f"   last reason: 1/7: L['n'] == 8 (now 9)  # for _ in range(n):  at {DEMO}:{loop} " \
        "(was dynamic; this line needs the exact value, so the value is guarded)" \
        in err.splitlines()
    assert err.count("Recompiling function") == 2  # repeat's loop runs with the log off


def test_the_doctor_section_reports_the_break_and_the_storm(demo):
    doctor = section(demo, 8)
    assert "$ python -m graphlift doctor examples/doctor_example.py" in doctor
    assert "Verdict: 1 graph break at 1 location: fix these first. Then the recompiles of " \
           "smooth (8 compiles)." in doctor
    assert "   1x GL0004 skipped_function at examples/doctor_example.py:18 (in normalize)" \
        in doctor.splitlines()
    assert "smooth at examples/doctor_example.py:22: 8 compiles, hit config.recompile_limit (8)" \
        in doctor
    assert "values seen: 1, 2, 3, 4, 5, 6, 7, 8, 9" in doctor
    assert "mark it dynamic" not in doctor
    # the doctor's script ran with graphlift's own handler: the warning has the prefix
    assert "[graphlift] graphlift hit config.recompile_limit (8)\n   function: 'smooth'" \
        in demo.stderr
