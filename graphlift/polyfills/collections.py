"""Methods of ``collections.deque``, ``OrderedDict`` and ``defaultdict``, in Python.

The containers themselves are trackers (``variables/collections.py``) with the primitive
operations: ``append``/``appendleft``/``pop``/``popleft``, item access, ``len``, iteration. The
methods below are written with those primitives only, following CPython's C algorithms, so the
same function runs on a real container (the tests compare it with the C method) and on a tracker.
"""

from __future__ import annotations

import operator
import sys


def deque_extend(d, iterable, /):
    """deque.extend: append each item (extending a deque with itself copies it first)."""
    if iterable is d:
        iterable = list(iterable)
    for item in iter(iterable):
        d.append(item)


def deque_extendleft(d, iterable, /):
    """deque.extendleft: appendleft each item, so they end up reversed."""
    if iterable is d:
        iterable = list(iterable)
    for item in iter(iterable):
        d.appendleft(item)


def deque_rotate(d, n=1, /):
    """deque.rotate: ``n`` steps to the right (negative: to the left)."""
    n = operator.index(n)
    length = len(d)
    if length <= 1:
        return
    for _ in range(n % length):
        d.appendleft(d.pop())


def deque_insert(d, index, value, /):
    """deque.insert: by rotating, as the C implementation does."""
    index = operator.index(index)
    length = len(d)
    if d.maxlen is not None and length >= d.maxlen:
        raise IndexError("deque already at its maximum size")
    if index >= length:
        d.append(value)
        return
    if index <= -length or index == 0:
        d.appendleft(value)
        return
    deque_rotate(d, -index)
    if index < 0:
        d.append(value)
    else:
        d.appendleft(value)
    deque_rotate(d, index)


def deque_remove(d, value, /):
    """deque.remove: delete the first item equal to ``value``."""
    for index in range(len(d)):
        if d[index] == value:
            del d[index]
            return
    raise ValueError(f"{value!r} is not in deque")


def deque_count(d, value, /):
    """deque.count: how many items equal ``value``."""
    count = 0
    for item in d:
        if item == value:
            count += 1
    return count


def deque_index(d, value, start=0, stop=sys.maxsize, /):
    """deque.index: the position of the first ``value`` in ``[start, stop)``."""
    length = len(d)
    start, stop = operator.index(start), operator.index(stop)
    if start < 0:
        start = max(start + length, 0)
    if stop < 0:
        stop = max(stop + length, 0)
    for index in range(start, min(stop, length)):
        if d[index] == value:
            return index
    raise ValueError(f"{value!r} is not in deque")


def deque_reverse(d, /):
    """deque.reverse: in place."""
    items = list(d)
    d.clear()
    for item in items:
        d.appendleft(item)


def ordereddict_move_to_end(od, key, /, last=True):
    """OrderedDict.move_to_end: to the end, or (last=False) to the front."""
    value = od.pop(key)
    if last:
        od[key] = value
        return
    rest = list(od.items())
    od.clear()
    od[key] = value
    od.update(rest)


def ordereddict_popitem(od, /, last=True):
    """OrderedDict.popitem: the last (or first) pair, removed."""
    if not od:
        raise KeyError("dictionary is empty")
    keys = list(od)
    key = keys[-1] if last else keys[0]
    return key, od.pop(key)


def defaultdict_missing(d, key, /):
    """defaultdict.__missing__: make, store and return ``default_factory()``."""
    if d.default_factory is None:
        raise KeyError(key)
    value = d.default_factory()
    d[key] = value
    return value

