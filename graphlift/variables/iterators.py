"""Lazy iterators: stand-ins that may never end, stepped one item at a time while tracing.

Inlined generators run to completion when first called, which an infinite iterator cannot do.
``itertools.count`` and ``itertools.repeat`` are instead real stand-in objects
(:mod:`graphlift.polyfills.itertools`) made while tracing and advanced only when the trace asks
for the next item (``for``, ``next()``, ``zip`` and the other polyfills that pull items).
"""

from __future__ import annotations

from typing import Any

from graphlift.exc import Unsupported
from graphlift.translator import IteratorVariable
from graphlift.variables.base import VariableTracker
from graphlift.variables.constant import wrap_constant


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
