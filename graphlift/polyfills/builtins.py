"""Builtins, step by step: used when the native handler cannot follow its arguments.

``variables/builtins.py`` models ``sum``, ``all``, ``any``, ``enumerate``, ``zip``, ``min`` and
``max`` on iterables it can materialise. A lazy iterator (``itertools.count()``), a generator or a
user-defined iterable (a class with ``__iter__``) must be iterated one item at a time, and
``min``/``max`` with ``key=`` or ``default=`` need Python's exact rules: these functions do that.
``map`` and ``filter`` always run here, lazily: their function runs when an item is pulled, and
so does ``iter(function, sentinel)``.
"""

from __future__ import annotations

import math
import operator
import sys
from typing import Any

_MISSING: Any = object()  # "no default given"; compared by identity


# 3.12's sum adds floats with Neumaier's compensation once the total is an exact float that it
# reached (3.11 adds them one by one); min()/max() reword their error.
_COMPENSATED_SUM = sys.version_info >= (3, 12)
_EMPTY = "iterable argument is empty" if sys.version_info >= (3, 12) else "arg is an empty sequence"


def _type_error_of(call: Any) -> str:
    """The message of the TypeError the real builtin raises, in this Python's words."""
    try:
        call()
    except TypeError as error:
        return str(error)
    raise AssertionError("the builtin accepted a call it should refuse")


# 3.12 reworded it ("iter(v, w): v must be callable" before); checked before anything runs.
_ITER_NOT_CALLABLE = _type_error_of(lambda: iter(None, None))


def sum(iterable, /, start=0):  # noqa: A001
    """builtins.sum: left-to-right ``+`` from ``start``, with 3.12's fast paths."""
    for kind, name, joiner in ((str, "strings", "''"), (bytes, "bytes", "b''"),
                               (bytearray, "bytearray", "b''")):
        if isinstance(start, kind):
            raise TypeError(f"sum() can't sum {name} [use {joiner}.join(seq) instead]")
    items = iter(iterable)
    total = _compensated_prefix(start, items) if _COMPENSATED_SUM else start
    for item in items:
        total = total + item
    return total


def _compensated_prefix(total: Any, items: Any) -> Any:
    """3.12's int and float fast paths over ``items``; returns where the generic loop goes on.

    CPython's int path sums in a C long and leaves it on overflow (no compensation for floats
    after that); this one does not model the overflow: a symbolic int must not be compared
    with the bounds (that would specialize it).
    """
    if type(total) is int:
        for item in items:
            total = total + item
            if type(item) is not int and type(item) is not bool:
                break
        else:
            return total
    if type(total) is not float:
        return total
    compensation = 0.0
    for item in items:
        if type(item) is float:
            t = total + item
            if abs(total) >= abs(item):
                compensation += (total - t) + item
            else:
                compensation += (item - t) + total
            total = t
        elif isinstance(item, int):
            total += float(item)
        else:
            if compensation and math.isfinite(compensation):
                total += compensation
            return total + item
    if compensation and math.isfinite(compensation):
        total += compensation
    return total


def all(iterable, /):  # noqa: A001
    """builtins.all: stops at the first false item."""
    for item in iter(iterable):
        if not item:
            return False
    return True


def any(iterable, /):  # noqa: A001
    """builtins.any: stops at the first true item."""
    for item in iter(iterable):
        if item:
            return True
    return False


def enumerate(iterable, start=0):  # noqa: A001
    """builtins.enumerate: ``(start + i, item)`` pairs."""
    count = operator.index(start)
    for item in iter(iterable):
        yield count, item
        count += 1


def zip(*iterables, strict=False):  # noqa: A001
    """builtins.zip: one item from each iterator in turn, to the shortest (strict: checked)."""
    iterators = [iter(it) for it in iterables]
    if not iterators:
        return
    while True:
        row = []
        for index in range(len(iterators)):
            try:
                row.append(next(iterators[index]))
            except StopIteration:
                if strict:
                    _zip_check_rest(iterators, index)
                return
        yield tuple(row)


def _zip_check_rest(iterators, index):
    """zip(strict=True) after iterator ``index`` ran out: every other one must be empty too."""
    if index:
        plural = " " if index == 1 else "s 1-"
        raise ValueError(f"zip() argument {index + 1} is shorter than argument{plural}{index}")
    for other in range(1, len(iterators)):
        try:
            next(iterators[other])
        except StopIteration:
            continue
        plural = " " if other == 1 else "s 1-"
        raise ValueError(f"zip() argument {other + 1} is longer than argument{plural}{other}")


def map(function, /, *iterables):  # noqa: A001
    """builtins.map: ``function`` over the items of the iterables, to the shortest."""
    if not iterables:
        raise TypeError("map() must have at least two arguments.")
    iterators = [iter(it) for it in iterables]
    while True:
        args = []
        for it in iterators:
            try:
                args.append(next(it))
            except StopIteration:
                return
        yield function(*args)


def filter(function, iterable, /):  # noqa: A001
    """builtins.filter: the items for which ``function`` (None: the item itself) is true."""
    for item in iter(iterable):
        if (item if function is None else function(item)):
            yield item


def iter_callable(function, sentinel, /):
    """builtins.iter(function, sentinel): ``function()`` until it returns the sentinel (compared
    as CPython's callable_iterator does: identity, then ``sentinel == value``) or raises
    StopIteration."""
    if not callable(function):
        raise TypeError(_ITER_NOT_CALLABLE)
    while True:
        try:
            value = function()
        except StopIteration:
            return
        if value is sentinel or sentinel == value:
            return
        yield value


def min(*args, key=None, default=_MISSING):  # noqa: A001
    """builtins.min with ``key=`` and ``default=``: the first smallest item."""
    return _extreme("min", operator.lt, args, key, default)


def max(*args, key=None, default=_MISSING):  # noqa: A001
    """builtins.max with ``key=`` and ``default=``: the first largest item."""
    return _extreme("max", operator.gt, args, key, default)


def _extreme(name, better, args, key, default):
    if not args:
        raise TypeError(f"{name} expected at least 1 argument, got 0")
    if len(args) == 1:
        items = iter(args[0])
    else:
        if default is not _MISSING:
            raise TypeError(f"Cannot specify a default for {name}() with multiple positional "
                            "arguments")
        items = iter(args)
    found = False
    best = best_key = None
    for item in items:
        item_key = item if key is None else key(item)
        if not found or better(item_key, best_key):
            best, best_key, found = item, item_key, True
    if found:
        return best
    if default is _MISSING:
        raise ValueError(f"{name}() {_EMPTY}")
    return default
