"""One registry of graphlift's settings, each with its default and a one-line doc.

Read a setting as an attribute (``graphlift.config.recompile_limit``), set it the same way, and use
``config.patch(name=value, ...)`` as a context manager or decorator to change settings temporarily.
Unknown names raise ``AttributeError`` so that a typo never silently does nothing, and a value of
the wrong kind (``recompile_limit="many"``) raises ``TypeError`` where it is set.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    """A documented knob: its default and what it does."""

    default: Any
    doc: str


# The registry: name -> Setting. Keep the doc to one line; docs/guide.md lists these
# (tests/test_docs.py checks that its Settings table matches the registry).
SETTINGS: dict[str, Setting] = {
    "recompile_limit": Setting(
        8, "max cache entries per code object (and module instance) before it runs eagerly"
    ),
    "accumulated_recompile_limit": Setting(
        256, "max recompiles (entries beyond a code object's first) across the process; "
        "past it, misses of code objects that have an entry run eagerly"
    ),
    "fail_on_recompile_limit_hit": Setting(
        False, "raise RecompileLimitExceeded instead of falling back to eager at a limit"
    ),
    "error_on_recompile": Setting(
        False, "raise RecompileError on any recompile (tests, debugging)"
    ),
    "raise_internal_errors": Setting(
        False, "raise graphlift's own errors instead of warning once and running the frame "
        "eagerly (on in graphlift's tests)"
    ),
    "verbose": Setting(False, "include graphlift's own stack in logged errors"),
    # Verify mode (graphlift/verify.py).
    "verify": Setting(
        0, "on every Nth cache hit of an entry without side effects, also run the function "
        "eagerly and compare; a difference is reported and the entry runs eagerly from then on "
        "(also GRAPHLIFT_VERIFY=N); 0: off"
    ),
    "progress_seconds": Setting(
        2.0, "a compile running longer says what it is doing and its phase times at INFO "
        "(GRAPHLIFT_LOGS=progress)"
    ),
    # Trace rules (graphlift/trace_rules.py). Module names match their submodules too.
    "inline_modules": Setting(
        (), "extra modules whose Python functions are traced (beats the skip lists)"
    ),
    "skip_modules": Setting(
        (), "extra modules whose functions are skipped: a call is a graph break"
    ),
    "use_polyfills": Setting(
        True, "trace pure-Python stand-ins for C functions (itertools, heapq, ...)"
    ),
    "compile_eager_callees": Setting(
        True, "a frame that runs eagerly as a whole (and a disable(recursive=False) function) "
        "runs a copy of its code whose calls of user functions and modules run them compiled"
    ),
    # Distributed training (graphlift/ddp_optimizer.py).
    "optimize_ddp": Setting(
        True, "inside a DistributedDataParallel forward, split each graph at DDP's gradient "
        "buckets so each bucket's all-reduce can start while backward continues"
    ),
    "enable_compiler_collectives": Setting(
        False, "with torch.distributed initialized, ranks exchange the sizes and ints each "
        "compile sees, so all make the same values dynamic (graphlift/compiler_collectives.py)"
    ),
    "compiler_collectives_timeout_s": Setting(
        30, "seconds a compile waits for the other ranks' sizes before deciding alone"
    ),
    # Data-dependent values (graphlift/variables/tensor.py). fullgraph=True turns both on, as
    # torch.compile 2.13 does: there a break would be an error anyway.
    "capture_scalar_outputs": Setting(
        False, "keep .item() and .tolist() in the graph as unbacked symbols instead of breaking"
    ),
    "capture_dynamic_output_shape_ops": Setting(
        False, "keep nonzero, x[mask], masked_select, unique in the graph with unbacked sizes"
    ),
    # NumPy (graphlift/variables/numpy.py).
    "trace_numpy": Setting(
        True, "trace NumPy calls on arrays made from tensors as torch operations (torch._numpy)"
    ),
    # nn.Module guards (graphlift/variables/nn_module.py).
    "share_module_entries": Setting(
        True, "a module passed as an argument (L['self']) is guarded by its structure, not its "
        "identity: instances alike share cache entries (regional compilation)"
    ),
    "guard_torch_module_constants": Setting(
        False, "guard hyperparameters read from torch.nn's own layers (Dropout.p, LayerNorm.eps); "
        "off: fixed after construction (training flags are always guarded)"
    ),
    # Warm start (graphlift/persist.py).
    "cache_dir": Setting(
        None, "save compiled entries in this directory and load them in later processes "
        "(also GRAPHLIFT_CACHE_DIR); None: off"
    ),
    # Guards (graphlift/guards.py).
    "cpp_tensor_guards": Setting(
        True, "on a cache hit, check tensors' metadata with torch's C++ TensorGuards (the "
        "generated Python checks stay the fallback and what logs show)"
    ),
}


# Settings that an environment variable sets when graphlift is imported (an int setting: the
# variable's digits; anything else is ignored with a warning).
ENV_SETTINGS: dict[str, str] = {
    "verify": "GRAPHLIFT_VERIFY",  # run the test suite or a program under verify mode
}


class Config:
    """Attribute access over :data:`SETTINGS`, with ``patch`` for temporary changes."""

    def __init__(self) -> None:
        object.__setattr__(self, "_values", {k: s.default for k, s in SETTINGS.items()})
        self._values.update(_from_environment())

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name not in values:
            known = ", ".join(sorted(values))
            raise AttributeError(f"graphlift.config has no setting {name!r}; known: {known}")
        return values[name]

    def __setattr__(self, name: str, value: Any) -> None:
        self.__getattr__(name)
        check_value(name, value)
        self._values[name] = value

    def __dir__(self) -> list[str]:
        return sorted(self._values) + ["patch", "defaults", "reset_to_defaults"]

    def defaults(self) -> dict[str, Any]:
        """The default value of every setting."""
        return {k: s.default for k, s in SETTINGS.items()}

    def reset_to_defaults(self) -> None:
        """Put every setting back to its default, or to what the environment set at import
        (``GRAPHLIFT_VERIFY=1 pytest`` verifies every test, though each resets the settings)."""
        self._values.update(self.defaults())
        self._values.update(_from_environment())

    def patch(self, **changes: Any) -> _Patch:
        """Change settings inside a ``with`` block or a decorated function; restores on exit."""
        for name, value in changes.items():
            self.__getattr__(name)
            check_value(name, value)
        return _Patch(self, changes)


def _from_environment() -> dict[str, Any]:
    """The values :data:`ENV_SETTINGS` give, from the environment at import."""
    values = {}
    for name, variable in ENV_SETTINGS.items():
        text = os.environ.get(variable, "").strip()
        if not text:
            continue
        if text.isdigit():
            values[name] = int(text)
        else:
            warnings.warn(f"{variable}={text!r} is not a count (0 or more); ignored",
                          stacklevel=2)
    return values


def live_values(settings: Config) -> dict[str, Any]:
    """The dict ``settings`` reads from, changed in place by every set, ``patch`` and reset:
    the compiled wrappers' hit path reads ``verify`` from it with one subscript."""
    return object.__getattribute__(settings, "_values")


def check_value(name: str, value: Any) -> None:
    """Refuse a value unlike the setting's default: a bool for a switch, an int for a limit,
    a tuple (or list) of module names for a module list."""
    default = SETTINGS[name].default
    if isinstance(default, bool):
        ok, kind = isinstance(value, bool), "True or False"
    elif isinstance(default, int):
        ok, kind = type(value) is int and value >= 0, "an int, 0 or more"
    elif isinstance(default, tuple):
        ok = isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value)
        kind = "a tuple of module names"
    else:
        ok, kind = True, ""
    if not ok:
        raise TypeError(f"graphlift.config.{name} must be {kind}, got {value!r}")


class _Patch(contextlib.ContextDecorator):
    """Context manager and decorator returned by :meth:`Config.patch`."""

    def __init__(self, config: Config, changes: dict[str, Any]) -> None:
        self._config = config
        self._changes = changes
        self._saved: list[dict[str, Any]] = []

    def __enter__(self) -> _Patch:
        values = self._config._values
        self._saved.append({k: values[k] for k in self._changes})
        values.update(self._changes)
        return self

    def __exit__(self, *exc: object) -> None:
        self._config._values.update(self._saved.pop())

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def patched(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return patched


def iter_settings() -> Iterator[tuple[str, Setting]]:
    """Every setting with its default and doc, for docs/guide.md and ``graphlift doctor``."""
    return iter(SETTINGS.items())


config = Config()
