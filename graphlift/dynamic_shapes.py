"""Dynamic shapes: which sizes and ints are symbols, and how what the ShapeEnv assumed is guarded.

A dimension or an int is *dynamic* when tracing sees it as a ``torch.SymInt`` of the output graph's
``ShapeEnv`` (``torch.fx.experimental.symbolic_shapes``) instead of a constant. Arithmetic on it
goes into the graph, and every assumption the trace makes about it (``s0 > 4``, ``s0 == s1``,
``2*s0 <= 100``) is recorded by the ShapeEnv; :func:`install_shape_guards` renders those records
into guards of the cache entry, written over sources (``L['x'].size()[0]``).

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
from typing import TYPE_CHECKING, Any, Protocol

import sympy
import torch
from torch._guards import GuardSource
from torch._guards import Source as TorchSourceBase
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.printers import PythonPrinter

from graphlift.exc import ConstraintViolationError
from graphlift.sources import Source, is_module_member

if TYPE_CHECKING:
    from graphlift.guards import GuardBuilder

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


def new_shape_env(capture_scalars: bool = False, capture_dynamic_shapes: bool = False) -> ShapeEnv:
    """A ShapeEnv for one trace. By default it refuses data-dependent values: ``item()`` and
    ``nonzero()`` stay graph breaks. ``capture_scalars`` lets ``item()`` return an *unbacked*
    symbol (one with no value while tracing, ``u0``); ``capture_dynamic_shapes`` lets ``nonzero``,
    ``x[mask]`` and ``unique`` return tensors whose sizes are unbacked symbols."""
    return ShapeEnv(allow_scalar_outputs=capture_scalars,
                    allow_dynamic_output_shape_ops=capture_dynamic_shapes)


SIZE_DYNAMIC = DimDynamic.DYNAMIC  # a fresh symbol per dimension (no "duck" sharing by value)
SIZE_STATIC = DimDynamic.STATIC
SIZE_UNBACKED = DimDynamic.UNBACKED  # mark_unbacked: no value while tracing, no guard


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


# -- rendering sympy over sources --------------------------------------------------------------
class _SymbolPrinter(PythonPrinter):
    """Prints a sympy expression as Python, each symbol as the text given for it."""

    def __init__(self, texts: dict[sympy.Symbol, str]) -> None:
        super().__init__()
        self.texts = texts

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return self.texts[expr]


@dataclasses.dataclass
class _Rendered:
    check: str  # Python over sources, standalone (for diagnosis)
    text: str  # over display names, ``L['x'].size()[0]``
    fast: str  # Python for the generated guard function, symbols read from their bindings
    symbols: list[sympy.Symbol]


class _Renderer:
    """Renders ShapeEnv expressions three ways: check, display text, fast-path Python."""

    def __init__(self, expr: Callable[[Source], str]) -> None:
        self.expr = expr  # our sources as Python in the guard function (GuardBuilder.expr)
        self.check: dict[sympy.Symbol, str] = {}
        self.text: dict[sympy.Symbol, str] = {}
        self.fast: dict[sympy.Symbol, str] = {}
        self._printers = (_SymbolPrinter(self.check), _SymbolPrinter(self.text),
                          _SymbolPrinter(self.fast))

    def define(self, symbol: sympy.Symbol, source: Any, binding: str | None) -> None:
        self.check[symbol] = render_source(source, self.expr)
        self.text[symbol] = render_source(source)
        self.fast[symbol] = binding or self.check[symbol]

    def known(self, expr: sympy.Basic) -> bool:
        return all(s in self.check for s in expr.free_symbols)

    def render(self, expr: sympy.Basic) -> _Rendered:
        check, text, fast = (p.doprint(expr) for p in self._printers)
        symbols = sorted(expr.free_symbols, key=lambda s: self.text[s])
        return _Rendered(check, text, fast, symbols)


def _finite(bound: sympy.Basic) -> bool:
    return bound not in (int_oo, -int_oo, sympy.oo, -sympy.oo)


# -- guards from the ShapeEnv ------------------------------------------------------------------
class ShapeRecords(Protocol):
    """What guarding the ShapeEnv's assumptions reads of the trace's output graph
    (``output_graph.OutputGraph``, a layer above, passes itself down)."""

    @property
    def has_shape_env(self) -> bool:
        """Whether any size or int became a symbol (so that the ShapeEnv exists)."""

    @property
    def shape_env(self) -> ShapeEnv:
        """The ShapeEnv of the trace, with the guards it recorded."""

    dynamic_tensors: list[tuple[Source, torch.Tensor]]
    """The graph inputs with a dynamic dimension: (source, fake tensor)."""
    marked_dims: list[tuple[Source, int, Any]]
    """The dimensions mark_dynamic asked for: (source, dim, symbol)."""
    guard_locations: list[UserLine | None]
    """Where each ShapeEnv guard was recorded: the user's line, or None."""


def install_shape_guards(output: ShapeRecords, guards: GuardBuilder) -> None:
    """Guard everything the ShapeEnv assumed while tracing (call after the backend compiled:
    a backend such as inductor may add assumptions of its own).

    In order: each symbol's range, bound to a name for the rest of the fast path
    (``2 <= (__gl_s0 := x.size()[0])``); each source whose symbol was replaced, by a constant
    (specialized) or by another symbol (``L['y'].size()[0] == L['x'].size()[0]``); the strides
    of dynamic tensors; then the guards the trace recorded, simplified, minus those the ranges
    already imply. A guard over a symbol with no source of ours (a backend's own) is skipped.
    """
    if not output.has_shape_env:
        return  # a static trace: nothing was assumed about symbols
    env = output.shape_env
    check_marked_dims(output)
    renderer = _Renderer(guards.expr)
    deferred: list[tuple[Any, sympy.Basic]] = []
    for symbol, sources in env.var_to_sources.items():
        sources = [s for s in sources if _renderable(s)]
        if not sources:
            continue
        target = env.replace(symbol)
        if target != symbol:
            deferred.extend((source, target) for source in sources)
            continue
        binding = _range_guard(env, symbol, sources[0], renderer, guards)
        renderer.define(symbol, sources[0], binding)
        deferred.extend((source, symbol) for source in sources[1:])
    locations = _guard_locations(output)
    for source, value in deferred:
        if renderer.known(value):
            _equal_guard(source, value, renderer, guards, _specialized_at(env, locations, value))
    for source, fake in output.dynamic_tensors:
        _stride_guard(env, source, fake, renderer, guards)
    for guard, location in locations:
        if env._maybe_evaluate_static(guard.expr, axioms=()) is not None:
            continue  # implied by the symbols' ranges, which are guarded above
        expr = env.simplify(guard.expr)
        if expr == sympy.true or not renderer.known(expr):
            continue
        rendered = renderer.render(expr)
        guards.symbolic_shape(rendered.text, rendered.check, rendered.fast,
                              _currents(rendered, renderer),
                              origin=location.as_origin() if location is not None else None)


def _guard_locations(output: ShapeRecords) -> list[tuple[Any, UserLine | None]]:
    """Each guard the ShapeEnv recorded, with the user's line where it was recorded (None for
    those recorded where no translator noted them: a backend's, say)."""
    known = output.guard_locations
    return [(guard, known[i] if i < len(known) else None)
            for i, guard in enumerate(output.shape_env.guards)]


def _specialized_at(env: ShapeEnv, locations: list[tuple[Any, UserLine | None]],
                    value: sympy.Basic) -> str | None:
    """Why a symbol that was dynamic is guarded on a constant: the first user line at which
    the ShapeEnv equated it to one (``range(n)`` needs the value of ``n``)."""
    if not value.is_number:
        return None
    for guard, location in locations:
        if location is not None and isinstance(guard.expr, sympy.Eq) and \
                guard.expr.free_symbols and value in guard.expr.args:
            return (f"{location.as_origin()} (was dynamic; this line needs the exact value, "
                    "so the value is guarded)")
    return None


def _renderable(source: Any) -> bool:
    try:
        render_source(source)
    except KeyError:
        return False
    return True


def _range_guard(env: ShapeEnv, symbol: sympy.Symbol, source: Any, renderer: _Renderer,
                 guards: GuardBuilder) -> str | None:
    """``2 <= L['x'].size()[0]``; returns the name the fast path binds the symbol to."""
    vr = env.var_to_range.get(symbol)
    lower = vr.lower if vr is not None and _finite(vr.lower) else None
    upper = vr.upper if vr is not None and _finite(vr.upper) else None
    if lower is None and upper is None:
        return None  # an int without bounds: its source is read where it is used
    check = render_source(source, renderer.expr)
    text = render_source(source)
    binding = f"__gl_s{len(renderer.check)}"
    low = f"{lower} <= " if lower is not None else ""
    high = f" <= {upper}" if upper is not None else ""
    # A size symbol starts at 2: sizes 0 and 1 are specialized, so failing that bound means the
    # call has a size of 0 or 1, which gets an entry of its own.
    zero_one = lower == 2 and getattr(source, "prop", None) is not None
    guards.symbolic_shape(f"{low}{text}{high}", f"{low}{check}{high}",
                          f"{low}({binding} := {check}){high}", ((text, check),),
                          zero_one=zero_one)
    return binding


def _equal_guard(source: Any, value: sympy.Basic, renderer: _Renderer,
                 guards: GuardBuilder, origin: str | None) -> None:
    """A source whose symbol was replaced: it equals a constant or another source's symbol."""
    check = render_source(source, renderer.expr)
    text = render_source(source)
    rendered = renderer.render(value)
    currents = ((text, check), *_currents(rendered, renderer))
    guards.symbolic_shape(f"{text} == {rendered.text}", f"{check} == {rendered.check}",
                          f"{check} == {rendered.fast}", currents, origin=origin)


def _stride_guard(env: ShapeEnv, source: Source, fake: torch.Tensor, renderer: _Renderer,
                  guards: GuardBuilder) -> None:
    """``x.stride() == (x.size()[1], 1)``: a dynamic tensor's strides, as the trace assumed."""
    strides = []
    for stride in fake.stride():
        expr = env.simplify(stride.node.expr) if isinstance(stride, torch.SymInt) \
            else sympy.Integer(stride)
        if not renderer.known(expr):
            return
        strides.append(renderer.render(expr))
    name, expr = source.name(), renderer.expr(source)
    fast: str | None = f"{expr}.stride() == ({', '.join(r.fast for r in strides)},)"
    for dim, rendered in enumerate(strides):
        # One display guard per dimension; the fast path compares the whole tuple once.
        guards.symbolic_shape(f"{name}.stride()[{dim}] == {rendered.text}",
                              f"{expr}.stride()[{dim}] == {rendered.check}", fast,
                              ((f"{name}.stride()[{dim}]", f"{expr}.stride()[{dim}]"),))
        fast = None


def _currents(rendered: _Rendered, renderer: _Renderer) -> tuple[tuple[str, str], ...]:
    """(display, expression) of each symbol in a guard: what the miss message shows now."""
    return tuple((renderer.text[s], renderer.check[s]) for s in rendered.symbols)


# -- mark_dynamic that tracing specialized -----------------------------------------------------
def check_marked_dims(output: ShapeRecords) -> None:
    """Raise if a dimension marked dynamic became a constant while tracing."""
    env = output.shape_env
    problems = []
    for source, dim, symbol in output.marked_dims:
        value = env.replace(symbol)
        if value.is_number:
            problems.append(_specialization_report(output, f"{source.name()}.size()[{dim}]",
                                                   symbol, value))
    if problems:
        raise ConstraintViolationError(
            "\n".join(problems) + "\nRemove the mark_dynamic call (maybe_mark_dynamic allows "
            "specializing), or change the code so that it does not depend on the exact size.")


def _specialization_report(output: ShapeRecords, name: str, symbol: sympy.Symbol,
                           value: sympy.Basic) -> str:
    """Which recorded guards pinned ``symbol`` to ``value``, and where the trace was then."""
    env = output.shape_env
    lines = [f"{name} was marked dynamic (mark_dynamic), but tracing specialized it to the "
             f"constant {value}:"]
    records = list(zip(env.guards, output.guard_locations))
    involved = [r for r in records if symbol in r[0].expr.free_symbols] or \
        [r for r in records if isinstance(r[0].expr, sympy.Eq)]
    names = {s: render_source(sources[0])
             for s, sources in env.var_to_sources.items() if sources and _renderable(sources[0])}
    printer = _SymbolPrinter(_NamesOrSymbols(names))
    for guard, location in involved[:3]:
        where = location.described() if location is not None else \
            f"inside torch ({_frame_text(guard.sloc.framework_loc)})"
        lines.append(f"  - {printer.doprint(guard.expr)}, assumed at {where}")
    if not involved:
        lines.append("  - no recorded guard names it (a backend may have specialized it)")
    return "\n".join(lines)


class _NamesOrSymbols(dict):
    """Display names of symbols; a symbol without one prints as itself."""

    def __missing__(self, symbol: sympy.Symbol) -> str:
        return str(symbol)


def _frame_text(frame: Any) -> str:
    filename = getattr(frame, "filename", None)
    if filename is None:
        return str(frame)
    return f"{filename}:{frame.lineno} in {frame.name}"
