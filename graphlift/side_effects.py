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

Writes made before the trace's first tensor operation have happened in eager Python even when
that operation (or a later one) raises, so the run function also applies those, as they stood
then, when the graph raises (:meth:`SideEffects.replay_before_ops`).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graphlift.exc import Unsupported
from graphlift.sources import AttrSource, ItemSource, Source

if TYPE_CHECKING:
    from graphlift.codegen import OutputCodegen
    from graphlift.variables.base import VariableTracker


@dataclass
class Store:
    """``target = value`` where the target is reached through a source."""

    target: Source
    value: VariableTracker
    owner: VariableTracker | None = None  # the input object whose attribute is stored


@dataclass
class DeferredCall:
    """``obj.method(*args, **kwargs)`` run after the graph (a logging call); arguments are
    constants, so running it later sees the values it was given."""

    obj: VariableTracker
    method: str
    args: list[VariableTracker]
    kwargs: dict[str, VariableTracker]


class SideEffects:
    """Records mutations of objects that outlive the frame, in program order."""

    def __init__(self) -> None:
        self.mutated_containers: list[VariableTracker] = []
        self.stores: list[Store] = []
        self.calls: list[DeferredCall] = []
        self._pending: dict[Source, VariableTracker] = {}
        # (container, its items then) and the number of stores, when the first op was traced.
        self._before_ops: tuple[list[tuple[VariableTracker, Any]], int] | None = None

    def __bool__(self) -> bool:
        return bool(self.mutated_containers or self.stores or self.calls)

    def defer_call(self, obj: VariableTracker, method: str, args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker]) -> None:
        """A call replayed after the graph and the writes, in the order the calls were made."""
        self.calls.append(DeferredCall(obj, method, list(args), dict(kwargs)))

    def mutate_container(self, container: VariableTracker) -> None:
        """A list, dict or set from the inputs changed; its final items are written back."""
        if all(c is not container for c in self.mutated_containers):
            self.mutated_containers.append(container)

    def store(self, target: Source, value: VariableTracker,
              owner: VariableTracker | None = None) -> None:
        """An attribute, global or cell store; later loads of ``target`` see ``value``."""
        self.stores.append(Store(target, value, owner))
        self._pending[target] = value

    def pending(self, target: Source) -> VariableTracker | None:
        """The value stored at ``target`` during this trace, if any."""
        return self._pending.get(target)

    def before_first_op(self) -> None:
        """The trace reaches its first tensor operation: remember the writes made until now."""
        if self._before_ops is None:
            self._before_ops = ([(c, copy.copy(c.items)) for c in self.mutated_containers],
                                len(self.stores))

    def replay(self, codegen: OutputCodegen) -> list[str]:
        """Statements that make real objects match the traced program's final state, then the
        deferred calls in order."""
        calls = []
        for call in self.calls:
            arguments = [a.reconstruct(codegen) for a in call.args]
            arguments += [f"{k}={v.reconstruct(codegen)}" for k, v in call.kwargs.items()]
            calls.append(f"{call.obj.reconstruct(codegen)}.{call.method}({', '.join(arguments)})")
        return [*_writes(self.mutated_containers, self.stores, codegen), *calls]

    def replay_before_ops(self, codegen: OutputCodegen) -> list[str]:
        """Statements that make real objects match the state before the first tensor operation,
        for the run function to apply when the graph raises; ``codegen`` is a fork for that path.

        Only values that cannot have changed since are written: constants, and real objects
        reached through a source (whose own changes are their own writes). Stores keep their
        order, so they stop at the first other value. None at all when a value needs a graph
        output, which the raising graph never gave.
        """
        if self._before_ops is None:
            return []
        containers, count = self._before_ops
        snapshots = []
        for container, items in containers:
            if all(_settled(v) for v in (items.values() if isinstance(items, dict) else items)):
                snapshot = copy.copy(container)  # the tracker as it was: its items then
                snapshot.items = items
                snapshots.append(snapshot)
        stores = list(itertools.takewhile(lambda store: _settled(store.value),
                                          self.stores[:count]))
        try:
            writes = _writes(snapshots, stores, codegen)
        except Unsupported:  # a value that cannot leave the frame: eager keeps it, we cannot
            return []
        return [] if codegen.outputs else [*codegen.statements, *writes]


def _writes(containers: list[VariableTracker], stores: list[Store],
            codegen: OutputCodegen) -> list[str]:
    """Write back the containers' items, then the stores in order.

    Every new value, and every object written to, is computed first (hoisted before any write):
    a value may be the old content of something another write changes (``d.update(y=d["x"])``),
    and a store target may sit in a container the frame changed.
    """
    writes = []
    for container in containers:
        target = codegen.hoist(container.source.expr())
        value = codegen.hoist(container.reconstruct_literal(codegen))
        # Through the builtin's own methods: a subclass's overrides never run here.
        kind = container.python_type()
        if kind in (dict, set):
            writes += [f"{kind.__name__}.clear({target})",
                       f"{kind.__name__}.update({target}, {value})"]
        else:
            writes.append(f"list.__setitem__({target}, slice(None), {value})")
    for store in stores:
        target = _target_expr(store.target, codegen)
        writes.append(f"{target} = {codegen.hoist(store.value.reconstruct(codegen))}")
    return writes


def _settled(value: VariableTracker) -> bool:
    """A value that is the same object with the same contents at any point of the trace: a real
    object reached through a source, or an immutable constant. (Read from the trackers' types,
    never their values: reading a float input's value would guard it.)"""
    if value.source is not None:
        return True
    kind = value.python_type()
    if issubclass(kind, tuple) and isinstance(getattr(value, "items", None), list):
        return all(_settled(item) for item in value.items)
    return value.is_constant() and kind not in (list, dict, set, bytearray)


def _target_expr(target: Source, codegen: OutputCodegen) -> str:
    """An assignment target whose object is fetched before any write (hoisted)."""
    if isinstance(target, AttrSource):
        return f"{codegen.hoist(target.base.expr())}.{target.attr}"
    if isinstance(target, ItemSource):
        return f"{codegen.hoist(target.base.expr())}[{target.index!r}]"
    return target.expr()
