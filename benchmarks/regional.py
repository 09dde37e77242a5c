"""Regional compilation: the 12 blocks of a decoder compiled one by one (`blocks[i] = compile(b)`).

For graphlift (module arguments guarded by structure, the default), graphlift with
``share_module_entries=False`` (each instance pinned by identity, as before issue 19) and
torch.compile, all with backend "eager", one OpenMP thread, eval mode:

- first forward through all 12 blocks from empty caches, and the compiles it made; the systems
  take turns (A B C, A B C, ...) and the medians are reported;
- per-call time of the compiled blocks on cache hits, interleaved with eager, under ``no_grad``
  and with grad mode on; and the same for the zoo's GPT compiled whole, so that the cost of
  walking to parameters by path (structure) is seen next to binding them (identity);
- ``nested_compile_region``: the first call of a 32-block stack compiled whole, whose forward
  calls one function per block, with the function marked (graphlift's mark, torch's
  ``torch.compiler.nested_compile_region``) and unmarked, for backends eager, aot_eager and
  inductor (cold inductor caches), with the FX nodes the backend got (subgraphs included) and
  its ``invoke_subgraph`` calls.

    .venv/bin/python benchmarks/regional.py            # about a minute on a quiet machine
    .venv/bin/python benchmarks/regional.py --rounds 5
    .venv/bin/python benchmarks/regional.py --only region   # the nested_compile_region table
"""

from __future__ import annotations

import argparse
import statistics
import time
import types
import warnings
from collections.abc import Callable

import torch
import torch._dynamo
import torch._inductor.config
from models import gpt
from overhead import interleaved_rounds, median_of
from torch._higher_order_ops.invoke_subgraph import invoke_subgraph

import graphlift

torch.set_num_threads(1)
warnings.filterwarnings("ignore")

DIM, HEADS, BLOCK, LAYERS = 64, 4, 32, 12
SYSTEMS = ("graphlift", "graphlift identity", "torch.compile")


def distinct(cls: type, tag: str) -> type:
    """A subclass whose ``forward`` is a code object of its own: each system gets its own cache
    chain (graphlift keeps entries on the code object), so none serves another's calls."""
    forward = cls.forward
    code = forward.__code__.replace(co_name=f"forward_{tag}")
    fn = types.FunctionType(code, forward.__globals__, code.co_name, forward.__defaults__,
                            forward.__closure__)
    return type(f"{cls.__name__}_{tag}", (cls,), {"forward": fn})


def tag_of(system: str) -> str:
    return system.replace(" ", "_").replace(".", "_")


def make_blocks(system: str) -> list[torch.nn.Module]:
    torch.manual_seed(0)
    cls = distinct(gpt.Block, tag_of(system))
    return [cls(DIM, HEADS, BLOCK, 0.0).eval() for _ in range(LAYERS)]


def compile_with(system: str, module: torch.nn.Module) -> Callable:
    if system == "torch.compile":
        return torch.compile(module, backend="eager")
    with graphlift.config.patch(share_module_entries=system == "graphlift"):
        return graphlift.compile(module, backend="eager")


def run_blocks(blocks: list[Callable], x: torch.Tensor) -> torch.Tensor:
    for block in blocks:
        x = block(x)
    return x


def compiles_of(system: str, compiled: list[Callable]) -> int:
    if system == "torch.compile":
        return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    return graphlift.stats(compiled[0]).compiles  # one code object: Block.forward


def first_forward(system: str, x: torch.Tensor) -> tuple[float, int]:
    """Milliseconds of the first forward through 12 freshly compiled blocks, and compiles."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    graphlift.reset()
    blocks = make_blocks(system)
    compiled = [compile_with(system, b) for b in blocks]
    patch = graphlift.config.patch(share_module_entries=system == "graphlift")
    with torch.no_grad(), patch:
        start = time.perf_counter()
        out = run_blocks(compiled, x)
        ms = (time.perf_counter() - start) * 1e3
        torch.testing.assert_close(out, run_blocks(blocks, x))
    return ms, compiles_of(system, compiled)


def first_forward_table(rounds: int, x: torch.Tensor) -> dict[str, tuple[float, int]]:
    times: dict[str, list[float]] = {s: [] for s in SYSTEMS}
    compiles: dict[str, int] = {}
    for _ in range(rounds):
        for system in SYSTEMS:
            ms, count = first_forward(system, x)
            times[system].append(ms)
            compiles[system] = count
    return {s: (statistics.median(times[s]), compiles[s]) for s in SYSTEMS}


def hit_timings(x: torch.Tensor, samples: int, calls: int) -> dict[str, dict[str, float]]:
    """Per-call µs on cache hits: the 12 regional blocks and the zoo's GPT compiled whole."""
    torch._dynamo.reset()
    graphlift.reset()
    timed: dict[str, tuple[Callable, tuple]] = {}
    eager_blocks = make_blocks("eager")
    timed["blocks: eager"] = (run_blocks, (eager_blocks, x))
    for system in SYSTEMS:
        compiled = [compile_with(system, b) for b in make_blocks(system)]
        timed[f"blocks: {system}"] = (run_blocks, (compiled, x))
    sizes = gpt.SIZES["bench"]
    idx = torch.randint(0, sizes["vocab"], (sizes["batch"], sizes["seq"]))
    model_args = {k: sizes[k] for k in ("vocab", "block", "layers", "heads", "dim")}
    timed["GPT: eager"] = (gpt.GPT(**model_args).eval(), (idx,))
    for system in SYSTEMS:
        model = distinct(gpt.GPT, tag_of(system))(**model_args).eval()
        timed[f"GPT: {system}"] = (compile_with(system, model), (idx,))
    modes = (("no_grad", torch.no_grad), ("grad", torch.enable_grad))
    for name, (fn, args) in timed.items():  # compile (with the system's setting) and warm up
        share = not name.endswith("identity")
        for _, context in modes:
            with context(), graphlift.config.patch(share_module_entries=share):
                for _ in range(3):
                    fn(*args)
    results = {}
    for mode, context in modes:
        with context():
            rounds = interleaved_rounds(timed, calls, samples)
        results[mode] = {name: median_of(rounds, lambda r, n=name: r[n]) for name in timed}
    return results


class Stack(torch.nn.Module):
    """``layers`` blocks, each run through ``self.call(block, x)``."""

    def __init__(self, layers: int, call: Callable) -> None:
        super().__init__()
        self.h = torch.nn.ModuleList(gpt.Block(DIM, HEADS, BLOCK, 0.0) for _ in range(layers))
        self.call = call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.h:
            x = self.call(block, x)
        return x


def apply_block(block: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return block(x)


def graph_nodes(gm: torch.fx.GraphModule) -> int:
    """FX nodes of a graph and of every subgraph module it holds (each counted once)."""
    return len(gm.graph.nodes) + sum(len(sub.graph.nodes) for sub in gm.children()
                                     if isinstance(sub, torch.fx.GraphModule))


def region_first_call(system: str, backend: str, marked: bool, layers: int,
                      x: torch.Tensor) -> tuple:
    """(ms, graphs, FX nodes handed to the backend, subgraph calls, bodies traced) of a fresh
    Stack's first compiled call."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    graphlift.reset()
    call = types.FunctionType(apply_block.__code__, apply_block.__globals__, "apply_block")
    if marked:
        call = torch.compiler.nested_compile_region(call) if system == "torch.compile" \
            else graphlift.nested_compile_region(call)
    torch.manual_seed(0)
    stack = Stack(layers, call).eval()
    seen: list[tuple[int, int]] = []

    def capture(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        seen.append((graph_nodes(gm), subgraph_calls(gm)))
        return torch._dynamo.lookup_backend(backend)(gm, example_inputs)

    compiled = torch.compile(stack, backend=capture) if system == "torch.compile" \
        else graphlift.compile(stack, backend=backend)
    with torch.no_grad():
        start = time.perf_counter()
        out = compiled(x)
        ms = (time.perf_counter() - start) * 1e3
        torch.testing.assert_close(out, stack(x), atol=1e-4, rtol=1e-4)
    if system == "torch.compile":
        nodes, calls = map(sum, zip(*seen))
        return ms, len(seen), nodes, calls, None
    graphs = [e.graph for e in graphlift.cache_entries(compiled) if e.graph is not None]
    traced = graphlift.region_stats(call).traced if marked else layers
    return (ms, graphlift.stats(compiled).graphs, sum(map(graph_nodes, graphs)),
            sum(map(subgraph_calls, graphs)), traced)


def subgraph_calls(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.target is invoke_subgraph)


def region_table(rounds: int, layers: int, backends: list[str], x: torch.Tensor) -> None:
    """The systems take turns within each backend and round (A B A B), on a cold inductor
    cache (``force_disable_caches``): every compile generates its code."""
    runs = [(s, b, m) for b in backends for m in (False, True)
            for s in ("graphlift", "torch.compile")]
    times: dict[tuple, list[float]] = {r: [] for r in runs}
    counts: dict[tuple, tuple] = {}
    with torch._inductor.config.patch(force_disable_caches=True):
        for backend in backends:
            for _ in range(rounds):
                for run in (r for r in runs if r[1] == backend):
                    ms, *count = region_first_call(*run, layers, x)
                    times[run].append(ms)
                    counts[run] = tuple(count)
    print(f"\nfirst call of a {layers}-block stack compiled whole (median of {rounds}):")
    print(f"{'system':<16} {'backend':<10} {'region':<8} {'ms':>9} {'graphs':>7} {'nodes':>7} "
          f"{'subgraph calls':>15} {'blocks traced':>14}")
    for run in runs:
        system, backend, marked = run
        graphs, nodes, calls, traced = counts[run]
        print(f"{system:<16} {backend:<10} {'marked' if marked else 'plain':<8} "
              f"{statistics.median(times[run]):9.1f} {graphs:7d} {nodes:7d} {calls:15d} "
              f"{'' if traced is None else traced:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="first-forward rounds")
    parser.add_argument("--samples", type=int, default=21, help="hit-path rounds")
    parser.add_argument("--calls", type=int, default=20, help="calls per hit-path sample")
    parser.add_argument("--region-layers", type=int, default=32)
    parser.add_argument("--region-rounds", type=int, default=1)
    parser.add_argument("--region-backends", default="eager,aot_eager,inductor",
                        help="comma-separated backends for the nested_compile_region table")
    parser.add_argument("--only", choices=("regional", "hits", "region"), default=None)
    args = parser.parse_args()
    x = torch.randn(2, 16, DIM)
    first_forward("graphlift", x)  # warm the process: imports, first ShapeEnv, Dynamo's setup
    first_forward("torch.compile", x)
    if args.only in (None, "region"):
        region_table(args.region_rounds, args.region_layers, args.region_backends.split(","), x)
    if args.only == "region":
        return
    table = first_forward_table(args.rounds, x)
    tc_ms = table["torch.compile"][0]
    print(f"first forward, {LAYERS} blocks compiled one by one (median of {args.rounds}):")
    print(f"{'system':<20} {'ms':>8} {'compiles':>9} {'vs torch.compile':>17}")
    for system, (ms, count) in table.items():
        print(f"{system:<20} {ms:8.1f} {count:9d} {ms / tc_ms:16.2f}x")
    if args.only == "regional":
        return
    hits = hit_timings(x, args.samples, args.calls)
    print(f"\nper call on cache hits, µs (median of {args.samples} interleaved rounds):")
    print(f"{'workload':<30} {'no_grad':>9} {'grad':>9}")
    for name in hits["no_grad"]:
        print(f"{name:<30} {hits['no_grad'][name]:9.1f} {hits['grad'][name]:9.1f}")


if __name__ == "__main__":
    main()
