"""torch.distributed while tracing: collectives as graph nodes, process groups as constants.

An in-place c10d collective (``dist.all_reduce(t)``) writes into its tensor and returns None, so
the graph would have nothing to keep if it were folded. It is rewritten, as torch.compile
rewrites it, into the functional collective of ``torch.ops._c10d_functional`` (a new tensor),
its ``wait_tensor`` and a ``copy_`` back into the program's tensor: three nodes that run on
every call of the graph, in the order the program called them. The functions rewritten are the
rows of :data:`COLLECTIVES`; ``graphlift.trace_rules`` sends their calls here (rule
``distributed_collective``), and every other torch.distributed function stays a graph break.

A call this module cannot follow (a group that is not a known process group, a reduce op with no
functional name, an ``async_op`` that is not a constant, a rank outside the group, a tensor that
requires grad while grad mode is on) raises
:class:`Unsupported`: a graph break at the call, which then runs eagerly. Nothing is dropped.

``async_op=True`` returns a :class:`WorkVariable`: the collective is issued and waited for where
it is called (so the tensor is final there, as it is after ``work.wait()`` in eager), and
``work.wait()`` is a no-op that returns True. (Partial: the wait is not deferred to the
``wait()`` call, so compute between the two does not overlap the collective inside one graph; a
Work object that leaves the frame, returned or alive at a graph break, runs the frame eagerly.)

Process-group queries (``get_rank``, ``get_world_size``, ``is_initialized``, ``group.WORLD``,
``pg.rank()``, ``pg.size()``) fold to constants. torch.compile folds them without guards; here
the entry is guarded on the default group being the object seen while tracing (0.2 µs, while
``dist.get_rank()`` itself costs 4 µs), so a group destroyed and made again recompiles instead of
baking in the old rank, size or group name.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from graphlift import trace_rules
from graphlift.exc import Unsupported
from graphlift.rebuild import Codegen
from graphlift.variables.base import Translator, VariableTracker
from graphlift.variables.constant import ConstantVariable, wrap_constant
from graphlift.variables.containers import BaseListVariable
from graphlift.variables.tensor import TensorVariable, call_torch

AVAILABLE = torch.distributed.is_available()
if AVAILABLE:
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d
    from torch.distributed._functional_collectives import REDUCE_OP_TO_STR

    FUNCTIONAL = torch.ops._c10d_functional
    PROCESS_GROUP = c10d.ProcessGroup
    WORK = torch._C._distributed_c10d.Work
    WORLD_META = c10d._WorldMeta
    REDUCE_OP = dist.ReduceOp.RedOpType


def default_group() -> Any:
    """The default process group, or None: what the guards of a traced group read (0.2 µs)."""
    return c10d._world.default_pg


def _guard_default_group(tx: Translator) -> Any:
    """The default group, and a guard that it stays this object."""
    group = default_group()
    tx.guards.global_switch(default_group, "torch.distributed.group.WORLD", group)
    return group


# -- process groups ------------------------------------------------------------------------------
class ProcessGroupVariable(VariableTracker):
    """A ``ProcessGroup`` object, a constant: its rank, size and name never change."""

    def __init__(self, group: Any, source=None) -> None:
        super().__init__(source)
        self.group = group

    def describe(self) -> str:
        return f"ProcessGroup {self.group.group_name}"

    def python_type(self) -> type:
        return type(self.group)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.group

    def var_getattr(self, tx, name):
        if name in GROUP_CONSTANT_ATTRS:
            return wrap_constant(getattr(self.group, name))
        if name in GROUP_CONSTANT_METHODS:
            return GroupMethodVariable(self.group, name)
        raise Unsupported(f"ProcessGroup.{name} is not traced")

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.group)


GROUP_CONSTANT_ATTRS = frozenset({"group_name", "group_desc"})
GROUP_CONSTANT_METHODS = frozenset({"rank", "size", "name"})


class GroupMethodVariable(VariableTracker):
    """``pg.rank`` before it is called: calling it folds to the group's answer."""

    callable_kind = True

    def __init__(self, group: Any, name: str) -> None:
        super().__init__()
        self.group, self.name = group, name

    def call(self, tx, args, kwargs):
        if args or kwargs:
            raise Unsupported(f"ProcessGroup.{self.name}() with arguments is not traced")
        return wrap_constant(getattr(self.group, self.name)())


class WorldVariable(VariableTracker):
    """``torch.distributed.group`` (and ``GroupMember``): ``.WORLD`` is the default group."""

    def __init__(self, cls: type, source=None) -> None:
        super().__init__(source)
        self.cls = cls

    def describe(self) -> str:
        return self.cls.__name__

    def python_type(self) -> type:
        return type(self.cls)

    def var_getattr(self, tx, name):
        if name == "WORLD":
            group = _guard_default_group(tx)
            return ConstantVariable(None) if group is None else ProcessGroupVariable(group)
        if name == "NON_GROUP_MEMBER":
            return wrap_constant(self.cls.NON_GROUP_MEMBER)
        raise Unsupported(f"torch.distributed.{self.cls.__name__}.{name} is not traced")

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.cls)


def resolve_group(tx: Translator, group: VariableTracker | None) -> Any:
    """The process group a collective or query names (None: the default one, guarded)."""
    if group is None or (group.is_constant() and group.as_constant() is None):
        found = _guard_default_group(tx)
        if found is None:
            raise Unsupported("a collective without an initialized default process group",
                              break_type="user_exception")
        return found
    if isinstance(group, ProcessGroupVariable):
        return group.group
    raise Unsupported(f"a collective over {group!r}, which is not a ProcessGroup known while "
                      "tracing", hints=("pass a ProcessGroup, or None for the default group",))


# -- queries ---------------------------------------------------------------------------------------
def _query_group(fn: Any) -> Any:
    """A query of one group (``get_rank(group=None)``): run for real on the resolved group."""
    def query(tx, bound: dict[str, VariableTracker]) -> VariableTracker:
        group = resolve_group(tx, bound.get("group"))
        return wrap_constant(fn(group))
    return query


def _is_initialized(tx, bound: dict[str, VariableTracker]) -> VariableTracker:
    tx.guards.global_switch(dist.is_initialized, "torch.distributed.is_initialized()",
                            dist.is_initialized())
    return wrap_constant(dist.is_initialized())


def _is_available(tx, bound: dict[str, VariableTracker]) -> VariableTracker:
    return ConstantVariable(AVAILABLE)  # fixed when torch was built


# -- collectives -----------------------------------------------------------------------------------
def _tensor(value: VariableTracker | None, what: str) -> TensorVariable:
    if not isinstance(value, TensorVariable):
        raise Unsupported(f"a collective whose {what} is {value!r}, not a tensor of the graph")
    return value


def _constant(value: VariableTracker | None, what: str) -> Any:
    if value is None:
        return None
    if not value.is_constant():
        raise Unsupported(f"a collective whose {what} ({value!r}) is not known while tracing")
    return value.as_constant()


def _reduce_op(value: VariableTracker | None) -> str:
    op = _constant(value, "op")
    op = dist.ReduceOp.SUM if op is None else op
    name = REDUCE_OP_TO_STR.get(op) if type(op) is REDUCE_OP else None
    if name is None:
        raise Unsupported(f"reduce op {op!r} has no functional collective",
                          hints=("use a ReduceOp such as SUM, MAX, MIN or PRODUCT",))
    return name


def _node(tx, target: Any, *args: Any) -> VariableTracker:
    """One functional-collective or tensor node; constants are wrapped."""
    items = [a if isinstance(a, VariableTracker) else wrap_constant(a) for a in args]
    if isinstance(target, str):
        return call_torch(tx, "call_method", target, items, {})
    return call_torch(tx, "call_function", target, items, {})


def _collected(tx, result: VariableTracker, into: TensorVariable) -> None:
    """Wait for a functional collective's result and copy it into the program's tensor
    (viewed as that tensor's shape: c10d reads and writes flat memory)."""
    done = _node(tx, FUNCTIONAL.wait_tensor.default, result)
    if tuple(done.fake.shape) != tuple(into.fake.shape):
        done = _node(tx, "view_as", done, into)
    _node(tx, "copy_", into, done)


def _flat(tx, tensor: TensorVariable) -> VariableTracker:
    return tensor if tensor.fake.dim() == 1 else _node(tx, "reshape", tensor, -1)


def _all_reduce(tx, bound, group) -> None:
    tensor = _tensor(bound["tensor"], "tensor")
    result = _node(tx, FUNCTIONAL.all_reduce.default, tensor, _reduce_op(bound.get("op")),
                   group.group_name)
    _collected(tx, result, tensor)


def _all_gather_into_tensor(tx, bound, group) -> None:
    output = _tensor(bound["output_tensor"], "output_tensor")
    flat = _flat(tx, _tensor(bound["input_tensor"], "input_tensor"))
    result = _node(tx, FUNCTIONAL.all_gather_into_tensor.default, flat, group.size(),
                   group.group_name)
    _collected(tx, result, output)


def _reduce_scatter_tensor(tx, bound, group) -> None:
    output = _tensor(bound["output"], "output")
    flat = _flat(tx, _tensor(bound["input"], "input"))
    result = _node(tx, FUNCTIONAL.reduce_scatter_tensor.default, flat,
                   _reduce_op(bound.get("op")), group.size(), group.group_name)
    _collected(tx, result, output)


def _broadcast(tx, bound, group) -> None:
    tensor = _tensor(bound["tensor"], "tensor")
    src, group_src = _constant(bound.get("src"), "src"), _constant(bound.get("group_src"),
                                                                   "group_src")
    if (src is None) == (group_src is None):
        raise Unsupported("broadcast needs exactly one of src and group_src",
                          break_type="user_exception")
    root = group_src if src is None else dist.get_group_rank(group, src)
    result = _node(tx, FUNCTIONAL.broadcast.default, tensor, root, group.group_name)
    _collected(tx, result, tensor)


def _split_sizes(value: VariableTracker | None, tensor: TensorVariable, size: int) -> list:
    """Split sizes as ints: given (a list of constants) or equal parts of dim 0."""
    if value is None or (value.is_constant() and value.as_constant() is None):
        rows = tensor.fake.shape[0]
        if not isinstance(rows, int) or rows % size:
            raise Unsupported("all_to_all_single with no split sizes and a first dimension "
                              "that is symbolic or not divisible by the group size")
        return [rows // size] * size
    items = value.items if isinstance(value, BaseListVariable) else None
    if items is None or not all(i.is_constant() for i in items):
        raise Unsupported("all_to_all_single with split sizes not known while tracing")
    return [i.as_constant() for i in items]


def _all_to_all_single(tx, bound, group) -> None:
    output = _tensor(bound["output"], "output")
    tensor = _tensor(bound["input"], "input")
    outputs = _split_sizes(bound.get("output_split_sizes"), output, group.size())
    inputs = _split_sizes(bound.get("input_split_sizes"), tensor, group.size())
    result = _node(tx, FUNCTIONAL.all_to_all_single.default, tensor, outputs, inputs,
                   group.group_name)
    _collected(tx, result, output)


def _collective_table() -> dict[Any, Any]:
    if not AVAILABLE:
        return {}
    return {
        dist.all_reduce: _all_reduce,  # functional all_reduce, copied back into the tensor
        dist.all_gather_into_tensor: _all_gather_into_tensor,  # flat input, viewed as output
        dist.reduce_scatter_tensor: _reduce_scatter_tensor,  # flat input, viewed as output
        dist.broadcast: _broadcast,  # src as the group's rank of that process
        dist.all_to_all_single: _all_to_all_single,  # split sizes as constants
    }


def _query_table() -> dict[Any, Any]:
    if not AVAILABLE:
        return {}
    return {
        dist.get_rank: _query_group(dist.get_rank),  # of a pinned group: never changes
        dist.get_world_size: _query_group(dist.get_world_size),
        dist.is_initialized: _is_initialized,  # guarded: init and destroy flip it
        dist.is_available: _is_available,  # fixed by the build
    }


# Handlers by function: each gets the call's arguments bound to the function's signature.
COLLECTIVES = _collective_table()
QUERIES = _query_table()
# What the trace rules say of them (they sit below this module: it tells them).
trace_rules.DISTRIBUTED_MODELLED.update(dict.fromkeys(COLLECTIVES,
                                                      trace_rules.DISTRIBUTED_COLLECTIVE))
trace_rules.DISTRIBUTED_MODELLED.update(dict.fromkeys(QUERIES, trace_rules.DISTRIBUTED_QUERY))


class DistributedFunctionVariable(VariableTracker):
    """A torch.distributed function the trace models: a collective or a process-group query."""

    callable_kind = True

    def __init__(self, fn: Any, source=None) -> None:
        super().__init__(source)
        self.fn = fn

    def describe(self) -> str:
        return f"torch.distributed.{self.fn.__name__}"

    def python_type(self) -> type:
        return type(self.fn)

    def call(self, tx, args, kwargs):
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs).arguments
        except TypeError as error:
            raise Unsupported(f"{self.describe()}(): {error}",
                              break_type="user_exception") from error
        if self.fn in QUERIES:
            return QUERIES[self.fn](tx, bound)
        async_op = _constant(bound.get("async_op"), "async_op")
        group = resolve_group(tx, bound.get("group"))
        if c10d._rank_not_in_group(group):
            raise Unsupported(f"{self.describe()} on a group this rank is not in")
        if torch.is_grad_enabled() and any(isinstance(v, TensorVariable) and v.fake.requires_grad
                                           for v in bound.values()):
            # Eager c10d writes behind autograd's back; the rewrite's copy_ would be recorded
            # and backward would differentiate through the collective.
            raise Unsupported(f"{self.describe()} on a tensor that requires grad",
                              hints=("call it under torch.no_grad(), or on a detached tensor",))
        COLLECTIVES[self.fn](tx, bound, group)
        return WorkVariable(self.describe()) if async_op else ConstantVariable(None)

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.fn)


class WorkVariable(VariableTracker):
    """The Work of an ``async_op=True`` collective, already waited for inside the graph."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def describe(self) -> str:
        return f"Work of {self.what}"

    def python_type(self) -> type:
        return WORK

    def var_getattr(self, tx, name):
        if name in ("wait", "is_completed", "is_success"):
            return WorkMethodVariable(self, name)
        raise Unsupported(f"Work.{name} is not traced")

    def reconstruct(self, codegen: Codegen) -> str:
        raise Unsupported(f"the {self.describe()} cannot leave the compiled frame",
                          hints=("call work.wait() inside the compiled function",))


class WorkMethodVariable(VariableTracker):
    """``work.wait`` before it is called: the collective is already done, so it answers True."""

    callable_kind = True

    def __init__(self, work: WorkVariable, name: str) -> None:
        super().__init__()
        self.work, self.name = work, name

    def call(self, tx, args, kwargs):
        return ConstantVariable(True)


def wrap_distributed(tx: Translator, value: Any, source=None) -> VariableTracker:
    """The tracker for a value :func:`is_distributed_value` accepts."""
    if source is not None:
        tx.guards.id_match(source, value)  # a group, dist.group or a function: by identity
    if isinstance(value, PROCESS_GROUP):
        return ProcessGroupVariable(value, source)
    if type(value) is WORLD_META:
        return WorldVariable(value, source)
    if type(value) is REDUCE_OP:
        return ConstantVariable(value, source)  # ReduceOp.SUM: a pybind enum value
    return DistributedFunctionVariable(value, source)


def is_distributed_value(value: Any) -> bool:
    """A process group, ``dist.group``, or a modelled torch.distributed function."""
    if not AVAILABLE:
        return False
    if isinstance(value, PROCESS_GROUP) or type(value) in (WORLD_META, REDUCE_OP):
        return True
    try:
        return value in COLLECTIVES or value in QUERIES
    except TypeError:  # unhashable
        return False
