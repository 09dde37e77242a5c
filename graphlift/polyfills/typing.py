"""typing's run-time helpers: ``cast``, which returns its argument, and the introspection of
annotations (``get_origin``, ``get_args``), which on a constant annotation run for real (their
rows are constant-foldable) and otherwise run eagerly."""

from __future__ import annotations

import typing as _typing
from typing import Any

from graphlift.polyfills.support import call_original


def cast(typ: Any, val: Any) -> Any:
    """typing.cast: ``val`` itself."""
    return val


def get_origin(tp: Any) -> Any:
    """typing.get_origin of an annotation that is not a constant: the original, eagerly."""
    return call_original(_typing.get_origin, tp)


def get_args(tp: Any) -> Any:
    """typing.get_args of an annotation that is not a constant: the original, eagerly."""
    return call_original(_typing.get_args, tp)
