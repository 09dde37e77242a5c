"""One DDP training step of a small transformer: eager vs graphlift vs torch.compile.

Two processes, gloo over 127.0.0.1, one OpenMP thread each. The model zoo's GPT at "bench" size
(4 blocks, d_model 64) wrapped as ``DDP(compile(model), bucket_cap_mb=1)``, so both compilers
split the graph at DDP's buckets; a step is zero_grad, forward, loss, backward (the gradient
all-reduces) and an SGD step. First step (compile included), then interleaved rounds of steps
(eager, graphlift, torch.compile, eager, ...); medians of rank 0's step times.

    .venv/bin/python benchmarks/ddp.py [--backend eager|aot_eager] [--rounds 15]
"""

from __future__ import annotations

import argparse
import copy
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch.distributed as dist

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _step(model, optimizer, inputs, loss) -> float:
    start = time.perf_counter()
    optimizer.zero_grad()
    loss(model(*inputs)).backward()
    optimizer.step()
    return time.perf_counter() - start


def worker(rank: int, port: int, backend: str, rounds: int) -> None:
    import torch._dynamo
    from models import make
    from torch.nn.parallel import DistributedDataParallel as DDP

    import graphlift

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    case = make("gpt", "bench")
    inputs = case.inputs()
    systems = {
        "eager": DDP(copy.deepcopy(case.model), bucket_cap_mb=1),
        "graphlift": DDP(graphlift.compile(copy.deepcopy(case.model), backend=backend),
                         bucket_cap_mb=1),
        "torch.compile": DDP(torch.compile(copy.deepcopy(case.model), backend=backend),
                             bucket_cap_mb=1),
    }
    optimizers = {name: torch.optim.SGD(m.parameters(), lr=0.01) for name, m in systems.items()}
    first = {name: _step(m, optimizers[name], inputs, case.loss) for name, m in systems.items()}
    times: dict[str, list[float]] = {name: [] for name in systems}
    for _ in range(rounds):
        for name, model in systems.items():
            times[name].append(min(_step(model, optimizers[name], inputs, case.loss)
                                   for _ in range(3)))
    if rank == 0:
        eager = statistics.median(times["eager"])
        print(f"backend {backend!r}, {rounds} rounds, medians of rank 0 (ms)")
        print("| system | first step ms | step ms | vs eager |")
        print("|---|---|---|---|")
        for name in systems:
            step = statistics.median(times[name])
            print(f"| {name} | {first[name] * 1e3:.0f} | {step * 1e3:.2f} | "
                  f"{step / eager:.2f}x |")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        worker(args.rank, args.port, args.backend, args.rounds)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(rank), "--port",
                               str(port), "--backend", args.backend, "--rounds",
                               str(args.rounds)], env=env) for rank in range(2)]
    try:
        for proc in procs:
            proc.wait(timeout=900)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


if __name__ == "__main__":
    main()
