"""NumPy code traced as torch operations, through ``torch._numpy``.

An ``ndarray`` made from a tensor (``t.numpy()``, ``np.asarray(t)``) is a
:class:`NumpyArrayVariable`: the tensor holding its data, in the graph. NumPy functions
(``np.sin``, ``np.where``, ``np.linalg.norm``), ndarray methods and attributes, and Python
operators on arrays run through their ``torch._numpy`` counterparts, which implement NumPy's
semantics (dtypes, promotion, broadcasting) with torch operations: each call is one graph node
whose target is a :class:`NumpyCall` (the ``torch._numpy`` function between tensors). An array
that leaves the frame becomes a real ``ndarray`` again (``tensor.numpy()``), and a 0-d result
that NumPy gives as a scalar (``a.sum()``, ``a[0, 1]``, ufuncs and operators) a NumPy scalar
(``np.float32``). NumPy scalar types, dtypes, ``iinfo`` / ``finfo`` called on constants fold to
real NumPy objects.

``config.trace_numpy`` (on by default) switches this off: NumPy calls are then graph breaks.
Writes into arrays (``a += 1``, ``a[mask] = 0``, ``np.add(a, b, out=a)``, ``a.sort()``) are
traced too: torch._numpy writes into the array's tensor, which is the memory of the tensor the
array was made from, or of the argument array (fed to the graph by ``torch.from_numpy``), so the
caller sees the write as in eager. ``np.fft`` is traced where torch._numpy gives NumPy's dtypes
(double precision and integer input; NumPy 2 keeps single precision, torch._numpy does not).
Not traced (graph breaks): ``np.random`` (NumPy's own random stream, which a graph cannot
advance), ``np.fft`` of single precision and ``fftfreq``, NumPy functions that ``torch._numpy``
lacks, an array and a tensor mixed in one operator (eager runs NumPy's ufunc and wraps the
result in a Tensor, or raises TypeError), and arrays of dtypes torch lacks.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import torch
import torch._numpy as tnp
import torch.fx.graph
import torch.utils._pytree as pytree

from graphlift import trace_rules
from graphlift.config import config
from graphlift.exc import Unsupported
from graphlift.output_graph import storage_ref
from graphlift.rebuild import Codegen
from graphlift.sources import NumpyTensorSource, Source
from graphlift.variables.base import Translator, VariableTracker, raise_real
from graphlift.variables.constant import CONTAINER_WRAPPERS, ConstantVariable
from graphlift.variables.containers import (
    BaseListVariable,
    DictVariable,
    ListVariable,
    TupleVariable,
)
from graphlift.variables.numpy_order import FLOATING_KINDS, is_literal, mark, ordered_name
from graphlift.variables.symbolic import SliceVariable, concrete, specialize
from graphlift.variables.tensor import (
    ARRAY_METHODS,
    ARRAY_TORCH_FUNCTIONS,
    TensorVariable,
    call_torch,
    shape_variable,
)


# -- the graph's view of NumPy: torch._numpy between tensors -----------------------------------
def _to_tnp(value: Any) -> Any:
    """A graph value as torch._numpy sees it: tensors as arrays (NumPy scalars arrive as 0-d
    tensors, so that ``np.float32(2) * a`` never reaches NumPy's own ``__mul__``)."""
    if isinstance(value, torch.Tensor):
        return tnp.ndarray(value)
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    return value


def _from_tnp(value: Any) -> Any:
    if isinstance(value, tnp.ndarray):
        return value.tensor
    if isinstance(value, tnp.DType):
        return np.dtype(value.name)
    return value


class NumpyCall:
    """A graph node's target: ``fn`` (a ``torch._numpy`` function, an operator, a method name)
    applied to tensors seen as arrays; results come back as tensors."""

    def __init__(self, fn: Any, name: str) -> None:
        self.fn = fn
        self.__name__ = self.__qualname__ = f"numpy_{name}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = pytree.tree_map(_to_tnp, (args, kwargs))
        if isinstance(self.fn, str):  # a method or attribute of the first array
            attr = getattr(args[0], self.fn)
            result = attr(*args[1:], **kwargs) if callable(attr) else attr
        else:
            result = self.fn(*args, **kwargs)
        return pytree.tree_map(_from_tnp, result, is_leaf=lambda v: isinstance(v, tnp.ndarray))

    def __repr__(self) -> str:
        return self.__name__


_CALLS: dict[tuple[Any, str], NumpyCall] = {}


def numpy_call(fn: Any, name: str) -> NumpyCall:
    """One NumpyCall per function, so equal calls have equal graph targets."""
    key = (fn, name)
    if key not in _CALLS:
        _CALLS[key] = NumpyCall(fn, name)
    return _CALLS[key]


# -- which NumPy callables are traced ----------------------------------------------------------
# (NumPy module, its torch._numpy counterpart): functions of the same name are traced through it.
# Left out on purpose, so it runs eagerly: np.random (NumPy's random stream is its own, and a
# graph would draw from torch's; torch.compile traces it that way, graphlift keeps eager's
# numbers). np.fft is traced where torch._numpy gives NumPy's dtype (see FFT_SINGLE_PRECISION).
TRACED_MODULES = ((np, tnp), (np.linalg, tnp.linalg), (np.fft, tnp.fft))

# np.fft functions traced only on arrays of other dtypes than these: NumPy 2 transforms single
# precision in single precision (complex64 from float32), torch._numpy always in double
# (complex128; torch.compile returns that). Double precision and integers agree in both.
FFT_SINGLE_PRECISION = frozenset(np.dtype(n) for n in ("float16", "float32", "complex64"))
FFT_GATED = frozenset(id(getattr(np.fft, name)) for name in (
    "fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn",
    "irfftn", "hfft", "ihfft"))
# np.fft functions never traced: fftfreq and rfftfreq of ints are float64 in NumPy, float32 in
# torch._numpy.
UNTRACED = frozenset({np.fft.fftfreq, np.fft.rfftfreq})

# NumPy classes and functions folded on constant arguments: called for real while tracing.
FOLDED = frozenset({
    np.dtype, np.iinfo, np.finfo, np.result_type, np.can_cast, np.promote_types,
    *(t for t in np.sctypeDict.values() if isinstance(t, type) and issubclass(t, np.generic)),
})

# Functions whose 0-d result NumPy keeps as an array; every other 0-d result (ufuncs,
# reductions, operators, integer indexing) is a NumPy scalar.
ARRAY_RESULTS = frozenset({
    "array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "copy", "zeros",
    "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "reshape",
    "squeeze", "expand_dims", "transpose", "swapaxes", "moveaxis", "broadcast_to", "atleast_1d",
    "atleast_2d", "atleast_3d", "view", "astype", "ravel", "flatten",
})


def _traced_functions() -> dict[int, tuple[Any, Any]]:
    table = {}
    for module, counterpart in TRACED_MODULES:
        for name in dir(counterpart):
            ours, theirs = getattr(module, name, None), getattr(counterpart, name)
            if not name.startswith("_") and callable(ours) and callable(theirs) and \
                    not isinstance(ours, type) and not isinstance(ours, type(np)) and \
                    ours not in UNTRACED:
                table[id(ours)] = (ours, theirs)
    return table


TRACED_FUNCTIONS = _traced_functions()  # id -> (the NumPy function, its torch._numpy one)


def _register() -> None:
    """Tell the trace rules which NumPy callables this module traces (they sit below us)."""
    trace_rules.NUMPY_FUNCTIONS.update(TRACED_FUNCTIONS)
    trace_rules.NUMPY_FUNCTIONS.update({id(fn): (fn, None) for fn in FOLDED})


_register()

# A NumPy scalar constant in a graph node (x * np.float32(2.0)) is written by its repr,
# "np.float32(2.0)": the graph's code gets ``np`` as one of FX's builtins.
torch.fx.graph._register_custom_builtin("np", "import numpy as np", np)

# NumPy scalars read from folded objects (np.finfo(a.dtype).eps, np.iinfo(...).max of a
# np.int64) are constants, as the scalars np.float32(2.0) folds to.
CONTAINER_WRAPPERS.update({t: ConstantVariable for t in np.sctypeDict.values()
                           if isinstance(t, type) and issubclass(t, np.number | np.bool_)})


# -- trackers ----------------------------------------------------------------------------------
class NumpyArrayVariable(VariableTracker):
    """An ``ndarray`` (or a NumPy scalar, ``scalar``) whose data is a tensor of the graph."""

    def __init__(self, tensor: TensorVariable, scalar: bool = False,
                 source: Source | None = None) -> None:
        super().__init__(source)
        self.tensor = tensor
        self.scalar = scalar and tensor.fake.dim() == 0

    def describe(self) -> str:
        return f"ndarray {self.tensor.describe()}"

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(str(self.tensor.fake.dtype).removeprefix("torch."))

    def python_type(self) -> type:
        return self.dtype.type if self.scalar else np.ndarray

    def truthy(self, tx: Translator) -> bool:
        raise Unsupported("branching on an ndarray's value depends on data",
                          break_type="data_dependent_branch")

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        fake = self.tensor.fake
        if name == "shape":
            shape = shape_variable(tx, self.tensor)
            return TupleVariable(shape.items) if isinstance(shape, TupleVariable) \
                else ConstantVariable(tuple(shape.value))
        if name in ARRAY_CONSTANT_ATTRS:
            return ConstantVariable(ARRAY_CONSTANT_ATTRS[name](self, fake))
        if name in ("T", "real", "imag", "mT"):
            return call_numpy(tx, name, name, [self], {}, scalar=False)  # 0-d stays an array
        if callable(getattr(tnp.ndarray, name, None)) and not name.startswith("_"):
            return NumpyMethodVariable(self, name)
        if not hasattr(np.ndarray, name):
            raise raise_real(AttributeError(f"'numpy.ndarray' object has no attribute {name!r}"))
        raise Unsupported(f"ndarray attribute {name!r} is not traced")

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        if self.tensor.fake.dim() == 0:
            raise raise_real(TypeError("iteration over a 0-d array"))
        rows = specialize(tx.output, self.tensor.fake.shape[0])
        return [call_numpy(tx, operator.getitem, "getitem", [self, ConstantVariable(i)], {},
                           scalar=self.tensor.fake.dim() == 1)
                for i in range(rows)]

    def reconstruct(self, codegen: Codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)  # an input array is itself

        def build(codegen: Codegen) -> str:
            tensor = self.tensor.reconstruct(codegen)
            # A complex result may be a conjugate view (np.fft.ifft), which .numpy() refuses.
            resolved = ".resolve_conj()" if self.tensor.fake.is_complex() else ""
            array = f"{tensor}{resolved}.numpy()"
            return f"{array}[()]" if self.scalar else array

        return codegen.remember(self, build)


# Attributes of an array that are constants of its metadata.
ARRAY_CONSTANT_ATTRS = {
    "ndim": lambda a, fake: fake.dim(),
    "size": lambda a, fake: fake.numel(),
    "dtype": lambda a, fake: a.dtype,
    "itemsize": lambda a, fake: fake.element_size(),
    "nbytes": lambda a, fake: fake.numel() * fake.element_size(),
    "strides": lambda a, fake: tuple(_static(s) * fake.element_size() for s in fake.stride()),
}


def _static(value: Any) -> int:
    """A stride as an int; a symbolic one (a dynamic size's) is not folded."""
    value = concrete(value)
    if not isinstance(value, int):
        raise Unsupported("ndarray.strides of an array with dynamic strides")
    return value


class NumpyMethodVariable(VariableTracker):
    """``a.sum`` before it is called."""

    def __init__(self, array: NumpyArrayVariable, name: str) -> None:
        super().__init__()
        self.array, self.name = array, name

    def describe(self) -> str:
        return f"ndarray.{self.name}"

    def call(self, tx, args, kwargs):
        if self.name in INPLACE_METHODS:
            return self._write(tx, args, kwargs)
        if self.name in ("item", "tolist"):
            raise Unsupported(f"ndarray.{self.name}() reads the array into Python",
                              break_type="data_dependent")
        return call_numpy(tx, self.name, self.name, [self.array, *args], kwargs,
                          scalar=self.name not in ARRAY_RESULTS,
                          ordered=ordered_name(self.name, "method"))


    def _write(self, tx, args, kwargs) -> VariableTracker:
        """``a.fill(0)``, ``a.sort()``: torch._numpy writes into the array's tensor (see
        ``_in_place``); the method returns None."""
        if INPLACE_METHODS[self.name] is None or self.array.scalar:
            raise Unsupported(f"ndarray.{self.name}() writes into the array and is not traced",
                              break_type="side_effect")
        call_numpy(tx, self.name, self.name, [self.array, *args], kwargs, scalar=False)
        return ConstantVariable(None)


# ndarray methods that write into the array: traced through torch._numpy's, or (None) breaks.
INPLACE_METHODS = {
    "fill": "fill", "sort": "sort", "put": "put",
    "resize": None,  # NumPy refuses it on an array that does not own its data (a tensor's)
    "itemset": None, "setfield": None, "partition": None,  # torch._numpy lacks them
}


class NumpyFunctionVariable(VariableTracker):
    """A NumPy function or class: traced through torch._numpy, or folded (``target`` None)."""

    callable_kind = True

    def __init__(self, fn: Any, target: Any, source=None) -> None:
        super().__init__(source)
        self.fn, self.target = fn, target

    def describe(self) -> str:
        return f"numpy.{getattr(self.fn, '__name__', self.fn)}"

    def python_type(self) -> type:
        return type(self.fn)

    def is_constant(self) -> bool:
        return isinstance(self.fn, type)  # np.float32 as a dtype argument, isinstance()

    def as_constant(self) -> Any:
        return self.fn if isinstance(self.fn, type) else super().as_constant()

    def call(self, tx, args, kwargs):
        if self.target is None:
            return _fold(self.fn, args, kwargs)
        name = self.fn.__name__
        if id(self.fn) in FFT_GATED and not _fft_agrees(args):
            raise Unsupported(f"numpy.fft.{name} of single precision (NumPy keeps it, "
                              "torch._numpy computes in double) or of a value that is no array")
        return call_numpy(tx, self.target, name, args, kwargs, scalar=name not in ARRAY_RESULTS,
                          ordered=ordered_name(self.fn, "function"))

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.fn)


def _fft_agrees(args: list[VariableTracker]) -> bool:
    """Whether torch._numpy's transform gives NumPy's dtype: an array of double precision, an
    integer or a bool dtype as the transformed argument (see FFT_SINGLE_PRECISION)."""
    return bool(args) and isinstance(args[0], NumpyArrayVariable) and \
        args[0].dtype not in FFT_SINGLE_PRECISION


def _fold(fn: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> \
        VariableTracker:
    """``np.float32(2.0)``, ``np.iinfo(np.int32)``: the real NumPy object, as a constant."""
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported(f"numpy.{fn.__name__}() of values that are not constants")
    values = [a.as_constant() for a in args]
    keywords = {k: v.as_constant() for k, v in kwargs.items()}
    try:
        return ConstantVariable(fn(*values, **keywords))
    except Exception as error:
        raise raise_real(error) from error


# -- the one place where NumPy calls are traced -------------------------------------------------
def call_numpy(tx: Translator, fn: Any, name: str, args: list[VariableTracker],
               kwargs: dict[str, VariableTracker], scalar: bool = True,
               ordered: str | None = None) -> VariableTracker:
    """``fn`` (a torch._numpy function, an operator, or an ndarray method's name) on trackers:
    one graph node; tensor results come back as arrays (0-d ones as scalars if ``scalar``).
    ``ordered``: the NumPy name of a function whose floating result depends on the order of
    its additions, computed by NumPy itself where it can be (numpy_order)."""
    graph_args = [_unwrap(tx, a) for a in args]
    graph_kwargs = {k: _unwrap(tx, v) for k, v in kwargs.items()}
    for value in [*graph_args, *graph_kwargs.values()]:
        if isinstance(value, TensorVariable) and value.fake.requires_grad:
            raise Unsupported("a NumPy operation on a tensor that requires grad (eager raises)",
                              break_type="user_exception")
    result = None
    if ordered is not None and _floating_call(args, kwargs):
        result = _ordered_call(tx, ordered, graph_args, graph_kwargs)
    if result is None:
        result = call_torch(tx, "call_function", numpy_call(fn, name), graph_args, graph_kwargs)
    return _as_arrays(result, scalar)


def _floating_call(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> bool:
    """A call whose additions are floating: a floating or complex array among the arguments, or
    a ``dtype`` asked for (np.sum(ints, dtype=np.float32)). ``out=`` (a write) and
    ``returned=`` (a pair of results; the operator returns one array) are left to torch._numpy."""
    if "out" in kwargs or "returned" in kwargs:  # a write; np.average's (average, weights)
        return False
    return "dtype" in kwargs or any(
        isinstance(a, NumpyArrayVariable) and a.dtype.kind in FLOATING_KINDS
        for a in [*args, *kwargs.values()])


class _NotLiteral(Exception):
    pass


def _ordered_call(tx: Translator, name: str, args: list[VariableTracker],
                  kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """One ``graphlift::numpy_ordered`` node, or None when an argument is no constant."""
    tensors: list[VariableTracker] = []

    def literal(value: VariableTracker) -> Any:
        if isinstance(value, TensorVariable):
            tensors.append(value)
            return mark(len(tensors) - 1)
        if type(value) is TupleVariable or isinstance(value, BaseListVariable):
            items = [literal(v) for v in value.items]
            return tuple(items) if type(value) is TupleVariable else items
        if value.is_constant():
            return value.as_constant()
        raise _NotLiteral

    try:
        options = repr(([literal(a) for a in args], {k: literal(v) for k, v in kwargs.items()}))
    except _NotLiteral:
        return None
    if not is_literal(options):
        return None
    return call_torch(tx, "call_function", torch.ops.graphlift.numpy_ordered.default,
                      [ConstantVariable(name), ListVariable(tensors), ConstantVariable(options)],
                      {})


def _unwrap(tx: Translator, value: VariableTracker) -> VariableTracker:
    """``value`` as a graph argument: an array's tensor, a NumPy dtype by name, a NumPy scalar
    as a 0-d tensor of its dtype (FX cannot write NumPy objects into the graph's code)."""
    if isinstance(value, NumpyArrayVariable):
        return value.tensor
    if isinstance(value, SliceVariable):
        return SliceVariable([_unwrap(tx, p) for p in value.parts])
    if type(value) is TupleVariable or isinstance(value, BaseListVariable):
        return type(value)([_unwrap(tx, v) for v in value.items])
    if isinstance(value, DictVariable):
        return DictVariable({k: _unwrap(tx, v) for k, v in value.items.items()})
    if not value.is_constant() or isinstance(value, TensorVariable):
        return value
    constant = value.as_constant()
    if isinstance(constant, np.dtype) or \
            (isinstance(constant, type) and issubclass(constant, np.generic)):
        return ConstantVariable(np.dtype(constant).name)
    if isinstance(constant, np.generic):
        return call_torch(tx, "call_function", torch.tensor, [ConstantVariable(constant.item())],
                          {"dtype": ConstantVariable(getattr(torch, constant.dtype.name))})
    return value


def _as_arrays(result: VariableTracker, scalar: bool) -> VariableTracker:
    if isinstance(result, TensorVariable):
        return NumpyArrayVariable(result, scalar)
    if type(result) is TupleVariable:
        return TupleVariable([_as_arrays(v, scalar) for v in result.items])
    return result


def has_array(*values: VariableTracker) -> bool:
    """Whether an operator on ``values`` is a NumPy operator (an array among them)."""
    return any(isinstance(v, NumpyArrayVariable) for v in values)


def numpy_operator(tx: Translator, op: Any, values: list[VariableTracker]) -> \
        VariableTracker:
    """``a + b``, ``a < 2``, ``-a``, ``a[i]``, ``a += 1``, ``a[i] = v`` with an array among the
    operands."""
    if any(isinstance(v, TensorVariable) for v in values):
        # Eager runs ``x * a`` through NumPy's ufunc and wraps the result back into a Tensor
        # (Tensor.__array_wrap__: NumPy's promotion, int64 array * float32 tensor is float64),
        # and ``a * x`` raises TypeError; torch.compile computes both as torch ops.
        raise Unsupported(f"{op.__name__} of an ndarray and a tensor (eager mixes NumPy's "
                          "ufuncs with Tensor.__array_wrap__)")
    if op in INPLACE_OPERATORS:
        return _in_place(tx, op, values)
    scalar = True
    if op is operator.getitem:
        index = values[1].as_constant() if values[1].is_constant() else None
        parts = index if isinstance(index, tuple) else (index,)
        scalar = not any(p is Ellipsis or p is None for p in parts)
    return call_numpy(tx, op, op.__name__, values, {}, scalar=scalar,
                      ordered=ordered_name(op, "operator"))


def _in_place(tx: Translator, op: Any, values: list[VariableTracker]) -> \
        VariableTracker:
    """``a += 1``, ``a[mask] = 0``: torch._numpy writes into the array's tensor, so the write
    reaches the tensor the array was made from, or the argument array (fed to the graph by
    ``torch.from_numpy``, its own memory); the node is kept as a write. The array stays the same
    object. A NumPy scalar is immutable: ``s += 1`` makes a new one, as in NumPy."""
    target = values[0]
    if not isinstance(target, NumpyArrayVariable) or target.scalar:
        if op is operator.setitem:
            raise Unsupported("item assignment on a NumPy scalar (eager raises TypeError)")
        return numpy_operator(tx, INPLACE_OPERATORS[op], values)  # a new scalar
    values = [target, *(_copy_if_shared(tx, v, target) for v in values[1:])]
    call_numpy(tx, op, op.__name__, values, {}, scalar=False)
    return target


def _copy_if_shared(tx: Translator, value: VariableTracker,
                    target: NumpyArrayVariable) -> VariableTracker:
    """An operand over the written array's memory (``a[1:] = a[:-1]``) as a copy: NumPy reads
    overlapping operands as they were before the write, torch's copy refuses them."""
    if isinstance(value, NumpyArrayVariable) and \
            storage_ref(value.tensor.fake) == storage_ref(target.tensor.fake):
        return NumpyArrayVariable(call_torch(tx, "call_method", "clone", [value.tensor], {}))
    return value


# In-place operators and the operator NumPy scalars (immutable) use for them instead.
INPLACE_OPERATORS = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
    operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
    operator.ilshift: operator.lshift, operator.irshift: operator.rshift,
    operator.setitem: None,  # a[i] = v writes into the array (into a scalar: TypeError)
}


# -- tensors <-> arrays ------------------------------------------------------------------------
def is_traceable_array(value: Any) -> bool:
    """An ndarray input that ``torch.from_numpy`` takes as it is (the builder's row test)."""
    return type(value) is np.ndarray and config.trace_numpy and value.dtype in TENSOR_DTYPES \
        and value.flags.writeable and all(stride >= 0 for stride in value.strides)


TENSOR_DTYPES = frozenset(np.dtype(name) for name in (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "complex64", "complex128"))


def wrap_array_input(tx: Translator, value: np.ndarray,
                     source: Source) -> VariableTracker:
    """An ndarray from the frame's inputs: guarded as an ndarray, and a graph input fed from
    ``torch.from_numpy`` (guarded like a tensor: dtype, shape, strides)."""
    tx.guards.type_match(source, value)
    tensor = tx.builder.wrap(torch.from_numpy(value), NumpyTensorSource(source))
    return NumpyArrayVariable(tensor, source=source)



def _tensor_numpy(tx: Translator, tensor: TensorVariable, args: list,
                  kwargs: dict) -> VariableTracker:
    """``t.numpy()``: the array over the tensor's own memory (eager raises for grad)."""
    if args or kwargs or tensor.fake.requires_grad:
        raise Unsupported("Tensor.numpy() with arguments or on a tensor that requires grad",
                          break_type="user_exception")
    return NumpyArrayVariable(tensor)


def _from_numpy(tx: Translator, args: list, kwargs: dict) -> VariableTracker | None:
    """``torch.from_numpy(a)`` / ``torch.as_tensor(a)``: the array's tensor (shared memory)."""
    if len(args) == 1 and not kwargs and isinstance(args[0], NumpyArrayVariable):
        return args[0].tensor
    return None


def _tensor_of_array(tx: Translator, args: list, kwargs: dict) -> \
        VariableTracker | None:
    """``torch.tensor(a)``: a copy of the array's data."""
    if len(args) == 1 and not kwargs and isinstance(args[0], NumpyArrayVariable):
        return call_torch(tx, "call_method", "clone", [args[0].tensor], {})
    return None


ARRAY_METHODS["numpy"] = _tensor_numpy
ARRAY_TORCH_FUNCTIONS.update({
    torch.from_numpy: _from_numpy,
    torch.as_tensor: _from_numpy,
    torch.tensor: _tensor_of_array,
})
