"""Corpus: data. Tuples, lists, dicts, sets, namedtuples, dataclasses and user classes built in the
frame; unpacking; slicing; ``in``; container methods; f-strings, ``%`` and ``format``; conversions
of constants. Each function also does tensor work, so each gives one graph.

PYTEST_DONT_REWRITE: pytest must not rewrite the ``assert`` statements of the corpus functions;
they are user code under test, compiled exactly as CPython compiles them.
"""

import collections
import dataclasses
import typing

import pytest
import torch
from corpus.harness import R, case, case_ids, run_case

Pair = collections.namedtuple("Pair", ["a", "b"])
Triple = collections.namedtuple("Triple", "x y z", defaults=(0,))


class Span(typing.NamedTuple):
    start: int
    stop: int = 10

    def width(self):
        return self.stop - self.start


@dataclasses.dataclass
class Config:
    scale: float = 2.0
    shift: int = 1
    tags: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Frozen:
    k: int
    name: str = "f"


@dataclasses.dataclass
class TensorPair:
    left: torch.Tensor
    right: torch.Tensor

    def total(self):
        return self.left + self.right


class Holder:
    pass


class Counter:
    def __init__(self):
        self.count = 0
        self.history = []

    def bump(self, v):
        self.count += 1
        self.history.append(v)


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


# -- tuples ------------------------------------------------------------------------------------
def tuple_build_index(x):
    t = (x, x * 2, 3)
    return t[1] + t[-1], len(t)


def tuple_concat_repeat(x):
    t = (1, 2) + (3,)
    return x * len(t * 2), t * 2


def tuple_count_index(x):
    t = (1, 2, 2, 3)
    return x + t.count(2) + t.index(3)


def tuple_nested_return(x):
    return (x, (x + 1, (x + 2, "leaf")), None)


def tuple_mixed_types(x):
    return x.sum(), 3, 2.5, "s", True, None, torch.float32


def tuple_compare(x):
    return x * ((1, 2) == (1, 2)), (1, 2) != (2, 1)


def tuple_from_list(xs):
    t = tuple(xs)
    return t[0] * 2, type(t).__name__


# -- lists -------------------------------------------------------------------------------------
def list_methods_grow(x):
    items = [1]
    items.append(2)
    items.extend([3, 4])
    items.insert(0, 0)
    return x * sum(items), items


def list_methods_shrink(x):
    items = [5, 6, 7, 8, 9]
    last = items.pop()
    first = items.pop(0)
    items.remove(7)
    return x + last + first, items


def list_methods_order(x):
    items = [3, 1, 2]
    items.sort()
    rev = [1, 2, 3]
    rev.reverse()
    desc = [4, 9, 1]
    desc.sort(reverse=True)
    return x * items[0], items, rev, desc


def list_methods_query(x):
    items = [1, 2, 2, 3]
    return x * items.count(2) + items.index(3), items.copy()


def list_clear(x):
    items = [x, x]
    items.clear()
    return x * len(items), items


def list_of_tensors_methods(x):
    items = [x]
    items.append(x * 2)
    items.insert(0, x + 1)
    return torch.stack(items), items.pop()


def list_concat_repeat(x):
    a = [x] + [x * 2]
    b = [0] * 3
    return a, b


def list_setitem(x):
    items = [1, 2, 3]
    items[1] = 20
    items[-1] = x
    return items, x * items[1]


def list_slice_assign(x):
    items = [0, 1, 2, 3, 4]
    items[1:3] = [x, x * 2]
    return items


def list_del_item(x):
    items = [x, x * 2, x * 3]
    del items[1]
    return items


def list_del_slice(x):
    items = [0, 1, 2, 3, 4, 5]
    del items[::2]
    return x * sum(items), items


def list_inplace_add(x):
    items = [x]
    items += [x * 2]
    items *= 2
    return items


def list_sort_key(x):
    words = ["ccc", "a", "bb"]
    words.sort(key=len)
    return x * len(words[0]), words


def list_nested_mutation(x):
    grid = [[0, 0], [0, 0]]
    grid[1][0] = 5
    return x * grid[1][0], grid


def list_argument_append(xs):
    xs.append(xs[0] * 2)
    return len(xs)


def list_argument_setitem(xs):
    xs[0] = xs[0] + 1
    return xs[1] * 2


def list_argument_pop(xs):
    last = xs.pop()
    return last * 3


def list_argument_clear_extend(xs):
    total = xs[0] + xs[1]
    xs.clear()
    xs.extend([total, total * 2])
    return total


def list_copy_is_independent(xs):
    ys = list(xs)
    ys.append(xs[0])
    return len(xs), len(ys), ys[-1] * 2


def list_equality(x):
    return x * ([1, 2] == [1, 2]), [1] < [2]


# -- dicts -------------------------------------------------------------------------------------
def dict_build_get(x):
    d = {"a": x, "b": 2}
    return d["a"] * d.get("b") + d.get("c", 5)


def dict_setdefault_update(x):
    d = {"a": 1}
    d.setdefault("b", 2)
    d.setdefault("a", 100)
    d.update({"c": 3}, e=5)
    d.update(f=6)
    return x * sum(d.values()), d


def dict_pop_popitem(x):
    d = {"a": 1, "b": 2, "c": 3}
    a = d.pop("a")
    missing = d.pop("zz", 10)
    key, value = d.popitem()
    return x + a + missing + value, key, d


def dict_views(x):
    d = {"b": 2, "a": 1}
    return x * len(d), list(d.keys()), list(d.values()), list(d.items())


def dict_contains_and_del(x):
    d = {"a": x, "b": x * 2}
    del d["a"]
    return "a" in d, "b" in d, d


def dict_constructor_kwargs(x):
    d = dict(a=1, b=2)
    return x * d["b"], d


def dict_from_zip(x):
    d = dict(zip(["a", "b"], [x, x * 2]))
    return d


def dict_from_pairs(x):
    d = dict([("k", 1), ("v", 2)])
    return x + d["v"], d


def dict_merge_operator(x):
    a = {"a": 1, "b": 2}
    b = {"b": 3, "c": x + 1}
    return a | b


def dict_update_operator(x):
    a = {"a": x}
    a |= {"b": x * 2}
    return a


def dict_unpack_literal(x):
    a = {"a": 1}
    return {**a, "b": x.cos(), **{"c": 3}}


def dict_copy(x):
    a = {"a": x}
    b = a.copy()
    b["b"] = x * 2
    return a, b


def dict_nested(x):
    d = {"outer": {"inner": [x, {"leaf": x * 2}]}}
    d["outer"]["inner"][1]["leaf2"] = 3
    return d


def dict_int_and_tuple_keys(x):
    d = {1: x, (2, 3): x * 2, None: 0}
    return d[1] + d[(2, 3)], list(d)


def dict_insertion_order(x):
    d = {}
    d["z"] = 1
    d["a"] = 2
    d["m"] = 3
    del d["a"]
    d["a"] = 4
    return x * len(d), list(d)


def dict_argument_setitem(d):
    d["new"] = d["x"] * 2
    return len(d)


def dict_argument_pop(d):
    v = d.pop("x")
    return v + 1


def dict_argument_update(d):
    d.update(y=d["x"].sum())
    return list(d)


def dict_fromkeys(x):
    d = dict.fromkeys(["a", "b"], 0)
    return x * len(d), d


def dict_equality(x):
    return x * ({"a": 1} == {"a": 1}), {"a": 1} != {"a": 2}


# -- sets --------------------------------------------------------------------------------------
def set_build_add(x):
    s = {1, 2}
    s.add(3)
    s.add(1)
    return x * len(s), s


def set_from_list(x):
    s = set([1, 2, 2, 3, 3, 3])
    return x * len(s), sorted(s)


def set_operators(x):
    a = {1, 2, 3}
    b = {2, 3, 4}
    return x * len(a | b), a & b, a - b, a ^ b


def set_methods(x):
    a = {1, 2, 3}
    a.discard(2)
    a.discard(10)
    a.remove(1)
    b = a.union({7}).intersection({3, 7})
    return x + len(b), b, a.issubset({3, 4}), a.isdisjoint({5})


def set_update(x):
    s = {1}
    s.update([2, 3], (4,))
    s |= {5}
    return x * len(s), s


def set_contains(x, k):
    s = {"a", "b"}
    if k in s:
        return x + 1
    return x


def set_unpack_literal(x):
    s = {*[1, 2], *(2, 3)}
    return x * len(s), s


def frozenset_ops(x):
    f = frozenset([1, 2, 3])
    return x * len(f), f, 2 in f


def set_of_shapes(x, y):
    shapes = {x.shape, y.shape}
    return len(shapes), x + y


def set_pop_and_clear(x):
    s = {5}
    v = s.pop()
    s.clear()
    return x * v, s


# -- namedtuples -------------------------------------------------------------------------------
def namedtuple_build(x):
    p = Pair(x, 2)
    return p.a * p.b


def namedtuple_keywords_and_index(x):
    p = Pair(b=3, a=x)
    return p[0] + p[1]


def namedtuple_unpack(x):
    a, b = Pair(x, x * 2)
    return a + b


def namedtuple_return(x):
    return Pair(x.sin(), x.cos())


def namedtuple_defaults(x):
    t = Triple(1, 2)
    return x * (t.x + t.y + t.z), t


def namedtuple_replace(x):
    p = Pair(1, 2)._replace(b=5)
    return x * p.b, p


def namedtuple_asdict_fields(x):
    p = Pair(1, 2)
    return x + len(Pair._fields), p._asdict()


def namedtuple_argument(p):
    return p.a + p.b, len(p), p[1] * 2


def typing_namedtuple(x):
    s = Span(2)
    return x * s.width(), s


def namedtuple_isinstance(x):
    p = Pair(1, 2)
    return x * isinstance(p, tuple), len(p)


# -- dataclasses -------------------------------------------------------------------------------
def dataclass_build(x):
    c = Config()
    return x * c.scale + c.shift


def dataclass_keywords(x):
    c = Config(shift=5, scale=0.5)
    return x * c.scale + c.shift


def dataclass_mutate(x):
    c = Config()
    c.scale = 3.0
    c.tags.append("t")
    return x * c.scale, c.tags


def dataclass_return(x):
    return Config(scale=2.0, tags=[x.exp()])


def dataclass_frozen(x):
    f = Frozen(3)
    return x * f.k, f.name


def dataclass_equality(x):
    return x * (Frozen(1) == Frozen(1)), Frozen(1) == Frozen(2)


def dataclass_replace(x):
    f = dataclasses.replace(Frozen(1), k=4)
    return x * f.k, f


def dataclass_argument(c, x):
    return x * c.scale + c.shift


def dataclass_argument_mutate(c, x):
    c.shift = 10
    return x + c.shift


def dataclass_with_tensors(x):
    p = TensorPair(x, x * 2)
    return p.total()


def dataclass_default_factory(x):
    a, b = Config(), Config()
    a.tags.append(x)
    return a.tags[0] * 2, len(b.tags)


# -- user classes created in the frame ---------------------------------------------------------
def object_attributes(x):
    h = Holder()
    h.value = x
    h.count = 2
    return h.value * h.count


def object_setattr_getattr(x):
    h = Holder()
    setattr(h, "name", 3)  # noqa: B010
    return x * getattr(h, "name"), hasattr(h, "missing")  # noqa: B009


def object_method_mutation(x):
    c = Counter()
    c.bump(x)
    c.bump(x * 2)
    return c.count, c.history


def object_return(x):
    h = Holder()
    h.t = x * 2
    h.n = 1
    return h


def object_argument_attribute_mutation(c, x):
    c.count += 1
    c.history.append(3)
    return x * c.count


def object_delete_attribute(x):
    h = Holder()
    h.a = 1
    h.b = x
    del h.a
    return h.b * 2, hasattr(h, "a")


def object_slots(x):
    s = Slotted(x, 2)
    s.b = 3
    return s.a * s.b


def object_identity(x):
    a = Holder()
    b = a
    c = Holder()
    return x * (a is b), a is c, a is not c


# -- unpacking ---------------------------------------------------------------------------------
def unpack_tuple(x):
    a, b = x, 2
    return a * b


def unpack_swap(x, y):
    x, y = y, x
    return x - y


def unpack_starred_tail(x):
    a, *rest = [x, 1, 2, 3]
    return a + sum(rest), rest


def unpack_starred_head(x):
    *init, last = (1, 2, x)
    return last * len(init), init


def unpack_starred_middle(x):
    first, *middle, last = range(6)
    return x * first + last, middle


def unpack_starred_empty(x):
    a, *rest, b = [x, x * 2]
    return a + b, rest


def unpack_nested(x):
    a, (b, c) = x, (1, 2)
    (d, e), f = [3, 4], 5
    return a * b + c + d + e + f


def unpack_nested_star(x):
    a, (b, *c) = 1, [x, 2, 3]
    return b * a, c


def unpack_tensor(x):
    a, b = x
    return a - b


def unpack_dict_keys(x):
    k1, k2 = {"p": 1, "q": 2}
    return x + len(k1 + k2), k1, k2


def unpack_string(x):
    a, b, c = "xyz"
    return x * len(a + b + c), c


def unpack_star_in_literals(xs):
    a = [*xs, xs[0] * 2]
    b = (*xs, 1)
    return a, b


def unpack_shape(x):
    rows, cols = x.shape
    return x.reshape(cols, rows)


def unpack_in_for(x):
    total = x
    for (a, b), c in [((1, 2), 3), ((4, 5), 6)]:
        total = total + a * b - c
    return total


# -- slicing -----------------------------------------------------------------------------------
def slice_list(x):
    items = [0, 1, 2, 3, 4, 5]
    return x * len(items[1:]), items[::-1], items[::2], items[-2:], items[1:-1:2]


def slice_tuple(x):
    t = (x, x * 2, x * 3)
    return t[1:], t[:-1]


def slice_string(x):
    s = "graphlift"
    return x * len(s[:5]), s[5:], s[::-1], s[-4:]


def slice_object(x):
    items = [0, 1, 2, 3]
    s = slice(1, 3)
    return x * sum(items[s]), items[s], s.start


def slice_list_of_tensors(xs):
    return torch.cat(xs[1:]), xs[:1]


def slice_from_shape(x):
    return x[: x.shape[0] // 2], x.shape[1:]


# -- membership --------------------------------------------------------------------------------
def in_list(x, n):
    return x * (n in [1, 2, 3]), n not in [4, 5]


def in_string(x):
    return x * ("lift" in "graphlift"), "z" in "abc"


def in_dict(x, d):
    return x * ("a" in d), "missing" not in d


def in_tuple_of_types(x):
    return x * (type(x) in (torch.Tensor, list)), int in (float, str)


def in_range(x, n):
    return x * (n in range(0, 10, 2))


# -- strings, f-strings, % and format ----------------------------------------------------------
def string_methods(x):
    s = "a,b,c"
    parts = s.split(",")
    joined = "-".join(parts).upper()
    return x * len(parts), joined, s.startswith("a"), s.replace(",", ";"), "  p ".strip()


def string_find_and_case(x):
    s = "Hello World"
    return x * s.find("o"), s.lower(), s.title(), s.count("l"), s.endswith("ld")


def fstring_basic(x, n, name):
    key = f"{name}_{n}"
    return {key: x * n}


def fstring_format_spec(x):
    return x + 1, f"{3.14159:.2f}", f"{7:03d}", f"{'ab'!r}", f"{255:x}", f"{'c':>3}"


def fstring_shape(x):
    return x.sum(), f"shape={tuple(x.shape)} dtype={x.dtype}"


def percent_format(x, n):
    return x * n, "%d-%s" % (n, "a"), "%.3f" % 2.5, "%(k)s" % {"k": "v"}  # noqa: UP031


def str_format_method(x):
    return x + 1, "{}_{}".format(1, 2), "{b}{a}".format(a=1, b=2), "{0:>4}".format("r")  # noqa: UP030, UP032


def builtin_format(x):
    return x * 2, format(3.5, ".1f"), format(10, "b"), format("s", "^5")


def string_concat_multiply(x):
    s = "ab" + "cd"
    s += "!"
    return x * len(s * 2), s * 2


def string_as_dict_key(x):
    d = {}
    for i in range(3):
        d["layer" + str(i)] = x * i
    return d


# -- conversions of constants ------------------------------------------------------------------
def convert_to_str(x):
    return x + 1, str(3), str(2.5), str(True), str(None), repr("q"), str([1, (2,)])


def convert_to_int(x):
    return x * int("4"), int(3.9), int(-3.9), int(True), int("ff", 16)


def convert_to_float(x):
    return x * float("2.5"), float(2), float("inf") > 1e308, float(False)


def convert_to_bool(x):
    return x + 1, bool(0), bool(""), bool([1]), bool("0"), bool(None), bool(0.0)


def convert_shape_items(x):
    return x.reshape(int(x.numel())), float(x.shape[0]), str(x.shape[0])


def convert_containers(x):
    return x + 1, list("ab"), tuple([1, 2]), list(range(3)), dict(a=1), list({"k": 1})


CASES = [
    case(tuple_build_index, R(3)),
    case(tuple_concat_repeat, R(3)),
    case(tuple_count_index, R(3)),
    case(tuple_nested_return, R(3)),
    case(tuple_mixed_types, R(3)),
    case(tuple_compare, R(3)),
    case(tuple_from_list, [R(3), R(3)]),
    case(list_methods_grow, R(3)),
    case(list_methods_shrink, R(3)),
    case(list_methods_order, R(3)),
    case(list_methods_query, R(3)),
    case(list_clear, R(3)),
    case(list_of_tensors_methods, R(3)),
    case(list_concat_repeat, R(3)),
    case(list_setitem, R(3)),
    case(list_slice_assign, R(3)),
    case(list_del_item, R(3)),
    case(list_del_slice, R(3)),
    case(list_inplace_add, R(3)),
    case(list_sort_key, R(3)),
    case(list_nested_mutation, R(3)),
    case(list_argument_append, [R(3), R(3)]),
    case(list_argument_setitem, [R(3), R(3)]),
    case(list_argument_pop, [R(3), R(3)]),
    case(list_argument_clear_extend, [R(3), R(3)]),
    case(list_copy_is_independent, [R(3), R(3)]),
    case(list_equality, R(3)),
    case(dict_build_get, R(3)),
    case(dict_setdefault_update, R(3)),
    case(dict_pop_popitem, R(3)),
    case(dict_views, R(3)),
    case(dict_contains_and_del, R(3)),
    case(dict_constructor_kwargs, R(3)),
    case(dict_from_zip, R(3)),
    case(dict_from_pairs, R(3)),
    case(dict_merge_operator, R(3)),
    case(dict_update_operator, R(3)),
    case(dict_unpack_literal, R(3)),
    case(dict_copy, R(3)),
    case(dict_nested, R(3)),
    case(dict_int_and_tuple_keys, R(3)),
    case(dict_insertion_order, R(3)),
    case(dict_argument_setitem, {"x": R(3)}),
    case(dict_argument_pop, {"x": R(3), "y": 1}),
    case(dict_argument_update, {"x": R(3)}),
    case(dict_fromkeys, R(3)),
    case(dict_equality, R(3)),
    case(set_build_add, R(3)),
    case(set_from_list, R(3)),
    case(set_operators, R(3)),
    case(set_methods, R(3)),
    case(set_update, R(3)),
    case(set_contains, R(3), "a"),
    case(set_unpack_literal, R(3)),
    case(frozenset_ops, R(3)),
    case(set_of_shapes, R(3), R(3)),
    case(set_pop_and_clear, R(3)),
    case(namedtuple_build, R(3)),
    case(namedtuple_keywords_and_index, R(3)),
    case(namedtuple_unpack, R(3)),
    case(namedtuple_return, R(3)),
    case(namedtuple_defaults, R(3)),
    case(namedtuple_replace, R(3)),
    case(namedtuple_asdict_fields, R(3)),
    case(namedtuple_argument, Pair(R(3), R(3))),
    case(typing_namedtuple, R(3)),
    case(namedtuple_isinstance, R(3)),
    case(dataclass_build, R(3)),
    case(dataclass_keywords, R(3)),
    case(dataclass_mutate, R(3)),
    case(dataclass_return, R(3)),
    case(dataclass_frozen, R(3)),
    case(dataclass_equality, R(3)),
    case(dataclass_replace, R(3)),
    case(dataclass_argument, Config(scale=3.0), R(3)),
    case(dataclass_argument_mutate, Config(), R(3)),
    case(dataclass_with_tensors, R(3)),
    case(dataclass_default_factory, R(3)),
    case(object_attributes, R(3)),
    case(object_setattr_getattr, R(3)),
    case(object_method_mutation, R(3)),
    case(object_return, R(3)),
    case(object_argument_attribute_mutation, Counter(), R(3)),
    case(object_delete_attribute, R(3)),
    case(object_slots, R(3)),
    case(object_identity, R(3)),
    case(unpack_tuple, R(3)),
    case(unpack_swap, R(3), R(3)),
    case(unpack_starred_tail, R(3)),
    case(unpack_starred_head, R(3)),
    case(unpack_starred_middle, R(3)),
    case(unpack_starred_empty, R(3)),
    case(unpack_nested, R(3)),
    case(unpack_nested_star, R(3)),
    case(unpack_tensor, R(2, 3)),
    case(unpack_dict_keys, R(3)),
    case(unpack_string, R(3)),
    case(unpack_star_in_literals, [R(3), R(3)]),
    case(unpack_shape, R(2, 3)),
    case(unpack_in_for, R(3)),
    case(slice_list, R(3)),
    case(slice_tuple, R(3)),
    case(slice_string, R(3)),
    case(slice_object, R(3)),
    case(slice_list_of_tensors, [R(2), R(3), R(4)]),
    case(slice_from_shape, R(4, 2)),
    case(in_list, R(3), 2),
    case(in_string, R(3)),
    case(in_dict, R(3), {"a": 1}),
    case(in_tuple_of_types, R(3)),
    case(in_range, R(3), 4),
    case(string_methods, R(3)),
    case(string_find_and_case, R(3)),
    case(fstring_basic, R(3), 2, "w"),
    case(fstring_format_spec, R(3)),
    case(fstring_shape, R(2, 3)),
    case(percent_format, R(3), 4),
    case(str_format_method, R(3)),
    case(builtin_format, R(3)),
    case(string_concat_multiply, R(3)),
    case(string_as_dict_key, R(3)),
    case(convert_to_str, R(3)),
    case(convert_to_int, R(3)),
    case(convert_to_float, R(3)),
    case(convert_to_bool, R(3)),
    case(convert_shape_items, R(2, 3)),
    case(convert_containers, R(3)),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_data(case):
    run_case(case)
