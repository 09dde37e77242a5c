"""The builder's tables: each row's shape, the row each kind of value matches first, and the
tracker (and guard) a compiled function's input of that kind really gets."""

import collections
import enum
import functools
import math
import operator
import os

import pytest
import torch

import graphlift
from graphlift.exc import Unsupported
from graphlift.variables import builder
from graphlift.variables.builder import UNGUARDED_ROWS, WRAP_ROWS, VariableBuilder, wrap_unguarded

Point = collections.namedtuple("Point", "a b")
TENSOR = torch.ones(2)


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    LOW = 1


class Box:
    pass


class Items(list):
    pass


def module_function(x):
    return x


def first_build(value):
    return next(build for test, build in WRAP_ROWS if test(value))


def matching_builds(value):
    return [build for test, build in WRAP_ROWS if test(value)]


@pytest.mark.parametrize("rows", [WRAP_ROWS, UNGUARDED_ROWS], ids=["wrap", "unguarded"])
def test_every_row_is_a_test_and_a_documented_build(rows):
    for row in rows:
        assert len(row) == 2 and all(callable(part) for part in row)
        assert row[1].__doc__, f"{row[1].__name__} has no docstring"
    assert rows[-1][0](object()), "the last row matches every value"


def test_each_wrap_row_has_its_own_build():
    builds = [build for _, build in WRAP_ROWS]
    assert len(set(builds)) == len(builds)


# value -> the row whose build wraps it (every value matches the last row too).
FIRST_ROWS = {
    "bool is a lazily guarded scalar, not an int symbol": (True, builder._wrap_lazy),
    "namedtuple is a tuple": (Point(1, TENSOR), builder._wrap_sequence),
    "list subclass is a builtin-subclass object": (Items(), builder.wrap_builtin_subclass),
    "OrderedDict is a collection, not a dict": (collections.OrderedDict(a=1),
                                                builder._wrap_collection),
    "object-keyed dict is an object": ({Box(): 1}, builder._wrap_object),
    "module-level function goes by the trace rules": (module_function, builder._wrap_callable),
    "nn.Module class is a callable": (torch.nn.Linear, builder._wrap_callable),
    "IntEnum member is an enum, not an int": (Level.LOW, builder._wrap_enum),
    "partial is a stand-in": (functools.partial(max, 1), builder._wrap_stand_in),
    "Python module": (math, builder._wrap_python_module),
}


@pytest.mark.parametrize("case", sorted(FIRST_ROWS))
def test_first_matching_row_wins(case):
    value, winner = FIRST_ROWS[case]
    assert first_build(value) is winner


# value matched by two rows -> the earlier row, which wins, and the later one it shadows.
SHADOWED_ROWS = {
    "int before constant": (3, builder._wrap_number, builder._wrap_constant),
    "float before constant": (2.5, builder._wrap_number, builder._wrap_constant),
    "None before constant": (None, builder._wrap_lazy, builder._wrap_constant),
    "constant before sequence": ((1, 2), builder._wrap_constant, builder._wrap_sequence),
    "tensor method before callable": (TENSOR.add, builder._wrap_tensor_method,
                                      builder._wrap_callable),
    "sequence before object": (Point(1, TENSOR), builder._wrap_sequence, builder._wrap_object),
}


@pytest.mark.parametrize("case", sorted(SHADOWED_ROWS))
def test_an_earlier_row_shadows_a_later_one(case):
    value, winner, shadowed = SHADOWED_ROWS[case]
    builds = matching_builds(value)
    assert builds[0] is winner and shadowed in builds[1:]


# value -> the tracker class an input of that kind gets, and one guard it must have.
TRACKERS = {
    "tensor": (torch.ones(3), "TensorVariable", "type(L['v']) is torch.Tensor"),
    "tensor method": (torch.ones(3).mul, "TensorMethodVariable", "L['v'].__name__ == 'mul'"),
    "int": (3, "SymNodeVariable", "type(L['v']) is int"),
    "bool": (True, "LazyConstantVariable", None),
    "float": (2.5, "SymNodeVariable", "type(L['v']) is float"),
    "tuple of constants": ((1, 2), "ConstantVariable", "L['v'] == (1, 2)"),
    "list": ([1, 2], "ListVariable", "len(L['v']) == 2"),
    "namedtuple": (Point(1, 2), "TupleVariable", "len(L['v']) == 2"),
    "dict": ({"a": 1}, "DictVariable", "list(L['v']) == ['a']"),
    "deque": (collections.deque([1]), "DequeVariable", "len(L['v']) == 1"),
    "partial": (functools.partial(max, 1), "StandInObjectVariable", None),
    "itemgetter": (operator.itemgetter(0), "StandInObjectVariable", None),
    "module": (math, "PythonModuleVariable", None),
    "function": (module_function, "UserFunctionVariable", "L['v'].__globals__ is G"),
    "class": (Box, "ClassVariable", None),
    "nn.Module": (torch.nn.ReLU(), "NNModuleVariable", None),
    "enum": (Color.RED, "ConstantVariable", None),
    "os.environ": (os.environ, "EnvironVariable", None),
    "object": (Box(), "UserObjectVariable", None),
}


def takes(x, v):
    w = v  # noqa: F841 (the read is what wraps v)
    return x + 1


@pytest.mark.parametrize("kind", sorted(TRACKERS))
def test_each_kind_lands_on_its_tracker(kind, monkeypatch):
    value, tracker, guard = TRACKERS[kind]
    wrapped = {}
    wrap = VariableBuilder.wrap

    def spy(self, value, source):
        wrapped[source.name()] = result = wrap(self, value, source)
        return result

    monkeypatch.setattr(VariableBuilder, "wrap", spy)
    compiled = graphlift.compile(takes, dynamic=True)
    assert torch.equal(compiled(torch.ones(2), value), torch.ones(2) + 1)
    assert type(wrapped["L['v']"]).__name__ == tracker
    if guard is not None:
        assert guard in graphlift.cache_entries(compiled)[0].guards


UNGUARDED = {
    "constant": ((1, "a"), "ConstantVariable"),
    "module": (math, "PythonModuleVariable"),
    "tuple": ((1, Box()), "TupleVariable"),
    "dict": ({"a": Box()}, "DictVariable"),
    "nn.Module": (torch.nn.ReLU(), "NNModuleVariable"),
    "enum": (Level.LOW, "ConstantVariable"),
    "namedtuple": (Point(1, 2), "UserObjectVariable"),
    "os.environ": (os.environ, "EnvironVariable"),
    "object": (Box(), "UserObjectVariable"),
}


@pytest.mark.parametrize("kind", sorted(UNGUARDED))
def test_unguarded_kinds(kind):
    value, tracker = UNGUARDED[kind]
    assert type(wrap_unguarded(None, value)).__name__ == tracker


def test_unguarded_tensor_is_refused():
    with pytest.raises(Unsupported, match="without a source"):
        wrap_unguarded(None, torch.ones(1))
