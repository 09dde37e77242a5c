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
from typing import TYPE_CHECKING

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

    def store(self, target: Source, value: VariableTracker,
              owner: VariableTracker | None = None) -> None:
        """An attribute, global or cell store; later loads of ``target`` see ``value``."""
        self.stores.append(Store(target, value, owner))
        self._pending[target] = value

    def pending(self, target: Source) -> VariableTracker | None:
        """The value stored at ``target`` during this trace, if any."""
        return self._pending.get(target)

    def replay(self, codegen: OutputCodegen) -> list[str]:
        """Statements that make real objects match the traced program's final state.

        Every new value, and every object written to, is computed first (hoisted before any
        write): a value may be the old content of something another write changes
        (``d.update(y=d["x"])``), and a store target may sit in a container the frame changed.
        """
        writes = []
        for container in self.mutated_containers:
            target = codegen.hoist(container.source.expr())
            value = codegen.hoist(container.reconstruct_literal(codegen))
            if container.python_type() is dict:
                writes += [f"{target}.clear()", f"{target}.update({value})"]
            else:
                writes.append(f"{target}[:] = {value}")
        for store in self.stores:
            target = _target_expr(store.target, codegen)
            writes.append(f"{target} = {codegen.hoist(store.value.reconstruct(codegen))}")
        return writes


def _target_expr(target: Source, codegen: OutputCodegen) -> str:
    """An assignment target whose object is fetched before any write (hoisted)."""
    if isinstance(target, AttrSource):
        return f"{codegen.hoist(target.base.expr())}.{target.attr}"
    if isinstance(target, ItemSource):
        return f"{codegen.hoist(target.base.expr())}[{target.index!r}]"
    return target.expr()
