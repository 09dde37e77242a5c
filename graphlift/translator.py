"""The symbolic bytecode interpreter: one method per opcode of the normalized bytecode.

``InstructionTranslator`` executes a frame's instructions on VariableTrackers instead of real
values. Tensor operations become FX nodes (through ``call_torch``); Python values known while
tracing are folded; anything it cannot follow raises :class:`~graphlift.exc.Unsupported`, which
makes the frame run eagerly (or raise, under ``fullgraph=True``).

Handlers see the instruction layer's normalized form (3.11's opcode names, see
:mod:`graphlift.bytecode`), so none of them branches on the CPython version; opcodes a later
version added without a 3.11 counterpart have handlers of their own.

Handlers are grouped like the language reference groups opcodes. Families share one
implementation through aliases, and every opcode that is refused is listed in ``UNSUPPORTED`` with
the reason. ``_check_opcode_coverage`` runs at import and fails if an opcode of the running CPython
is neither handled nor refused, for the version it runs on.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import copyreg
import linecache
import operator
import sys
import types
import unittest.case
from dataclasses import dataclass, replace
from typing import Any

import torch

from graphlift import bytecode, trace_rules
from graphlift.break_types import default_hints
from graphlift.bytecode import Instruction
from graphlift.exc import GraphliftError, Unsupported
from graphlift.guards import GuardBuilder
from graphlift.output_graph import OutputGraph
from graphlift.sources import (
    ClosureSource,
    FreshModuleGlobalsSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    Source,
)
from graphlift.variables.base import (
    NullVariable,
    TracedException,
    VariableTracker,
    raise_real,
)
from graphlift.variables.builder import VariableBuilder, wrap_unguarded
from graphlift.variables.builtins import BuiltinVariable, isinstance_of
from graphlift.variables.callables import (
    AllowedFunctionVariable,
    PolyfillVariable,
    SkippedFunctionVariable,
)
from graphlift.variables.constant import ConstantVariable, wrap_constant
from graphlift.variables.containers import (
    BaseListVariable,
    DictVariable,
    ListVariable,
    SetVariable,
    TupleVariable,
    hashable_key,
    mapping_pairs,
)
from graphlift.variables.exceptions import (
    ExceptionVariable,
    TracebackVariable,
    set_cause,
    tracker_of,
)
from graphlift.variables.functions import (
    BaseUserFunctionVariable,
    CellVariable,
    NestedFunctionVariable,
    UserFunctionVariable,
    UserMethodVariable,
    bind_arguments,
)
from graphlift.variables.iterators import GeneratorVariable, iterator_of
from graphlift.variables.nn_module import NNModuleVariable
from graphlift.variables.numpy import has_array, numpy_operator
from graphlift.variables.objects import (
    BINARY_SYMBOLS,
    ClassVariable,
    InputInstanceDictVariable,
    PythonModuleVariable,
    UserObjectVariable,
    binary_type_error,
    bind_class_attr,
    call_unary_dunder,
    gives_way,
    user_operand,
)
from graphlift.variables.regions import call_region, region_of
from graphlift.variables.symbolic import (
    SizeVariable,
    SliceVariable,
    SymNodeVariable,
    has_symbol,
    symbolic_operands,
)
from graphlift.variables.tensor import TensorVariable, TorchCallableVariable, call_torch, to_fake
from graphlift.variables.torch_function import EagerFuncVariable

# BINARY_OP's argument indexes this table (CPython's NB_* order); in-place forms follow.
BINARY_OPS = (
    operator.add, operator.and_, operator.floordiv, operator.lshift, operator.matmul,
    operator.mul, operator.mod, operator.or_, operator.pow, operator.rshift, operator.sub,
    operator.truediv, operator.xor,
    operator.iadd, operator.iand, operator.ifloordiv, operator.ilshift, operator.imatmul,
    operator.imul, operator.imod, operator.ior, operator.ipow, operator.irshift, operator.isub,
    operator.itruediv, operator.ixor,
)

# In-place operator -> its binary form. ``a += b`` on an immutable ``a`` (an int, a SymInt) is
# ``a = a + b``: only a tensor on the left is written into.
OUT_OF_PLACE = dict(zip(BINARY_OPS[13:], BINARY_OPS[:13]))

# Operator names that have a reflected (__radd__) and an in-place (__iadd__) form.
REFLECTED_NAMES = frozenset({"add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow",
                             "lshift", "rshift", "and", "or", "xor"})

# Builtin classes whose single positional match sub-pattern is the subject itself (PEP 634).
SELF_MATCHING = frozenset({bool, bytearray, bytes, dict, float, frozenset, int, list, set, str,
                           tuple})

# Comparison -> (its dunder, the reflected dunder tried on the right operand).
COMPARE_DUNDERS = {
    "<": ("__lt__", "__gt__"), "<=": ("__le__", "__ge__"), "==": ("__eq__", "__eq__"),
    "!=": ("__ne__", "__ne__"), ">": ("__gt__", "__lt__"), ">=": ("__ge__", "__le__"),
}

COMPARE_OPS = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq,
    "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
}

# Opcodes whose handler folds constants with real Python operations, and the errors that this
# folding raises for the program itself: an exception of these types from the handler is the
# program's own, raised inside the trace (where it may be caught) as eager would raise it.
FOLDING_ERRORS: dict[str, tuple[type[Exception], ...]] = {
    "BUILD_MAP": (TypeError,),  # {[]: 1}: unhashable key
    "MAP_ADD": (TypeError,),  # {k: v for ...} with an unhashable key
    "BUILD_SET": (TypeError,),  # {[1]}: unhashable item
    "SET_ADD": (TypeError,),  # {v for ...} with an unhashable item
    "SET_UPDATE": (TypeError,),  # {*items} with an unhashable item
    "CONTAINS_OP": (TypeError,),  # [] in {}: unhashable key
    "FORMAT_VALUE": (TypeError, ValueError),  # f"{1:q}": unknown format code
    "FORMAT_WITH_SPEC": (TypeError, ValueError),  # 3.13's form of the same
}

# A runaway loop while tracing (``while True`` on a constant) must not hang the caller.
MAX_STEPS = 200_000
# Recursion is followed to this many nested calls; deeper recursion falls back to eager.
MAX_INLINE_DEPTH = 48

CO_GENERATOR = 0x20
# A call of these returns a coroutine or an async generator: awaiting is not traced.
CO_ASYNC = 0x80 | 0x200


class TranslationError(GraphliftError):
    """graphlift itself failed while translating; the original error is chained."""


@dataclass
class BreakState:
    """Where the root frame stopped for a graph break, and what was live there."""

    inst: Instruction  # the instruction that will run eagerly
    stack: list[VariableTracker]
    symbolic_locals: dict[str, VariableTracker]
    kw_names: tuple[str, ...]


_JUMP_IF_FALSE = frozenset({"POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_IF_FALSE"})
# Types of torch's module-level tables that a program may change (hooks, torch.optim's
# _foreach_supported_types): a trusted global of one of them is read with guards, unlike
# torch's other globals.
_REGISTRY_TYPES = frozenset({collections.OrderedDict, list})
# Registries of other types read by trusted code, guarded the same way: copyreg's reducers per
# class (the polyfill of copy.deepcopy reads it; copyreg.pickle(C, ...) after a call must be seen).
_REGISTRIES = (copyreg.dispatch_table,)
# The first instruction of a handler made of ``except`` clauses (3.11 on; 3.10).
_EXCEPT_CLAUSES_START = frozenset({"PUSH_EXC_INFO", "COPY"})


def _builtin_exception(f_globals: dict, name: str) -> type | None:
    """The builtin ``Exception`` subclass a handler names (not shadowed by a global), else None:
    such a clause cannot catch ``GeneratorExit``, a ``BaseException``."""
    if name in f_globals:
        return None
    value = getattr(builtins, name, None)
    return value if isinstance(value, type) and issubclass(value, Exception) else None


class InstructionTranslator:
    """Runs one frame symbolically. ``run()`` returns the tracker of the frame's return value.

    The root translator runs the compiled function itself; :class:`InliningTranslator` runs each
    inlined callee with the same graph, guards and builder.
    """

    depth = 0
    break_at: int | None = None

    def __init__(self, fn: types.FunctionType, arguments: dict[str, Any],
                 output: OutputGraph, guards: GuardBuilder, break_at: int | None = None) -> None:
        self.break_at = break_at  # stop before the instruction at this offset (a graph break)
        self.break_state: BreakState | None = None
        self.output = output
        self.guards = guards
        self.builder = VariableBuilder(self)
        self.unread_arguments = dict(arguments)  # wrapped lazily: unread arguments get no guards
        self.frame_fn, self.frame_arguments = fn, dict(arguments)  # real values, for regions
        self.generators: list[GeneratorVariable] = []  # every one made while tracing the frame
        cells = [CellVariable(contents_source=ClosureSource(name, i), real_cell=cell)
                 for i, (name, cell) in enumerate(zip(fn.__code__.co_freevars,
                                                      fn.__closure__ or ()))]
        self._start(fn.__code__, fn.__globals__, None, {}, cells)

    def _start(self, code: types.CodeType, f_globals: dict[str, Any],
               globals_source: Source | None, symbolic_locals: dict[str, VariableTracker],
               free_cells: list[CellVariable]) -> None:
        self.code = code
        self.f_globals = f_globals
        self.globals_source = globals_source  # None: the frame's own globals, G['name']
        self.instructions = bytecode.decode(code)
        self.index_of_offset = {inst.offset: i for i, inst in enumerate(self.instructions)}
        self.stack: list[VariableTracker] = []
        self.symbolic_locals = symbolic_locals
        self.cells: dict[str, CellVariable] = dict(zip(code.co_freevars, free_cells))
        self.ip = 0
        self.steps = 0
        self.inst: Instruction | None = None
        self.kw_names: tuple[str, ...] = ()
        self.return_value: VariableTracker | None = None
        self.is_generator = False  # the frame of a generator: it stops at each yield
        self.yielded_value: VariableTracker | None = None  # what the last YIELD_VALUE yielded
        self.current_exception: VariableTracker | None = None  # inside an except block
        for name in bytecode.cells_at_start(code):  # 3.10: no MAKE_CELL
            self.make_cell(name)

    def inline_call(self, fn: BaseUserFunctionVariable, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """Trace a call to a user function into the current graph; returns its result."""
        if self.depth >= MAX_INLINE_DEPTH:
            raise Unsupported(f"inlining deeper than {MAX_INLINE_DEPTH} calls (recursion?)")
        if fn.code.co_flags & CO_ASYNC:
            raise Unsupported(f"calling the async function {fn.describe()}: coroutines and "
                              "async generators are not traced", break_type="unsupported_call")
        bound = bind_arguments(fn.code, args, kwargs, fn.defaults(self), fn.kwdefaults(self))
        inliner = InliningTranslator(self, fn, bound)
        if fn.code.co_flags & CO_GENERATOR:
            return self.inline_generator(inliner, fn, args, kwargs)
        region = region_of(fn)
        if region is not None:  # graphlift.nested_compile_region: traced once, then reused
            return call_region(self, fn, region, list(bound.values()), inliner.run)
        return inliner.run()

    def inline_generator(self, frame: InliningTranslator, fn: BaseUserFunctionVariable,
                         args: list[VariableTracker],
                         kwargs: dict[str, VariableTracker]) -> GeneratorVariable:
        """A call of a generator function: its frame, not started (nothing of the body runs)."""
        frame.is_generator = True
        generator = GeneratorVariable(frame, fn, args, kwargs)
        self.root().generators.append(generator)
        return generator

    # -- what trackers ask of the translator (variables get it as ``tx``, never import it) ------
    def wrap_unguarded(self, value: Any) -> VariableTracker:
        """A tracker for a value reached through something already guarded."""
        return wrap_unguarded(self, value)

    def bind_class_attr(self, obj: VariableTracker, cls: type, name: str, attr: Any,
                        attr_source: Source | None) -> VariableTracker:
        """What ``obj.name`` gives for the class attribute ``attr`` (methods bind)."""
        return bind_class_attr(self, obj, cls, name, attr, attr_source)

    def is_same(self, left: VariableTracker, right: VariableTracker) -> bool:
        """``left is right`` where the answer is certain (guarded for two inputs)."""
        return is_same(self, left, right)

    def sandbox_outputs(self, fn: types.FunctionType, args: list[VariableTracker],
                        kwargs: dict[str, VariableTracker]) -> Any:
        """The fake outputs of ``fn(*args, **kwargs)`` traced into a throwaway graph."""
        return sandbox_outputs(self, fn, args, kwargs)

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> VariableTracker | None:
        """Trace to the return (its tracker) or to ``break_at`` (None; see ``break_state``)."""
        self.output.tracers.append(self)  # where guards recorded inside torch come from
        try:
            while self.return_value is None:
                if self.ip < len(self.instructions) and \
                        self.instructions[self.ip].offset == self.break_at:
                    self.break_state = BreakState(self.instructions[self.ip], list(self.stack),
                                                  dict(self.symbolic_locals), self.kw_names)
                    break
                self.step()
        finally:
            self.output.tracers.pop()
        if self.root() is self:
            self.check_generators_left_open()
        return self.return_value

    def check_generators_left_open(self) -> None:
        """Eager Python closes a suspended generator when its last reference goes, which runs
        the handler of a try or with block around its yield: a point the trace cannot know."""
        for generator in self.generators:
            if generator.left_open():
                raise Unsupported(f"the generator {generator.describe()} is left suspended "
                                  "inside a try or with block: closing it runs code at a point "
                                  "the trace cannot know", hints=(
                                      "exhaust the generator, or close() it explicitly",))

    # -- generator frames (the translator of an inlined generator) ------------------------------
    def resume_generator(self, sent: VariableTracker | None) -> VariableTracker | None:
        """Run this generator's frame on to its next yield (the value yielded) or its end
        (None; ``return_value`` is what it returned). ``sent`` is the value of the yield
        expression it is suspended at (None when it has not started)."""
        if sent is not None:
            self.push(sent)
        return self._run_to_yield(None, None)

    def throw_into_generator(self, exception: ExceptionVariable) -> VariableTracker | None:
        """Raise ``exception`` where this generator is suspended (in its ``yield from``
        delegate first), then run on to the next yield or the end."""
        delegate = self.yield_from_delegate()
        if not isinstance(delegate, GeneratorVariable) or delegate.stands_for is not None:
            return self._run_to_yield(exception, self.inst)  # an iterator without throw()
        if issubclass(exception.cls, GeneratorExit):
            delegate.close()
            return self._run_to_yield(exception, self.inst)
        try:
            item = delegate.throw_item(exception)
        except TracedException as error:
            self._end_yield_from()  # the delegate's exception is raised after its loop
            return self._run_to_yield(tracker_of(error), self.instructions[self.ip - 1])
        if item is not None:
            return item  # the delegate yielded: this frame stays where it is
        self._end_yield_from()
        returned = delegate.returned
        return self.resume_generator(returned if returned is not None else ConstantVariable(None))

    def yield_from_delegate(self) -> VariableTracker | None:
        """The iterator a ``yield from`` suspended here delegates to (3.11's RESUME 2 follows
        the yield, 3.10's YIELD_FROM runs again; the delegate is on the stack), else None."""
        following = self.instructions[self.ip] if self.ip < len(self.instructions) else None
        if following is None or not bytecode.resumes_yield_from(following):
            return None
        return self.peek()

    def suspended_in_handler(self) -> bool:
        """Whether closing this generator where it is suspended would run code of its frame:
        a try or with block around the yield whose handler can catch ``GeneratorExit`` (a
        ``finally``, a with block's ``__exit__``, an ``except`` of anything but builtin
        ``Exception`` subclasses). ``collections.abc.Sequence.__iter__``'s ``except
        IndexError`` cannot: closing it only re-raises."""
        entry = bytecode.user_handler(self.code, self.inst.offset)
        while entry is not None:
            reraise = self._reraise_of_except_clauses(entry.target)
            if reraise is None:
                return True
            # The clauses' cleanup (COPY, POP_EXCEPT, RERAISE) passes it to an outer try.
            cleanup = bytecode.user_handler(self.code, reraise)
            if cleanup is None:
                return False
            if cleanup.restore is not None:  # 3.10: the raise leaves the except block itself
                entry = cleanup
                continue
            i = self.index_of_offset[cleanup.target]
            if [inst.opname for inst in self.instructions[i:i + 3]] != \
                    ["COPY", "POP_EXCEPT", "RERAISE"]:
                return True
            entry = bytecode.user_handler(self.code, self.instructions[i + 2].offset)
        return False

    def _reraise_of_except_clauses(self, target: int) -> int | None:
        """Where GeneratorExit goes in the handler at ``target``: the offset of the RERAISE
        that ``except`` clauses of builtin Exception subclasses end in; None for any other
        handler (it may run code)."""
        insts, i = self.instructions, self.index_of_offset[target]
        # 3.11 on save the handled exception first; 3.10 copies the raised one's type for
        # each clause's JUMP_IF_NOT_EXC_MATCH (DUP_TOP, decoded as COPY 1).
        start = insts[i].opname
        if start not in _EXCEPT_CLAUSES_START:
            return None
        i += 1
        while True:
            classes = []
            while insts[i].opname == "LOAD_GLOBAL":
                classes.append(_builtin_exception(self.f_globals, insts[i].argval))
                i += 1
            if len(classes) > 1 and insts[i].opname == "BUILD_TUPLE" and \
                    insts[i].arg == len(classes):
                i += 1
            if not classes or None in classes:
                return None
            if insts[i].opname == "CHECK_EXC_MATCH" and insts[i + 1].opname in _JUMP_IF_FALSE:
                i = self.index_of_offset[insts[i + 1].argval]  # the clause did not match
            elif insts[i].opname == "JUMP_IF_NOT_EXC_MATCH":
                i = self.index_of_offset[insts[i].argval]
            else:
                return None
            if insts[i].opname in ("RERAISE", "RERAISE_310"):
                return insts[i].offset
            if start == "COPY" and insts[i].opname == "COPY":
                i += 1  # 3.10: the next clause's own copy

    def _end_yield_from(self) -> None:
        """Leave the ``yield from`` loop as SEND does when its delegate ends: the delegate is
        popped and the frame goes on after the loop."""
        self.pop()
        if self.instructions[self.ip].opname == "YIELD_FROM":  # 3.10: after it
            self.ip += 1
            return
        jump_back = self.instructions[self.ip + 1]  # after RESUME 2: the jump back to SEND
        send = self.instructions[self.index_of_offset[jump_back.argval]]
        self.ip = self.index_of_offset[send.argval]

    def _run_to_yield(self, exception: ExceptionVariable | None,
                      at: Instruction | None) -> VariableTracker | None:
        self.output.tracers.append(self)
        try:
            if exception is not None:
                self.unwind(TracedException(exception), at)
            while self.return_value is None:
                self.step()
                if self.yielded_value is not None:
                    value, self.yielded_value = self.yielded_value, None
                    return value
            return None
        finally:
            self.output.tracers.pop()


    def step(self) -> None:
        inst = self.instructions[self.ip]
        self.inst = inst
        self.ip += 1
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise self._located(Unsupported(f"more than {MAX_STEPS} instructions while tracing "
                                            "(a loop that does not end on constants?)"))
        handler = getattr(self, inst.opname, None)
        if handler is None:
            reason = UNSUPPORTED.get(inst.opname, "not implemented")
            raise self._located(Unsupported(f"opcode {inst.opname}: {reason}",
                                            break_type="unsupported_opcode"))
        try:
            handler(inst)
        except TracedException as error:
            self.unwind(error, inst)
        except Unsupported as error:
            if self.depth == 0 and error.root_offset is None:
                error.root_offset = inst.offset
            raise self._located(error) from error.__cause__
        except GraphliftError:
            raise
        except FOLDING_ERRORS.get(inst.opname, ()) as error:
            self.unwind(raise_real(error), inst)  # the program's own error, raised as eager would
        except Exception as error:
            raise TranslationError(
                f"internal error while translating {inst.opname} at {self.location()}: "
                f"{type(error).__name__}: {error}") from error

    def location(self) -> str:
        line = self.inst.lineno if self.inst else self.code.co_firstlineno
        return f"{self.code.co_filename}:{line}"

    def _located(self, error: Unsupported) -> Unsupported:
        """Add this frame to the error's user stack (the innermost frame gives its location)."""
        if not error.hints:
            error.hints = default_hints(error.break_type)
        if self.inst is None or any(marker == id(self) for marker, _ in error.user_frames):
            return error
        line = self.inst.lineno or 0
        source_line = linecache.getline(self.code.co_filename, line).strip() or None
        error.user_frames.append((id(self), (self.code.co_filename, line, self.code.co_name,
                                             source_line)))
        if error.location is None:
            error.location = self.location()
            error.source_line = source_line
        return error

    def root(self) -> InstructionTranslator:
        """The translator of the compiled frame itself."""
        return self

    def unwind(self, error: TracedException, inst: Instruction) -> None:
        """Find the handler for a traced exception in the 3.11 exception table, or propagate."""
        entry = bytecode.exception_handler(self.code, inst.offset)
        if entry is None:
            if isinstance(self, InliningTranslator):
                raise error
            real = error.real if error.exception is None else error.exception.as_real()
            raise self._located(Unsupported(
                f"the frame raises {type(real).__name__}: {real}", break_type="user_exception",
                hints=("eager execution raises it, with the original traceback",)))
        if entry.restore is not None:  # 3.10: leaving except blocks restores their exception
            previous = self.stack[entry.restore]
            self.current_exception = None if is_none(previous) else previous
        del self.stack[entry.depth:]
        if entry.lasti:
            self.push(ConstantVariable(inst.offset))
        exception = tracker_of(error)
        for slot in bytecode.HANDLER_ENTRY:
            self.push(self.handler_value(slot, exception))
        if bytecode.HANDLER_SETS_EXCEPTION:
            self.current_exception = exception
        self.ip = self.index_of_offset[entry.target]

    def handler_value(self, slot: str, exception: VariableTracker) -> VariableTracker:
        """One value a handler finds on the stack (see ``bytecode.HANDLER_ENTRY``); tracebacks
        are not traced (None, what __exit__ also gets from the exception table's handlers)."""
        if slot == "exception":
            return exception
        if slot == "type":
            return ClassVariable(exception.python_type())
        previous = self.current_exception
        if previous is None or slot == "previous_traceback":
            return ConstantVariable(None)
        return previous if slot == "previous" else ClassVariable(previous.python_type())

    def jump(self, inst: Instruction) -> None:
        self.ip = self.index_of_offset[inst.argval]

    def mark_mutated(self, value: VariableTracker) -> None:
        """Record that the graph mutates ``value`` in place (for aliasing guards and DCE)."""
        if isinstance(value, TensorVariable):
            self.output.mark_mutated(value.fake)

    # -- stack helpers -------------------------------------------------------------------------
    def push(self, value: VariableTracker) -> None:
        """Push one tracker."""
        self.stack.append(value)

    def pop(self) -> VariableTracker:
        """Pop one tracker."""
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        """Pop ``n`` trackers, returned in stack order (deepest first)."""
        if n == 0:
            return []
        values = self.stack[-n:]
        del self.stack[-n:]
        return values

    def peek(self, depth: int = 1) -> VariableTracker:
        """The tracker ``depth`` slots from the top, without popping it."""
        return self.stack[-depth]

    # -- no-ops --------------------------------------------------------------------------------
    def NOP(self, inst: Instruction) -> None:
        pass

    RESUME = PRECALL = EXTENDED_ARG = CACHE = NOP
    # 3.13 converts a condition with TO_BOOL before the jump (or UNARY_NOT) that tests it; the
    # canonical jump tests the value's truth itself, as 3.11's does, with the same __bool__
    # call at the same point (nothing runs between the two).
    TO_BOOL = NOP

    # -- stack manipulation --------------------------------------------------------------------
    def POP_TOP(self, inst: Instruction) -> None:
        self.pop()

    def PUSH_NULL(self, inst: Instruction) -> None:
        self.push(NullVariable())

    def COPY(self, inst: Instruction) -> None:
        self.push(self.peek(inst.arg))

    def SWAP(self, inst: Instruction) -> None:
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    def ROT_N(self, inst: Instruction) -> None:
        # 3.10 (and its ROT_THREE, ROT_FOUR): the top moves down to the arg-th slot.
        top = self.pop()
        self.stack.insert(len(self.stack) - inst.arg + 1, top)

    def DUP_TOP_TWO(self, inst: Instruction) -> None:
        self.stack.extend(self.stack[-2:])

    # -- loads and stores ----------------------------------------------------------------------
    def LOAD_CONST(self, inst: Instruction) -> None:
        value = inst.argval
        if isinstance(value, types.CodeType):
            self.push(ConstantVariable(value))  # consumed by MAKE_FUNCTION
        else:
            self.push(wrap_constant(value))

    def LOAD_FAST(self, inst: Instruction) -> None:
        name = inst.argval
        if name not in self.symbolic_locals:
            if name not in self.unread_arguments:
                raise Unsupported(f"local variable {name!r} referenced before assignment",
                                  break_type="user_exception")
            value = self.unread_arguments.pop(name)
            self.symbolic_locals[name] = self.builder.wrap(value, LocalSource(name))
        self.push(self.symbolic_locals[name])

    def STORE_FAST(self, inst: Instruction) -> None:
        self.unread_arguments.pop(inst.argval, None)
        value = self.pop()
        if isinstance(value, NullVariable):  # restoring a local LOAD_FAST_AND_CLEAR found unbound
            self.symbolic_locals.pop(inst.argval, None)
        else:
            self.symbolic_locals[inst.argval] = value

    # 3.13's superinstructions: two locals in one argument (argval is the pair of names).
    def LOAD_FAST_LOAD_FAST(self, inst: Instruction) -> None:
        for name in inst.argval:
            self.LOAD_FAST(replace(inst, argval=name))

    def STORE_FAST_STORE_FAST(self, inst: Instruction) -> None:
        for name in inst.argval:  # the first name gets the top of the stack
            self.STORE_FAST(replace(inst, argval=name))

    def STORE_FAST_LOAD_FAST(self, inst: Instruction) -> None:
        stored, loaded = inst.argval
        self.STORE_FAST(replace(inst, argval=stored))
        self.LOAD_FAST(replace(inst, argval=loaded))

    def LOAD_FAST_AND_CLEAR(self, inst: Instruction) -> None:
        # An inlined comprehension saves the outer local of its variable's name (NULL when
        # unbound) and stores it back at its end.
        name = inst.argval
        if name in self.symbolic_locals or name in self.unread_arguments:
            self.LOAD_FAST(inst)
        else:
            self.push(NullVariable())
        self.DELETE_FAST(inst)

    def DELETE_FAST(self, inst: Instruction) -> None:
        self.unread_arguments.pop(inst.argval, None)
        self.symbolic_locals.pop(inst.argval, None)

    def LOAD_GLOBAL(self, inst: Instruction) -> None:
        value = self.load_global(inst.argval)
        if bytecode.pushes_null(inst):
            self.stack.extend(bytecode.call_slots(value, NullVariable()))
        else:
            self.push(value)

    def load_global(self, name: str) -> VariableTracker:
        globals_dict = self.f_globals
        if name in globals_dict and trace_rules.is_trusted_globals(globals_dict):
            value = globals_dict[name]
            registry = type(value) in _REGISTRY_TYPES or any(value is r for r in _REGISTRIES)
            if registry and self.globals_source is not None:
                # A registry the program adds to (torch.optim's global step hooks): guarded.
                return self.builder.wrap(value, self.global_source(name))
            return wrap_unguarded(self, value)  # torch's or graphlift's: no guard
        stored = self.output.side_effects.pending(self.global_source(name))
        if stored is not None:
            return stored
        if name in globals_dict:
            return self.builder.wrap(globals_dict[name], self.global_source(name))
        builtins_dict = globals_dict.get("__builtins__", __builtins__)
        if isinstance(builtins_dict, types.ModuleType):
            builtins_dict = vars(builtins_dict)
        if name in builtins_dict:
            value = builtins_dict[name]
            if not trace_rules.is_trusted_globals(globals_dict) and \
                    (self.globals_source is not None or globals_dict is self.root().f_globals):
                # A global of that name defined later, or a patched builtin, would win. (Globals
                # of code from no importable module have no source: not guarded.)
                self.guards.builtin_unshadowed(self.globals_source, builtins_dict, name, value)
            return wrap_unguarded(self, value)
        raise Unsupported(f"name {name!r} is not defined", break_type="user_exception")

    def STORE_GLOBAL(self, inst: Instruction) -> None:
        self.output.side_effects.store(self.global_source(inst.argval), self.pop())

    def global_source(self, name: str) -> Source:
        if self.globals_source is None:
            return GlobalSource(name)
        return ItemSource(self.globals_source, name)

    def LOAD_ATTR(self, inst: Instruction) -> None:
        self.push(self.pop().var_getattr(self, inst.argval))

    def LOAD_METHOD(self, inst: Instruction) -> None:
        # CPython pushes (function, self) or the attribute and a NULL; we always do the latter,
        # with the bound method.
        obj = self.pop()
        self.stack.extend(bytecode.call_slots(obj.var_getattr(self, inst.argval), NullVariable()))

    def LOAD_SUPER_ATTR(self, inst: Instruction) -> None:
        # super().name: the global super, the class and the first argument are on the stack;
        # the argument's bit 2 marks super(cls, obj), else super() is called without arguments
        # (which matters where the global super is not the builtin).
        obj = self.pop()
        cls = self.pop()
        proxy = self.pop().call(self, [cls, obj] if inst.arg & 2 else [], {})
        self.push(proxy.var_getattr(self, inst.argval))

    def LOAD_SUPER_METHOD(self, inst: Instruction) -> None:
        self.LOAD_SUPER_ATTR(inst)
        self.stack.extend(bytecode.call_slots(self.pop(), NullVariable()))

    def MAKE_CELL(self, inst: Instruction) -> None:
        self.make_cell(inst.argval)

    def make_cell(self, name: str) -> None:
        """The cell of a cell variable; an argument's cell holds the argument."""
        initial = None
        if name in self.unread_arguments or name in self.symbolic_locals:
            self.LOAD_FAST(Instruction("LOAD_FAST", None, name, 0, None, False))
            initial = self.pop()
        self.cells[name] = CellVariable(initial)

    def COPY_FREE_VARS(self, inst: Instruction) -> None:
        pass  # the frame's free cells were installed when it started

    def LOAD_DEREF(self, inst: Instruction) -> None:
        self.push(self.cells[inst.argval].load(self, inst.argval))

    def STORE_DEREF(self, inst: Instruction) -> None:
        self.cells[inst.argval].store(self, self.pop())

    def LOAD_CLOSURE(self, inst: Instruction) -> None:
        self.push(self.cells[inst.argval])

    # -- functions -----------------------------------------------------------------------------
    def MAKE_FUNCTION(self, inst: Instruction) -> None:
        code = self.pop().as_constant()
        flags = inst.arg or 0  # 3.13 has no flags: SET_FUNCTION_ATTRIBUTE follows instead
        closure = self.pop() if flags & 0x08 else None
        annotations = self.pop() if flags & 0x04 else None
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop() if flags & 0x01 else None
        fn = NestedFunctionVariable(code, self.f_globals, defaults, kwdefaults, closure,
                                    self.globals_source)
        if annotations is not None:
            fn.set_function_attribute(0x04, annotations)
        self.push(fn)

    def MAKE_FUNCTION_310(self, inst: Instruction) -> None:
        # 3.10 has the qualified name above the code (3.11's code objects carry it).
        qualname = self.pop().as_constant()
        self.MAKE_FUNCTION(inst)
        self.peek().qualified_name = qualname

    def SET_FUNCTION_ATTRIBUTE(self, inst: Instruction) -> None:
        # 3.13: the function made by MAKE_FUNCTION on top, one of its attributes below (the
        # argument is the flag MAKE_FUNCTION had for it in 3.11).
        fn = self.pop()
        value = self.pop()
        if not isinstance(fn, NestedFunctionVariable):
            raise TranslationError(f"SET_FUNCTION_ATTRIBUTE on {fn!r}")
        fn.set_function_attribute(inst.arg, value)
        self.push(fn)

    def RETURN_GENERATOR(self, inst: Instruction) -> None:
        if not self.is_generator:
            raise Unsupported("a generator's frame run as a plain function")
        self.push(ConstantVariable(None))  # popped at once: the frame starts at the first next()

    def YIELD_VALUE(self, inst: Instruction) -> None:
        # The frame stops here; resume_generator pushes the value sent back in.
        self.yielded_value = self.pop()

    def GEN_START(self, inst: Instruction) -> None:
        pass  # 3.10 pops the value that started the generator, which is never pushed here

    def YIELD_FROM(self, inst: Instruction) -> None:
        # 3.10's yield from: send the value on top to the delegate below it; a value it yields
        # is yielded and YIELD_FROM runs again when the frame resumes (with the value sent in);
        # when the delegate ends, its return value replaces it.
        sent = self.pop()
        item = self.peek().send_item(sent)
        if item is None:
            returned = self.pop().returned
            self.push(returned if returned is not None else ConstantVariable(None))
        else:
            self.yielded_value = item
            self.ip -= 1

    # -- calls ---------------------------------------------------------------------------------
    def KW_NAMES(self, inst: Instruction) -> None:
        self.kw_names = bytecode.kw_names(self.code, inst)

    def CALL(self, inst: Instruction) -> None:
        args = self.popn(inst.arg)
        kwargs = {}
        if self.kw_names:
            names, self.kw_names = self.kw_names, ()
            kwargs = dict(zip(names, args[-len(names):]))
            args = args[:-len(names)]
        fn, self_arg = bytecode.call_target(*self.popn(2), is_null=is_null)
        if self_arg is not None:
            args = [self_arg, *args]
        self.push(fn.call(self, args, kwargs))

    def CALL_FUNCTION(self, inst: Instruction) -> None:
        # 3.10: the callable below its arguments, no NULL.
        args = self.popn(inst.arg)
        self.push(self.pop().call(self, args, {}))

    def CALL_FUNCTION_KW(self, inst: Instruction) -> None:
        # 3.10: the keyword names as a tuple on top, their values last among the arguments.
        names = tuple(self.pop().as_constant())
        args = self.popn(inst.arg)
        kwargs = dict(zip(names, args[len(args) - len(names):]))
        self.push(self.pop().call(self, args[:len(args) - len(names)], kwargs))

    def CALL_KW(self, inst: Instruction) -> None:
        # 3.13's CALL_KW whose names are not a constant right before it (the instruction layer
        # decodes the usual pair as KW_NAMES and CALL): the names are on the stack.
        self.kw_names = tuple(self.pop().as_constant())
        self.CALL(inst)

    def CALL_FUNCTION_EX(self, inst: Instruction) -> None:
        kwargs_var = self.pop() if inst.arg & 1 else None
        args_var = self.pop()
        fn = self.pop()
        if isinstance(fn, NullVariable):  # 3.13: callable, NULL, args
            fn = self.pop()
        elif self.stack and isinstance(self.peek(), NullVariable):  # 3.11, 3.12: NULL first
            self.pop()  # (3.10 has no NULL)
        kwargs = {}
        if kwargs_var is not None:
            if not isinstance(kwargs_var, DictVariable):
                raise Unsupported("**kwargs that is not a dict built in the frame")
            kwargs = dict(kwargs_var.items)
        self.push(fn.call(self, args_var.unpack(self), kwargs))

    def STORE_ATTR(self, inst: Instruction) -> None:
        obj = self.pop()
        value = self.pop()
        if not isinstance(obj, (UserObjectVariable, ExceptionVariable, TensorVariable)):
            raise Unsupported(f"attribute assignment on {obj!r}", break_type="side_effect")
        obj.store_attr(self, inst.argval, value)

    def DELETE_ATTR(self, inst: Instruction) -> None:
        obj = self.pop()
        if not isinstance(obj, UserObjectVariable):
            raise Unsupported(f"del of an attribute of {obj!r}", break_type="side_effect")
        obj.delete_attr(self, inst.argval)

    def RETURN_VALUE(self, inst: Instruction) -> None:
        self.return_value = self.pop()

    def RETURN_CONST(self, inst: Instruction) -> None:
        self.LOAD_CONST(inst)
        self.RETURN_VALUE(inst)

    # -- operators -----------------------------------------------------------------------------
    def BINARY_OP(self, inst: Instruction) -> None:
        right = self.pop()
        left = self.pop()
        self.push(self.binary_op(BINARY_OPS[inst.arg], left, right))

    def binary_op(self, op: Any, left: VariableTracker, right: VariableTracker) -> \
            VariableTracker:
        if op in OUT_OF_PLACE and isinstance(left, (ConstantVariable, SymNodeVariable)):
            op = OUT_OF_PLACE[op]
        if has_array(left, right):  # NumPy semantics, through torch._numpy
            return numpy_operator(self, op, [left, right])
        if user_operand(left, right):  # Num(x) + x: the class's dunder before the tensor's
            result = self.user_dunder(op, left, right)
            if result is not None:
                return result
            if op in BINARY_SYMBOLS and all(gives_way(v) for v in (left, right)):
                raise binary_type_error(op, left, right)
        if isinstance(left, TensorVariable) or isinstance(right, TensorVariable):
            return call_torch(self, "call_function", op, [left, right], {})
        if op in (operator.add, operator.iadd) and is_tuple_concat(left, right):
            return tuple_concat(left, right, self)
        if isinstance(left, BaseListVariable):
            return self.sequence_op(op, left, right)
        if op in (operator.mul, operator.imul) and isinstance(right, BaseListVariable) and \
                left.is_constant():  # 4 * [x]: int.__mul__ gives way to the sequence's __rmul__
            return self.sequence_op(operator.mul, right, left)
        if symbolic_operands(left, right):  # x.shape[0] * 2: a node computing a SymInt
            return call_torch(self, "call_function", op, [left, right], {})
        if isinstance(left, DictVariable) and isinstance(right, DictVariable):
            return self.dict_op(op, left, right)
        if isinstance(left, SetVariable) and isinstance(right, SetVariable):
            return self.set_op(op, left, right)
        if left.is_constant() and right.is_constant():
            return fold_operator(op, left.as_constant(), right.as_constant())
        result = self.user_dunder(op, left, right)
        if result is not None:
            return result
        one_set = isinstance(left, SetVariable) != isinstance(right, SetVariable)
        other = right if isinstance(left, SetVariable) else left
        if op in BINARY_SYMBOLS and one_set and other.python_type() in NO_OPERATORS:
            # A set's operators give way for a non-set; functions and generators have none.
            raise binary_type_error(op, left, right)
        raise Unsupported(f"operator {op.__name__} on {left!r} and {right!r}")

    def user_dunder(self, op: Any, left: VariableTracker, right: VariableTracker) -> \
            VariableTracker | None:
        """``a + b`` on user objects: inline ``__add__``, else ``__radd__``."""
        name = op.__name__.strip("_")
        inplace = name.startswith("i") and name[1:] in REFLECTED_NAMES
        base = name[1:] if inplace else name
        attempts = [(left, f"__i{base}__", right)] if inplace else []
        attempts += [(left, f"__{base}__", right), (right, f"__r{base}__", left)]
        for obj, dunder, other in attempts:
            method = obj.special_method(self, dunder) if isinstance(obj, UserObjectVariable) \
                else None
            if method is not None:
                result = method.call(self, [other], {})
                if not (result.is_constant() and result.as_constant() is NotImplemented):
                    return result
        return None

    def sequence_op(self, op: Any, left: BaseListVariable, right: VariableTracker) -> \
            VariableTracker:
        """``+``, ``*`` and ``+=`` on tuples and lists of trackers."""
        if op is operator.iadd and isinstance(left, ListVariable):
            if isinstance(right, ConstantVariable) and not hasattr(right.value, "__iter__"):
                raise raise_real(TypeError(f"'{type(right.value).__name__}' object is not "
                                           f"iterable"))  # lst += None
            left.check_mutable(self)
            left.items.extend(right.iterate(self))  # item by item, as list.extend
            return left
        if op in (operator.add, operator.iadd) and type(right) is type(left):
            return type(left)(left.items + right.items)
        if op is operator.imul and isinstance(left, ListVariable) and right.is_constant() and \
                isinstance(right.as_constant(), int):
            left.check_mutable(self)
            try:
                left.items[:] = left.items * right.as_constant()  # list.__imul__: the same list
            except (MemoryError, OverflowError) as error:  # [1] * 2**62: the program's error
                raise raise_real(error) from error
            return left
        if op in (operator.mul, operator.imul) and right.is_constant():
            try:
                return type(left)(left.items * right.as_constant())
            except (TypeError, MemoryError, OverflowError) as error:  # [1] * "a", [1] * 2**62
                raise raise_real(error) from error  # the program's own error
        raise Unsupported(f"operator {op.__name__} on {left!r} and {right!r}")

    def dict_op(self, op: Any, left: DictVariable, right: DictVariable) -> VariableTracker:
        """``a | b`` and ``a |= b`` on dicts of trackers."""
        if op is operator.or_:
            return DictVariable({**left.items, **right.items})
        if op is operator.ior:
            left.check_mutable(self)
            left.items.update(right.items)
            return left
        raise Unsupported(f"operator {op.__name__} on dicts")

    def set_op(self, op: Any, left: SetVariable, right: SetVariable) -> VariableTracker:
        """``|``, ``&``, ``-``, ``^`` on sets; the in-place forms change ``left`` itself."""
        result = fold_operator(op, left.as_constant(), right.as_constant())
        if op not in OUT_OF_PLACE or left.frozen:
            return result  # a new set (a frozenset has no in-place methods)
        left.check_mutable(self)
        left.items = {v: wrap_constant(v) for v in result.as_constant()}
        return left

    def unary(self, op: Any) -> None:
        value = self.pop()
        if user_operand(value):  # -Num(x): the class's __neg__
            self.push(call_unary_dunder(self, op, value))
        elif has_array(value):
            self.push(numpy_operator(self, op, [value]))
        elif isinstance(value, (TensorVariable, SymNodeVariable)):
            self.push(call_torch(self, "call_function", op, [value], {}))
        else:
            self.push(fold_operator(op, value.as_constant()))

    def UNARY_NEGATIVE(self, inst: Instruction) -> None:
        self.unary(operator.neg)

    def UNARY_POSITIVE(self, inst: Instruction) -> None:
        self.unary(operator.pos)

    def UNARY_INVERT(self, inst: Instruction) -> None:
        self.unary(operator.invert)

    def UNARY_NOT(self, inst: Instruction) -> None:
        self.push(ConstantVariable(not self.pop().truthy(self)))

    def COMPARE_OP(self, inst: Instruction) -> None:
        right = self.pop()
        left = self.pop()
        self.push(self.compare(inst.argval, left, right))

    def compare(self, symbol: str, left: VariableTracker, right: VariableTracker) -> \
            VariableTracker:
        """``left <symbol> right`` (``"<"``, ``"=="``...) on trackers."""
        op = COMPARE_OPS[symbol]
        if has_array(left, right):
            return numpy_operator(self, op, [left, right])
        if user_operand(left, right):  # Num(x) < x: the class's __lt__ before the tensor's
            return self.user_comparison(symbol, left, right)
        if isinstance(left, TensorVariable) or isinstance(right, TensorVariable) or \
                symbolic_operands(left, right):
            return call_torch(self, "call_function", op, [left, right], {})
        if left.is_constant() and right.is_constant():
            return fold_operator(op, left.as_constant(), right.as_constant())
        if symbol in ("==", "!=") and is_sequence_pair(left, right):
            return ConstantVariable(self.sequences_equal(left, right) == (symbol == "=="))
        return self.user_comparison(symbol, left, right)

    def sequences_equal(self, left: BaseListVariable, right: BaseListVariable) -> bool:
        """``left == right`` for two lists or two tuples: lengths, then items (identity first)."""
        if len(left.items) != len(right.items):
            return False
        return all(a is b or self.compare("==", a, b).truthy(self)
                   for a, b in zip(left.items, right.items))

    def user_comparison(self, symbol: str, left: VariableTracker, right: VariableTracker) -> \
            VariableTracker:
        """``a == b`` on user objects: ``__eq__``, then the reflected method, then identity."""
        result = self.comparison_dunder(symbol, left, right)
        if result is not None:
            return result
        if symbol in ("==", "!="):
            return ConstantVariable(is_same(self, left, right) == (symbol == "=="))
        if isinstance(left, UserObjectVariable) or isinstance(right, UserObjectVariable):
            raise raise_real(TypeError(f"'{symbol}' not supported between instances of "
                                       f"'{left.python_type().__name__}' and "
                                       f"'{right.python_type().__name__}'"))
        raise Unsupported(f"comparison {symbol} of {left!r} and {right!r}")

    def comparison_dunder(self, symbol: str, left: VariableTracker, right: VariableTracker) -> \
            VariableTracker | None:
        """The user class's comparison method, then the reflected one; None when both are
        absent or give NotImplemented."""
        name, reflected = COMPARE_DUNDERS[symbol]
        for obj, dunder, other in ((left, name, right), (right, reflected, left)):
            if isinstance(obj, UserObjectVariable):
                method = obj.special_method(self, dunder)
                if method is None:
                    continue
                result = method.call(self, [other], {})
                if not (result.is_constant() and result.as_constant() is NotImplemented):
                    return result
        return None

    def IS_OP(self, inst: Instruction) -> None:
        right = self.pop()
        left = self.pop()
        self.push(ConstantVariable(is_same(self, left, right) != bool(inst.arg)))

    def CONTAINS_OP(self, inst: Instruction) -> None:
        container = self.pop()
        item = self.pop()
        self.push(ConstantVariable(self.contains(container, item) != bool(inst.arg)))

    def contains(self, container: VariableTracker, item: VariableTracker) -> bool:
        """``item in container`` while tracing."""
        if isinstance(container, (UserObjectVariable, InputInstanceDictVariable)):
            return container.contains(self, item)
        if isinstance(container, DictVariable):
            return hashable_key(item) in container.items
        if container.is_constant() and item.is_constant():
            return item.as_constant() in container.as_constant()
        if isinstance(container, BaseListVariable):
            # As PyObject_RichCompareBool: identity first, then ==, element by element.
            return any(element is item or self.compare("==", element, item).truthy(self)
                       for element in container.items)
        raise Unsupported(f"'in' test of {item!r} in {container!r}")

    # -- subscripts ----------------------------------------------------------------------------
    def BINARY_SUBSCR(self, inst: Instruction) -> None:
        index = self.pop()
        obj = self.pop()
        self.push(self.subscript(obj, index))

    def subscript(self, obj: VariableTracker, index: VariableTracker) -> VariableTracker:
        """``obj[index]`` while tracing."""
        if has_array(obj, index):
            return numpy_operator(self, operator.getitem, [obj, index])
        if isinstance(obj, TensorVariable):
            return call_torch(self, "call_function", operator.getitem, [obj, index], {})
        if isinstance(obj, (BaseListVariable, DictVariable, NNModuleVariable,
                            UserObjectVariable, InputInstanceDictVariable)):
            return obj.getitem(self, index)
        if obj.is_constant() and index.is_constant():
            return fold_operator(operator.getitem, obj.as_constant(), index.as_constant())
        raise Unsupported(f"subscript of {obj!r}")

    def STORE_SUBSCR(self, inst: Instruction) -> None:
        index = self.pop()
        obj = self.pop()
        value = self.pop()
        self.store_subscript(obj, index, value)

    def store_subscript(self, obj: VariableTracker, index: VariableTracker,
                        value: VariableTracker) -> None:
        """``obj[index] = value`` while tracing."""
        if has_array(obj):
            numpy_operator(self, operator.setitem, [obj, index, value])
        elif isinstance(obj, TensorVariable):
            call_torch(self, "call_function", operator.setitem, [obj, index, value], {})
        elif isinstance(obj, ListVariable):
            obj.check_mutable(self)
            key = index.as_constant()
            try:  # a[1.5] = v, a[9] = v: CPython's own errors, raised in the program
                obj.items[key] = value.unpack(self) if isinstance(key, slice) else value
            except (TypeError, IndexError, ValueError) as error:
                raise raise_real(error) from error
        elif isinstance(obj, DictVariable):
            obj.check_mutable(self)
            obj.items[hashable_key(index)] = value
        elif isinstance(obj, (UserObjectVariable, InputInstanceDictVariable)):
            obj.setitem(self, index, value)
        else:
            raise Unsupported(f"item assignment on {obj!r}", break_type="side_effect")

    def DELETE_SUBSCR(self, inst: Instruction) -> None:
        index = self.pop()
        obj = self.pop()
        self.delete_subscript(obj, index)

    def delete_subscript(self, obj: VariableTracker, index: VariableTracker) -> None:
        """``del obj[index]`` while tracing."""
        if isinstance(obj, ListVariable):
            obj.check_mutable(self)
            try:  # del a[9], del a["x"]: CPython's own errors, raised in the program
                del obj.items[index.as_constant()]
            except (TypeError, IndexError) as error:
                raise raise_real(error) from error
        elif isinstance(obj, DictVariable):
            obj.check_mutable(self)
            key = hashable_key(index)
            if key not in obj.items:
                raise raise_real(KeyError(key))
            del obj.items[key]
        elif isinstance(obj, UserObjectVariable):
            obj.delitem(self, index)
        else:
            raise Unsupported(f"del on an item of {obj!r}", break_type="side_effect")

    def BINARY_SLICE(self, inst: Instruction) -> None:
        # obj[start:end]: BUILD_SLICE 2 and BINARY_SUBSCR in one instruction.
        self.build_slice(2)
        self.BINARY_SUBSCR(inst)

    def STORE_SLICE(self, inst: Instruction) -> None:
        # obj[start:end] = value
        self.build_slice(2)
        self.STORE_SUBSCR(inst)

    def BUILD_SLICE(self, inst: Instruction) -> None:
        self.build_slice(inst.arg)

    def build_slice(self, count: int) -> None:
        parts = self.popn(count)
        if has_symbol(parts):
            self.push(SliceVariable(parts))  # x[:n] with a symbolic n
            return
        if not all(p.is_constant() for p in parts):
            raise Unsupported("slice with bounds that are not constants")
        self.push(ConstantVariable(slice(*(p.as_constant() for p in parts))))

    # -- building containers -------------------------------------------------------------------
    def BUILD_TUPLE(self, inst: Instruction) -> None:
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst: Instruction) -> None:
        self.push(ListVariable(self.popn(inst.arg)))

    def building(self, inst: Instruction, kind: type) -> Any:
        """The container a display or comprehension adds to, ``inst.arg`` deep, about to change.

        A resume function gets a half-built display (``[1, *a, x.item()]`` after the break) as an
        argument: the ledger must see the additions, or the returned object would miss them.
        """
        target = self.peek(inst.arg)
        if not isinstance(target, kind):
            raise Unsupported(f"{inst.opname} into {target!r}")
        target.check_mutable(self)
        return target

    def LIST_APPEND(self, inst: Instruction) -> None:
        value = self.pop()
        self.building(inst, ListVariable).items.append(value)

    def LIST_EXTEND(self, inst: Instruction) -> None:
        values = self.pop().unpack(self)
        self.building(inst, ListVariable).items.extend(values)

    def LIST_TO_TUPLE(self, inst: Instruction) -> None:
        self.push(TupleVariable(self.pop().items))

    def BUILD_MAP(self, inst: Instruction) -> None:
        flat = self.popn(2 * inst.arg)
        self.push(DictVariable({hashable_key(flat[i]): flat[i + 1]
                                for i in range(0, len(flat), 2)}))

    def BUILD_CONST_KEY_MAP(self, inst: Instruction) -> None:
        keys = self.pop().as_constant()
        values = self.popn(inst.arg)
        self.push(DictVariable(dict(zip(keys, values))))

    def BUILD_SET(self, inst: Instruction) -> None:
        self.push(SetVariable(self.popn(inst.arg)))

    def SET_ADD(self, inst: Instruction) -> None:
        value = self.pop()
        self.building(inst, SetVariable).add(value)

    def SET_UPDATE(self, inst: Instruction) -> None:
        values = self.pop().unpack(self)
        target = self.building(inst, SetVariable)
        for value in values:
            target.add(value)

    def MAP_ADD(self, inst: Instruction) -> None:
        value = self.pop()
        key = self.pop()
        self.building(inst, DictVariable).items[hashable_key(key)] = value

    def DICT_UPDATE(self, inst: Instruction) -> None:
        other = self.pop()
        self.building(inst, DictVariable).items.update(self.mapping_items(other))

    def DICT_MERGE(self, inst: Instruction) -> None:
        other = self.pop()
        target = self.building(inst, DictVariable)
        items = self.mapping_items(other)
        if target.items.keys() & items.keys():
            # f(**a, **b) with a key in both: eager's TypeError names the function its own way.
            raise Unsupported("a keyword argument given twice through ** (eager raises "
                              "TypeError)", break_type="user_exception")
        target.items.update(items)

    def mapping_items(self, other: VariableTracker) -> dict[Any, VariableTracker]:
        """What ``{**other}`` reads: a mapping's items, through ``keys()`` and ``other[key]``."""
        return {k.as_constant(): v for k, v in mapping_pairs(self, other, mapping_only=True)}

    def UNPACK_SEQUENCE(self, inst: Instruction) -> None:
        items = self.pop().unpack(self)
        if len(items) != inst.arg:
            raise Unsupported(f"cannot unpack {len(items)} values into {inst.arg}",
                              break_type="user_exception")
        self.stack.extend(reversed(items))

    def UNPACK_EX(self, inst: Instruction) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack(self)
        if len(items) < before + after:
            raise Unsupported("not enough values to unpack", break_type="user_exception")
        middle = ListVariable(items[before:len(items) - after])
        self.stack.extend(reversed([*items[:before], middle, *items[len(items) - after:]]))

    def FORMAT_VALUE(self, inst: Instruction) -> None:
        spec = self.pop().as_constant() if inst.arg & 0x04 else ""
        value = self.pop().as_constant()
        conversion = {0: None, 1: str, 2: repr, 3: ascii}[inst.arg & 0x03]
        if conversion is not None:
            value = conversion(value)
        self.push(ConstantVariable(format(value, spec)))

    # 3.13 splits FORMAT_VALUE: CONVERT_VALUE (!s, !r, !a), then FORMAT_SIMPLE or, with a
    # format spec on top, FORMAT_WITH_SPEC.
    def CONVERT_VALUE(self, inst: Instruction) -> None:
        self.FORMAT_VALUE(inst)  # its argument is 3.11's conversion flag (no spec bit)

    def FORMAT_SIMPLE(self, inst: Instruction) -> None:
        self.FORMAT_VALUE(replace(inst, arg=0))

    def FORMAT_WITH_SPEC(self, inst: Instruction) -> None:
        self.FORMAT_VALUE(replace(inst, arg=0x04))

    def BUILD_STRING(self, inst: Instruction) -> None:
        self.push(ConstantVariable("".join(p.as_constant() for p in self.popn(inst.arg))))

    # -- exceptions and with blocks ------------------------------------------------------------
    def RAISE_VARARGS(self, inst: Instruction) -> None:
        if inst.arg == 0:
            if self.current_exception is None:
                raise Unsupported("bare raise with no active exception",
                                  break_type="user_exception")
            raise TracedException(self.current_exception)
        cause = self.pop() if inst.arg == 2 else None
        exception = self.pop()
        if exception.is_constant() and isinstance(exception.as_constant(), type) and \
                issubclass(exception.as_constant(), BaseException):
            exception = ExceptionVariable(exception.as_constant(), [])
        if not isinstance(exception, ExceptionVariable):
            raise Unsupported(f"raise of {exception!r}")
        if cause is not None:
            set_cause(exception, cause)
        exception.context = self.current_exception  # raised while handling another one
        raise TracedException(exception)

    def LOAD_ASSERTION_ERROR(self, inst: Instruction) -> None:
        self.push(ClassVariable(AssertionError))

    def PUSH_EXC_INFO(self, inst: Instruction) -> None:
        exception = self.pop()
        self.push(self.current_exception or ConstantVariable(None))
        self.current_exception = exception
        self.push(exception)

    def POP_EXCEPT(self, inst: Instruction) -> None:
        previous = self.pop()
        self.current_exception = None if is_none(previous) else previous

    def CHECK_EXC_MATCH(self, inst: Instruction) -> None:
        expected = self.pop().as_constant()
        self.push(ConstantVariable(issubclass(self.peek().python_type(), expected)))

    def STOPITERATION_ERROR(self, inst: Instruction) -> None:
        # A generator's own StopIteration escaping its body becomes RuntimeError (PEP 479).
        exception = self.pop()
        if isinstance(exception, ExceptionVariable) and issubclass(exception.cls, StopIteration):
            error = ExceptionVariable(RuntimeError,
                                      [ConstantVariable("generator raised StopIteration")])
            error.cause = error.context = exception
            exception = error
        self.push(exception)

    def RERAISE(self, inst: Instruction) -> None:
        exception = self.pop()
        if inst.arg:
            self.pop()  # lasti
        if not isinstance(exception, ExceptionVariable):
            raise Unsupported(f"re-raise of {exception!r}")
        raise TracedException(exception)

    # 3.10's block stack: the instruction layer derives the exception table from it.
    def SETUP_FINALLY(self, inst: Instruction) -> None:
        pass

    POP_BLOCK = SETUP_FINALLY

    def JUMP_IF_NOT_EXC_MATCH(self, inst: Instruction) -> None:
        # 3.10: the handled exception's class (its triple's top, copied) and the class an
        # except clause names; both are popped.
        expected = self.pop().as_constant()
        if not issubclass(self.pop().as_constant(), expected):
            self.jump(inst)

    def RERAISE_310(self, inst: Instruction) -> None:
        # 3.10: the raised exception's triple (type on top, then value, traceback).
        _, exception, _ = self.popn(3)
        if not isinstance(exception, ExceptionVariable):
            raise Unsupported(f"re-raise of {exception!r}")
        raise TracedException(exception)

    def POP_EXCEPT_310(self, inst: Instruction) -> None:
        # 3.10: the previous exception's triple, which is the handled exception again.
        _, previous, _ = self.popn(3)
        self.current_exception = None if is_none(previous) else previous

    def WITH_EXCEPT_START_310(self, inst: Instruction) -> None:
        # 3.10: __exit__ below the previous exception's triple and the raised one's.
        _, exception, cls = self.stack[-3:]
        exit_fn = self.peek(7)
        self.push(exit_fn.call(self, [cls, exception, traceback_for(exit_fn, exception)], {}))

    def BEFORE_WITH(self, inst: Instruction) -> None:
        manager = self.pop()
        self.push(manager.var_getattr(self, "__exit__"))
        self.push(manager.var_getattr(self, "__enter__").call(self, [], {}))

    def WITH_EXCEPT_START(self, inst: Instruction) -> None:
        exception = self.peek()
        exit_fn = self.peek(4)
        self.push(exit_fn.call(self, [ClassVariable(exception.python_type()), exception,
                                      traceback_for(exit_fn, exception)], {}))

    # -- pattern matching (match statements) -----------------------------------------------------
    def GET_LEN(self, inst: Instruction) -> None:
        self.push(ConstantVariable(len(self.peek().unpack(self))))

    def MATCH_MAPPING(self, inst: Instruction) -> None:
        self.push(ConstantVariable(isinstance(self.peek(), DictVariable)))

    def MATCH_SEQUENCE(self, inst: Instruction) -> None:
        subject = self.peek()
        is_sequence = isinstance(subject, BaseListVariable) or (
            subject.is_constant() and isinstance(subject.as_constant(), (tuple, range)))
        self.push(ConstantVariable(is_sequence))

    def MATCH_KEYS(self, inst: Instruction) -> None:
        keys = self.peek().as_constant()
        subject = self.peek(2)
        if all(key in subject.items for key in keys):
            self.push(TupleVariable([subject.items[key] for key in keys]))
        else:
            self.push(ConstantVariable(None))

    def MATCH_KEYS_310(self, inst: Instruction) -> None:
        # 3.10 pushes whether the keys matched after the values (or None).
        self.MATCH_KEYS(inst)
        self.push(ConstantVariable(not is_none(self.peek())))

    def MATCH_CLASS_310(self, inst: Instruction) -> None:
        # 3.10 leaves the subject where the match fails, and pushes whether it matched.
        subject = self.peek(3)
        self.MATCH_CLASS(inst)
        matched = not is_none(self.peek())
        if not matched:
            self.stack[-1] = subject
        self.push(ConstantVariable(matched))

    def COPY_DICT_WITHOUT_KEYS(self, inst: Instruction) -> None:
        # 3.10's ``**rest`` of a mapping pattern: the subject without the keys matched.
        keys = self.pop().as_constant()
        subject = self.peek()
        if not isinstance(subject, DictVariable):
            raise Unsupported(f"**rest of a mapping pattern on {subject!r}")
        self.push(DictVariable({k: v for k, v in subject.items.items() if k not in keys}))

    def MATCH_CLASS(self, inst: Instruction) -> None:
        names = self.pop().as_constant()
        cls = self.pop().as_constant()
        subject = self.pop()
        if not isinstance_of(subject.python_type(), cls):
            self.push(ConstantVariable(None))
            return
        positional = getattr(cls, "__match_args__", ())
        if inst.arg > len(positional) and not (inst.arg == 1 and cls in SELF_MATCHING):
            raise raise_real(TypeError(f"{cls.__name__}() accepts {len(positional)} "
                                       f"positional sub-patterns ({inst.arg} given)"))
        if inst.arg == 1 and cls in SELF_MATCHING:
            attributes = [subject]
        else:
            attributes = [subject.var_getattr(self, name) for name in positional[:inst.arg]]
        attributes += [subject.var_getattr(self, name) for name in names]
        self.push(TupleVariable(attributes))

    # -- imports (of modules that are already imported) -------------------------------------------
    def IMPORT_NAME(self, inst: Instruction) -> None:
        fromlist = self.pop().as_constant()
        level = self.pop().as_constant()
        name = inst.argval
        if level != 0 or name not in sys.modules:
            raise Unsupported(f"import of {name!r}, which is not imported yet (importing runs "
                              "module code)", break_type="unsupported_opcode")
        module = sys.modules[name if fromlist else name.partition(".")[0]]
        self.push(wrap_unguarded(self, module))

    def IMPORT_FROM(self, inst: Instruction) -> None:
        self.push(self.peek().var_getattr(self, inst.argval))

    # -- generators delegating (yield from) -------------------------------------------------------
    def GET_YIELD_FROM_ITER(self, inst: Instruction) -> None:
        self.GET_ITER(inst)

    def SEND(self, inst: Instruction) -> None:
        sent = self.pop()
        item = self.peek().send_item(sent)
        if item is None:
            returned = self.pop().returned  # r = yield from gen()
            self.push(returned if returned is not None else ConstantVariable(None))
            self.jump(inst)
        else:
            self.push(item)

    def END_SEND(self, inst: Instruction) -> None:
        # After CLEANUP_THROW: the value stays, the value below it goes.
        del self.stack[-2]

    def CLEANUP_THROW(self, inst: Instruction) -> None:
        # The handler of a yield from that threw into its delegate: a StopIteration is the
        # delegate's return value, any other exception goes on.
        exception = self.pop()
        self.popn(2)  # the delegate and the last value sent
        if not isinstance(exception, ExceptionVariable):
            raise Unsupported(f"re-raise of {exception!r}")
        if not issubclass(exception.cls, StopIteration):
            raise TracedException(exception)
        self.push(ConstantVariable(None))
        self.push(exception.args[0] if exception.args else ConstantVariable(None))  # .value

    # -- control flow --------------------------------------------------------------------------
    def JUMP_FORWARD(self, inst: Instruction) -> None:
        self.jump(inst)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD

    def jump_if(self, inst: Instruction, when: bool) -> None:
        if self.pop().truthy(self) is when:
            self.jump(inst)

    def POP_JUMP_FORWARD_IF_TRUE(self, inst: Instruction) -> None:
        self.jump_if(inst, True)

    def POP_JUMP_FORWARD_IF_FALSE(self, inst: Instruction) -> None:
        self.jump_if(inst, False)

    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE
    POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE

    def jump_if_none(self, inst: Instruction, when: bool) -> None:
        if is_none(self.pop()) is when:
            self.jump(inst)

    def POP_JUMP_FORWARD_IF_NONE(self, inst: Instruction) -> None:
        self.jump_if_none(inst, True)

    def POP_JUMP_FORWARD_IF_NOT_NONE(self, inst: Instruction) -> None:
        self.jump_if_none(inst, False)

    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_FORWARD_IF_NONE
    POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE

    def jump_or_pop(self, inst: Instruction, when: bool) -> None:
        if self.peek().truthy(self) is when:
            self.jump(inst)
        else:
            self.pop()

    def JUMP_IF_TRUE_OR_POP(self, inst: Instruction) -> None:
        self.jump_or_pop(inst, True)

    def JUMP_IF_FALSE_OR_POP(self, inst: Instruction) -> None:
        self.jump_or_pop(inst, False)

    def GET_ITER(self, inst: Instruction) -> None:
        self.push(iterator_of(self, self.pop()))

    def END_FOR(self, inst: Instruction) -> None:
        # Reached only by falling through (FOR_ITER's exit jumps past it): pops two values.
        self.popn(2)

    def FOR_ITER(self, inst: Instruction) -> None:
        self.output.side_effects.write_local(self.peek())  # it advances
        item = self.peek().next_item()
        if item is None:
            self.pop()
            self.jump(inst)
        else:
            self.push(item)


# The Python ``__exit__`` methods that only hand the traceback on (to ``gen.throw``, back to
# the exception, to ``traceback.clear_frames``), which get None for it: a traced exception has no
# real traceback. Any other Python ``__exit__`` gets a TracebackVariable, known not to be None.
TRACEBACK_FORWARDERS = frozenset({
    contextlib._GeneratorContextManager.__exit__,  # @contextmanager
    unittest.case._AssertRaisesContext.__exit__,  # assertRaises: clear_frames(tb)
    unittest.case._AssertWarnsContext.__exit__,  # assertWarns: ignores it
})


def traceback_for(exit_fn: VariableTracker, exception: VariableTracker) -> VariableTracker:
    """What a ``with`` block's ``__exit__`` gets as the traceback of ``exception``."""
    fn = exit_fn.fn if isinstance(exit_fn, UserMethodVariable) else exit_fn
    if isinstance(fn, UserFunctionVariable) and fn.fn in TRACEBACK_FORWARDERS:
        return ConstantVariable(None)
    if isinstance(fn, BaseUserFunctionVariable):  # Python code that may look at it
        return TracebackVariable(exception)
    return ConstantVariable(None)  # graphlift's own context managers; C ones ignore it


# Types whose objects define no operator at all: ``set - f`` raises TypeError.
NO_OPERATORS = frozenset({types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                          types.GeneratorType, types.BuiltinMethodType})


class InliningTranslator(InstructionTranslator):
    """Runs an inlined callee on the caller's graph, guards and builder."""

    def __init__(self, parent: InstructionTranslator, fn: BaseUserFunctionVariable,
                 arguments: dict[str, VariableTracker]) -> None:
        self.parent = parent
        self.depth = parent.depth + 1
        self.output = parent.output
        self.guards = parent.guards
        self.builder = parent.builder
        self.unread_arguments = {}
        globals_source = fn.globals_source()
        if fn.globals is parent.f_globals:
            globals_source = parent.globals_source
        self._start(fn.code, fn.globals, globals_source, dict(arguments), fn.closure_cells(parent))

    def global_source(self, name: str) -> Source:
        if self.globals_source is None and self.f_globals is not self.root().f_globals:
            raise Unsupported(f"global {name!r} of a function from another module reached "
                              "without a source")
        return super().global_source(name)

    def STORE_GLOBAL(self, inst: Instruction) -> None:
        # The store is replayed after the graph through the globals' path, which a fresh
        # import's globals lack (the name finds the other module).
        if isinstance(self.globals_source, FreshModuleGlobalsSource):
            raise Unsupported(f"storing the global {inst.argval!r} of a fresh import of "
                              f"{self.globals_source.module_name}")
        super().STORE_GLOBAL(inst)

    def root(self) -> InstructionTranslator:
        return self.parent.root() if isinstance(self.parent, InliningTranslator) else self.parent


def sandbox_outputs(tx: InstructionTranslator, fn: types.FunctionType,
                    args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> Any:
    """The fake outputs of ``fn(*args, **kwargs)`` by tracing it into a throwaway graph.

    The sandbox has its own graph, guards and side-effect ledger and shares only the fake mode,
    so nothing it does reaches the real trace. Returns None when it cannot follow ``fn``.
    """
    scratch = OutputGraph()
    scratch.fake_mode = tx.output.fake_mode
    try:
        tracer = InstructionTranslator(fn, {}, scratch, GuardBuilder())
        callee = UserFunctionVariable(fn)
        bound = bind_arguments(fn.__code__, [_rebind(scratch, a) for a in args],
                               {k: _rebind(scratch, v) for k, v in kwargs.items()},
                               callee.defaults(tracer), callee.kwdefaults(tracer))
        tracer.symbolic_locals.update(bound)
        return to_fake(tracer.run())
    except GraphliftError:
        return None


def _rebind(scratch: Any, value: VariableTracker) -> VariableTracker:
    """``value`` for the sandbox: tensors become placeholders of the scratch graph."""
    if isinstance(value, TensorVariable):
        node = scratch.graph.placeholder(f"arg{len(scratch.graph.nodes)}")
        node.meta.update(value.node.meta)
        return TensorVariable(node, value.fake)
    if type(value) is TupleVariable:
        return TupleVariable([_rebind(scratch, v) for v in value.items],
                             tuple_class=value.tuple_class)
    if type(value) is ListVariable:
        return ListVariable([_rebind(scratch, v) for v in value.items])
    if type(value) is DictVariable:
        return DictVariable({k: _rebind(scratch, v) for k, v in value.items.items()})
    if value.is_constant() or value.source is not None or \
            isinstance(value, (SkippedFunctionVariable, PolyfillVariable,
                               AllowedFunctionVariable)):
        return value  # holds no node of the real graph
    raise GraphliftError(f"the sandbox cannot take {value!r}")


def is_sequence_pair(left: VariableTracker, right: VariableTracker) -> bool:
    """Two lists, or two tuples whose class keeps tuple's ``__eq__`` (named tuples, sizes): what
    ``==`` compares item by item (a deque never equals a list)."""
    if not (isinstance(left, BaseListVariable) and isinstance(right, BaseListVariable)):
        return False
    kinds = (left.python_type(), right.python_type())
    return kinds == (list, list) or all(issubclass(k, tuple) and k.__eq__ is tuple.__eq__
                                        for k in kinds)


def is_tuple_concat(left: VariableTracker, right: VariableTracker) -> bool:
    """``a + b`` of two tuples where one is a tracker of items (``(-1,) + x.shape[1:]``)."""
    if not (isinstance(left, TupleVariable) or isinstance(right, TupleVariable)):
        return False
    return all(isinstance(v, TupleVariable) or
               (v.is_constant() and isinstance(v.as_constant(), tuple)) for v in (left, right))


def tuple_concat(left: VariableTracker, right: VariableTracker,
                 tx: InstructionTranslator) -> VariableTracker:
    """tuple + tuple is a tuple; with a torch.Size on either side a torch.Size (its ``__add__``
    and ``__radd__``), kept as items so symbolic sizes stay symbolic."""
    items = left.unpack(tx) + right.unpack(tx)
    if torch.Size in (left.python_type(), right.python_type()):
        return SizeVariable(items)
    return TupleVariable(items)


def fold_operator(op: Any, *values: Any) -> VariableTracker:
    """Apply an operator to constants for real; an exception it raises is raised in the trace."""
    try:
        result = op(*values)
    except Exception as error:
        raise raise_real(error) from error
    return wrap_constant(result)


def is_null(value: VariableTracker) -> bool:
    """The NULL CPython pushes beside a callable that is called without self."""
    return isinstance(value, NullVariable)


def is_none(value: VariableTracker) -> bool:
    if isinstance(value, SymNodeVariable):
        return False  # a symbolic number is never None (and reading it would specialize it)
    return value.is_constant() and value.as_constant() is None


# Trackers of torch's callables, whose objects are known while tracing (``fn``).
TORCH_FUNCS = (TorchCallableVariable, EagerFuncVariable)


def is_same(tx: InstructionTranslator, left: VariableTracker, right: VariableTracker) -> bool:
    """``left is right`` for trackers; only answered where the answer is certain."""
    if left is right:
        return True
    real_left = getattr(left, "real_object", _NO_OBJECT)
    real_right = getattr(right, "real_object", _NO_OBJECT)
    if real_left is not _NO_OBJECT and real_right is not _NO_OBJECT:
        # Two inputs: the answer holds only while they keep (not) being one object.
        same = real_left is real_right
        (tx.guards.same_object if same else tx.guards.not_aliased)(left.source, right.source)
        return same
    if isinstance(left, UserObjectVariable) and isinstance(right, UserObjectVariable) and \
            not left.is_new and not right.is_new:
        return left.value is right.value  # objects reached without sources (sentinels)
    if isinstance(left, MUTABLE_TRACKERS) or isinstance(right, MUTABLE_TRACKERS):
        return False  # distinct trackers of which one was made in the frame: distinct objects
    if isinstance(left, ConstantVariable) and isinstance(right, ConstantVariable):
        return left.value is right.value
    functions = (getattr(left, "fn", None), getattr(right, "fn", None))
    if isinstance(left, UserFunctionVariable) and isinstance(right, UserFunctionVariable):
        same = functions[0] is functions[1]
        if left.source is not None and right.source is not None:
            (tx.guards.same_object if same else tx.guards.not_aliased)(left.source, right.source)
        return same
    if isinstance(left, BaseUserFunctionVariable) or isinstance(right, BaseUserFunctionVariable):
        return False  # a function made in the frame is a new object
    if is_none(left) or is_none(right):
        return False  # None is only itself (a symbolic number is not None)
    if isinstance(left, PythonModuleVariable) or isinstance(right, PythonModuleVariable):
        other = right if isinstance(left, PythonModuleVariable) else left
        if isinstance(other, PythonModuleVariable):
            return left.module is right.module
        if other.is_constant() or isinstance(other, BuiltinVariable):
            return False  # a module is only itself (``key in (int, math)``)
    if left.is_constant() and right.is_constant():
        return left.as_constant() is right.as_constant()  # classes, builtins
    if isinstance(left, BuiltinVariable) and isinstance(right, BuiltinVariable):
        return left.fn is right.fn  # C functions and slot wrappers (``C.__reduce__``)
    if left.is_constant() != right.is_constant():
        return False  # a tracked tensor/object is never identical to a constant
    if isinstance(left, TensorVariable) and isinstance(right, TensorVariable):
        return False  # inputs are deduplicated by identity; results are fresh
    if isinstance(left, TORCH_FUNCS) and isinstance(right, TORCH_FUNCS):
        return left.fn is right.fn  # torch's functions (a __torch_function__'s func test)
    raise Unsupported(f"identity test between {left!r} and {right!r}")


_NO_OBJECT = object()
# Trackers of objects with identity: containers, user objects, tensors, generators, exceptions.
MUTABLE_TRACKERS = (ListVariable, DictVariable, SetVariable, UserObjectVariable, TensorVariable,
                    GeneratorVariable, ExceptionVariable)


# Opcodes refused, grouped by why. Each one makes the frame fall back (or raise under fullgraph).
UNSUPPORTED: dict[str, str] = {
    # Functions and classes defined inside the frame: inlining comes with the language issue.
    **dict.fromkeys(("DELETE_DEREF", "LOAD_CLASSDEREF", "LOAD_BUILD_CLASS", "LOAD_LOCALS"),
                    "defining classes or deleting cells inside a compiled frame"),
    # PEP 695 type parameters (3.12's CALL_INTRINSIC_1/2 functions): class and type statements.
    **dict.fromkeys(("INTRINSIC_TYPEVAR", "INTRINSIC_PARAMSPEC", "INTRINSIC_TYPEVARTUPLE",
                     "INTRINSIC_SUBSCRIPT_GENERIC", "INTRINSIC_TYPEALIAS",
                     "INTRINSIC_TYPEVAR_WITH_BOUND", "INTRINSIC_TYPEVAR_WITH_CONSTRAINTS",
                     "INTRINSIC_SET_FUNCTION_TYPE_PARAMS", "INTRINSIC_SET_TYPEPARAM_DEFAULT"),
                    "type parameter syntax defines classes and aliases"),
    **dict.fromkeys(("INTRINSIC_1_INVALID", "INTRINSIC_2_INVALID"),
                    "no intrinsic function (the compiler never emits it)"),
    # Stores that are side effects on objects outside the frame: need the side-effect ledger.
    **dict.fromkeys(("DELETE_GLOBAL", "STORE_NAME",
                     "DELETE_NAME", "LOAD_NAME"),
                    "a store or delete outside the frame's locals (side effect)"),
    # Exception groups (except*): rare in model code.
    **dict.fromkeys(("CHECK_EG_MATCH", "PREP_RERAISE_STAR"), "except* is not traced"),
    # Generators, coroutines and async code: their frames outlive one call.
    **dict.fromkeys(("ASYNC_GEN_WRAP",
                     "GET_AWAITABLE", "GET_AITER", "GET_ANEXT", "END_ASYNC_FOR",
                     "BEFORE_ASYNC_WITH", "SETUP_ASYNC_WITH"),
                    "coroutines and async code are not traced"),
    # Module-level and interpreter-level operations that never make sense inside a graph.
    **dict.fromkeys(("IMPORT_STAR", "SETUP_ANNOTATIONS",
                     "PRINT_EXPR"),
                    "imports and module-level statements run eagerly"),
}


def _check_opcode_coverage() -> None:
    """Every opcode of the running CPython is handled, aliased, or refused with a reason: each
    canonical name it can decode to (or the instruction layer says it never appears)."""
    canonical = {name for raw in bytecode.all_opnames() if not bytecode.never_decoded(raw)
                 for name in bytecode.canonical_names(raw)}
    missing = sorted(n for n in canonical
                     if not hasattr(InstructionTranslator, n) and n not in UNSUPPORTED)
    stale = sorted(set(UNSUPPORTED) - canonical - bytecode.decoded_elsewhere())
    if missing or stale:
        raise ImportError(f"graphlift.translator: opcodes neither handled nor refused: {missing}; "
                          f"refused but unknown to this CPython: {stale}")


bytecode.check_python_version()
_check_opcode_coverage()
