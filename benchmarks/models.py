"""The model zoo under graphlift and torch.compile: first call, cache-hit overhead, graphs, breaks.

For each model of ``benchmarks/models`` (bench sizes, eval mode, no_grad, one OpenMP thread):

- first call in a warm process: graphlift's total and its frontend (translation and guards, the
  rest is the backend), torch.compile's total;
- cache-hit overhead per call: eager, graphlift and torch.compile interleaved in rounds, the
  overhead being the median of (system - eager) within a round; and graphlift's guard check
  alone (its generated function called directly) next to Dynamo's C++ guard check alone;
- graphs and graph breaks captured by one call.

Everything with backend "eager"; then, for the models that compile in reasonable time on CPU,
first call and per-call time with "inductor".

    .venv/bin/python benchmarks/models.py                 # all models, eager, then inductor
    .venv/bin/python benchmarks/models.py gpt mlp         # some of them
    .venv/bin/python benchmarks/models.py --no-inductor   # skip the inductor table
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
import warnings

import torch
import torch._dynamo
from models import make, names
from overhead import interleaved_rounds, median_of, per_call_us

import graphlift
from graphlift import cache

torch.set_num_threads(1)
warnings.filterwarnings("ignore")  # transformers' config warnings, Dynamo's recompile notes

INDUCTOR_MODELS = ("mlp", "cnn", "gpt")  # the transformers models take minutes with inductor


def output_tensor(out) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    return out[0]


def timed_first_call(module: torch.nn.Module, args: tuple) -> tuple[float, object]:
    start = time.perf_counter()
    out = module(*args)
    return (time.perf_counter() - start) * 1e3, out


def graphlift_counts() -> tuple[int, int, float]:
    """Graphs, breaks and translate seconds over every code object (the cache was reset)."""
    states = list(cache._live_states)
    return (sum(s.stats.graphs for s in states), sum(s.stats.graph_breaks for s in states),
            sum(s.stats.translate_seconds for s in states))


def dynamo_guard_us(code, module: torch.nn.Module, args: tuple, calls: int) -> float | None:
    """Dynamo's C++ guard check alone, through its private debug API."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    entries = _debug_get_cache_entry_list(code)
    if not entries:
        return None
    names_ = code.co_varnames[:code.co_argcount]
    f_locals = dict(zip(names_, (module, *args)))
    check = entries[0].guard_manager.check
    return statistics.median(per_call_us(check, (f_locals,), calls) for _ in range(7))


def graphlift_guard_us(compiled: torch.nn.Module, args: tuple, calls: int) -> tuple[float, int]:
    """graphlift's generated guard function alone, and how many guards it holds."""
    entries = graphlift.cache_entries(compiled)
    if not entries:
        return float("nan"), 0
    entry = entries[0]
    forward = compiled._graphlift_fn
    bound = inspect.signature(forward, follow_wrapped=False).bind(compiled._orig_mod, *args)
    bound.apply_defaults()
    check_args = (forward, forward.__globals__, *bound.arguments.values())
    assert entry.check(*check_args), "the guard check fails on the arguments it was built for"
    us = statistics.median(per_call_us(entry.check, check_args, calls) for _ in range(7))
    return us, len(entry.guards)


def run_model(name: str, backend: str, calls: int, samples: int) -> dict:
    case = make(name, "bench")
    model = case.model.eval()
    args = case.inputs()
    torch._dynamo.reset()
    graphlift.reset()
    row: dict = {"model": name, "backend": backend}
    with torch.no_grad():
        expected = output_tensor(model(*args))
        gl = graphlift.compile(model, backend=backend)
        row["gl_first_ms"], out = timed_first_call(gl, args)
        torch.testing.assert_close(output_tensor(out), expected, atol=1e-4, rtol=1e-4)
        row["gl_graphs"], row["gl_breaks"], translate = graphlift_counts()
        row["gl_frontend_ms"] = translate * 1e3
        counters = torch._dynamo.utils.counters
        counters.clear()
        tc = torch.compile(model, backend=backend)
        row["tc_first_ms"], out = timed_first_call(tc, args)
        torch.testing.assert_close(output_tensor(out), expected, atol=1e-4, rtol=1e-4)
        row["tc_graphs"] = counters["stats"]["unique_graphs"]
        row["tc_breaks"] = sum(counters["graph_break"].values())
        timed = {"eager": (model, args), "graphlift": (gl, args), "torch.compile": (tc, args)}
        for fn, fn_args in timed.values():
            per_call_us(fn, fn_args, calls // 4)
        rounds = interleaved_rounds(timed, calls, samples)
        row["eager_us"] = median_of(rounds, lambda r: r["eager"])
        row["gl_us"] = median_of(rounds, lambda r: r["graphlift"])
        row["tc_us"] = median_of(rounds, lambda r: r["torch.compile"])
        row["gl_over_us"] = median_of(rounds, lambda r: r["graphlift"] - r["eager"])
        row["tc_over_us"] = median_of(rounds, lambda r: r["torch.compile"] - r["eager"])
        if backend == "eager":
            row["gl_guard_us"], row["gl_guards"] = graphlift_guard_us(gl, args, calls)
            row["tc_guard_us"] = dynamo_guard_us(type(model).forward.__code__, model, args,
                                                 calls)
    assert graphlift.stats(gl).compiles <= 1 or row["gl_breaks"], "graphlift recompiled"
    return row


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


EAGER_COLUMNS = (
    ("model", "model", 8), ("eager µs", "eager_us", 9), ("gl µs", "gl_us", 9),
    ("tc µs", "tc_us", 9), ("gl over µs", "gl_over_us", 11), ("tc over µs", "tc_over_us", 11),
    ("gl guard µs", "gl_guard_us", 12), ("guards", "gl_guards", 7),
    ("tc guard µs", "tc_guard_us", 12), ("gl 1st ms", "gl_first_ms", 10),
    ("gl front ms", "gl_frontend_ms", 12), ("tc 1st ms", "tc_first_ms", 10),
    ("gl g/b", "gl_counts", 7), ("tc g/b", "tc_counts", 7),
)
INDUCTOR_COLUMNS = (
    ("model", "model", 8), ("eager µs", "eager_us", 9), ("gl µs", "gl_us", 9),
    ("tc µs", "tc_us", 9), ("gl 1st ms", "gl_first_ms", 10), ("gl front ms", "gl_frontend_ms", 12),
    ("tc 1st ms", "tc_first_ms", 10), ("gl g/b", "gl_counts", 7), ("tc g/b", "tc_counts", 7),
)


def print_table(title: str, columns: tuple, rows: list[dict]) -> None:
    print(f"\n{title}")
    print("  ".join(label.rjust(width) for label, _, width in columns))
    for row in rows:
        row = dict(row, gl_counts=f"{row['gl_graphs']}/{row['gl_breaks']}",
                   tc_counts=f"{row['tc_graphs']}/{row['tc_breaks']}")
        print("  ".join(fmt(row.get(key), 2 if key.endswith("guard_us") else 1).rjust(width)
                        for _, key, width in columns))


def _warm_up_inductor() -> None:
    """Import inductor and build its C++ headers once, and turn its graph cache off: the first
    system timed must not pay for either, and the second must not hit the first's cache."""
    import torch._inductor.config

    torch._inductor.config.fx_graph_cache = False
    torch._dynamo.reset()
    torch.compile(lambda x: x.sin() + 1, backend="inductor")(torch.randn(4))
    torch._dynamo.reset()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=names())
    parser.add_argument("--no-inductor", action="store_true")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--samples", type=int, default=15)
    options = parser.parse_args()
    rows = [run_model(name, "eager", options.calls, options.samples) for name in options.models]
    print_table('backend "eager" (g/b: graphs/breaks of one call)', EAGER_COLUMNS, rows)
    if not options.no_inductor:
        _warm_up_inductor()
        chosen = [n for n in options.models if n in INDUCTOR_MODELS]
        rows = [run_model(name, "inductor", options.calls // 4, options.samples // 3)
                for name in chosen]
        print_table('backend "inductor"', INDUCTOR_COLUMNS, rows)


if __name__ == "__main__":
    main()
