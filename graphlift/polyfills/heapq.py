"""heapq, in Python: the algorithms of CPython's heapq.py, with the C module's error messages.

``merge``, ``nlargest`` and ``nsmallest`` keep their heap entries as ``[key, order]`` and the
items apart, so the heap compares only keys and unique orders (what the originals compare too).
"""

from __future__ import annotations

import operator


def _check(heap, name, argument=" 1"):
    if not isinstance(heap, list):
        raise TypeError(f"{name}() argument{argument} must be list, not {type(heap).__name__}")


def heappush(heap, item, /):
    """heapq.heappush: push ``item``, keeping the heap invariant."""
    _check(heap, "heappush")
    heap.append(item)
    _siftdown(heap, 0, len(heap) - 1)


def heappop(heap, /):
    """heapq.heappop: pop the smallest item."""
    _check(heap, "heappop", "")
    if not heap:
        raise IndexError("index out of range")
    return _pop_root(heap, operator.lt)


def heapreplace(heap, item, /):
    """heapq.heapreplace: pop the smallest, then push ``item``."""
    _check(heap, "heapreplace")
    if not heap:
        raise IndexError("index out of range")
    return _replace_root(heap, item, operator.lt)


def heappushpop(heap, item, /):
    """heapq.heappushpop: push ``item``, then pop the smallest (faster than both)."""
    _check(heap, "heappushpop")
    if heap and heap[0] < item:
        item, heap[0] = heap[0], item
        _siftup(heap, 0)
    return item


def heapify(heap, /):
    """heapq.heapify: make a list a heap, in place."""
    _check(heap, "heapify", "")
    _heapify_in_order(heap, operator.lt)


def _siftdown(heap, startpos, pos, before=operator.lt):
    """Move heap[pos] up towards startpos while it goes ``before`` its parent."""
    newitem = heap[pos]
    while pos > startpos:
        parentpos = (pos - 1) >> 1
        parent = heap[parentpos]
        if before(newitem, parent):
            heap[pos] = parent
            pos = parentpos
            continue
        break
    heap[pos] = newitem


def _siftup(heap, pos, before=operator.lt):
    """Move the smaller child up until heap[pos]'s item reaches a leaf, then sift it down."""
    endpos = len(heap)
    startpos = pos
    newitem = heap[pos]
    childpos = 2 * pos + 1
    while childpos < endpos:
        rightpos = childpos + 1
        if rightpos < endpos and not before(heap[childpos], heap[rightpos]):
            childpos = rightpos
        heap[pos] = heap[childpos]
        pos = childpos
        childpos = 2 * pos + 1
    heap[pos] = newitem
    _siftdown(heap, startpos, pos, before)


def _after(a, b):
    """The order of a max-heap: ``a`` goes first when it is larger (``b < a``)."""
    return b < a


def _heapify_in_order(heap, before):
    for i in reversed(range(len(heap) // 2)):
        _siftup(heap, i, before)


def _pop_root(heap, before):
    """Pop the item that goes first; the last item takes its place and sifts."""
    last = heap.pop()
    if heap:
        first = heap[0]
        heap[0] = last
        _siftup(heap, 0, before)
        return first
    return last


def _replace_root(heap, item, before):
    first = heap[0]
    heap[0] = item
    _siftup(heap, 0, before)
    return first


def _heapify_max(heap):
    _heapify_in_order(heap, _after)


def _heappop_max(heap):
    return _pop_root(heap, _after)


def _heapreplace_max(heap, item):
    return _replace_root(heap, item, _after)


def merge(*iterables, key=None, reverse=False):
    """heapq.merge: merge sorted inputs into one sorted stream (stable, like the original)."""
    if reverse:
        heapify_, heappop_, heapreplace_, direction = \
            _heapify_max, _heappop_max, _heapreplace_max, -1
    else:
        heapify_, heappop_, heapreplace_, direction = heapify, heappop, heapreplace, 1
    iterators = [iter(it) for it in iterables]
    values = {}  # order -> the item whose key heads the entry
    h = []
    for index in range(len(iterators)):
        try:
            value = next(iterators[index])
        except StopIteration:
            continue
        order = index * direction
        values[order] = value
        h.append([value if key is None else key(value), order])
    heapify_(h)
    while len(h) > 1:
        try:
            while True:
                entry = h[0]
                order = entry[1]
                yield values[order]
                value = next(iterators[order * direction])
                values[order] = value
                entry = [value if key is None else key(value), order]
                heapreplace_(h, entry)
        except StopIteration:
            heappop_(h)
    if h:
        order = h[0][1]
        yield values[order]
        for value in iterators[order * direction]:
            yield value


def nsmallest(n, iterable, key=None):
    """heapq.nsmallest: the ``n`` smallest items, like ``sorted(iterable, key=key)[:n]``."""
    return _n_extreme(n, iterable, key, largest=False)


def nlargest(n, iterable, key=None):
    """heapq.nlargest: the ``n`` largest items, like ``sorted(..., reverse=True)[:n]``."""
    return _n_extreme(n, iterable, key, largest=True)


def _n_extreme(n, iterable, key, largest):
    if n == 1:
        items = list(iterable)
        if not items:
            return []
        if largest:
            return [max(items, key=key)]
        return [min(items, key=key)]
    try:
        size = len(iterable)
    except (TypeError, AttributeError):
        pass
    else:
        if n >= size:
            return sorted(iterable, key=key, reverse=largest)[:n]
    iterator = iter(iterable)
    items = []  # the candidates, by abs(order); the heap holds [key, order] with order unique
    result = []
    step = -1 if largest else 1
    order = 0
    while len(result) < n:
        try:
            elem = next(iterator)
        except StopIteration:
            break
        items.append(elem)
        result.append([elem if key is None else key(elem), order])
        order += step
    if not result:
        return []
    if largest:
        heapify(result)
        replace = heapreplace
    else:
        _heapify_max(result)
        replace = _heapreplace_max
    top = result[0][0]
    for elem in iterator:
        k = elem if key is None else key(elem)
        if (top < k) if largest else (k < top):
            items.append(elem)
            replace(result, [k, order])
            top = result[0][0]
            order += step
    result.sort(reverse=largest)
    return [items[abs(entry[1])] for entry in result]
