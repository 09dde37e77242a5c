"""NumPy reductions of floating arrays, computed by NumPy itself when the graph runs.

``torch._numpy`` gives NumPy's dtypes and shapes, but its sums are torch's: ``np.sum`` of a
float32 array adds in NumPy's pairwise order (blocks of eight partial sums), torch's CPU sum in
its own cascade, and ``np.cumsum`` of float32 accumulates in float32 where torch accumulates in
double. The results differ in the last bits, and a later ``cos`` or comparison makes that a
different answer from eager's. So a NumPy function whose floating result depends on the order of
its additions (:data:`ORDERED_FUNCTIONS`, the ndarray methods :data:`ORDERED_METHODS`, ``@``) is
one graph node, ``graphlift::numpy_ordered``: a custom operator whose kernel converts its tensors
to arrays and calls the real NumPy function, and whose fake kernel asks ``torch._numpy`` (on
meta tensors) for the result's shape and dtype. Being an operator, it stays whole under
AOTAutograd and Inductor (a fallback kernel), which would otherwise decompose a plain Python
target back into torch's sum.

The non-array arguments travel as the operator's ``options`` string (a Python literal, arrays
replaced by markers), so only constants qualify; a call with ``out=`` (a write) or a
non-constant argument is traced as before, through torch._numpy. Partial: linear algebra
(``np.linalg.solve``, ``eig``...) and FFTs still run through torch's kernels, which may differ
from NumPy's LAPACK / pocketfft in the last bits.
"""

from __future__ import annotations

import ast
import functools
import operator
from typing import Any

import numpy as np
import torch
import torch._numpy as tnp

# NumPy functions whose floating results depend on the order of additions, by dotted name.
ORDERED_FUNCTIONS = {id(getattr(np, name)): name for name in (
    "sum", "nansum", "mean", "nanmean", "average", "var", "nanvar", "std", "nanstd", "cumsum",
    "nancumsum", "cumprod", "nancumprod", "prod", "nanprod", "dot", "vdot", "inner", "matmul",
    "tensordot", "einsum", "trace", "cov", "corrcoef", "convolve", "correlate")}
ORDERED_FUNCTIONS[id(np.linalg.norm)] = "linalg.norm"
# ndarray methods that are these functions with the array first (a.sum(0) is np.sum(a, 0)).
ORDERED_METHODS = frozenset({
    "sum", "mean", "var", "std", "cumsum", "cumprod", "prod", "dot", "trace"})
ORDERED_OPERATORS = {operator.matmul: "matmul"}

FLOATING_KINDS = frozenset("fc")  # NumPy dtype kinds: floating, complex
_MARK = "\x00array:"  # an array argument inside ``options`` (no user string starts with NUL)


def mark(index: int) -> str:
    """The stand-in for the ``index``-th tensor argument inside ``options``."""
    return f"{_MARK}{index}"


def is_literal(options: str) -> bool:
    """Whether ``options`` reads back as the Python literal it was written from."""
    try:
        ast.literal_eval(options)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _decode(options: str, arrays: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    def fill(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(_MARK):
            return arrays[int(value[len(_MARK):])]
        if isinstance(value, list | tuple):
            return type(value)(fill(v) for v in value)
        return value

    args, kwargs = ast.literal_eval(options)
    return fill(args), {k: fill(v) for k, v in kwargs.items()}


def _resolve(root: Any, name: str) -> Any:
    """``name`` ("sum", "linalg.norm") in NumPy (``root`` np) or in torch._numpy (tnp)."""
    fn = root
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn


def _meta_result(name: str, tensors: list[torch.Tensor], options: str) -> torch.Tensor:
    """What torch._numpy makes of the call: the result's shape and dtype (NumPy's)."""
    arrays = [tnp.ndarray(t) for t in tensors]
    args, kwargs = _decode(options, arrays)
    result = _resolve(tnp, name)(*args, **kwargs)
    return result.tensor if isinstance(result, tnp.ndarray) else torch.as_tensor(result)


@torch.library.custom_op("graphlift::numpy_ordered", mutates_args=())
def numpy_ordered(name: str, tensors: list[torch.Tensor], options: str) -> torch.Tensor:
    """NumPy's ``name`` on the tensors' data, with NumPy's order of additions."""
    arrays = [t.resolve_conj().resolve_neg().numpy() for t in tensors]
    args, kwargs = _decode(options, arrays)
    result = torch.from_numpy(np.array(_resolve(np, name)(*args, **kwargs)))
    dtype, shape = _result_spec(name, options, tuple((t.shape, t.dtype) for t in tensors))
    # torch._numpy and NumPy agree on result dtypes for these functions; the cast keeps the
    # graph's metadata true if a NumPy version ever differs.
    return result.to(dtype).reshape(shape)


@functools.lru_cache(maxsize=256)
def _result_spec(name: str, options: str, specs: tuple) -> tuple[torch.dtype, torch.Size]:
    """The result's dtype and shape for inputs of these shapes and dtypes, asked of
    torch._numpy on meta tensors once per kind of call (the kernel runs on every graph call)."""
    meta = _meta_result(name, [torch.empty(shape, dtype=dtype, device="meta")
                               for shape, dtype in specs], options)
    return meta.dtype, meta.shape


@numpy_ordered.register_fake
def _(name: str, tensors: list[torch.Tensor], options: str) -> torch.Tensor:
    meta = _meta_result(name, tensors, options)
    return torch.empty_like(meta, memory_format=torch.contiguous_format)


def ordered_name(fn: Any, kind: str) -> str | None:
    """The dotted NumPy name of ``fn`` when it is order sensitive: a NumPy function
    (``kind`` "function"), an ndarray method name ("method"), or an operator ("operator")."""
    if kind == "function":
        return ORDERED_FUNCTIONS.get(id(fn))
    if kind == "method":
        return fn if fn in ORDERED_METHODS else None
    return ORDERED_OPERATORS.get(fn)
