"""The ShapeEnv of a trace and the guards rendered from what it assumed.

A trace makes its ``ShapeEnv`` (``torch.fx.experimental.symbolic_shapes``) when a size or an int
first becomes a symbol (:mod:`graphlift.dynamic_shapes` decides which do). Every assumption the
trace makes about a symbol (``s0 > 4``, ``s0 == s1``, ``2*s0 <= 100``) is recorded by the
ShapeEnv; :func:`install_shape_guards` renders those records into guards of the cache entry,
written over sources (``L['x'].size()[0]``).

This is the module that needs sympy (0.4 s to import): it is imported with the output graph, at
the first compile, never by ``import graphlift``. (The first compile imports sympy anyway: torch's
fake tensors import ``torch.fx.experimental.symbolic_shapes`` for every tensor they convert.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.printers import PythonPrinter

from graphlift.dynamic_shapes import UserLine, render_source
from graphlift.exc import ConstraintViolationError
from graphlift.sources import Source

if TYPE_CHECKING:
    from graphlift.guards import GuardBuilder


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
