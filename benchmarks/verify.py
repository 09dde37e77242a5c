"""What verify mode costs per verified call: graphlift with ``config.verify`` off and at 1.

Each case is timed in one process, eager, graphlift (verify off) and graphlift (verify = 1,
every hit verified) interleaved in rounds, one OpenMP thread, each figure a median over rounds
of one sample of many calls. The cost of verifying a call is the median over rounds of
(verify = 1) minus (verify off) in the same round: one eager run of the function, clones of the
arguments the graph mutates, and the comparison. At ``verify = N`` a call pays that cost / N on
average. Before timing, each verified case must be verified and agree (no difference found).

    .venv/bin/python benchmarks/verify.py                 # the table
    .venv/bin/python benchmarks/verify.py --json out.json  # plus the figures as JSON
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch

import graphlift

torch.set_num_threads(1)


# -- the workloads -----------------------------------------------------------------------------
def add_one(x):
    return x + 1


def mlp(x, w1, w2):
    return torch.relu(x @ w1) @ w2, {"norm": x.norm()}


def in_place(x):
    x.mul_(1.0).add_(0.0)  # mutates its argument: verify clones it for the compiled run
    return x.sum()


CASES: dict[str, tuple[Callable, Callable[[], tuple]]] = {
    "add_one, 8 floats": (add_one, lambda: (torch.ones(8),)),
    "mlp, 64x256 @ 256x256 @ 256x64": (
        mlp, lambda: (torch.randn(64, 256), torch.randn(256, 256), torch.randn(256, 64))),
    "in-place on an argument, 4096 floats": (in_place, lambda: (torch.ones(4096),)),
}


def _sample(call: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e6


def measure(fn: Callable, make: Callable[[], tuple], rounds: int, calls: int) -> dict:
    args = make()
    compiled = graphlift.compile(fn)
    compiled(*args)
    with graphlift.config.patch(verify=1):
        compiled(*args)
    stats = graphlift.stats(fn)
    assert (stats.verified, stats.verify_failures) == (1, 0), stats

    def verified() -> object:
        with graphlift.config.patch(verify=1):
            return compiled(*args)

    def plain() -> object:
        with graphlift.config.patch(verify=0):
            return compiled(*args)

    eager, off, on, cost = [], [], [], []
    for _ in range(rounds):
        eager.append(_sample(lambda: fn(*args), calls))
        off.append(_sample(plain, calls))
        on.append(_sample(verified, calls))
        cost.append(on[-1] - off[-1])
    return {"eager_us": statistics.median(eager), "verify_off_us": statistics.median(off),
            "verify_1_us": statistics.median(on), "cost_per_verified_call_us":
            statistics.median(cost)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--json", help="also write the figures here")
    options = parser.parse_args()
    figures = {name: measure(fn, make, options.rounds, options.calls)
               for name, (fn, make) in CASES.items()}
    print("| case | eager µs | graphlift µs (verify off) | graphlift µs (verify = 1) | "
          "cost per verified call µs |")
    print("|---|---|---|---|---|")
    for name, row in figures.items():
        print(f"| {name} | {row['eager_us']:.1f} | {row['verify_off_us']:.1f} | "
              f"{row['verify_1_us']:.1f} | {row['cost_per_verified_call_us']:.1f} |")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as file:
            json.dump(figures, file, indent=1)


if __name__ == "__main__":
    main()
