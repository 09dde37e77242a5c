"""The code object's extra slot, reached from Python through ctypes.

CPython gives every code object a small array of "extra" pointers (PEP 523) for tools like
JITs. graphlift keeps its per-code cache there: the entry lives exactly as long as the code
object, with no global dict to keep code objects alive or to clean up.

We request one slot index at import, with the C function ``Py_DecRef`` as the slot's free
function, so CPython releases the stored object when the code object dies and no Python code
runs during deallocation. Storing takes a new reference (``Py_IncRef``) that the slot owns.

Reading the slot costs about 1.6 µs (``_PyCode_GetExtra`` plus the ``py_object`` cast), more
than a whole guard check. Callers must look the object up once, when a wrapper is created or a
frame is first seen, and keep a direct reference; never call :func:`get_extra` per call.
"""

from __future__ import annotations

import ctypes
import sys
import types
from collections.abc import Callable
from typing import Any

if sys.version_info[:2] not in ((3, 10), (3, 11), (3, 12), (3, 13)):
    # The C API below is checked on 3.10 to 3.13 only; other versions may change its contract.
    raise ImportError(f"graphlift.code_extra supports CPython 3.10 to 3.13, not {sys.version}")

# 3.10 and 3.11 export the _Py* names; 3.12 renamed the functions PyUnstable_* (3.13 kept those
# names); the old names became static inline functions, which ctypes cannot reach. The contract
# (SetExtra frees the value it replaces) stayed the same.
_NAMES = {
    "request": ("PyUnstable_Eval_RequestCodeExtraIndex", "_PyEval_RequestCodeExtraIndex"),
    "get": ("PyUnstable_Code_GetExtra", "_PyCode_GetExtra"),
    "set": ("PyUnstable_Code_SetExtra", "_PyCode_SetExtra"),
}


def _exported(kind: str) -> str:
    """The name under which this CPython exports one of the code-extra functions."""
    return next(name for name in _NAMES[kind] if hasattr(ctypes.pythonapi, name))


def _c_function(name: str, restype: type | None, *argtypes: type) -> Callable[..., Any]:
    """A private prototype of a C API function.

    Private because ``ctypes.pythonapi.<name>.argtypes`` is shared by the whole process: another
    library declaring ``Py_IncRef`` with a ``py_object`` argument would make our raw addresses
    be read as Python ints.
    """
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_request_code_extra_index = _c_function(
    _exported("request"), ctypes.c_ssize_t, ctypes.c_void_p
)
_get_code_extra = _c_function(
    _exported("get"),
    ctypes.c_int,
    ctypes.py_object,
    ctypes.c_ssize_t,
    ctypes.POINTER(ctypes.c_void_p),
)
_set_code_extra = _c_function(
    _exported("set"), ctypes.c_int, ctypes.py_object, ctypes.c_ssize_t, ctypes.c_void_p
)
# PYFUNCTYPE prototypes raise the Python error a failing call sets, so callers check no status.
# Raw addresses, not py_object: py_object arguments would add and drop their own references.
_incref = _c_function("Py_IncRef", None, ctypes.c_void_p)
_decref = _c_function("Py_DecRef", None, ctypes.c_void_p)


def _request_index() -> int:
    """Reserve this process's extra slot, freed by ``Py_DecRef`` when a code object dies."""
    free_func = ctypes.cast(_decref, ctypes.c_void_p)
    index = _request_code_extra_index(free_func)
    if index < 0:
        raise RuntimeError("CPython refused a code extra index (all slots are taken)")
    return index


# Requested once: each request uses up one of the interpreter's few slots (255 at most).
_INDEX = _request_index()


def get_extra(code: types.CodeType) -> object | None:
    """Return the object stored on ``code``, or None. Costs ~1.6 µs: look up once, keep it."""
    if not isinstance(code, types.CodeType):
        raise TypeError(f"expected a code object, got {type(code).__name__}")
    pointer = ctypes.c_void_p()
    _get_code_extra(code, _INDEX, ctypes.byref(pointer))
    if pointer.value is None:
        return None
    return ctypes.cast(pointer, ctypes.py_object).value


def set_extra(code: types.CodeType, obj: object | None) -> None:
    """Store ``obj`` on ``code``, releasing any previous object; None clears the slot."""
    if not isinstance(code, types.CodeType):
        raise TypeError(f"expected a code object, got {type(code).__name__}")
    new = None if obj is None else id(obj)
    # On 3.11.7 and 3.12.1 SetExtra itself passes the value it replaces to the free function
    # (measured: releasing the old value here as well frees it twice and crashes).
    _set_code_extra(code, _INDEX, new)
    if new is not None:
        _incref(new)  # the slot's own reference; `obj` keeps it alive until here
