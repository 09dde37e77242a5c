"""copy.copy and copy.deepcopy of containers, in Python.

Atomic values are returned as they are; lists, dicts and sets (and, for deepcopy, tuples) are
rebuilt, and deepcopy rebuilds an object of a plain user class (one that copies by the default
reduction: a new object whose instance dict is a deep copy of the original's, as
``copy._reconstruct`` makes it; transformers' ``config.get_text_config()`` deep-copies a config).
Anything else goes to :func:`graphlift.polyfills.call_original`, which runs the real ``copy``
function (a graph break while tracing).
"""

from __future__ import annotations

import collections
import copy as _copy
import types
from copyreg import dispatch_table

from graphlift.polyfills.support import call_original

# Types copy.copy returns unchanged (copy._copy_immutable), plus torch's immutable constants.
_IMMUTABLE = (type(None), int, float, bool, complex, str, tuple, bytes, frozenset, type, range,
              slice, property, types.BuiltinFunctionType, type(Ellipsis), type(NotImplemented),
              types.FunctionType)

# Types copy.deepcopy returns unchanged (copy._deepcopy_atomic).
_ATOMIC = (type(None), int, float, bool, complex, bytes, str, types.CodeType, type, range,
           types.BuiltinFunctionType, type(Ellipsis), type(NotImplemented), types.FunctionType,
           property)


def copy(x):
    """copy.copy: a shallow copy of a container; atomic values as they are."""
    cls = type(x)
    if cls in _IMMUTABLE:
        return x
    if cls is list:
        return list(x)
    if cls is dict:
        return dict(x)
    if cls is set:
        return set(x)
    if cls in (collections.deque, collections.OrderedDict, collections.defaultdict):
        return x.copy()  # what their __copy__ / __reduce__ give
    return call_original(_copy.copy, x)


def deepcopy(x, memo=None):
    """copy.deepcopy of nested lists, tuples, dicts and sets of atomic values."""
    if memo is not None:
        return call_original(_copy.deepcopy, x, memo)
    return _deepcopy(x, [])


def _deepcopy(x, memo):
    """``memo`` pairs each container copied so far with its copy, so shared parts stay shared."""
    cls = type(x)
    if cls in _ATOMIC:
        return x
    for original, copied in memo:
        if original is x:
            return copied
    if cls is list:
        result = []
        memo.append((x, result))
        for item in x:
            result.append(_deepcopy(item, memo))
        return result
    if cls is dict:
        result = {}
        memo.append((x, result))
        for key, value in x.items():
            result[_deepcopy(key, memo)] = _deepcopy(value, memo)
        return result
    if cls is tuple:
        items = [_deepcopy(item, memo) for item in x]
        for item, copied in zip(x, items):
            if item is not copied:
                result = tuple(items)
                memo.append((x, result))
                return result
        return x  # nothing inside changed: deepcopy returns the tuple itself
    if cls in (set, frozenset):
        items = [_deepcopy(item, memo) for item in x]
        result = cls(items)
        memo.append((x, result))
        return result
    if _copies_by_default(x, cls):
        return _deepcopy_object(x, cls, memo)
    return call_original(_copy.deepcopy, x)


# What a class that copies by the default reduction inherits from object (3.10 has no
# object.__getstate__).
_DEFAULT_REDUCTION = {"__reduce_ex__": object.__reduce_ex__, "__reduce__": object.__reduce__,
                      "__getstate__": getattr(object, "__getstate__", None),
                      "__setstate__": None, "__deepcopy__": None, "__new__": object.__new__,
                      "__slots__": None}


def _copies_by_default(x, cls) -> bool:
    """Whether deepcopy(x) is copyreg.__newobj__(cls) with x's instance dict: a plain class (not
    a metaclass, no copyreg entry) that keeps object's reduction and ``__new__`` and has no
    slots in its MRO (a builtin's subclass has the builtin's ``__new__``)."""
    if type(cls) is not type or issubclass(cls, type) or cls in dispatch_table:
        return False
    for name, inherited in _DEFAULT_REDUCTION.items():
        if getattr(cls, name, None) is not inherited:
            return False
    return getattr(x, "__deepcopy__", None) is None


def _deepcopy_object(x, cls, memo):
    """copy._reconstruct of the default reduction: a new object, remembered before its state is
    copied (the state may refer back to it), then its instance dict filled from the copy."""
    result = object.__new__(cls)
    memo.append((x, result))
    state = _deepcopy(dict(x.__dict__), memo)
    result.__dict__.update(state)
    return result
