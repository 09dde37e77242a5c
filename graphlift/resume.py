"""Resume functions: new code objects that continue a frame after a graph break.

When the translator stops at instruction ``I`` of a frame, the compiled entry runs the graph
captured so far, runs ``I`` eagerly, and then calls a resume function that carries on from the
next instruction. A resume function is the original code with a prefix::

    COPY_FREE_VARS n          (if the function has free variables)
    RESUME 0
    LOAD_FAST __gl_stack0     (one per value that was on the stack)
    ...
    JUMP_FORWARD  -> the resume offset in the copied original code

Its parameters are every local of the original frame (in ``co_varnames`` order, so the copied
bytecode finds them in their old slots) followed by the stack values. Because 3.11 jumps are
relative, prepending the prefix leaves the copied code's jumps intact; the exception table is
shifted by the prefix length, the line table gets a "no location" entry for the prefix, and the
arguments of opcodes that index the cell/free-variable slots move past the new parameters.

Cell variables are rebuilt by the prefix (``MAKE_CELL``, and for cells that are not arguments a
``STORE_DEREF`` from a parameter of their own); a function made inside the frame that still holds
the old cells cannot be carried over, so such a frame is not split. Other limits (checked by
:func:`why_not_resumable`): not a generator, and the break is not inside a loop or a ``try``.
"""

from __future__ import annotations

import dis
import types
from collections.abc import Callable
from dataclasses import dataclass

import torch

from graphlift import bytecode
from graphlift.sources import RESUME_CELL_PREFIX, RESUME_STACK_PREFIX

CO_VARARGS, CO_VARKEYWORDS, CO_GENERATOR_LIKE = 0x04, 0x08, 0x20 | 0x80 | 0x100 | 0x200

# Opcodes whose argument indexes the cell/free-variable part of the fast-locals array.
# (LOAD_CLASSDEREF is 3.11's name of 3.12's LOAD_FROM_DICT_OR_DEREF; 3.13 loads a cell for a
# closure with LOAD_FAST of its slot, past the plain locals: only such arguments are shifted.)
_DEREF_OPS = frozenset(dis.opmap[name] for name in (
    "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_CLOSURE", "LOAD_CLASSDEREF",
    "LOAD_FROM_DICT_OR_DEREF", "MAKE_CELL", "LOAD_FAST") if name in dis.opmap)


@dataclass(frozen=True)
class ResumeKey:
    """Identifies one resume function of a code object."""

    offset: int  # where execution continues in the original code
    stack_nulls: tuple[bool, ...]  # the stack from the bottom: True where CPython's NULL sits
    unbound: frozenset[str] = frozenset()  # locals not assigned at the break: deleted again

    @property
    def stack_depth(self) -> int:
        """How many stack values the resume function receives after the locals."""
        return self.stack_nulls.count(False)


def why_not_resumable(code: types.CodeType, break_offset: int) -> str | None:
    """The reason a break at ``break_offset`` cannot resume, or None when it can."""
    if code.co_flags & CO_GENERATOR_LIKE:
        return "the frame is a generator or coroutine"
    for start, end in _loop_ranges(code):
        if start <= break_offset <= end:
            return "the break is inside a loop"
    for start, end in _try_ranges(code):
        if start <= break_offset < end:
            return "the break is inside a try block"
    return None


def _try_ranges(code: types.CodeType) -> list[tuple[int, int]]:
    """The extent of each try block: all table ranges that share a non-``with`` handler.

    Nested blocks split a try body into several table entries, so the extent is taken over all
    entries with the same handler (cleanup handlers, which start with COPY, are skipped).
    """
    extents: dict[int, tuple[int, int]] = {}
    starts = {inst.offset: inst.opname for inst in bytecode.decode(code)}
    for entry in bytecode.exception_table(code):
        if starts.get(entry.target) != "PUSH_EXC_INFO" or _is_with_handler(code, entry.target):
            continue
        low, high = extents.get(entry.target, (entry.start, entry.end))
        extents[entry.target] = (min(low, entry.start), max(high, entry.end))
    return list(extents.values())


def _loop_ranges(code: types.CodeType) -> list[tuple[int, int]]:
    """[target, offset] of every backward jump: the bytecode of each loop body. A jump from an
    exception handler back into the normal flow (3.12's handlers follow the last return) is
    the end of a try or with block, not a loop."""
    normal = bytecode.normal_flow(code)
    return [(inst.argval, inst.offset) for inst in bytecode.decode(code)
            if inst.opname.startswith(("JUMP_BACKWARD", "POP_JUMP_BACKWARD"))
            and (inst.offset in normal or inst.argval not in normal)]


def _is_with_handler(code: types.CodeType, target: int) -> bool:
    """A ``with`` block's handler is PUSH_EXC_INFO followed by WITH_EXCEPT_START."""
    instructions = bytecode.decode(code)
    for i, inst in enumerate(instructions):
        if inst.offset == target:
            following = instructions[i + 1].opname if i + 1 < len(instructions) else ""
            return inst.opname == "PUSH_EXC_INFO" and following == "WITH_EXCEPT_START"
    return False


def local_cells(code: types.CodeType) -> tuple[str, ...]:
    """Cell variables that are not arguments: they get parameters of their own when resuming."""
    return tuple(name for name in code.co_cellvars if name not in code.co_varnames)


def make_resume_code(code: types.CodeType, key: ResumeKey) -> types.CodeType:
    """Build the resume code object for ``key`` (see the module docstring)."""
    # Numbered after the existing locals: a resume function's own resume functions stay unique.
    first = len(code.co_varnames)
    stack_names = tuple(f"{RESUME_STACK_PREFIX}{first + i}" for i in range(key.stack_depth))
    cells = local_cells(code)
    # Numbered like the stack names: a resume function of a resume function carries the same
    # cells again, next to the old parameters of that name.
    cell_names = tuple(f"{RESUME_CELL_PREFIX}{first + len(stack_names) + i}_{name}"
                       for i, name in enumerate(cells))
    new_varnames = code.co_varnames + stack_names + cell_names
    shift = len(stack_names) + len(cell_names)
    prefix = bytearray()
    for name in code.co_cellvars:
        if name in code.co_varnames:  # an argument's cell shares the argument's slot
            prefix += _instruction("MAKE_CELL", code.co_varnames.index(name))
        else:
            slot = len(new_varnames) + cells.index(name)
            prefix += _instruction("MAKE_CELL", slot)
            prefix += _instruction("LOAD_FAST", new_varnames.index(cell_names[cells.index(name)]))
            prefix += _instruction("STORE_DEREF", slot)
    if code.co_freevars:
        prefix += bytes((dis.opmap["COPY_FREE_VARS"], len(code.co_freevars)))
    prefix += bytes((dis.opmap["RESUME"], 0))
    for name in sorted(key.unbound):  # passed as None; unbound again, as in the original frame
        prefix += _instruction("DELETE_FAST", code.co_varnames.index(name))
    values = iter(range(len(code.co_varnames), len(code.co_varnames) + key.stack_depth))
    for is_null in key.stack_nulls:
        prefix += _instruction("PUSH_NULL", 0) if is_null else \
            _instruction("LOAD_FAST", next(values))
    # The jump ends the prefix, so its target is relative to the start of the copied code.
    prefix += _instruction("JUMP_FORWARD", key.offset // 2)
    body = _shift_deref_args(code.co_code, len(code.co_varnames), shift)
    prefix_units = len(prefix) // 2
    return code.replace(
        co_code=bytes(prefix) + body,
        co_argcount=len(new_varnames),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_nlocals=len(new_varnames),
        co_varnames=new_varnames,
        co_flags=code.co_flags & ~(CO_VARARGS | CO_VARKEYWORDS),
        co_name=f"__resume_at_{key.offset}_{code.co_name}",
        co_qualname=f"__resume_at_{key.offset}_{bytecode.qualname(code)}",
        co_exceptiontable=_shift_exception_table(code, prefix_units),
        co_linetable=_no_location_entries(prefix_units) + code.co_linetable,
        co_stacksize=code.co_stacksize + len(key.stack_nulls),
    )


def _instruction(opname: str, arg: int) -> bytes:
    """One instruction with the EXTENDED_ARG prefixes its argument needs."""
    out = bytearray()
    extended = [(arg >> shift) & 0xFF for shift in (24, 16, 8) if arg >> shift]
    for byte in extended:
        out += bytes((dis.opmap["EXTENDED_ARG"], byte))
    out += bytes((dis.opmap[opname], arg & 0xFF))
    return bytes(out)


def _shift_deref_args(co_code: bytes, nlocals: int, shift: int) -> bytes:
    """Move indexes of cells past the locals (not arguments' cells) by ``shift`` new locals."""
    code = bytearray(co_code)
    for i in range(0, len(code), 2):
        if code[i] in _DEREF_OPS and code[i + 1] >= nlocals:
            if i >= 2 and code[i - 2] == dis.opmap["EXTENDED_ARG"] or code[i + 1] + shift > 255:
                raise ValueError("cell index too large to shift in place")
            code[i + 1] += shift
    return bytes(code)


def _shift_exception_table(code: types.CodeType, units: int) -> bytes:
    return encode_exception_table([(e.start + 2 * units, e.end + 2 * units, e.target + 2 * units,
                                    e.depth, e.lasti) for e in bytecode.exception_table(code)])


def encode_exception_table(entries: list[tuple[int, int, int, int, bool]]) -> bytes:
    """The exception table for (start, end, target, depth, lasti) entries (byte offsets, end
    exclusive; in order of start)."""
    out = bytearray()
    for start, end, target, depth, lasti in entries:
        fields = (start // 2, (end - start) // 2, target // 2, (depth << 1) | int(lasti))
        for n, value in enumerate(fields):
            out += _varint(value, first=n == 0)
    return bytes(out)


def _varint(value: int, first: bool) -> bytes:
    """The exception table's 6-bit varint: high groups first, bit 6 = more follow."""
    groups = [value & 63]
    value >>= 6
    while value:
        groups.append(value & 63)
        value >>= 6
    groups.reverse()
    out = bytearray(g | 64 for g in groups[:-1]) + bytes((groups[-1],))
    if first:
        out[0] |= 128  # marks the start of an entry
    return bytes(out)


def _no_location_entries(units: int) -> bytes:
    """Line-table entries (code 15: no location) covering ``units`` code units."""
    out = bytearray()
    while units > 0:
        n = min(units, 8)
        out.append(0x80 | (15 << 3) | (n - 1))
        units -= n
    return bytes(out)


def resume_function(fn: types.FunctionType, code: types.CodeType) -> types.FunctionType:
    """A function object for a resume code, with ``fn``'s globals and closure."""
    return types.FunctionType(code, fn.__globals__, code.co_name, None, fn.__closure__)


RESUME_ATTR = "_graphlift_resume"  # on a function: {ResumePoint: wrapper of its resume function}


class ResumePoint:
    """A resume function of one code object, compiled like any frame, per function object.

    Function objects that share the code (closures) get their own resume function (each needs
    its own closure), all with the one resume code object, hence one shared cache.
    """

    def __init__(self, code: types.CodeType, key: ResumeKey, options: object,
                 make_wrapper: Callable[[types.FunctionType, object], Callable]) -> None:
        self.code = make_resume_code(code, key)
        self.key = key
        self.options = options
        # eval_frame's wrapper factory, passed down: the interception layer sits above this one.
        self.make_wrapper = make_wrapper

    def __call__(self, fn: types.FunctionType, *args: object) -> object:
        # The wrapper lives on the function itself: a table here would hold the function's
        # globals from the code object's extra slot, a cycle the garbage collector cannot see.
        wrappers = fn.__dict__.get(RESUME_ATTR)
        if wrappers is None:
            wrappers = fn.__dict__[RESUME_ATTR] = {}
        wrapper = wrappers.get(self)
        if wrapper is None:
            function = resume_function(fn, self.code)
            wrapper = wrappers[self] = self.make_wrapper(function, self.options)
        return wrapper(*args)


class GradModeExit:
    """The ``__exit__`` of a grad-mode ``with`` block that a resume function continues inside.

    Calling it (normally, or from the with block's exception handler) restores the grad mode
    that was active before the block.
    """

    # No instance dict: an immutable shared value, so two blocks with the same previous mode
    # hand the resume function one object, which is not mistaken for a mutable input.
    __slots__ = ("previous",)

    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def __call__(self, *exc_info: object) -> bool:
        torch._C._set_grad_enabled(self.previous)
        return False

    def __repr__(self) -> str:
        return f"GradModeExit(previous={self.previous})"


# Two shared instances, so a resume function's guard on them is an identity check.
GRAD_MODE_EXITS = {True: GradModeExit(True), False: GradModeExit(False)}


# -- the run function's tail at a graph break --------------------------------------------------
def resumable_break(code: types.CodeType, error: object) -> str | None:
    """Why the frame cannot be split at the instruction ``error`` happened at (None: it can)."""
    offset = getattr(error, "root_offset", None)
    if offset is None:
        return "no instruction of the frame to split at"
    inst = next(i for i in bytecode.decode(code) if i.offset == offset)
    if inst.opname not in SPLITTABLE:
        return f"{inst.opname} cannot run on its own between two graphs"
    if inst.opname.startswith("POP_JUMP") and \
            getattr(error, "break_type", "") not in VALUE_CONDITIONS:
        return "a jump that failed for another reason than a tensor condition"
    return why_not_resumable(code, offset)


# Break types of a jump whose condition the graph computes and the run function then tests:
# a tensor's truth, or an unbacked symbol's (``if x.item() > 0`` under capture_scalar_outputs).
VALUE_CONDITIONS = frozenset({"data_dependent_branch", "data_dependent_guard"})

# Instructions at which a frame can be split: run eagerly, then resume after them.
SPLITTABLE = frozenset({
    "CALL",  # a call graphlift cannot trace: it runs eagerly (user functions compiled on their own)
    "CALL_FUNCTION_EX",  # the same, with *args / **kwargs
    "POP_JUMP_FORWARD_IF_TRUE",  # a branch on a tensor's value: the run function branches
    "POP_JUMP_FORWARD_IF_FALSE",
    "JUMP_IF_TRUE_OR_POP",  # `a or b` / `a and b` on a tensor's value
    "JUMP_IF_FALSE_OR_POP",
})
