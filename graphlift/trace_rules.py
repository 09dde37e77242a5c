"""Trace rules: what graphlift does with each callable it meets while tracing.

Every call the translator sees gets one decision, made by :func:`lookup` from the tables below:

=============  ===================================================================================
``INLINE``     trace the callee's bytecode into the caller's graph (user code, the safe Python
               parts of torch such as ``nn.Module`` forwards and ``torch.nn.functional``)
``POLYFILL``   inline a pure-Python stand-in from :mod:`graphlift.polyfills` in place of a C
               function (``itertools.chain``, ``functools.reduce``, ``heapq.heappush``, ...)
``BUILTIN``    modelled by a handler of :mod:`graphlift.variables.builtins`: Python builtins, and
               ``math``/``operator`` functions (folded on constants, one graph node on tensors)
``GRAPH``      one node in the graph, run on fake tensors for metadata (``torch.*`` ops,
               ``torch.nn.functional`` ops with a C binding, tensor methods, ``allow_in_graph``)
``SKIP``       a graph break at the call: the call runs eagerly (most of the standard library,
               ``logging``, ``print``, I/O, third-party libraries, graphlift itself, ``disable``)
=============  ===================================================================================

``lookup(fn)`` returns a :class:`Decision` naming the :class:`Rule` row that decided, so a graph
break can say which rule skipped the call and how to overrule it. The user's overrides come first
(:func:`graphlift.disable`, :func:`graphlift.allow_in_graph`, and torch's own
``torch.compiler.disable``, ``allow_in_graph`` and ``torch._dynamo.disallow_in_graph``, read from
the marks they leave; disallowed beats allowed, as in torch), then the rows
that recognise the object itself (torch.compile's markers such as ``is_compiling`` and
``graph_break``, polyfills, builtins, torch ops), then the rows that go by the module that defined
it, where ``config.skip_modules`` and ``config.inline_modules`` come first.

torch's marks are read, never made: graphlift does not import ``torch._dynamo`` (it takes most of
a second), so its registries are looked up in ``sys.modules`` and count only once the program
has loaded them (which it has, if it called ``torch.compiler.disable`` or ``allow_in_graph``).
"""

from __future__ import annotations

import builtins
import collections
import enum
import functools
import inspect
import os
import struct
import sys
import sysconfig
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch._library.custom_ops import CustomOpDef

from graphlift.config import config
from graphlift.exc import Unsupported
from graphlift.graph_break import graph_break
from graphlift.polyfills import CONSTANT_FOLDABLE, call_original, compiler, optim, polyfill_for

# -- what the variables layer models (read by the rules below) ------------------------------
# Builtins that may be called for real when every argument is a constant.
PURE_BUILTINS = frozenset({
    abs, all, any, bool, callable, chr, divmod, float, format, hash, hex, int, len, max, min,
    oct, ord, pow, repr, round, sorted, str, sum, tuple, range, slice, complex, bin, isinstance,
    issubclass, type, list, reversed, zip, enumerate,
})

# Builtin classes whose class methods and unbound methods fold on constant arguments.
CONSTANT_CLASSES = frozenset({dict, str, int, float, bytes, tuple, frozenset, complex, bool})

# Builtin types whose C methods (``dict.get``, ``list.__contains__``, ``object.__setattr__``)
# are applied to the tracked values by variables/methods.py.
BUILTIN_METHOD_TYPES = frozenset({object, dict, list, tuple, set, frozenset, str, int, float,
                                  bool, collections.OrderedDict, collections.defaultdict})

# Methods of logging.Logger objects that are replayed after the graph, in program order, instead
# of breaking it (torch.compile's reorderable logging): they return None, and their arguments
# must be constants. transformers adds warning_once, info_once and warning_advice to Logger.
DEFERRED_LOGGER_METHODS = frozenset({
    "debug", "info", "warning", "warn", "error", "critical", "fatal", "log",
    "warning_once", "info_once", "warning_advice",
})

# Torch functions that read or change process state: graph break, never a graph node. Keyed by
# the unwrapped function (see stateful_reason).
STATEFUL_TORCH_FUNCTIONS = {inspect.unwrap(fn): why for fn, why in {
    torch.manual_seed: "changes the global RNG state",
    torch.seed: "changes the global RNG state",
    # The RNG state as a tensor: a graph node would read it once while tracing, and restoring
    # it (activation checkpointing, reproducible dropout) would not rewind the graph's draws.
    torch.get_rng_state: "reads the global RNG state",
    torch.set_rng_state: "changes the global RNG state",
    torch.initial_seed: "reads the global RNG state",
    torch.random.fork_rng: "saves and restores the global RNG state",
    torch.cuda.manual_seed: "changes the CUDA RNG state",
    torch.cuda.manual_seed_all: "changes the CUDA RNG state",
    torch.cuda.seed: "changes the CUDA RNG state",
    torch.cuda.seed_all: "changes the CUDA RNG state",
    torch.cuda.get_rng_state: "reads the CUDA RNG state",
    torch.cuda.set_rng_state: "changes the CUDA RNG state",
    torch.cuda.get_rng_state_all: "reads the CUDA RNG state",
    torch.cuda.set_rng_state_all: "changes the CUDA RNG state",
    # Process switches that return None: as a node they would be folded away after changing
    # the switch once, while tracing.
    torch.set_grad_enabled: "changes grad mode (as a call; use it as a with block)",
    torch.set_default_dtype: "changes the default dtype",
    torch.set_default_device: "changes the default device",
    torch.set_default_tensor_type: "changes the default tensor type",
    torch.use_deterministic_algorithms: "changes the deterministic-algorithms switch",
    torch.set_deterministic_debug_mode: "changes the deterministic-algorithms switch",
    torch.set_float32_matmul_precision: "changes the matmul precision",
    torch.set_warn_always: "changes a warning switch",
    torch.set_num_threads: "changes the number of threads",
    torch.set_num_interop_threads: "changes the number of threads",
    torch.set_flush_denormal: "changes a floating-point switch",
    torch.set_anomaly_enabled: "changes the anomaly-detection switch",
    torch.set_printoptions: "changes print options",
    torch.save: "does I/O",
    torch.load: "does I/O",
}.items()}


# The C setters of torch and torch._C by name (torch._C._set_deterministic_algorithms,
# _set_cudnn_benchmark, set_num_threads...): each changes a process switch and returns None, so
# as a node it would run once while tracing and be folded away. The switches the trace follows
# (grad mode, autocast) are handled before this rule (variables/tensor.py STATE_SWITCHES).
STATEFUL_SETTER_MODULES = frozenset({"torch", "torch._C"})
STATEFUL_SETTER_PREFIXES = ("set_", "_set_")
# Setters the trace follows itself (variables/tensor.py STATE_SWITCHES): not breaks, wherever
# they are called from (a user context manager's __enter__ / __exit__ included).
TRACED_SETTERS = frozenset({"_set_grad_enabled"})


def stateful_reason(fn: Any) -> str | None:
    """Why ``fn`` is in STATEFUL_TORCH_FUNCTIONS or is a setter of a process switch, if it is.
    Seen through wrappers: importing ``torch._dynamo`` replaces ``torch.manual_seed`` with a
    wrapper of it."""
    try:
        reason = STATEFUL_TORCH_FUNCTIONS.get(inspect.unwrap(fn))
    except (TypeError, ValueError):  # unhashable, or a __wrapped__ cycle
        return None
    if reason is None and isinstance(fn, types.BuiltinFunctionType) and \
            isinstance(fn.__self__, types.ModuleType) and \
            fn.__self__.__name__ in STATEFUL_SETTER_MODULES and \
            fn.__name__.startswith(STATEFUL_SETTER_PREFIXES) and \
            fn.__name__ not in TRACED_SETTERS:
        return "changes a process switch"
    return reason


# Builtins with a handler in variables/builtins.py, and classes that ClassVariable constructs
# natively (objects.CONSTRUCTORS): filled by those modules at import, because they sit above
# the rules and tell them what they model.
MODELLED_BUILTINS: set[Any] = set()
MODELLED_CLASSES: set[type] = set()
# torch.distributed functions that variables/distributed.py traces (collectives rewritten to
# functional collectives, process-group queries folded), each with its rule below; every other
# torch.distributed function is a graph break (rule torch_distributed).
DISTRIBUTED_MODELLED: dict[Any, Rule] = {}

# NumPy callables traced through torch._numpy (variables/numpy.py fills it): id -> (the callable,
# its torch._numpy function, or None for one folded on constants such as np.float32, np.iinfo).
NUMPY_FUNCTIONS: dict[int, tuple[Any, Any]] = {}


class Kind(enum.Enum):
    """The closed set of treatments a callable can get."""

    INLINE = "inline"  # trace its bytecode into the current graph
    POLYFILL = "polyfill"  # inline a pure-Python stand-in instead of the C original
    BUILTIN = "builtin"  # a handler in variables/builtins.py models it
    GRAPH = "graph"  # one node in the graph
    SKIP = "skip"  # graph break at the call; it runs eagerly


@dataclass(frozen=True)
class Rule:
    """One row of the decision tables: its name, the treatment, and why."""

    name: str
    kind: Kind
    why: str
    hint: str | None = None  # how to overrule it, shown with a graph break


@dataclass(frozen=True)
class Decision:
    """What :func:`lookup` decided for one callable, and the rule that decided it.

    ``target`` is what runs instead of the callable itself: the polyfill for ``POLYFILL``, the
    original function for a ``graphlift.compile`` wrapper. ``detail`` adds the user's reason
    (``disable(reason=...)``) or the module a module rule matched.
    """

    kind: Kind
    rule: Rule
    target: Any = None
    detail: str = ""

    def explain(self) -> str:
        """``"skip (rule 'stdlib': ...)"``: what the graph-break log and the doctor print."""
        detail = f"; {self.detail}" if self.detail else ""
        return f"{self.kind.value} (rule {self.rule.name!r}: {self.rule.why}{detail})"


_INLINE_MODULES_HINT = ("add its module to graphlift.config.inline_modules to trace it, or move "
                        "the call out of the compiled function")

# -- the rules: lookup() tries the user's overrides, then the per-object rows, then the
# per-module rows (config.skip_modules and config.inline_modules first among those) ----------
# User overrides.
DISABLED = Rule("disabled", Kind.SKIP, "disabled by the user (graphlift.disable)",
                "remove graphlift.disable to trace it")
TORCH_DISABLED = Rule("torch_disabled", Kind.SKIP, "disabled by the user (torch.compiler.disable)",
                      "remove torch.compiler.disable to trace it")
TORCH_DISALLOWED = Rule("torch_disallowed", Kind.SKIP,
                        "kept out of the graph by the user (torch._dynamo.disallow_in_graph)",
                        "remove torch._dynamo.disallow_in_graph to put it in the graph")
ALLOW_IN_GRAPH = Rule("allow_in_graph", Kind.GRAPH,
                      "allowed in the graph by the user (graphlift.allow_in_graph or "
                      "torch.compiler.allow_in_graph): one opaque node, its body is not traced")
# Per-object rows.
COMPILED_FUNCTION = Rule("compiled_function", Kind.INLINE,
                         "a graphlift.compile or torch.compile wrapper: its original function is "
                         "inlined")
TORCH_REGION = Rule("torch_region", Kind.INLINE,
                    "a function marked with torch.compiler.nested_compile_region: the marked "
                    "function is inlined (only graphlift.nested_compile_region's marks are "
                    "traced once and reused)")
FORCED_BREAK = Rule("graph_break", Kind.SKIP,
                    "it asks for a graph break here (graphlift.graph_break, "
                    "torch._dynamo.graph_break)", "remove the call to capture one graph")
TORCH_MARKER = Rule("torch_marker", Kind.POLYFILL,
                    "a torch.compile query or marker, answered as in compiled code "
                    "(is_compiling() is True)")
HIGHER_ORDER = Rule("higher_order_op", Kind.GRAPH,
                    "a torch higher-order operator: the functions it takes are traced into "
                    "subgraphs and the operator is one node, as under torch.compile")
TORCH_FORBIDDEN = Rule("torch_forbidden", Kind.SKIP,
                       "torch.compile forbids it in a compiled region (set_stance, mark_dynamic); "
                       "it runs eagerly at a graph break",
                       "call it before calling the compiled function")
OPTIMIZER_GRAD_MODE = Rule("optimizer_grad_mode", Kind.POLYFILL,
                           "torch.optim's grad-mode wrapper of a step: the step under its grad "
                           "mode, without the wrapper's two graph breaks (around them torch."
                           "compile's graphs are empty)")
OPTIMIZER_FIRST_STEP = Rule("optimizer_first_step", Kind.SKIP,
                            "an optimizer step that makes the optimizer's state: the call runs "
                            "eagerly once, and the next compiles the step with the state made",
                            "nothing to do: from the second call on the step is compiled")
POLYFILLED = Rule("polyfill", Kind.POLYFILL,
                  "a C function with a pure-Python stand-in in graphlift.polyfills")
POLYFILL_DECLINED = Rule("polyfill_declined", Kind.SKIP,
                         "its polyfill does not accept these arguments, so the original runs "
                         "eagerly", "pass arguments the polyfill models, or accept the break")
MODELLED_CLASS = Rule("modelled_class", Kind.BUILTIN,
                      "a class whose construction graphlift models (grad modes, deque, "
                      "OrderedDict, torch.Size, exceptions, namedtuples)")
IO_BUILTIN = Rule("io_builtin", Kind.SKIP, "it does I/O or talks to the interpreter, which a "
                  "graph cannot do", "remove the call, or accept the graph break")
PYTHON_BUILTIN = Rule("python_builtin", Kind.BUILTIN,
                      "a Python builtin modelled by a handler in variables/builtins.py")
UNHANDLED_BUILTIN = Rule("unhandled_builtin", Kind.SKIP,
                         "a Python builtin that graphlift does not model",
                         "move the call out of the compiled function")
BUILTIN_TYPE_METHOD = Rule("builtin_type_method", Kind.BUILTIN,
                           "a C method of a builtin type (dict.get, list.__contains__, "
                           "object.__setattr__): applied to the tracked value")
CONSTANT_CLASS_METHOD = Rule("constant_class_method", Kind.BUILTIN,
                             "a class method of a builtin class (dict.fromkeys, "
                             "int.from_bytes): folded on constants; fromkeys of any dict type "
                             "is modelled")
PURE_C_FUNCTION = Rule("pure_c_function", Kind.BUILTIN,
                       "a math/operator function: folded on constants, one graph node on "
                       "tensors")
TORCH_GLOBAL_STATE = Rule("torch_global_state", Kind.SKIP,
                          "a torch function that reads or changes process state (RNG, "
                          "defaults, files)", "call it outside the compiled function")
TENSOR_METHOD = Rule("tensor_method", Kind.GRAPH, "a method of torch.Tensor")
TORCH_OP = Rule("torch_op", Kind.GRAPH,
                "a torch operator or C binding (torch.*, torch.nn.functional C ops, aten ops)")
C_METHOD = Rule("c_method", Kind.SKIP, "a method of a C type graphlift does not model",
                "move the call out of the compiled function")
CUSTOM_OP = Rule("custom_op", Kind.GRAPH,
                 "a torch.library.custom_op function: one node targeting its operator overload, "
                 "run on fake tensors through its fake kernel")
# Per-module rows.
CONFIG_SKIP = Rule("config.skip_modules", Kind.SKIP,
                   "its module is listed in graphlift.config.skip_modules",
                   "remove the module from graphlift.config.skip_modules")
CONFIG_INLINE = Rule("config.inline_modules", Kind.INLINE,
                     "its module is listed in graphlift.config.inline_modules")
GRAPHLIFT_POLYFILLS = Rule("graphlift.polyfills", Kind.INLINE,
                           "graphlift's pure-Python polyfills are traced like user code")
GRAPHLIFT = Rule("graphlift", Kind.SKIP, "graphlift's own code never traces itself",
                 "call graphlift's API outside the compiled function")
TORCH_INLINE = Rule("torch_inline", Kind.INLINE,
                    "a part of torch written in Python that is safe to trace "
                    "(nn.Module forwards, torch.nn.functional, grad-mode decorators)")
TORCH_CLASS = Rule("torch_class", Kind.SKIP,
                   "constructing this torch class while tracing is not modelled",
                   "construct it outside the compiled function and pass it in")
TORCH_BOUND_METHOD = Rule("torch_bound_method", Kind.SKIP,
                          "a torch method bound to a real object (an optimizer, a hook "
                          "handle): running it on fake tensors could change the object",
                          "call it outside the compiled function")
TORCH_DISTRIBUTED = Rule("torch_distributed", Kind.SKIP,
                         "torch.distributed talks to other processes and writes into its "
                         "tensors (all_reduce fills its argument): it runs eagerly",
                         "accept the graph break, or call it outside the compiled function")
DISTRIBUTED_COLLECTIVE = Rule("distributed_collective", Kind.GRAPH,
                              "an in-place c10d collective (all_reduce, broadcast...), rewritten "
                              "to a functional collective, its wait and a copy back into its "
                              "tensor, as torch.compile does (variables/distributed.py)")
DISTRIBUTED_QUERY = Rule("distributed_query", Kind.BUILTIN,
                         "a process-group query (get_rank, get_world_size, is_initialized): "
                         "folded to a constant, guarded on the default group")
NUMPY_FUNCTION = Rule("numpy", Kind.GRAPH,
                      "a NumPy function with a torch._numpy counterpart, traced as torch "
                      "operations (config.trace_numpy)", "set config.trace_numpy = False to run "
                      "NumPy eagerly")
TORCH_PYTHON = Rule("torch_python", Kind.GRAPH,
                    "a torch function written in Python, kept whole as one node")
TORCH_CLOSURE = Rule("torch_closure", Kind.SKIP,
                     "a torch function written in Python that closes over an object of the "
                     "program (LRScheduler's wrapper of optimizer.step): run while tracing it "
                     "would change that object, so it runs eagerly",
                     "accept the graph break, or call it outside the compiled function")
STDLIB = Rule("stdlib", Kind.SKIP, "the standard library runs eagerly", _INLINE_MODULES_HINT)
STDLIB_TRACED = Rule("stdlib_traced", Kind.INLINE,
                     "a Python class of the standard library that is traced with its methods")
THIRD_PARTY = Rule("third_party", Kind.SKIP, "a third-party library on the skip list",
                   _INLINE_MODULES_HINT)
C_FUNCTION = Rule("c_function", Kind.SKIP,
                  "a C function graphlift cannot see into and has no polyfill for",
                  "move the call out of the compiled function")
USER_CODE = Rule("user_code", Kind.INLINE, "user code is traced")

# Every rule, for reports and tests (names are unique).
RULES = (DISABLED, TORCH_DISABLED, TORCH_DISALLOWED, ALLOW_IN_GRAPH, COMPILED_FUNCTION,
         TORCH_REGION, FORCED_BREAK, TORCH_MARKER, HIGHER_ORDER, TORCH_FORBIDDEN,
         OPTIMIZER_GRAD_MODE, OPTIMIZER_FIRST_STEP, POLYFILLED,
         POLYFILL_DECLINED, MODELLED_CLASS, IO_BUILTIN, PYTHON_BUILTIN, UNHANDLED_BUILTIN,
         BUILTIN_TYPE_METHOD, CONSTANT_CLASS_METHOD, PURE_C_FUNCTION, TORCH_GLOBAL_STATE,
         TENSOR_METHOD, TORCH_OP, CUSTOM_OP, C_METHOD, CONFIG_SKIP, CONFIG_INLINE,
         GRAPHLIFT_POLYFILLS, GRAPHLIFT, TORCH_INLINE, TORCH_CLASS, TORCH_BOUND_METHOD,
         TORCH_DISTRIBUTED, DISTRIBUTED_COLLECTIVE, DISTRIBUTED_QUERY, NUMPY_FUNCTION,
         TORCH_PYTHON, TORCH_CLOSURE, STDLIB_TRACED, STDLIB, THIRD_PARTY, C_FUNCTION, USER_CODE)

# Parts of torch traced like user code, by module name (a prefix matches its submodules).
TORCH_INLINE_MODULES = (
    "torch.nn.modules",  # nn.Module forwards and their helpers
    "torch.nn.functional",  # the Python functions of F (F.relu, F.softmax); C ops are one node
    "torch.utils._contextlib",  # @torch.no_grad() / @torch.enable_grad() decorated functions
    "torch.autograd.grad_mode",  # their clone(): @torch.set_grad_enabled(False) decorators
    "torch.optim",  # optimizers' step, _init_group and foreach/for-loop kernels
)

# Python builtins that do I/O or reach into the interpreter: always a graph break.
IO_BUILTINS = frozenset({
    print,  # writes to stdout
    input,  # reads stdin
    open,  # file I/O
    breakpoint,  # enters the debugger
    exec,  # runs arbitrary code (eval has a handler: a literal folds, other code is skipped)
    compile,  # makes code objects
    globals,  # the interpreter's frame state
    locals,  # the interpreter's frame state
    help,  # interactive help (site.py)
})

# torch Python functions behind a wrapper from another module (typing_extensions.deprecated),
# which the module rows would take for user code: run whole on fake tensors, as the rest of torch.
TORCH_WRAPPED_PYTHON = frozenset({
    torch._check_is_size,  # records that an unbacked symbol is a size (>= 0)
})

# Modules whose globals inlined code reads without guards (see is_trusted_globals).
TRUSTED_MODULES = ("graphlift.polyfills", "torch")

# Standard-library modules that are traced (pure computation, no interpreter state). Everything
# else in sys.stdlib_module_names is skipped.
STDLIB_INLINE = frozenset({
    "dataclasses",  # fields(), replace(): plain attribute work on user objects
    "contextlib",  # @contextmanager generators, suppress, nullcontext: with blocks in Python
    "collections.abc",  # the mixin methods of Mapping, Sequence, Set (get, __contains__, keys)
})

# Python classes of skipped standard-library modules that are traced, with their methods: module
# -> class qualnames.
STDLIB_INLINE_CLASSES = {
    # functools.py's own partial, which runs where _functools is not imported (a fresh import
    # of functools without it); the C partial has its polyfill.
    "functools": ("partial",),
}

# Third-party libraries skipped by default, by top-level module name.
THIRD_PARTY_SKIP = frozenset({
    "numpy",  # C arrays: outside the graph's world
    "pandas", "scipy", "sklearn",  # scientific stack built on numpy
    "tqdm",  # progress bars write to the terminal
    "tabulate", "rich",  # terminal output
    "hypothesis", "pytest", "_pytest",  # test frameworks
    "tensorflow", "jax", "onnx", "onnxruntime",  # other frameworks
    "networkx", "omegaconf", "hydra", "yaml", "PIL",  # configs, graphs, files
})

# torch.compile's own markers, matched by identity: (module, name) -> the decision for a call.
# Their modules are read from sys.modules, never imported (see the module docstring).
TORCH_HIGHER_ORDER = Rule("torch_higher_order", Kind.POLYFILL,
                            "a torch higher-order op over a Python function, traced as the "
                            "operations it stands for")
_QUERY = functools.partial(Decision, Kind.POLYFILL, TORCH_MARKER)
TORCH_MARKERS: dict[tuple[str, str], Decision] = {
    ("torch.compiler", "is_compiling"): _QUERY(compiler.is_compiling),  # True in compiled code
    ("torch.compiler", "is_dynamo_compiling"): _QUERY(compiler.is_compiling),  # same
    ("torch.compiler", "is_exporting"): _QUERY(compiler.is_exporting),  # never exporting
    ("torch._utils", "is_compiling"): _QUERY(compiler.is_compiling),  # the old spelling
    ("torch._dynamo.external_utils", "is_compiling"): _QUERY(compiler.is_compiling),
    ("torch._dynamo.decorators", "graph_break"): Decision(Kind.SKIP, FORCED_BREAK),
    # empty: the entry's guards check that no mode is active (the trace's fake mode is its own)
    ("torch.utils._python_dispatch", "_get_current_dispatch_mode_stack"):
        _QUERY(compiler.current_dispatch_modes),
    ("torch._dynamo.decorators", "mark_static"): _QUERY(compiler.mark_static),  # specializes
    # a higher-order op taking a Python function: unrolled into the graph (see the polyfill)
    ("torch._higher_order_ops.associative_scan", "associative_scan"):
        Decision(Kind.POLYFILL, TORCH_HIGHER_ORDER, compiler.associative_scan),
}
# torch's higher-order operators over Python functions, by identity: each call traces the
# functions into subgraphs and is one operator node (variables/higher_order.py, by the name).
HIGHER_ORDER_OPS: dict[Any, str] = {
    torch.cond: "cond",  # torch._higher_order_ops.cond.cond
    sys.modules["torch._higher_order_ops.while_loop"].while_loop: "while_loop",
    sys.modules["torch._higher_order_ops.map"].map: "map",
    sys.modules["torch._higher_order_ops.scan"].scan: "scan",
    # torch._disable_dynamo's wrapper: before the row that skips those (_torch_marker)
    sys.modules["torch.utils.checkpoint"].checkpoint: "checkpoint",
}
TORCH_FORBIDDEN_ATTR = "_dynamo_forbidden"  # torch's mark on set_stance, mark_dynamic, ...
TORCH_DISABLED_ATTR = "_torchdynamo_disable"  # torch.compiler.disable's mark on its wrapper
TORCH_DISABLED_MSG_ATTR = "_torchdynamo_disable_msg"  # disable(reason=...)
TORCH_ORIGINAL_ATTR = "_torchdynamo_orig_callable"  # on torch.compile's and disable's wrappers
TORCH_WRAPPER_ID_ATTR = "_torchdynamo_wrapper_id"  # id() of the wrapper that set the one above
# torch.compiler.nested_compile_region's wrapper: its code, and where it keeps the marked
# function. Kept whole as a graph node, the wrapper would run on fake tensors and its generated
# call names a function that cannot be found by its module path.
_TORCH_REGION_CODE = torch.compiler.nested_compile_region(lambda: None).__code__
TORCH_REGION_ATTR = "__marked_compile_region_fn__"
TORCH_TRACE_RULES = "torch._dynamo.trace_rules"  # holds allow_in_graph's and disallow's ids
TORCH_ALLOWED_IDS = "_allowed_callable_ids"  # torch._dynamo.allow_in_graph adds, disallow removes
TORCH_DISALLOWED_IDS = "_disallowed_callable_ids"  # disallow_in_graph adds, allow_in_graph removes
TORCH_POLYFILLED = "torch._dynamo.variables.functions"  # holds substitute_in_graph's stand-ins
# The code of the wrappers torch._disable_dynamo makes (torch disables its optimizers' step, and
# torch.manual_seed once torch._dynamo is imported, with it): disabled functions too, as under
# torch.compile. The one mechanism for them: stateful_reason sees through the wrapper first, so
# manual_seed is decided the same whether torch._dynamo was imported or not.
_TORCH_DISABLE_DYNAMO_CODE = torch._disable_dynamo(lambda: None).__code__

_BUILTINS = {id(v): v for v in vars(builtins).values()}
_PURE_C_MODULES = frozenset({"math", "cmath", "operator", "_operator"})
# C functions of other modules that are pure too: folded on constants like those modules'.
PURE_C_FUNCTIONS = frozenset({
    struct.pack,  # bytes from constants (not pack_into, which writes into a buffer)
    struct.unpack,  # a tuple of numbers from bytes (not iter_unpack: an iterator, stateful)
    struct.calcsize,  # the size of a format
})

# Override registries. Keys are ids; the values keep the objects alive so no id is reused.
_allowed: dict[int, Callable] = {}
_fakes: dict[int, Callable] = {}
DISABLED_ATTR = "_graphlift_disabled"  # on a graphlift.disable wrapper (eval_frame's name)
COMPILED_ATTR = "_graphlift_fn"  # on a graphlift.compile wrapper (eval_frame.WRAPPED_ATTR)


# -- lookup --------------------------------------------------------------------------------------
def lookup(fn: Any) -> Decision:
    """The decision for calling ``fn`` while tracing, and the rule that made it."""
    decision = override(fn)
    if decision is not None:
        return decision
    if isinstance(fn, types.MethodType):  # a bound method is decided by its function
        decision = lookup(fn.__func__)
        if decision.kind is Kind.GRAPH and decision.rule is not ALLOW_IN_GRAPH:
            return Decision(Kind.SKIP, TORCH_BOUND_METHOD, detail=_name(fn.__func__))
        return decision
    decision = _by_object(fn)
    if decision is not None:
        return decision
    return _by_module(fn, module_of(fn))


def override(fn: Any) -> Decision | None:
    """The user's decision for ``fn``, if any: disabled, allowed in the graph, or compiled."""
    reason = _safe_getattr(fn, DISABLED_ATTR)
    if reason is not None:
        return Decision(Kind.SKIP, DISABLED, detail=reason)
    if _safe_getattr(fn, TORCH_DISABLED_ATTR):
        return Decision(Kind.SKIP, TORCH_DISABLED,
                        detail=_safe_getattr(fn, TORCH_DISABLED_MSG_ATTR) or "")
    # Before allowed, as in torch's lookup. torch disallows its own graph_break this way too:
    # its rows in TORCH_MARKERS say more (a forced break).
    if _in_torch_registry(TORCH_DISALLOWED_IDS, fn) and _torch_marker(fn) is None:
        return Decision(Kind.SKIP, TORCH_DISALLOWED)
    if is_overridden(fn):
        return Decision(Kind.GRAPH, ALLOW_IN_GRAPH)
    original = _safe_getattr(fn, COMPILED_ATTR) or torch_original(fn)
    if original is not None:
        return Decision(Kind.INLINE, COMPILED_FUNCTION, target=original)
    marked = torch_region_target(fn)
    if marked is not None:
        return Decision(Kind.INLINE, TORCH_REGION, target=marked)
    return None


def original_attr(wrapper: Any) -> str:
    """The attribute of a compile wrapper that holds its function (guards read it there)."""
    if _safe_getattr(wrapper, COMPILED_ATTR) is not None:
        return COMPILED_ATTR
    return TORCH_REGION_ATTR if torch_region_target(wrapper) is not None else TORCH_ORIGINAL_ATTR


def torch_region_target(fn: Any) -> Any:
    """The function a torch.compiler.nested_compile_region wrapper marks, else None (only
    torch's wrapper itself: a ``functools.wraps`` copy of its attributes has other code)."""
    if not isinstance(fn, types.FunctionType) or fn.__code__ is not _TORCH_REGION_CODE:
        return None
    return _safe_getattr(fn, TORCH_REGION_ATTR)


def torch_original(fn: Any) -> Any:
    """The function a torch.compile (or torch.compiler.disable) wrapper wraps, else None.

    Only the wrapper that made the mark counts: ``functools.wraps`` copies it onto wrappers of
    the wrapper, whose id then differs (as torch's own ``innermost_fn`` checks).
    """
    original = _safe_getattr(fn, TORCH_ORIGINAL_ATTR)
    if original is None or _safe_getattr(fn, TORCH_WRAPPER_ID_ATTR) != id(fn):
        return None
    return original


def torch_substitute(fn: Any) -> Callable | None:
    """The stand-in a user gave ``torch.compiler.substitute_in_graph`` for ``fn``, if any.

    torch's registry also holds torch's own stand-ins (for builtins, itertools...), written for
    torch.compile's tracer: those are left out, graphlift has its own.
    """
    functions = sys.modules.get(TORCH_POLYFILLED)
    if functions is None or not hashable(fn):
        return None
    handler = functions.PolyfilledFunctionVariable._get_polyfill_handlers().get(fn)
    stand_in = getattr(handler, "__torch_dynamo_polyfill__", None)
    if stand_in is None or _prefix_match(module_of(stand_in) or "", ("torch",)):
        return None
    return stand_in


def constant_foldable(fn: Any) -> bool:
    """Whether calls of ``fn`` on constants run for real (``can_constant_fold_through``)."""
    if not hashable(fn):
        return False
    if fn in CONSTANT_FOLDABLE:
        return True
    functions = sys.modules.get(TORCH_POLYFILLED)
    handler = functions.PolyfilledFunctionVariable._get_polyfill_handlers().get(fn) \
        if functions is not None else None
    return bool(getattr(handler, "__torch_dynamo_can_constant_fold_through__", False))


def _torch_marker(fn: Any) -> Decision | None:
    """torch.compile's markers: forbidden callables, and the rows of :data:`TORCH_MARKERS`."""
    if not isinstance(fn, (types.FunctionType, type)):
        return None
    if getattr(fn, "__code__", None) is _TORCH_DISABLE_DYNAMO_CODE:
        return Decision(Kind.SKIP, TORCH_DISABLED, detail="torch._disable_dynamo, inside torch")
    if vars(fn).get(TORCH_FORBIDDEN_ATTR):
        return Decision(Kind.SKIP, TORCH_FORBIDDEN, detail=_name(fn))
    module_name = module_of(fn)
    decision = TORCH_MARKERS.get((module_name, fn.__qualname__))
    if decision is None or getattr(sys.modules.get(module_name), fn.__name__, None) is not fn:
        return None
    return decision


def _by_object(fn: Any) -> Decision | None:
    """Rules that recognise the object itself (before its module is considered)."""
    if fn is graph_break:  # before the row for graphlift's own module
        return Decision(Kind.SKIP, FORCED_BREAK)
    higher_order = HIGHER_ORDER_OPS.get(fn) if hashable(fn) else None
    if higher_order is not None:
        return Decision(Kind.GRAPH, HIGHER_ORDER, target=higher_order)
    stateful = stateful_reason(fn)  # before torch's markers: torch._dynamo disables manual_seed
    if stateful is not None:
        return Decision(Kind.SKIP, TORCH_GLOBAL_STATE, detail=stateful)
    marker = _torch_marker(fn)
    if marker is not None:
        return marker
    if fn is optim.run_first_step_eagerly:
        return Decision(Kind.SKIP, OPTIMIZER_FIRST_STEP)
    if getattr(fn, "__code__", None) is optim.USE_GRAD_CODE:
        return Decision(Kind.POLYFILL, OPTIMIZER_GRAD_MODE, target=optim.use_grad_stand_in(fn))
    numpy_entry = NUMPY_FUNCTIONS.get(id(fn)) if config.trace_numpy else None
    if numpy_entry is not None and numpy_entry[0] is fn:  # before the third-party row
        return Decision(Kind.GRAPH, NUMPY_FUNCTION, target=numpy_entry[1])
    polyfill = (polyfill_for(fn) or torch_substitute(fn)) if config.use_polyfills else None
    if hashable(fn) and fn in IO_BUILTINS:
        return Decision(Kind.SKIP, IO_BUILTIN)
    if is_handled_builtin(fn):
        return Decision(Kind.BUILTIN, PYTHON_BUILTIN, target=polyfill)
    owner = getattr(fn, "__self__", None)
    if isinstance(fn, types.BuiltinFunctionType) and isinstance(owner, type) and \
            (owner in CONSTANT_CLASSES or (issubclass(owner, dict) and fn.__name__ == "fromkeys")):
        return Decision(Kind.BUILTIN, CONSTANT_CLASS_METHOD)
    if id(fn) in _BUILTINS and _BUILTINS[id(fn)] is fn and callable(fn):
        # A native handler first; the polyfill (target) when it cannot follow the arguments.
        if is_modelled_builtin(fn):
            return Decision(Kind.BUILTIN, PYTHON_BUILTIN, target=polyfill)
        if polyfill is None:
            return Decision(Kind.SKIP, UNHANDLED_BUILTIN)
    if polyfill is not None:
        return Decision(Kind.POLYFILL, POLYFILLED, target=polyfill)
    if is_builtin_method(fn):  # after the polyfills: OrderedDict.move_to_end has one
        return Decision(Kind.BUILTIN, BUILTIN_TYPE_METHOD)
    if fn is call_original:
        return Decision(Kind.SKIP, POLYFILL_DECLINED)
    if isinstance(fn, type) and is_modelled_class(fn):
        return Decision(Kind.BUILTIN, MODELLED_CLASS)
    if isinstance(fn, types.BuiltinFunctionType) and \
            (getattr(fn, "__module__", None) in _PURE_C_MODULES or fn in PURE_C_FUNCTIONS):
        return Decision(Kind.BUILTIN, PURE_C_FUNCTION)
    if isinstance(fn, types.BuiltinFunctionType) and owner is not None and \
            not isinstance(owner, (types.ModuleType, type)):
        return Decision(Kind.SKIP, C_METHOD, detail=f"bound to a {type(owner).__name__} object")
    objclass = getattr(fn, "__objclass__", None)
    if isinstance(objclass, type) and issubclass(objclass, torch._C.TensorBase):
        return Decision(Kind.GRAPH, TENSOR_METHOD)
    if isinstance(fn, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        return Decision(Kind.GRAPH, TORCH_OP)
    if isinstance(fn, CustomOpDef):  # before the module row: an object of torch._library
        return Decision(Kind.GRAPH, CUSTOM_OP)
    distributed = DISTRIBUTED_MODELLED.get(fn) if hashable(fn) else None
    if distributed is not None:  # before the module row that skips torch.distributed
        return Decision(distributed.kind, distributed)
    if hashable(fn) and fn in TORCH_WRAPPED_PYTHON:
        return Decision(Kind.GRAPH, TORCH_PYTHON)
    return None


def module_rule(fn: Any) -> Decision:
    """The decision the rows that go by ``fn``'s module make (the user's overrides aside)."""
    return _by_module(fn, module_of(fn))


def _by_module(fn: Any, module: str | None) -> Decision:
    """Rules that go by the module ``fn`` was defined in."""
    name = module or ""
    matched = _prefix_match(name, config.skip_modules)
    if matched:
        return Decision(Kind.SKIP, CONFIG_SKIP, detail=f"module {name} matched {matched!r}")
    python = isinstance(fn, (types.FunctionType, type))
    matched = _prefix_match(name, config.inline_modules)
    if matched and python:
        return Decision(Kind.INLINE, CONFIG_INLINE, detail=f"module {name} matched {matched!r}")
    if _prefix_match(name, ("graphlift.polyfills",)):
        return Decision(Kind.INLINE, GRAPHLIFT_POLYFILLS)
    if _prefix_match(name, ("graphlift",)):
        return Decision(Kind.SKIP, GRAPHLIFT, detail=f"module {name}")
    if _prefix_match(name, ("torch",)):
        if _prefix_match(name, ("torch.distributed",)):
            return Decision(Kind.SKIP, TORCH_DISTRIBUTED, detail=f"module {name}")
        if isinstance(fn, type):
            return Decision(Kind.SKIP, TORCH_CLASS, detail=f"module {name}")
        if python and _prefix_match(name, TORCH_INLINE_MODULES):
            return Decision(Kind.INLINE, TORCH_INLINE, detail=f"module {name}")
        if python and _closes_over_objects(fn):
            return Decision(Kind.SKIP, TORCH_CLOSURE, detail=_name(fn))
        return Decision(Kind.GRAPH, TORCH_PYTHON if python else TORCH_OP, detail=f"module {name}")
    top = name.partition(".")[0]
    if name in STDLIB_INLINE_CLASSES and _written_in_python(fn) and \
            _prefix_match(fn.__qualname__, STDLIB_INLINE_CLASSES[name]):
        return Decision(Kind.INLINE, STDLIB_TRACED, detail=_name(fn))
    if is_stdlib(name) and not _prefix_match(name, STDLIB_INLINE):
        if top == "builtins":  # a method of str, list, dict...
            return Decision(Kind.SKIP, C_METHOD, detail=_name(fn))
        return Decision(Kind.SKIP, STDLIB, detail=f"module {name}")
    if top in THIRD_PARTY_SKIP:
        return Decision(Kind.SKIP, THIRD_PARTY, detail=f"module {name}")
    if not python:
        return Decision(Kind.SKIP, C_FUNCTION if isinstance(fn, types.BuiltinFunctionType)
                        else C_METHOD, detail=f"{type(fn).__name__} {_name(fn)}")
    return Decision(Kind.INLINE, USER_CODE)


# What a closure cell of a torch function kept whole may hold: code and constants, which running
# it on fake tensors cannot change, and the grad and autocast modes of torch's decorators
# (``@torch.autocast(...)``), entered and left around the call. Anything else (an optimizer, a
# weakref to one, a real tensor) is the program's object, and the function's effects on it would
# happen while tracing, not in the graph.
_INERT_CELL_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                     type, types.ModuleType, int, float, bool, str, bytes, type(None),
                     torch.dtype, torch.device, torch.amp.autocast, torch.no_grad,
                     torch.enable_grad, torch.set_grad_enabled, torch.inference_mode)


def _closes_over_objects(fn: types.FunctionType) -> bool:
    """Whether ``fn``'s closure holds an object of the program (see _INERT_CELL_TYPES)."""
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if not isinstance(value, _INERT_CELL_TYPES):
            return True
    return False


@functools.cache
def is_stdlib(module: str) -> bool:
    """Whether ``module`` is the standard library's (a user's ``test.py`` is not)."""
    if module.partition(".")[0] not in sys.stdlib_module_names:
        return False
    path = getattr(sys.modules.get(module), "__file__", None)
    if path is None:
        return True  # built into the interpreter (sys, builtins, itertools...)
    path = os.path.realpath(path)
    return path.startswith(_STDLIB_DIRS) and not any(
        part in path.split(os.sep) for part in ("site-packages", "dist-packages"))


_STDLIB_DIRS = tuple({os.path.realpath(sysconfig.get_paths()[key]) + os.sep
                      for key in ("stdlib", "platstdlib")})


def module_of(fn: Any) -> str | None:
    """The name of the module that defined ``fn`` (not what ``functools.wraps`` copied)."""
    if isinstance(fn, types.FunctionType):
        return fn.__globals__.get("__name__")
    if isinstance(fn, types.BuiltinFunctionType):
        owner = fn.__self__
        if isinstance(owner, types.ModuleType):
            return owner.__name__
        if isinstance(owner, type):
            return getattr(owner, "__module__", None)
        return fn.__module__ or type(owner).__module__
    objclass = getattr(fn, "__objclass__", None)
    if isinstance(objclass, type):
        return getattr(objclass, "__module__", None)
    if isinstance(fn, type):  # a class made by type() where globals lack __name__ has none
        return getattr(fn, "__module__", None)
    return getattr(fn, "__module__", None) or type(fn).__module__


def is_modelled_class(cls: type) -> bool:
    """Classes that ClassVariable constructs natively (objects.CONSTRUCTORS, exceptions,
    named tuples)."""
    return cls in MODELLED_CLASSES or issubclass(cls, BaseException) or \
        (issubclass(cls, tuple) and hasattr(cls, "_fields"))


def is_builtin_method(fn: Any) -> bool:
    """A C method of a builtin type as found on the type (``dict.get``, ``object.__eq__``)."""
    return isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
        fn.__objclass__ in BUILTIN_METHOD_TYPES


def is_third_party(value: Any) -> bool:
    """Callable objects of skipped libraries (numpy's functions and ufuncs are objects)."""
    return (type(value).__module__ or "").partition(".")[0] in THIRD_PARTY_SKIP


def is_overridden(fn: Any) -> bool:
    """Whether ``fn`` was given to graphlift's or torch's allow_in_graph."""
    return id(fn) in _allowed or _in_torch_registry(TORCH_ALLOWED_IDS, fn)


def _in_torch_registry(registry: str, fn: Any) -> bool:
    """Whether ``fn``'s id is in one of torch._dynamo.trace_rules' id sets (read, never made:
    a set torch has not filled yet holds nothing)."""
    torch_rules = sys.modules.get(TORCH_TRACE_RULES)
    ids = getattr(getattr(torch_rules, registry, None), "function_ids", None)
    return bool(ids) and id(fn) in ids


def is_modelled_builtin(fn: Any) -> bool:
    """Whether variables/builtins.py has a handler, folds it, or models the type."""
    return isinstance(fn, type) or is_handled_builtin(fn) or fn in PURE_BUILTINS


def is_handled_builtin(fn: Any) -> bool:
    """Whether variables/builtins.py has a handler for ``fn`` (object.__setattr__ included)."""
    return hashable(fn) and fn in MODELLED_BUILTINS


# -- overrides -----------------------------------------------------------------------------------
def register_allowed(fn: Callable, fake: Callable | None) -> None:
    """Record ``graphlift.allow_in_graph(fn, fake=fake)``."""
    _allowed[id(fn)] = fn
    if fake is not None:
        _fakes[id(fn)] = fake


def is_torch_module(module: types.ModuleType) -> bool:
    """torch and its submodules: namespaces trusted not to be monkey-patched between calls."""
    name = module.__name__
    return name == "torch" or name.startswith("torch.")


def is_trusted_globals(globals_dict: dict[str, Any]) -> bool:
    """Globals read without guards while tracing: graphlift's polyfills, and torch's modules
    (trusted not to be monkey-patched between calls, as torch's namespaces are)."""
    name = globals_dict.get("__name__")
    return isinstance(name, str) and _prefix_match(name, TRUSTED_MODULES) is not None


def fake_impl(fn: Any) -> Callable | None:
    """The ``fake=`` function given to :func:`allow_in_graph` for ``fn``, if any."""
    return _fakes.get(id(fn))


def disallow_in_graph(fn: Callable) -> None:
    """Undo :func:`allow_in_graph` for ``fn``."""
    _allowed.pop(id(fn), None)
    _fakes.pop(id(fn), None)


def skip_error(fn: Any, decision: Decision) -> Unsupported:
    """The graph break for a call that ``decision`` skips; the explanation names the rule.

    ``fn`` is the callable, or its name when only that is known.
    """
    if decision.rule in (DISABLED, TORCH_DISABLED):
        reason = f": {decision.detail}" if decision.detail else ""
        api = "graphlift.disable" if decision.rule is DISABLED else "torch.compiler.disable"
        explanation = f"{_name(fn)}() is disabled by the user ({api}){reason}"
    elif decision.rule is FORCED_BREAK:
        return Unsupported(f"{_name(fn)}() was called", break_type="forced",
                           hints=(FORCED_BREAK.hint,))
    else:
        explanation = f"{_name(fn)}() skipped by trace rule {decision.rule.name!r}: " \
                      f"{decision.rule.why}" + (f" ({decision.detail})" if decision.detail else "")
    hints = (decision.rule.hint,) if decision.rule.hint else ()
    return Unsupported(explanation, break_type="skipped_function", hints=hints)


# -- helpers -------------------------------------------------------------------------------------
def _prefix_match(name: str, prefixes: Any) -> str | None:
    """The first of ``prefixes`` that is ``name`` or a package containing it."""
    for prefix in prefixes:
        if name == prefix or name.startswith(prefix + "."):
            return prefix
    return None


def _written_in_python(fn: Any) -> bool:
    """A Python function, or a class with methods written in Python (a C class of the same name,
    the C ``functools.partial``, has none)."""
    if isinstance(fn, type):
        return any(isinstance(v, (types.FunctionType, staticmethod)) for v in vars(fn).values())
    return isinstance(fn, types.FunctionType)


def _safe_getattr(fn: Any, name: str) -> Any:
    """An attribute that graphlift.disable or graphlift.compile set on a wrapper function.

    Only functions carry them, so no other object's ``__getattr__`` ever runs here.
    """
    return fn.__dict__.get(name) if isinstance(fn, types.FunctionType) else None


def hashable(value: Any) -> bool:
    """Whether ``value`` can be a key of the rule tables (and any dict or set)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _name(fn: Any) -> str:
    """``module.qualname`` as the user knows it (a wrapper made by functools.wraps included)."""
    if isinstance(fn, str):
        return fn
    module = getattr(fn, "__module__", None)
    if not isinstance(module, str):
        module = module_of(fn)
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{qualname}" if module and module != "builtins" else qualname
