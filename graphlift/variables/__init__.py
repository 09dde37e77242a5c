"""VariableTrackers: symbolic stand-ins for the values a traced frame manipulates.

One kind per module, listed in import order (a module imports only kinds listed before it; the
translator reaches every kind, and a kind needing the translator gets it as ``tx``):

- ``base``: the VariableTracker interface, NULL, ``TracedException`` / ``raise_real`` (a traced
  program raising) and ``lookup_class_attr``.
- ``constant``: Python constants, folded while tracing (``wrap_constant``; containers register how
  constant tuples, lists, dicts and sets become trackers of their items).
- ``containers``: tuples, lists, sets and dicts of trackers.
- ``functions``: user functions, closures, methods (before ``tensor``: a kernel's stand-in,
  ``polyfills/optim.py``, is a user function traced in its place).
- ``exceptions``: exception objects.
- ``iterators``: iterators over known items, lazy stand-ins (``itertools.count``), and
  generators: an inlined generator's suspended frame, resumed at each ``next``.
- ``methods``: C methods of builtin types applied to trackers (``dict.get(d, k)``,
  ``super().__setitem__`` in a dict subclass), one row per special method.
- ``context``: grad-mode and autocast ``with`` blocks.
- ``symbolic``: SymInts and sizes; ``tensor``: tensors and torch callables (``call_torch``).
- ``numpy_order``, ``numpy``: NumPy on arrays made from tensors, through ``torch._numpy``;
  floating sums by NumPy itself.
- ``custom_ops``: ``torch.library.custom_op`` functions, ``torch.ops`` packets and their
  overloads (``.default``, ``.Tensor``): nodes targeting the operator, as torch.compile's.
- ``objects``: modules, classes, user objects.
- ``builtins``: Python builtins, as a table of handlers.
- ``collections``: ``deque``, ``OrderedDict`` and ``defaultdict`` (their constructors are rows of
  ``objects.CONSTRUCTORS``, registered from here).
- ``subclasses``: objects of user subclasses of builtins (``class Registry(dict)``, a
  ``ModelOutput``): a user object plus a tracker of its builtin part.
- ``torch_function``: tensor subclasses with ``__torch_function__`` (their objects are tensors
  marked with their class; the subclass's ``__torch_function__`` is inlined, torch.Tensor's
  modelled, the graph works on plain tensors).
- ``autograd``: ``torch.autograd.Function.apply``: ``forward`` inlined when no input requires
  grad, else one node that a differentiating backend traces through to the class's ``backward``.
- ``higher_order``: torch.cond, while_loop, map, scan and checkpoint: the functions they take
  traced into subgraphs, one higher-order operator node per call.
- ``callables``: the trace rules' decisions as trackers (skipped, polyfilled, allow_in_graph).
- ``nn_module``: ``nn.Module`` instances, pinned by identity or (arguments) guarded by their
  structure; calls inline ``forward``.
- ``builder``: wrapping real input values, with their guards (the one module knowing every kind).
- ``regions``: ``nested_compile_region``, a marked function's trace recorded once and reused.
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
