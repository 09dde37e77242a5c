"""Iterators: over items known while tracing, and lazy stand-ins stepped one item at a time.

``IteratorVariable`` holds the items (GET_ITER over a range, list, tensor...).

Inlined generators run to completion when first called, which an infinite iterator cannot do.
``itertools.count`` and ``itertools.repeat`` are instead real stand-in objects
(:mod:`graphlift.polyfills.itertools`) made while tracing and advanced only when the trace asks
for the next item (``for``, ``next()``, ``zip`` and the other polyfills that pull items).
"""

from __future__ import annotations

from typing import Any

from graphlift.exc import Unsupported
from graphlift.variables.base import VariableTracker
from graphlift.variables.constant import wrap_constant


class IteratorVariable(VariableTracker):
    """An iterator over items known while tracing (GET_ITER over a range, list, tensor...)."""

    def __init__(self, items: list[VariableTracker],
                 returned: VariableTracker | None = None) -> None:
        super().__init__()
        self.items = items
        self.index = 0
        self.returned = returned  # a generator's return value (``r = yield from gen()``)

    def next_item(self) -> VariableTracker | None:
        if self.index >= len(self.items):
            return None
        self.index += 1
        return self.items[self.index - 1]

    def unpack(self, tx) -> list[VariableTracker]:
        rest = self.items[self.index:]
        self.index = len(self.items)
        return rest


class LazyIteratorVariable(IteratorVariable):
    """An iterator whose items are made on demand by a real stand-in object."""

    def __init__(self, stand_in: Any) -> None:
        super().__init__([])
        self.stand_in = stand_in

    def describe(self) -> str:
        return type(self.stand_in).__name__

    def python_type(self) -> type:
        return type(self.stand_in)._graphlift_real_class

    def is_constant(self) -> bool:
        return False  # never folded: that would consume it (or never end)

    def next_item(self) -> VariableTracker | None:
        try:
            value = next(self.stand_in)
        except StopIteration:
            return None
        return value if isinstance(value, VariableTracker) else wrap_constant(value)

    def unpack(self, tx) -> list[VariableTracker]:
        if not self.stand_in._graphlift_finite():
            raise Unsupported(
                f"itertools.{self.describe()}() never ends, so it cannot be unpacked",
                hints=("bound it: zip() with a finite iterable, itertools.islice(), or a loop "
                       "with break",))
        items = []
        item = self.next_item()
        while item is not None:
            items.append(item)
            item = self.next_item()
        return items
