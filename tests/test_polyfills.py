"""Polyfills: each stand-in against its original, and each one inside a compiled function.

Two kinds of tests per polyfill:

- differential, in plain Python: the stand-in and the C original get the same inputs and must
  give the same results, or raise the same exception type with the same message;
- compiled: a function using it compiles to one graph (``fullgraph=True``) with the same result
  as eager, and with ``config.use_polyfills=False`` the same function cannot be captured whole.
"""

import collections
import copy
import functools
import heapq
import itertools
import operator

import pytest
import torch
from reference import measure, recorded

import graphlift
from graphlift import config
from graphlift.polyfills import POLYFILLS
from graphlift.polyfills import builtins as pf_builtins
from graphlift.polyfills import collections as pf_collections
from graphlift.polyfills import compiler as pf_compiler
from graphlift.polyfills import copy as pf_copy
from graphlift.polyfills import functools as pf_functools
from graphlift.polyfills import heapq as pf_heapq
from graphlift.polyfills import itertools as pf_itertools
from graphlift.polyfills import operator as pf_operator
from graphlift.testing import CompileCounter


def outcome(fn, *args, **kwargs):
    """What a call gives: ("ok", result with iterators listed) or ("raises", type, message)."""
    try:
        result = fn(*args, **kwargs)
        if hasattr(result, "__next__"):
            result = list(itertools.islice(result, 50))
        return ("ok", result)
    except Exception as error:
        return ("raises", type(error), str(error))


def assert_same_outcome(original, stand_in, *args, **kwargs):
    """Each call gets its own deep copy of the arguments: they never share an iterator."""
    expected = outcome(original, *copy.deepcopy(args), **copy.deepcopy(kwargs))
    mine = outcome(stand_in, *copy.deepcopy(args), **copy.deepcopy(kwargs))
    assert mine == expected, (args, kwargs, expected)


# -- differential: the stand-in against the original -------------------------------------------
class Countdown:
    """A callable with state: n - 1, n - 2, ... then StopIteration (iter(f, sentinel)'s input)."""

    def __init__(self, n):
        self.n = n

    def __call__(self):
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        return self.n


DIFFERENTIAL = [
    (sum, pf_builtins.sum, [([1, 2, 3],), ([0.1] * 10,), ([[1], [2]], []), ([], 5),
                            (["a"], ""), ([b"a"], b""), ([1.5, 10**20],)]),
    (all, pf_builtins.all, [([1, 2],), ([1, 0, 2],), ([],), ("",)]),
    (any, pf_builtins.any, [([0, 0],), ([0, 3],), ([],)]),
    (enumerate, pf_builtins.enumerate, [("abc",), ("abc", 5), ([], 1), ("a", 1.5)]),
    (zip, pf_builtins.zip, [(), ("ab", [1, 2, 3]), ([1], [2], [3])]),
    (map, pf_builtins.map, [(operator.add, [1, 2], [3, 4, 5]), (str, []), (len,)]),
    (min, pf_builtins.min, [([3, 1, 2],), (3, 1, 2), ([],), ()]),
    (max, pf_builtins.max, [([3, 1, 2],), ([1, 3, 3.0],), (4, 7), ([],)]),
    (itertools.chain, pf_itertools.chain, [([1, 2], "ab", ()), ()]),
    (itertools.chain.from_iterable, pf_itertools.chain_from_iterable, [(["ab", [1]],), ([],)]),
    (itertools.product, pf_itertools.product, [("ab", [1, 2]), ([1, 2],), ([], [1]), ()]),
    (itertools.islice, pf_itertools.islice, [
        ("abcdefg", 3), ("abcdefg", 1, 5), ("abcdefg", 1, None, 2), ("abcdefg", None),
        ("abc", 10), ("abcdefg", 2, 2), ("abc", -1), ("abc", 1.5), ("abc", 0, 2, 0),
        ("abc", -1, 2), ("abc", 1, 2, None), ("abc",)]),
    (itertools.accumulate, pf_itertools.accumulate, [
        ([1, 2, 3],), ([1, 2, 3], operator.mul), ([],), ([], None), ([4], max)]),
    (itertools.zip_longest, pf_itertools.zip_longest, [("ab", [1, 2, 3]), (), ("a",)]),
    (itertools.starmap, pf_itertools.starmap, [(pow, [(2, 3), (3, 2)]), (pow, [])]),
    (itertools.takewhile, pf_itertools.takewhile, [(bool, [1, 2, 0, 3]), (bool, [])]),
    (itertools.dropwhile, pf_itertools.dropwhile, [(bool, [1, 2, 0, 3, 0]), (bool, [1])]),
    (itertools.compress, pf_itertools.compress, [("abcd", [1, 0, 1]), ("ab", [1, 1, 1, 1])]),
    (itertools.pairwise, pf_itertools.pairwise, [("abcd",), ("a",), ([],)]),
    (itertools.filterfalse, pf_itertools.filterfalse, [(None, [0, 1, "", "a"]),
                                                       (lambda v: v > 1, [1, 2, 3])]),
    (itertools.cycle, pf_itertools.cycle, [("ab",), ([],)]),  # outcome() takes 50 items
    (itertools.combinations, pf_itertools.combinations, [
        ("abcd", 2), ("abc", 0), ("ab", 3), ([], 0), ("ab", -1), ("ab", 1.5), (range(5), 4)]),
    (itertools.combinations_with_replacement, pf_itertools.combinations_with_replacement, [
        ("abc", 2), ("", 0), ("", 1), ("ab", 3), ("ab", -1)]),
    (itertools.permutations, pf_itertools.permutations, [
        ("abc",), ("abcd", 2), ("ab", 0), ("ab", 3), ([],), ("ab", -1), ("ab", None)]),
    (iter, pf_builtins.iter_callable, [(Countdown(3), 0), (Countdown(3), 9), (5, 0),
                                       (Countdown(2), 0.0)]),
    (itertools.count, pf_itertools.count, [(), (5,), (1.5, 0.1), (2, -3), ("a",), (1j, 1)]),
    (itertools.repeat, pf_itertools.repeat, [("x", 3), ("x", 0), ("x", -2), ("x",), ("x", "a")]),
    (functools.reduce, pf_functools.reduce, [
        (operator.add, [1, 2, 3]), (operator.add, [], 7), (operator.add, []),
        (operator.sub, [10, 1], 100), (operator.add, [1], 1, 2)]),
    (heapq.nlargest, pf_heapq.nlargest, [
        (2, [5, 1, 4, 1, 5, 9]), (1, [3, 1]), (1, []), (0, [1, 2]), (10, [3, 1, 2]),
        (3, iter([5, 1, 4, 1, 5, 9, 2, 6])), (3, iter([1, 1, 1, 1]))]),
    (heapq.nsmallest, pf_heapq.nsmallest, [
        (2, [5, 1, 4, 1, 5, 9]), (3, iter([5, 1, 4, 1, 5, 9, 2, 6])), (2, iter([]))]),
    (heapq.merge, pf_heapq.merge, [([1, 4, 7], [2, 5], [3, 6, 8, 9]), ([1], []), ()]),
]


@pytest.mark.parametrize("original, stand_in, calls", DIFFERENTIAL,
                         ids=[getattr(row[0], "__qualname__", str(row[0])) for row in DIFFERENTIAL])
def test_stand_in_matches_original(original, stand_in, calls):
    assert POLYFILLS[original] is stand_in
    for args in calls:
        assert_same_outcome(original, stand_in, *args)


def test_groupby_groups_share_the_iterator():
    """Each group ends when the outer iterator moves on, as in C."""
    for data, key in (("aabbbcaa", None), ([1, 3, 2, 4, 6], lambda v: v % 2), ("", None)):
        assert [(k, list(g)) for k, g in pf_itertools.groupby(data, key)] == \
            [(k, list(g)) for k, g in itertools.groupby(data, key)]
        mine = [g for _, g in pf_itertools.groupby(data, key)]  # groups read after the end
        real = [g for _, g in itertools.groupby(data, key)]
        assert [list(g) for g in mine] == [list(g) for g in real]
    assert POLYFILLS[itertools.groupby] is pf_itertools.groupby


def test_tee_branches_are_independent():
    for tee in (itertools.tee, pf_itertools.tee):
        a, b, c = tee(iter([1, 2, 3]), 3)
        assert (next(a), list(b), list(a), list(c)) == (1, [1, 2, 3], [2, 3], [1, 2, 3])
        assert tee([1], 0) == ()
    with pytest.raises(ValueError, match="n must be >= 0"):
        pf_itertools.tee([1], -1)
    assert POLYFILLS[itertools.tee] is pf_itertools.tee


def test_keyword_forms_match():
    for original, stand_in, args, kwargs in [
        (sum, pf_builtins.sum, ([1, 2],), {"start": 10}),
        (enumerate, pf_builtins.enumerate, ("ab",), {"start": 3}),
        (zip, pf_builtins.zip, ("ab", "cd"), {"strict": True}),
        (zip, pf_builtins.zip, ("ab", "c"), {"strict": True}),
        (zip, pf_builtins.zip, ("a", "bc"), {"strict": True}),
        (zip, pf_builtins.zip, ("a", "b", "cd"), {"strict": True}),
        (min, pf_builtins.min, ([3, -4, 2],), {"key": abs}),
        (max, pf_builtins.max, ([3, -4, 4],), {"key": abs}),
        (min, pf_builtins.min, ([],), {"default": None}),
        (max, pf_builtins.max, (1, 2), {"default": 0}),
        (itertools.product, pf_itertools.product, ("ab",), {"repeat": 2}),
        (itertools.product, pf_itertools.product, ("ab",), {"repeat": -1}),
        (itertools.accumulate, pf_itertools.accumulate, ([1, 2],), {"initial": 10}),
        (itertools.zip_longest, pf_itertools.zip_longest, ("ab", "c"), {"fillvalue": "-"}),
        (heapq.nlargest, pf_heapq.nlargest, (2, ["aa", "b", "ccc"]), {"key": len}),
        (heapq.nsmallest, pf_heapq.nsmallest, (2, iter([3, -4, 2, -1])), {"key": abs}),
        (heapq.nsmallest, pf_heapq.nsmallest, (1, [3, -4]), {"key": abs}),
        (heapq.merge, pf_heapq.merge, ([1, 3], [2, 4]), {"reverse": False}),
        (heapq.merge, pf_heapq.merge, ([5, 3, 1], [4, 2]), {"reverse": True}),
        (heapq.merge, pf_heapq.merge, (["a", "ccc"], ["bb"]), {"key": len}),
    ]:
        assert_same_outcome(original, stand_in, *args, **kwargs)


def test_lazy_iterators_step_like_the_originals():
    real, stand_in = itertools.count(0.1, 0.1), pf_itertools.count(0.1, 0.1)
    # Repeated addition, not start + i * step: 0.30000000000000004 on the third item.
    assert [next(real) for _ in range(20)] == [next(stand_in) for _ in range(20)]
    assert not pf_itertools.count()._graphlift_finite()
    assert pf_itertools.repeat(1, 2)._graphlift_finite()


def test_heap_functions_match_on_random_sequences():
    generator = torch.Generator().manual_seed(0)
    for trial in range(20):
        values = torch.randint(0, 30, (trial + 1,), generator=generator).tolist()
        real, mine = [], []
        for value in values:
            heapq.heappush(real, value)
            pf_heapq.heappush(mine, value)
        assert real == mine
        assert heapq.heappushpop(real, 7) == pf_heapq.heappushpop(mine, 7) and real == mine
        assert heapq.heapreplace(real, 3) == pf_heapq.heapreplace(mine, 3) and real == mine
        assert [heapq.heappop(real) for _ in values] == [pf_heapq.heappop(mine) for _ in values]
        real, mine = list(values), list(values)
        heapq.heapify(real)
        pf_heapq.heapify(mine)
        assert real == mine
    assert_same_outcome(heapq.heappop, pf_heapq.heappop, [])
    assert_same_outcome(heapq.heapreplace, pf_heapq.heapreplace, [], 1)
    for fn in ("heappush", "heappushpop"):
        assert_same_outcome(getattr(heapq, fn), getattr(pf_heapq, fn), (), 1)
    assert_same_outcome(heapq.heapify, pf_heapq.heapify, ())


def test_stand_in_classes_behave_and_become_real_objects():
    def add(a, b, c=0):
        return a + 10 * b + 100 * c

    for real, mine, args in [
        (functools.partial(add, 1, c=2), pf_functools.partial(add, 1, c=2), (3,)),
        (functools.partial(functools.partial(add, 1), 2), pf_functools.partial(
            functools.partial(add, 1), 2), ()),
        (operator.itemgetter(1), pf_operator.itemgetter(1), ("abc",)),
        (operator.itemgetter(2, 0), pf_operator.itemgetter(2, 0), ("abc",)),
        (operator.attrgetter("real"), pf_operator.attrgetter("real"), (3j,)),
        (operator.attrgetter("real.imag", "imag"), pf_operator.attrgetter("real.imag", "imag"),
         (2 + 3j,)),
        (operator.methodcaller("split", ","), pf_operator.methodcaller("split", ","), ("a,b",)),
        (operator.methodcaller("split", maxsplit=1), pf_operator.methodcaller(
            "split", maxsplit=1), ("a b c",)),
    ]:
        assert outcome(mine, *args) == outcome(real, *args)
        rebuilt = mine._graphlift_to_real()
        assert type(rebuilt) is type(real) and repr(rebuilt) == repr(real)
        state, _ = type(mine)._graphlift_state(real)
        assert state == {k: v for k, v in vars(mine).items() if k in state}
    nested = pf_functools.partial(functools.partial(add, 1, c=5), 2)
    assert (nested.func, nested.args, nested.keywords) == (add, (1, 2), {"c": 5})  # flattened
    for real, mine, args in [(functools.partial, pf_functools.partial, (1,)),
                             (operator.attrgetter, pf_operator.attrgetter, (1,)),
                             (operator.methodcaller, pf_operator.methodcaller, (1,))]:
        assert_same_outcome(real, mine, *args)


def deques(items, maxlen=None):
    return collections.deque(items, maxlen), collections.deque(items, maxlen)


@pytest.mark.parametrize("method, args", [
    ("extend", ([4, 5],)), ("extendleft", ([4, 5],)), ("rotate", ()), ("rotate", (2,)),
    ("rotate", (-4,)), ("rotate", (1.5,)), ("insert", (1, "x")), ("insert", (-1, "x")),
    ("insert", (9, "x")), ("insert", (-9, "x")), ("remove", (2,)), ("remove", (9,)),
    ("count", (1,)), ("index", (2,)), ("index", (1, 1)), ("index", (3, -2)), ("index", (9,)),
    ("index", (1, 1, 2)), ("reverse", ()),
])
@pytest.mark.parametrize("maxlen", [None, 4, 3])
def test_deque_methods_match(method, args, maxlen):
    real, mine = deques([1, 2, 3, 1][:maxlen or 4], maxlen)
    stand_in = POLYFILLS[getattr(collections.deque, method)]
    assert outcome(stand_in, mine, *args) == outcome(getattr(real, method), *args)
    assert real == mine
    real, mine = deques([1, 2], maxlen)
    assert outcome(stand_in, mine, *args) == outcome(getattr(real, method), *args)
    assert real == mine


def test_deque_extending_with_itself():
    for method in ("extend", "extendleft"):
        real, mine = deques([1, 2], 3)
        getattr(real, method)(real)
        POLYFILLS[getattr(collections.deque, method)](mine, mine)
        assert real == mine


def test_ordered_dict_and_defaultdict_methods_match():
    for last in (True, False):
        real = collections.OrderedDict(a=1, b=2, c=3)
        mine = collections.OrderedDict(real)
        real.move_to_end("b", last=last)
        pf_collections.ordereddict_move_to_end(mine, "b", last=last)
        assert list(real.items()) == list(mine.items())
        assert real.popitem(last=last) == pf_collections.ordereddict_popitem(mine, last=last)
        assert list(real.items()) == list(mine.items())
    assert_same_outcome(collections.OrderedDict().popitem, functools.partial(
        pf_collections.ordereddict_popitem, collections.OrderedDict()))
    assert_same_outcome(collections.OrderedDict().move_to_end, functools.partial(
        pf_collections.ordereddict_move_to_end, collections.OrderedDict()), "x")
    real, mine = collections.defaultdict(list), collections.defaultdict(list)
    assert real.__missing__("k") == pf_collections.defaultdict_missing(mine, "k") and real == mine
    assert_same_outcome(collections.defaultdict().__missing__, functools.partial(
        pf_collections.defaultdict_missing, collections.defaultdict()), "k")


def test_copy_and_deepcopy_match():
    shared = [1, 2]
    values = [1, "s", None, (1, 2), (1, [2]), [1, [2, 3]], {"a": [1], "b": (2,)}, {1, 2},
              frozenset({3}), [shared, shared], {"x": shared, "y": (shared,)},
              collections.deque([1], 2), collections.OrderedDict(a=[1])]
    for value in values:
        for original, stand_in in ((copy.copy, pf_copy.copy), (copy.deepcopy, pf_copy.deepcopy)):
            real, mine = original(value), stand_in(value)
            assert type(real) is type(mine) and real == mine
            assert (real is value) == (mine is value)  # atomic values come back as they are
    real, mine = copy.deepcopy([shared, shared]), pf_copy.deepcopy([shared, shared])
    assert (real[0] is real[1]) and (mine[0] is mine[1]) and mine[0] is not shared
    real, mine = copy.deepcopy({"x": shared, "y": (shared,)}), pf_copy.deepcopy(
        {"x": shared, "y": (shared,)})
    assert real["y"][0] is real["x"] and mine["y"][0] is mine["x"]


# -- compiled: one graph, same result, and without the polyfill a break -------------------------
class Bag:
    """A user iterable: native builtins cannot unpack it, their polyfills iterate it."""

    def __init__(self, *items):
        self.items = list(items)

    def __iter__(self):
        yield from self.items


def use_sum(x):
    # Over a lazy iterator: the native sum() handler needs the items up front.
    return sum(Bag(x, x * 2, 1)), sum(itertools.repeat(x, 3))


def use_all_any(x):
    return x + all(Bag(1, 2)), any(itertools.count()), all(itertools.repeat(x.shape[0] > 1, 3))


def use_enumerate(x):
    return [i * v for i, v in enumerate(Bag(x, x + 1), 1)], list(enumerate(itertools.repeat(x, 2)))


def use_zip_map(x):
    return list(zip(itertools.count(5), [x, x * 2])), list(map(torch.sin, Bag(x, x)))


def use_min_max(x):
    return x * max([3, -7, 5], key=abs) + min([], default=2), min(Bag(4, 2, 9))


def use_chain(x):
    return list(itertools.chain([x, x + 1], (x * 2,)))


def use_chain_from_iterable(x):
    return list(itertools.chain.from_iterable([[x], [x + 1, 2]]))


def use_product(x):
    return [a * x + b for a, b in itertools.product([1, 2], [0, 1])]


def use_islice(x):
    return x * sum(itertools.islice(itertools.count(3), 1, 8, 2))


def use_accumulate(x):
    return list(itertools.accumulate([x, x, x])), list(itertools.accumulate([1, 2, 3],
                                                                            operator.mul))


def use_zip_longest(x):
    return [a * b for a, b in itertools.zip_longest([x, x], [2], fillvalue=3)]


def use_repeat(x):
    return list(itertools.repeat(x + 1, 2)), list(zip(itertools.repeat(x * 2), "ab"))


def use_count(x):
    return [x * i for i, _ in zip(itertools.count(0.5, 0.25), "abc")]


def use_takewhile_dropwhile(x):
    return x * sum(itertools.takewhile(lambda v: v < 3, itertools.count())), list(
        itertools.dropwhile(lambda v: v < 2, [1, 2, 1]))


def use_starmap_compress_pairwise(x):
    return list(itertools.starmap(torch.add, [(x, 1), (x, 2)])), list(
        itertools.compress([x, x + 1], [0, 1])), list(itertools.pairwise([x, x * 2, 3]))


def use_reduce(x):
    return functools.reduce(operator.mul, [x, x + 1, 2]), functools.reduce(max, [1, 5, 2], 0)


def use_partial(x):
    scaled = functools.partial(torch.add, alpha=2)
    bound = functools.partial(scaled, x)
    return bound(x), bound.keywords, bound.args[0] is x, isinstance(bound, functools.partial), \
        scaled


def use_partial_argument(x, add):
    return add(x), add.keywords, add


def use_getters(x):
    return (operator.itemgetter(1, 0)([x, x + 1]), operator.attrgetter("shape")(x)[0] * x,
            operator.methodcaller("view", -1)(x), operator.itemgetter(0))


def use_heapq(x):
    heap = []
    for value in [5, 1, 4, 2]:
        heapq.heappush(heap, value)
    smallest = heapq.heappop(heap)
    replaced = heapq.heapreplace(heap, 0)
    pushed = heapq.heappushpop(heap, 3)
    numbers = [3, 1, 2]
    heapq.heapify(numbers)
    return (x * smallest, heap, replaced, pushed, numbers, heapq.nlargest(2, [1, 5, 3]),
            heapq.nsmallest(2, [4, 1, 3], key=lambda v: -v), list(heapq.merge([1, 4], [2, 3])))


def use_deque(x):
    d = collections.deque([1, 2, 3], maxlen=4)
    d.append(x)
    d.appendleft(x * 2)
    d.rotate(1)
    d.extend([7])
    d.extendleft([8])
    numbers = collections.deque([1, 2, 1])
    numbers.insert(1, 5)
    numbers.remove(1)
    numbers.reverse()
    return (d, d.maxlen, len(d), d[0] + 1, d.pop(), d.popleft(), numbers, numbers.count(1),
            numbers.index(5))


def use_ordered_dict(x):
    o = collections.OrderedDict(a=1, b=x)
    o["c"] = x + 1
    o.move_to_end("a")
    o.move_to_end("c", last=False)
    return o, o.popitem(), o.copy()


def use_defaultdict(x):
    groups = collections.defaultdict(list)
    groups["a"].append(x)
    groups["b"].append(x + 1)
    counts = collections.defaultdict(int)
    counts["z"] += 2
    return groups, counts, groups.default_factory is list


def use_copy(x):
    nested = [1, [2, 3], {"k": (4, [5])}]
    deep = copy.deepcopy(nested)
    deep[1].append(9)
    shallow = copy.copy(nested)
    shallow.append(0)
    return nested, deep, shallow, x + 1, copy.copy(collections.deque([1], 3))


COMPILED = [
    (use_sum, (torch.ones(3),)),
    (use_all_any, (torch.ones(3),)),
    (use_enumerate, (torch.ones(3),)),
    (use_zip_map, (torch.ones(3),)),
    (use_min_max, (torch.ones(3),)),
    (use_chain, (torch.ones(3),)),
    (use_chain_from_iterable, (torch.ones(3),)),
    (use_product, (torch.ones(3),)),
    (use_islice, (torch.ones(3),)),
    (use_accumulate, (torch.ones(3),)),
    (use_zip_longest, (torch.ones(3),)),
    (use_repeat, (torch.ones(3),)),
    (use_count, (torch.ones(3),)),
    (use_takewhile_dropwhile, (torch.ones(3),)),
    (use_starmap_compress_pairwise, (torch.ones(3),)),
    (use_reduce, (torch.ones(3),)),
    (use_partial, (torch.ones(3),)),
    (use_partial_argument, (torch.ones(3), functools.partial(torch.add, other=2))),
    (use_getters, (torch.ones(2, 3),)),
    (use_heapq, (torch.ones(3),)),
    (use_deque, (torch.ones(3),)),
    (use_ordered_dict, (torch.ones(3),)),
    (use_defaultdict, (torch.ones(3),)),
    (use_copy, (torch.ones(3),)),
]


def same(eager, compiled):
    assert type(compiled) is type(eager)
    if isinstance(eager, torch.Tensor):
        torch.testing.assert_close(compiled, eager)
    elif isinstance(eager, (tuple, list, collections.deque)):
        assert len(compiled) == len(eager)
        for e, c in zip(eager, compiled):
            same(e, c)
        if isinstance(eager, collections.deque):
            assert compiled.maxlen == eager.maxlen
    elif isinstance(eager, dict):
        assert list(compiled) == list(eager)
        for key in eager:
            same(eager[key], compiled[key])
        if isinstance(eager, collections.defaultdict):
            assert compiled.default_factory is eager.default_factory
    elif isinstance(eager, (functools.partial, operator.itemgetter)):
        assert repr(compiled) == repr(eager)
    else:
        assert compiled == eager


@pytest.mark.parametrize("fn, args", COMPILED, ids=[row[0].__name__ for row in COMPILED])
def test_polyfill_in_a_compiled_function(fn, args):
    counter = CompileCounter()
    compiled = graphlift.compile(fn, backend=counter, fullgraph=True)
    same(fn(*args), compiled(*args))
    same(fn(*args), compiled(*args))  # a cache hit gives the same
    assert counter.frame_count == 1
    graphlift.reset()
    with config.patch(use_polyfills=False), pytest.raises(graphlift.Unsupported):
        graphlift.compile(fn, backend=CompileCounter(), fullgraph=True)(*args)


def test_without_fullgraph_the_unpolyfilled_function_breaks_and_still_agrees():
    with config.patch(use_polyfills=False):
        result = graphlift.explain(use_heapq)(torch.ones(3))
    assert result.graph_break_count >= 1
    assert any("heappush" in str(reason) for reason in result.break_reasons)
    same(use_heapq(torch.ones(3)), graphlift.compile(use_heapq)(torch.ones(3)))


def test_infinite_iterators_must_be_bounded():
    def unbounded(x):
        return x * len(list(itertools.count()))

    with pytest.raises(graphlift.Unsupported, match="never ends"):
        graphlift.compile(unbounded, fullgraph=True)(torch.ones(2))


def test_deque_from_the_inputs_is_read_and_not_mutated():
    def read(x, d):
        return x * d[0] + len(d), list(d), d.maxlen

    d = collections.deque([2, 3], maxlen=5)
    counter = CompileCounter()
    compiled = graphlift.compile(read, backend=counter, fullgraph=True)
    same(read(torch.ones(2), d), compiled(torch.ones(2), d))
    assert counter.frame_count == 1

    def mutate(x, d):
        d.append(x)
        return x + 1

    with pytest.raises(graphlift.Unsupported, match="mutating the deque"):
        graphlift.compile(mutate, fullgraph=True)(torch.ones(2), collections.deque([1]))


def test_polyfill_errors_are_the_originals():
    def pops(x):
        return x * heapq.heappop([])

    for fn in (pops,):
        with pytest.raises(IndexError, match="index out of range"):
            graphlift.compile(fn)(torch.ones(2))


# -- torch's associative_scan (a higher-order op over a Python function) ---------------------


def _scan_pair(left, right):  # the selective-scan step of transformers' Mamba
    return left[0] * right[0], right[0] * left[1] + right[1]


def _scan(reverse):
    from torch._higher_order_ops.associative_scan import associative_scan

    def f(a, b):
        return associative_scan(_scan_pair, (a, b), dim=2, reverse=reverse,
                                combine_mode="generic")

    return f


def _torch_compile_scan(reverse: bool) -> dict:
    """torch.compile's graphs for the scan."""
    import torch._dynamo.testing

    torch.manual_seed(0)
    a, b = torch.rand(2, 3, 6), torch.randn(2, 3, 6)
    theirs = torch._dynamo.testing.CompileCounter()
    torch.compile(_scan(reverse), backend=theirs)(a, b)
    return {"graphs": theirs.frame_count}


for _reverse in (False, True):
    measure(f"polyfills/associative_scan/reverse={_reverse}",
            functools.partial(_torch_compile_scan, _reverse))


@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_is_unrolled_into_one_graph(reverse):
    f = _scan(reverse)
    a, b = torch.rand(2, 3, 6), torch.randn(2, 3, 6)
    eager = f(a, b)
    ours = CompileCounter()
    compiled = graphlift.compile(f, backend=ours)(a, b)
    assert all(torch.allclose(e, c, atol=1e-6) for e, c in zip(eager, compiled))
    theirs = recorded(f"polyfills/associative_scan/reverse={reverse}")  # tests/reference
    assert ours.frame_count == theirs["graphs"] == 1


def test_associative_scan_keeps_the_ops_errors():
    from torch._higher_order_ops.associative_scan import associative_scan

    def f(a):
        return associative_scan(lambda x, y: x + y, a, 0, combine_mode="pointwise")  # on CPU

    a = torch.ones(4)
    with pytest.raises(ValueError) as eager:
        f(a)
    with pytest.raises(ValueError) as compiled:
        graphlift.compile(f)(a)
    assert str(eager.value) == str(compiled.value)
    assert torch.equal(pf_compiler.associative_scan(lambda x, y: x + y, a, 0,
                                                    combine_mode="generic"), torch.cumsum(a, 0))
