"""Structural comparison of what eager and compiled runs left behind.

``differences(eager, compiled)`` walks two values side by side and returns the paths where they
differ. Tensors (and ndarrays) must have the same type, dtype, shape and ``requires_grad``, and
equal values (``torch.equal``, else ``allclose`` at rtol 1e-5 / atol 1e-6 with NaNs equal), and
the same Python attributes (``t.tag = 3``); a tensor subclass's type is compared like any other;
containers are compared item by item; modules by their parameters, buffers, submodules, hooks
and public attributes; instances of the program's own classes (each run has its own copy of
the class) by class name and attributes.
"""

from __future__ import annotations

import dataclasses
import math
import types
from typing import Any

import numpy as np
import torch

RTOL, ATOL = 1e-5, 1e-6


def differences(eager: Any, compiled: Any, path: str = "result", limit: int = 3) -> list[str]:
    """Up to ``limit`` descriptions of where ``compiled`` differs from ``eager``."""
    found: list[str] = []
    _walk(eager, compiled, path, found, limit, set())
    return found


def _walk(e: Any, c: Any, path: str, found: list[str], limit: int, seen: set) -> None:
    if len(found) >= limit:
        return
    key = (id(e), id(c))
    if key in seen:  # a cycle, or an object reached twice
        return
    seen.add(key)
    if not _same_type(e, c):
        found.append(f"{path}: {_type(c)} compiled, {_type(e)} eager")
    elif isinstance(e, torch.Tensor):
        problem = tensor_difference(e, c)
        if problem:
            found.append(f"{path}: {problem}")
        elif vars(e) or vars(c):  # Python attributes set on the tensor
            _walk(dict(vars(e)), dict(vars(c)), f"{path}.__dict__", found, limit, seen)
    elif isinstance(e, torch.nn.Module):
        _walk(module_state(e), module_state(c), path, found, limit, seen)
    elif isinstance(e, (list, tuple)):
        if len(e) != len(c):
            found.append(f"{path}: {len(c)} items compiled, {len(e)} eager")
            return
        for i, (a, b) in enumerate(zip(e, c)):
            _walk(a, b, f"{path}[{i}]", found, limit, seen)
    elif isinstance(e, dict):
        if list(e) != list(c):
            found.append(f"{path}: keys {list(c)} compiled, {list(e)} eager")
            return
        for k in e:
            _walk(e[k], c[k], f"{path}[{k!r}]", found, limit, seen)
    elif isinstance(e, np.ndarray):  # an ndarray argument, after the call
        problem = tensor_difference(torch.from_numpy(e), torch.from_numpy(c))
        if problem:
            found.append(f"{path} (ndarray): {problem}")
    elif isinstance(e, (set, frozenset)):
        if e != c:
            found.append(f"{path}: {c!r} compiled, {e!r} eager")
    elif isinstance(e, float):
        if not (math.isnan(e) and math.isnan(c) or e == c
                or math.isclose(e, c, rel_tol=RTOL, abs_tol=ATOL)):
            found.append(f"{path}: {c!r} compiled, {e!r} eager")
    elif is_user_object(e):
        _walk(attributes(e), attributes(c), f"{path}.__dict__", found, limit, seen)
    elif isinstance(e, (types.FunctionType, type, types.ModuleType, types.GeneratorType)):
        return  # compared by name through _same_type
    elif type(e).__eq__ is object.__eq__:
        return  # equal only to itself (a super object, an iterator): its type is all to compare
    elif e != c:
        found.append(f"{path}: {c!r} compiled, {e!r} eager")


def tensor_difference(e: torch.Tensor, c: torch.Tensor) -> str | None:
    # Each run has its own copy of a program's tensor subclass, and two unrelated subclasses
    # refuse each other's operations (their types are compared already): compare the data.
    with torch._C.DisableTorchFunctionSubclass():
        return _tensor_difference(e, c)


def _tensor_difference(e: torch.Tensor, c: torch.Tensor) -> str | None:
    for what in ("dtype", "shape", "requires_grad", "device", "layout"):
        if getattr(e, what) != getattr(c, what):
            return f"{what} {getattr(c, what)} compiled, {getattr(e, what)} eager"
    if torch.equal(e, c):
        return None
    if e.dtype.is_floating_point and torch.allclose(e.detach(), c.detach(), rtol=RTOL, atol=ATOL,
                                                     equal_nan=True):
        return None
    return f"values differ:\n      compiled {_short(c)}\n      eager    {_short(e)}"


def _short(t: torch.Tensor) -> str:
    return " ".join(torch.Tensor.__repr__(t.detach()).split())[:300]


def _same_type(e: Any, c: Any) -> bool:
    te, tc = type(e), type(c)
    if te is tc:
        return True
    # Each run defines the program's classes anew: the same class is the same qualified name.
    return te.__qualname__ == tc.__qualname__ and te.__module__.startswith("fuzzprog") and \
        tc.__module__.startswith("fuzzprog")


def _type(value: Any) -> str:
    return type(value).__qualname__


def is_user_object(value: Any) -> bool:
    """An instance of a class the program defined (compared by its attributes)."""
    return type(value).__module__.startswith("fuzzprog") and not isinstance(value, type) and (
        hasattr(value, "__dict__") or dataclasses.is_dataclass(value))


def module_state(module: torch.nn.Module) -> dict:
    """What a call may change in a module: its tensors, submodules, public attributes and how
    many hooks it has (hook handles are numbered process-wide, so the keys are left out)."""
    public = {k: v for k, v in vars(module).items() if not k.startswith("_")}
    hooks = {k: len(v) for k, v in vars(module).items() if k.endswith("_hooks")
             and isinstance(v, dict)}
    return {"parameters": dict(module._parameters), "buffers": dict(module._buffers),
            "modules": dict(module._modules), "attributes": public, "hooks": hooks}


def attributes(value: Any) -> dict:
    return dict(vars(value)) if hasattr(value, "__dict__") else {}


def program_state(namespace: dict) -> dict:
    """The program's globals that a call may change: data, and the data attributes of its
    classes (a class counter is state too). Functions, classes and modules are left out."""
    state = {}
    for name, value in namespace.items():
        if name.startswith("__") or isinstance(value, (types.ModuleType, types.FunctionType)):
            continue
        if isinstance(value, type):
            data = {k: v for k, v in vars(value).items()
                    if not k.startswith("__") and not callable(v)
                    and not isinstance(v, (property, staticmethod, classmethod))
                    and not (isinstance(v, tuple) and k == "_fields")}
            if data and not hasattr(value, "_fields"):
                state[name] = data
            continue
        if callable(value):
            continue
        state[name] = value
    return state
