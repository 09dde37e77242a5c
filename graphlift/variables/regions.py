"""``nested_compile_region``: a function called many times in one frame is traced once.

The first call of a marked function (``graphlift.nested_compile_region``) in a trace is inlined
as usual while its effect on the trace is recorded: the graph nodes it added, the inputs it
lifted (a block's parameters), and the guards it made. A later call whose arguments match
(:func:`_call_key`: tensors of the same static metadata, equal constants, modules of the same
structure, the same grad mode and autocast state) is not traced: the recorded guards are
rebased onto the new call's modules (``self.h[0]`` becomes ``self.h[1]``) and checked on the real
objects now, the new modules' parameters are lifted, and the recorded nodes are copied with
their fake values propagated. So a model that runs one marked layer 32 times translates its
bytecode once. Where a rebased guard fails, or the call cannot be matched, the call is traced
as usual: the region is an optimization, never a change of meaning.

For backends that take subgraphs (``backends.takes_subgraphs``: ``aot_eager``, ``inductor``),
the region becomes one FX subgraph, an attribute of the frame's graph (``subgraph_0``), and
every call (the first too) is one ``torch.ops.higher_order.invoke_subgraph(subgraph_0,
'subgraph_0', *operands)`` node and a ``getitem`` per output, as torch.compile emits
``torch.compiler.nested_compile_region``: AOTAutograd traces the subgraph once and inductor
compiles it once. Every other backend gets each call's nodes inlined: ``eager`` (torch's eager
``invoke_subgraph`` cannot differentiate), users' backends, and a compile whose entry is to be
saved (``config.cache_dir``: warm start saves no submodules) or split by DDP's buckets.

Partial (issue 19): regions that write Python state (the side-effect ledger), mutate tensors in
place, switch grad mode or autocast inside, or take dynamic sizes are traced on every call; a
call whose rebased guard fails is traced inline (torch.compile makes it a second subgraph);
outputs that share memory keep a region inline.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch._higher_order_ops.invoke_subgraph import invoke_subgraph

from graphlift.config import config
from graphlift.ddp_optimizer import active_ddp_module
from graphlift.guards import Guard, GuardKind, _lambda
from graphlift.module_structure import structure_id
from graphlift.output_graph import STATE_SWITCHES, GraphInput
from graphlift.sources import FN_NAME, GLOBALS_NAME, Source
from graphlift.variables.base import Translator, VariableTracker
from graphlift.variables.constant import ConstantVariable
from graphlift.variables.containers import TupleVariable
from graphlift.variables.nn_module import NNModuleVariable
from graphlift.variables.tensor import TensorVariable

REGION_ATTR = "__graphlift_region__"


@dataclass
class RegionStats:
    """How often a marked function's body was traced, and how often a recorded trace of it
    was reused instead (counted over all compiles of the process)."""

    traced: int = 0
    reused: int = 0


def nested_compile_region(fn: Callable) -> Callable:
    """Mark ``fn`` (a function, or a method such as a block's ``forward``) as a region that a
    compiled frame traces once and reuses for every later call with matching arguments.

    Eagerly it is ``fn`` itself: the mark is an attribute, the call is unchanged. As
    ``torch.compiler.nested_compile_region``, it never changes results: calls that do not match
    are traced as usual. ``region_stats(fn)`` counts traces and reuses.
    """
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"nested_compile_region expects a Python function, got {type(fn).__name__}")
    fn.__dict__.setdefault(REGION_ATTR, RegionStats())
    return fn


def region_stats(fn: Callable) -> RegionStats:
    """The counters of a function marked with :func:`nested_compile_region`."""
    stats = getattr(fn, "__dict__", {}).get(REGION_ATTR)
    if stats is None:
        raise ValueError(f"{fn!r} is not marked with graphlift.nested_compile_region")
    return stats


def region_of(fn: VariableTracker) -> RegionStats | None:
    """The counters of the marked function a call tracker stands for, or None."""
    real = getattr(fn, "fn", None)
    if isinstance(real, types.FunctionType):
        return real.__dict__.get(REGION_ATTR)
    return None


@dataclass
class Recording:
    """What the first matching call of a region added to the trace."""

    args: list[VariableTracker]
    module_sources: list[Source]  # the module arguments' sources, in argument order
    exprs: list[tuple[str, str]]  # (expression, display name) per module argument
    inputs: list[GraphInput]  # the placeholders the region's operations read
    nodes: list[torch.fx.Node]  # operations added, in order
    # Every guard over the module arguments, made inside the region or before it (a member the
    # frame read before the call is guarded once, before): rebased onto each reusing call.
    guards: list[Guard]
    fast: list[str]
    output: Any  # ("tensor", node) | ("tuple", [...]) | ("const", value)
    # Where the region is a subgraph (:func:`_outline`): its name and the nodes from outside it
    # that it reads, in its placeholders' order. None: each reuse copies ``nodes`` inline.
    subgraph: str | None = None
    operands: list[torch.fx.Node] = dataclasses.field(default_factory=list)


def call_region(tx: Translator, fn: VariableTracker, stats: RegionStats,
                args: list[VariableTracker], run_inline: Callable[[], VariableTracker]
                ) -> VariableTracker:
    """A call of a marked function: replay its recorded trace, or trace (and record) it."""
    key = _call_key(tx, args)
    if key is None:
        stats.traced += 1
        return run_inline()
    regions = tx.output.regions
    recording = regions.get((fn.fn, key))
    if recording is not None:
        result = _replay(tx, recording, args)
        if result is not None:
            stats.reused += 1
            return result
        stats.traced += 1
        return run_inline()
    before = _Snapshot.take(tx)
    stats.traced += 1
    result = run_inline()
    recording = before.recording(tx, args, result)
    if recording is not None:
        if _uses_subgraphs(tx):
            _outline(tx, recording, result)
        regions[(fn.fn, key)] = recording
    return result


def _uses_subgraphs(tx: Translator) -> bool:
    """Whether regions become subgraphs here: the backend takes them (``takes_subgraphs``), the
    entry is not to be saved (warm start saves graphs without submodules: it refuses them), and
    DDP's bucketing, which splits the graph by parameters, does not run."""
    return tx.output.takes_subgraphs and not config.cache_dir and \
        not (config.optimize_ddp and active_ddp_module() is not None)


# -- matching calls ------------------------------------------------------------------------------
def _call_key(tx: Translator, args: list[VariableTracker]) -> tuple | None:
    """What two calls must share for one recorded trace to serve both; None: not reusable."""
    if tx.output.side_effects:
        return None  # the region could read a pending write: always traced
    parts: list[Any] = [torch.is_grad_enabled(), torch._C._is_any_autocast_enabled()]
    nodes: list[torch.fx.Node] = []
    for arg in args:
        if isinstance(arg, TensorVariable):
            fake = arg.fake
            if any(isinstance(s, torch.SymInt) for s in (*fake.shape, *fake.stride())):
                return None
            first = next((i for i, n in enumerate(nodes) if n is arg.node), None)
            nodes.append(arg.node)
            parts.append(("tensor", fake.dtype, fake.device, tuple(fake.shape), fake.stride(),
                          fake.requires_grad, arg.python_type(), first))
        elif isinstance(arg, NNModuleVariable) and not arg.pinned and arg.source is not None:
            if "__gl_" in tx.guards.expr(arg.source):
                return None
            parts.append(("module", structure_id(arg.module)))
        elif isinstance(arg, ConstantVariable):
            parts.append(("constant", type(arg.value), repr(arg.value)))
        else:
            return None
    return tuple(parts)


@dataclass
class _Snapshot:
    """The trace's state before a region runs, to find what the region added."""

    nodes: set
    mutated: int

    @classmethod
    def take(cls, tx: Translator) -> _Snapshot:
        return cls(set(tx.output.graph.nodes), len(tx.output.mutated_inputs))

    def recording(self, tx: Translator, args: list[VariableTracker],
                  result: VariableTracker) -> Recording | None:
        output, guards = tx.output, tx.guards
        if output.side_effects or len(output.mutated_inputs) != self.mutated:
            return None
        nodes = [n for n in output.graph.nodes if n not in self.nodes and n.op != "placeholder"]
        # get_attr: the subgraph of a region called inside this one
        if any(n.op not in ("call_function", "call_method", "get_attr") or n.meta.get("mutates")
               or n.target in STATE_SWITCHES for n in nodes):
            return None
        spec = _output_spec(result)
        if spec is None or _aliases_an_input(spec, nodes):
            return None
        read = {a for n in nodes for a in n.all_input_nodes if a.op == "placeholder"}
        inputs = [i for i in output.inputs if i.node in read]
        modules = [a.source for a in args if isinstance(a, NNModuleVariable)]
        exprs = [(guards.expr(s), s.name()) for s in modules]
        patterns = [_pattern(e) for e, _ in exprs]
        # Not the modules' own identity (``self.h[0] is <block>``, made where the frame indexed
        # a ModuleList): each call's module is another object, pinned where the frame got it.
        pins = tuple(f"{e} is __gl_" for e, _ in exprs)
        over = [g for g in guards.guards if any(p.search(g.check) for p in patterns)
                and not (g.kind is GuardKind.ID_MATCH and g.check.startswith(pins))]
        fast = [f for f in guards._fast if any(p.search(f) for p in patterns)
                and not f.startswith(pins)]
        return Recording(list(args), modules, exprs, inputs, nodes, over, fast, spec)


def _aliases_an_input(spec: Any, nodes: list[torch.fx.Node]) -> bool:
    """Whether an output is a view of something from outside the region: copies get fresh
    fake outputs (their own storage), which would hide that aliasing."""
    inside = set(nodes)
    outside = {id(_storage(n.meta["example_value"])) for node in nodes
               for n in node.all_input_nodes if n not in inside}
    outputs = _output_nodes(spec)
    return any(n not in inside or id(_storage(n.meta["example_value"])) in outside
               for n in outputs)


def _storage(fake: Any) -> Any:
    return fake.untyped_storage() if isinstance(fake, torch.Tensor) else fake


def _output_nodes(spec: Any) -> list[torch.fx.Node]:
    kind, value = spec
    if kind == "tensor":
        return [value]
    if kind == "tuple":
        return [n for item in value for n in _output_nodes(item)]
    return []


def _pattern(text: str) -> re.Pattern:
    """``text`` where it stands whole: ``h[1]`` must not match inside ``h[10]``."""
    return re.compile(r"(?<![\w.'\"])" + re.escape(text) + r"(?![\w])")


def _output_spec(result: VariableTracker) -> Any:
    if isinstance(result, TensorVariable):
        return ("tensor", result.node)
    if isinstance(result, ConstantVariable):
        return ("const", result.value)
    if isinstance(result, TupleVariable):
        items = [_output_spec(item) for item in result.items]
        return None if any(i is None for i in items) else ("tuple", items)
    return None


# -- one subgraph for every call -----------------------------------------------------------------
def _outline(tx: Translator, rec: Recording, result: VariableTracker) -> None:
    """Move the first call's nodes into a subgraph, called by one ``invoke_subgraph`` node with
    a ``getitem`` per output, as torch.compile emits a region; the call's result trackers are
    pointed at the getitems. A region whose outputs share memory, or that reads a value that is
    not a tensor, stays inline (``invoke_subgraph`` takes neither)."""
    graph, inside = tx.output.graph, set(rec.nodes)
    outputs = _output_nodes(rec.output)
    operands = list(dict.fromkeys(a for n in rec.nodes for a in n.all_input_nodes
                                  if a not in inside))
    storages = {id(_storage(o.meta["example_value"])) for o in outputs}
    if not outputs or len(storages) != len(outputs) or \
            not all(isinstance(o.meta.get("example_value"), torch.Tensor) for o in operands) or \
            any(user not in inside for n in rec.nodes for user in n.users):
        return
    sub = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for operand in operands:
        env[operand] = sub.placeholder(operand.name)
        env[operand].meta = dict(operand.meta)
    for node in rec.nodes:
        env[node] = sub.node_copy(node, env.__getitem__)
    sub.output(tuple(env[o] for o in outputs))
    rec.subgraph, rec.operands = tx.output.add_subgraph(sub), operands
    for node in reversed(rec.nodes):
        graph.erase_node(node)
    items = _invoke(tx, rec, operands, [o.meta["example_value"] for o in outputs])
    for tracker in _tensors(result):
        tracker.node = items[tracker.node]


def _invoke(tx: Translator, rec: Recording, operands: list[torch.fx.Node],
            fakes: list[torch.Tensor]) -> dict[torch.fx.Node, torch.fx.Node]:
    """One call of ``rec``'s subgraph: each recorded output node's getitem in this call."""
    output = tx.output
    call = output.create_node("call_function", invoke_subgraph,
                              (output.subgraph_node(rec.subgraph), rec.subgraph, *operands), {})
    call.meta["example_value"] = tuple(fakes)
    items = {}
    for index, (node, fake) in enumerate(zip(_output_nodes(rec.output), fakes)):
        item = output.getitem_node(call, index)
        item.meta.update(node.meta, example_value=fake, stack_trace=call.meta["stack_trace"])
        items[node] = item
    return items


def _tensors(tracker: VariableTracker) -> list[TensorVariable]:
    if isinstance(tracker, TensorVariable):
        return [tracker]
    if isinstance(tracker, TupleVariable):
        return [t for item in tracker.items for t in _tensors(item)]
    return []


# -- replaying a recording -----------------------------------------------------------------------
def _replay(tx: Translator, rec: Recording,
            args: list[VariableTracker]) -> VariableTracker | None:
    """The recorded trace, for the new arguments; None when a rebased guard fails now."""
    modules = [a for a in args if isinstance(a, NNModuleVariable)]
    rename = _Renamer([old for old, _ in rec.exprs], [tx.guards.expr(m.source) for m in modules],
                      [old for _, old in rec.exprs], [m.source.name() for m in modules])
    rebased = [dataclasses.replace(g, text=rename.name(g.text), check=rename.expr(g.check),
                                   current=None if g.current is None else rename.expr(g.current))
               for g in rec.guards]
    fast = [rename.expr(f) for f in rec.fast]
    frame = _frame_values(tx)
    if not all(_holds(tx, check, frame) for check in fast):
        return None
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    trackers: dict[torch.fx.Node, VariableTracker] = {}
    for old, new in zip(rec.args, args):
        if isinstance(old, TensorVariable):
            env[old.node], trackers[old.node] = new.node, new
    for graph_input in rec.inputs:
        tracker = _lift(tx, graph_input, rec.module_sources, [m.source for m in modules], frame)
        if tracker is None:
            continue  # not reached through a module argument: the same input
        if not isinstance(tracker, TensorVariable):
            return None
        env[graph_input.node], trackers[graph_input.node] = tracker.node, tracker
    operands = [env.get(n, n) for n in rec.operands]
    if any(getattr(n, "_erased", False) for n in operands):
        return None  # it read a value of a region that became a subgraph since
    known = {g.check for g in tx.guards.guards}
    for guard in rebased:
        if guard.check not in known:
            tx.guards._add(guard)
    present = set(tx.guards._fast)
    tx.guards._fast.extend(f for f in dict.fromkeys(fast) if f not in present)
    if rec.subgraph is not None:
        fakes = [_fresh_fake(tx, n.meta["example_value"]) for n in _output_nodes(rec.output)]
        env.update(_invoke(tx, rec, operands, fakes))
        return _rebuild(rec.output, env, trackers)
    graph = tx.output.graph
    outputs = set(_output_nodes(rec.output))
    for node in rec.nodes:
        copy = graph.node_copy(node, lambda n: env.get(n, n))
        copy.meta = dict(node.meta)  # intermediate values: the recorded fakes (same metadata)
        if node in outputs:
            copy.meta["example_value"] = _fresh_fake(tx, node.meta["example_value"])
        env[node] = copy
    return _rebuild(rec.output, env, trackers)


class _Renamer:
    """Rebases guard text from the recorded call's modules to the new call's."""

    def __init__(self, old_exprs: list[str], new_exprs: list[str], old_names: list[str],
                 new_names: list[str]) -> None:
        self._exprs = [(_pattern(old), new) for old, new in zip(old_exprs, new_exprs)]
        self._names = [(_pattern(old), new) for old, new in zip(old_names, new_names)]

    def expr(self, text: str) -> str:
        return _swap(text, self._exprs)

    def name(self, text: str) -> str:
        return _swap(text, self._names)


def _swap(text: str, pairs: list[tuple[re.Pattern, str]]) -> str:
    """Replace each old by its new at once (a new one may contain another old one)."""
    for i, (old, _) in enumerate(pairs):
        text = old.sub(f"\0{i}\0", text)
    for i, (_, new) in enumerate(pairs):
        text = text.replace(f"\0{i}\0", new)
    return text


def _frame_values(tx: Translator) -> tuple[tuple[str, ...], tuple]:
    root = tx.root()
    names = (FN_NAME, GLOBALS_NAME, *root.frame_arguments)
    return names, (root.frame_fn, root.frame_fn.__globals__, *root.frame_arguments.values())


def _holds(tx: Translator, check: str, frame: tuple) -> bool:
    names, values = frame
    try:
        return bool(_lambda(names, check, tx.guards.namespace)(*values))
    except Exception:
        return False


def _lift(tx: Translator, graph_input: GraphInput, old_roots: list[Source],
          new_roots: list[Source], frame: tuple) -> VariableTracker | None:
    """The new call's tracker for an input the recorded call lifted (its own parameter)."""
    source = graph_input.source
    for old, new in zip(old_roots, new_roots):
        source = _rebase(source, old, new)
    if source == graph_input.source:  # not reached through a module argument: shared
        return None
    names, values = frame
    try:
        value = _lambda(names, tx.guards.expr(source), tx.guards.namespace)(*values)
    except Exception:
        return None
    if hasattr(source, "value"):
        source = dataclasses.replace(source, value=value)
    return tx.builder.wrap(value, source)


def _rebase(source: Source, old: Source, new: Source) -> Source:
    if source == old:
        return new
    base = getattr(source, "base", None)
    if base is None:
        return source
    moved = _rebase(base, old, new)
    return source if moved is base else dataclasses.replace(source, base=moved)


def _fresh_fake(tx: Translator, fake: Any) -> Any:
    """An output of a copy: a fake of its own (one clone: same sizes, strides, dtype and
    autograd state, another storage), so later in-place operations on it touch no other."""
    if not isinstance(fake, torch.Tensor):
        return fake
    with tx.output.fake_mode:
        return fake.clone()


def _rebuild(spec: Any, env: dict, trackers: dict) -> VariableTracker:
    kind, value = spec
    if kind == "const":
        return ConstantVariable(value)
    if kind == "tuple":
        return TupleVariable([_rebuild(item, env, trackers) for item in value])
    if value in trackers:
        return trackers[value]  # an argument or a parameter returned as it is
    node = env[value]
    return TensorVariable(node, node.meta["example_value"])
