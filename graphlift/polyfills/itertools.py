"""itertools, in Python. Finite iterators are generators (inlined like user generators);
``count`` and ``repeat`` may be infinite, so they are classes that a lazy iterator tracker steps
one item at a time (``_graphlift_lazy``): a consumer must bound them (``zip``, ``islice``, a loop
with ``break``).
"""

from __future__ import annotations

import itertools
import operator


def chain(*iterables):
    """itertools.chain: the items of each iterable in turn."""
    for iterable in iterables:
        yield from iter(iterable)


def chain_from_iterable(iterables, /):
    """itertools.chain.from_iterable: like chain, with the iterables from one iterable."""
    for iterable in iter(iterables):
        yield from iter(iterable)


def product(*iterables, repeat=1):
    """itertools.product: the cartesian product, last iterable varying fastest."""
    repeat = operator.index(repeat)
    if repeat < 0:
        raise ValueError("repeat argument cannot be negative")
    pools = [tuple(pool) for pool in iterables] * repeat
    result = [[]]
    for pool in pools:
        result = [x + [y] for x in result for y in pool]
    for prod in result:
        yield tuple(prod)


def _islice_index(value):
    """CPython's PyNumber_AsSsize_t with errors cleared: a non-integer reads as -1."""
    try:
        return operator.index(value)
    except TypeError:
        return -1


def _islice_bounds(args):
    if len(args) == 1:
        stop = None if args[0] is None else _islice_index(args[0])
        if stop is not None and stop < 0:
            raise ValueError("Stop argument for islice() must be None or an integer: "
                             "0 <= x <= sys.maxsize.")
        return 0, stop, 1
    if not 2 <= len(args) <= 3:
        raise TypeError(f"islice expected at most 4 arguments, got {len(args) + 1}"
                        if args else "islice expected at least 2 arguments, got 1")
    start = 0 if args[0] is None else _islice_index(args[0])
    stop = None if args[1] is None else _islice_index(args[1])
    if start < 0 or (stop is not None and stop < 0):
        raise ValueError("Indices for islice() must be None or an integer: "
                         "0 <= x <= sys.maxsize.")
    step = 1
    if len(args) == 3 and args[2] is not None:
        step = _islice_index(args[2])
    if step < 1:
        raise ValueError("Step for islice() must be a positive integer or None.")
    return start, stop, step


def islice(iterable, *args):
    """itertools.islice, following CPython's islice_next item for item."""
    start, stop, step = _islice_bounds(args)
    iterator = iter(iterable)
    count = 0
    next_index = start
    while True:
        while count < next_index:
            try:
                next(iterator)
            except StopIteration:
                return
            count += 1
        if stop is not None and count >= stop:
            return
        try:
            item = next(iterator)
        except StopIteration:
            return
        count += 1
        next_index += step
        if stop is not None and next_index > stop:
            next_index = stop
        yield item


def accumulate(iterable, func=None, *, initial=None):
    """itertools.accumulate: running totals (or running ``func`` results)."""
    iterator = iter(iterable)
    total = initial
    if initial is None:
        try:
            total = next(iterator)
        except StopIteration:
            return
    yield total
    for element in iterator:
        total = total + element if func is None else func(total, element)
        yield total


def zip_longest(*iterables, fillvalue=None):
    """itertools.zip_longest: to the longest, with ``fillvalue`` for the exhausted ones."""
    iterators = [iter(it) for it in iterables]
    exhausted = [False] * len(iterators)
    active = len(iterators)
    if not active:
        return
    while True:
        row = []
        for index in range(len(iterators)):
            if exhausted[index]:
                row.append(fillvalue)
                continue
            try:
                row.append(next(iterators[index]))
            except StopIteration:
                active -= 1
                if not active:
                    return
                exhausted[index] = True
                row.append(fillvalue)
        yield tuple(row)


def starmap(function, iterable, /):
    """itertools.starmap: ``function(*args)`` for each tuple of arguments."""
    for args in iter(iterable):
        yield function(*args)


def takewhile(predicate, iterable, /):
    """itertools.takewhile: items while the predicate holds."""
    for item in iter(iterable):
        if not predicate(item):
            return
        yield item


def dropwhile(predicate, iterable, /):
    """itertools.dropwhile: items from the first one the predicate rejects."""
    iterator = iter(iterable)
    for item in iterator:
        if not predicate(item):
            yield item
            break
    for item in iterator:
        yield item


def compress(data, selectors):
    """itertools.compress: the items of ``data`` whose selector is true."""
    selector_iterator = iter(selectors)
    for item in iter(data):
        try:
            selected = next(selector_iterator)
        except StopIteration:
            return
        if selected:
            yield item


def pairwise(iterable, /):
    """itertools.pairwise: overlapping pairs of consecutive items."""
    iterator = iter(iterable)
    try:
        previous = next(iterator)
    except StopIteration:
        return
    for item in iterator:
        yield previous, item
        previous = item


def filterfalse(predicate, iterable, /):
    """itertools.filterfalse: the items the predicate (or truth, for None) rejects."""
    for item in iter(iterable):
        if not (item if predicate is None else predicate(item)):
            yield item


def cycle(iterable, /):
    """itertools.cycle: the items, saved on the first pass, then repeated forever (lazy)."""
    saved = []
    for item in iter(iterable):
        yield item
        saved.append(item)
    while saved:
        yield from saved


def _pool_and_r(iterable, r):
    pool = tuple(iterable)
    if r is None:
        return pool, len(pool)
    r = operator.index(r)
    if r < 0:
        raise ValueError("r must be non-negative")
    return pool, r


def combinations(iterable, r):
    """itertools.combinations: r-length tuples in lexicographic order of positions, no
    repeated position."""
    pool, r = _pool_and_r(iterable, r)
    n = len(pool)
    if r > n:
        return
    indices = list(range(r))
    yield tuple(pool[i] for i in indices)
    while True:
        # the rightmost index that can still move right
        i = r - 1
        while i >= 0 and indices[i] == i + n - r:
            i -= 1
        if i < 0:
            return
        indices[i] += 1
        for j in range(i + 1, r):
            indices[j] = indices[j - 1] + 1
        yield tuple(pool[i] for i in indices)


def combinations_with_replacement(iterable, r):
    """itertools.combinations_with_replacement: like combinations, a position may repeat."""
    pool, r = _pool_and_r(iterable, r)
    n = len(pool)
    if not n and r:
        return
    indices = [0] * r
    yield tuple(pool[i] for i in indices)
    while True:
        i = r - 1
        while i >= 0 and indices[i] == n - 1:
            i -= 1
        if i < 0:
            return
        indices[i:] = [indices[i] + 1] * (r - i)
        yield tuple(pool[i] for i in indices)


def permutations(iterable, r=None):
    """itertools.permutations: r-length orderings of distinct positions, lexicographic in the
    positions (every ordering of the chosen positions, for each choice)."""
    pool, r = _pool_and_r(iterable, r)
    n = len(pool)
    if r > n:
        return
    for chosen in _orderings(list(range(n)), r):
        yield tuple(pool[i] for i in chosen)


def _orderings(positions, r):
    """Every r-length ordering of ``positions``, the first position varying slowest."""
    if r == 0:
        yield ()
        return
    for k in range(len(positions)):
        rest = positions[:k] + positions[k + 1:]
        for tail in _orderings(rest, r - 1):
            yield (positions[k],) + tail


def groupby(iterable, key=None):
    """itertools.groupby: (key, group) for each run of equal keys. The groups share the
    iterator: advancing to the next key ends the previous group, as in C."""
    keyfunc = _identity if key is None else key
    iterator = iter(iterable)
    # [current key, current value, exhausted, number of the group being read]
    state = [None, None, False, 0]
    if not _advance(iterator, keyfunc, state):
        return
    while True:
        current = state[0]
        state[3] += 1
        yield current, _group(iterator, keyfunc, state, current, state[3])
        while not state[2] and state[0] == current:
            _advance(iterator, keyfunc, state)
        if state[2]:
            return


def _identity(value):
    return value


def _advance(iterator, keyfunc, state) -> bool:
    """Read the next value into ``state``; False (and marked exhausted) at the end."""
    try:
        value = next(iterator)
    except StopIteration:
        state[2] = True
        return False
    state[0], state[1] = keyfunc(value), value
    return True


def _group(iterator, keyfunc, state, key, number):
    while state[3] == number and not state[2] and state[0] == key:
        yield state[1]
        _advance(iterator, keyfunc, state)


def tee(iterable, n=2, /):
    """itertools.tee: n independent iterators over one, each item buffered until every
    iterator has read it."""
    n = operator.index(n)
    if n < 0:
        raise ValueError("n must be >= 0")
    iterator = iter(iterable)
    buffers = [[] for _ in range(n)]
    return tuple(_tee_branch(iterator, buffers, index) for index in range(n))


def _tee_branch(iterator, buffers, index):
    mine = buffers[index]
    while True:
        if not mine:
            try:
                value = next(iterator)
            except StopIteration:
                return
            for buffer in buffers:
                buffer.append(value)
        yield mine.pop(0)


class count:
    """itertools.count: ``start``, ``start + step``, ... by repeated addition (as in C)."""

    _graphlift_real_class = itertools.count
    _graphlift_lazy = True

    def __init__(self, start=0, step=1):
        for value in (start, step):
            if not isinstance(value, complex) and not any(
                    hasattr(type(value), slot) for slot in ("__index__", "__int__", "__float__")):
                raise TypeError("a number is required")
        self._next = start
        self._step = step

    def __iter__(self):
        return self

    def __next__(self):
        value = self._next
        self._next = value + self._step
        return value

    def _graphlift_finite(self):
        return False


class repeat:
    """itertools.repeat: ``obj`` forever, or ``times`` times."""

    _graphlift_real_class = itertools.repeat
    _graphlift_lazy = True
    _graphlift_object_args = 1  # obj may be any tracker; times must be a constant

    def __init__(self, obj, times=None):
        self._obj = obj
        self._left = None if times is None else max(operator.index(times), 0)

    def __iter__(self):
        return self

    def __next__(self):
        if self._left is not None:
            if self._left <= 0:
                raise StopIteration
            self._left -= 1
        return self._obj

    def _graphlift_finite(self):
        return self._left is not None
