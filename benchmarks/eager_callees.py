"""What routing the calls of an eager frame costs per call (graphlift.eager_callees).

A frame that runs eagerly as a whole runs a routed copy of its code: every call whose self slot
holds a NULL (3.10: every call but the compiler's own) first calls ``route(callable)``.
Measured here on a tight loop of 1,000 calls, the original code against its routed copy (the
router of the eager backend), for three callees:

- ``len``: a C builtin (the router's fast path: one ``type()`` test, called as it is);
- ``posixpath.basename``: a Python function of the standard library (not compiled: the router
  finds it in its table of functions that route to themselves);
- ``small``: a user function with one tensor op (compiled: the call goes through its wrapper).

    .venv/bin/python benchmarks/eager_callees.py [ROUNDS]

Interleaved (A B A B), medians of ROUNDS rounds (default 31), ns per call, with
``OMP_NUM_THREADS=1``; "added" is the median of each round's difference (the two runs of a round
see the same load). Run it with each Python version's venv to compare versions.
"""

from __future__ import annotations

import posixpath
import statistics
import sys
import time
import types

import torch

from graphlift import eager_callees, eval_frame
from graphlift.convert_frame import compile_options

torch.set_num_threads(1)
N = 1000
ITEMS = [1, 2, 3]
X = torch.ones(4)


def small(x):
    return x + 1


def loop_len(n):
    for _ in range(n):
        len(ITEMS)


def loop_basename(n):
    for _ in range(n):
        posixpath.basename("a/b")


def loop_small(n):
    for _ in range(n):
        small(X)


def routed(fn: types.FunctionType) -> types.FunctionType:
    options = compile_options("eager", False, None)
    return eager_callees.eager_function(fn, options, eval_frame.WRAPPERS)


def per_call_ns(fn: types.FunctionType) -> float:
    start = time.perf_counter_ns()
    fn(N)
    return (time.perf_counter_ns() - start) / N


def main(rounds: int) -> None:
    print(f"Python {sys.version.split()[0]}, {rounds} rounds")
    print(f"{'callee':<22} {'eager ns':>9} {'routed ns':>10} {'added ns':>9}")
    for loop in (loop_len, loop_basename, loop_small):
        copy = routed(loop)
        assert copy.__code__ is not loop.__code__
        copy(N)  # compiles small
        eager, rerouted = [], []
        for _ in range(rounds):
            eager.append(per_call_ns(loop))
            rerouted.append(per_call_ns(copy))
        added = statistics.median(b - a for a, b in zip(eager, rerouted))
        name = loop.__name__.removeprefix("loop_")
        print(f"{name:<22} {statistics.median(eager):>9.0f} {statistics.median(rerouted):>10.0f} "
              f"{added:>9.0f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 31)
