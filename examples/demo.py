"""A tour of graphlift (``make demo``): compile, graph, guards, recompiles, limits, stats, doctor.

Each section prints a header, then what graphlift did. Log messages (recompile reasons, the
recompile-limit warning) come from the ``graphlift`` logger on stderr, prefixed ``[graphlift]``.
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


def f(x, n):
    return torch.sin(x) * n + x.shape[0]


def check(result: torch.Tensor, x: torch.Tensor, n: int) -> str:
    """'ok' when the compiled result equals eager's; the demo stops on a mismatch."""
    expected = f(x, n)
    assert torch.allclose(result, expected), f"compiled f(x, {n}) differs from eager"
    return "ok"


def main() -> None:
    graphlift.set_logs(recompiles=True)
    compiled = graphlift.compile(f)
    x = torch.arange(4, dtype=torch.float32)

    section("1. compile f(x, n) and call it once")
    print("def f(x, n):\n    return torch.sin(x) * n + x.shape[0]\n")
    print(f"compiled(x, 2) = {compiled(x, 2)}   (matches eager: {check(compiled(x, 2), x, 2)})")

    entry = graphlift.cache_entries(f)[0]
    section(f"2. the captured graph (entry {entry.compile_id})")
    print("n = 2 and x.shape[0] = 4 were Python constants while tracing: both are in the graph.")
    print(entry.graph.code.strip())

    section(f"3. the guards of entry {entry.compile_id}")
    for guard in entry.guards:
        print(f"  - {guard}")
    print("\nthey compile into one generated function:")
    print(entry.guard_source.rstrip())

    section("4. a new int recompiles (the reason is logged)")
    print(f"compiled(x, 3) = {compiled(x, 3)}   (matches eager: {check(compiled(x, 3), x, 3)})")
    print(f"entries now, most recently used first: {graphlift.cache_entries(f)}")

    section("5. same types, shapes and values again: a cache hit, no compile")
    before = graphlift.stats(f).compiles
    y = torch.randn(4)  # new values, same dtype, shape and strides
    result = compiled(y, 2)
    print(f"compiled(y, 2) -> {check(result, y, 2)}; compiles before {before}, "
          f"after {graphlift.stats(f).compiles}; hits {graphlift.stats(f).hits}")
    print(f"entry for n=2 moved to the front: {graphlift.cache_entries(f)}")

    section("6. ten more ints: the recompile limit")
    print(f"config.recompile_limit = {graphlift.config.recompile_limit}. Recompile logs are "
          f"turned off for this loop; the limit warning is always logged.")
    graphlift.set_logs(recompiles=False)
    for n in range(10, 20):
        result = compiled(x, n)
        counters = graphlift.stats(f)
        print(f"  n={n}: result {check(result, x, n)}, compiles {counters.compiles}, "
              f"entries {len(graphlift.cache_entries(f))}, "
              f"run-only {counters.recompile_limit_hit}")
    compiles = graphlift.stats(f).compiles
    hits = graphlift.stats(f).hits
    check(compiled(x, 3), x, 3)
    check(compiled(x, 99), x, 99)
    print(f"after the limit: n=3 still hits its entry (hits {hits} -> {graphlift.stats(f).hits}); "
          f"n=99 runs eagerly (compiles stay {compiles} -> {graphlift.stats(f).compiles})")

    section("7. graphlift.stats(f)")
    counters = graphlift.stats(f).as_dict()
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
