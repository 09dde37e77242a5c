"""Higher-order operators: graph size and compile time against the length of a scan, and the
activation memory a checkpointed training step saves.

Each measurement runs in a fresh process of its own (graphlift and torch.compile never share one),
backend "eager" for the scans and "aot_eager" for the training step, one OpenMP thread:

- ``scan`` (``torch._higher_order_ops.scan``) and ``associative_scan`` (``combine_mode="generic"``,
  the CPU form) at lengths 16 to 1024: the first call's time (tracing and compiling, after a
  warm-up compile of another function pays the imports) and the FX nodes the backend got,
  subgraphs included. graphlift's ``scan`` is one operator node whatever
  the length; its ``associative_scan`` is unrolled (one ``combine_fn`` per step), where
  torch.compile traces torch's generic implementation (a tree, so logarithmic in the length);
- an 8-block MLP stack's training step, every block under ``torch.utils.checkpoint.checkpoint``
  (``use_reentrant=False``) or none: the bytes autograd saves for the backward during the
  forward (parameters aside), counted by a ``saved_tensors_hooks`` pack hook, eager against
  graphlift and torch.compile.

    .venv/bin/python benchmarks/higher_order.py                 # a few minutes
    .venv/bin/python benchmarks/higher_order.py --lengths 16 64
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

SYSTEMS = ("graphlift", "torch.compile")

_CHILD = r"""
import json, sys, time, warnings
import torch
warnings.filterwarnings("ignore")
torch.set_num_threads(1)
system, kind, arg = sys.argv[1], sys.argv[2], sys.argv[3]
if system == "graphlift":
    import graphlift
    compile = graphlift.compile
    lookup = graphlift.backends.lookup_backend
else:
    compile = torch.compile
    from torch._dynamo.backends.registry import lookup_backend as lookup

def counting(name):
    inner, graphs = lookup(name), []
    def backend(gm, examples):
        graphs.append(gm)
        return inner(gm, examples)
    backend.graphs = graphs
    return backend

def nodes(graphs):
    return sum(len(m.graph.nodes) for gm in graphs for m in gm.modules()
               if isinstance(m, torch.fx.GraphModule))

if kind in ("scan", "associative_scan"):
    from torch._higher_order_ops import associative_scan, scan
    length = int(arg)
    xs = torch.randn(length, 8)
    if kind == "scan":
        fn = lambda xs: scan(lambda c, x: (c * 0.9 + x, c * 1), torch.zeros(8), xs)
    else:
        fn = lambda xs: associative_scan(lambda a, b: a + b, xs, 0, combine_mode="generic")
    compile(lambda t: t + 1, backend=lookup("eager"))(xs)  # imports paid outside the timing
    backend = counting("eager")
    start = time.perf_counter()
    compile(fn, backend=backend)(xs)
    print(json.dumps({"seconds": time.perf_counter() - start, "nodes": nodes(backend.graphs),
                      "graphs": len(backend.graphs)}))
else:
    from torch.utils.checkpoint import checkpoint
    torch.manual_seed(0)
    width, checkpointed = 256, arg == "checkpointed"
    blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(width, width),
                                                     torch.nn.GELU()) for _ in range(8))
    def step(x):
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=False) if checkpointed else block(x)
        return x.square().mean()
    fn = step if system == "eager" else compile(step, backend=counting("aot_eager"))
    x = torch.randn(64, width, requires_grad=True)
    fn(x).backward()  # compiles
    saved, weights = [], {p.data_ptr() for p in blocks.parameters()}
    def pack(t):  # activations only: a compiled step saves the parameters it reads too
        if t.data_ptr() not in weights:
            saved.append(t.numel() * t.element_size())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = fn(x)
    loss.backward()
    print(json.dumps({"saved_bytes": sum(saved)}))
"""


def child(system: str, kind: str, arg: str) -> dict:
    run = subprocess.run([sys.executable, "-c", _CHILD, system, kind, arg], capture_output=True,
                         text=True, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
                                         "PYTHONPATH": ":".join(sys.path)}, check=False)
    if run.returncode:
        return {"error": run.stderr.strip().splitlines()[-1]}
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 256, 1024])
    args = parser.parse_args()
    print("| op | length | graphlift nodes | torch.compile nodes | graphlift first call s "
          "| torch.compile first call s |")
    print("|---|---|---|---|---|---|")
    for kind in ("scan", "associative_scan"):
        for length in args.lengths:
            ours, theirs = (child(s, kind, str(length)) for s in SYSTEMS)
            print(f"| {kind} | {length} | {ours.get('nodes', ours.get('error'))} | "
                  f"{theirs.get('nodes', theirs.get('error'))} | {ours.get('seconds', 0):.2f} | "
                  f"{theirs.get('seconds', 0):.2f} |", flush=True)
    print()
    print("| 8 blocks, width 256, batch 64 | eager KiB saved | graphlift KiB | "
          "torch.compile KiB |")
    print("|---|---|---|---|")
    for mode in ("plain", "checkpointed"):
        row = [child(s, "memory", mode).get("saved_bytes", -1024) // 1024
               for s in ("eager", *SYSTEMS)]
        print(f"| {mode} | " + " | ".join(str(v) for v in row) + " |", flush=True)


if __name__ == "__main__":
    main()
