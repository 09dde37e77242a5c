"""Sources: where a traced value came from, so guards and generated code can reach it again.

A source prints the way torch.compile users read it (``L['x']``, ``G['w']``, ``L['self'].w``,
``L['xs'][0]``) and renders as a Python expression (:meth:`Source.expr`) inside the functions that
graphlift generates for guards and cache hits. Those functions take the frame's arguments under
their own names, the function object as ``__gl_fn`` and the module globals as ``__gl_G``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

FN_NAME = "__gl_fn"  # the function object, for closure cells
GLOBALS_NAME = "__gl_G"  # the function's module globals


class SourceKind(enum.Enum):
    """The closed set of places a value can come from."""

    LOCAL = "local"  # an argument of the frame
    GLOBAL = "global"  # a module global of the frame's function
    CLOSURE = "closure"  # a free variable (closure cell) of the frame's function
    ATTR = "attr"  # an attribute of another source
    ITEM = "item"  # an index into another source (tuple, list, dict)


@dataclass(frozen=True)
class Source:
    """Base class; subclasses are frozen dataclasses so sources hash and compare by value."""

    kind = SourceKind.LOCAL

    def name(self) -> str:
        """How logs and guard strings show this source."""
        raise NotImplementedError

    def expr(self) -> str:
        """A Python expression that evaluates to the value inside generated code."""
        raise NotImplementedError

    def root(self) -> Source:
        """The source this one is reached through (itself for locals, globals and cells)."""
        return self


@dataclass(frozen=True)
class LocalSource(Source):
    local_name: str
    kind = SourceKind.LOCAL

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def expr(self) -> str:
        return self.local_name


@dataclass(frozen=True)
class GlobalSource(Source):
    global_name: str
    kind = SourceKind.GLOBAL

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def expr(self) -> str:
        return f"{GLOBALS_NAME}[{self.global_name!r}]"


@dataclass(frozen=True)
class ClosureSource(Source):
    """A free variable; shown as a local because the frame sees it as one."""

    var_name: str
    index: int
    kind = SourceKind.CLOSURE

    def name(self) -> str:
        return f"L[{self.var_name!r}]"

    def expr(self) -> str:
        return f"{FN_NAME}.__closure__[{self.index}].cell_contents"


@dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str
    kind = SourceKind.ATTR

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.attr}"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class ItemSource(Source):
    base: Source
    index: object  # int or a hashable dict key with an exact repr
    kind = SourceKind.ITEM

    def name(self) -> str:
        return f"{self.base.name()}[{self.index!r}]"

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.index!r}]"

    def root(self) -> Source:
        return self.base.root()


def needs_function(source: Source) -> bool:
    """Whether rendering ``source`` needs the function object (closure cells do)."""
    return source.root().kind is SourceKind.CLOSURE


def placeholder_name(source: Source) -> str:
    """An FX-friendly name for a graph input: ``L['x'].w`` -> ``L_x_w``."""
    text = source.name()
    cleaned = "".join(ch if ch.isalnum() else "_" for ch in text)
    return "_".join(filter(None, cleaned.split("_")))
