"""A tour of graphlift (``make demo``): compile, graph, guards, dynamic ints and floats, limits,
stats, doctor.

Each section prints a header, then what graphlift did. Log messages (recompile reasons, the
recompile-limit warning) come from the ``graphlift`` logger on stderr, prefixed ``[graphlift]``.
Every sentence the demo prints about what happened is a :func:`claim`: it is checked against
graphlift's counters and cache as it is printed, and the demo stops on one that is false
(``tests/test_demo.py`` runs the demo and reads what it printed).
"""

from __future__ import annotations

import os
import subprocess
import sys

import torch

import graphlift

# Logs go to stderr and prints to stdout: line-buffer stdout so the two interleave in order.
sys.stdout.reconfigure(line_buffering=True)
torch.set_num_threads(1)


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def claim(text: str, holds: bool) -> None:
    """Print a sentence about what graphlift did, after checking that it is true."""
    if not holds:
        raise AssertionError(f"the demo's claim is false: {text}")
    print(text)


def f(x, n):
    return torch.sin(x) * n + x.shape[0]


def repeat(x, n):
    for _ in range(n):
        x = x + 1
    return x


def same_as_eager(result: torch.Tensor, x: torch.Tensor, n: float) -> str:
    """'ok' when the compiled result equals eager's; the demo stops on a mismatch."""
    assert torch.allclose(result, f(x, n)), f"compiled f(x, {n}) differs from eager"
    return "ok"


def front() -> str:
    """The compile id of the front entry: the one the last call ran (a hit moves it there)."""
    return graphlift.cache_entries(f)[0].compile_id


def main() -> None:
    graphlift.set_logs(recompiles=True)
    compiled = graphlift.compile(f)
    stats = graphlift.stats(f)
    x = torch.arange(4, dtype=torch.float32)

    section("1. compile f(x, n) and call it once")
    print("def f(x, n):\n    return torch.sin(x) * n + x.shape[0]\n")
    result = compiled(x, 2)
    print(f"compiled(x, 2) = {result}   (matches eager: {same_as_eager(result, x, 2)})")
    claim("the first call compiled one entry (0/0) with one graph",
          (stats.compiles, stats.graphs, front()) == (1, 1, "0/0"))

    entry = graphlift.cache_entries(f)[0]
    code = entry.graph.code.strip()
    section(f"2. the captured graph (entry {entry.compile_id})")
    claim("n = 2 and x.shape[0] = 4 were Python constants while tracing: both are in the graph.",
          "* 2" in code and "+ 4" in code and "L_n" not in code)
    print(code)

    section(f"3. the guards of entry {entry.compile_id}")
    for guard in entry.guards:
        print(f"  - {guard}")
    print()
    claim("the entry serves calls with n == 2 and a float32 x of size 4; the guards compile "
          "into one generated function:",
          "L['n'] == 2" in entry.guards and "L['x'].size()[0] == 4" in entry.guards)
    print(entry.guard_source.rstrip())

    section("4. a new int recompiles once, and n becomes dynamic")
    result = compiled(x, 3)
    print(f"compiled(x, 3) = {result}   (matches eager: {same_as_eager(result, x, 3)})")
    dynamic = graphlift.cache_entries(f)[0]
    claim(f"the guard L['n'] == 2 failed (the reason is logged above), so entry "
          f"{dynamic.compile_id} was compiled with n as a graph input instead of a constant:",
          (stats.compiles, dynamic.compile_id) == (2, "0/1") and "L_n" in dynamic.graph.code)
    print(dynamic.graph.code.strip())
    claim("its guards check that n is an int, not which int.",
          "type(L['n']) is int" in dynamic.guards
          and not any(guard.startswith("L['n'] ==") for guard in dynamic.guards))
    print(f"entries now, most recently used first: {graphlift.cache_entries(f)}")

    section("5. more ints, new tensor values: cache hits, no compile")
    compiles, hits = stats.compiles, stats.hits
    y = torch.randn(4)  # new values, same dtype, shape and strides
    ints = (4, 5, 0, 1, 2)
    for n in ints:
        result = compiled(y, n)
        print(f"  compiled(y, {n}) -> {same_as_eager(result, y, n)}, ran entry {front()}")
    claim(f"{len(ints)} calls, {stats.hits - hits} hits, compiles stay {stats.compiles}: entry "
          f"0/1 serves any int (0, 1 and 2 included: the front entry is tried first)",
          stats.hits == hits + len(ints) and stats.compiles == compiles and front() == "0/1")

    section("6. floats become dynamic; range(n) hits the recompile limit")
    compiles, hits = stats.compiles, stats.hits
    floats = (0.5, 1.5, 2.5, 3.5)
    for n in floats:
        result = compiled(x, n)
        print(f"  compiled(x, {n}) -> {same_as_eager(result, x, n)}, ran entry {front()}")
    floating = graphlift.cache_entries(f)[0]
    claim(f"{len(floats)} floats, 1 compile: entry {floating.compile_id} takes n as a graph "
          f"input (a 0-d float64 tensor read with item(), as in torch.compile)",
          stats.compiles == compiles + 1 and stats.hits == hits + len(floats) - 1
          and "type(L['n']) is float" in floating.guards)
    limit = graphlift.config.recompile_limit
    print(f"\ndef repeat(x, n):\n    for _ in range(n):\n        x = x + 1\n    return x\n\n"
          f"config.recompile_limit = {limit}. range(n) needs n's value, so each n is an entry "
          f"of its own. Recompile logs are turned off for this loop; the limit warning is "
          f"always logged.")
    graphlift.set_logs(recompiles=False)
    looped = graphlift.compile(repeat)
    counts = graphlift.stats(repeat)
    for n in range(1, limit + 3):
        assert torch.equal(looped(x, n), repeat(x, n)), f"compiled repeat(x, {n}) differs"
        print(f"  n={n}: result ok, compiles {counts.compiles}, "
              f"entries {len(graphlift.cache_entries(repeat))}, "
              f"run-only {counts.recompile_limit_hit}")
    claim(f"the entries reached the limit ({limit}); from then on a miss runs repeat eagerly",
          len(graphlift.cache_entries(repeat)) == limit and counts.recompile_limit_hit)
    compiles, hits, misses = counts.compiles, counts.hits, counts.misses
    looped(x, 3)
    claim(f"a value seen before still hits its entry: hits {hits} -> {counts.hits}",
          counts.hits == hits + 1 and counts.compiles == compiles)
    looped(x, 99)
    claim(f"a new value misses and runs eagerly: misses {misses} -> {counts.misses}, "
          f"compiles stay {compiles}",
          counts.misses == misses + 1 and counts.compiles == compiles)

    section("7. graphlift.stats(f)")
    counters = stats.as_dict()
    seconds = counters.pop("seconds")
    for name, value in counters.items():
        print(f"  {name:<20} {value}")
    for phase, value in seconds.items():
        print(f"  seconds[{phase!r}]".ljust(22) + f" {value * 1e3:.2f} ms")


def doctor() -> None:
    """The debugging routine, run for the user on a script with one break and one storm."""
    script = os.path.relpath(os.path.join(os.path.dirname(__file__), "doctor_example.py"))
    section("8. graphlift doctor: graph breaks first, then recompiles, then time")
    print(f"$ python -m graphlift doctor {script}")
    subprocess.run([sys.executable, "-m", "graphlift", "doctor", script], check=True)


if __name__ == "__main__":
    main()
    doctor()
    section("end of the demo")
