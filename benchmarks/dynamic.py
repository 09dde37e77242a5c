"""A serving-like loop over varying sequence lengths: eager vs graphlift vs torch.compile.

100 requests, each one prompt (batch 1) whose length is drawn at random from 1 to the model's
block size (seed 0), through the model zoo's GPT at "bench" size (4 blocks, d_model 64, block 32)
under ``no_grad``. Both compilers use backend "eager", so the figures are the frontends' own.
One OpenMP thread.

- cold: from empty caches, the 100 requests in order. Total seconds, and compiles: what a server
  pays when it starts. With automatic dynamic shapes the first length compiles static, the
  second compiles the sequence dimension as a symbol, and later lengths hit that entry, except
  the lengths that tracing specializes (1, by 0/1 specialization, and the block size, where
  slicing the causal mask is a no-op). graphlift with ``dynamic=False`` is shown for contrast.
- warm: the same 100 lengths again, every one a cache hit, in interleaved rounds (eager,
  graphlift, torch.compile, eager, ...); per-request medians, and each compiler's overhead over
  eager as the median of per-round differences.

    .venv/bin/python benchmarks/dynamic.py                  # the tables
    .venv/bin/python benchmarks/dynamic.py --json out.json  # plus the figures as JSON
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch._dynamo

import graphlift

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import make  # noqa: E402

torch.set_num_threads(1)

REQUESTS = 100


class CountingBackend:
    """A backend that counts the graphs it is given and runs them as captured."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        self.graphs += 1
        return gm.forward


def requests(vocab: int, block: int, count: int, seed: int = 0) -> list[torch.Tensor]:
    """``count`` prompts of batch 1 with random lengths in [1, block]."""
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (1, rng.randint(1, block)), generator=generator)
            for _ in range(count)]


def serve(model: Callable, prompts: list[torch.Tensor]) -> float:
    """Seconds to answer every prompt in turn."""
    start = time.perf_counter()
    for prompt in prompts:
        model(prompt)
    return time.perf_counter() - start


def cold_pass(name: str, model: Callable, reference: torch.nn.Module,
              prompts: list[torch.Tensor]) -> float:
    """Serve every prompt from empty caches, checking each answer against eager."""
    start = time.perf_counter()
    for prompt in prompts:
        got = model(prompt)
        torch.testing.assert_close(got, reference(prompt), msg=lambda m: f"{name}: {m}")
    seconds = time.perf_counter() - start
    return seconds - serve(reference, prompts)  # the eager checks are not the compiler's time


def _graphlift_cold(name: str, compiled: Callable, model: torch.nn.Module,
                    prompts: list[torch.Tensor]) -> dict:
    seconds = cold_pass(name, compiled, model, prompts)
    stats = graphlift.stats(compiled)
    return {"seconds": seconds, "compiles": stats.compiles, "graphs": stats.graphs,
            "eager_fallback": stats.recompile_limit_hit,
            "translate_seconds": stats.translate_seconds}


def run(rounds: int) -> dict:
    case = make("gpt", "bench")
    model = case.model.eval()
    vocab, block = model.wte.num_embeddings, model.block_size
    prompts = requests(vocab, block, REQUESTS)
    lengths = sorted({p.shape[1] for p in prompts})
    torch._dynamo.reset()
    graphlift.reset()
    results: dict = {"requests": REQUESTS, "distinct_lengths": len(lengths),
                     "length_range": [lengths[0], lengths[-1]], "cold": {}, "warm": {}}
    with torch.no_grad():
        gl = graphlift.compile(model, backend="eager")
        results["cold"]["graphlift"] = _graphlift_cold("graphlift", gl, model, prompts)
        counter = CountingBackend()
        tc = torch.compile(model, backend=counter)
        seconds = cold_pass("torch.compile", tc, model, prompts)
        results["cold"]["torch.compile"] = {"seconds": seconds, "compiles": counter.graphs,
                                            "graphs": counter.graphs}
        results["cold"]["eager"] = {"seconds": serve(model, prompts), "compiles": 0, "graphs": 0}
        timed = {"eager": model, "graphlift": gl, "torch.compile": tc}
        for fn in timed.values():
            serve(fn, prompts)  # warm-up: every length is cached now
        per_round = [{name: serve(fn, prompts) / REQUESTS * 1e6 for name, fn in timed.items()}
                     for _ in range(rounds)]
        assert graphlift.stats(gl).compiles == results["cold"]["graphlift"]["compiles"], \
            "graphlift recompiled during the warm rounds"
        # Last: the cache belongs to forward's code object, which both wrappers share, and
        # hitting the recompile limit puts that code object in run-only (eager) mode.
        graphlift.reset()
        static = graphlift.compile(model, backend="eager", dynamic=False)
        logging.getLogger("graphlift").setLevel(logging.ERROR)  # the expected limit warning
        results["cold"]["graphlift dynamic=False"] = _graphlift_cold(
            "graphlift dynamic=False", static, model, prompts)
    for name in timed:
        entry = {"us_per_request": statistics.median(r[name] for r in per_round)}
        if name != "eager":
            entry["overhead_us"] = statistics.median(r[name] - r["eager"] for r in per_round)
        results["warm"][name] = entry
    return results


def print_tables(results: dict) -> None:
    print(f"{results['requests']} requests, {results['distinct_lengths']} distinct lengths in "
          f"{results['length_range']}, batch 1, GPT bench size, backend 'eager', 1 thread\n")
    print("cold (from empty caches):")
    print(f"  {'system':<25} {'total s':>8} {'compiles':>9} {'graphs':>7}")
    for name, row in results["cold"].items():
        note = "  (hit the recompile limit: rest ran eagerly)" if row.get("eager_fallback") else ""
        print(f"  {name:<25} {row['seconds']:>8.2f} {row['compiles']:>9} {row['graphs']:>7}"
              f"{note}")
    print("\nwarm (every request a cache hit), per request:")
    print(f"  {'system':<25} {'µs':>8} {'overhead µs':>12}")
    for name, row in results["warm"].items():
        overhead = f"{row['overhead_us']:>12.1f}" if "overhead_us" in row else f"{'':>12}"
        print(f"  {name:<25} {row['us_per_request']:>8.1f} {overhead}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="warm rounds (default 15)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    results = run(args.rounds)
    print_tables(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
