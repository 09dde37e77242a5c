"""The code object's extra slot: roundtrip, replacement, release with the code object."""

import gc
import sys
import types
import weakref

import pytest

from graphlift.code_extra import get_extra, set_extra


class State:
    """A weak-referenceable stand-in for a cache entry."""


def make_function() -> types.FunctionType:
    """A fresh function with its own code object (exec builds new code every time)."""
    namespace: dict = {}
    exec("def fn(x):\n    return x + 1\n", namespace)
    return namespace["fn"]


def test_empty_slot_reads_none():
    assert get_extra(make_function().__code__) is None


def test_roundtrip():
    code = make_function().__code__
    state = State()
    set_extra(code, state)
    assert get_extra(code) is state


def test_slot_holds_one_reference_and_reads_add_none():
    code = make_function().__code__
    state = State()
    before = sys.getrefcount(state)
    set_extra(code, state)
    for _ in range(100):
        get_extra(code)
    assert sys.getrefcount(state) == before + 1
    set_extra(code, None)
    assert sys.getrefcount(state) == before


def test_replace_releases_old_object():
    code = make_function().__code__
    old, new = State(), State()
    old_ref = weakref.ref(old)
    set_extra(code, old)
    del old
    gc.collect()
    assert old_ref() is not None, "the slot must keep its object alive"
    set_extra(code, new)
    gc.collect()
    assert old_ref() is None
    assert get_extra(code) is new


def test_setting_the_same_object_again_keeps_it():
    code = make_function().__code__
    state = State()
    set_extra(code, state)
    set_extra(code, state)
    state_ref = weakref.ref(state)
    del state
    gc.collect()
    assert get_extra(code) is state_ref()
    assert state_ref() is not None


def test_clear():
    code = make_function().__code__
    state = State()
    state_ref = weakref.ref(state)
    set_extra(code, state)
    set_extra(code, None)
    assert get_extra(code) is None
    del state
    gc.collect()
    assert state_ref() is None


def test_object_freed_with_code_object():
    fn = make_function()
    state = State()
    state_ref = weakref.ref(state)
    set_extra(fn.__code__, state)
    del state, fn
    gc.collect()
    assert state_ref() is None


def test_functions_sharing_code_share_extra():
    def outer():
        def inner():
            return 1

        return inner

    first, second = outer(), outer()
    assert first is not second and first.__code__ is second.__code__
    state = State()
    set_extra(first.__code__, state)
    assert get_extra(second.__code__) is state
    set_extra(first.__code__, None)


@pytest.mark.parametrize("func", [get_extra, lambda not_code: set_extra(not_code, None)])
def test_rejects_non_code(func):
    with pytest.raises(TypeError, match="expected a code object"):
        func(make_function())
