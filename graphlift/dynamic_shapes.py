"""Dynamic shapes: which sizes and ints are symbols (the policy and the marks).

A dimension or an int is *dynamic* when tracing sees it as a ``torch.SymInt`` of the output graph's
``ShapeEnv`` (``torch.fx.experimental.symbolic_shapes``) instead of a constant. Arithmetic on it
goes into the graph, and every assumption the trace makes about it (``s0 > 4``, ``s0 == s1``,
``2*s0 <= 100``) is recorded by the ShapeEnv; :func:`graphlift.shape_guards.install_shape_guards`
renders those records into guards of the cache entry, written over sources
(``L['x'].size()[0]``). This module decides which values become symbols and needs neither the
ShapeEnv nor sympy, so ``import graphlift`` loads neither: ``shape_guards`` holds what does and is
imported with the translator, at the first compile.

Which values are dynamic, in priority order:

====================================  ==============================================================
``compile(..., dynamic=False)``       nothing: every size and int is a constant
``graphlift.mark_static(t, dim)``     that dimension of that tensor stays static
``compile(..., dynamic=True)``        every dimension and int, from the first compile
``graphlift.mark_dynamic(t, dim)``    that dimension, from the first compile; tracing that turns it
                                      into a constant raises :class:`ConstraintViolationError`
automatic dynamic (the default)       the first compile is static; a later compile makes dynamic
                                      each dimension (or int) that differs from what earlier
                                      compiles of the code object saw (:class:`ShapeMemory`)
====================================  ==============================================================

torch.compile's own markers count as these (:data:`TORCH_MARKERS`, read from the tensor where
torch's ``mark_dynamic``, ``maybe_mark_dynamic``, ``mark_unbacked`` and ``mark_static`` put them);
as in torch.compile, a dynamic mark of torch's beats a static one.

Sizes 0 and 1 are always static (the ShapeEnv specializes them: broadcasting makes size 1
special), so a dynamic dimension's symbol carries the guard ``2 <= size`` and a batch of one gets
an entry of its own.

Graph inputs: a dynamic tensor is one placeholder, as a static one is; a size the trace reads
becomes a ``call_method size(x, dim)`` node inside the graph, so the run function needs no extra
arguments. A dynamic int is a placeholder of its own, fed from its source.
"""

from __future__ import annotations

import dataclasses
import functools
import linecache
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch._guards import GuardSource
from torch._guards import Source as TorchSourceBase

from graphlift.sources import Source, is_module_member

DYNAMIC_ATTR = "_graphlift_dynamic_dims"  # on a tensor: the dims mark_dynamic asked for
STATIC_ATTR = "_graphlift_static_dims"  # on a tensor: the dims mark_static asked for
UNBACKED_ATTR = "_graphlift_unbacked_dims"  # on a tensor: the dims mark_unbacked asked for


# -- the user's markers ------------------------------------------------------------------------
def mark_dynamic(t: torch.Tensor, dim: int | Iterable[int]) -> None:
    """Compile dimension ``dim`` of ``t`` as dynamic from the first compile on.

    The marker lives on the tensor object (as torch.compile's does). If tracing turns that size
    into a constant (``if x.shape[0] == 8``, ``x.view(8, -1)``), compiling raises
    :class:`graphlift.ConstraintViolationError` naming the guard that did it and where. Sizes 0
    and 1 are static even when marked.
    """
    _mark(t, dim, DYNAMIC_ATTR, STATIC_ATTR)


def mark_unbacked(t: torch.Tensor, dim: int | Iterable[int]) -> None:
    """Compile dimension ``dim`` of ``t`` as an *unbacked* symbol: the trace never learns its
    value, so it is not specialized on 0 and 1 and no guard is made on it (one entry serves every
    size); what the code assumes about it becomes an assert inside the graph, and Python that
    needs its value (``if x.shape[0] > 4``) is a graph break (GL0012)."""
    _mark(t, dim, UNBACKED_ATTR, STATIC_ATTR)


def mark_static(t: torch.Tensor, dim: int | Iterable[int]) -> None:
    """Keep dimension ``dim`` of ``t`` static, whatever automatic dynamic or dynamic=True say."""
    _mark(t, dim, STATIC_ATTR, DYNAMIC_ATTR)


def _mark(t: torch.Tensor, dim: int | Iterable[int], attr: str, opposite: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    normalized = set()
    for d in dims:
        if not -t.dim() <= d < t.dim():
            raise IndexError(f"dimension {d} out of range for a {t.dim()}-d tensor")
        normalized.add(d % t.dim())
    setattr(t, attr, getattr(t, attr, frozenset()) | normalized)
    if hasattr(t, opposite):
        setattr(t, opposite, getattr(t, opposite) - normalized)


def _marked(t: torch.Tensor, attr: str) -> frozenset[int]:
    return getattr(t, attr, frozenset())


TORCH_UNBACKED_ATTR = "_dynamo_unbacked_indices"  # where torch's mark_unbacked puts its dims

# torch.compile's markers on a tensor, read as graphlift's: attribute -> what the dims get.
TORCH_MARKERS = {
    "_dynamo_dynamic_indices": "dynamic",  # torch._dynamo.mark_dynamic: specializing is an error
    # mark_unbacked: dynamic (beats a static mark), and unbacked (see ShapePolicy.unbacked_dims).
    TORCH_UNBACKED_ATTR: "dynamic",
    "_dynamo_weak_dynamic_indices": "maybe",  # maybe_mark_dynamic: may be specialized
    "_dynamo_static_indices": "static",  # mark_static
}


def marked_dims(t: torch.Tensor) -> tuple[set[int], set[int], set[int]]:
    """``(dynamic, maybe dynamic, static)`` dimensions of ``t``, graphlift's marks and torch's.

    Dynamic ones may not be specialized (:func:`check_marked_dims`). Of graphlift's own marks the
    later call wins (each removes the other); a dynamic mark of torch's beats any static mark.
    """
    found: dict[str, set[int]] = {"dynamic": set(_marked(t, DYNAMIC_ATTR)), "maybe": set(),
                                  "static": set(_marked(t, STATIC_ATTR))}
    rank = max(t.dim(), 1)
    for attr, kind in TORCH_MARKERS.items():
        found[kind] |= {dim % rank for dim in getattr(t, attr, ())}
    torch_dynamic = {dim % rank for attr, kind in TORCH_MARKERS.items() if kind != "static"
                     for dim in getattr(t, attr, ())}
    return found["dynamic"], found["maybe"], found["static"] - torch_dynamic


# -- automatic dynamic -------------------------------------------------------------------------
_UNSEEN = object()


class ShapeMemory:
    """What earlier compiles of one code object saw at each source (kept on its ExtraState).

    A tensor source keeps its sizes, with None for each dimension that has differed between
    compiles (dynamic from then on); an int or float source keeps its value, or None once it has
    differed.
    """

    def __init__(self) -> None:
        self.sizes: dict[Source, tuple[int | None, ...]] = {}
        self.scalars: dict[Source, int | float | None] = {}

    def merge_sizes(self, source: Source, sizes: tuple[int, ...]) -> tuple[int | None, ...]:
        """Record ``sizes``; returns them with None where a dimension has changed."""
        before = self.sizes.get(source)
        if before is None or len(before) != len(sizes):
            merged: tuple[int | None, ...] = sizes  # first seen, or a new rank: start over
        else:
            merged = tuple(b if b == s else None for b, s in zip(before, sizes))
        self.sizes[source] = merged
        return merged

    def merge_scalar(self, source: Source, value: int | float) -> bool:
        """Record ``value``; returns whether this int or float has changed between compiles."""
        before = self.scalars.get(source, _UNSEEN)
        if before is _UNSEEN:
            self.scalars[source] = value
            return False
        if before != value:
            self.scalars[source] = None
        return self.scalars[source] is None

    def agree(self, seen: SeenValues, peers: list[dict[str, dict]]) -> bool:
        """Merge what other ranks saw at the sources this rank's trace saw (by name); returns
        whether that made a value dynamic which this trace had static (then trace again).
        ``peers``: other ranks' :meth:`SeenValues.as_json` (config.enable_compiler_collectives)."""
        static_before = self._static_count(seen)
        for peer in peers:
            for source, sizes in seen.sizes.items():
                theirs = peer["sizes"].get(source.name())
                if theirs is not None and len(theirs) == len(sizes):
                    self.merge_sizes(source, tuple(theirs))
            for source in seen.scalars:
                if source.name() in peer["scalars"]:
                    self.merge_scalar(source, peer["scalars"][source.name()])
        return self._static_count(seen) < static_before

    def _static_count(self, seen: SeenValues) -> int:
        dims = sum(size is not None for source in seen.sizes for size in self.sizes[source])
        return dims + sum(self.scalars.get(source) is not None for source in seen.scalars)

    def changes(self, params: tuple[str, ...], args: tuple) -> list[str]:
        """``"L['x'].size()[0]: now 8, before 10"`` for each static value that ``args`` change.

        Read on the miss path for the recompile log: these are what the next compile makes
        dynamic (unless ``dynamic=False`` or ``mark_static`` keep them static).
        """
        lines = []
        for source, before in self.sizes.items():
            value = _evaluate(source, params, args)
            if not isinstance(value, torch.Tensor) or value.dim() != len(before):
                continue
            static = marked_dims(value)[2]
            for dim, (old, now) in enumerate(zip(before, value.shape)):
                if old is not None and old != now and dim not in static:
                    lines.append(f"{source.name()}.size()[{dim}]: now {now}, before {old}")
        for source, old in self.scalars.items():
            now = _evaluate(source, params, args)
            if old is not None and type(now) is type(old) and now != old:
                lines.append(f"{source.name()}: now {now}, before {old}")
        return lines


def _evaluate(source: Source, params: tuple[str, ...], args: tuple) -> Any:
    try:
        return eval(f"lambda {', '.join(params)}: {source.expr()}", {})(*args)  # noqa: S307
    except Exception:  # the source no longer resolves: nothing to compare
        return None


@dataclasses.dataclass
class SeenValues:
    """The sizes and scalars one trace asked automatic dynamic about (what ranks exchange)."""

    sizes: dict[Source, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    scalars: dict[Source, int | float] = dataclasses.field(default_factory=dict)

    def as_json(self) -> dict[str, dict]:
        return {"sizes": {source.name(): list(sizes) for source, sizes in self.sizes.items()},
                "scalars": {source.name(): value for source, value in self.scalars.items()}}


class ShapePolicy:
    """Decides, for one compile, which dimensions and ints become symbols (see the module doc)."""

    def __init__(self, memory: ShapeMemory | None = None, dynamic: bool | None = None,
                 dynamic_floats: bool = True) -> None:
        self.memory = memory if memory is not None else ShapeMemory()
        self.dynamic = dynamic
        self.dynamic_floats = dynamic_floats  # False: the backend specializes them anyway
        self.seen = SeenValues()

    def tensor_dims(self, source: Source, value: torch.Tensor) -> tuple[set[int], set[int]]:
        """(dimensions to make symbols, those of them that mark_dynamic asked for)."""
        if is_module_member(source):
            return set(), set()  # a module's parameter or buffer: static, as in torch.compile
        merged = self.memory.merge_sizes(source, tuple(value.shape))
        self.seen.sizes[source] = tuple(value.shape)
        if self.dynamic is False:
            return set(), set()
        if self.dynamic is True:
            wanted = set(range(value.dim()))
        else:
            wanted = {dim for dim, size in enumerate(merged) if size is None}
        marked, maybe, static = marked_dims(value)
        return (wanted | marked | maybe) - static, marked - static

    def unbacked_dims(self, source: Source, value: torch.Tensor) -> set[int]:
        """The dimensions graphlift's or torch's ``mark_unbacked`` asked for (never on a module's
        own tensors); torch's beats a static mark, as its other dynamic marks do."""
        if is_module_member(source) or self.dynamic is False:
            return set()
        rank = max(value.dim(), 1)
        ours = set(_marked(value, UNBACKED_ATTR) - _marked(value, STATIC_ATTR))
        return ours | {dim % rank for dim in getattr(value, TORCH_UNBACKED_ATTR, ())}

    def scalar_is_dynamic(self, source: Source, value: int | float) -> bool:
        """Whether an int or float input becomes a symbol (a graph input of its own)."""
        if type(value) is float and not (self.dynamic_floats and math.isfinite(value)):
            return False  # the ShapeEnv cannot reason about nan and inf: always a constant
        changed = self.memory.merge_scalar(source, value)
        self.seen.scalars[source] = value
        if type(value) is float and value == 0.0:
            # Its sympy has no signed zero either: a symbol specialized at 0.0 (by str(),
            # format, math.copysign) would let -0.0 through its guard with 0.0's answer. A
            # zero stays a constant, guarded with its sign; the change is still remembered.
            return False
        if self.dynamic is None:
            return changed
        return self.dynamic


# -- sources for the ShapeEnv ------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TorchSource(TorchSourceBase):
    """One of graphlift's sources in the form torch's ShapeEnv names its symbols by.

    The ShapeEnv (through fake tensors) wraps it in its own chained sources, such as
    ``TensorPropertySource(TorchSource(L['x']), SIZE, 0)`` for ``L['x'].size()[0]``;
    :func:`render_source` turns any such chain back into Python over our sources.
    """

    source: Source

    @functools.cached_property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL

    @property
    def _name_template(self) -> str:
        return self.source.name()


def render_source(source: Any, ours: Callable[[Source], str] | None = None) -> str:
    """A torch source chain over a :class:`TorchSource` as text, ours rendered by ``ours``.

    ``ours`` is None for display (``L['x'].size()[0]``), or a guard builder's ``expr`` for
    Python. Chained torch sources carry a format template for their base (``{0}.size()[0]``,
    ``{0}._base``), which is valid Python. Raises KeyError for a source not rooted in ours.
    """
    if isinstance(source, TorchSource):
        return source.source.name() if ours is None else ours(source.source)
    base = getattr(source, "base", None)
    if base is None:
        raise KeyError(getattr(source, "name", repr(source)))
    return source._name_template.format(render_source(base, ours))


# -- where a guard came from -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class UserLine:
    """A line of the user's code that the trace was at."""

    location: str  # file:line
    text: str  # the source line, stripped ("" when the file cannot be read)

    def described(self) -> str:
        """``demo.py:5 (y = x * n)``, as error reports cite it."""
        return f"{self.location} ({self.text})" if self.text else self.location

    def as_origin(self) -> str:
        """``y = x * n  at demo.py:5``, as shown after a guard."""
        return f"{self.text}  at {self.location}" if self.text else f"at {self.location}"


def tracing_location(tx: Any) -> UserLine | None:
    """The user instruction translator ``tx`` is at, or None.

    The ShapeEnv records guards deep inside torch, where no translator is at hand: the output
    graph keeps the translators running (innermost last) and passes the innermost one here.
    """
    inst = getattr(tx, "inst", None)
    if inst is None or not inst.located:  # a resume prologue: no line the user wrote
        return None
    return UserLine(tx.location(),
                    linecache.getline(tx.code.co_filename, inst.lineno or 0).strip())


def stack_trace(tracers: list[Any]) -> str:
    """The user's frames that translators ``tracers`` are in (outermost first), in traceback form:
    what FX prints above each node of a readable graph (``# File: m.py:12 in f, code: ...``)."""
    lines = []
    for tx in tracers:
        inst = getattr(tx, "inst", None)
        line = inst.lineno if inst is not None and inst.lineno else tx.code.co_firstlineno
        filename = tx.code.co_filename
        lines.append(f'  File "{filename}", line {line}, in {tx.code.co_name}\n'
                     f"    {linecache.getline(filename, line).strip()}\n")
    return "".join(lines)
