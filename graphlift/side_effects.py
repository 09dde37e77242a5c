"""The side-effect ledger: mutations made while tracing, replayed after the graph runs.

Tracing never touches real objects. When the traced code mutates something that exists outside the
frame (a list or dict argument, an attribute of an input object, a global, a closure cell), the
ledger records it, trackers show the new value to the rest of the trace, and the generated run
function replays the final state after the graph has run, in the order the stores happened::

    __gl_out = __gl_graph(x)
    xs[:] = [__gl_out[0], 3]              # a list argument that was appended to
    self.count = 4                        # an attribute store on an input object
    __gl_G['STEP'] = 5                    # a global store
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graphlift.sources import Source

if TYPE_CHECKING:
    from graphlift.codegen import OutputCodegen
    from graphlift.variables.base import VariableTracker


@dataclass
class Store:
    """``target = value`` where the target is reached through a source."""

    target: Source
    value: VariableTracker


class SideEffects:
    """Records mutations of objects that outlive the frame, in program order."""

    def __init__(self) -> None:
        self.mutated_containers: list[VariableTracker] = []
        self.stores: list[Store] = []
        self._pending: dict[Source, VariableTracker] = {}

    def __bool__(self) -> bool:
        return bool(self.mutated_containers or self.stores)

    def mutate_container(self, container: VariableTracker) -> None:
        """A list or dict from the inputs changed; its final items are written back."""
        if all(c is not container for c in self.mutated_containers):
            self.mutated_containers.append(container)

    def store(self, target: Source, value: VariableTracker) -> None:
        """An attribute, global or cell store; later loads of ``target`` see ``value``."""
        self.stores.append(Store(target, value))
        self._pending[target] = value

    def pending(self, target: Source) -> VariableTracker | None:
        """The value stored at ``target`` during this trace, if any."""
        return self._pending.get(target)

    def replay(self, codegen: OutputCodegen) -> list[str]:
        """Python statements that make real objects match the traced program's final state.

        Every new value is computed first and only then written: a value may read an input that
        another write changes (``d.update(y=d["x"])`` reads ``d['x']`` before ``d`` is cleared).
        """
        values, writes = [], []
        for container in self.mutated_containers:
            name = f"__gl_v{len(values)}"
            values.append(f"{name} = {container.reconstruct_literal(codegen)}")
            target = container.source.expr()
            if container.python_type() is dict:
                writes += [f"{target}.clear()", f"{target}.update({name})"]
            else:
                writes.append(f"{target}[:] = {name}")
        for store in self.stores:
            name = f"__gl_v{len(values)}"
            values.append(f"{name} = {store.value.reconstruct(codegen)}")
            writes.append(f"{store.target.expr()} = {name}")
        return values + writes


def replay_kind(value: Any) -> str:
    """For logs: what kind of object a replayed mutation touches."""
    return type(value).__name__
