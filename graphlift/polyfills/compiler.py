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


def current_dispatch_modes() -> list:
    """``torch.utils._python_dispatch._get_current_dispatch_mode_stack()``: no mode is active,
    as every entry's guards check (``guards.mode_stacks``); the trace's own fake mode is not the
    program's (``nn.MultiheadAttention``'s fast-path check reads the stack)."""
    return []


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


def associative_scan(combine_fn, xs, dim, reverse=False, combine_mode="pointwise"):
    """``torch._higher_order_ops.associative_scan`` (what transformers' Mamba calls once it sees
    ``is_compiling()``), written as the scan it computes: ``combine_fn`` applied to the running
    value and each next slice along ``dim`` in turn.

    torch.compile traces the higher-order op with ``combine_fn`` as a subgraph; graphlift has no
    higher-order ops, so the scan is unrolled into the graph (one ``combine_fn`` per step). The
    slices have ``dim`` removed, which is what ``combine_fn`` sees under the op's ``vmap`` too. An
    associative ``combine_fn`` gives the op's values up to floating-point rounding: the op
    brackets the steps as a tree, this left to right. Only tensors and flat tuples or lists of
    tensors are taken; other trees run the original.
    """
    from torch._higher_order_ops.associative_scan import associative_scan as original

    if combine_mode not in ("pointwise", "generic"):
        raise ValueError(f"Combine_mode must either 'pointwise' or 'generic', but got "
                         f"{combine_mode}")
    single = isinstance(xs, torch.Tensor)
    leaves = [xs] if single else xs
    if type(leaves) not in (tuple, list) or not leaves or not callable(combine_fn) or \
            not all(isinstance(leaf, torch.Tensor) and leaf.ndim > 0 for leaf in leaves) or \
            leaves[0].shape[dim] == 0:  # the op's own errors, and trees, from the original
        return original(combine_fn, xs, dim, reverse=reverse, combine_mode=combine_mode)
    if combine_mode == "pointwise" and not all(leaf.device.type in ("cuda", "xpu")
                                               for leaf in leaves):
        raise ValueError("For combine_mode='pointwise', all input tensors need to be on CUDA or "
                         "XPU")

    def pack(values):
        return values[0] if single else type(xs)(values)

    steps = range(leaves[0].shape[dim])
    running = None
    outs = [[] for _ in leaves]
    for i in (reversed(steps) if reverse else steps):
        item = [leaf.select(dim, i) for leaf in leaves]
        if running is None:
            running = item
        else:
            combined = combine_fn(pack(running), pack(item))
            running = [combined] if single else list(combined)
        for out, value in zip(outs, running):
            out.append(value)
    if reverse:
        outs = [out[::-1] for out in outs]
    return pack([torch.stack(out, dim) for out in outs])
