"""Corpus: builtins. ``len``, ``range``, ``isinstance``, ``issubclass``, ``type``, ``getattr``,
``setattr``, ``hasattr``, ``min``, ``max``, ``sum``, ``abs``, ``all``, ``any``, ``zip``,
``enumerate``, ``map``, ``filter``, ``sorted``, ``round``, ``divmod``, ``pow``, ``id``,
``callable``, ``iter``/``next``, and ``math``/``operator`` functions on constants.

PYTEST_DONT_REWRITE: pytest must not rewrite the ``assert`` statements of the corpus functions;
they are user code under test, compiled exactly as CPython compiles them.
"""

import collections
import math
import operator

import pytest
import torch
from corpus.harness import R, case, case_ids, run_case

Pair = collections.namedtuple("Pair", "a b")


class Animal:
    legs = 4


class Bird(Animal):
    legs = 2

    def __init__(self):
        self.name = "tweety"


def plain_function(v):
    return v + 1


# -- len and range -----------------------------------------------------------------------------
def len_of_containers(x):
    return x * len([1, 2]), len((1,)), len({"a": 1}), len("abc"), len({1, 2, 3}), len(range(5))


def len_of_tensor(x):
    return x * len(x), len(x.shape)


def len_of_argument_list(xs):
    return xs[0] * len(xs)


def range_to_list(x):
    r = list(range(2, 11, 4))
    return x * r[-1], r


def range_indexing(x):
    r = range(10, 0, -3)
    return x + r[1], len(r), r[-1], 4 in r


def range_from_shape(x):
    return [x[i] * i for i in range(x.shape[0])]


# -- isinstance, issubclass, type ----------------------------------------------------------------
def isinstance_tensor(x):
    return x * isinstance(x, torch.Tensor), isinstance(x, (int, float))


def isinstance_constants(x, n):
    return x * isinstance(n, int), isinstance(n, bool), isinstance(True, int), isinstance(n, str)


def isinstance_user_class(x):
    b = Bird()
    return x * isinstance(b, Animal), isinstance(b, (str, Bird)), isinstance(Animal(), Bird)


def isinstance_containers(x, items):
    return x * isinstance(items, list), isinstance(Pair(1, 2), tuple), isinstance({}, dict)


def issubclass_builtin(x):
    return x * issubclass(Bird, Animal), issubclass(bool, int), issubclass(int, (str, float))


def type_checks(x, n):
    return x * (type(x) is torch.Tensor), type(n) is int, type(n) == float  # noqa: E721


def type_name(x):
    return x + 1, type(Bird()).__name__, type(3).__name__, type(x).__name__  # noqa: UP003


def type_call_constructor(x):
    kind = type([1])
    items = kind((1, 2))
    return x * len(items), items


# -- getattr, setattr, hasattr -----------------------------------------------------------------
def getattr_object(x):
    b = Bird()
    return x * getattr(b, "legs"), getattr(b, "name"), getattr(b, "wings", 0)  # noqa: B009


def getattr_torch_function(x):
    return getattr(torch, "sin")(x)  # noqa: B009


def getattr_tensor(x, name):
    return getattr(x, name)


def getattr_method_name(x):
    return getattr(x, "relu")() + 1  # noqa: B009


def setattr_object(x):
    b = Bird()
    setattr(b, "name", "polly")  # noqa: B010
    setattr(b, "t", x * 2)  # noqa: B010
    return b.t, b.name


def hasattr_checks(x):
    b = Bird()
    return x * hasattr(b, "name"), hasattr(b, "missing"), hasattr(x, "shape"), hasattr(3, "real")


# -- min, max, sum, abs ------------------------------------------------------------------------
def min_max_constants(x):
    return x * max(1, 5, 3), min([4, 2, 8]), max("abc"), min(3, 1.5)


def min_max_key_default(x):
    words = ["bb", "a", "ccc"]
    return x * len(max(words, key=len)), min(words, key=len), max([], default=7)


def min_max_shape(x):
    return x * max(x.shape), min(x.shape)


def sum_of_constants(x):
    return x * sum([1, 2, 3]), sum((0.5, 0.25)), sum([], 10), sum(range(4))


def sum_of_tensors(xs):
    return sum(xs), sum(xs, xs[0])


def abs_constants(x):
    return x * abs(-3), abs(-2.5), abs(4)


def abs_tensor(x):
    return abs(x)


# -- all, any ----------------------------------------------------------------------------------
def all_any_constants(x):
    return x * all([1, 2]), any([0, 0]), all([]), any([0, "a"])


def all_any_shapes(xs):
    same = all(t.shape == xs[0].shape for t in xs)
    has_2d = any(t.dim() == 2 for t in xs)
    return xs[0] * same, has_2d


# -- zip, enumerate, map, filter, sorted, reversed ---------------------------------------------
def zip_to_list(x):
    pairs = list(zip([1, 2, 3], "abc"))
    return x * len(pairs), pairs


def zip_unequal_lengths(x):
    return x + len(list(zip(range(5), [1, 2]))), dict(zip("ab", [1, 2]))


def zip_star_transpose(x):
    cols = list(zip(*[(1, 2), (3, 4), (5, 6)]))
    return x * cols[0][2], cols


def enumerate_to_list(x):
    return x + 1, list(enumerate("ab")), list(enumerate([5, 6], 10))


def map_builtin(x):
    return x + 1, list(map(str, [1, 2])), list(map(abs, (-1, 2)))


def map_two_iterables(x):
    return x * sum(map(operator.mul, [1, 2], [3, 4]))


def map_over_tensors(xs):
    return list(map(torch.sin, xs))


def map_user_function(xs):
    return tuple(map(plain_function, xs))


def filter_none(x):
    return x * len(list(filter(None, [0, 1, "", 2]))), list(filter(None, [0, 1]))


def filter_lambda(x):
    evens = list(filter(lambda v: v % 2 == 0, range(7)))
    return x * len(evens), evens


def sorted_constants(x):
    return x + 1, sorted([3, 1, 2]), sorted("cab", reverse=True), sorted({"b": 1, "a": 2})


def sorted_key(x):
    return x * 2, sorted(["bb", "a", "ccc"], key=len), sorted([(1, "b"), (0, "z")])


def reversed_builtin(x):
    return x + 1, list(reversed([1, 2, 3])), tuple(reversed((4, 5))), "".join(reversed("ab"))


# -- round, divmod, pow ------------------------------------------------------------------------
def round_constants(x):
    return x * round(2.567, 2), round(2.5), round(3.5), round(7), round(1234, -2)


def round_tensor(x):
    return round(x)


def divmod_constants(x):
    q, r = divmod(17, 5)
    return x * q + r, divmod(-7, 2), divmod(7.5, 2)


def pow_constants(x):
    return x * pow(2, 3), pow(2, 10, 7), pow(4, 0.5), 2 ** -1


def pow_tensor(x):
    return pow(x, 2), pow(2, x)


# -- id, callable, iter/next -------------------------------------------------------------------
def id_identity(x):
    a = [1]
    b = a
    c = [1]
    return x * (id(a) == id(b)), id(a) == id(c)


def callable_checks(x):
    return x * callable(plain_function), callable(3), callable(torch.sin), callable(Bird)


def iter_next(x):
    it = iter([x, x * 2, x * 3])
    first = next(it)
    second = next(it)
    return first + second


def next_default(x):
    it = iter([1])
    a = next(it)
    b = next(it, 42)
    return x * a + b


def iter_over_dict(x):
    it = iter({"k": 1, "j": 2})
    return x * len(next(it)), next(it)


def iter_range_manual(x):
    it = iter(range(3))
    total = 0
    for v in it:
        total += v
    return x * total


# -- other builtins on constants ---------------------------------------------------------------
def chr_ord_hex_bin(x):
    return x * ord("a"), chr(98), hex(255), bin(5), oct(8)


def hash_of_constants(x):
    return x * (hash(3) == hash(3)), hash((1, 2)) == hash((1, 2))


def min_of_generator(x):
    return x * min(i * i - 4 * i for i in range(5))


def bool_int_float_str_of_shape(x):
    n = x.shape[0]
    return x * bool(n), int(n) + 1, float(n) / 2, str(n) + "!"


def slice_builtin(x):
    s = slice(None, None, 2)
    return x[s], s.step


# -- math on constants -------------------------------------------------------------------------
def math_sqrt_floor_ceil(x):
    return x * math.sqrt(16), math.floor(2.7), math.ceil(2.1), math.trunc(-2.7)


def math_constants(x):
    return x * math.pi, math.e, math.inf > 10, math.isnan(math.nan), math.tau


def math_log_exp(x):
    return x * math.log(math.e), math.exp(0), math.log2(8), math.log10(1000), math.log(8, 2)


def math_trig(x):
    return x * math.cos(0), math.sin(0), math.radians(180), math.degrees(math.pi), math.atan2(1, 1)


def math_integer_functions(x):
    return x * math.gcd(12, 18), math.factorial(5), math.prod([1, 2, 3]), math.comb(5, 2)


def math_float_checks(x):
    return x * math.isclose(0.1 + 0.2, 0.3), math.isfinite(1.0), math.copysign(2, -1), math.fabs(-2)


def math_of_shape(x):
    return x.reshape(int(math.sqrt(x.numel())), -1), math.prod(x.shape)


def math_hypot_fsum(x):
    return x * math.hypot(3, 4), math.fsum([0.1] * 10), math.modf(2.5), math.frexp(8.0)


# -- operator on constants and tensors ---------------------------------------------------------
def operator_arithmetic(x):
    return operator.add(x, 1), operator.mul(2, 3), operator.sub(5, 7), operator.truediv(1, 4)


def operator_comparisons(x):
    return x * operator.lt(1, 2), operator.eq("a", "a"), operator.ge(2, 3), operator.not_(0)


def operator_on_tensors(x, y):
    return operator.matmul(x, y), operator.neg(x), operator.getitem(x, 0), operator.pow(x, 2)


def operator_itemgetter(x):
    get = operator.itemgetter(1)
    get_two = operator.itemgetter(0, 2)
    return x * get([4, 5, 6]), get_two("abc")


def operator_attrgetter(x):
    get_shape = operator.attrgetter("shape")
    return x * get_shape(x)[0], operator.attrgetter("name")(Bird())


def operator_methodcaller(x):
    upper = operator.methodcaller("upper")
    return x + 1, upper("ab")


def operator_index_and_contains(x):
    return x * operator.index(3), operator.contains([1, 2], 2), operator.truth([])


def operator_inplace(x):
    y = x.clone()
    y = operator.iadd(y, 1)
    n = operator.imul(3, 4)
    return y, n


CASES = [
    case(len_of_containers, R(3)),
    case(len_of_tensor, R(3, 2)),
    case(len_of_argument_list, [R(3), R(3)]),
    case(range_to_list, R(3)),
    case(range_indexing, R(3)),
    case(range_from_shape, R(3)),
    case(isinstance_tensor, R(3)),
    case(isinstance_constants, R(3), 2),
    case(isinstance_user_class, R(3)),
    case(isinstance_containers, R(3), [1]),
    case(issubclass_builtin, R(3)),
    case(type_checks, R(3), 2),
    case(type_name, R(3)),
    case(type_call_constructor, R(3)),
    case(getattr_object, R(3)),
    case(getattr_torch_function, R(3)),
    case(getattr_tensor, R(2, 3), "T"),
    case(getattr_method_name, R(3)),
    case(setattr_object, R(3)),
    case(hasattr_checks, R(3)),
    case(min_max_constants, R(3)),
    case(min_max_key_default, R(3)),
    case(min_max_shape, R(2, 5)),
    case(sum_of_constants, R(3)),
    case(sum_of_tensors, [R(3), R(3), R(3)]),
    case(abs_constants, R(3)),
    case(abs_tensor, R(3)),
    case(all_any_constants, R(3)),
    case(all_any_shapes, [R(3), R(3)]),
    case(zip_to_list, R(3)),
    case(zip_unequal_lengths, R(3)),
    case(zip_star_transpose, R(3)),
    case(enumerate_to_list, R(3)),
    case(map_builtin, R(3)),
    case(map_two_iterables, R(3)),
    case(map_over_tensors, [R(3), R(2)]),
    case(map_user_function, [R(3), R(2)]),
    case(filter_none, R(3)),
    case(filter_lambda, R(3)),
    case(sorted_constants, R(3)),
    case(sorted_key, R(3)),
    case(reversed_builtin, R(3)),
    case(round_constants, R(3)),
    # round(tensor) raises TypeError eagerly (Tensor has no __round__); torch.compile refuses it
    # too, so the frame runs eagerly and raises the same error.
    case(round_tensor, R(3), fallback="round() of a tensor raises TypeError eagerly"),
    case(divmod_constants, R(3)),
    case(pow_constants, R(3)),
    case(pow_tensor, R(3)),
    case(id_identity, R(3), fallback="id() of an object made in the frame is a break: its "
         "address is only known when the frame runs (of an input it is a constant)"),
    case(callable_checks, R(3)),
    case(iter_next, R(3)),
    case(next_default, R(3)),
    case(iter_over_dict, R(3)),
    case(iter_range_manual, R(3)),
    case(chr_ord_hex_bin, R(3)),
    case(hash_of_constants, R(3)),
    case(min_of_generator, R(3)),
    case(bool_int_float_str_of_shape, R(3)),
    case(slice_builtin, R(5)),
    case(math_sqrt_floor_ceil, R(3)),
    case(math_constants, R(3)),
    case(math_log_exp, R(3)),
    case(math_trig, R(3)),
    case(math_integer_functions, R(3)),
    case(math_float_checks, R(3)),
    case(math_of_shape, R(4, 4)),
    case(math_hypot_fsum, R(3)),
    case(operator_arithmetic, R(3)),
    case(operator_comparisons, R(3)),
    case(operator_on_tensors, R(3, 3), R(3, 3)),
    case(operator_itemgetter, R(3)),
    case(operator_attrgetter, R(3)),
    case(operator_methodcaller, R(3)),
    case(operator_index_and_contains, R(3)),
    case(operator_inplace, R(3)),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_builtins(case):
    run_case(case)
