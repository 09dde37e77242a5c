"""Splitting a graph at DDP's gradient buckets (``config.optimize_ddp``, on by default).

DDP all-reduces gradients bucket by bucket (about ``bucket_cap_mb`` of parameters each, the last
layers' first) as soon as backward has produced a bucket's gradients, so communication overlaps
the rest of backward. A backend that makes one autograd function of the whole graph (aot_eager,
inductor) produces every gradient at the end of its backward: no all-reduce could start before.
So when a graph is compiled inside a DDP forward, it is split into one subgraph per bucket and
each subgraph is compiled by the user's backend on its own, as torch.compile's DDPOptimizer does.

Buckets are counted as DDP fills them: walking the graph from its last node back, the bytes of
the trainable parameters each node reads are added to the current bucket; once it holds the cap
(the first one: ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``, 1 MiB, as DDP's first bucket)
a new bucket starts, but only where the current one already hands a value on (a subgraph with no
output would be dead). A leading part with no parameters joins the bucket after it.

A graph that cannot be split (torch's ``split_module`` finds a cycle between the parts of a graph
with dynamic sizes read inside it, ``x.size(0)``) is compiled whole, with a warning: right, but
its gradients are all-reduced only after its whole backward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

from graphlift import logs
from graphlift.backends import BackendFn, call_graph_callable


def active_ddp_module() -> Any:
    """The DDP module whose forward is running (DDP sets it around its inner module's call)."""
    if not torch.distributed.is_available():
        return None
    return torch.nn.parallel.DistributedDataParallel._get_active_ddp_module()


def bucket_of_nodes(gm: torch.fx.GraphModule, examples: list, bucket_cap: int,
                    first_cap: int, ignored: frozenset[int]) -> dict[torch.fx.Node, int]:
    """Each computing node's bucket, numbered in forward order (0 runs first)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    params = {node: example for node, example in zip(placeholders, examples)
              if isinstance(example, torch.nn.Parameter) and example.requires_grad
              and id(example) not in ignored}
    buckets: list[list[torch.fx.Node]] = [[]]  # built from the end: buckets[-1] is current
    sizes = [0]
    counted: set[torch.fx.Node] = set()
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        cap = first_cap if len(buckets) == 1 else bucket_cap
        if sizes[-1] >= cap and _hands_on(buckets[-1]):
            buckets.append([])
            sizes.append(0)
        for arg in node.all_input_nodes:
            if arg in params and arg not in counted:
                counted.add(arg)
                sizes[-1] += params[arg].numel() * params[arg].element_size()
        buckets[-1].append(node)
    if len(buckets) > 1 and sizes[-1] == 0:  # a preamble without parameters
        buckets[-2].extend(buckets.pop())
    last = len(buckets) - 1
    return {node: last - i for i, bucket in enumerate(buckets) for node in bucket}


def _hands_on(bucket: list[torch.fx.Node]) -> bool:
    """Whether a node of the bucket is used after it (by a later bucket or the output)."""
    members = set(bucket)
    return any(user not in members for node in bucket for user in node.users)


def split_backend(backend: BackendFn, ddp: Any, fake_mode: Any) -> BackendFn:
    """A backend that splits the graph at ``ddp``'s buckets and compiles each part with
    ``backend`` (on fake inputs: the parts after the first have no real inputs yet)."""
    bucket_cap = ddp.bucket_bytes_cap
    first_cap = min(torch.distributed._DEFAULT_FIRST_BUCKET_BYTES, bucket_cap)
    ignored = frozenset(id(p) for name, p in ddp.module.named_parameters()
                        if name in ddp.parameters_to_ignore)

    def compile_split(gm: torch.fx.GraphModule, examples: list) -> Callable:
        buckets = bucket_of_nodes(gm, examples, bucket_cap, first_cap, ignored)
        if len(set(buckets.values())) <= 1:
            return backend(gm, examples)
        try:
            split = _split(gm, buckets)
            fakes = [n.meta.get("example_value") for n in gm.graph.nodes
                     if n.op == "placeholder"]
            _SubgraphCompiler(split, backend, fake_mode).run(*fakes)
        except PartFailed as failed:  # the user's backend failed on a part: its error
            raise failed.error from None
        except Exception as error:  # splitting failed: one graph, its all-reduces after it
            logs.warn(f"optimize_ddp: could not split {gm.__class__.__name__} at DDP's "
                      f"{len(set(buckets.values()))} gradient buckets ({type(error).__name__}: "
                      f"{error}); compiling it whole, so its gradients are all-reduced after "
                      f"its backward")
            return backend(gm, examples)
        split.recompile()
        return split.forward

    return compile_split


def _split(gm: torch.fx.GraphModule, buckets: dict[torch.fx.Node, int]) -> torch.fx.GraphModule:
    """``split_module`` at the buckets, with the example values hidden while it runs.

    split_module makes the node that first holds a size symbol an input of each part that takes
    a tensor of that size: right for torch.compile's graphs, whose sizes are placeholders, but a
    graph of ours reads sizes inside it (``size = x.size(0)``), and the part that reads one then
    depends on itself (it finds a cycle). Our parts read the sizes they need from their tensors,
    so they need no such inputs. The parts' nodes get their example values back by name.
    """
    hidden = {node: node.meta.pop("example_value") for node in gm.graph.nodes
              if "example_value" in node.meta}
    try:
        split = split_module(gm, None, lambda node: buckets[node], keep_original_order=True)
    finally:
        for node, value in hidden.items():
            node.meta["example_value"] = value
    by_name = {node.name: value for node, value in hidden.items()}
    for part in split.children():
        for node in part.graph.nodes:
            if node.name in by_name:
                node.meta.setdefault("example_value", by_name[node.name])
    return split


class PartFailed(Exception):
    """The backend raised ``error`` compiling one bucket's part (not a failure of splitting)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _SubgraphCompiler(torch.fx.Interpreter):
    """Runs the split graph on fake tensors; each part is compiled with the inputs it gets, then
    replaced by its compiled callable."""

    def __init__(self, split: torch.fx.GraphModule, backend: BackendFn, fake_mode: Any) -> None:
        super().__init__(split)
        self.backend = backend
        self.fake_mode = fake_mode

    def run_node(self, node: torch.fx.Node) -> Any:
        if node.op == "call_module":  # compiled outside the fake mode
            return super().run_node(node)
        with self.fake_mode:
            return super().run_node(node)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Any:
        part = self.fetch_attr(target)
        single = _returns_single(part)
        if single:  # backends expect a graph that returns a tuple
            _return_tuple(part)
        # Compiled before it runs: running the part on the fakes applies its in-place changes to
        # them (an unsqueeze_ of an input), as the real run will for the parts after it; a
        # backend given the changed fakes compiles for the wrong metadata.
        try:
            compiled = call_graph_callable(self.backend(part, list(args)))
        except Exception as error:
            raise PartFailed(error) from error
        with self.fake_mode:
            result = part(*args, **kwargs)  # the metadata of its outputs
        setattr(self.module, target, _CompiledPart(compiled, single))
        return result[0] if single else result


def _returns_single(part: torch.fx.GraphModule) -> bool:
    output = next(n for n in part.graph.nodes if n.op == "output")
    return not isinstance(output.args[0], (tuple, list))


def _return_tuple(part: torch.fx.GraphModule) -> None:
    output = next(n for n in part.graph.nodes if n.op == "output")
    output.args = ((output.args[0],),)
    part.recompile()


class _CompiledPart(torch.nn.Module):
    """One bucket's compiled subgraph, called by the split graph as a submodule."""

    def __init__(self, compiled: Callable, single: bool) -> None:
        super().__init__()
        self.compiled = compiled
        self.single = single

    def forward(self, *args: Any) -> Any:
        result = self.compiled(*args)
        return result[0] if self.single else result
