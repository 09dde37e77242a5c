"""The side-effect ledger: mutations made while tracing are replayed, exactly and in order.

Each case mutates something that outlives the frame (an argument list or dict, an attribute of an
input object, a global, a closure cell) or lets a new object escape (returned, stored into an
argument, two references to one new list). Every case takes a ``pause`` argument and is run twice:
with ``pause=no_break`` (a user function that is inlined: one frame, no break) and with
``pause=print`` (a graph break in the middle: graph, eager print, resume function). Both runs are
compared with eager Python: return value, printed output, the arguments and module globals after
the call, and which of those objects are one object (identity), checked by walking them all.

PYTEST_DONT_REWRITE: the cases' bytecode must be what the user wrote.
"""

from __future__ import annotations

import contextlib
import io
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from corpus.harness import assert_same

import graphlift
from graphlift import cache
from graphlift.graph_break import listeners as break_listeners


def no_break() -> None:
    """The ``pause`` that does nothing (inlined, so the frame stays one graph)."""


PAUSES = {"no_break": no_break, "break": print}


@dataclass(frozen=True)
class EffectCase:
    name: str
    make: Callable[[], tuple[Callable, tuple]]  # (function to compile, its arguments but pause)


CASES: list[EffectCase] = []


def case(make: Callable[[], tuple] | None = None) -> Callable:
    """Register the decorated function; ``make`` gives fresh arguments (default: one tensor)."""
    def register(fn: Callable) -> Callable:
        args = make or (lambda: (t(3),))
        CASES.append(EffectCase(fn.__name__, lambda: (fn, args())))
        return fn

    return register


def closure_case(name: str, factory: Callable[[], Callable], make: Callable[[], tuple]) -> None:
    """A case whose compiled function is a fresh closure from ``factory`` on every run."""
    CASES.append(EffectCase(name, lambda: (factory(), make())))


def t(*shape: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator)


class Obj:
    """A plain object with attributes."""

    def __init__(self, value: Any = 0, child: Obj | None = None) -> None:
        self.value = value
        self.child = child


# Module state the cases mutate; reset before each run and compared after it.
G_LIST: list = []
G_DICT: dict = {}
G_COUNT = 0
G_TENSOR = None
G_OBJ = Obj(0)


def reset_globals() -> None:
    global G_COUNT, G_TENSOR
    G_LIST.clear()
    G_DICT.clear()
    G_COUNT = 0
    G_TENSOR = None
    G_OBJ.value = 0
    G_OBJ.__dict__.pop("extra", None)
    globals().pop("G_NEW_A", None)
    globals()["G_OLD"] = [1]
    globals().pop("G_NEW_B", None)


def globals_state() -> tuple:
    created = [name for name in globals() if name.startswith("G_NEW_")]
    return (G_LIST, G_DICT, G_COUNT, G_TENSOR, G_OBJ, G_OLD, created,
            [globals()[name] for name in created])


# == list arguments ==============================================================================
@case(lambda: (t(3), [1, 2]))
def list_append(x, lst, pause):
    lst.append(x + 1)
    pause()
    lst.append(x * 2)
    return x - 1


@case(lambda: (t(3), [1, 2, 3, 4]))
def list_pop(x, lst, pause):
    a = lst.pop()
    pause()
    b = lst.pop(0)
    return x * a + b


@case(lambda: (t(3), [1, 2, 3]))
def list_setitem(x, lst, pause):
    lst[0] = x * 2
    pause()
    lst[-1] = "last"
    return lst[1]


@case(lambda: (t(3), [1, 2, 3, 4]))
def list_slice_setitem(x, lst, pause):
    lst[1:3] = [x, x + 1, 9]
    pause()
    return len(lst)


@case(lambda: (t(3), [1]))
def list_extend(x, lst, pause):
    lst.extend([x, 2])
    pause()
    lst.extend((3, x * 3))
    return x


@case(lambda: (t(3), [1, 2, 3]))
def list_clear(x, lst, pause):
    lst.clear()
    pause()
    lst.append(x + 1)
    return x * 2


@case(lambda: (t(3), [1, 2, 3]))
def list_insert_and_del(x, lst, pause):
    lst.insert(0, x)
    pause()
    del lst[1]
    return len(lst)


@case(lambda: (t(3), [1]))
def list_iadd(x, lst, pause):
    lst += [x * 2]
    pause()
    lst += [3]
    return x


@case(lambda: (t(3), [3, 1, 2]))
def list_sort_reverse(x, lst, pause):
    lst.sort()
    pause()
    lst.reverse()
    return x * lst[0]


@case(lambda: (t(3), [1, 2]))
def list_returned_is_argument(x, lst, pause):
    lst.append(x + 1)
    pause()
    return lst


# == dict arguments ==============================================================================
@case(lambda: (t(3), {"a": 1}))
def dict_setitem(x, d, pause):
    d["b"] = x + 1
    pause()
    d["a"] = x * 2
    return x


@case(lambda: (t(3), {"a": 1, "b": 2, "c": 3}))
def dict_pop(x, d, pause):
    a = d.pop("a")
    pause()
    c = d.pop("c", None)
    return x * a + c


@case(lambda: (t(3), {"a": 1}))
def dict_update(x, d, pause):
    d.update({"b": x, "c": 3})
    pause()
    d.update(a=x * 2)
    return x


@case(lambda: (t(3), {"a": 1, "b": 2}))
def dict_del(x, d, pause):
    del d["a"]
    pause()
    d["z"] = x
    return len(d)


@case(lambda: (t(3), {"a": 1, "b": 2}))
def dict_key_order(x, d, pause):
    value = d.pop("a")
    pause()
    d["a"] = value + 1  # moves "a" to the end, as in eager
    return x


@case(lambda: (t(3), {"a": 1}))
def dict_setdefault_and_clear(x, d, pause):
    d.setdefault("b", x)
    pause()
    d.clear()
    d["c"] = 3
    return x + 1


@case(lambda: (t(3), {"items": [1]}))
def nested_list_in_dict(x, d, pause):
    d["items"].append(x)
    pause()
    d["items"].append(2)
    return x


@case(lambda: (t(3), {"a": 1}))
def dict_returned_is_argument(x, d, pause):
    d["b"] = x
    pause()
    return d


# == attributes of input objects =================================================================
@case(lambda: (t(3), Obj(1)))
def attr_store(x, obj, pause):
    obj.value = x + 1
    pause()
    obj.count = 2
    return obj.value * obj.count


@case(lambda: (t(3), Obj(1)))
def attr_store_twice(x, obj, pause):
    obj.value = 1
    pause()
    obj.value = 2
    return x * obj.value


@case(lambda: (t(3), Obj(1, Obj(2))))
def attr_store_nested(x, obj, pause):
    obj.child.value = x * 3
    pause()
    obj.child.extra = "new"
    return obj.child.value


@case(lambda: (t(3), Obj(1)))
def attr_read_after_store(x, obj, pause):
    obj.value = obj.value + 1
    pause()
    obj.value = obj.value * 10
    return x + obj.value


@case(lambda: (t(3), Obj(1), Obj(2)))
def attr_store_object(x, a, b, pause):
    a.child = b
    pause()
    b.value = x
    return a.child is b


class Stepper(torch.nn.Module):
    """A module with a plain attribute counter and a tensor attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.steps = 0
        self.last = None


STEPPER = Stepper()


def stepper() -> Stepper:
    """The one module (a new module per call would recompile), its state reset."""
    torch.manual_seed(0)
    STEPPER.load_state_dict(Stepper().state_dict())
    STEPPER.steps, STEPPER.last = 0, None
    return STEPPER


@case(lambda: (t(3), stepper()))
def module_attr_store(x, m, pause):
    m.steps = m.steps + 1
    y = m.lin(x)
    pause()
    m.last = y
    return y * m.steps


# == globals =====================================================================================
@case()
def global_int_store(x, pause):
    global G_COUNT
    G_COUNT = G_COUNT + 1
    pause()
    G_COUNT = G_COUNT + 10
    return x * G_COUNT


@case()
def global_tensor_store(x, pause):
    global G_TENSOR
    G_TENSOR = x * 2
    pause()
    return G_TENSOR + 1


@case()
def global_list_and_dict(x, pause):
    G_LIST.append("first")
    G_DICT["k"] = x
    pause()
    G_LIST.append("second")
    G_DICT["j"] = 2
    return x


@case()
def global_object_attr(x, pause):
    G_OBJ.value = x + 1
    pause()
    G_OBJ.extra = "extra"
    return G_OBJ.value


@case()
def global_new_names(x, pause):
    global G_NEW_B, G_NEW_A
    G_NEW_B = 1  # created first: comes first in the module's globals
    pause()
    G_NEW_A = x
    return x + G_NEW_B


# == closures ====================================================================================
def make_int_closure():
    count = 0

    def bump(x, pause):
        nonlocal count
        count += 1
        pause()
        count += 10
        return x * count

    return bump


def make_tensor_closure():
    acc = torch.zeros(3)

    def add(x, pause):
        nonlocal acc
        acc = acc + x
        pause()
        acc = acc * 2
        return acc

    return add


def make_list_closure():
    seen = []

    def push(x, pause):
        seen.append(x)
        pause()
        seen.append(len(seen))
        return x

    return push


def make_reassigned_list_closure():
    items = [1]

    def swap(x, pause):
        nonlocal items
        old = items
        items = [x]
        pause()
        items.append(len(old))
        return old

    return swap


closure_case("closure_nonlocal_int", make_int_closure, lambda: (t(3),))
closure_case("closure_nonlocal_tensor", make_tensor_closure, lambda: (t(3),))
closure_case("closure_list_cell", make_list_closure, lambda: (t(3),))
closure_case("closure_reassigned_list", make_reassigned_list_closure, lambda: (t(3),))


# == new objects that escape =====================================================================
@case()
def new_list_returned(x, pause):
    out = [x]
    pause()
    out.append(x + 1)
    return out


@case()
def new_dict_and_object_returned(x, pause):
    d = {"x": x}
    obj = Obj(x * 2)
    pause()
    d["obj"] = obj
    return d, obj


@case(lambda: (t(3), []))
def new_list_into_argument(x, out, pause):
    fresh = [x]
    out.append(fresh)
    pause()
    fresh.append(x * 2)
    return fresh


@case()
def one_new_list_twice(x, pause):
    shared = [x]
    pair = [shared, shared]
    pause()
    shared.append(1)
    return pair


@case()
def new_list_into_global_and_returned(x, pause):
    fresh = [x + 1]
    G_LIST.append(fresh)
    pause()
    return fresh


@case(lambda: (t(3), Obj(0)))
def new_object_into_attribute(x, obj, pause):
    child = Obj(x)
    obj.child = child
    pause()
    child.value = child.value + 1
    return child


@case(lambda: (t(3), [1], []))
def argument_into_argument(x, a, b, pause):
    b.append(a)
    pause()
    a.append(x)
    return b


# == a value read before it is overwritten =======================================================
# The old value must be what the frame read, not what the replayed store left behind.
G_OLD: list = [1]


@case()
def global_read_then_overwrite(x, pause):
    global G_OLD
    old = G_OLD
    G_OLD = [x]
    pause()
    return old


@case(lambda: (t(3), Obj(t(3, seed=1))))
def attr_read_then_overwrite(x, obj, pause):
    old = obj.value
    obj.value = x + 1
    pause()
    return old


@case(lambda: (t(3), {"k": [0]}))
def dict_item_read_then_overwrite(x, d, pause):
    old = d["k"]
    d["k"] = 5
    pause()
    return old


@case(lambda: (t(3), [[7], 2]))
def list_item_read_then_overwrite(x, lst, pause):
    first = lst[0]
    lst[0] = x
    pause()
    return first


# == attribute stores on objects reached through a container the frame also changes ==========
# Replay order matters here: the store must reach the object the frame stored to.
@case(lambda: (t(3), [Obj(0)], Obj(1)))
def store_then_insert(x, lst, other, pause):
    lst[0].value = 5
    pause()
    lst.insert(0, other)
    return x + 1


@case(lambda: (t(3), {"a": Obj(0)}, Obj(1)))
def store_then_replace_item(x, d, other, pause):
    d["a"].value = 5
    pause()
    d["a"] = other
    return x + 1


@case(lambda: (t(3), [Obj(0), Obj(1)]))
def rotate_then_store(x, lst, pause):
    lst.append(lst.pop(0))
    pause()
    lst[0].value = 9
    return x


# == aliasing between arguments ==================================================================
def aliased_list() -> tuple:
    shared = [1]
    return (t(3), shared, shared)


@case(aliased_list)
def aliased_list_arguments(x, a, b, pause):
    b.append(x)
    pause()
    return len(a)


def aliased_dict() -> tuple:
    shared = {"a": 1}
    return (t(3), shared, shared)


@case(aliased_dict)
def aliased_dict_arguments(x, a, b, pause):
    b["b"] = x
    pause()
    return len(a)


def aliased_obj() -> tuple:
    shared = Obj(1)
    return (t(3), shared, shared)


@case(aliased_obj)
def aliased_object_arguments(x, a, b, pause):
    b.value = x
    pause()
    return a.value, a is b


# == running =====================================================================================
def identity_shape(value: Any, memo: dict[int, int]) -> Any:
    """The structure of ``value`` with every mutable object or tensor named by first visit.

    Two runs agree on it exactly when the same positions hold the same objects.
    """
    if isinstance(value, (list, dict, Obj, torch.Tensor)):
        if id(value) in memo:
            return ("ref", memo[id(value)])
        memo[id(value)] = len(memo)
    if isinstance(value, (list, tuple)):
        return [identity_shape(v, memo) for v in value]
    if isinstance(value, dict):
        return {k: identity_shape(v, memo) for k, v in value.items()}
    if isinstance(value, Obj):
        return {k: identity_shape(v, memo) for k, v in vars(value).items()}
    if isinstance(value, torch.nn.Module):
        return {k: identity_shape(v, memo) for k, v in public_attrs(value).items()}
    if isinstance(value, types.FunctionType):
        return [identity_shape(c.cell_contents, memo) for c in value.__closure__ or ()]
    return "new" if isinstance(value, torch.Tensor) else None


def public_attrs(module: torch.nn.Module) -> dict:
    return {k: v for k, v in vars(module).items() if not k.startswith("_")}


def plain(value: Any) -> Any:
    """For value comparison: closures become their cells' contents, objects their attributes."""
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, Obj):
        return ("Obj", plain(vars(value)))
    if isinstance(value, torch.nn.Module):
        return ("Module", plain(public_attrs(value)), plain(dict(value.state_dict())))
    if isinstance(value, types.FunctionType):
        return [plain(c.cell_contents) for c in value.__closure__ or ()]
    return value


def run(fn: Callable, args: tuple, pause: Callable, compiled: bool) -> tuple[Any, str, Any, Any]:
    """Result, printed output, and the values and identity structure of everything the call may
    have touched (result, arguments, the function's closure cells, module globals)."""
    reset_globals()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = (graphlift.compile(fn) if compiled else fn)(*args, pause)
    touched = (result, args, fn, globals_state())
    return result, out.getvalue(), plain(touched), identity_shape(touched, {})


@pytest.mark.parametrize("pause", list(PAUSES))
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_side_effects(c: EffectCase, pause: str) -> None:
    fn, args = c.make()
    eager = run(fn, args, PAUSES[pause], compiled=False)
    breaks: list = []
    break_listeners.append(breaks.append)
    try:
        fn, args = c.make()
        result = run(fn, args, PAUSES[pause], compiled=True)
        compiles = cache.accumulated_compiles()
        fn, args = c.make()  # a fresh closure for closure cases: same code, same cache
        again = run(fn, args, PAUSES[pause], compiled=True)
    finally:
        break_listeners.remove(breaks.append)
    assert result[1] == eager[1], "printed output differs"
    assert_same(eager[2], result[2], "(result, arguments, closure cells, globals)")
    assert result[3] == eager[3], "object identity differs"
    assert_same(eager[2], again[2], "second call: (result, arguments, closure cells, globals)")
    assert cache.accumulated_compiles() == compiles, "the second call recompiled"
    # The frame was compiled (never run eagerly as a whole), with exactly the break asked for.
    assert [str(b) for b in breaks if "whole frame" in b.outcome] == []
    assert len(breaks) == (pause == "break"), [str(b) for b in breaks]
