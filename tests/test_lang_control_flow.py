"""Corpus: control flow. Branches on values known while tracing, loops over every kind of
iterable, break/continue/else, comprehensions, generator expressions, conditional expressions,
short-circuiting, chained comparisons and ``match`` on constants, each in one graph.

PYTEST_DONT_REWRITE: pytest must not rewrite the ``assert`` statements of the corpus functions;
they are user code under test, compiled exactly as CPython compiles them.
"""

import pytest
import torch
from corpus.harness import R, case, case_ids, run_case


class Marker:
    pass


# -- if / elif / else on values known while tracing --------------------------------------------
def if_elif_else(x, n):
    if n > 0:
        return x + 1
    elif n == 0:
        return x.abs()
    else:
        return x - 1


def if_on_shape(x):
    if x.shape[0] > 2:
        return x.sum()
    return x.mean()


def if_on_dtype(x):
    if x.dtype == torch.float32:
        return x.double()
    return x.float()


def if_on_ndim(x):
    if x.ndim == 2:
        return x.t()
    return x.unsqueeze(0)


def if_on_isinstance(x, y):
    if isinstance(y, int):
        return x + y
    if isinstance(y, (list, tuple)):
        return x + len(y)
    return x * y


def if_is_none(x, y):
    if y is None:
        return x * 2
    return x + y


def if_is_not_none(x, y):
    if y is not None:
        return x + y
    return x


def if_on_len(x, items):
    if len(items) == 3:
        return x + items[2]
    return x


def if_on_bool_flag(x, *, relu):
    if relu:
        x = x.relu()
    return x + 1


def if_on_string(x, mode):
    if mode == "relu":
        return torch.relu(x)
    elif mode == "tanh":
        return torch.tanh(x)
    return x


def if_nested(x, a, b):
    if a:
        if b:
            return x * 4
        return x * 3
    return x


def if_on_requires_grad(x):
    if x.requires_grad:
        return x * 2
    return x * 3


def if_on_device_type(x):
    if x.device.type == "cpu":
        return x + 1
    return x - 1


def if_on_numel_and_size(x):
    if x.numel() > 4 and x.size(0) == 2:
        return x.flatten()
    return x


def if_on_dict_key(x, d):
    if "bias" in d:
        return x + d["bias"]
    return x


def if_on_empty_list(x):
    items = []
    if items:
        return x
    return x + 1


def if_on_class_marker(x, m):
    if isinstance(m, Marker):
        return x * 2
    return x


def if_dtype_is(x):
    if x.dtype is torch.float32 and x.is_floating_point():
        return x * 0.5
    return x


# -- for loops over every kind of iterable -----------------------------------------------------
def for_range(x):
    for i in range(3):
        x = x + i
    return x


def for_range_start_step(x):
    total = 0
    for i in range(1, 10, 3):
        total += i
    return x * total


def for_range_argument(x, n):
    for _ in range(n):
        x = x * 2
    return x


def for_range_len(x, items):
    for i in range(len(items)):
        x = x + items[i]
    return x


def for_range_negative_step(x):
    order = []
    for i in range(5, 0, -2):
        order.append(i)
    return x + order[0], order


def for_list_of_tensors(xs):
    total = xs[0] * 0
    for t in xs:
        total = total + t
    return total


def for_tuple_constant(x):
    for k in (1, 2, 3):
        x = x * k
    return x


def for_dict_keys(d):
    keys = []
    for k in d:
        keys.append(k)
    return d[keys[0]] + d[keys[1]], keys


def for_dict_values(d):
    total = 0
    for v in d.values():
        total = total + v
    return total


def for_dict_items(d):
    out = {}
    for k, v in d.items():
        out[k + "_out"] = v * 2
    return out


def for_zip(xs, ys):
    out = []
    for a, b in zip(xs, ys):
        out.append(a * b)
    return out


def for_zip_three(x):
    total = x
    for a, b, c in zip([1, 2], (3, 4), range(5, 7)):
        total = total + a * b * c
    return total


def for_enumerate(xs):
    total = xs[0] * 0
    for i, t in enumerate(xs):
        total = total + t * i
    return total


def for_enumerate_start(x):
    out = x
    for i, k in enumerate([10, 20], start=1):
        out = out + i * k
    return out


def for_reversed_list(xs):
    out = []
    for t in reversed(xs):
        out.append(t + 1)
    return out


def for_reversed_range(x):
    seen = []
    for i in reversed(range(4)):
        seen.append(i)
    return x * seen[0], seen


def for_string(x):
    count = 0
    for ch in "abcab":
        if ch == "a":
            count += 1
    return x * count


def for_string_build(x, word):
    out = ""
    for ch in word:
        out = ch + out
    return x + len(out), out


def for_tensor_rows(x):
    acc = torch.zeros(x.shape[1])
    for row in x:
        acc = acc + row
    return acc


def for_shape(x):
    total = 1
    for s in x.shape:
        total *= s
    return x.reshape(total)


def for_nested(x):
    for i in range(2):
        for j in range(3):
            x = x + i * j
    return x


def for_sorted_dict(d):
    out = []
    for k in sorted(d):
        out.append(d[k])
    return torch.stack(out)


def for_unpack_pairs(x):
    out = x
    for a, (b, c) in [(1, (2, 3)), (4, (5, 6))]:
        out = out + a + b * c
    return out


def for_early_return(xs):
    for t in xs:
        if t.dim() == 2:
            return t.sum()
    return None


def for_loop_variable_after_loop(x):
    for i in range(4):  # noqa: B007 (read after the loop)
        pass
    return x * i


# -- while -------------------------------------------------------------------------------------
def while_counter(x):
    i = 0
    while i < 3:
        x = x * 2
        i += 1
    return x


def while_list_nonempty(x):
    items = [1, 2, 3]
    while items:
        x = x + items.pop()
    return x


def while_true_break(x):
    n = 0
    while True:
        n += 1
        if n >= 4:
            break
    return x * n


def while_on_shape(x):
    while x.shape[0] > 1:
        x = x[: x.shape[0] // 2]
    return x


def while_else(x):
    i = 0
    while i < 2:
        i += 1
    else:
        x = x + 10
    return x


def while_is_not_none(x):
    node = {"next": {"next": None, "v": 2}, "v": 1}
    total = 0
    while node is not None:
        total += node["v"]
        node = node["next"]
    return x * total


# -- break / continue / else -------------------------------------------------------------------
def for_break(x):
    for i in range(10):
        if i == 3:
            break
        x = x + 1
    return x


def for_continue(x):
    for i in range(5):
        if i % 2:
            continue
        x = x + i
    return x


def for_else_no_break(x):
    for i in range(3):
        x = x + i
    else:
        x = x * 2
    return x


def for_else_with_break(x):
    for i in range(3):
        if i == 1:
            break
    else:
        x = x * 100
    return x + i


def for_break_nested(x):
    found = None
    for i in range(3):
        for j in range(3):
            if i * j == 2:
                found = (i, j)
                break
        if found:
            break
    return x * found[0] + found[1], found


def while_continue(x):
    i = 0
    while i < 6:
        i += 1
        if i % 3 == 0:
            continue
        x = x + i
    return x


# -- comprehensions and generator expressions --------------------------------------------------
def list_comprehension(x):
    return [x * i for i in range(3)]


def list_comprehension_if(x):
    return [x + i for i in range(6) if i % 2 == 0]


def list_comprehension_nested(x):
    return [[x * i + j for j in range(2)] for i in range(2)]


def list_comprehension_two_fors(x):
    pairs = [(i, j) for i in range(3) for j in range(i)]
    return x * len(pairs), pairs


def list_comprehension_over_tensors(xs):
    return torch.stack([t.sin() for t in xs])


def list_comprehension_closure(x, k):
    return [x * k + i for i in range(2)]


def dict_comprehension(x):
    return {f"k{i}": x * i for i in range(3)}


def dict_comprehension_items(d):
    return {k: v + 1 for k, v in d.items() if k != "skip"}


def set_comprehension(x):
    s = {i % 3 for i in range(10)}
    return x * len(s), s


def generator_expression_sum(x):
    return sum(x * i for i in range(4))


def generator_expression_tuple(x):
    return tuple(x + i for i in range(3))


def generator_expression_any_all(x):
    flags = [True, False, True]
    return x * any(f for f in flags), all(f for f in flags)


def generator_expression_max(x):
    return x * max(len(s) for s in ["a", "abc", "ab"])


def generator_expression_cat(xs):
    return torch.cat(tuple(t * 2 for t in xs))


def comprehension_zip_enumerate(xs):
    return [t * i for i, t in enumerate(xs)] + [a + b for a, b in zip(xs, xs)]


# -- conditional expressions, boolean operators, comparisons -----------------------------------
def ternary(x, n):
    return x * 2 if n > 0 else x - 2


def ternary_nested(x, n):
    return x if n == 0 else (x * 2 if n == 1 else x * 3)


def ternary_on_none(x, y):
    return (y if y is not None else x) + 1


def and_or_values(x, n):
    a = n and x
    b = None or x
    c = 0 or n
    return a + b, c


def and_or_short_circuit(x, y):
    if y is not None and y.shape[0] == 3:
        return x + y
    return x * 2


def or_short_circuit(x, y):
    if y is None or y.shape[0] != 3:
        return x - 1
    return x * y


def not_operator(x, flag):
    if not flag:
        return x + 1
    return x - 1


def not_on_container(x, items):
    return x * (not items), not []


def and_chain_in_if(x):
    if x.dim() == 1 and x.shape[0] == 4 and x.dtype == torch.float32:
        return x * 2
    return x


def chained_comparison(x, n):
    if 0 < n < 5:
        return x + n
    return x * 0.5


def chained_comparison_shape(x):
    return x * (1 <= x.shape[0] <= 10), 1 < 2 < 3 > 2


def chained_equality(x):
    a = b = 3
    return x + (a == b == 3)


def comparison_of_tuples(x):
    return x + ((1, 2) < (1, 3)), x.shape == (3,)


def comparison_in_operator(x, mode):
    return x * (mode in ("a", "b")), mode not in {"c"}


# -- match statements on constants -------------------------------------------------------------
def match_literal(x, mode):
    match mode:
        case "double":
            return x * 2
        case "half":
            return x / 2
        case _:
            return x + 0.5


def match_or_pattern(x, n):
    match n:
        case 1 | 2:
            return x + 1
        case 3:
            return x + 3
    return x


def match_guard(x, n):
    match n:
        case k if k > 2:
            return x * k
        case _:
            return x


def match_shape_sequence(x):
    match x.shape:
        case (a,):
            return x * a
        case (a, b):
            return x.sum() * a * b
    return x


def match_star_sequence(x):
    match [1, 2, 3, 4]:
        case [first, *rest]:
            return x * first + len(rest), rest
    return x, None


def match_none(x, y):
    match y:
        case None:
            return x * 3
    return x + y


def match_mapping(x, config):
    match config:
        case {"scale": s, "shift": t}:
            return x * s + t
        case {"scale": s}:
            return x * s
    return x


def match_class_builtin(x, value):
    match value:
        case int():
            return x + value
        case str():
            return x * len(value)
    return x


def match_class_with_attributes(x):
    match x:
        case torch.Tensor(ndim=1):
            return x * 2
    return x


def match_capture_as(x, n):
    match n:
        case (1 | 2) as k:
            return x * k
    return x


CASES = [
    case(if_elif_else, R(3), 1, name="if_positive"),
    case(if_elif_else, R(3), 0, name="if_zero"),
    case(if_elif_else, R(3), -2, name="if_negative"),
    case(if_on_shape, R(4)),
    case(if_on_shape, R(2), name="if_on_shape_small"),
    case(if_on_dtype, R(3)),
    case(if_on_dtype, R(3, dtype=torch.float64), name="if_on_dtype_double"),
    case(if_on_ndim, R(2, 3)),
    case(if_on_ndim, R(3), name="if_on_ndim_1d"),
    case(if_on_isinstance, R(3), 2),
    case(if_on_isinstance, R(3), [1, 2], name="if_on_isinstance_list"),
    case(if_on_isinstance, R(3), R(3), name="if_on_isinstance_tensor"),
    case(if_is_none, R(3), None),
    case(if_is_none, R(3), R(3), name="if_is_none_given"),
    case(if_is_not_none, R(3), R(3)),
    case(if_on_len, R(3), [1, 2, 3]),
    case(if_on_bool_flag, R(3), relu=True),
    case(if_on_string, R(3), "tanh"),
    case(if_nested, R(3), True, False),
    case(if_on_requires_grad, R(3, requires_grad=True)),
    case(if_on_device_type, R(3)),
    case(if_on_numel_and_size, R(2, 3)),
    case(if_on_dict_key, R(3), {"bias": R(3)}),
    case(if_on_empty_list, R(3)),
    case(if_on_class_marker, R(3), Marker()),
    case(if_dtype_is, R(3)),
    case(for_range, R(3)),
    case(for_range_start_step, R(3)),
    case(for_range_argument, R(3), 3),
    case(for_range_len, R(3), [1, 2, 3]),
    case(for_range_negative_step, R(3)),
    case(for_list_of_tensors, [R(3), R(3), R(3)]),
    case(for_tuple_constant, R(3)),
    case(for_dict_keys, {"a": R(3), "b": R(3)}),
    case(for_dict_values, {"a": R(3), "b": R(3)}),
    case(for_dict_items, {"a": R(3), "b": R(3)}),
    case(for_zip, [R(3), R(3)], (R(3), R(3))),
    case(for_zip_three, R(3)),
    case(for_enumerate, [R(3), R(3)]),
    case(for_enumerate_start, R(3)),
    case(for_reversed_list, [R(3), R(2)]),
    case(for_reversed_range, R(3)),
    case(for_string, R(3)),
    case(for_string_build, R(3), "abc"),
    case(for_tensor_rows, R(3, 4)),
    case(for_shape, R(2, 3)),
    case(for_nested, R(3)),
    case(for_sorted_dict, {"b": R(3), "a": R(3)}),
    case(for_unpack_pairs, R(3)),
    case(for_early_return, [R(3), R(2, 2), R(4)]),
    case(for_loop_variable_after_loop, R(3)),
    case(while_counter, R(3)),
    case(while_list_nonempty, R(3)),
    case(while_true_break, R(3)),
    case(while_on_shape, R(8)),
    case(while_else, R(3)),
    case(while_is_not_none, R(3)),
    case(for_break, R(3)),
    case(for_continue, R(3)),
    case(for_else_no_break, R(3)),
    case(for_else_with_break, R(3)),
    case(for_break_nested, R(3)),
    case(while_continue, R(3)),
    case(list_comprehension, R(3)),
    case(list_comprehension_if, R(3)),
    case(list_comprehension_nested, R(3)),
    case(list_comprehension_two_fors, R(3)),
    case(list_comprehension_over_tensors, [R(3), R(3)]),
    case(list_comprehension_closure, R(3), 2),
    case(dict_comprehension, R(3)),
    case(dict_comprehension_items, {"a": R(3), "skip": R(3), "b": R(2)}),
    case(set_comprehension, R(3)),
    case(generator_expression_sum, R(3)),
    case(generator_expression_tuple, R(3)),
    case(generator_expression_any_all, R(3)),
    case(generator_expression_max, R(3)),
    case(generator_expression_cat, [R(2), R(3)]),
    case(comprehension_zip_enumerate, [R(3), R(3)]),
    case(ternary, R(3), 1),
    case(ternary, R(3), -1, name="ternary_else"),
    case(ternary_nested, R(3), 2),
    case(ternary_on_none, R(3), None),
    case(and_or_values, R(3), 2),
    case(and_or_short_circuit, R(3), R(3)),
    case(and_or_short_circuit, R(3), None, name="and_or_short_circuit_none"),
    case(or_short_circuit, R(3), None),
    case(or_short_circuit, R(3), R(3), name="or_short_circuit_tensor"),
    case(not_operator, R(3), False),
    case(not_on_container, R(3), []),
    case(and_chain_in_if, R(4)),
    case(chained_comparison, R(3), 3),
    case(chained_comparison, R(3), 7, name="chained_comparison_false"),
    case(chained_comparison_shape, R(3)),
    case(chained_equality, R(3)),
    case(comparison_of_tuples, R(3)),
    case(comparison_in_operator, R(3), "b"),
    case(match_literal, R(3), "double"),
    case(match_literal, R(3), "other", name="match_literal_default"),
    case(match_or_pattern, R(3), 2),
    case(match_guard, R(3), 4),
    case(match_shape_sequence, R(2, 3)),
    case(match_star_sequence, R(3)),
    case(match_none, R(3), None),
    case(match_mapping, R(3), {"scale": 2.0, "shift": 1.0}),
    case(match_mapping, R(3), {"scale": 3.0}, name="match_mapping_partial"),
    case(match_class_builtin, R(3), "abc"),
    case(match_class_with_attributes, R(3)),
    case(match_capture_as, R(3), 2),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_control_flow(case):
    run_case(case)
