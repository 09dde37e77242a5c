"""One workload under one system, in this process: prints one line of JSON, the last.

    python -m benchmarks.workloads.child llama-model graphlift --steps 20

The line holds each step's loss and seconds, the system's counts (:mod:`systems`), anything the
workload checked, and ``error`` (the exception that stopped the workload, if one did; its
traceback goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import logging
import traceback
import warnings

import torch

from benchmarks.workloads.catalog import WORKLOADS
from benchmarks.workloads.steps import Run
from benchmarks.workloads.systems import SYSTEMS


def quiet() -> None:
    """The libraries' notes (deprecations, device summaries, progress) are not the report."""
    warnings.filterwarnings("ignore")
    for name in ("transformers", "lightning", "lightning.pytorch", "lightning.fabric",
                 "accelerate", "torch._dynamo"):
        logging.getLogger(name).setLevel(logging.ERROR)


def run_workload(name: str, system: str, steps: int) -> dict:
    """Train workload ``name`` for ``steps`` steps under ``system``; what the child reports."""
    setup, counts = SYSTEMS[system]
    setup()
    torch.manual_seed(0)
    run = Run(system, steps)
    error = None
    try:
        WORKLOADS[name].train(run)
    except Exception as exc:  # a benchmark reports what stopped a workload and carries on
        traceback.print_exc()
        error = f"{type(exc).__name__}: {exc}"[:300]
    return {"workload": name, "system": system, "losses": run.log.losses,
            "seconds": run.log.seconds, "cpu_seconds": run.log.cpu_seconds,
            "checks": run.checks, "error": error, **counts()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("system", choices=sorted(SYSTEMS))
    parser.add_argument("--steps", type=int, default=20)
    options = parser.parse_args(argv)
    torch.set_num_threads(1)
    quiet()
    print(json.dumps(run_workload(options.workload, options.system, options.steps)))


if __name__ == "__main__":
    main()
