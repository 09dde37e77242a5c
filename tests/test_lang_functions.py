"""Corpus: functions. Inlining, nested functions, closures, lambdas, defaults, keyword-only
arguments, ``*args``/``**kwargs``, ``functools.partial``, bounded recursion, methods,
``staticmethod``, ``classmethod``, ``super()`` and properties, each in one graph.

PYTEST_DONT_REWRITE: pytest must not rewrite the ``assert`` statements of the corpus functions;
they are user code under test, compiled exactly as CPython compiles them.
"""

import functools

import pytest
import torch
from corpus.harness import R, case, case_ids, run_case

SCALE = 2.5


# -- helpers the corpus functions call ---------------------------------------------------------
def helper_add(a, b):
    return a + b


def helper_defaults(x, scale=2.0, shift=1):
    return x * scale + shift


def helper_kwonly(x, *, alpha=1.0, beta):
    return x * alpha + beta


def helper_varargs(*xs):
    total = xs[0]
    for v in xs[1:]:
        total = total + v
    return total


def helper_count_args(*xs, **kw):
    return len(xs), sorted(kw)


def helper_kwargs(x, **kw):
    for key in sorted(kw):
        x = x + kw[key]
    return x


def helper_posonly(x, y, /, z=1):
    return x * y + z


def helper_pair(x):
    return x.sin(), x.cos()


def helper_unary(x):
    return x.relu() + 1


def helper_none_default(x, items=None):
    if items is None:
        items = []
    items.append(x)
    return items


def make_adder(n):
    def add(x):
        return x + n
    return add


def make_scaler(factor):
    def scale(x):
        return x * factor
    return scale


add_three = make_adder(3)
scale_by_four = make_scaler(4.0)


def apply_twice(f, x):
    return f(f(x))


def compose(f, g):
    def composed(x):
        return f(g(x))
    return composed


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


@traced
def decorated(x):
    return x * 2


SQUARE = lambda v: v * v  # noqa: E731
PARTIAL_ADD = functools.partial(helper_add, b=10)


def rec_double(x, n):
    if n == 0:
        return x
    return rec_double(x, n - 1) * 2


def factorial(n):
    return 1 if n <= 1 else n * factorial(n - 1)


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def is_even(n):
    return True if n == 0 else is_odd(n - 1)


def is_odd(n):
    return False if n == 0 else is_even(n - 1)


def nested_sum(items):
    total = 0
    for item in items:
        if isinstance(item, list):
            total = total + nested_sum(item)
        else:
            total = total + item
    return total


def rec_sum(xs):
    if len(xs) == 1:
        return xs[0]
    return xs[0] + rec_sum(xs[1:])


# -- classes -----------------------------------------------------------------------------------
class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x * self.k

    def apply_kw(self, x, *, scale=1.0, shift=0.0):
        return x * self.k * scale + shift

    def apply_twice(self, x):
        return self.apply(self.apply(x))


class MathOps:
    factor = 3

    @staticmethod
    def double(x):
        return x * 2

    @classmethod
    def scale(cls, x):
        return x * cls.factor

    @classmethod
    def make(cls):
        return cls()

    def triple_of_double(self, x):
        return self.double(x) * 3


class MoreOps(MathOps):
    factor = 5


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    @classmethod
    def origin(cls):
        return cls(0, 0)

    @staticmethod
    def norm2(a, b):
        return a * a + b * b


class Base:
    def f(self, x):
        return x + 1

    def g(self, x):
        return x * 10


class Derived(Base):
    def f(self, x):
        return super().f(x) * 2


class Derived2(Derived):
    def f(self, x):
        return super().f(x) - 3


class DerivedExplicit(Base):
    def f(self, x):
        return super(DerivedExplicit, self).f(x) * 4  # noqa: UP008


class Parent:
    def __init__(self, k):
        self.k = k
        self.tag = "parent"


class Child(Parent):
    def __init__(self, k, j):
        super().__init__(k)
        self.j = j


class Box:
    def __init__(self, t):
        self._t = t

    @property
    def doubled(self):
        return self._t * 2

    @property
    def size(self):
        return self._t.shape[0]


class Temperature:
    def __init__(self):
        self._value = None

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, v):
        self._value = v * 10


class Affine:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __call__(self, x):
        return x * self.a + self.b


class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return Vec(self.t + other.t)

    def __mul__(self, k):
        return Vec(self.t * k)

    def __len__(self):
        return self.t.shape[0]


class Builder:
    def __init__(self):
        self.ops = []

    def add(self, v):
        self.ops.append(v)
        return self

    def run(self, x):
        for v in self.ops:
            x = x + v
        return x


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(3, 3))

    def forward(self, x):
        return x @ self.weight


# -- calls to module-level functions -----------------------------------------------------------
def call_module_function(x):
    return helper_add(x, 1)


def call_nested_calls(x):
    return helper_add(helper_add(x, 1), x)


def call_with_defaults(x):
    return helper_defaults(x)


def call_default_positional(x):
    return helper_defaults(x, 3.0)


def call_default_keyword(x):
    return helper_defaults(x, shift=5)


def call_all_keywords(x):
    return helper_defaults(shift=2, scale=0.5, x=x)


def call_kwonly_required(x):
    return helper_kwonly(x, beta=2)


def call_kwonly_all(x):
    return helper_kwonly(x, alpha=0.5, beta=1)


def call_varargs(x):
    return helper_varargs(x, x * 2, x * 3)


def call_varargs_counts(x):
    n, keys = helper_count_args(1, 2, 3, b=1, a=2)
    return x * n, keys


def call_kwargs(x):
    return helper_kwargs(x, b=2, a=1)


def call_star_tuple(x):
    args = (x, 2.0)
    return helper_defaults(*args)


def call_star_list(x):
    args = [x, 3.0, 4]
    return helper_defaults(*args)


def call_double_star(x):
    options = {"scale": 2.0, "shift": 3}
    return helper_defaults(x, **options)


def call_star_and_double_star(x):
    return helper_defaults(*[x], **{"shift": 1})


def call_posonly(x):
    return helper_posonly(x, 2), helper_posonly(x, 3, z=0)


def call_returns_pair(x):
    s, c = helper_pair(x)
    return s * s + c * c


def call_none_default(x):
    first = helper_none_default(x)
    second = helper_none_default(x * 2, [x])
    return len(first), len(second), second[1]


def call_global_constant(x):
    return x * SCALE


# -- the compiled function's own signature -----------------------------------------------------
def own_varargs(x, *rest):
    return x + sum(rest), len(rest)


def own_kwargs(x, **opts):
    return x * opts["scale"] + opts.get("shift", 0)


def own_kwonly(x, *, k=2):
    return x * k


def own_default_none(x, y=None):
    if y is None:
        y = x
    return x + y


def own_forward_kwargs(x, **kw):
    return helper_defaults(x, **kw)


def own_forward_args(*args):
    return helper_add(*args)


def own_all_kinds(a, b=2, *args, c, d=4, **kwargs):
    return a * b + c + d + len(args) + len(kwargs)


# -- nested functions and closures -------------------------------------------------------------
def nested_def(x):
    def g(y):
        return y * 2
    return g(x) + 1


def nested_closure_constant(x):
    scale = 3

    def g(y):
        return y * scale
    return g(x)


def nested_closure_tensor(x):
    def g():
        return x.sin()
    return g() + 1


def nested_closure_nonlocal_int(x):
    total = 0

    def add(v):
        nonlocal total
        total += v
    add(1)
    add(2)
    return x * total


def nested_closure_nonlocal_tensor(x):
    acc = x

    def step():
        nonlocal acc
        acc = acc * 2
    step()
    step()
    return acc


def nested_closure_late_binding(x):
    n = 1

    def g():
        return x + n
    n = 5
    return g()


def nested_two_levels(x):
    a = 1

    def g():
        b = 2

        def h():
            return x + a + b
        return h()
    return g()


def nested_default_from_local(x):
    k = 3

    def g(y, k=k):
        return y * k
    return g(x), g(x, 1)


def nested_kwonly(x):
    def g(y, *, shift):
        return y + shift
    return g(x, shift=4)


def nested_varargs(x):
    def g(*parts, **named):
        return len(parts) + len(named)
    return x * g(1, 2, a=3)


def nested_returns_closure(x):
    def outer(k):
        def inner(y):
            return y * k
        return inner
    return outer(2)(x) + outer(3)(x)


def nested_counter_object(x):
    calls = []

    def record(v):
        calls.append(v)
        return v
    record(1)
    record(2)
    return x + len(calls), calls


def nested_recursive(x):
    def power(y, n):
        return y if n == 1 else y * power(y, n - 1)
    return power(x, 3)


def module_closure(x):
    return add_three(x)


def closure_from_factory(x):
    g = make_adder(2)
    return g(x)


def compose_functions(x):
    return compose(torch.sin, torch.cos)(x)


def decorated_call(x):
    return decorated(x)


# -- lambdas -----------------------------------------------------------------------------------
def lambda_inline(x):
    sq = lambda v: v * v  # noqa: E731
    return sq(x) + 1


def lambda_default(x):
    return (lambda v, k=2: v * k)(x)


def lambda_closure(x):
    k = 3
    add = lambda v: v + k  # noqa: E731
    return add(x)


def lambda_in_map(x):
    return list(map(lambda t: t + 1, [x, x * 2]))


def lambda_sort_key(x):
    order = sorted([3, 1, 2], key=lambda v: -v)
    return x * order[0], order


def lambda_module_level(x):
    return SQUARE(x)


def lambda_returns_tuple(x):
    split = lambda t: (t[0], t[1:])  # noqa: E731
    head, tail = split(x)
    return head + tail.sum()


# -- functools.partial -------------------------------------------------------------------------
def partial_keyword(x):
    p = functools.partial(helper_defaults, scale=3.0)
    return p(x)


def partial_positional(x):
    return functools.partial(helper_add, x)(2)


def partial_module_level(x):
    return PARTIAL_ADD(x)


def partial_of_torch(x):
    return functools.partial(torch.add, alpha=2)(x, x)


def partial_nested(x):
    p = functools.partial(functools.partial(helper_defaults, scale=2.0), shift=1)
    return p(x)


def partial_override_keyword(x):
    p = functools.partial(helper_defaults, shift=1)
    return p(x, shift=7)


# -- functions as values -----------------------------------------------------------------------
def function_argument(f, x):
    return f(x)


def higher_order(x):
    return apply_twice(torch.sin, x)


def higher_order_user(x):
    return apply_twice(helper_unary, x)


def function_in_dict(x):
    table = {"sin": torch.sin, "unary": helper_unary}
    return table["sin"](x) + table["unary"](x)


# -- bounded recursion -------------------------------------------------------------------------
def recursion_tensor(x):
    return rec_double(x, 3)


def recursion_factorial(x):
    return x * factorial(5)


def recursion_fib(x):
    return x + fib(7)


def recursion_mutual(x):
    return x * 2 if is_even(4) else x


def recursion_nested_lists(x):
    return nested_sum([x, [x, [x * 2]]])


def recursion_slicing(x):
    return rec_sum([x, x * 2, x * 3])


# -- methods -----------------------------------------------------------------------------------
def method_on_new_object(x):
    s = Scaler(2)
    return s.apply(x)


def method_on_argument(obj, x):
    return obj.apply(x)


def method_calls_method(x):
    return Scaler(3).apply_twice(x)


def method_keyword_args(x):
    return Scaler(2).apply_kw(x, scale=0.5, shift=1.0)


def method_bound_in_variable(x):
    m = Scaler(4).apply
    return m(x)


def method_dunder_call(x):
    return Affine(2.0, 1.0)(x)


def method_dunder_operators(x):
    v = Vec(x) + Vec(x)
    w = v * 3
    return w.t, len(w)


def method_chaining(x):
    return Builder().add(1).add(2).run(x)


def method_module_forward(m, x):
    return m(x)


def method_unbound_call(x):
    return Scaler.apply(Scaler(5), x)


# -- staticmethod, classmethod -----------------------------------------------------------------
def staticmethod_on_class(x):
    return MathOps.double(x)


def staticmethod_on_instance(x):
    return MathOps().double(x)


def staticmethod_via_self(x):
    return MathOps().triple_of_double(x)


def classmethod_on_class(x):
    return MathOps.scale(x)


def classmethod_on_subclass(x):
    return MoreOps.scale(x)


def classmethod_on_instance(x):
    return MoreOps().scale(x)


def classmethod_constructor(x):
    p = Point.origin()
    return x + p.x + p.y


def classmethod_make_subclass(x):
    ops = MoreOps.make()
    return ops.scale(x), type(ops) is MoreOps


def staticmethod_two_args(x):
    return Point.norm2(x, 2)


# -- super() -----------------------------------------------------------------------------------
def super_method(x):
    return Derived().f(x)


def super_two_levels(x):
    return Derived2().f(x)


def super_explicit_arguments(x):
    return DerivedExplicit().f(x)


def super_inherited_method(x):
    return Derived2().g(x)


def super_init(x):
    c = Child(2, 3)
    return x * c.k + c.j, c.tag


# -- properties --------------------------------------------------------------------------------
def property_read(x):
    return Box(x).doubled


def property_shape(x):
    return x * Box(x).size


def property_on_argument(box):
    return box.doubled + 1


def property_setter(x):
    t = Temperature()
    t.value = x
    return t.value




CASES = [
    case(call_module_function, R(3)),
    case(call_nested_calls, R(3)),
    case(call_with_defaults, R(3)),
    case(call_default_positional, R(3)),
    case(call_default_keyword, R(3)),
    case(call_all_keywords, R(3)),
    case(call_kwonly_required, R(3)),
    case(call_kwonly_all, R(3)),
    case(call_varargs, R(3)),
    case(call_varargs_counts, R(3)),
    case(call_kwargs, R(3)),
    case(call_star_tuple, R(3)),
    case(call_star_list, R(3)),
    case(call_double_star, R(3)),
    case(call_star_and_double_star, R(3)),
    case(call_posonly, R(3)),
    case(call_returns_pair, R(3)),
    case(call_none_default, R(3)),
    case(call_global_constant, R(3)),
    case(own_varargs, R(3), 1, 2),
    case(own_kwargs, R(3), scale=2.0, shift=1),
    case(own_kwonly, R(3), k=3),
    case(own_default_none, R(3)),
    case(own_default_none, R(3), R(3), name="own_default_given"),
    case(own_forward_kwargs, R(3), scale=3.0),
    case(own_forward_args, R(3), R(3)),
    case(own_all_kinds, R(2), 3, 5, 6, c=1, e=7),
    case(nested_def, R(3)),
    case(nested_closure_constant, R(3)),
    case(nested_closure_tensor, R(3)),
    case(nested_closure_nonlocal_int, R(3)),
    case(nested_closure_nonlocal_tensor, R(3)),
    case(nested_closure_late_binding, R(3)),
    case(nested_two_levels, R(3)),
    case(nested_default_from_local, R(3)),
    case(nested_kwonly, R(3)),
    case(nested_varargs, R(3)),
    case(nested_returns_closure, R(3)),
    case(nested_counter_object, R(3)),
    case(nested_recursive, R(3)),
    case(module_closure, R(3)),
    case(scale_by_four, R(3), name="compiled_closure"),
    case(closure_from_factory, R(3)),
    case(compose_functions, R(3)),
    case(decorated_call, R(3)),
    case(decorated, R(3), name="compiled_decorated_wrapper"),
    case(lambda_inline, R(3)),
    case(lambda_default, R(3)),
    case(lambda_closure, R(3)),
    case(lambda_in_map, R(3)),
    case(lambda_sort_key, R(3)),
    case(lambda_module_level, R(3)),
    case(SQUARE, R(3), name="compiled_lambda"),
    case(lambda_returns_tuple, R(4)),
    case(partial_keyword, R(3)),
    case(partial_positional, R(3)),
    case(partial_module_level, R(3)),
    case(partial_of_torch, R(3)),
    case(partial_nested, R(3)),
    case(partial_override_keyword, R(3)),
    case(function_argument, helper_unary, R(3)),
    case(function_argument, torch.tanh, R(3), name="function_argument_torch"),
    case(higher_order, R(3)),
    case(higher_order_user, R(3)),
    case(function_in_dict, R(3)),
    case(recursion_tensor, R(3)),
    case(recursion_factorial, R(3)),
    case(recursion_fib, R(3)),
    case(recursion_mutual, R(3)),
    case(recursion_nested_lists, R(3)),
    case(recursion_slicing, R(3)),
    case(method_on_new_object, R(3)),
    case(method_on_argument, Scaler(3.0), R(3)),
    case(method_calls_method, R(3)),
    case(method_keyword_args, R(3)),
    case(method_bound_in_variable, R(3)),
    case(method_dunder_call, R(3)),
    case(method_dunder_operators, R(3)),
    case(method_chaining, R(3)),
    case(method_module_forward, Linear(), R(2, 3)),
    case(method_unbound_call, R(3)),
    case(staticmethod_on_class, R(3)),
    case(staticmethod_on_instance, R(3)),
    case(staticmethod_via_self, R(3)),
    case(classmethod_on_class, R(3)),
    case(classmethod_on_subclass, R(3)),
    case(classmethod_on_instance, R(3)),
    case(classmethod_constructor, R(3)),
    case(classmethod_make_subclass, R(3)),
    case(staticmethod_two_args, R(3)),
    case(super_method, R(3)),
    case(super_two_levels, R(3)),
    case(super_explicit_arguments, R(3)),
    case(super_inherited_method, R(3)),
    case(super_init, R(3)),
    case(property_read, R(3)),
    case(property_shape, R(3)),
    case(property_on_argument, Box(torch.arange(3.0))),
    case(property_setter, R(3)),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_functions(case):
    run_case(case)
