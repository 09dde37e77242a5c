"""Code generation for cache hits: the Python function that calls the graph and rebuilds results.

For each cache entry graphlift writes one small function, for example::

    def __gl_run(__gl_fn, __gl_G, x, n):
        __gl_out = __gl_graph(x, __gl_G['w'])
        return (__gl_out[0], 3)

It takes the frame's arguments by name, passes the graph its inputs (read back through their
sources), and rebuilds the return value from graph outputs, constants and the inputs themselves,
so that a tensor argument returned as-is is the very same object, as in eager.

At a graph break, :class:`BreakTail` writes the statements after the graph: the eager
instruction, then the call of the resume function (:mod:`graphlift.resume` makes its code).
When the graph raises, the run function puts global state back and applies the writes eager had
made before the operation that raised (:class:`ErrorPathCodegen`, :func:`graph_progress`).
"""

from __future__ import annotations

import ast
import functools
import types
from collections.abc import Callable
from typing import Any

import torch

from graphlift import bytecode
from graphlift.exc import Unsupported
from graphlift.rebuild import FrameWrappers
from graphlift.resume import ResumeKey, local_cells, with_exit_slots
from graphlift.side_effects import ErrorReplay, SideEffects
from graphlift.sources import FN_NAME, Source
from graphlift.trace_rules import DISABLED, TORCH_DISABLED, TORCH_DISALLOWED
from graphlift.variables.base import NullVariable, VariableTracker
from graphlift.variables.callables import SkippedFunctionVariable
from graphlift.variables.context import ContextMethodVariable, GradModeVariable
from graphlift.variables.functions import UserFunctionVariable, UserMethodVariable
from graphlift.variables.nn_module import NNModuleVariable
from graphlift.variables.tensor import TensorMethodVariable

# Skipped callees that a frame-evaluation hook would still see as frames: a function disabled
# with recursive=False (its callees compiled), a user function torch disallowed (compiled).
ROUTED_SKIPS = (DISABLED, TORCH_DISABLED, TORCH_DISALLOWED)

# Values that print as Python literals which read back exactly.
_LITERAL_TYPES = (int, bool, type(None))


def _is_literal(expr: str) -> bool:
    try:
        ast.literal_eval(expr)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


class OutputCodegen:
    """Collects what the run function needs while the return value is reconstructed."""

    def __init__(self, wrappers: FrameWrappers) -> None:
        self.wrappers = wrappers
        # The globals dict arrives as a parameter (``__gl_G``), never bound here: see
        # convert_frame.FrameSignature.
        self.namespace: dict[str, Any] = {}
        self.outputs: list[VariableTracker] = []
        self.statements: list[str] = []  # temporaries, in the order they were needed
        self._remembered: dict[int, str] = {}
        self._building: set[int] = set()

    def constant(self, value: Any) -> str:
        """An expression for a constant: a literal when exact, else a name bound to the value."""
        if type(value) in _LITERAL_TYPES or (type(value) is str and len(value) < 80):
            return repr(value)
        return self.bind(value)

    def bind(self, value: Any) -> str:
        """A name bound to ``value`` itself (a literal would be an equal object, not this one)."""
        name = f"__gl_k{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def source_expr(self, source: Source) -> str:
        """The source as an expression; a pinned object (a module's parameter) is bound here."""
        return source.render(self.constant)

    def graph_output(self, tensor: VariableTracker) -> str:
        """``__gl_out[i]``: the tensor becomes the graph's i-th output (once, however often)."""
        for i, existing in enumerate(self.outputs):
            if existing is tensor:
                return f"__gl_out[{i}]"
        self.outputs.append(tensor)
        return f"__gl_out[{len(self.outputs) - 1}]"

    def hoist(self, expr: str) -> str:
        """Evaluate ``expr`` now, before the side-effect ledger writes back (old values)."""
        if expr.isidentifier() or _is_literal(expr):
            return expr
        name = f"__gl_h{len(self.statements)}"
        self.statements.append(f"{name} = {expr}")
        return name

    def remember(self, tracker: VariableTracker, build: Callable[[OutputCodegen], str]) -> str:
        """Build a new mutable object once into a temporary, so every use shares one object."""
        key = id(tracker)
        if key in self._remembered:
            return self._remembered[key]
        if key in self._building:
            raise Unsupported("an object that contains itself cannot leave the compiled frame")
        self._building.add(key)
        expr = build(self)
        self._building.discard(key)
        name = f"__gl_t{len(self._remembered)}"
        self.statements.append(f"{name} = {expr}")
        self._remembered[key] = name
        return name

    def eager_call(self, fn: VariableTracker, args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker], options: Any) -> str:
        """A call to run eagerly at a graph break; a user callee goes through its own cache.

        The arguments are the program's own objects: a function passed along stays that
        function (identity tests, ``inspect.signature``), so it runs uncompiled when the callee
        calls it. (Intercepting a call of that very object would need a frame-evaluation hook,
        or swapping its ``__code__``, which the program can see.)

        Callee and arguments are read before the side-effect ledger writes back: a value read
        from a slot the frame changed (``L[1]`` before ``L.reverse()``) is the one it traced.
        """
        callee = self.hoist(self.callable_expr(fn, options))
        parts = [self.hoist(a.reconstruct(self)) for a in args]
        parts += [f"{k}={self.hoist(v.reconstruct(self))}" for k, v in kwargs.items()]
        return f"{callee}({', '.join(parts)})"

    def callable_expr(self, fn: VariableTracker, options: Any) -> str:
        """The callee of an eager call; a user function becomes its compiled wrapper."""
        if isinstance(fn, UserFunctionVariable):
            return self.compiled(fn, options)
        if isinstance(fn, UserMethodVariable):
            # A method the trace rules skip (a disabled one) runs as it is, without compiling.
            function = self.compiled(fn.fn, options) if isinstance(fn.fn, UserFunctionVariable) \
                else fn.fn.reconstruct(self)
            return f"{self.constant(functools.partial)}({function}, {fn.obj.reconstruct(self)})"
        if isinstance(fn, TensorMethodVariable):
            return f"{fn.tensor.reconstruct(self)}.{fn.name}"
        if isinstance(fn, NNModuleVariable) and fn.source is not None:
            module = fn.reconstruct(self)
            call = self.constant(self.wrappers.module_call)
            return f"{call}({module}, {self.constant(options)})"
        if isinstance(fn, SkippedFunctionVariable) and fn.decision.rule in ROUTED_SKIPS:
            route = self.constant(self.wrappers.route)
            return f"{route}({fn.reconstruct(self)}, {self.constant(options)})"
        return fn.reconstruct(self)

    def compiled(self, fn: VariableTracker, options: Any) -> str:
        """The graphlift wrapper of a user function (nested frames are compiled, not traced).

        Looked up when the entry runs, through the function's source where it has one: a
        wrapper held by the entry would keep the function, and through its globals maybe the
        entry's own code object, alive for good (see convert_frame.FrameSignature).
        """
        function = fn.reconstruct(self)
        return f"{self.constant(self.wrappers.function)}({function}, {self.constant(options)})"

    def on_graph_error(self, grad_mode: bool | None, autocast_devices: tuple[str, ...],
                       writes: ErrorReplay, values: list[VariableTracker],
                       checkpoints: dict[str, int], graph_id: int) -> tuple[list[str], list[str]]:
        """(before the graph, when it raises): what puts global state back when the graph
        raises, as leaving the with blocks would; then the ledger's ``writes`` that eager made
        before the operation that raised (see :class:`ErrorPathCodegen`; ``values``: its graph
        values). ``grad_mode``: the mode to leave the frame in, or None where the graph cannot
        have changed it. ``checkpoints``: each node's ledger checkpoint, by node name;
        ``graph_id``: ``id()`` of the traced graph, as FX's provenance records name it."""
        before: list[str] = []
        restore: list[str] = []
        if grad_mode is not None:
            restore.append(f"{self.constant(torch._C._set_grad_enabled)}({grad_mode})")
        if autocast_devices:
            before.append(f"__gl_autocast = {self.constant(AutocastState)}"
                          f"({self.constant(autocast_devices)})")
            restore.append("__gl_autocast.restore()")
        if writes.last < 1:  # at most the writes made before the first operation
            return before, [*restore, *writes.lines(None)]
        names = tuple(value.node.name for value in values)
        progress = (f"__gl_c, __gl_v = {self.constant(graph_progress)}(__gl_e, __gl_graph, "
                    f"{self.constant(checkpoints)}, {self.constant(names)}, "
                    f"{self.constant(tuple(writes.needs))}, {writes.last}, {graph_id})")
        return before, [*restore, progress, *writes.lines("__gl_c")]

    def build(self, params: tuple[str, ...], tail: list[str], graph: Callable | None,
              input_sources: list[Source],
              on_error: tuple[list[str], list[str]] = ([], [])) -> tuple[Callable, str]:
        """Write and exec the run function: call the graph, then ``tail`` (which returns).
        ``on_error`` (see :meth:`on_graph_error`) runs before the graph and when it raises."""
        lines = [f"def __gl_run({', '.join(params)}):"]
        if graph is not None:
            self.namespace["__gl_graph"] = graph
            call_args = ", ".join(self.source_expr(s) for s in input_sources)
            call = f"__gl_out = __gl_graph({call_args})"
            before, restore = on_error
            lines.extend(f"    {statement}" for statement in before)
            if restore:
                lines += ["    try:", f"        {call}", "    except BaseException as __gl_e:",
                          *(f"        {statement}" for statement in restore), "        raise"]
            else:
                lines.append(f"    {call}")
        lines.extend(f"    {statement}" for statement in tail)
        source = "\n".join(lines) + "\n"
        exec(compile(source, "<graphlift run>", "exec"), self.namespace)  # noqa: S102
        return self.namespace["__gl_run"], source


class ErrorPathCodegen(OutputCodegen):
    """Writes the run function's path taken when the graph raises: the ledger's writes that
    eager made before the operation that raised (``SideEffects.replay_on_error``).

    It shares the main path's namespace and has temporaries of its own. A graph value that a
    write needs (a tensor the graph computed before the failing operation) reads as
    ``__gl_v[j]``: :func:`graph_progress` takes it from the raising graph's frame, where FX's
    generated ``forward`` holds it in a local named like its node. Each such value becomes a
    graph output too, so that FX keeps it in that local until the graph returns (FX clears a
    value after its last use otherwise).
    """

    def __init__(self, main: OutputCodegen) -> None:
        super().__init__(main.wrappers)
        self.namespace = main.namespace
        self.main = main
        self.values: list[VariableTracker] = []  # __gl_v[j] is values[j], in the raising graph
        self._used: set[int] = set()

    def graph_output(self, tensor: VariableTracker) -> str:
        index = next((i for i, v in enumerate(self.values) if v is tensor), len(self.values))
        if index == len(self.values):
            self.values.append(tensor)
        self._used.add(index)
        return f"__gl_v[{index}]"

    def take_used(self) -> tuple[int, ...]:
        """The graph values read since the last call."""
        used, self._used = tuple(sorted(self._used)), set()
        return used

    def replay_on_error(self, ledger: SideEffects) -> ErrorReplay:
        """The ledger's error path; the values its reachable checkpoints read become outputs."""
        writes = ledger.replay_on_error(self)
        for index in sorted({j for needs in writes.needs for j in needs}):
            self.main.graph_output(self.values[index])
        return writes


def graph_progress(error: BaseException, graph: Callable, checkpoints: dict[str, int],
                   names: tuple[str, ...], needs: tuple[tuple[int, ...], ...], last: int,
                   graph_id: int) -> tuple[int, list[Any]]:
    """Called by a run function whose graph raised: how far the graph got.

    Returns the ledger checkpoint of the node that raised (eager Python had made that
    checkpoint's writes and no later one's), at most ``last``, and the graph values ``names``
    as the graph's frame holds them (None where unknown). The node comes from the traceback:
    the outermost frame of an FX ``forward`` under the run function, at its line (FX keeps a
    map from generated lines to nodes). Where the backend runs the FX module itself
    (``eager``, a counting backend), that frame is the graph's own: checkpoint and values are
    exact. Where the backend retraced the graph into a module of its own (``aot_eager``), its
    node names the node it was made from (FX's ``from_node`` provenance, which names the graph
    by ``graph_id``: ``id()`` of the traced graph), and no value is known. Where no
    FX frame ran (``inductor``'s generated code), the checkpoint is 0: the writes made before
    the first operation. A checkpoint whose writes read an unknown value is lowered to the
    one before it.
    """
    module = getattr(graph, "__self__", graph)
    reached, frame = _raising_node(error, module, checkpoints, graph_id)
    reached = min(reached, last)
    here = frame.f_locals if frame is not None else {}
    values = [here.get(name) for name in names]
    for k in range(1, reached + 1):
        if any(values[j] is None for j in needs[k]):
            return k - 1, values
    return reached, values


def _raising_node(error: BaseException, module: object, checkpoints: dict[str, int],
                  graph_id: int) -> tuple[int, types.FrameType | None]:
    """(checkpoint of the node that raised, the frame when it is the graph's own)."""
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "forward" and code.co_varnames[:1] == ("self",):
            owner = tb.tb_frame.f_locals.get("self")
            if isinstance(owner, torch.fx.GraphModule) and \
                    getattr(type(owner).forward, "__code__", None) is code:
                node = _node_at(owner, tb.tb_lineno - code.co_firstlineno)
                if node is None:
                    return 0, None
                if owner is module:
                    return checkpoints.get(node.name, 0), tb.tb_frame
                return _made_from(node, checkpoints, graph_id), None
        tb = tb.tb_next
    return 0, None


def _node_at(module: torch.fx.GraphModule, line: int) -> torch.fx.Node | None:
    """The node whose code is at ``line`` of the module's generated ``forward``."""
    index = (getattr(module, "_lineno_map", None) or {}).get(line)
    nodes = list(module.graph.nodes)
    return nodes[index] if index is not None and index < len(nodes) else None


def _made_from(node: torch.fx.Node, checkpoints: dict[str, int], graph_id: int) -> int:
    """The checkpoint of the graph's node that a backend's node was made from, through any
    number of passes (AOTAutograd's joint graph, then its forward graph); 0: unknown."""
    origins = list(node.meta.get("from_node") or ())
    while origins:
        origin = origins.pop(0)
        if getattr(origin, "graph_id", None) == graph_id and origin.name in checkpoints:
            return checkpoints[origin.name]
        origins.extend(getattr(origin, "from_node", None) or ())
    return 0


class AutocastState:
    """Autocast's process state before a graph that enters autocast blocks, put back when the
    graph raises (its ``_exit_autocast`` nodes never ran), as each block's exit would."""

    def __init__(self, devices: tuple[str, ...]) -> None:
        self.devices = devices
        self.modes = [(torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))
                      for d in devices]
        self.cache_enabled = torch.is_autocast_cache_enabled()
        self.nesting = _autocast_nesting()

    def restore(self) -> None:
        for device, (enabled, dtype) in zip(self.devices, self.modes):
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, dtype)
        torch.set_autocast_cache_enabled(self.cache_enabled)
        for _ in range(_autocast_nesting() - self.nesting):
            if torch.autocast_decrement_nesting() == 0:
                torch.clear_autocast_cache()  # left the outermost block, as its exit does


def _autocast_nesting() -> int:
    """How many autocast blocks are open (torch only tells by changing the count)."""
    depth = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return depth


# -- the run function's tail at a graph break --------------------------------------------------
class BreakTail:
    """Writes the run function's statements after the graph at a graph break.

    Every value the tail passes on is computed (hoisted into a temporary) before the side-effect
    ledger writes anything back, because it may be the old value of something the frame
    overwrote. Then come the eager instruction and the call to the resume function.
    """

    def __init__(self, tracer: object, codegen: object, state: object, options: object) -> None:
        self.tracer, self.codegen, self.state, self.options = tracer, codegen, state, options
        self.break_state = tracer.break_state
        instructions = bytecode.decode(tracer.code)
        inst = self.break_state.inst
        self.following = instructions[instructions.index(inst) + 1].offset

    def statements(self) -> list[str]:
        opname = self.break_state.inst.opname
        if opname == "CALL":
            return self._call()
        if opname == "CALL_FUNCTION_EX":
            return self._call_ex()
        if opname in ("CALL_FUNCTION", "CALL_FUNCTION_KW"):
            return self._call_function()
        return self._branch()

    def _call(self) -> list[str]:
        inst, stack = self.break_state.inst, self.break_state.stack
        below, (first, second, *args) = stack[:-inst.arg - 2], stack[-inst.arg - 2:]
        fn, self_arg = bytecode.call_target(first, second,
                                            lambda item: isinstance(item, NullVariable))
        args = args if self_arg is None else [self_arg, *args]
        names = self.break_state.kw_names
        kwargs = dict(zip(names, args[len(args) - len(names):])) if names else {}
        args = args[:len(args) - len(names)]
        call = self.codegen.eager_call(fn, args, kwargs, self.options)
        return self._guarded_call(call, below)

    def _call_function(self) -> list[str]:
        """3.10's CALL_FUNCTION(_KW): the callable below its arguments, no NULL; _KW's keyword
        names are a tuple on top."""
        inst, stack = self.break_state.inst, list(self.break_state.stack)
        names = tuple(stack.pop().as_constant()) if inst.opname == "CALL_FUNCTION_KW" else ()
        below, fn, args = stack[:-inst.arg - 1], stack[-inst.arg - 1], stack[len(stack) - inst.arg:]
        kwargs = dict(zip(names, args[len(args) - len(names):]))
        call = self.codegen.eager_call(fn, args[:len(args) - len(names)], kwargs, self.options)
        return self._guarded_call(call, below)

    def _call_ex(self) -> list[str]:
        inst, stack = self.break_state.inst, list(self.break_state.stack)
        kwargs = stack.pop() if inst.arg & 1 else None
        args, fn = stack.pop(), stack.pop()
        if isinstance(fn, NullVariable):  # 3.13: callable, NULL, args
            fn = stack.pop()
        elif stack and isinstance(stack[-1], NullVariable):  # 3.11 and 3.12: NULL, callable
            stack.pop()
        parts = [f"*{self.codegen.hoist(args.reconstruct(self.codegen))}"]
        if kwargs is not None:
            parts.append(f"**{self.codegen.hoist(kwargs.reconstruct(self.codegen))}")
        callee = self.codegen.hoist(self.codegen.callable_expr(fn, self.options))
        call = f"{callee}({', '.join(parts)})"
        return self._guarded_call(call, stack)

    def _guarded_call(self, call: str, below: list) -> list[str]:
        """The eager call, then the resume function (see :meth:`_restoring`)."""
        resume = self._resume_call(self.following, below, "__gl_r")
        return self._restoring([f"__gl_r = {call}", f"return {resume}"], below)

    def _branch(self) -> list[str]:
        inst, stack = self.break_state.inst, self.break_state.stack
        condition, below = stack[-1], stack[:-1]
        jump_when = "IF_TRUE" in inst.opname
        keeps_value = inst.opname.endswith("_OR_POP")  # the value stays when the jump is taken
        taken = self._resume_call(inst.argval, stack if keeps_value else below, None)
        not_taken = self._resume_call(self.following, below, None)
        test = self.codegen.hoist(condition.reconstruct(self.codegen))
        # bool(tensor) can raise too (a tensor of more than one element).
        return self._restoring([f"if {'' if jump_when else 'not '}{test}:",
                                f"    return {taken}", f"return {not_taken}"], below)

    def _restoring(self, lines: list[str], below: list) -> list[str]:
        """``lines`` inside a grad-mode with block open at the break: whatever raises in them
        (the eager instruction, the test, the resume function or its compile) leaves the frame
        through the block's exit, so the mode from before the outermost block comes back."""
        self._check_with_blocks(below)
        previous = _outer_grad_mode(below)
        if previous is None:
            return lines
        setter = self.codegen.constant(torch._C._set_grad_enabled)
        return ["try:", *(f"    {line}" for line in lines), "except BaseException:",
                f"    {setter}({previous})", "    raise"]

    def _check_with_blocks(self, below: list) -> None:
        """Refuse the split inside a ``with`` block other than a grad-mode one: what the eager
        instruction raises would leave the run function without that block's ``__exit__``
        (which may swallow it or log it), so the whole frame runs eagerly instead."""
        for slot in with_exit_slots(self.tracer.code, self.break_state.inst.offset):
            exit_fn = below[slot] if slot < len(below) else None
            if not (isinstance(exit_fn, ContextMethodVariable)
                    and isinstance(exit_fn.manager, GradModeVariable)):
                error = Unsupported(f"a graph break inside the with block of {exit_fn!r}: its "
                                    "__exit__ would not see what the instruction raises")
                error.not_resumable = "the break is inside a with block of a context manager " \
                                      "other than grad mode"
                raise error

    def _resume_call(self, offset: int, below: list, result: str | None) -> str:
        """``__gl_resume(__gl_fn, <every local>, <stack values>, <local cells>)``."""
        tracer, codegen = self.tracer, self.codegen
        nulls = [isinstance(item, NullVariable) for item in below]
        if result is not None:
            nulls.append(False)
        unbound = frozenset(name for name in tracer.code.co_varnames
                            if self._local_expr(name) is None)
        key = ResumeKey(offset, tuple(nulls), unbound)
        point = self.state.resume_point(tracer.code, key, self.options, codegen.wrappers.code)
        values = [self._local_expr(name) or "None" for name in tracer.code.co_varnames]
        values += [codegen.hoist(item.reconstruct(codegen)) for item in below
                   if not isinstance(item, NullVariable)]
        if result is not None:
            values.append(result)
        values += [self._cell_expr(name) or "None" for name in local_cells(tracer.code)]
        return f"{codegen.constant(point)}({FN_NAME}, {', '.join(values)})"

    def _cell_expr(self, name: str) -> str | None:
        """A cell's contents at the break (None while unassigned)."""
        cell = self.tracer.cells.get(name)
        if cell is None or cell.contents is None:
            return None
        return self.codegen.hoist(cell.contents.reconstruct(self.codegen))

    def _local_expr(self, name: str) -> str | None:
        """A local's value at the break: tracked, an argument never read, or unbound (None)."""
        tracer = self.tracer
        if name in tracer.code.co_cellvars and name in tracer.cells:
            return self._cell_expr(name)  # an argument captured by an inner function
        if name in self.break_state.symbolic_locals:
            value = self.break_state.symbolic_locals[name]
            return self.codegen.hoist(value.reconstruct(self.codegen))
        if name in tracer.unread_arguments:
            return name  # the run function's own parameter of that name
        return None


def _outer_grad_mode(stack: list) -> bool | None:
    """The grad mode before the outermost grad-mode with block open at the break, if any."""
    for item in stack:
        if isinstance(item, ContextMethodVariable) and isinstance(item.manager, GradModeVariable):
            return bool(item.manager.previous)
    return None
