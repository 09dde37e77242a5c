"""The harness of the higher-order operator tests (tests/test_hop_*.py).

A *case* is a function ``case(compile)`` that builds its inputs, calls ``compile(fn)`` on its
function, runs it (and its backward, where it trains) and returns what the program sees as plain
values (tensors as lists). It runs three ways:

- eagerly, with the operators replaced by their Python meaning (:data:`STAND_INS`): torch's own
  eager ``torch.cond``, ``while_loop``, ``map`` and ``scan`` call ``torch.compile`` inside, which
  the suite never runs in its processes (tests/reference);
- under graphlift, behind :class:`Collect`, a backend that keeps each graph it receives and then
  compiles it with ``aot_eager`` (so gradients go through AOTAutograd's handling of the operator);
- under torch.compile with the same backend, as a recorded measure (:func:`register`): its graph
  count, the higher-order operators its backend received, and what the program saw.

:func:`check` compares graphlift with eager (values, to float tolerance) and with torch.compile
(graphs, operators).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any
from unittest import mock

import torch
import torch._higher_order_ops as hops
from reference import measure

import graphlift
from graphlift.backends import lookup_backend

Compile = Callable[[Callable], Callable]


class Collect:
    """A backend that keeps the graphs it receives, then compiles each with ``inner``."""

    def __init__(self, inner: Callable) -> None:
        self.inner, self.graphs = inner, []

    def __call__(self, gm: torch.fx.GraphModule, examples: list) -> Callable:
        self.graphs.append(gm)
        return self.inner(gm, examples)

    def operators(self) -> list[str]:
        """The higher-order operators called in the graphs and their subgraphs, sorted."""
        found = set()
        for gm in self.graphs:
            for module in gm.modules():
                if isinstance(module, torch.fx.GraphModule):
                    found.update(str(n.target) for n in module.graph.nodes
                                 if isinstance(n.target, torch._ops.HigherOrderOperator))
        return sorted(found)


def values(value: Any) -> Any:
    """Tensors as nested lists (tuples and lists of them as lists)."""
    if isinstance(value, torch.Tensor):
        return value.detach().tolist()
    if isinstance(value, (tuple, list)):
        return [values(v) for v in value]
    return value


def close(left: Any, right: Any) -> bool:
    """Equal, floats to a relative 1e-5 (aot_eager's kernels may round differently)."""
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(close(a, b) for a, b in zip(left, right))
    if isinstance(left, float) and isinstance(right, float):
        return abs(left - right) <= 1e-5 * max(1.0, abs(left), abs(right))
    return left == right


# -- the operators' Python meaning ----------------------------------------------------------------
def eager_cond(pred, true_fn, false_fn, operands=()):
    return true_fn(*operands) if pred else false_fn(*operands)


def eager_while_loop(cond_fn, body_fn, carried_inputs):
    carried = tuple(carried_inputs)
    while cond_fn(*carried):
        carried = tuple(body_fn(*carried))
    return carried


def _stack(results: list) -> Any:
    if isinstance(results[0], torch.Tensor):
        return torch.stack(results)
    return type(results[0])(torch.stack(items) for items in zip(*results))


def eager_map(f, xs, *args):
    leaves = [xs] if isinstance(xs, torch.Tensor) else list(xs)
    rows = []
    for i in range(leaves[0].shape[0]):
        item = leaves[0][i] if isinstance(xs, torch.Tensor) else type(xs)(x[i] for x in leaves)
        rows.append(f(item, *args))
    return _stack(rows)


def eager_scan(combine_fn, init, xs, dim=0, reverse=False):
    leaves = [xs] if isinstance(xs, torch.Tensor) else list(xs)
    steps = range(leaves[0].shape[dim])
    carry, ys = init, [None] * len(steps)
    for i in (reversed(steps) if reverse else steps):
        item = leaves[0].select(dim, i) if isinstance(xs, torch.Tensor) else \
            type(xs)(x.select(dim, i) for x in leaves)
        carry, ys[i] = combine_fn(carry, item)
    out = _stack(ys)
    if dim:
        out = torch.movedim(out, 0, dim) if isinstance(out, torch.Tensor) else \
            type(out)(torch.movedim(o, 0, dim) for o in out)
    return carry, out


STAND_INS = ((torch, "cond", eager_cond), (hops, "while_loop", eager_while_loop),
             (hops, "map", eager_map), (hops, "scan", eager_scan))


@contextlib.contextmanager
def python_operators():
    """The operators replaced by their Python meaning (for the eager run)."""
    with contextlib.ExitStack() as stack:
        for owner, name, stand_in in STAND_INS:
            stack.enter_context(mock.patch.object(owner, name, stand_in))
        yield


# -- running a case -------------------------------------------------------------------------------
def eager(case: Callable[[Compile], Any]) -> Any:
    with python_operators():
        return values(case(lambda fn: fn))


def graphlift_run(case: Callable[[Compile], Any]) -> dict[str, Any]:
    backend = Collect(lookup_backend("aot_eager"))
    seen = case(functools.partial(graphlift.compile, backend=backend, fullgraph=True))
    return {"seen": values(seen), "graphs": len(backend.graphs), "operators": backend.operators()}


def torch_compile_run(case: Callable[[Compile], Any]) -> dict[str, Any]:
    """A measure: what torch.compile's backend received and what the program saw."""
    from torch._dynamo.backends.registry import lookup_backend as torch_backend

    backend = Collect(torch_backend("aot_eager"))
    seen = case(functools.partial(torch.compile, backend=backend))
    return {"seen": values(seen), "graphs": len(backend.graphs), "operators": backend.operators()}


def register(prefix: str, case: Callable[[Compile], Any]) -> Callable[[Compile], Any]:
    """Register torch.compile's figures for ``case`` under ``prefix/<case name>``."""
    measure(f"{prefix}/{case.__name__}", functools.partial(torch_compile_run, case))
    return case


def check(case: Callable[[Compile], Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """graphlift sees what eager sees, in torch.compile's graph count (``theirs``, the recorded
    figures), with the operators torch.compile's backend received."""
    ours = graphlift_run(case)
    # Eager's values are the bar. torch.compile's recorded ones are not compared: they come from
    # the machine that recorded them, and its kernels' last bits (a LayerNorm of near-constant
    # rows amplifies them to 1e-4 in stack_of_blocks' gradients) depend on the CPU.
    assert close(ours["seen"], eager(case)), (ours["seen"], eager(case))
    assert ours["graphs"] == theirs["graphs"]
    assert ours["operators"] == theirs["operators"]
    return ours
