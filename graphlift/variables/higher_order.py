"""Higher-order operators: torch functions that take a Python function and run it as one node.

``torch.cond``, ``torch._higher_order_ops.while_loop``, ``map``, ``scan`` and
``torch.utils.checkpoint.checkpoint`` take a user callable (a lambda, a closure, a nested
function, a method, an ``nn.Module``, a ``functools.partial``). torch.compile traces that callable
into a subgraph of its own and calls torch's higher-order operator on it; graphlift does the same,
so the backend receives the nodes torch.compile's backend receives (``aot_eager`` and
``inductor`` trace and compile the subgraphs, and a checkpointed body is recomputed in the
backward pass).

The one mechanism is :func:`trace_body`: the callable runs on *fresh proxies* (a node per
argument, with a fake of its own carrying the argument's metadata) through the ordinary
translator, into the frame's graph. What it reads from outside (closure cells, globals, module
parameters and buffers, tensors of the frame) arrives as nodes made before it: those become
*lifted* inputs, placeholders of the subgraph after the proxies, and operands of the operator
node. Guards the body makes are the frame's (the guard builder is shared). Writes that would
escape the body (a list append, an attribute, global or cell store, a deferred call, a print, an
in-place write into a tensor from outside) are refused with the break type
``higher_order_body``; under ``fullgraph=True`` the error names the body's line. The body's nodes
are then moved into an FX graph installed as a module attribute of the frame's graph
(``cond_true_0``, as torch.compile names them) and erased from the frame's graph.

Partial: a body may take and return only tensors (and flat tuples or lists of them; ``map``
and ``scan`` leaves likewise); a body that reads a symbolic size or number from outside, switches
grad mode or autocast inside, or writes into its own inputs is refused; a symbolic predicate of
``torch.cond`` is guarded and folds to one branch, where torch.compile keeps both;
``associative_scan`` is unrolled (``polyfills.compiler``); ``flex_attention`` and ``torch.func``
are not modelled yet.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.utils.hooks
from torch._higher_order_ops.register_hook import register_hook_op

from graphlift.exc import Unsupported
from graphlift.output_graph import STATE_SWITCHES, storage_ref
from graphlift.rebuild import Codegen
from graphlift.sources import Source
from graphlift.variables.base import TracedException, Translator, VariableTracker, births
from graphlift.variables.constant import ConstantVariable
from graphlift.variables.containers import ListVariable, TupleVariable
from graphlift.variables.functions import CellVariable
from graphlift.variables.tensor import CALLABLE_METHODS, TensorVariable, call_torch

BODY_BREAK = "higher_order_body"


def _body_input() -> None:
    """The target of a proxy node: an argument of a body being traced (never run; the node
    becomes a placeholder of the body's subgraph)."""
    raise AssertionError("a body proxy reached a graph")


# -- tracing a callable into a subgraph ---------------------------------------------------------
@dataclass
class Body:
    """One callable traced on proxies: the nodes it added to the frame's graph, its outputs, and
    the nodes from outside it that it read."""

    role: str  # "true_fn", for messages
    proxies: list[torch.fx.Node]
    nodes: list[torch.fx.Node]  # the proxies, then the operations, in graph order
    outputs: list[torch.fx.Node]  # flattened
    fakes: list[torch.Tensor]  # the outputs' fake values
    rebuild: Callable[[list[VariableTracker]], VariableTracker]  # outputs -> the result's shape
    bare: bool  # it returned one tensor, not a tuple or list
    reads: list[torch.fx.Node] = field(default_factory=list)


class _SealedLedger:
    """The side-effect ledger while a body is traced: reads go to the frame's ledger, a write
    that would escape the body is refused where it happens (so the error names its line)."""

    def __init__(self, ledger: Any, op: str, role: str) -> None:
        self._ledger, self._where = ledger, f"{op}'s {role}"
        self._start = births()  # trackers made before the body are outside it

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)

    def __bool__(self) -> bool:
        return bool(self._ledger)

    def _refuse(self, what: str) -> Unsupported:
        return Unsupported(f"{self._where} {what}, a write that escapes the body",
                           break_type=BODY_BREAK, hints=_HINTS)

    def defer_call(self, obj: Any, method: str, *args: Any, **kwargs: Any) -> None:
        raise self._refuse(f"calls {method}() on an object from outside it")

    def mutate_container(self, container: Any) -> None:
        raise self._refuse("changes a list, dict or set from outside it")

    def store(self, target: Source, value: Any, owner: Any = None) -> None:
        raise self._refuse(f"stores to {target.name()}")

    def write_local(self, tracker: VariableTracker) -> None:
        if getattr(tracker, "born", -1) < self._start:
            raise self._refuse(f"changes {_kind(tracker)} made outside it")


def _kind(tracker: VariableTracker) -> str:
    if isinstance(tracker, CellVariable):
        return "a variable of an enclosing function"
    try:
        return f"a {tracker.python_type().__name__}"
    except Unsupported:
        return "a value"


_HINTS = ("return the value from the function instead; a higher-order operator's body may "
          "only compute tensors from its arguments and what it reads",)


def proxy(tx: Translator, fake: torch.Tensor) -> TensorVariable:
    """A fresh argument for a body: a node of its own and a fake with ``fake``'s metadata."""
    output = tx.output
    node = output.graph.create_node("call_function", _body_input, (), {})
    node.meta["stack_trace"] = ""
    with output.fake_mode:
        fresh = torch.empty_strided(fake.shape, fake.stride(), dtype=fake.dtype,
                                    device=fake.device, requires_grad=fake.requires_grad)
    return TensorVariable(node, fresh)


def trace_body(tx: Translator, op: str, role: str, fn: VariableTracker,
               args: list[VariableTracker], proxies: list[TensorVariable]) -> Body:
    """Run ``fn(*args)`` (``args`` built of ``proxies`` and constants) into the frame's graph,
    refusing writes that escape it; returns what it added."""
    output = tx.output
    before = set(output.graph.nodes)
    mutated = len(output.mutated_inputs)
    ledger = output.side_effects
    output.side_effects = _SealedLedger(ledger, op, role)
    try:
        result = fn.call(tx, args, {})
    except Unsupported as error:
        raise _in_body(error, op, role) from error.__cause__
    except TracedException as error:
        # Traced here, the raise would happen whichever branch runs, however many steps.
        raise Unsupported(f"{op}'s {role} raises {error.cls.__name__} while traced",
                          break_type=BODY_BREAK, hints=_HINTS) from None
    finally:
        output.side_effects = ledger
    new = [n for n in output.graph.nodes if n not in before and n.op != "placeholder"]
    nodes = [p.node for p in proxies] + new
    output.forget_cached_nodes(nodes)
    _check_nodes(op, role, nodes, len(output.mutated_inputs) != mutated)
    tensors, rebuild = flatten(result, f"{op}'s {role} returns")
    body = Body(role, [p.node for p in proxies], nodes, [t.node for t in tensors],
                [t.fake for t in tensors], rebuild, isinstance(result, TensorVariable))
    inside = set(nodes)
    reads = [a for n in new for a in n.all_input_nodes if a not in inside]
    reads += [o for o in body.outputs if o not in inside]
    body.reads = list(dict.fromkeys(reads))
    if not all(isinstance(r.meta.get("example_value"), torch.Tensor) for r in body.reads):
        raise Unsupported(f"{op}'s {role} reads a symbolic size or number from outside it",
                          break_type=BODY_BREAK, hints=("pass it in as a tensor argument",))
    return body


def _in_body(error: Unsupported, op: str, role: str) -> Unsupported:
    """A break inside a body, as a break of the body (its location, the body's line, kept)."""
    if error.break_type != BODY_BREAK:
        error.explanation = f"inside {op}'s {role}: {error.break_type}: {error.explanation}"
        error.args = (error.explanation,)
        error.break_type = BODY_BREAK
    return error


def _check_nodes(op: str, role: str, nodes: list[torch.fx.Node], wrote_input: bool) -> None:
    inside = set(nodes)
    # The memory of the body's arguments and of what it reads: a write into it (through a view
    # made inside too) would change a value outside the body.
    outside = {storage_ref(n.meta.get("example_value")) for n in nodes
               if n.target is _body_input}
    outside |= {storage_ref(a.meta.get("example_value")) for n in nodes
                for a in n.all_input_nodes if a not in inside and
                isinstance(a.meta.get("example_value"), torch.Tensor)}
    for node in nodes:
        where = node.meta.get("stack_trace") or ""
        if node.target in STATE_SWITCHES:
            raise Unsupported(f"{op}'s {role} switches grad mode or autocast inside it (not "
                              f"modelled yet){_at(where)}", break_type=BODY_BREAK)
        written = node.args[0] if node.args else None
        if node.meta.get("mutates") and (
                wrote_input or not isinstance(written, torch.fx.Node) or written not in inside
                or not isinstance(written.meta.get("example_value"), torch.Tensor)
                or storage_ref(written.meta["example_value"]) in outside):
            raise Unsupported(f"{op}'s {role} writes in place into a tensor it did not make"
                              f"{_at(where)}", break_type=BODY_BREAK, hints=_HINTS)
        if any(user not in inside for user in node.users):
            raise Unsupported(f"{op}'s {role}: a value of the body escapes it",
                              break_type=BODY_BREAK)


def _at(stack_trace: str) -> str:
    """`` (File "model.py", line 12, in body)``: the innermost frame of a node's stack trace."""
    frames = [line.strip() for line in stack_trace.splitlines()
              if line.strip().startswith("File ")]
    return f" ({frames[-1]})" if frames else ""


def flatten(tracker: VariableTracker, what: str
            ) -> tuple[list[TensorVariable], Callable[[list[VariableTracker]], VariableTracker]]:
    """A tensor or a flat tuple or list of tensors: its tensors, and how to rebuild it."""
    if isinstance(tracker, TensorVariable):
        return [tracker], lambda items: items[0]
    if isinstance(tracker, (TupleVariable, ListVariable)) and \
            all(isinstance(item, TensorVariable) for item in tracker.items):
        if isinstance(tracker, ListVariable):
            return list(tracker.items), lambda items: ListVariable(list(items))
        cls = getattr(tracker, "tuple_class", tuple)
        return list(tracker.items), lambda items: TupleVariable(list(items), tuple_class=cls)
    raise Unsupported(f"{what} {_kind(tracker)} ({tracker.describe()}); only a tensor or a "
                      "flat tuple or list of tensors is modelled", break_type=BODY_BREAK)


def install(tx: Translator, body: Body, lifted: list[torch.fx.Node], prefix: str,
            bare_output: bool = False) -> torch.fx.Node:
    """Move ``body``'s nodes into a subgraph taking its proxies then ``lifted``; install it as an
    attribute of the frame's graph; returns the ``get_attr`` node reading it."""
    sub = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in [*body.proxies, *lifted]:
        env[node] = sub.placeholder(node.name)
        env[node].meta = {"example_value": node.meta.get("example_value")}
    for node in body.nodes[len(body.proxies):]:
        env[node] = sub.node_copy(node, env.__getitem__)
    outputs = _unaliased(sub, [env[o] for o in body.outputs], [*body.proxies, *lifted])
    sub.output(outputs[0] if bare_output else tuple(outputs))
    return tx.output.subgraph_node(tx.output.add_subgraph(sub, prefix))


def _unaliased(sub: torch.fx.Graph, outputs: list[torch.fx.Node],
               inputs: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """The outputs, each one that shares memory with an input or an earlier output cloned (as
    torch.compile does): torch's operators refuse subgraphs whose outputs alias."""
    taken = {storage_ref(n.meta["example_value"]) for n in inputs}
    result = []
    for node in outputs:
        ref = storage_ref(node.meta["example_value"])
        if ref in taken:
            fake = node.meta["example_value"]
            node = sub.call_method("clone", (node,))
            node.meta["example_value"] = fake
        taken.add(ref)
        result.append(node)
    return result


def erase(tx: Translator, *bodies: Body) -> None:
    """Drop the bodies' nodes from the frame's graph (they live in their subgraphs now)."""
    for body in reversed(bodies):
        for node in reversed(body.nodes):
            tx.output.graph.erase_node(node)


def union(*bodies: Body) -> list[torch.fx.Node]:
    """What any of the bodies reads from outside, in order: every body takes all of it."""
    return list(dict.fromkeys(r for body in bodies for r in body.reads))


def call_operator(tx: Translator, target: Any, args: tuple, kwargs: dict,
                  fakes: list[torch.Tensor]) -> list[TensorVariable]:
    """One operator node and a ``getitem`` per output, each with its fake (a fresh one)."""
    output = tx.output
    call = output.create_node("call_function", target, args, kwargs)
    results = []
    with output.fake_mode:
        fresh = [fake.clone() for fake in fakes]
    call.meta["example_value"] = tuple(fresh)
    for index, fake in enumerate(fresh):
        item = output.graph.call_function(operator.getitem, (call, index))
        item.meta["stack_trace"] = call.meta["stack_trace"]
        results.append(TensorVariable(item, fake))
    return results


def same_metadata(left: list[torch.Tensor], right: list[torch.Tensor]) -> bool:
    return len(left) == len(right) and all(
        a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
        for a, b in zip(left, right))


def bind(op: str, args: list[VariableTracker], kwargs: dict[str, VariableTracker],
         names: tuple[str, ...], defaults: dict[str, VariableTracker]) -> list[VariableTracker]:
    """The arguments by position, as the Python signature ``names`` binds them."""
    if len(args) > len(names):
        raise Unsupported(f"{op} takes {len(names)} arguments, got {len(args)}",
                          break_type="user_exception")
    bound = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in names or name in bound:
            raise Unsupported(f"{op} got an unexpected or repeated argument {name!r}",
                              break_type="user_exception")
        bound[name] = value
    missing = [n for n in names if n not in bound and n not in defaults]
    if missing:
        raise Unsupported(f"{op} is missing the argument {missing[0]!r}",
                          break_type="user_exception")
    return [bound.get(n, defaults.get(n)) for n in names]


def constant(tracker: VariableTracker, op: str, name: str) -> Any:
    if not isinstance(tracker, ConstantVariable):
        raise Unsupported(f"{op}: {name} must be a constant, got {tracker.describe()}",
                          break_type=BODY_BREAK)
    return tracker.value


# -- the tracker ---------------------------------------------------------------------------------
class HigherOrderVariable(VariableTracker):
    """A torch function that takes Python functions (torch.cond...): a call traces them into
    subgraphs and adds the higher-order operator's node (see :data:`OPERATORS`)."""

    callable_kind = True

    def __init__(self, fn: Any, name: str, source: Source | None = None) -> None:
        super().__init__(source)
        self.fn, self.name = fn, name

    def describe(self) -> str:
        return getattr(self.fn, "__qualname__", None) or repr(self.fn)

    def python_type(self) -> type:
        return type(self.fn)

    def call(self, tx, args, kwargs):
        return OPERATORS[self.name](tx, list(args), dict(kwargs))

    def reconstruct(self, codegen: Codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        return codegen.constant(self.fn)


# -- the operators -------------------------------------------------------------------------------
def call_cond(tx: Translator, args: list[VariableTracker],
              kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``torch.cond(pred, true_fn, false_fn, operands)``: a tensor predicate gives the ``cond``
    node over both branches; a Python (or symbolic) one folds to its branch, traced inline."""
    op = "torch.cond"
    pred, true_fn, false_fn, operands = bind(
        op, args, kwargs, ("pred", "true_fn", "false_fn", "operands"),
        {"operands": TupleVariable([])})
    items, _ = flatten(operands, f"{op}'s operands are") if not _empty(operands) else ([], None)
    if not isinstance(pred, TensorVariable):
        branch = true_fn if pred.truthy(tx) else false_fn  # a SymBool is guarded here
        return branch.call(tx, list(items), {})
    if pred.fake.numel() != 1:
        raise Unsupported(f"{op}: the predicate must be a tensor of one element, got shape "
                          f"{tuple(pred.fake.shape)}", break_type=BODY_BREAK)
    bodies = []
    for role, fn in (("true_fn", true_fn), ("false_fn", false_fn)):
        proxies = [proxy(tx, item.fake) for item in items]
        bodies.append(trace_body(tx, op, role, fn, list(proxies), proxies))
    true_body, false_body = bodies
    if not same_metadata(true_body.fakes, false_body.fakes):
        raise Unsupported(f"{op}: the branches return different shapes or dtypes "
                          f"({_shapes(true_body.fakes)} and {_shapes(false_body.fakes)})",
                          break_type=BODY_BREAK)
    lifted = union(*bodies)
    true_attr = install(tx, true_body, lifted, "cond_true")
    false_attr = install(tx, false_body, lifted, "cond_false")
    erase(tx, *bodies)
    fakes = [t if t.requires_grad or not f.requires_grad else f
             for t, f in zip(true_body.fakes, false_body.fakes)]
    results = call_operator(tx, torch.ops.higher_order.cond,
                            (pred.node, true_attr, false_attr,
                             (*[i.node for i in items], *lifted)), {}, fakes)
    return true_body.rebuild(results)


def call_while_loop(tx: Translator, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``while_loop(cond_fn, body_fn, carried_inputs)``: one ``while_loop`` node; the result is
    the tuple of the final carries."""
    op = "while_loop"
    cond_fn, body_fn, carried = bind(op, args, kwargs, ("cond_fn", "body_fn", "carried_inputs"),
                                     {})
    items, _ = flatten(carried, f"{op}'s carried_inputs are")
    fakes = [i.fake for i in items]
    proxies = [proxy(tx, fake) for fake in fakes]
    cond_body = trace_body(tx, op, "cond_fn", cond_fn, list(proxies), proxies)
    if len(cond_body.fakes) != 1 or cond_body.fakes[0].dtype != torch.bool or \
            cond_body.fakes[0].numel() != 1 or not cond_body.bare:
        raise Unsupported(f"{op}: cond_fn must return a boolean tensor of one element",
                          break_type=BODY_BREAK)
    proxies = [proxy(tx, fake) for fake in fakes]
    loop_body = trace_body(tx, op, "body_fn", body_fn, list(proxies), proxies)
    if not same_metadata(loop_body.fakes, fakes):
        raise Unsupported(f"{op}: body_fn must return carries like carried_inputs "
                          f"({_shapes(fakes)}), got {_shapes(loop_body.fakes)}",
                          break_type=BODY_BREAK)
    lifted = union(cond_body, loop_body)
    cond_attr = install(tx, cond_body, lifted, "cond_fn", bare_output=True)
    body_attr = install(tx, loop_body, lifted, "body_fn")
    erase(tx, cond_body, loop_body)
    results = call_operator(tx, torch.ops.higher_order.while_loop,
                            (cond_attr, body_attr, tuple(i.node for i in items), tuple(lifted)),
                            {}, loop_body.fakes)
    return TupleVariable(list(results))


def call_map(tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``map(f, xs, *args)``: ``f`` on each slice of ``xs`` along dimension 0, one ``map_impl``
    node; its outputs are stacked."""
    op = "map"
    if kwargs or len(args) < 2:
        raise Unsupported(f"{op} takes f, xs and extra positional arguments",
                          break_type="user_exception")
    fn, xs, extra = args[0], args[1], args[2:]
    leaves, rebuild_xs = flatten(xs, f"{op}'s xs is")
    if any(leaf.fake.dim() == 0 for leaf in leaves) or \
            any(leaf.fake.shape[0] != leaves[0].fake.shape[0] for leaf in leaves) or \
            leaves[0].fake.shape[0] == 0:
        raise Unsupported(f"{op}: xs must have one nonzero leading size",
                          break_type=BODY_BREAK)
    for arg in extra:
        if not isinstance(arg, TensorVariable):
            raise Unsupported(f"{op}: only tensor arguments are modelled, got {arg.describe()}",
                              break_type=BODY_BREAK)
    slices = [proxy(tx, leaf.fake[0]) for leaf in leaves]
    arg_proxies = [proxy(tx, arg.fake) for arg in extra]
    body = trace_body(tx, op, "f", fn, [rebuild_xs(slices), *arg_proxies],
                      [*slices, *arg_proxies])
    lifted = union(body)
    attr = install(tx, body, lifted, "map_body")
    erase(tx, body)
    length = leaves[0].fake.shape[0]
    results = call_operator(tx, torch.ops.higher_order.map_impl,
                            (attr, [leaf.node for leaf in leaves],
                             [*[a.node for a in extra], *lifted]), {},
                            [_stacked(tx, fake, length) for fake in body.fakes])
    return body.rebuild(results)


def call_scan(tx: Translator, args: list[VariableTracker],
              kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``scan(combine_fn, init, xs, dim=0, reverse=False)``: one ``scan`` node; ``dim`` and
    ``reverse`` move and flip ``xs`` around it, as torch's own ``scan`` does."""
    op = "scan"
    combine_fn, init, xs, dim, reverse = bind(
        op, args, kwargs, ("combine_fn", "init", "xs", "dim", "reverse"),
        {"dim": ConstantVariable(0), "reverse": ConstantVariable(False)})
    dim, reverse = constant(dim, op, "dim"), constant(reverse, op, "reverse")
    carries, rebuild_init = flatten(init, f"{op}'s init is")
    leaves, rebuild_xs = flatten(xs, f"{op}'s xs is")
    ndim = leaves[0].fake.dim()
    if not isinstance(dim, int) or not -ndim <= dim < ndim or \
            any(leaf.fake.dim() != ndim or leaf.fake.shape[dim] != leaves[0].fake.shape[dim]
                for leaf in leaves) or leaves[0].fake.shape[dim] == 0:
        raise Unsupported(f"{op}: xs must share a nonzero size in dimension {dim}",
                          break_type=BODY_BREAK)
    dim %= ndim
    leaves = [_moved(tx, leaf, dim, 0, reverse) for leaf in leaves]
    carry_proxies = [proxy(tx, c.fake) for c in carries]
    slices = [proxy(tx, leaf.fake[0]) for leaf in leaves]
    step = _ScanStep(combine_fn, len(carries))
    body = trace_body(tx, op, "combine_fn", step,
                      [rebuild_init(carry_proxies), rebuild_xs(slices)],
                      [*carry_proxies, *slices])
    if not same_metadata(body.fakes[:len(carries)], [c.fake for c in carries]):
        raise Unsupported(f"{op}: combine_fn must return a carry like init "
                          f"({_shapes([c.fake for c in carries])})", break_type=BODY_BREAK)
    lifted = union(body)
    attr = install(tx, body, lifted, "scan_combine_fn")
    erase(tx, body)
    length = leaves[0].fake.shape[0]
    fakes = body.fakes[:len(carries)] + [_stacked(tx, f, length)
                                         for f in body.fakes[len(carries):]]
    results = call_operator(tx, torch.ops.higher_order.scan,
                            (attr, [c.node for c in carries], [leaf.node for leaf in leaves],
                             list(lifted)), {}, fakes)
    carry_out, ys = results[:len(carries)], results[len(carries):]
    ys = [_moved(tx, y, 0, dim, reverse, flip_first=True) for y in ys]
    return TupleVariable([rebuild_init(carry_out), step.ys(ys)])


class _ScanStep(VariableTracker):
    """``combine_fn`` for the body trace: its ``(next_carry, y)`` result flattened into one
    tuple of tensors (the scan subgraph returns carries then outputs)."""

    def __init__(self, fn: VariableTracker, carries: int) -> None:
        super().__init__(None)
        self.fn, self.carries = fn, carries

    def describe(self) -> str:
        return self.fn.describe()

    def call(self, tx, args, kwargs):
        result = self.fn.call(tx, args, kwargs)
        if not isinstance(result, (TupleVariable, ListVariable)) or len(result.items) != 2:
            raise Unsupported(f"scan's combine_fn must return (next_carry, y), got "
                              f"{result.describe()}", break_type=BODY_BREAK)
        carry, y = result.items
        carry_items, _ = flatten(carry, "scan's combine_fn returns the carry")
        if len(carry_items) != self.carries:
            raise Unsupported(f"scan's combine_fn returns {len(carry_items)} carries for "
                              f"{self.carries}", break_type=BODY_BREAK)
        self.ys = flatten(y, "scan's combine_fn returns y")[1]
        return TupleVariable([*carry_items, *flatten(y, "")[0]])


def _moved(tx: Translator, tensor: TensorVariable, source: int, dest: int, reverse: bool,
           flip_first: bool = False) -> TensorVariable:
    """``tensor`` with dimension ``source`` moved to ``dest`` and, with ``reverse``, flipped
    along the scanned dimension."""
    if reverse and flip_first:
        tensor = call_torch(tx, "call_function", torch.flip,
                            [tensor, ConstantVariable([0])], {})
    if source != dest:
        tensor = call_torch(tx, "call_function", torch.movedim,
                            [tensor, ConstantVariable(source), ConstantVariable(dest)], {})
    if reverse and not flip_first:
        tensor = call_torch(tx, "call_function", torch.flip,
                            [tensor, ConstantVariable([0])], {})
    return tensor


def call_checkpoint(tx: Translator, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``torch.utils.checkpoint.checkpoint(function, *args, use_reentrant=...)``: one
    ``tag_activation_checkpoint`` node over the traced function, as torch.compile emits it, so a
    differentiating backend recomputes the body in the backward pass. Constant arguments are
    baked into the body."""
    op = "torch.utils.checkpoint.checkpoint"
    if not args:
        raise Unsupported(f"{op} is missing the function", break_type="user_exception")
    fn, call_args = args[0], args[1:]
    use_reentrant = kwargs.pop("use_reentrant", ConstantVariable(None))
    reentrant = constant(use_reentrant, op, "use_reentrant")
    for name in ("context_fn", "determinism_check", "debug", "preserve_rng_state"):
        if name in kwargs:
            raise Unsupported(f"{op}: the argument {name!r} is not modelled yet",
                              break_type=BODY_BREAK)
    early_stop = kwargs.pop("early_stop", None)
    if early_stop is not None:
        constant(early_stop, op, "early_stop")
    if kwargs and reentrant is not False:
        raise Unsupported(f"{op}: keyword arguments for the function need use_reentrant=False",
                          break_type="user_exception")
    # One operand per tensor, however often it is passed (``checkpoint(fn, x, x)``): the body
    # gets one proxy for it, so the operator passes it once.
    tensors = list({id(a): a for a in [*call_args, *kwargs.values()]
                    if isinstance(a, TensorVariable)}.values())
    if any(not isinstance(a, (TensorVariable, ConstantVariable))
           for a in [*call_args, *kwargs.values()]):
        raise Unsupported(f"{op}: only tensor and constant arguments are modelled",
                          break_type=BODY_BREAK)
    proxies = {id(t): proxy(tx, t.fake) for t in tensors}
    inner_args = [proxies.get(id(a), a) for a in call_args]
    inner_kwargs = {k: proxies.get(id(v), v) for k, v in kwargs.items()}
    body = trace_body(tx, op, "function", _WithKwargs(fn, inner_kwargs), inner_args,
                      list(proxies.values()))
    if any(isinstance(n.target, torch._ops.HigherOrderOperator) for n in body.nodes):
        raise Unsupported(f"{op}: a higher-order operator inside a checkpointed function is not "
                          "modelled (torch's checkpoint cannot run it)", break_type=BODY_BREAK)
    lifted = union(body)
    attr = install(tx, body, lifted, "wrap_body")
    erase(tx, body)
    flags = {} if reentrant is None else {"use_reentrant": reentrant}
    results = call_operator(tx, torch.ops.higher_order.tag_activation_checkpoint,
                            (attr, *[t.node for t in tensors], *lifted), flags, body.fakes)
    return body.rebuild(results)


class _WithKwargs(VariableTracker):
    """A callable called with fixed keyword arguments (checkpoint's ``**kwargs``)."""

    def __init__(self, fn: VariableTracker, kwargs: dict[str, VariableTracker]) -> None:
        super().__init__(None)
        self.fn, self.kwargs = fn, kwargs

    def describe(self) -> str:
        return self.fn.describe()

    def call(self, tx, args, kwargs):
        return self.fn.call(tx, args, {**self.kwargs, **kwargs})


def _empty(tracker: VariableTracker) -> bool:
    return isinstance(tracker, (TupleVariable, ListVariable)) and not tracker.items


def _shapes(fakes: list[torch.Tensor]) -> str:
    return ", ".join(f"{tuple(f.shape)} {f.dtype}" for f in fakes)


def _stacked(tx: Translator, fake: torch.Tensor, length: int) -> torch.Tensor:
    """The fake of ``length`` outputs like ``fake`` stacked along a new dimension 0."""
    with tx.output.fake_mode:
        return fake.unsqueeze(0).expand(length, *fake.shape).contiguous()


# -- Tensor.register_hook ------------------------------------------------------------------------
def call_register_hook(tx: Translator, tensor: TensorVariable, args: list[VariableTracker],
                       kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """``t.register_hook(hook)``, as torch.compile does it. On a tensor reached through a source
    (an input, a parameter) the call is deferred: it runs on the real tensor after the graph, so
    the hook is that tensor's for every backward to come, as in eager. On a tensor made by the
    graph, the hook is traced into a subgraph and the graph calls torch's ``register_hook``
    operator on it, so a differentiating backend (``aot_eager``, ``inductor``) puts the hook's
    work into its backward graph. A hook the body tracing refuses (one with side effects, one
    that writes outside itself) is a graph break: the hook is then registered eagerly on the
    real tensor.
    """
    op = "Tensor.register_hook"
    (hook,) = bind(op, args, kwargs, ("hook",), {})
    if not tensor.fake.requires_grad:
        raise Unsupported(f"{op} on a tensor that does not require grad raises when run",
                          break_type="torch_error")
    if tensor.source is not None:
        tx.output.side_effects.defer_call(tensor, "register_hook", [hook], {})
        return HookHandleVariable()
    with tx.output.fake_mode:
        grad = proxy(tx, tensor.fake.detach())
    body = trace_body(tx, op, "hook", _GradIfNone(hook), [grad], [grad])
    if not body.bare or not same_metadata(body.fakes, [tensor.fake]):
        raise Unsupported(f"{op}: the hook must return a gradient like the tensor's "
                          f"({_shapes([tensor.fake])}), got {_shapes(body.fakes)}",
                          break_type=BODY_BREAK)
    lifted = union(body)
    attr = install(tx, body, lifted, "hook_body", bare_output=True)
    erase(tx, body)
    node = tx.output.create_node("call_function", register_hook_op,
                                 (tensor.node, attr, *lifted), {}, mutates=True)
    node.meta["example_value"] = tensor.fake  # the operator returns its tensor
    return HookHandleVariable()


class _GradIfNone(VariableTracker):
    """A tensor hook for the body trace: where it returns None (the gradient unchanged), the
    body returns its gradient argument, since a subgraph returns tensors."""

    def __init__(self, fn: VariableTracker) -> None:
        super().__init__(None)
        self.fn = fn

    def describe(self) -> str:
        return self.fn.describe()

    def call(self, tx, args, kwargs):
        result = self.fn.call(tx, args, kwargs)
        return args[0] if result.is_constant() and result.as_constant() is None else result


class HookHandleVariable(VariableTracker):
    """The ``RemovableHandle`` that ``register_hook`` returns, where the program drops it. The
    real handle exists only after the graph (or never: the operator returns none), so using it
    in the frame, returning it or keeping it across a break is refused."""

    def describe(self) -> str:
        return "the handle of a hook registered in compiled code"

    def python_type(self) -> type:
        return torch.utils.hooks.RemovableHandle

    def var_getattr(self, tx, name):
        raise Unsupported(f"{self.describe()} is not modelled (.{name})",
                          hints=("keep register_hook's handle outside the compiled function",))

    def reconstruct(self, codegen: Codegen) -> str:
        raise Unsupported(f"{self.describe()} cannot leave the compiled frame")


CALLABLE_METHODS["register_hook"] = call_register_hook


# The operators by the name trace_rules.HIGHER_ORDER_OPS gives each torch function.
OPERATORS: dict[str, Callable[[Translator, list[VariableTracker], dict[str, VariableTracker]],
                              VariableTracker]] = {
    "cond": call_cond,  # torch.cond
    "while_loop": call_while_loop,  # torch._higher_order_ops.while_loop
    "map": call_map,  # torch._higher_order_ops.map
    "scan": call_scan,  # torch._higher_order_ops.scan
    "checkpoint": call_checkpoint,  # torch.utils.checkpoint.checkpoint
}
