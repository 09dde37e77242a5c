"""The cases of tests/test_distributed.py, run by each of two gloo processes on 127.0.0.1.

``python tests/distributed_cases.py RANK WORLD PORT OUT PHASE`` joins the group and runs the
``PHASE`` of every case of ``CASES``: ``graphlift`` runs each case eagerly and under graphlift,
``torch_compile`` (where a case has one) under torch.compile (backend "eager" or a counter). It
writes one JSON file per rank with what it measured: whether graphlift's results and side effects
equal eager's and graphlift's graph and break counts, or torch.compile's counts and results.

The two kinds of phase run in separate processes: torch.compile's first call changes torch for the
whole process (it turns off ``torch.distributions`` argument validation and wraps every
optimizer's ``_init_group`` in ``torch._dynamo.disable``), so a graphlift measurement after it
would test graphlift on a torch no user has. The suite runs only the graphlift phases; the
torch.compile phases are its recorded reference (tests/reference), run again when a case changes.
Each phase therefore builds its inputs and models anew, seeded, and measures its own eager
reference. The JSON also says, under ``MARKS``, whether those changes were there at the end (after
graphlift's phases they must not be; after torch.compile's they must: the check sees them).

One pair of processes runs every case: starting one costs seconds (importing torch). After each
phase of each case both ranks meet in a barrier, so that a case that failed on one rank does not
shift the other's.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

Phase = Callable[[int], dict[str, Any]]  # takes the rank, returns what it measured


@dataclass(frozen=True)
class Case:
    """``graphlift``: the case run eagerly and under graphlift; ``torch_compile``: under
    torch.compile, in a process of its own (None: the case has no such figure)."""

    graphlift: Phase
    torch_compile: Phase | None = None


CASES: dict[str, Case] = {}

# Before anything could change it: what torch_compile_has_run() (tests/conftest.py) compares with.
_INIT_GROUP = torch.optim.SGD._init_group
MARKS = "_torch_compile_marks"  # the JSON's key for them; no case has that name


def _torch_compile_marks() -> bool:
    """Whether torch.compile's first call has changed torch in this process."""
    return (torch.distributions.Distribution._validate_args is not True
            or torch.optim.SGD._init_group is not _INIT_GROUP)


# -- collectives: eager against graphlift against torch.compile --------------------------------
def _counts(fn: Callable, make_args: Callable[[int, int], tuple], calls: int = 2) -> Case:
    """Run ``fn`` ``calls`` times with fresh arguments (``make_args(rank, i)``): eagerly and under
    graphlift, then under torch.compile."""
    def graphlift_phase(rank: int) -> dict[str, Any]:
        import graphlift
        from graphlift.testing import CompileCounter

        graphlift.reset()
        counter = CompileCounter()
        compiled = graphlift.compile(fn, backend=counter)
        same = True
        for i in range(calls):
            eager_args, gl_args = make_args(rank, i), make_args(rank, i)
            expected, got = fn(*eager_args), compiled(*gl_args)
            same = same and _equal(expected, got) and _equal(eager_args, gl_args)
        stats = graphlift.stats(compiled)
        return {"same": same, "graphs": counter.frame_count, "breaks": stats.graph_breaks,
                "compiles": stats.compiles, "code": [gm.code for gm in counter.graphs]}

    def torch_compile_phase(rank: int) -> dict[str, Any]:
        import torch._dynamo
        from torch._dynamo.testing import CompileCounter as DynamoCounter
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        dynamo = DynamoCounter()
        tc = torch.compile(fn, backend=dynamo)
        for i in range(calls):
            tc(*make_args(rank, i))
        breaks = sum(counters["graph_break"].values())
        torch._dynamo.reset()
        return {"tc_graphs": dynamo.frame_count, "tc_breaks": breaks}

    return Case(graphlift_phase, torch_compile_phase)


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


def _x_only(rank: int, i: int) -> tuple:
    return (_x(rank, i),)


COLLECTIVE_CASES: dict[str, Case] = {
    "all_reduce": _counts(all_reduce, _x_only),
    "all_reduce_max_into_input": _counts(all_reduce_max_into_input, _x_only),
    "all_reduce_async_wait": _counts(all_reduce_async_wait, _x_only),
    "all_gather_into_tensor": _counts(all_gather_into_tensor, _x_only),
    "reduce_scatter_tensor": _counts(reduce_scatter_tensor, _x_only),
    "broadcast": _counts(broadcast, _x_only),
    "all_to_all_single": _counts(all_to_all_single, _x_only),
    "all_to_all_single_splits": _counts(all_to_all_single_splits, _x_only),
    "queries": _counts(queries, _x_only),
    "on_subgroup": _counts(on_subgroup, lambda r, i: (_x(r, i), _SUBGROUP[0])),
    "all_gather_list_breaks": _counts(all_gather_list_breaks, _x_only),
    "all_reduce_requires_grad_breaks": _counts(
        all_reduce_requires_grad_breaks, lambda r, i: (_x(r, i).requires_grad_(),)),
}
_SUBGROUP: list[Any] = []  # main() makes the group, once the process group is up
CASES.update(COLLECTIVE_CASES)


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


CASES["rank_inputs_differ"] = Case(_rank_differs)


# -- compiler collectives: ranks agree which sizes are dynamic ---------------------------------
def halves(x):
    t = x.sum().reshape(1)
    dist.all_reduce(t)
    return x.view(x.shape[0] // 2, 2) * t


def _graph_code(gm: torch.fx.GraphModule) -> str:
    """The graph's code without the names that differ between compilers' runs."""
    return "\n".join(line for line in gm.code.splitlines() if line.strip())


def _agreed(enabled: bool) -> Case:
    """Rank 1's input is longer from the first call on: with compiler collectives both ranks
    compile one dynamic graph, without they compile a static graph each (of other sizes)."""
    def graphlift_phase(rank: int) -> dict[str, Any]:
        import graphlift
        from graphlift.testing import CompileCounter

        n = 4 if rank == 0 else 6
        graphlift.reset()
        counter = CompileCounter()
        compiled = graphlift.compile(halves, backend=counter)
        with graphlift.config.patch(enable_compiler_collectives=enabled):
            same = all(torch.equal(halves(_x(rank, i, n)), compiled(_x(rank, i, n)))
                       for i in range(2))
        return {"same": same, "compiles": graphlift.stats(compiled).compiles,
                "code": [_graph_code(gm) for gm in counter.graphs]}

    def torch_compile_phase(rank: int) -> dict[str, Any]:
        import torch._dynamo
        from torch._dynamo.testing import EagerAndRecordGraphs

        n = 4 if rank == 0 else 6
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
        return {"tc_code": [_graph_code(gm) for gm in dynamo.graphs], "tc_error": tc_error}

    return Case(graphlift_phase, torch_compile_phase)


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
              "compiler_collectives_alone": Case(_compiles_alone)})


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
    torch.manual_seed(rank)
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
         batches: Callable[[int], list[tuple]] = _batches, split_fails: bool = False) -> Case:
    """Two backward passes of ``form`` against eager DDP's gradients (both phases build the model
    and batches anew, seeded, and run eager DDP for their reference)."""
    def wrap(module: torch.nn.Module, compile: Callable) -> torch.nn.Module:
        from torch.nn.parallel import DistributedDataParallel as DDP

        if form == "compile(DDP)":
            return compile(DDP(module, bucket_cap_mb=1))
        return DDP(compile(module), bucket_cap_mb=1)

    def reference(rank: int) -> tuple[torch.nn.Module, list[tuple], list[list[torch.Tensor]]]:
        """The model, the batches and eager DDP's gradients for each batch."""
        import copy

        from torch.nn.parallel import DistributedDataParallel as DDP

        base, inputs = model(), batches(rank)
        eager = DDP(copy.deepcopy(base), bucket_cap_mb=1)
        return base, inputs, [_grads(eager, *args) for args in inputs]

    def same_grads(expected: list[list[torch.Tensor]], got: list[list[torch.Tensor]]) -> bool:
        return all(torch.allclose(a, b, atol=1e-4) for e, g in zip(expected, got)
                   for a, b in zip(e, g))

    def graphlift_phase(rank: int) -> dict[str, Any]:
        import contextlib

        import graphlift
        from graphlift.testing import CompileCounter, CompileCounterWithBackend

        base, inputs, expected = reference(rank)
        graphlift.reset()
        counter = CompileCounter() if backend == "eager" else CompileCounterWithBackend(backend)
        warnings: list[str] = []
        with graphlift.config.patch(optimize_ddp=optimize_ddp), \
                _SplitFails() if split_fails else contextlib.nullcontext(warnings) as warnings:
            compiled = wrap(base, lambda m: graphlift.compile(m, backend=counter))
            got = [_grads(compiled, *args) for args in inputs]
        return {"same": same_grads(expected, got), "graphs": counter.frame_count,
                "warnings": warnings,
                "compiles": graphlift.stats(compiled if form == "compile(DDP)"
                                            else compiled.module).compiles}

    def torch_compile_phase(rank: int) -> dict[str, Any]:
        import torch._dynamo
        from torch._dynamo.testing import CompileCounterWithBackend as DynamoCounter

        base, inputs, expected = reference(rank)
        torch._dynamo.reset()
        dynamo = DynamoCounter(backend)
        with torch._dynamo.config.patch(optimize_ddp=optimize_ddp):
            tc = wrap(base, lambda m: torch.compile(m, backend=dynamo))
            tc_same = same_grads(expected, [_grads(tc, *args) for args in inputs])
        torch._dynamo.reset()
        return {"tc_graphs": dynamo.frame_count, "tc_same": tc_same}

    return Case(graphlift_phase, torch_compile_phase)


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


def _fsdp_input(rank: int) -> torch.Tensor:
    torch.manual_seed(rank)
    return torch.randn(4, 16) * (rank + 1)


def _fsdp(form: str) -> Case:
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

    def same(expected: list[torch.Tensor], got: list[torch.Tensor]) -> bool:
        return all(torch.allclose(a, b, atol=1e-6) for a, b in zip(expected, got))

    def graphlift_phase(rank: int) -> dict[str, Any]:
        import graphlift
        from graphlift.testing import CompileCounter

        x = _fsdp_input(rank)
        expected = _train(shard(_small()), x)
        graphlift.reset()
        counter = CompileCounter()
        if form == "blocks":
            model = shard(_small(), lambda fn: graphlift.compile(fn, backend=counter))
        else:
            model = graphlift.compile(shard(_small()), backend=counter)
        got = _train(model, x)
        compiled = [model[0].forward, model[2].forward] if form == "blocks" else [model]
        return {"same": same(expected, got), "graphs": counter.frame_count,
                "breaks": sum(graphlift.stats(fn).graph_breaks for fn in compiled)}

    def torch_compile_phase(rank: int) -> dict[str, Any]:
        import torch._dynamo
        from torch._dynamo.testing import CompileCounter as DynamoCounter
        from torch._dynamo.utils import counters

        x = _fsdp_input(rank)
        expected = _train(shard(_small()), x)
        torch._dynamo.reset()
        counters.clear()
        dynamo = DynamoCounter()
        if form == "blocks":
            tc = shard(_small(), lambda fn: torch.compile(fn, backend=dynamo))
        else:
            tc = torch.compile(shard(_small()), backend=dynamo)
        tc_same = same(expected, _train(tc, x))
        tc_breaks = sum(counters["graph_break"].values())
        torch._dynamo.reset()
        return {"tc_same": tc_same, "tc_graphs": dynamo.frame_count, "tc_breaks": tc_breaks}

    return Case(graphlift_phase, torch_compile_phase)


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


def _fsdp_shared(form: str) -> Case:
    """Identical sharded blocks share one compile (module arguments guarded by structure, the
    hooks run eagerly around it): one graph for four blocks, three steps equal eager FSDP2's."""
    def same(expected: list[torch.Tensor], got: list[torch.Tensor]) -> bool:
        return all(torch.allclose(a, b, atol=1e-6) for a, b in zip(expected, got))

    def graphlift_phase(rank: int) -> dict[str, Any]:
        import graphlift
        from graphlift.testing import CompileCounter

        x = _fsdp_input(rank).requires_grad_()
        expected = _train(_residuals(), x)
        graphlift.reset()
        counter = CompileCounter()
        got = _train(_residuals(lambda fn: graphlift.compile(fn, backend=counter), form), x)
        return {"same": same(expected, got), "graphs": counter.frame_count}

    def torch_compile_phase(rank: int) -> dict[str, Any]:
        import torch._dynamo
        from torch._dynamo.testing import CompileCounter as DynamoCounter

        x = _fsdp_input(rank).requires_grad_()
        expected = _train(_residuals(), x)
        torch._dynamo.reset()
        dynamo = DynamoCounter()
        tc = _train(_residuals(lambda fn: torch.compile(fn, backend=dynamo), form), x)
        torch._dynamo.reset()
        return {"tc_same": same(expected, tc), "tc_graphs": dynamo.frame_count}

    return Case(graphlift_phase, torch_compile_phase)


CASES.update({f"fsdp2_shared_{form}": _fsdp_shared(form) for form in ("method", "module")})


def _run_phase(result: dict[str, Any], phase: Phase, rank: int) -> None:
    """Merge what ``phase`` measured into the case's ``result``; its error, if it raised."""
    try:
        result.update(phase(rank))
    except Exception:  # reported by the test that reads this case
        result["error"] = result.get("error", "") + traceback.format_exc()
    dist.barrier()  # a case that failed on one rank must not shift the other's


PHASES = ("graphlift", "torch_compile")


def main(rank: int, world: int, port: int, out: str, phase: str) -> None:
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r} is not one of {PHASES}")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    import graphlift

    graphlift.config.raise_internal_errors = True
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    _SUBGROUP.append(dist.new_group([0, 1]))
    only = os.environ.get("GRAPHLIFT_DIST_CASES")  # a comma-separated subset, while debugging
    cases = {name: case for name, case in CASES.items() if not only or name in only.split(",")}
    results: dict[str, Any] = {}
    for name, case in cases.items():
        run = getattr(case, phase)
        if run is not None:
            results[name] = {}
            _run_phase(results[name], run, rank)
    results[MARKS] = _torch_compile_marks()
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
