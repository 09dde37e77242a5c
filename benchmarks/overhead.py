"""Per-call overhead on a cache hit: eager vs graphlift vs torch.compile, both with backend "eager".

Each case is timed in one process, the three systems interleaved in rounds (A B C, A B C, ...), one
OpenMP thread, each figure a median over rounds of one sample of many calls. The overhead of a
system is the median of its time minus eager's in the same round: the timing loop cancels out, and a
slow spell on a shared machine moves it far less than it moves separate medians. Before timing,
both compiled versions must return what eager returns, and graphlift must have compiled once.

    .venv/bin/python benchmarks/overhead.py                  # the table
    .venv/bin/python benchmarks/overhead.py --breakdown      # plus where graphlift's time goes
    .venv/bin/python benchmarks/overhead.py --json out.json  # plus the figures as JSON

Both systems guard global state besides the arguments: graphlift checks grad mode, autocast and the
default dtype on every hit; Dynamo's C++ guards check grad mode and similar state too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch._dynamo

import graphlift
from graphlift.sources import FN_NAME, GLOBALS_NAME

torch.set_num_threads(1)


# -- the workloads -----------------------------------------------------------------------------
def add_one(x):
    return x + 1


def sum10(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9


def mixed(x, y, n, s, flag):
    return (x * s + y * n) if flag else x


def _tiny() -> torch.Tensor:
    return torch.randn(8)


@dataclass
class Case:
    name: str
    fn: Callable
    args: tuple


CASES = [
    Case("x + 1 (8 floats)", add_one, (_tiny(),)),
    Case("sum of 10 tensors", sum10, tuple(_tiny() for _ in range(10))),
    Case("5 mixed args", mixed, (_tiny(), _tiny(), 3, 0.5, True)),
]


# -- timing ------------------------------------------------------------------------------------
def per_call_us(fn: Callable, args: tuple, calls: int) -> float:
    """Mean microseconds per call over one sample of ``calls`` calls."""
    loop = itertools.repeat(None, calls)
    start = time.perf_counter()
    for _ in loop:
        fn(*args)
    return (time.perf_counter() - start) / calls * 1e6


def interleaved_rounds(timed: dict[str, tuple[Callable, tuple]], calls: int,
                       samples: int) -> list[dict[str, float]]:
    """``samples`` rounds; each times every function once, in turn (A B C, A B C, ...).

    Keeping each round's figures together lets callers take paired differences (graphlift minus
    eager in the same round), which a slow spell on a shared machine shifts far less than it
    shifts separate medians.
    """
    return [{name: per_call_us(fn, args, calls) for name, (fn, args) in timed.items()}
            for _ in range(samples)]


def median_of(rounds: list[dict[str, float]], value: Callable[[dict[str, float]], float]) -> float:
    """The median over rounds of ``value(round)``."""
    return statistics.median(value(r) for r in rounds)


def first_call_ms(compiled: Callable, args: tuple) -> float:
    start = time.perf_counter()
    compiled(*args)
    return (time.perf_counter() - start) * 1e3


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return type(a) is type(b) and torch.equal(a, b)


# -- one case ----------------------------------------------------------------------------------
def run_case(case: Case, calls: int, samples: int, warmup: int) -> dict:
    torch._dynamo.reset()
    graphlift.reset()
    gl = graphlift.compile(case.fn, backend="eager")
    tc = torch.compile(case.fn, backend="eager")
    first = {"graphlift": first_call_ms(gl, case.args),
             "torch.compile": first_call_ms(tc, case.args)}
    expected = case.fn(*case.args)
    assert same(gl(*case.args), expected), f"graphlift differs from eager on {case.name}"
    assert same(tc(*case.args), expected), f"torch.compile differs from eager on {case.name}"
    timed = {"eager": (case.fn, case.args), "graphlift": (gl, case.args),
             "torch.compile": (tc, case.args)}
    for fn, args in timed.values():
        per_call_us(fn, args, warmup)
    rounds = interleaved_rounds(timed, calls, samples)
    counters = graphlift.stats(case.fn)
    assert counters.compiles == 1 and counters.misses == 1, f"graphlift recompiled: {counters}"
    gl_over = median_of(rounds, lambda r: r["graphlift"] - r["eager"])
    tc_over = median_of(rounds, lambda r: r["torch.compile"] - r["eager"])
    return {
        "case": case.name,
        "eager_us": median_of(rounds, lambda r: r["eager"]),
        "graphlift_us": median_of(rounds, lambda r: r["graphlift"]),
        "torch_compile_us": median_of(rounds, lambda r: r["torch.compile"]),
        "graphlift_overhead_us": gl_over,
        "torch_compile_overhead_us": tc_over,
        "overhead_ratio": gl_over / tc_over if tc_over > 0 else float("inf"),
        "total_ratio": median_of(rounds, lambda r: r["graphlift"] / r["torch.compile"]),
        "first_call_ms": first,
        "guards": len(graphlift.cache_entries(case.fn)[0].guards),
    }


# -- where graphlift's hit time goes -----------------------------------------------------------
def breakdown(case: Case, calls: int, samples: int) -> dict[str, float]:
    """Split graphlift's overhead on a hit into its layers, each timed alone.

    The guard check, the run function and the graph's ``forward`` are called directly; from each,
    the time of an empty function taking the same arguments (the loop and the call itself) is
    subtracted. What the three do not explain is the wrapper: its frame, the head lookup, the hit
    counter, and whatever the layers cost together but not apart. Measured with stub check and run
    functions, the wrapper itself takes about 0.1 µs; the rest is mostly the guard check costing
    more between real torch calls than in a loop of its own (caches and branch predictors).
    """
    graphlift.reset()
    gl = graphlift.compile(case.fn, backend="eager")
    gl(*case.args)
    entry = graphlift.cache_entries(case.fn)[0]
    fn_args = _generated_args(case, entry.compiled_guards.params)
    graph_args = tuple(a for a in case.args if isinstance(a, torch.Tensor))
    timed = {
        "eager": (case.fn, case.args),
        "graphlift": (gl, case.args),
        "check": (entry.check, fn_args),
        "run": (entry.run, fn_args),
        "forward": (entry.graph.forward, graph_args),
        "empty(args)": (_empty(len(case.args)), case.args),
        "empty(fn, args)": (_empty(len(fn_args)), fn_args),
        "empty(graph args)": (_empty(len(graph_args)), graph_args),
    }
    rounds = interleaved_rounds(timed, calls, samples)
    parts = {name: median_of(rounds, split) for name, split in BREAKDOWN.items()}
    parts.update(_dynamo_guard_us(case, calls, samples))
    return parts


def _check(t: dict[str, float]) -> float:
    return t["check"] - t["empty(fn, args)"]


def _run(t: dict[str, float]) -> float:
    return t["run"] - t["empty(fn, args)"]


def _forward(t: dict[str, float]) -> float:
    return t["forward"] - t["empty(graph args)"]


# Each row: its label, and how one round's timings give it (medians over rounds are printed).
BREAKDOWN: dict[str, Callable[[dict[str, float]], float]] = {
    "eager": lambda t: t["eager"],
    "graphlift": lambda t: t["graphlift"],
    "overhead (graphlift - eager)": lambda t: t["graphlift"] - t["eager"],
    "  guard check": _check,
    "  run glue (run fn - forward)": lambda t: _run(t) - _forward(t),
    "  graph forward - eager body": lambda t: _forward(t) - (t["eager"] - t["empty(args)"]),
    "  wrapper and the rest": lambda t: t["graphlift"] - t["empty(args)"] - _check(t) - _run(t),
}


def _generated_args(case: Case, params: tuple[str, ...]) -> tuple:
    """The arguments the wrapper passes to an entry's check and run functions, by name."""
    code = case.fn.__code__
    values = dict(zip(code.co_varnames[:code.co_argcount], case.args))
    values.update({FN_NAME: case.fn, GLOBALS_NAME: case.fn.__globals__})
    return tuple(values[name] for name in params)


def _empty(arity: int) -> Callable:
    """A function of ``arity`` positional parameters that does nothing: the timing baseline."""
    params = ", ".join(f"a{i}" for i in range(arity))
    return eval(f"lambda {params}: None")  # noqa: S307 - a fixed, generated lambda


def _dynamo_guard_us(case: Case, calls: int, samples: int) -> dict[str, float]:
    """Dynamo's C++ guard check alone, for comparison (through its private debug API)."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    torch._dynamo.reset()
    tc = torch.compile(case.fn, backend="eager")
    tc(*case.args)
    entries = _debug_get_cache_entry_list(case.fn.__code__)
    if not entries:
        return {}
    check = entries[0].guard_manager.check
    names = case.fn.__code__.co_varnames[:case.fn.__code__.co_argcount]
    f_locals = dict(zip(names, case.args))
    direct = statistics.median(per_call_us(check, (f_locals,), calls) for _ in range(samples))
    return {"torch.compile's guard check alone (C++)": direct}


# -- output ------------------------------------------------------------------------------------
COLUMNS = ("case", "eager µs", "graphlift µs", "torch.compile µs", "gl overhead µs",
           "tc overhead µs", "gl/tc overhead", "gl/tc total")


def per_extra_tensor(rows: list[dict]) -> dict[str, float] | None:
    """Each system's overhead per guarded tensor argument beyond the first: the overhead of the
    10-tensor case minus that of the 1-tensor case, over 9 (both cases have one graph, one
    output). It is what a tensor costs on a hit: its guard check and passing it to the graph."""
    by_name = {r["case"]: r for r in rows}
    one, ten = by_name.get(CASES[0].name), by_name.get(CASES[1].name)
    if one is None or ten is None:
        return None
    return {"graphlift": (ten["graphlift_overhead_us"] - one["graphlift_overhead_us"]) / 9,
            "torch.compile": (ten["torch_compile_overhead_us"]
                              - one["torch_compile_overhead_us"]) / 9}


def print_table(rows: list[dict]) -> None:
    widths = (20, 9, 13, 17, 15, 15, 15, 12)
    print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                    for i, (c, w) in enumerate(zip(COLUMNS, widths))))
    for r in rows:
        cells = (r["case"], f"{r['eager_us']:.2f}", f"{r['graphlift_us']:.2f}",
                 f"{r['torch_compile_us']:.2f}", f"{r['graphlift_overhead_us']:.2f}",
                 f"{r['torch_compile_overhead_us']:.2f}", f"{r['overhead_ratio']:.2f}",
                 f"{r['total_ratio']:.2f}")
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(cells, widths))))
    per_tensor = per_extra_tensor(rows)
    if per_tensor is not None:
        gl, tc = per_tensor["graphlift"], per_tensor["torch.compile"]
        print(f"\nper extra guarded tensor (sum of 10 tensors minus x + 1, over 9): "
              f"graphlift {gl:.3f} µs, torch.compile {tc:.3f} µs")
    print()
    print("first call (trace + guards + backend), warm process:")
    for r in rows:
        first = r["first_call_ms"]
        print(f"  {r['case']:<20}  graphlift {first['graphlift']:7.1f} ms   "
              f"torch.compile {first['torch.compile']:7.1f} ms   ({r['guards']} graphlift guards)")


def print_breakdown(name: str, parts: dict[str, float]) -> None:
    print(f"\n{name}: graphlift hit path, µs per call (medians)")
    for label, value in parts.items():
        print(f"  {label:<40} {value:7.2f}")


def warm_process() -> None:
    """Pay both systems' one-time import and set-up costs before any first call is timed."""
    def warm(x):
        return x * 2

    x = torch.ones(2)
    graphlift.compile(warm)(x)
    torch.compile(warm, backend="eager")(x)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="calls per sample")
    parser.add_argument("--samples", type=int, default=61, help="rounds per case")
    parser.add_argument("--warmup", type=int, default=2000, help="untimed calls per system")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time the layers of graphlift's hit path alone")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    options = parser.parse_args(argv)

    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, "
          f"{torch.get_num_threads()} thread, {options.samples} rounds x {options.calls} calls, "
          f"medians; overhead = time - eager in the same round")
    warm_process()
    rows = [run_case(case, options.calls, options.samples, options.warmup) for case in CASES]
    print_table(rows)
    parts = {}
    if options.breakdown:
        for case in CASES:
            parts[case.name] = breakdown(case, options.calls, options.samples)
            print_breakdown(case.name, parts[case.name])
    if options.json:
        with open(options.json, "w") as out:
            json.dump({"torch": torch.__version__, "python": sys.version.split()[0],
                       "calls": options.calls, "samples": options.samples,
                       "cases": rows, "per_extra_tensor_us": per_extra_tensor(rows),
                       "breakdown": parts}, out, indent=2)
        print(f"\nwrote {options.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
