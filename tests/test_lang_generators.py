"""Corpus: generators consumed inside the frame. User generator functions iterated with ``for``,
materialised with ``list``/``tuple``/``dict``, stepped with ``next``, combined with ``zip``,
``enumerate``, ``yield from`` and ``itertools``, each in one graph.

PYTEST_DONT_REWRITE: pytest must not rewrite the ``assert`` statements of the corpus functions;
they are user code under test, compiled exactly as CPython compiles them.
"""

import itertools

import pytest
import torch
from corpus.harness import R, case, case_ids, run_case


def count_up(n):
    for i in range(n):  # noqa: UP028 (a for loop that yields, on purpose)
        yield i


def scaled_copies(x, n):
    for i in range(n):
        yield x * i


def key_values(d):
    for k, v in d.items():
        yield k, v * 2


def naturals():
    i = 0
    while True:
        yield i
        i += 1


def delegating(x):
    yield from scaled_copies(x, 2)
    yield x


def returns_value():
    yield 1
    return 5


def uses_return_value():
    result = yield from returns_value()
    yield result


def with_cleanup(log):
    try:
        yield 1
        yield 2
    finally:
        log.append("closed")


def only_matrices(xs):
    for t in xs:
        if t.dim() == 2:
            yield t


def running_sum(xs):
    total = 0
    for t in xs:
        total = total + t
        yield total


def pairs_nested(n):
    for i in range(n):
        for j in range(i):
            yield i, j


def keyword_generator(*, start, stop, step=1):
    v = start
    while v < stop:
        yield v
        v += step


class Sequence:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        yield from self.items


class CountDown:
    """The iterator protocol by hand: ``__iter__`` and ``__next__``."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n <= 0:
            raise StopIteration
        self.n -= 1
        return self.n


def for_over_generator(x):
    acc = x
    for v in count_up(3):
        acc = acc + x * v
    return acc


def list_of_generator(x):
    return torch.stack(list(scaled_copies(x, 3)))


def tuple_of_generator(x):
    return tuple(scaled_copies(x, 2))


def sum_of_generator(x):
    return x * sum(count_up(5))


def next_on_generator(x):
    g = count_up(10)
    a = next(g)
    b = next(g)
    return x + a + b


def next_default_on_exhausted(x):
    g = count_up(1)
    first = next(g)
    rest = next(g, -1)
    return x * first + rest


def zip_generators(x):
    out = x
    for a, b in zip(count_up(3), scaled_copies(x, 3)):
        out = out + a * b
    return out


def enumerate_generator(x):
    return [t * i for i, t in enumerate(scaled_copies(x, 3))]


def generator_to_dict(d):
    return dict(key_values(d))


def infinite_generator_break(x):
    for v in naturals():
        if v >= 3:
            break
        x = x + v
    return x


def yield_from_generator(x):
    return list(delegating(x))


def yield_from_return_value(x):
    return x * list(uses_return_value())[-1]


def generator_with_finally(x, log):
    for v in with_cleanup(log):
        x = x + v
    return x


def generator_filtering_tensors(xs):
    return [t.sum() for t in only_matrices(xs)]


def generator_running_sum(xs):
    return list(running_sum(xs))


def generator_nested_loops(x):
    pairs = list(pairs_nested(4))
    return x * len(pairs), pairs


def generator_keyword_arguments(x):
    return x * sum(keyword_generator(start=1, stop=8, step=3))


def generator_in_comprehension(x):
    return [x + v for v in count_up(3) if v != 1]


def generator_defined_in_frame(x):
    def halves(t):
        yield t / 2
        yield t / 4
    return list(halves(x))


def generator_closure_over_local(x):
    k = 3

    def multiples():
        for i in range(2):
            yield x * k * i
    return tuple(multiples())


def generator_sorted_max(x):
    return x * max(count_up(4)), sorted(count_up(3), reverse=True)


def generator_any_all(x):
    return x * any(v > 2 for v in count_up(4)), all(count_up(0))


def generator_reversed_list(x):
    return list(reversed(list(scaled_copies(x, 3))))


def iter_over_user_sequence(x):
    total = x
    for v in Sequence([1, 2, 3]):
        total = total + v
    return total


def iter_protocol_class(x):
    return x * sum(CountDown(4)), list(CountDown(2))


def itertools_islice(x):
    return x * sum(itertools.islice(naturals(), 4))


def itertools_chain(x):
    return list(itertools.chain(scaled_copies(x, 2), [x]))


def itertools_product(x):
    combos = list(itertools.product([1, 2], "ab"))
    return x * len(combos), combos


def itertools_accumulate_count(x):
    sums = list(itertools.accumulate([1, 2, 3]))
    return x * sums[-1], sums, list(zip(itertools.count(5), "ab"))


CASES = [
    case(for_over_generator, R(3)),
    case(list_of_generator, R(3)),
    case(tuple_of_generator, R(3)),
    case(sum_of_generator, R(3)),
    case(next_on_generator, R(3)),
    case(next_default_on_exhausted, R(3)),
    case(zip_generators, R(3)),
    case(enumerate_generator, R(3)),
    case(generator_to_dict, {"a": R(3), "b": R(2)}),
    case(infinite_generator_break, R(3)),
    case(yield_from_generator, R(3)),
    case(yield_from_return_value, R(3)),
    case(generator_with_finally, R(3), []),
    case(generator_filtering_tensors, [R(2, 2), R(3), R(1, 3)]),
    case(generator_running_sum, [R(3), R(3), R(3)]),
    case(generator_nested_loops, R(3)),
    case(generator_keyword_arguments, R(3)),
    case(generator_in_comprehension, R(3)),
    case(generator_defined_in_frame, R(3)),
    case(generator_closure_over_local, R(3)),
    case(generator_sorted_max, R(3)),
    case(generator_any_all, R(3)),
    case(generator_reversed_list, R(3)),
    case(iter_over_user_sequence, R(3)),
    case(iter_protocol_class, R(3)),
    case(itertools_islice, R(3)),
    case(itertools_chain, R(3)),
    case(itertools_product, R(3)),
    case(itertools_accumulate_count, R(3)),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_generators(case):
    run_case(case)
