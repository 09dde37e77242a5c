"""The drop-in switch: ``torch.compile`` and ``nn.Module.compile`` run graphlift, program-wide.

:func:`install` replaces ``torch.compile`` (so also ``torch.compiler.compile``, which calls it)
and ``torch.nn.Module.compile`` with graphlift's, so the compiles that libraries make
(transformers, accelerate, Lightning, diffusers call them themselves) go through graphlift too.
``torch.compiler.reset()`` then also clears graphlift's caches, and a compiled module is an
instance of ``torch._dynamo.OptimizedModule`` (``eval_frame.torch_compatible``), as the libraries
check. :func:`uninstall` puts torch's back. ``GRAPHLIFT_INSTALL=1`` installs when graphlift is
imported, and ``python -m graphlift run SCRIPT`` imports it, installs, and runs the script.

The replacement takes torch.compile's arguments and means what they mean there: the default
backend is torch's (``"inductor"``, or what ``torch.compiler.set_default_backend`` chose),
``mode``, ``options``, ``fullgraph``, ``dynamic``, ``recompile_limit`` and ``disable`` pass on to
:func:`graphlift.compile`, and a backend name only torch knows is taken from torch's registry.
A module that did ``from torch import compile`` before :func:`install` keeps torch's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from graphlift import backends, eval_frame

INSTALL_ENV = "GRAPHLIFT_INSTALL"

# What install() replaced: (owner, attribute) -> torch's original. Empty when not installed.
_replaced: dict[tuple[Any, str], Any] = {}


def compile(model: Callable | None = None, *, fullgraph: bool = False,
            dynamic: bool | None = None, backend: str | Callable | None = None,
            mode: str | None = None, options: dict[str, Any] | None = None,
            name: str | None = None, disable: bool = False, recompile_limit: int | None = None,
            isolate_recompiles: bool = False, shapes_spec: Any = None) -> Callable:
    """``torch.compile`` with torch's signature and defaults, compiled by graphlift.

    ``name`` labels torch's own debug metadata; graphlift has none, so it is only checked.
    ``isolate_recompiles`` and ``shapes_spec`` are refused: graphlift has neither.
    """
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a string or None, got {name!r}")
    if isolate_recompiles is not False or shapes_spec is not None:
        raise ValueError("graphlift does not support torch.compile's isolate_recompiles= or "
                         "shapes_spec=")
    return eval_frame.compile(model, backend=_backend(backend), fullgraph=fullgraph,
                              dynamic=dynamic, mode=mode, options=options, disable=disable,
                              recompile_limit=recompile_limit)


def module_compile(self: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
    """``nn.Module.compile``: from now on the module's calls run compiled, in place.

    As torch's does, it compiles the module's ``_call_impl`` (hooks and forward) and keeps it as
    ``_compiled_call_impl``, which ``Module.__call__`` runs instead.
    """
    self._compiled_call_impl = compile(self._call_impl, *args, **kwargs)


def _reset_too(original: Callable) -> Callable:
    def reset() -> None:
        """``torch.compiler.reset``, which now also clears graphlift's caches."""
        eval_frame.reset()
        original()

    return reset


_TORCH_REGISTRY = "torch._dynamo.backends.registry"  # torch's backends by name


def _backend(backend: str | Callable | None) -> str | Callable:
    """torch.compile's backend: its default when None; a name graphlift lacks from torch's."""
    if backend is None:
        registry = sys.modules.get(_TORCH_REGISTRY)  # loaded if the program set a default
        return registry.get_default_backend() if registry is not None else "inductor"
    if isinstance(backend, str) and backend not in backends.list_backends():
        from torch._dynamo.backends import registry  # torch's backends: imported on demand

        if backend in registry.list_backends(exclude_tags=()):
            backends.register_backend(backend, registry.lookup_backend(backend))
    return backend


def install() -> None:
    """Route ``torch.compile`` and ``nn.Module.compile`` through graphlift (see the module)."""
    if _replaced:
        return
    for owner, attr, replacement in ((torch, "compile", compile),
                                     (torch.nn.Module, "compile", module_compile),
                                     (torch.compiler, "reset", None)):
        original = getattr(owner, attr)
        _replaced[(owner, attr)] = original
        setattr(owner, attr, replacement or _reset_too(original))
    eval_frame.torch_classes[0] = True  # compiled modules are torch's wrapper class too


def uninstall() -> None:
    """Put torch's ``torch.compile``, ``nn.Module.compile`` and ``torch.compiler.reset`` back.

    Functions compiled meanwhile stay compiled by graphlift.
    """
    for (owner, attr), original in _replaced.items():
        setattr(owner, attr, original)
    _replaced.clear()
    eval_frame.torch_classes[0] = False


def installed() -> bool:
    """Whether :func:`install` is in force."""
    return bool(_replaced)


def configure_from_env() -> None:
    """``GRAPHLIFT_INSTALL=1``: install when graphlift is imported."""
    value = os.environ.get(INSTALL_ENV, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"{INSTALL_ENV} must be 1 (install) or 0, got {value!r}")
    if value == "1":
        install()
