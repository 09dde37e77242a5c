"""Stand-ins for torch.compile's own queries and markers, answering as they do in compiled code.

The trace rules send calls of ``torch.compiler.is_compiling()`` (and its aliases) and
``torch._dynamo.mark_static`` here (``trace_rules.TORCH_MARKERS``); the stand-in is inlined, so a
query folds to a constant and the branch it guards is traced as torch.compile traces it.
"""

from __future__ import annotations

import torch


def is_compiling() -> bool:
    """``torch.compiler.is_compiling()``: True in every frame graphlift compiles."""
    return True


def is_exporting() -> bool:
    """``torch.compiler.is_exporting()``: graphlift never exports."""
    return False


def mark_static(t, index=None):
    """``torch._dynamo.mark_static`` inside a compiled frame: keep those sizes constants.

    As in torch.compile, this specializes the sizes of this compile (a dynamic size gets a guard
    on its value). A branch on a size is what makes the trace keep its value.
    """
    if not isinstance(t, torch.Tensor):
        return t  # an nn.Module class: torch.compile leaves it unchanged too
    dims = range(t.dim()) if index is None else [index] if isinstance(index, int) else index
    for dim in dims:
        if t.size(dim):  # specializes the size: the trace guards its value
            pass
    return None
