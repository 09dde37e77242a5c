"""Which Python values are constants: folded while tracing, baked into generated code, and
compared by value where a guard or a structure key records them. Below every pipeline stage that
asks (the variable trackers, ``module_structure``)."""

from __future__ import annotations

import re
import types
from typing import Any

import torch

# Immutable values that may be folded and baked into generated code.
CONSTANT_TYPES: tuple[type, ...] = (
    type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented),
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size, slice, range,
    types.GenericAlias,  # list[Tensor], as typing.cast's first argument (torch.optim)
    types.UnionType,  # int | None: a field's annotation, which strict dataclasses check against
    re.Pattern, re.Match,  # compiled patterns and their matches: immutable, methods pure
)


def is_constant_value(value: Any) -> bool:
    """True for constants, and tuples/frozensets made only of constants."""
    if isinstance(value, (tuple, frozenset)) and type(value) in (tuple, frozenset, torch.Size):
        return all(is_constant_value(v) for v in value)
    return type(value) in CONSTANT_TYPES
