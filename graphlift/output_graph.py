"""The graph being captured: an FX graph, its fake-tensor mode, its inputs and its compile.

Every tensor the translator sees is a :class:`~graphlift.variables.TensorVariable` holding an FX
node and a fake tensor with the same metadata. Real tensors enter only as graph inputs
(placeholders, each tied to the :class:`~graphlift.sources.Source` that reaches it again at run
time); operations run on fake tensors while tracing, so dtypes are known constants, and so are
sizes, except the dynamic ones: those are symbols of the fake mode's ``ShapeEnv`` (see
:mod:`graphlift.dynamic_shapes`, which decides which, and :mod:`graphlift.shape_guards`, which
guards what the trace assumed).
"""

from __future__ import annotations

import contextlib
import operator
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch._guards import TracingContext, tracing
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import (
    ShapeEnv,
    StatelessSymbolicContext,
    compute_unbacked_bindings,
)
from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts
from torch.multiprocessing.reductions import StorageWeakRef

from graphlift import logs
from graphlift.backends import (
    call_graph_callable,
    fills_caches_with_shape_env,
    lookup_backend,
)
from graphlift.config import config
from graphlift.ddp_optimizer import active_ddp_module, split_backend
from graphlift.dynamic_shapes import (
    ShapePolicy,
    TorchSource,
    UserLine,
    stack_trace,
    tracing_location,
)
from graphlift.exc import BackendCompilerFailed
from graphlift.shape_guards import SIZE_DYNAMIC, SIZE_STATIC, SIZE_UNBACKED, new_shape_env
from graphlift.side_effects import SideEffects
from graphlift.sources import FloatTensorSource, Source, placeholder_name

# Nodes that switch process state for the operations after them; they never raise.
STATE_SWITCHES = frozenset({torch._C._set_grad_enabled, torch.amp._enter_autocast,
                            torch.amp._exit_autocast})

# Operators whose fake kernels need a ShapeEnv when a backend traces them (see _backend_context).
NEEDS_SHAPE_ENV = frozenset({torch.ops.higher_order.while_loop})


@dataclass(eq=False)
class GraphInput:
    """A placeholder of the graph and where its value comes from on every call (compared by
    identity)."""

    source: Source
    node: torch.fx.Node
    example: torch.Tensor | int | float  # the real value seen while tracing
    fake: torch.Tensor | torch.SymInt | torch.SymFloat
    dynamic_dims: frozenset[int] = frozenset()  # dimensions whose size is a symbol


class OutputGraph:
    """Owns the FX graph, the fake mode and the inputs for one translation."""

    def __init__(self, shape_policy: ShapePolicy | None = None, capture_scalars: bool = False,
                 capture_dynamic_shapes: bool = False) -> None:
        self.graph = torch.fx.Graph()
        # No ShapeEnv until a size or int becomes a symbol (``shape_env``): a static compile,
        # the default first one, never builds one. Capturing data-dependent values needs one
        # from the start: item() on a fake tensor asks the fake mode's ShapeEnv for a symbol.
        self._capture = (capture_scalars, capture_dynamic_shapes)
        self._shape_env: ShapeEnv | None = None
        self.has_unbacked = False  # an unbacked symbol (item(), nonzero, mark_unbacked) exists
        self.fake_mode = FakeTensorMode()
        if capture_scalars or capture_dynamic_shapes:
            self.shape_env  # noqa: B018 - made now, see above
        self.shape_policy = shape_policy or ShapePolicy()
        self.dynamic_tensors: list[tuple[Source, torch.Tensor]] = []  # (source, fake)
        self.marked_dims: list[tuple[Source, int, Any]] = []  # mark_dynamic: (source, dim, symbol)
        self.guard_locations: list[UserLine | None] = []  # where each ShapeEnv guard was made
        self.tracers: list[Any] = []  # the translators running on this graph, innermost last
        self._size_nodes: dict[tuple, torch.fx.Node] = {}  # (tensor node, dim, symbol)
        self.inputs: list[GraphInput] = []
        self._input_by_id: dict[int, GraphInput] = {}
        # Inputs the graph writes into. The objects, not their indexes: finishing the graph
        # drops unused inputs, which would shift every later index.
        self.mutated_inputs: list[GraphInput] = []
        self.side_effects = SideEffects()
        self.regions: dict[tuple, Any] = {}  # nested compile regions recorded in this trace
        # Whether the backend takes nested compile regions as subgraphs (``invoke_subgraph``),
        # set by the compile; the module that holds them as its attributes (``subgraph_0``).
        self.takes_subgraphs = False
        # Whether a trace that meets state the call makes on its first run may give up and run
        # the call eagerly (exc.FirstCallRunsEagerly): once per code object, set by the compile.
        self.may_run_first_call_eagerly = False
        self.root = torch.nn.Module()
        self._real_contexts: list[Any] = []
        # How deep the trace is inside torch.Tensor.__torch_function__ or a
        # DisableTorchFunctionSubclass block: torch calls there skip a subclass's dispatch.
        self.torch_function_disabled = 0

    @property
    def shape_env(self) -> ShapeEnv:
        """The ShapeEnv of this trace's symbols, made (and given to the fake mode) on first use.
        Fake tensors made before it stay static, as they were asked to be."""
        if self._shape_env is None:
            self._shape_env = new_shape_env(*self._capture)
            self.fake_mode.shape_env = self._shape_env
            self.fake_mode.static_shapes = False
        return self._shape_env

    @property
    def has_shape_env(self) -> bool:
        """Whether any size or int was asked to be symbolic (so the ShapeEnv exists)."""
        return self._shape_env is not None

    def _symbolic_fake_mode(self) -> FakeTensorMode:
        """The fake mode, with the ShapeEnv attached that its symbolic sizes will belong to."""
        assert self.shape_env is self.fake_mode.shape_env
        return self.fake_mode

    # -- inputs --------------------------------------------------------------------------------
    def input_for(self, value: torch.Tensor) -> GraphInput | None:
        """The existing input for this very tensor object, if it was already lifted."""
        return self._input_by_id.get(id(value))

    def add_input(self, source: Source, value: torch.Tensor) -> GraphInput:
        """Lift a real tensor into a placeholder, faked with the sizes the shape policy wants."""
        dynamic, marked = self.shape_policy.tensor_dims(source, value)
        unbacked = self.shape_policy.unbacked_dims(source, value)
        dynamic = dynamic | unbacked
        if dynamic:
            context = StatelessSymbolicContext(dynamic_sizes=[
                SIZE_UNBACKED if dim in unbacked else SIZE_DYNAMIC if dim in dynamic
                else SIZE_STATIC for dim in range(value.dim())])
            fake = self._symbolic_fake_mode().from_tensor(value, source=TorchSource(source),
                                                          symbolic_context=context)
        else:
            fake = self.fake_mode.from_tensor(value, static_shapes=True)
        if unbacked:
            # The input's own sizes: known to the graph from the placeholder, not from an op.
            compute_unbacked_bindings(self.shape_env, fake)
            self.has_unbacked = True
        # A dimension asked to be dynamic with size 0 or 1 is specialized: still a constant.
        symbolic = frozenset(d for d, size in enumerate(fake.shape)
                             if isinstance(size, torch.SymInt))
        if symbolic:
            self.dynamic_tensors.append((source, fake))
            self.marked_dims.extend((source, d, fake.shape[d].node.expr)
                                    for d in sorted(marked & symbolic))
        graph_input = self._placeholder(source, value, fake, symbolic)
        self._input_by_id[id(value)] = graph_input
        return graph_input

    def add_symint_input(self, source: Source, value: int) -> GraphInput:
        """Lift a dynamic int into a placeholder whose example is a SymInt of its own symbol."""
        symbol = self.shape_env.create_unspecified_symbol(
            value, source=TorchSource(source), dynamic_dim=SIZE_DYNAMIC)
        fake = self.shape_env.create_symintnode(symbol, hint=value, source=TorchSource(source))
        return self._placeholder(source, value, fake, frozenset())

    def add_float_input(self, source: Source, value: float) -> tuple[GraphInput, torch.SymFloat]:
        """Lift a dynamic float as torch.compile does: a 0-d float64 tensor placeholder (fed
        from ``FloatTensorSource(source)``) whose ``item()`` is a SymFloat of its own symbol.
        AOTAutograd and inductor turn such ``item()`` arithmetic back into tensor operations;
        a SymFloat placeholder they would refuse."""
        env = self.shape_env
        example = torch.tensor(value, dtype=torch.float64)
        fake = self.fake_mode.from_tensor(example, static_shapes=True)
        symbol = env.create_unspecified_symbol(value, source=TorchSource(source),
                                               dynamic_dim=SIZE_DYNAMIC)
        fake.item_memo = env.create_symfloatnode(symbol, hint=value, source=TorchSource(source))
        graph_input = self._placeholder(FloatTensorSource(source), example, fake, frozenset())
        return graph_input, fake.item_memo

    def _placeholder(self, source: Source, value: Any, fake: Any,
                     dynamic_dims: frozenset[int]) -> GraphInput:
        """A new placeholder; placeholders stay ahead of every other node."""
        first_op = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        name = placeholder_name(source)
        if first_op is None:
            node = self.graph.placeholder(name)
        else:
            with self.graph.inserting_before(first_op):
                node = self.graph.placeholder(name)
        node.meta["example_value"] = fake
        node.meta["source"] = source.name()
        graph_input = GraphInput(source, node, value, fake, dynamic_dims)
        self.inputs.append(graph_input)
        return graph_input

    def size_node(self, tensor: torch.fx.Node, dim: int, size: torch.SymInt) -> torch.fx.Node:
        """``tensor.size(dim)`` as a node, reused while that size is the same symbol (an in-place
        op such as ``t_()`` may change it); unused ones are dropped."""
        key = (tensor, dim, size.node.expr)
        if key not in self._size_nodes:
            self._size_nodes[key] = self.create_node("call_method", "size", (tensor, dim), {})
        return self._size_nodes[key]

    def forget_cached_nodes(self, nodes: list[torch.fx.Node]) -> None:
        """``nodes`` leave this graph (a higher-order operator's body): no cache may hand
        them out again."""
        gone = set(nodes)
        self._size_nodes = {k: n for k, n in self._size_nodes.items() if n not in gone}

    def note_guards(self) -> None:
        """Remember where the trace was when the ShapeEnv recorded its newest guards."""
        if self._shape_env is None:
            return
        new = len(self._shape_env.guards) - len(self.guard_locations)
        if new > 0:
            tracer = self.tracers[-1] if self.tracers else None
            self.guard_locations.extend([tracing_location(tracer)] * new)

    def guard_origin(self) -> str | None:
        """The user's line the innermost running translator is at, as guards show it."""
        line = tracing_location(self.tracers[-1]) if self.tracers else None
        return line.as_origin() if line is not None else None

    @property
    def has_symbols(self) -> bool:
        """Whether any size or int of this trace is symbolic."""
        return (self._shape_env is not None and bool(self._shape_env.var_to_sources)) or \
            self.has_unbacked

    @property
    def captures_scalars(self) -> bool:
        """Whether ``item()`` stays in the graph (config.capture_scalar_outputs, fullgraph)."""
        return self._capture[0]

    def bind_unbacked(self, node: torch.fx.Node, result: Any) -> None:
        """Record on ``node`` the unbacked symbols its result introduces (``u0`` of ``item()``,
        the size of ``nonzero``): the runtime-assert pass reads them where they become known."""
        if self._shape_env is None:
            return  # no ShapeEnv, no symbols: nothing unbacked
        bindings = compute_unbacked_bindings(self._shape_env, result)
        if bindings:
            node.meta["unbacked_bindings"] = bindings
            self.has_unbacked = True

    def mark_mutated(self, fake: torch.Tensor) -> None:
        """The graph writes into this tensor; remember each input whose memory it is (the input
        itself or a view of it)."""
        written = storage_ref(fake)
        for graph_input in self.inputs:
            if isinstance(graph_input.fake, torch.Tensor) and \
                    (graph_input.fake is fake or storage_ref(graph_input.fake) == written) and \
                    graph_input not in self.mutated_inputs:
                self.mutated_inputs.append(graph_input)

    # -- nodes ---------------------------------------------------------------------------------
    def create_node(self, op: str, target: Any, args: tuple, kwargs: dict,
                    mutates: bool = False) -> torch.fx.Node:
        node = self.graph.create_node(op, target, args, kwargs)
        if target not in STATE_SWITCHES:  # an operation that can raise: what eager wrote by then
            node.meta["ledger_checkpoint"] = self.side_effects.checkpoint()
        node.meta["mutates"] = mutates
        node.meta["stack_trace"] = stack_trace(self.tracers)  # printed in readable graphs
        return node

    def node_checkpoints(self) -> dict[str, int]:
        """Each node's side-effect ledger checkpoint, by node name (see
        ``SideEffects.checkpoint``). A node the trace did not make as an operation (a
        placeholder, a grad-mode switch, a runtime assert) has the one of the node before it."""
        checkpoints, current = {}, 0
        for node in self.graph.nodes:
            current = node.meta.get("ledger_checkpoint", current)
            checkpoints[node.name] = current
        return checkpoints

    def switches_grad_mode(self) -> bool:
        """Whether the graph changes grad mode (a with block in it)."""
        return any(n.target is torch._C._set_grad_enabled for n in self.graph.nodes)

    def autocast_devices(self) -> tuple[str, ...]:
        """The device types of the autocast blocks the graph enters."""
        return tuple(sorted({n.args[0] for n in self.graph.nodes
                             if n.target is torch.amp._enter_autocast}))

    def enter_real_context(self, context: Any) -> None:
        """A context (autocast) entered for real while tracing; undone at the end of the trace."""
        self._real_contexts.append(context)

    def exit_real_context(self) -> None:
        self._real_contexts.pop().__exit__(None, None, None)

    def in_real_context(self, kind: type) -> bool:
        """Whether the trace is inside a context of type ``kind`` it entered for real."""
        return any(isinstance(context, kind) for context in self._real_contexts)

    def restore_global_state(self) -> None:
        """Leave every context the trace entered for real (a trace may stop inside a block)."""
        while self._real_contexts:
            self.exit_real_context()

    def finish(self, outputs: list[torch.fx.Node]) -> None:
        """Add the output node; drop unused helper nodes, then unused inputs (their guards stay).

        Every tensor operation the program called stays, used or not, as in eager Python (and
        torch.compile): an unused ``torch.rand`` still advances the random stream, and an unused
        operation may still raise. Only what the trace itself read goes when nothing uses it:
        sizes and other symbolic numbers, and the items of a multi-output operation.
        """
        self.graph.output(tuple(outputs))
        for node in reversed(list(self.graph.nodes)):
            if not node.users and _is_helper(node):
                self.graph.erase_node(node)
        for graph_input in list(self.inputs):
            if not graph_input.node.users:
                self.graph.erase_node(graph_input.node)
                self.inputs.remove(graph_input)

    def only_grad_mode_switches(self) -> bool | None:
        """The mode the graph leaves when its only operations switch grad mode, else None."""
        calls = [n for n in self.graph.nodes
                 if n.op in ("call_function", "call_method", "call_module")]
        if not calls or any(n.target is not torch._C._set_grad_enabled for n in calls):
            return None
        return bool(calls[-1].args[0])

    def drop_all_nodes(self) -> None:
        """Empty the graph of its (unused) nodes and inputs; the output node stays."""
        for node in reversed(list(self.graph.nodes)):
            if node.op != "output":
                self.graph.erase_node(node)
        self.inputs.clear()

    @property
    def op_count(self) -> int:
        """Operations in the graph, counted like torch.compile's CompileCounter does."""
        return sum(1 for n in self.graph.nodes
                   if n.op in ("call_function", "call_method", "call_module"))

    def add_subgraph(self, graph: torch.fx.Graph, prefix: str = "subgraph") -> str:
        """Make ``graph`` a module attribute of this graph (``subgraph_0``, ``cond_true_0``: the
        prefix and a count, as torch.compile names them); it may read the subgraphs added before
        it. Returns its name."""
        count = sum(1 for name in self.root._modules if name.rsplit("_", 1)[0] == prefix)
        name = f"{prefix}_{count}"
        self.root.add_module(name, torch.fx.GraphModule(self.root, graph, class_name=name))
        return name

    def subgraph_node(self, name: str) -> torch.fx.Node:
        """A ``get_attr`` node reading the subgraph ``name`` (one per call, as torch.compile)."""
        node = self.graph.get_attr(name)
        node.meta["stack_trace"] = stack_trace(self.tracers)
        return node

    def getitem_node(self, node: torch.fx.Node, index: int) -> torch.fx.Node:
        """One output of a multi-output op (torch.split, torch.max with dim)."""
        return self.graph.call_function(operator.getitem, (node, index))

    # -- compile -------------------------------------------------------------------------------
    def compile(
        self, backend: str | Callable, name: str
    ) -> tuple[torch.fx.GraphModule, Callable, float]:
        """Hand the finished graph to the backend; return (module, callable, seconds)."""
        gm = torch.fx.GraphModule(self.root, self.graph, class_name=name)
        if self.has_unbacked or (self._shape_env is not None and
                                 self._shape_env.deferred_runtime_asserts):
            # What the trace assumed about unbacked symbols (torch._check(n < 10), a size >= 0)
            # cannot be a guard: no value exists before the graph runs. It becomes an assert
            # node inside the graph, raising as eager would.
            insert_deferred_runtime_asserts(gm, self.shape_env, name)
            gm.recompile()
        if logs.enabled("graph_code"):
            logs.emit("graph_code", f"TRACED GRAPH {name}\n{gm.code}")
        caching = fills_caches_with_shape_env(backend) and not self.has_symbols
        examples = [graph_input.example for graph_input in self.inputs]
        if caching:  # the fake inputs, as torch.compile hands them over (see _backend_context)
            examples = [graph_input.fake if isinstance(graph_input.fake, torch.Tensor)
                        else graph_input.example for graph_input in self.inputs]
        backend_fn = lookup_backend(backend)
        ddp = active_ddp_module() if config.optimize_ddp else None
        if ddp is not None:  # one subgraph per gradient bucket, each compiled by the backend
            backend_fn = split_backend(backend_fn, ddp, self.fake_mode)
        label = backend if isinstance(backend, str) else getattr(backend, "__name__", backend)
        start = time.perf_counter()
        try:
            with self._backend_context(caching):
                compiled = backend_fn(gm, examples)
        except Exception as error:
            raise BackendCompilerFailed(
                f"backend {label!r} raised {type(error).__name__}: {error}"
            ) from error
        if not callable(compiled):  # else the run function fails, naming none of this
            raise BackendCompilerFailed(f"backend {label!r} returned {compiled!r}, which is not "
                                        "callable (a backend returns the function to run)")
        return gm, call_graph_callable(compiled), time.perf_counter() - start

    def _backend_context(self, caching: bool) -> contextlib.AbstractContextManager:
        """The tracing context the backend compiles under, or none.

        With symbolic inputs the backend must trace with our fake mode (found through the
        tracing context, as AOTAutograd and inductor look for it): faking the real examples on
        its own would specialize every size to this call's. ``caching``: a static graph for a
        backend whose caches need a ShapeEnv (``backends.CACHING_BACKENDS``) gets our fake mode
        with an empty one attached, sizes staying static; the backend then fills its caches
        (with the same keys as graphlift.persist's load, which compiles the saved graph so)."""
        if self.has_symbols:
            return tracing(TracingContext(self.fake_mode))
        if any(n.target in NEEDS_SHAPE_ENV for n in self.graph.nodes):
            # A loop operator's fake kernel makes symbols of its own (while_loop): the backend
            # traces with our fake mode, given an empty ShapeEnv, sizes staying static.
            if self.fake_mode.shape_env is None:
                self.fake_mode.shape_env = ShapeEnv()
            return tracing(TracingContext(self.fake_mode))
        if not caching:
            return contextlib.nullcontext()
        if self.fake_mode.shape_env is None:  # static_shapes stays True: no size is a symbol
            self.fake_mode.shape_env = ShapeEnv()
        return tracing(TracingContext(self.fake_mode))


def _is_helper(node: torch.fx.Node) -> bool:
    """A node that computes no tensor of its own and has no effect: a size or symbolic number
    read for the trace, or the getitem that takes one output of a multi-output operation."""
    if node.op not in ("call_function", "call_method") or node.meta.get("mutates") or \
            node.meta.get("unbacked_bindings"):
        return False  # item() and nonzero stay: eager reads them, and asserts may use them
    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node) and \
            isinstance(node.args[0].meta.get("example_value"), (tuple, list)):
        return True
    return not _holds_tensor(node.meta.get("example_value"))


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_holds_tensor(v) for v in value)
    return isinstance(value, torch.Tensor)


def storage_ref(tensor: torch.Tensor) -> StorageWeakRef | None:
    """A key for the memory of ``tensor``: equal for a tensor and its views (None: no storage,
    a sparse tensor)."""
    try:
        return StorageWeakRef(tensor.untyped_storage())
    except (RuntimeError, NotImplementedError, TypeError):
        return None
