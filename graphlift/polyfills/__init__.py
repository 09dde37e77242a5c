"""Polyfills: pure-Python stand-ins for C functions, swapped in while tracing.

A C function is a black box to the translator, so without help a call to ``itertools.chain`` or
``heapq.heappush`` could only be skipped (a graph break). Each row of :data:`POLYFILLS` names a
Python function (or class) that behaves exactly like the original on the inputs it accepts; the
trace rules (:mod:`graphlift.trace_rules`) send calls of the original to it, and it is inlined
like user code. Each module here is tested against the original (``tests/test_polyfills.py``).

Kinds of stand-in:

- functions, inlined (``functools.reduce``, ``heapq.heappush``, ``copy.deepcopy``);
- generators for finite iterators, inlined lazily like user generators
  (``itertools.chain``, ``islice``, ``product``);
- classes for C objects made in the frame (``functools.partial``, ``operator.itemgetter``):
  while tracing, ``type()`` and ``isinstance`` see ``_graphlift_real_class``; an object that leaves
  the frame becomes a real one through ``_graphlift_to_real``; a real object read from the inputs
  becomes a stand-in through ``_graphlift_state``;
- lazy iterator classes (``_graphlift_lazy``: ``itertools.count``, ``repeat``), stepped one item
  at a time by a tracker because they may never end;
- methods of ``deque``, ``OrderedDict`` and ``defaultdict``, written with the primitive operations
  their trackers model (``variables/collections.py``).

Builtins with a native handler (``sum``, ``all``, ``any``, ``enumerate``, ``zip``, ``min``,
``max``) keep it; their polyfill runs only when the handler cannot follow the arguments (a lazy
iterator, a generator, a user-defined iterable, ``key=``/``default=``). ``map`` and ``filter``
always run their polyfill: they call a function per item, which must happen when the consumer
pulls the item, as in eager Python. ``config.use_polyfills = False``
turns the table off: the originals are then skipped (graph breaks).
"""

from __future__ import annotations

import builtins as _builtins
import collections as _collections
import copy as _copy
import functools as _functools
import heapq as _heapq
import itertools as _itertools
import operator as _operator
import re as _re
import typing as _typing
from collections.abc import Callable
from typing import Any

# The stand-ins live in modules named like the originals; the originals are imported as _name.
from graphlift.polyfills import (
    builtins,
    collections,
    copy,
    functools,
    heapq,
    itertools,
    operator,
    optim,
    re,
    typing,
)
from graphlift.polyfills.support import call_original

# original -> stand-in. One row per C function; the comment says what the stand-in does.
POLYFILLS: dict[Any, Callable] = {
    # builtins: only where the native handler cannot follow the arguments.
    _builtins.sum: builtins.sum,  # left-to-right +, from start
    _builtins.all: builtins.all,  # stops at the first false item
    _builtins.any: builtins.any,  # stops at the first true item
    _builtins.enumerate: builtins.enumerate,  # (start + i, item)
    _builtins.zip: builtins.zip,  # lock-step next(); strict= checks lengths
    _builtins.map: builtins.map,  # function over the items, to the shortest iterable
    _builtins.filter: builtins.filter,  # the items the function (or truth) accepts
    _builtins.min: builtins.min,  # key= and default=: the first smallest
    _builtins.max: builtins.max,  # key= and default=: the first largest
    _builtins.iter: builtins.iter_callable,  # iter(function, sentinel) only: calls until sentinel
    # itertools: generators for finite iterators, lazy classes for infinite ones.
    _itertools.chain: itertools.chain,  # each iterable's items in turn
    _itertools.chain.from_iterable: itertools.chain_from_iterable,  # same, iterables from one
    _itertools.product: itertools.product,  # cartesian product, last varying fastest
    _itertools.islice: itertools.islice,  # CPython's islice_next, item for item
    _itertools.accumulate: itertools.accumulate,  # running totals or func results
    _itertools.zip_longest: itertools.zip_longest,  # to the longest, with fillvalue
    _itertools.starmap: itertools.starmap,  # function(*args) per tuple
    _itertools.takewhile: itertools.takewhile,  # items while the predicate holds
    _itertools.dropwhile: itertools.dropwhile,  # items from the first rejected one
    _itertools.compress: itertools.compress,  # items whose selector is true
    _itertools.pairwise: itertools.pairwise,  # overlapping consecutive pairs
    _itertools.filterfalse: itertools.filterfalse,  # items the predicate rejects
    _itertools.cycle: itertools.cycle,  # lazy: the saved items forever (a generator)
    _itertools.combinations: itertools.combinations,  # r-tuples of increasing positions
    _itertools.combinations_with_replacement: itertools.combinations_with_replacement,
    _itertools.permutations: itertools.permutations,  # r-orderings of distinct positions
    _itertools.groupby: itertools.groupby,  # runs of equal keys; groups share the iterator
    _itertools.tee: itertools.tee,  # n generators over one buffered iterator
    _itertools.count: itertools.count,  # lazy: start, start + step, ... (bounded by its user)
    _itertools.repeat: itertools.repeat,  # lazy: obj forever, or times times
    # functools.
    _functools.reduce: functools.reduce,  # fold function over the items
    _functools.partial: functools.partial,  # a stand-in object: calls, .func/.args/.keywords
    # computed once into the instance dict, without the lock
    _functools.cached_property.__get__: functools.cached_property_get,
    # operator's callable classes: stand-in objects.
    _operator.itemgetter: operator.itemgetter,  # obj[item] or a tuple of items
    _operator.attrgetter: operator.attrgetter,  # obj.a.b or a tuple of attributes
    _operator.methodcaller: operator.methodcaller,  # obj.name(*args, **kwargs)
    # heapq: CPython's heapq.py algorithms with the C module's errors.
    _heapq.heappush: heapq.heappush,
    _heapq.heappop: heapq.heappop,
    _heapq.heapify: heapq.heapify,
    _heapq.heapreplace: heapq.heapreplace,
    _heapq.heappushpop: heapq.heappushpop,
    _heapq.nlargest: heapq.nlargest,  # stdlib Python, but skipped with the stdlib otherwise
    _heapq.nsmallest: heapq.nsmallest,
    _heapq.merge: heapq.merge,  # stable k-way merge
    # collections: methods of the deque / OrderedDict / defaultdict trackers.
    _collections.deque.extend: collections.deque_extend,
    _collections.deque.extendleft: collections.deque_extendleft,
    _collections.deque.rotate: collections.deque_rotate,
    _collections.deque.insert: collections.deque_insert,
    _collections.deque.remove: collections.deque_remove,
    _collections.deque.count: collections.deque_count,
    _collections.deque.index: collections.deque_index,
    _collections.deque.reverse: collections.deque_reverse,
    _collections.OrderedDict.move_to_end: collections.ordereddict_move_to_end,
    _collections.OrderedDict.popitem: collections.ordereddict_popitem,
    _collections.defaultdict.__missing__: collections.defaultdict_missing,
    # copy: containers rebuilt; anything else runs the original.
    _copy.copy: copy.copy,
    _copy.deepcopy: copy.deepcopy,
    # typing: run-time no-ops.
    _typing.cast: typing.cast,  # its argument
    _typing.get_origin: typing.get_origin,  # folded on a constant annotation (below)
    _typing.get_args: typing.get_args,
    # torch.optim: what Optimizer.step's wrappers call (see optim.py).
    optim.record_function._graphlift_real_class: optim.record_function,  # records nothing
}


# Originals whose calls on constant arguments run for real instead of through the stand-in
# (substitute_in_graph(..., can_constant_fold_through=True)).
CONSTANT_FOLDABLE: set[Any] = set()

# typing: an annotation's origin and arguments are fixed when it is made.
CONSTANT_FOLDABLE.update({_typing.get_origin, _typing.get_args})

# re: on constants (patterns and matches are immutable values), run for real; else declined.
for _name in ("compile", "search", "match", "fullmatch", "escape"):
    POLYFILLS[getattr(_re, _name)] = getattr(re, _name)
    CONSTANT_FOLDABLE.add(getattr(_re, _name))


def polyfill_for(fn: Any) -> Callable | None:
    """The stand-in registered for ``fn``, or None."""
    try:
        return POLYFILLS.get(fn)
    except TypeError:  # unhashable callables have no polyfill
        return None


def add_polyfill(original: Any, stand_in: Callable, constant_fold: bool = False) -> None:
    """Add a row to :data:`POLYFILLS` (``graphlift.substitute_in_graph``); one per original."""
    existing = polyfill_for(original)
    if existing is not None:
        raise ValueError(f"{original!r} already has a stand-in: {existing!r}")
    POLYFILLS[original] = stand_in
    if constant_fold:
        CONSTANT_FOLDABLE.add(original)


__all__ = ["CONSTANT_FOLDABLE", "POLYFILLS", "add_polyfill", "call_original", "polyfill_for"]
