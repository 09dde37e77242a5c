"""The side-effect ledger: mutations made while tracing, replayed after the graph runs.

Tracing never touches real objects. When the traced code mutates something that exists outside the
frame (a list or dict argument, an attribute of an input object, a global, a closure cell), the
ledger records it, trackers show the new value to the rest of the trace, and the generated run
function replays the final state after the graph has run, in the order the stores happened::

    __gl_out = __gl_graph(x)
    list.__setitem__(xs, slice(None), [__gl_out[0], 3])   # a list argument that was appended to
    self.count = 4                        # an attribute store on an input object
    __gl_G['STEP'] = 5                    # a global store
    __gl_G['logger'].warning('slow')      # a logging call, replayed after the writes

When an operation of the graph raises at run time, eager Python had made the writes that come
before that operation in program order, and none after it. The ledger keeps a **checkpoint** for
each operation the trace reaches after a write (its state then: which stores and calls were made,
each changed container's items), and tags the operation's node with it. When the graph raises,
the run function finds the node that raised (:func:`graphlift.codegen.graph_progress`) and
applies exactly the writes of its checkpoint, with the values they had then
(:meth:`SideEffects.replay_on_error`)::

    except BaseException as __gl_e:
        __gl_c, __gl_v = __gl_k3(__gl_e, __gl_graph, ...)    # checkpoint 1: the second op raised
        if __gl_c >= 0:
            cfg.calls = 1                                    # made before the first op
        if __gl_c >= 1:
            __gl_G['LAST'] = __gl_v[0]                       # a tensor the graph had computed
        raise

Why this design: it costs nothing until a graph raises (the success path is the code it was, and
a ``try`` is free). Ending the graph at each write interleaved with operations would tell how far
it got on every backend, but costs a graph call per piece on every hit and gives the backend
smaller graphs; rerunning the frame eagerly after a failure is wrong (in-place updates and
prints have happened). The price: the raising node can be found only where an FX module runs
(not in inductor's generated code, where the writes before the first operation are applied, as
before; see the table in docs/design.md, "The side-effect ledger").
"""

from __future__ import annotations

import collections
import copy
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from graphlift.exc import Unsupported
from graphlift.sources import AttrSource, ItemSource, Source

if TYPE_CHECKING:
    from graphlift.rebuild import Codegen, Container, ErrorCodegen, Tracker


@dataclass
class Store:
    """``target = value`` where the target is reached through a source."""

    target: Source
    value: Tracker
    owner: Tracker | None = None  # the input object whose attribute is stored


@dataclass
class DeferredCall:
    """``obj.method(*args, **kwargs)`` run after the graph (a logging call); arguments are
    constants, so running it later sees the values it was given."""

    obj: Tracker
    method: str
    args: list[Tracker]
    kwargs: dict[str, Tracker]


class SideEffects:
    """Records mutations of objects that outlive the frame, in program order."""

    def __init__(self) -> None:
        self.mutated_containers: list[Container] = []
        self.stores: list[Store] = []
        self.calls: list[DeferredCall] = []
        self._pending: dict[Source, Tracker] = {}
        self.checkpoints: list[Checkpoint] = []
        self._items_then: dict[int, Any] = {}  # id(container) -> its items at the last checkpoint
        self._frozen = False
        # id(real cell) -> (the cell, its contents in the trace): one cell reached through
        # several functions' closures holds one value (see :meth:`cell_contents`).
        self._cells: dict[int, tuple[Any, Tracker]] = {}
        self._trackers: dict[int, tuple[Any, Tracker]] = {}  # id(object) -> (it, its tracker)

    def __bool__(self) -> bool:
        return bool(self.mutated_containers or self.stores or self.calls)

    def defer_call(self, obj: Tracker, method: str, args: list[Tracker],
                   kwargs: dict[str, Tracker]) -> None:
        """A call replayed after the graph and the writes, in the order the calls were made."""
        self.calls.append(DeferredCall(obj, method, list(args), dict(kwargs)))

    def write_local(self, tracker: Tracker) -> None:
        """A value made in the frame is about to change (a list, dict or set, a cell of the
        frame, a new object's attribute): nothing to write back. A higher-order operator's
        body refuses it when the value is older than the body (variables/higher_order.py)."""

    def mutate_container(self, container: Container) -> None:
        """A list, dict or set from the inputs changed; its final items are written back."""
        if all(c is not container for c in self.mutated_containers):
            self.mutated_containers.append(container)

    def store(self, target: Source, value: Tracker, owner: Tracker | None = None) -> None:
        """An attribute, global or cell store; later loads of ``target`` see ``value``."""
        self.stores.append(Store(target, value, owner))
        self._pending[target] = value

    def pending(self, target: Source) -> Tracker | None:
        """The value stored at ``target`` during this trace, if any."""
        return self._pending.get(target)

    def cell_contents(self, cell: Any) -> Tracker | None:
        """What the real closure cell ``cell`` holds at this point of the trace, if it was read
        or written before. A cell that exists outside the frame is reached anew through each
        function that closes over it (``counter.__closure__[0]``, the frame's own free
        variable): all of them see what any of them wrote."""
        known = self._cells.get(id(cell))
        return known[1] if known is not None else None

    def set_cell_contents(self, cell: Any, value: Tracker) -> None:
        """``cell`` holds ``value`` from here on in the trace (see :meth:`cell_contents`)."""
        self._cells[id(cell)] = (cell, value)

    def tracker_of(self, obj: Any) -> Tracker | None:
        """The trace's one tracker of the real object ``obj`` (see :meth:`keep_tracker`)."""
        known = self._trackers.get(id(obj))
        return known[1] if known is not None else None

    def keep_tracker(self, obj: Any, tracker: Tracker) -> None:
        """``tracker`` is the trace's one tracker of ``obj``, an object whose attributes the
        trace may write: every path that reaches it (``m.inner`` read again, ``m.blocks[0]``,
        an argument that is also a member) then sees what was written through any other."""
        self._trackers[id(obj)] = (obj, tracker)

    def checkpoint(self) -> int:
        """The trace reaches an operation that may raise at run time: the index of the checkpoint
        that holds the ledger's state now, a new one if anything was written since the last.
        Nodes made after the trace (while the run function is written) get the last one."""
        if self._frozen:
            return len(self.checkpoints) - 1
        last = self.checkpoints[-1] if self.checkpoints else None
        changed = [(c, copy.copy(c.items)) for c in self.mutated_containers
                   if not _same_items(self._items_then.get(id(c)), c.items)]
        if last is None or changed or last.stores != len(self.stores) or \
                last.calls != len(self.calls):
            self.checkpoints.append(Checkpoint(changed, len(self.stores), len(self.calls)))
            self._items_then.update((id(c), items) for c, items in changed)
        return len(self.checkpoints) - 1

    def freeze(self) -> None:
        """The trace is over: no more checkpoints (see :meth:`checkpoint`)."""
        self._frozen = True

    def replay(self, codegen: Codegen) -> list[str]:
        """Statements that make real objects match the traced program's final state, then the
        deferred calls in order."""
        calls = [_call_statement(call, codegen) for call in self.calls]
        return [*_writes(self.mutated_containers, self.stores, codegen), *calls]

    def replay_on_error(self, codegen: ErrorCodegen) -> ErrorReplay:
        """The writes of each checkpoint, for the run function to apply when the graph raises;
        ``codegen`` is the error path's (``codegen.ErrorPathCodegen``: a graph value it needs
        reads as ``__gl_v[j]``, from the raising graph's frame).

        A checkpoint is reachable when every value its writes store can be given as it was then:
        a constant, a real object reached through a source (whose own changes are its own
        writes), or a value the graph computed before (a tensor object, a symbolic number). A new
        list or object built in the frame may have changed since, so a checkpoint that writes one
        is not, nor any after it: a failure there applies the last reachable checkpoint. The
        first checkpoint (before any operation) keeps what it can, as before: a container with
        such a value is left as it was, its stores stop at the first such value, and then no
        later checkpoint is reachable.
        """
        replay = ErrorReplay()
        previous = Checkpoint([], 0, 0)
        for index, point in enumerate(self.checkpoints[:MAX_CHECKPOINTS]):
            start = len(codegen.statements)
            try:
                complete, failed = self._checkpoint_writes(index, previous, point, replay,
                                                           codegen), False
            except Unsupported:  # a value that cannot leave the frame: eager keeps it, we cannot
                complete, failed = False, True
            needs = codegen.take_used()
            # Nothing at all where the first checkpoint fails or needs a graph value (no graph
            # value exists before the first operation); a later one is dropped whole.
            if failed or (needs and index == 0) or (not complete and index > 0):
                del codegen.statements[start:]
                replay.drop_from(index)
                break
            replay.reads.append(codegen.statements[start:])
            replay.needs.append(needs)
            if not complete:
                break
            previous = point
        return replay

    def _checkpoint_writes(self, index: int, previous: Checkpoint, point: Checkpoint,
                           replay: ErrorReplay, codegen: ErrorCodegen) -> bool:
        """Add the writes made between ``previous`` and ``point`` to ``replay``; whether all of
        them could be written (see :meth:`replay_on_error`)."""
        complete = True
        for container, items in point.containers:
            if not all(_writable(v) for v in (items.values() if isinstance(items, dict)
                                              else items)):
                complete = False
                if index > 0:
                    return False
                continue
            snapshot = copy.copy(container)  # the tracker as it was: its items then
            snapshot.items = items
            replay.containers.setdefault(id(container), []).append(
                (index, _container_writes(snapshot, codegen)))
        for store in self.stores[previous.stores:point.stores]:
            if not _writable(store.value):
                return False
            replay.stores.append((index, _store_statement(store, codegen)))
        if complete:
            replay.calls.extend((index, _call_statement(call, codegen))
                                for call in self.calls[previous.calls:point.calls])
        return complete


MAX_CHECKPOINTS = 32  # beyond these, a failure applies the 32nd (bounds the run function's size)


@dataclass
class Checkpoint:
    """The ledger when the trace reached an operation: what eager Python had written before it
    ran. ``containers``: the containers changed since the previous checkpoint, with their items
    then; ``stores``, ``calls``: how many of each had been made."""

    containers: list[tuple[Container, Any]]
    stores: int
    calls: int


@dataclass
class ErrorReplay:
    """The error path's writes, by checkpoint (see :meth:`SideEffects.replay_on_error`).

    ``reads[k]``: the temporaries checkpoint ``k``'s writes need, read before anything is
    written; ``needs[k]``: the graph values (``__gl_v[j]``) they read. Checkpoints ``0`` to
    ``len(reads) - 1`` are reachable.
    """

    reads: list[list[str]] = field(default_factory=list)
    needs: list[tuple[int, ...]] = field(default_factory=list)
    containers: dict[int, list[tuple[int, list[str]]]] = field(default_factory=dict)
    stores: list[tuple[int, str]] = field(default_factory=list)
    calls: list[tuple[int, str]] = field(default_factory=list)

    @property
    def last(self) -> int:
        """The last reachable checkpoint (-1: none, nothing is written)."""
        return len(self.reads) - 1

    def drop_from(self, index: int) -> None:
        """Forget the writes of checkpoint ``index`` and after."""
        self.stores = [(k, s) for k, s in self.stores if k < index]
        self.calls = [(k, s) for k, s in self.calls if k < index]
        for key, states in list(self.containers.items()):
            self.containers[key] = [(k, w) for k, w in states if k < index]
            if not self.containers[key]:
                del self.containers[key]

    def lines(self, reached: str | None) -> list[str]:
        """The statements, in the order: reads, containers, stores, calls. ``reached``: the
        name holding the checkpoint the graph reached, None where it can only be 0."""
        if self.last < 0:
            return []
        if reached is None:
            assert self.last == 0
            return [*self.reads[0], *(line for states in self.containers.values()
                                      for _, lines in states for line in lines),
                    *(s for _, s in self.stores), *(s for _, s in self.calls)]
        out: list[str] = []
        for k, reads in enumerate(self.reads):
            out += _when(f"{reached} >= {k}", reads)
        for states in self.containers.values():  # the newest state at or before the one reached
            for i, (k, lines) in enumerate(reversed(states)):
                out += _when(f"{reached} >= {k}", lines, "elif" if i else "if")
        for k, statement in [*self.stores, *self.calls]:
            out += _when(f"{reached} >= {k}", [statement])
        return out


def _when(condition: str, lines: list[str], keyword: str = "if") -> list[str]:
    return [f"{keyword} {condition}:", *(f"    {line}" for line in lines)] if lines else []


def _same_items(then: Any, now: Any) -> bool:
    """Whether a container's items are the same trackers as at the last checkpoint."""
    if then is None or type(then) is not type(now) or len(then) != len(now):
        return False
    if isinstance(now, dict):
        return list(then) == list(now) and all(then[k] is now[k] for k in now)
    return all(a is b for a, b in zip(then, now))


def _call_statement(call: DeferredCall, codegen: Codegen) -> str:
    """The deferred call; its arguments are read before any write (hoisted), as it saw them."""
    arguments = [codegen.hoist(a.reconstruct(codegen)) for a in call.args]
    arguments += [f"{k}={codegen.hoist(v.reconstruct(codegen))}" for k, v in call.kwargs.items()]
    return f"{call.obj.reconstruct(codegen)}.{call.method}({', '.join(arguments)})"


def _writes(containers: list[Container], stores: list[Store], codegen: Codegen) -> list[str]:
    """Write back the containers' items, then the stores in order.

    Every new value, and every object written to, is computed first (hoisted before any write):
    a value may be the old content of something another write changes (``d.update(y=d["x"])``),
    and a store target may sit in a container the frame changed.
    """
    writes = [line for container in containers for line in _container_writes(container, codegen)]
    return writes + [_store_statement(store, codegen) for store in stores]


def _store_statement(store: Store, codegen: Codegen) -> str:
    """The store, target and value hoisted. On an object whose class has a ``__setattr__`` of
    its own, the trace ran that method (inlined) and recorded what it stored: the store is
    applied past it, with ``object.__setattr__``, so the method does not run a second time."""
    if isinstance(store.target, AttrSource) and _own_setattr(store.owner):
        target = codegen.hoist(store.target.base.expr())
        value = codegen.hoist(store.value.reconstruct(codegen))
        return f"{codegen.constant(object.__setattr__)}({target}, {store.target.attr!r}, {value})"
    target = _target_expr(store.target, codegen)
    return f"{target} = {codegen.hoist(store.value.reconstruct(codegen))}"


def _own_setattr(owner: Tracker | None) -> bool:
    """Whether the stored-to object's class defines a ``__setattr__`` (in Python) of its own."""
    if owner is None:
        return False
    setter = getattr(owner.python_type(), "__setattr__", None)
    # nn.Module's own stores a plain attribute as ``obj.name = v`` does (its checks concern only
    # the members the trace refuses to assign).
    return isinstance(setter, types.FunctionType) and setter is not torch.nn.Module.__setattr__


def _container_writes(container: Container, codegen: Codegen) -> list[str]:
    """Give a real container the tracker's items (target and value hoisted)."""
    target = codegen.hoist(container.source.expr())
    value = codegen.hoist(container.reconstruct_literal(codegen))
    # Through the builtin's own methods: a subclass's overrides never run here.
    kind = container.python_type()
    if kind is collections.defaultdict:
        kind = dict  # its items are a dict's, written by dict's methods (no __missing__ runs)
    if kind in (dict, set):
        return [f"{kind.__name__}.clear({target})", f"{kind.__name__}.update({target}, {value})"]
    return [f"list.__setitem__({target}, slice(None), {value})"]


def _writable(value: Tracker) -> bool:
    """A value a write made before a failing operation can be given as it was then: settled
    (see :func:`_settled`), or computed by the graph: a tensor object (its later in-place
    changes happen to that same object, in eager too) or a symbolic number. The error path
    reads those from the raising graph's frame, where it got that far."""
    if _settled(value):
        return True
    kind = value.python_type()
    if issubclass(kind, tuple) and isinstance(getattr(value, "items", None), list):
        return all(_writable(item) for item in value.items)
    return issubclass(kind, torch.Tensor) and getattr(value, "node", None) is not None


def _settled(value: Tracker) -> bool:
    """A value that is the same object with the same contents at any point of the trace: a real
    object reached through a source, or an immutable constant. (Read from the trackers' types,
    never their values: reading a float input's value would guard it.)"""
    if value.source is not None:
        return True
    kind = value.python_type()
    if issubclass(kind, tuple) and isinstance(getattr(value, "items", None), list):
        return all(_settled(item) for item in value.items)
    return value.is_constant() and kind not in (list, dict, set, bytearray)


def _target_expr(target: Source, codegen: Codegen) -> str:
    """An assignment target whose object is fetched before any write (hoisted)."""
    if isinstance(target, AttrSource):
        return f"{codegen.hoist(target.base.expr())}.{target.attr}"
    if isinstance(target, ItemSource):
        return f"{codegen.hoist(target.base.expr())}[{target.index!r}]"
    return target.expr()
