"""graphlift: a TorchDynamo-style JIT frontend for PyTorch, in Python you can read.

``graphlift.compile(fn)`` runs ``fn`` by symbolically interpreting its CPython 3.11 bytecode.
Torch operations become nodes of a ``torch.fx`` graph that a backend compiles; guards record what
the graph assumed; the compiled entry is cached on the function's code object::

    >>> import torch, graphlift
    >>> @graphlift.compile
    ... def f(x, n):
    ...     return torch.sin(x) * n
    >>> f(torch.ones(3), 2)       # first call: trace, guard, compile
    tensor([1.6829, 1.6829, 1.6829])
    >>> graphlift.cache_entries(f)[0].guards[-5:]
    ["L['x'].stride()[0] == 1", "type(L['n']) is int", "L['n'] == 2", ...]

The pipeline, one module per stage, in the order data flows:

==========================  ==================================================================
``eval_frame``              ``compile()``: the intercepting wrapper, cache lookup, miss path,
                            recompile limits, ``reset``, ``cache_entries``, ``stats``
``cache`` / ``code_extra``  ExtraState and CacheEntry in the code object's extra slot
``convert_frame``           one miss -> one cache entry (translate, guard, compile, codegen)
``bytecode``                decoding 3.11 instructions; the version check
``translator``              the symbolic interpreter: one method per opcode
``variables/``              VariableTrackers: constants, tensors, containers, objects, modules
``sources``                 where values come from: ``L['x']``, ``G['w']``, ``L['self'].w``
``guards``                  guard kinds and the generated check function
``output_graph``            the FX graph, fake tensors, graph inputs, the backend call
``codegen``                 the generated run function that calls the graph
``dynamic_shapes``          which sizes and ints are symbols (``mark_dynamic``, automatic
                            dynamic); the ShapeEnv's assumptions rendered as guards
``graph_break``             graph-break records shared by logs and ``explain``
``backends``                ``eager``, ``aot_eager``, ``inductor`` and user backends
``config`` / ``logs``       the settings registry; ``GRAPHLIFT_LOGS`` artifacts
``trace_rules``             inline, polyfill, builtin, graph node or skip: the decision for every
                            callable (``polyfills/``: pure-Python stand-ins for C functions;
                            ``decorators``: ``allow_in_graph``, ``disable``)
``explain`` / ``testing``   ``explain()``; ``CompileCounter``
``events`` / ``doctor/``    recording (``GRAPHLIFT_RECORD``); ``graphlift doctor SCRIPT``: graph
                            breaks, then recompiles, then time (``report``: the data;
                            ``render``: text, JSON, HTML; ``__main__``: the command)
==========================  ==================================================================
"""

from graphlift.bytecode import check_python_version

check_python_version()

# Imports below need 3.11 (the version check above must run first). ``graphlift.graph_break`` is
# the function; its module stays importable by its full name (``graphlift.graph_break.listeners``).
from graphlift import events, testing, trace_rules  # noqa: E402
from graphlift.backends import list_backends, register_backend  # noqa: E402
from graphlift.cache import CacheEntry, Stats  # noqa: E402
from graphlift.config import config  # noqa: E402
from graphlift.decorators import allow_in_graph, disable  # noqa: E402
from graphlift.dynamic_shapes import mark_dynamic, mark_static  # noqa: E402
from graphlift.eval_frame import cache_entries, compile, reset, stats  # noqa: E402
from graphlift.exc import (  # noqa: E402
    BackendCompilerFailed,
    ConstraintViolationError,
    GraphliftError,
    RecompileError,
    RecompileLimitExceeded,
    Unsupported,
)
from graphlift.explain import ExplainOutput, explain  # noqa: E402
from graphlift.graph_break import graph_break  # noqa: E402
from graphlift.logs import configure_from_env, set_logs  # noqa: E402

configure_from_env()
events.configure_from_env()  # GRAPHLIFT_RECORD: what `graphlift doctor` reads

__version__ = "0.1.0"

__all__ = [
    "BackendCompilerFailed",
    "CacheEntry",
    "ConstraintViolationError",
    "ExplainOutput",
    "GraphliftError",
    "RecompileError",
    "RecompileLimitExceeded",
    "Stats",
    "Unsupported",
    "allow_in_graph",
    "cache_entries",
    "compile",
    "config",
    "disable",
    "explain",
    "graph_break",
    "list_backends",
    "mark_dynamic",
    "mark_static",
    "register_backend",
    "reset",
    "set_logs",
    "stats",
    "testing",
    "trace_rules",
]
