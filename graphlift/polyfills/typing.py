"""typing's run-time helpers that do nothing but return their argument."""

from __future__ import annotations

from typing import Any


def cast(typ: Any, val: Any) -> Any:
    """typing.cast: ``val`` itself."""
    return val
