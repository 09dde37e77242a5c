"""graphlift: a TorchDynamo-style JIT frontend for PyTorch, in Python you can read.

``graphlift.compile(fn)`` runs ``fn`` by symbolically interpreting its CPython bytecode (3.11,
3.12, 3.13).
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

The package is a stack of layers. Imports run one way, from the entry points at the top down to
the primitives at the bottom: a module imports only modules of the layers below its own, and
within its layer the modules listed before it (each row is in import order). What a lower layer
needs from a higher one it is given: variables get the translator as their ``tx`` argument and
call methods on it; generated code gets eval_frame's wrapper factories (``codegen.FrameWrappers``)
through ``convert_frame``; the translator registers itself on the output graph while it runs.
Their annotations name protocols of the lower layer, never the higher module: ``tx`` is a
``variables.base.Translator``, ``codegen`` a ``rebuild.Codegen``. Imports under
``if TYPE_CHECKING:`` never run, but they follow the order too, so the drawing of all imports has
no cycle. ``tests/test_layers.py`` parses this table and fails on an import against it.

Layers, top to bottom (``layer: modules`` -- what the layer does)::

    entry:       explain, decorators, dropin, doctor.report, doctor.render, doctor, graphlift,
                 __main__  -- explain(), allow_in_graph/disable/substitute_in_graph, install()
                 (torch.compile through graphlift), graphlift doctor and run, the public API
    interception: testing, structured_trace, events, stance, verify, eval_frame  -- compile():
                 the wrapper, cache lookup, miss path, recompile limits, reset, cache_entries,
                 stats; CompileCounter; the structured trace for tlparse (GRAPHLIFT_TRACE);
                 recording (GRAPHLIFT_RECORD); stances (set_stance, torch's too) and
                 error_on_graph_break; verify mode (config.verify: hits run eagerly too and
                 compared)
    conversion:  eager_callees, convert_frame, persist  -- routed copies of the code of frames
                 that run eagerly (their callees compiled); one miss -> one cache entry
                 (translate, guard, compile); entries saved to and loaded from config.cache_dir
                 (warm start)
    cache:       cache  -- ExtraState and CacheEntry in the code object's extra slot
    codegen:     codegen  -- the generated run function, and its tail at a graph break
    translation: translator  -- the symbolic interpreter: one method per opcode
    variables:   variables.base, variables.constant, variables.containers, variables.functions,
                 variables.exceptions, variables.iterators, variables.methods, variables.context,
                 variables.symbolic, variables.tensor, variables.numpy_order, variables.numpy,
                 variables.objects, variables.builtins, variables.collections, variables.subclasses,
                 variables.torch_function, variables.distributed, variables.autograd,
                 variables.higher_order, variables.custom_ops, variables.callables,
                 variables.nn_module, variables.builder, variables.regions, variables
                 -- VariableTrackers, one kind
                 per module; the builder wraps input values with their guards and knows every
                 kind; regions replays nested compile regions
    graph:       output_graph  -- the FX graph, fake tensors, graph inputs, the backend call
    rules:       trace_rules  -- inline, polyfill, builtin, graph node or skip, per callable
    records:     graph_break, backends, ddp_optimizer, rebuild, side_effects, guards,
                 module_structure, dynamic_shapes, shape_guards, compiler_collectives,
                 polyfills.support, polyfills.builtins, polyfills.collections,
                 polyfills.compiler, polyfills.copy, polyfills.functools, polyfills.heapq,
                 polyfills.itertools, polyfills.operator, polyfills.optim, polyfills.typing,
                 polyfills.re, polyfills, resume  -- break records,
                 backends, splitting graphs at DDP's gradient buckets, what rebuilding values
                 after the graph asks of the code generator and of trackers, the side-effect
                 ledger, guard kinds and the check function, modules' structure ids and the
                 structure version (below the trackers: a loaded module entry needs them),
                 which sizes are symbolic (agreed across ranks by compiler collectives) and the
                 ShapeEnv's guards (sympy), pure-Python stand-ins for C functions, resume code
                 objects
    bytecode:    bytecode  -- decoding 3.10 to 3.13 instructions into one form; the version check
    primitives:  config, constants, break_types, exc, logs, progress, sources, code_extra  --
                 settings, which Python values are constants,
                 the graph-break registry (ids GL0001...), errors, GRAPHLIFT_LOGS, the phases of
                 long compiles, where values come from (L['x'], G['w']), the code object's
                 extra slot
"""

import importlib

from graphlift.bytecode import check_python_version

check_python_version()

# Imports below need 3.10 or later (the version check above must run first). They are what
# wrapping a function needs: the translator, the variable trackers, code generation, sympy and the
# ShapeEnv are imported by the first compile, the doctor by ``graphlift doctor``, so that ``import
# graphlift`` costs a small part of ``import torch`` (``tests/test_import_time.py`` checks which
# modules it loads; see docs/warm-start.md, cold start).
# ``graphlift.graph_break`` is the function; its module stays importable by its full name
# (``graphlift.graph_break.listeners``).
from graphlift import events, structured_trace, testing, trace_rules  # noqa: E402
from graphlift.backends import list_backends, register_backend  # noqa: E402
from graphlift.cache import CacheEntry, Stats  # noqa: E402
from graphlift.config import config  # noqa: E402
from graphlift.decorators import allow_in_graph, disable, substitute_in_graph  # noqa: E402
from graphlift.dropin import configure_from_env as install_from_env  # noqa: E402
from graphlift.dropin import install, uninstall  # noqa: E402
from graphlift.dynamic_shapes import mark_dynamic, mark_static, mark_unbacked  # noqa: E402
from graphlift.eval_frame import cache_entries, compile, reset, stats  # noqa: E402
from graphlift.exc import (  # noqa: E402
    BackendCompilerFailed,
    ConstraintViolationError,
    GraphliftError,
    InternalError,
    RecompileError,
    RecompileLimitExceeded,
    Unsupported,
)
from graphlift.explain import ExplainOutput, explain  # noqa: E402
from graphlift.graph_break import graph_break  # noqa: E402
from graphlift.logs import configure_from_env, set_logs  # noqa: E402
from graphlift.stance import error_on_graph_break, set_stance  # noqa: E402

# Public names whose modules load the variable trackers: ``graphlift.NAME`` imports them on first
# use (module ``__getattr__``, PEP 562). name -> (module, attribute).
_ON_FIRST_USE: dict[str, tuple[str, str]] = {
    "nested_compile_region": ("graphlift.variables.regions", "nested_compile_region"),
    "region_stats": ("graphlift.variables.regions", "region_stats"),
}


def __getattr__(name: str) -> object:
    """The public names of :data:`_ON_FIRST_USE`, imported when first read."""
    if name not in _ON_FIRST_USE:
        raise AttributeError(f"module 'graphlift' has no attribute {name!r}")
    module_name, attribute = _ON_FIRST_USE[name]
    value = getattr(importlib.import_module(module_name), attribute)
    globals()[name] = value  # the next read is a plain global
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ON_FIRST_USE))


configure_from_env()
events.configure_from_env()  # GRAPHLIFT_RECORD: what `graphlift doctor` reads
structured_trace.configure_from_env()  # GRAPHLIFT_TRACE: the log tlparse renders
install_from_env()  # GRAPHLIFT_INSTALL=1: torch.compile runs graphlift

__version__ = "0.1.0"

__all__ = [
    "BackendCompilerFailed",
    "CacheEntry",
    "ConstraintViolationError",
    "ExplainOutput",
    "GraphliftError",
    "InternalError",
    "RecompileError",
    "RecompileLimitExceeded",
    "Stats",
    "Unsupported",
    "allow_in_graph",
    "cache_entries",
    "compile",
    "config",
    "disable",
    "error_on_graph_break",
    "explain",
    "graph_break",
    "install",
    "list_backends",
    "mark_dynamic",
    "mark_static",
    "mark_unbacked",
    "nested_compile_region",
    "region_stats",
    "register_backend",
    "reset",
    "set_logs",
    "set_stance",
    "stats",
    "substitute_in_graph",
    "testing",
    "trace_rules",
    "uninstall",
]
