"""VariableTrackers: symbolic stand-ins for the values a traced frame manipulates.

- ``base``: the VariableTracker interface and NULL.
- ``constant``: Python constants, folded while tracing.
- ``tensor``: tensors and torch callables; every tensor operation goes through ``call_torch``.
- ``containers``: tuples, lists and dicts of trackers.
- ``builtins``: Python builtins, as a table of handlers.
- ``callables``: the trace rules' decisions as trackers (skipped, polyfilled, allow_in_graph).
- ``collections``: ``deque``, ``OrderedDict`` and ``defaultdict``; ``iterators``: lazy iterators.
- ``objects``: modules, classes, user objects and user functions.
- ``nn_module``: ``nn.Module`` instances, pinned by identity; calls inline ``forward``.
- ``builder``: wrapping real input values, with their guards.
"""

from graphlift.variables.base import NullVariable, VariableTracker
from graphlift.variables.builtins import BuiltinVariable
from graphlift.variables.constant import ConstantVariable, wrap_constant
from graphlift.variables.containers import DictVariable, ListVariable, TupleVariable
from graphlift.variables.tensor import TensorVariable, TorchCallableVariable, call_torch

__all__ = [
    "BuiltinVariable",
    "ConstantVariable",
    "DictVariable",
    "ListVariable",
    "NullVariable",
    "TensorVariable",
    "TorchCallableVariable",
    "TupleVariable",
    "VariableTracker",
    "call_torch",
    "wrap_constant",
]
