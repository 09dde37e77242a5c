"""torch.distributed under graphlift, on two gloo processes over 127.0.0.1 (issue 18).

One pair of processes (``tests/distributed_cases.py``) runs every case, eagerly and under
graphlift, and writes what it measured; each test here checks one case on both ranks: graphlift's
results and side effects equal eager's, and its graph and break counts are torch.compile's (or
differ where the table below says why). torch.compile's side of each case is measured by another
pair of processes and recorded (tests/reference), never run by the suite: its first call changes
torch for the whole process (``torch.distributions`` argument validation off, optimizers'
``_init_group`` wrapped in ``torch._dynamo.disable``), and graphlift measured after it would be
measured on a torch no user has. ``test_graphlift_measured_on_an_unchanged_torch`` checks that.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import distributed_cases
import pytest
import torch
from reference import measure, recorded

if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

WORLD = 2
TIMEOUT_S = 240  # both processes together; a hang (a deadlock) fails the test, not the suite
CASES_FILE = Path(__file__).with_name("distributed_cases.py")

# case: (graphs, breaks) under graphlift, (graphs, breaks) under torch.compile 2.13 (its
# counters['graph_break']).
EXPECTED = {
    "all_reduce": ((1, 0), (1, 0)),
    "all_reduce_max_into_input": ((1, 0), (1, 0)),
    # torch.compile breaks at async_op=True and at work.wait(); graphlift issues and waits for
    # the collective where it is called, and work.wait() folds.
    "all_reduce_async_wait": ((1, 0), (2, 2)),
    "all_gather_into_tensor": ((1, 0), (1, 0)),
    "reduce_scatter_tensor": ((1, 0), (1, 0)),
    # torch.compile 2.13 has no rewrite of dist.broadcast: a break, the call runs eagerly.
    "broadcast": ((1, 0), (1, 1)),
    "all_to_all_single": ((1, 0), (1, 0)),
    "all_to_all_single_splits": ((1, 0), (1, 0)),
    "queries": ((1, 0), (1, 0)),
    "on_subgroup": ((1, 0), (1, 0)),
    # dist.all_gather into a list is not rewritten: a break at the call, which runs eagerly.
    "all_gather_list_breaks": ((2, 1), (1, 0)),
    # A tensor that requires grad: a break at the collective (torch.compile rewrites it).
    "all_reduce_requires_grad_breaks": ((2, 1), (1, 0)),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_ranks(phase: str, out: Path, cases: dict) -> list[dict]:
    """Run ``phase`` of ``cases`` (tests/distributed_cases.py) on two processes; what rank 0
    and rank 1 measured."""
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GRAPHLIFT_DIST_CASES": ",".join(cases),
           "PYTHONPATH": os.pathsep.join([str(CASES_FILE.parent.parent),
                                          os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, str(CASES_FILE), str(rank), str(WORLD),
                               str(port), str(out), phase], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for rank in range(WORLD)]
    logs = []
    try:
        for proc in procs:
            logs.append(proc.communicate(timeout=TIMEOUT_S)[0])
    finally:
        for proc in procs:  # a rank left waiting for a dead peer
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for rank, proc in enumerate(procs):
        log = logs[rank] if rank < len(logs) else ""
        assert proc.returncode == 0, f"rank {rank} failed:\n{log}"
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(WORLD)]


def _torch_compile_figures(cases: dict) -> list[dict]:
    """torch.compile's side of ``cases`` on both ranks. A measure."""
    with tempfile.TemporaryDirectory() as out:
        return _run_ranks("torch_compile", Path(out), cases)


TORCH_COMPILE = measure("distributed/torch_compile", functools.partial(
    _torch_compile_figures, {name: case for name, case in distributed_cases.CASES.items()
                             if case.torch_compile is not None}))


@pytest.fixture(scope="module")
def graphlift_results(tmp_path_factory) -> list[dict]:
    """graphlift's side of every case, on rank 0 and rank 1."""
    return _run_ranks("graphlift", tmp_path_factory.mktemp("distributed"),
                      distributed_cases.CASES)


@pytest.fixture(scope="module")
def results(graphlift_results) -> list[dict]:
    """What each case measured under graphlift, with torch.compile's recorded figures (its
    ``tc_`` keys) merged in, on rank 0 and rank 1."""
    merged = []
    for ours, theirs in zip(graphlift_results, recorded(TORCH_COMPILE)):
        merged.append({name: {**got, **theirs.get(name, {})} for name, got in ours.items()
                       if name != distributed_cases.MARKS})
    return merged


def test_graphlift_measured_on_an_unchanged_torch(graphlift_results):
    """On both ranks, torch.compile had not changed torch (the marks of conftest's
    ``torch_compile_has_run``) when graphlift's cases ended; in torch.compile's processes it had:
    the check sees its marks."""
    marks = distributed_cases.MARKS
    assert [r[marks] for r in graphlift_results] == [False] * WORLD
    assert [r[marks] for r in recorded(TORCH_COMPILE)] == [True] * WORLD


def _case(results: list[dict], name: str) -> list[dict]:
    per_rank = [r[name] for r in results]
    for rank, got in enumerate(per_rank):
        assert "error" not in got, f"rank {rank}: {got['error']}"
    return per_rank


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_collective(results, name):
    (graphs, breaks), (tc_graphs, tc_breaks) = EXPECTED[name]
    for got in _case(results, name):
        assert got["same"], got["code"]
        assert (got["graphs"], got["breaks"]) == (graphs, breaks), got["code"]
        assert (got["tc_graphs"], got["tc_breaks"]) == (tc_graphs, tc_breaks)
        assert got["compiles"] == 1  # the second call is a cache hit


def test_collectives_are_nodes(results):
    """Each rewritten collective is its functional op, its wait and a copy into the tensor."""
    code = _case(results, "all_reduce")[0]["code"][0]
    assert "_c10d_functional.all_reduce.default" in code
    assert "_c10d_functional.wait_tensor.default" in code and ".copy_(" in code
    code = _case(results, "queries")[0]["code"][0]
    assert "c10d" not in code  # folded to constants


# case: graphs under graphlift, graphs under torch.compile 2.13. Three buckets of one layer each
# (bucket_cap_mb=1): one graph per bucket. torch.compile(DDP(model)) compiles nothing in 2.13
# (its frames break inside DDP's forward and the model's frame is not compiled).
DDP_EXPECTED = {
    "compile_of_ddp": (3, 0),
    "compile_of_ddp_aot_eager": (3, 0),
    "ddp_of_compiled": (3, 3),
    "ddp_of_compiled_aot_eager": (3, 3),
    "ddp_of_compiled_unsplit": (1, 1),  # config.optimize_ddp=False: one graph
    # Three batch sizes: the second compile is dynamic and reads sizes inside the graph, which
    # torch's split_module took for a cycle between the parts (it ran no graph at all).
    "ddp_sizes_inside_aot_eager": (6, 6),
    # An unsqueeze_ in the second bucket of a tensor from the first: aot_eager compiled the
    # part for the shape after the change (and the step raised).
    "ddp_reshaped_in_place_aot_eager": (3, 3),
}


@pytest.mark.parametrize("name", sorted(DDP_EXPECTED))
def test_ddp(results, name):
    graphs, tc_graphs = DDP_EXPECTED[name]
    for got in _case(results, name):
        assert got["same"]  # gradients equal eager DDP's, twice (the second a cache hit)
        assert (got["graphs"], got["tc_graphs"]) == (graphs, tc_graphs)
        assert got["compiles"] == (2 if name == "ddp_sizes_inside_aot_eager" else 1)
        assert got["tc_same"] and got["warnings"] == []


def test_ddp_split_fallback(results):
    """When splitting a graph at the buckets fails (here torch's split_module made to raise),
    the graph is compiled whole, with a warning naming the reason: one graph, gradients still
    eager DDP's."""
    for got in _case(results, "ddp_split_fails"):
        assert got["same"] and got["graphs"] == 1 and got["compiles"] == 1
        assert len(got["warnings"]) == 1
        assert "could not split" in got["warnings"][0] and "injected" in got["warnings"][0]


# case: (graphs, breaks) under graphlift, under torch.compile 2.13. FSDP2's hooks (all-gather
# before forward, reshard after) run eagerly around compiled forwards. torch.compile 2.13 does
# not trace them either: FSDP2 wraps them in torch._dynamo.disable, so compile(fully_shard(m))
# breaks there and compiles nothing. A root whose layers are sharded too runs eagerly under both:
# its forward calls them in a loop, and the call of a module with hooks is a break there.
# Compiling each sharded block: its two Linear layers share one entry (guarded by structure),
# but the first one's input needs no grad and the second's does, so two graphs.
FSDP_EXPECTED = {"fsdp2_root": ((1, 0), (0, 1)), "fsdp2_nested": ((0, 1), (0, 1)),
                 "fsdp2_blocks": ((2, 0), (2, 0))}


@pytest.mark.parametrize("name", sorted(FSDP_EXPECTED))
def test_fsdp2(results, name):
    ours, theirs = FSDP_EXPECTED[name]
    for got in _case(results, name):
        assert got["same"] and got["tc_same"]  # three training steps give eager FSDP2's outputs
        assert (got["graphs"], got["breaks"]) == ours
        assert (got["tc_graphs"], got["tc_breaks"]) == theirs


@pytest.mark.parametrize("form", ["method", "module"])
def test_fsdp2_identical_blocks_share_one_compile(results, form):
    """Four identical blocks, each fully_shard'ed then compiled (its forward, or the module):
    one graph for all four, as torch.compile makes; FSDP2 hands each forward the block's
    unsharded parameters, which the shared graph takes as inputs, and three training steps
    (reshard after each forward, SGD on the shards) give eager FSDP2's outputs."""
    for got in _case(results, f"fsdp2_shared_{form}"):
        assert got["same"] and got["tc_same"]
        assert (got["graphs"], got["tc_graphs"]) == (1, 1)


def test_one_rank_recompiles_alone(results):
    """A rank whose input changes size recompiles on its own; the other keeps its entry. The
    graphs of both still issue the same collectives, so neither waits for the other."""
    per_rank = _case(results, "rank_inputs_differ")
    assert all(got["same"] for got in per_rank)
    assert [got["compiles"] for got in per_rank] == [1, 2]


def test_compiler_collectives(results):
    """Rank 1's input is longer from the first call on. config.enable_compiler_collectives: both
    ranks compile the same dynamic graph. Without it, each compiles a static graph of its own
    sizes, as torch.compile does; torch.compile 2.13's setting fails on a gloo group (its device
    check of the compile group raises)."""
    on, off = _case(results, "compiler_collectives"), _case(results, "compiler_collectives_off")
    assert all(got["same"] and got["compiles"] == 1 for got in on + off)
    assert on[0]["code"] == on[1]["code"] and len(on[0]["code"]) == 1
    assert "l_x.size(0)" in on[0]["code"][0]  # dynamic on both ranks
    assert off[0]["code"] != off[1]["code"]
    assert "view(2, 2)" in off[0]["code"][0] and "view(3, 2)" in off[1]["code"][0]
    assert off[0]["tc_code"] != off[1]["tc_code"] and off[0]["tc_error"] is None
    assert all("InternalTorchDynamoError" in got["tc_error"] for got in on)


def test_compiler_collectives_when_one_rank_compiles_alone(results):
    """No deadlock: rank 1 recompiles alone, waits out the timeout (2 s) and decides alone (rank
    0's cache hit waits for it in the graph's all-reduce); then rank 0 recompiles alone and
    does not wait, as rank 1 gave that round up. Results stay eager's."""
    per_rank = _case(results, "compiler_collectives_alone")
    assert all(got["same"] and got["compiles"] == 2 for got in per_rank)
    assert all(2 <= got["seconds"][1] < 10 for got in per_rank)
    assert per_rank[0]["seconds"][2] < 1.5


def test_agreeing_merges_what_peers_saw():
    """In-process: what the ranks' traces saw, merged by source name (ShapeMemory.agree)."""
    from graphlift.dynamic_shapes import SeenValues, ShapeMemory
    from graphlift.sources import LocalSource

    x, n = LocalSource("x"), LocalSource("n")
    memory = ShapeMemory()
    seen = SeenValues({x: (4, 16)}, {n: 3})
    memory.merge_sizes(x, (4, 16))
    memory.merge_scalar(n, 3)
    assert not memory.agree(seen, [seen.as_json()])  # the peer saw the same: nothing changes
    other_rank = {"sizes": {"L['x']": [4, 16, 1]}, "scalars": {}}  # another rank of tensor
    assert not memory.agree(seen, [other_rank]) and memory.sizes[x] == (4, 16)
    assert memory.agree(seen, [{"sizes": {"L['x']": [6, 16]}, "scalars": {"L['n']": 5}}])
    assert memory.sizes[x] == (None, 16) and memory.scalars[n] is None


def test_compiler_collectives_without_a_process_group():
    """The setting on, torch.distributed not initialized: compiles as without it."""
    import graphlift
    from graphlift import compiler_collectives

    assert not torch.distributed.is_initialized()
    with graphlift.config.patch(enable_compiler_collectives=True):
        assert not compiler_collectives.active()
        fn = graphlift.compile(lambda x: x.view(x.shape[0] // 2, 2) + 1)
        assert torch.equal(fn(torch.ones(4)), torch.full((2, 2), 2.0))
        assert graphlift.stats(fn).compiles == 1
