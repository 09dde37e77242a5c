"""Symbolic sizes and ints: trackers for ``torch.SymInt`` values and what is built from them.

A dynamic dimension (see :mod:`graphlift.dynamic_shapes`) makes a fake tensor's size a SymInt.
When the trace reads it (``x.shape[0]``, ``x.size(1)``, ``len(x)``) it becomes a
:class:`SymNodeVariable`: the SymInt, for fake tensors to compute with, and the FX node that
computes it at run time (``x.size(0)`` inside the graph). Arithmetic and comparisons on it go
through ``call_torch`` like tensor operations, so ``x.shape[0] * 2`` is a graph node whose value
is the SymInt ``2*s0``.

Where Python needs a real value (``range(n)``, a branch, a list index, an f-string), the symbol is
*specialized*: the ShapeEnv records a guard that it keeps this value (``Eq(s0, 8)``), and the
entry serves that value only. That is always correct; it just makes the entry less general.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from graphlift.exc import Unsupported
from graphlift.rebuild import Codegen
from graphlift.variables.base import Translator, VariableTracker
from graphlift.variables.constant import ConstantVariable
from graphlift.variables.containers import TupleVariable

if TYPE_CHECKING:
    from graphlift.output_graph import OutputGraph
    from graphlift.sources import Source

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
_PYTHON_TYPES = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def concrete(value: Any) -> Any:
    """``value`` with every SymInt/SymFloat/SymBool that is really a constant made plain.

    A symbol the trace has specialized (``s0`` replaced by 8) still sits in SymInt objects made
    earlier; their value is known without a new guard. Truly symbolic values stay as they are.
    """
    if isinstance(value, torch.SymInt):
        known = value.node.maybe_as_int()
    elif isinstance(value, torch.SymFloat):
        known = value.node.maybe_as_float()
    elif isinstance(value, torch.SymBool):
        known = value.node.maybe_as_bool()
    elif isinstance(value, torch.Size):
        return torch.Size(concrete(v) for v in value)
    elif type(value) in (tuple, list):
        return type(value)(concrete(v) for v in value)
    else:
        return value
    return value if known is None else known


def is_symbolic(value: Any) -> bool:
    """A SymInt/SymFloat/SymBool whose value is not known without a guard."""
    return isinstance(value, SYM_TYPES) and concrete(value) is value


def specialize(output: OutputGraph, value: Any) -> Any:
    """The Python value of a symbolic value, guarding that it keeps it (see the module doc).

    An unbacked symbol (from ``item()``, a ``nonzero`` size, ``mark_unbacked``) has no value to
    guard on: Python needing it is a graph break, GL0012.
    """
    try:
        result = _PYTHON_TYPES[type(value)](value) if is_symbolic(value) else concrete(value)
    except GuardOnDataDependentSymNode as error:
        raise data_dependent_guard(error) from error
    output.note_guards()
    return result


def data_dependent_guard(error: GuardOnDataDependentSymNode) -> Unsupported:
    """The break for Python (a branch, ``range(n)``, an index) needing an unbacked value."""
    expr = getattr(error, "cond", None)
    what = f" ({expr})" if expr is not None else ""
    return Unsupported(
        f"Python needs the value of a data-dependent expression{what}: it comes from tensor "
        "data (.item(), a nonzero or mask size, mark_unbacked) and has no value while tracing",
        break_type="data_dependent_guard",
        hints=("state what you know with torch._check(...) / torch._check_is_size(...), or "
               "use torch.where / torch.cond instead of a Python branch",))


class SymNodeVariable(VariableTracker):
    """A symbolic int, float or bool: its SymInt (or SymFloat, SymBool) and its FX node.

    It counts as a constant for the translator's folding paths (``is_constant``), which then read
    it through :meth:`as_constant`, a specialization; the paths that keep it symbolic (operators,
    torch calls, slices) check for this class first.
    """

    def __init__(self, node: torch.fx.Node, value: Any, output: OutputGraph,
                 source: Source | None = None) -> None:
        super().__init__(source)
        self.node = node
        self.value = value
        self.output = output
        self._as_tensor: VariableTracker | None = None  # a float's graph output (see below)
        node.meta["example_value"] = value

    def describe(self) -> str:
        return f"{self.node.name}: {self.value}"

    def python_type(self) -> type:
        return _PYTHON_TYPES[type(self.value)]

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return specialize(self.output, self.value)

    def truthy(self, tx: Translator) -> bool:
        return bool(specialize(self.output, self.value))

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        return ConstantVariable(self.as_constant()).var_getattr(tx, name)

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        raise Unsupported(f"cannot iterate over {self.python_type().__name__} {self.value}",
                          break_type="user_exception")

    def reconstruct(self, codegen: Codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        if isinstance(self.value, torch.SymFloat):
            return f"{codegen.graph_output(self._float_output())}.item()"
        return codegen.graph_output(self)

    def _float_output(self) -> VariableTracker:
        """A SymFloat leaves the graph as a 0-d float64 tensor, as in torch.compile: AOTAutograd
        would specialize a SymFloat output to this call's value."""
        if self._as_tensor is None:
            node = self.output.create_node("call_function", torch.scalar_tensor, (self.node,),
                                           {"dtype": torch.float64})
            with self.output.fake_mode:
                node.meta["example_value"] = torch.scalar_tensor(self.value, dtype=torch.float64)
            self._as_tensor = VariableTracker()
            self._as_tensor.node = node
        return self._as_tensor


class SizeVariable(TupleVariable):
    """``x.shape`` when some dimension is symbolic: a ``torch.Size`` of trackers."""

    def __init__(self, items: list[VariableTracker], source=None) -> None:
        super().__init__(items, source, tuple_class=torch.Size)

    def python_container(self, values) -> Any:
        return torch.Size(tuple(values))

    def getitem(self, tx: Translator, index: VariableTracker) -> VariableTracker:
        result = super().getitem(tx, index)
        if isinstance(result, TupleVariable) and not isinstance(result, SizeVariable):
            return SizeVariable(result.items)
        return result

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        return ConstantVariable(self.as_constant()).var_getattr(tx, name)  # size.numel(): guard

    def reconstruct(self, codegen: Codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        body = "".join(f"{item.reconstruct(codegen)}, " for item in self.items)
        return f"{codegen.constant(torch.Size)}(({body}))"


class SliceVariable(VariableTracker):
    """``a:b:c`` with a symbolic bound (``x[:n]``): the parts stay trackers."""

    def __init__(self, parts: list[VariableTracker]) -> None:
        super().__init__()
        self.parts = parts

    def describe(self) -> str:
        return ":".join(p.describe() for p in self.parts)

    def python_type(self) -> type:
        return slice

    def is_constant(self) -> bool:
        return all(p.is_constant() for p in self.parts)

    def as_constant(self) -> slice:
        return slice(*(p.as_constant() for p in self.parts))

    def reconstruct(self, codegen: Codegen) -> str:
        return f"slice({', '.join(p.reconstruct(codegen) for p in self.parts)})"


def has_symbol(values: list[VariableTracker]) -> bool:
    """Whether any of ``values`` is a SymNodeVariable (a slice made of them stays symbolic)."""
    return any(isinstance(v, SymNodeVariable) for v in values)


def symbolic_operands(*values: VariableTracker) -> bool:
    """Whether an operator on ``values`` stays symbolic: symbols mixed only with numbers."""
    return has_symbol(list(values)) and all(
        isinstance(v, SymNodeVariable)
        or (isinstance(v, ConstantVariable) and type(v.value) in (int, float, bool))
        for v in values)


# -- reading sizes -----------------------------------------------------------------------------
def size_variable(tx: Translator, tensor: Any, dim: int) -> VariableTracker:
    """The tracker for ``tensor.size(dim)``: a constant, or a ``size`` node of the graph."""
    size = tensor.fake.shape[dim]
    if not is_symbolic(size):
        return ConstantVariable(concrete(size))
    dim = dim % tensor.fake.dim()
    return SymNodeVariable(tx.output.size_node(tensor.node, dim, size), size, tx.output)


def shape_variable(tx: Translator, tensor: Any) -> VariableTracker:
    """``tensor.shape``: a constant ``torch.Size`` when every size is known, else a SizeVariable."""
    shape = tensor.fake.shape
    if not any(is_symbolic(s) for s in shape):
        return ConstantVariable(concrete(shape))
    return SizeVariable([size_variable(tx, tensor, i) for i in range(len(shape))])


# -- dynamic ints and floats -------------------------------------------------------------------
def wrap_scalar_input(tx: Translator, value: int | float, source: Source) -> \
        VariableTracker | None:
    """A symbolic int or float for an input that the shape policy makes dynamic, else None.

    The value becomes a graph input of its own (a placeholder fed from ``source``; a float's is a
    0-d tensor, read by an ``item()`` node), guarded by its type here and by whatever the trace
    assumes about it (see ``install_shape_guards``).
    """
    output = tx.output
    if not output.shape_policy.scalar_is_dynamic(source, value):
        return None
    tx.guards.type_match(source, value)
    if type(value) is float:
        graph_input, symbol = output.add_float_input(source, value)
        node = output.create_node("call_method", "item", (graph_input.node,), {})
        return SymNodeVariable(node, symbol, output, source)
    graph_input = output.add_symint_input(source, value)
    return SymNodeVariable(graph_input.node, graph_input.fake, output, source)


def static_int(tx: Translator, value: int, source: Source) -> VariableTracker:
    """An int that stays a constant whatever the shape policy says: an int attribute of an
    ``nn.Module`` is configuration (heads, block size), specialized as torch.compile does."""
    tx.guards.constant_match(source, value)
    return ConstantVariable(value, source)


def int_of(tx: Translator, args: list[VariableTracker],
           kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """``int(n)`` of a symbolic int stays symbolic; None to let the builtin fold."""
    if len(args) == 1 and not kwargs and isinstance(args[0], SymNodeVariable) and \
            args[0].python_type() is int:
        return args[0]
    return None
