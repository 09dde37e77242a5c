"""The cases of tests/test_distributed.py, run by each of two gloo processes on 127.0.0.1.

``python tests/distributed_cases.py RANK WORLD PORT OUT`` joins the group, runs every case of
``CASES`` eagerly, under graphlift and under torch.compile (backend "eager" or a counter), and
writes one JSON file per rank with what it measured: whether graphlift's results and side
effects equal eager's, and the graph and break counts of both compilers. The test reads them.
One pair of processes runs every case: starting one costs seconds (importing torch).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

CASES: dict[str, Callable[[int], dict[str, Any]]] = {}


def case(fn: Callable[[int], dict[str, Any]]) -> Callable[[int], dict[str, Any]]:
    CASES[fn.__name__] = fn
    return fn


# -- collectives: eager against graphlift against torch.compile --------------------------------
def _counts(fn: Callable, make_args: Callable[[int], tuple], calls: int = 2) -> dict[str, Any]:
    """Run ``fn`` eagerly and compiled by both, ``calls`` times with fresh arguments."""
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter as DynamoCounter
    from torch._dynamo.utils import counters

    import graphlift
    from graphlift.testing import CompileCounter

    graphlift.reset()
    counter = CompileCounter()
    compiled = graphlift.compile(fn, backend=counter)
    same = True
    for i in range(calls):
        eager_args, gl_args = make_args(i), make_args(i)
        expected, got = fn(*eager_args), compiled(*gl_args)
        same = same and _equal(expected, got) and _equal(eager_args, gl_args)
    stats = graphlift.stats(compiled)
    torch._dynamo.reset()
    counters.clear()
    dynamo = DynamoCounter()
    tc = torch.compile(fn, backend=dynamo)
    for i in range(calls):
        tc(*make_args(i))
    breaks = sum(counters["graph_break"].values())
    torch._dynamo.reset()
    return {"same": same, "graphs": counter.frame_count, "breaks": stats.graph_breaks,
            "compiles": stats.compiles, "tc_graphs": dynamo.frame_count, "tc_breaks": breaks,
            "code": [gm.code for gm in counter.graphs]}


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_equal, a, b))
    return a == b


def _x(rank: int, i: int, n: int = 4) -> torch.Tensor:
    return torch.arange(float(n)) * (rank + 1) + i


def all_reduce(x):
    t = x.clone()
    dist.all_reduce(t)
    return t * 2


def all_reduce_max_into_input(x):
    dist.all_reduce(x, op=dist.ReduceOp.MAX)  # the argument itself is written
    return x + 1


def all_reduce_async_wait(x):
    t = x.clone()
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    return t * 2


def all_gather_into_tensor(x):
    out = torch.empty(dist.get_world_size() * x.numel())
    dist.all_gather_into_tensor(out, x)
    return out


def reduce_scatter_tensor(x):
    out = torch.empty(x.numel() // dist.get_world_size())
    dist.reduce_scatter_tensor(out, x, op=dist.ReduceOp.SUM)
    return out * 3


def broadcast(x):
    t = x.clone()
    dist.broadcast(t, src=1)
    return t


def all_to_all_single(x):
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    return out + 0


def all_to_all_single_splits(x):
    out = torch.empty(4)
    sizes = [1, 3] if dist.get_rank() == 0 else [3, 1]
    dist.all_to_all_single(out, x, output_split_sizes=sizes, input_split_sizes=sizes)
    return out


def queries(x):
    world = dist.group.WORLD
    return x * dist.get_rank() + dist.get_world_size() + dist.is_initialized() + world.size()


def on_subgroup(x, group):
    t = x.clone()
    dist.all_reduce(t, group=group)
    return t + dist.get_rank(group)


def all_gather_list_breaks(x):
    # Not rewritten (a list of outputs): a graph break at the call, which runs eagerly.
    parts = [torch.empty_like(x) for _ in range(2)]
    y = x * 2
    dist.all_gather(parts, y)
    return parts[0] + parts[1]


def all_reduce_requires_grad_breaks(w):
    # Eager c10d is invisible to autograd; the rewrite would not be: a break at the call.
    t = w * 2
    dist.all_reduce(t)
    return t.sum()


COLLECTIVE_CASES: dict[str, Callable] = {
    "all_reduce": lambda r: _counts(all_reduce, lambda i: (_x(r, i),)),
    "all_reduce_max_into_input": lambda r: _counts(all_reduce_max_into_input,
                                                   lambda i: (_x(r, i),)),
    "all_reduce_async_wait": lambda r: _counts(all_reduce_async_wait, lambda i: (_x(r, i),)),
    "all_gather_into_tensor": lambda r: _counts(all_gather_into_tensor, lambda i: (_x(r, i),)),
    "reduce_scatter_tensor": lambda r: _counts(reduce_scatter_tensor, lambda i: (_x(r, i),)),
    "broadcast": lambda r: _counts(broadcast, lambda i: (_x(r, i),)),
    "all_to_all_single": lambda r: _counts(all_to_all_single, lambda i: (_x(r, i),)),
    "all_to_all_single_splits": lambda r: _counts(all_to_all_single_splits,
                                                  lambda i: (_x(r, i),)),
    "queries": lambda r: _counts(queries, lambda i: (_x(r, i),)),
    "on_subgroup": lambda r: _counts(on_subgroup, lambda i: (_x(r, i), _SUBGROUP[0])),
    "all_gather_list_breaks": lambda r: _counts(all_gather_list_breaks, lambda i: (_x(r, i),)),
    "all_reduce_requires_grad_breaks": lambda r: _counts(
        all_reduce_requires_grad_breaks, lambda i: (_x(r, i).requires_grad_(),)),
}
_SUBGROUP: list[Any] = []
for _name, _run in COLLECTIVE_CASES.items():
    CASES[_name] = _run


def rank_shaped(x):
    # The collective's tensor has the same size on every rank; x need not.
    t = torch.ones(2) * x.sum()
    dist.all_reduce(t)
    return t + x.mean()


def _rank_differs(rank: int) -> dict[str, Any]:
    """Rank 1's second input has another size: rank 1 recompiles, rank 0 does not."""
    import graphlift

    graphlift.reset()
    compiled = graphlift.compile(rank_shaped)
    sizes = [4, 4 if rank == 0 else 6]
    same = all(torch.equal(rank_shaped(_x(rank, i, n)), compiled(_x(rank, i, n)))
               for i, n in enumerate(sizes))
    return {"same": same, "compiles": graphlift.stats(compiled).compiles}


CASES["rank_inputs_differ"] = _rank_differs


# -- compiler collectives: ranks agree which sizes are dynamic ---------------------------------
def halves(x):
    t = x.sum().reshape(1)
    dist.all_reduce(t)
    return x.view(x.shape[0] // 2, 2) * t


def _graph_code(gm: torch.fx.GraphModule) -> str:
    """The graph's code without the names that differ between compilers' runs."""
    return "\n".join(line for line in gm.code.splitlines() if line.strip())


def _agreed(enabled: bool) -> Callable[[int], dict]:
    """Rank 1's input is longer from the first call on: with compiler collectives both ranks
    compile one dynamic graph, without they compile a static graph each (of other sizes)."""
    def run(rank: int) -> dict[str, Any]:
        import torch._dynamo
        from torch._dynamo.testing import EagerAndRecordGraphs

        import graphlift
        from graphlift.testing import CompileCounter

        n = 4 if rank == 0 else 6
        graphlift.reset()
        counter = CompileCounter()
        compiled = graphlift.compile(halves, backend=counter)
        with graphlift.config.patch(enable_compiler_collectives=enabled):
            same = all(torch.equal(halves(_x(rank, i, n)), compiled(_x(rank, i, n)))
                       for i in range(2))
        torch._dynamo.reset()
        dynamo = EagerAndRecordGraphs()
        tc = torch.compile(halves, backend=dynamo)
        tc_error = None
        with torch._dynamo.config.patch(enable_compiler_collectives=enabled):
            try:
                for i in range(2):
                    tc(_x(rank, i, n))
            except Exception as error:  # 2.13 on a gloo group: its device check fails
                tc_error = f"{type(error).__name__}: {str(error).splitlines()[0]}"
        torch._dynamo.reset()
        return {"same": same, "compiles": graphlift.stats(compiled).compiles,
                "code": [_graph_code(gm) for gm in counter.graphs],
                "tc_code": [_graph_code(gm) for gm in dynamo.graphs], "tc_error": tc_error}
    return run


def _compiles_alone(rank: int) -> dict[str, Any]:
    """With compiler collectives on, rank 1 recompiles alone (its second input is longer): it
    waits out the timeout and decides alone; then rank 0 recompiles alone and does not wait
    (rank 1 gave that round up). Both keep computing right, and meet in every all-reduce."""
    import time

    import graphlift

    graphlift.reset()
    compiled = graphlift.compile(halves)
    sizes = [4, 4, 8] if rank == 0 else [4, 6, 6]
    same, seconds = True, []
    with graphlift.config.patch(enable_compiler_collectives=True,
                                compiler_collectives_timeout_s=2):
        for i, n in enumerate(sizes):
            start = time.perf_counter()
            same = same and torch.equal(halves(_x(rank, i, n)), compiled(_x(rank, i, n)))
            seconds.append(time.perf_counter() - start)
    return {"same": same, "compiles": graphlift.stats(compiled).compiles, "seconds": seconds}


CASES.update({"compiler_collectives": _agreed(True),
              "compiler_collectives_off": _agreed(False),
              "compiler_collectives_alone": _compiles_alone})


# -- DDP: gradients against eager DDP, graphs per bucket --------------------------------------
def _mlp() -> torch.nn.Module:
    """Three 1 MiB layers: with bucket_cap_mb=1 each is a bucket of its own."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 512))


class _SizesInside(torch.nn.Module):
    """Three 1 MiB layers whose forward reads its batch size: once that is dynamic, the graph
    computes sizes inside it (``size = x.size(0)``) in each bucket."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = (torch.nn.Linear(512, 512) for _ in range(3))

    def forward(self, x, n):
        x = self.a(x).relu() * n
        halves = x.view(x.shape[0] * 2, -1)
        x = self.b(x).relu() + n
        x = x + halves.view(x.shape[0], -1)
        return self.c(x) * x.shape[0]


class _ReshapedInPlace(torch.nn.Module):
    """A tensor made in the first bucket gets another shape in place (unsqueeze_) in the
    second: a part compiled by aot_eager must see its input as it comes, before the change."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b, self.c = (torch.nn.Linear(512, 512) for _ in range(3))

    def forward(self, x):
        x = self.a(x).relu()
        z = x * 1
        x = self.b(x).relu()
        z.unsqueeze_(0)
        return self.c(x + z.squeeze(0))


def _grads(module: torch.nn.Module, *args: Any) -> list[torch.Tensor]:
    module.zero_grad()
    module(*args).sum().backward()
    return [p.grad.clone() for p in module.parameters()]


def _batches(rank: int) -> list[tuple]:
    return [(torch.randn(4, 512) * (rank + 1),)] * 2


def _batches_of_sizes(rank: int) -> list[tuple]:
    torch.manual_seed(rank)
    return [(torch.randn(size, 512), n) for size, n in ((4, 2), (6, 3), (8, 5))]


class _SplitFails:
    """Makes torch's split_module raise inside graphlift's DDP optimizer, and collects the
    warnings graphlift logs meanwhile."""

    def __enter__(self) -> list[str]:
        import logging

        import graphlift.ddp_optimizer

        def refuse(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("injected: this graph cannot be split")

        self.module, self.saved = graphlift.ddp_optimizer, graphlift.ddp_optimizer.split_module
        self.module.split_module = refuse
        self.warnings: list[str] = []
        self.handler = logging.Handler()
        self.handler.emit = lambda record: self.warnings.append(record.getMessage())
        logging.getLogger("graphlift").addHandler(self.handler)
        return self.warnings

    def __exit__(self, *exc: object) -> None:
        import logging

        self.module.split_module = self.saved
        logging.getLogger("graphlift").removeHandler(self.handler)


def _ddp(form: str, backend: str, optimize_ddp: bool = True, model: Callable = _mlp,
         batches: Callable[[int], list[tuple]] = _batches,
         split_fails: bool = False) -> Callable[[int], dict]:
    def run(rank: int) -> dict[str, Any]:
        import contextlib
        import copy

        import torch._dynamo
        from torch._dynamo.testing import CompileCounterWithBackend as DynamoCounter
        from torch.nn.parallel import DistributedDataParallel as DDP

        import graphlift
        from graphlift.testing import CompileCounter, CompileCounterWithBackend

        base, inputs = model(), batches(rank)
        reference = DDP(copy.deepcopy(base), bucket_cap_mb=1)
        expected = [_grads(reference, *args) for args in inputs]
        graphlift.reset()
        counter = CompileCounter() if backend == "eager" else CompileCounterWithBackend(backend)
        warnings: list[str] = []
        with graphlift.config.patch(optimize_ddp=optimize_ddp), \
                _SplitFails() if split_fails else contextlib.nullcontext(warnings) as warnings:
            if form == "compile(DDP)":
                compiled = graphlift.compile(DDP(copy.deepcopy(base), bucket_cap_mb=1),
                                             backend=counter)
            else:
                compiled = DDP(graphlift.compile(copy.deepcopy(base), backend=counter),
                               bucket_cap_mb=1)
            got = [_grads(compiled, *args) for args in inputs]
        same = all(torch.allclose(a, b, atol=1e-4) for e, g in zip(expected, got)
                   for a, b in zip(e, g))
        torch._dynamo.reset()
        dynamo = DynamoCounter(backend)
        with torch._dynamo.config.patch(optimize_ddp=optimize_ddp):
            if form == "compile(DDP)":
                tc = torch.compile(DDP(copy.deepcopy(base), bucket_cap_mb=1), backend=dynamo)
            else:
                tc = DDP(torch.compile(copy.deepcopy(base), backend=dynamo), bucket_cap_mb=1)
            tc_same = all(torch.allclose(a, b, atol=1e-4) for args, e in zip(inputs, expected)
                          for a, b in zip(e, _grads(tc, *args)))
        torch._dynamo.reset()
        return {"same": same, "graphs": counter.frame_count, "tc_graphs": dynamo.frame_count,
                "tc_same": tc_same, "warnings": warnings,
                "compiles": graphlift.stats(compiled if form == "compile(DDP)"
                                            else compiled.module).compiles}
    return run


DDP_CASES = {
    "compile_of_ddp": _ddp("compile(DDP)", "eager"),
    "compile_of_ddp_aot_eager": _ddp("compile(DDP)", "aot_eager"),
    "ddp_of_compiled": _ddp("DDP(compile)", "eager"),
    "ddp_of_compiled_aot_eager": _ddp("DDP(compile)", "aot_eager"),
    "ddp_of_compiled_unsplit": _ddp("DDP(compile)", "eager", optimize_ddp=False),
    "ddp_sizes_inside_aot_eager": _ddp("DDP(compile)", "aot_eager", model=_SizesInside,
                                       batches=_batches_of_sizes),
    "ddp_reshaped_in_place_aot_eager": _ddp("DDP(compile)", "aot_eager",
                                            model=_ReshapedInPlace),
    "ddp_split_fails": _ddp("DDP(compile)", "aot_eager", split_fails=True),
}
CASES.update(DDP_CASES)


# -- FSDP2 (fully_shard): outputs of three training steps against eager FSDP2 -------------------
def _small() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16))


def _train(model: torch.nn.Module, x: torch.Tensor, steps: int = 3) -> list[torch.Tensor]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    outs = []
    for _ in range(steps):
        optimizer.zero_grad()
        out = model(x)
        out.sum().backward()
        optimizer.step()
        outs.append(out.detach().clone())
    return outs


def _fsdp(form: str) -> Callable[[int], dict]:
    """``root``: compile(fully_shard(model)); ``nested``: the same with each layer sharded too;
    ``blocks``: each sharded layer's forward compiled (hooks run eagerly around it)."""
    def shard(model: torch.nn.Module, compile_blocks: Any = None) -> torch.nn.Module:
        from torch.distributed.fsdp import fully_shard

        if form != "root":
            for layer in (model[0], model[2]):
                fully_shard(layer)
                if compile_blocks is not None:
                    layer.forward = compile_blocks(layer.forward)
        return fully_shard(model)

    def run(rank: int) -> dict[str, Any]:
        import torch._dynamo
        from torch._dynamo.testing import CompileCounter as DynamoCounter
        from torch._dynamo.utils import counters

        import graphlift
        from graphlift.testing import CompileCounter

        x = torch.randn(4, 16) * (rank + 1)
        expected = _train(shard(_small()), x)
        graphlift.reset()
        counter = CompileCounter()
        if form == "blocks":
            model = shard(_small(), lambda fn: graphlift.compile(fn, backend=counter))
        else:
            model = graphlift.compile(shard(_small()), backend=counter)
        got = _train(model, x)
        same = all(torch.allclose(a, b, atol=1e-6) for a, b in zip(expected, got))
        torch._dynamo.reset()
        counters.clear()
        dynamo = DynamoCounter()
        if form == "blocks":
            tc = shard(_small(), lambda fn: torch.compile(fn, backend=dynamo))
        else:
            tc = torch.compile(shard(_small()), backend=dynamo)
        tc_same = all(torch.allclose(a, b, atol=1e-6) for a, b in zip(expected, _train(tc, x)))
        tc_breaks = sum(counters["graph_break"].values())
        torch._dynamo.reset()
        compiled = [model[0].forward, model[2].forward] if form == "blocks" else [model]
        return {"same": same, "graphs": counter.frame_count,
                "breaks": sum(graphlift.stats(fn).graph_breaks for fn in compiled),
                "tc_same": tc_same, "tc_graphs": dynamo.frame_count, "tc_breaks": tc_breaks}
    return run


CASES.update({f"fsdp2_{form}": _fsdp(form) for form in ("root", "nested", "blocks")})


class _Residual(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        return x + self.lin(self.norm(x)).relu()


def _residuals(compile_block: Callable | None = None, form: str = "method") -> torch.nn.Module:
    """Four identical blocks, each sharded (``fully_shard``) and then compiled, in a sharded
    root: ``method``: ``block.forward = compile(block.forward)``; ``module``: the block
    replaced by ``compile(block)``."""
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = torch.nn.Sequential(*(_Residual() for _ in range(4)))
    for i, block in enumerate(model):
        fully_shard(block)
        if compile_block is not None and form == "method":
            block.forward = compile_block(block.forward)
        elif compile_block is not None:
            model[i] = compile_block(block)
    return fully_shard(model)


def _fsdp_shared(form: str) -> Callable[[int], dict]:
    """Identical sharded blocks share one compile (module arguments guarded by structure, the
    hooks run eagerly around it): one graph for four blocks, three steps equal eager FSDP2's."""
    def run(rank: int) -> dict[str, Any]:
        import torch._dynamo
        from torch._dynamo.testing import CompileCounter as DynamoCounter

        import graphlift
        from graphlift.testing import CompileCounter

        x = (torch.randn(4, 16) * (rank + 1)).requires_grad_()
        expected = _train(_residuals(), x)
        graphlift.reset()
        counter = CompileCounter()
        got = _train(_residuals(lambda fn: graphlift.compile(fn, backend=counter), form), x)
        torch._dynamo.reset()
        dynamo = DynamoCounter()
        tc = _train(_residuals(lambda fn: torch.compile(fn, backend=dynamo), form), x)
        torch._dynamo.reset()
        return {"same": all(torch.allclose(a, b, atol=1e-6) for a, b in zip(expected, got)),
                "tc_same": all(torch.allclose(a, b, atol=1e-6) for a, b in zip(expected, tc)),
                "graphs": counter.frame_count, "tc_graphs": dynamo.frame_count}
    return run


CASES.update({f"fsdp2_shared_{form}": _fsdp_shared(form) for form in ("method", "module")})


def main(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    import graphlift

    graphlift.config.raise_internal_errors = True
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    _SUBGROUP.append(dist.new_group([0, 1]))
    results: dict[str, Any] = {}
    only = os.environ.get("GRAPHLIFT_DIST_CASES")  # a comma-separated subset, while debugging
    for name, run in CASES.items():
        if only and name not in only.split(","):
            continue
        try:
            results[name] = run(rank)
        except Exception:  # reported by the test that reads this case
            results[name] = {"error": traceback.format_exc()}
        dist.barrier()  # a case that failed on one rank must not shift the other's
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
