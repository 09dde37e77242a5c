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
bytecode finds them in their old slots) followed by the stack values. Because 3.11 to 3.13
jumps are relative, prepending the prefix leaves the copied code's jumps intact; the exception
table is shifted by the prefix length, the line table gets a "no location" entry for the prefix,
and the arguments of opcodes that index the cell/free-variable slots move past the new
parameters.

Cell variables are rebuilt by the prefix (``MAKE_CELL``, and for cells that are not arguments a
``STORE_DEREF`` from a parameter of their own); a function made inside the frame that still holds
the old cells cannot be carried over, so such a frame is not split. Other limits (checked by
:func:`why_not_resumable`): not a generator, and the break is not inside a loop or a ``try``.

CPython 3.10 has neither an exception table nor ``RESUME``, ``COPY_FREE_VARS``, ``MAKE_CELL``
or ``PUSH_NULL``, and :func:`_assemble_310` builds its prefix differently:

- The interpreter makes the cells at frame start (an argument's cell holds the argument), so
  the prefix only stores the other cells from their parameters; ``*_DEREF`` arguments index
  ``co_cellvars + co_freevars``, not the locals, and stay as they are.
- 3.10 has no instruction that pushes a NULL. The copied code loads methods with
  ``LOAD_ATTR`` and calls them with ``CALL_FUNCTION`` instead of ``LOAD_METHOD`` and
  ``CALL_METHOD`` (the same attribute lookup and call, as argument-for-argument pairs), so the
  NULL that a ``LOAD_METHOD`` before the break left below its callable is not pushed again.
- Jumps are absolute (in code units) or relative: the copied code is reassembled with every
  jump retargeted, and a jump whose argument grows past a byte gets an ``EXTENDED_ARG``, which
  moves the code after it again (repeated until nothing moves; the line table follows).
- The block stack lives in the frame, not in a table: a ``with`` block open at the break is set
  up again by ``SETUP_FINALLY`` to its exit handler, at the stack level ``SETUP_WITH`` gave it
  (what ``SETUP_WITH`` does after calling ``__enter__``); ``try`` blocks and exception handlers
  are refused (an exception handler's own block would be missing as well).
- The line table is 3.10's (byte-length, line-delta) pairs (:func:`bytecode.line_table_310`).
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
    return _BLOCK_CHECKS[bytecode.VERSION](code, break_offset)


def _why_not_in_table_blocks(code: types.CodeType, break_offset: int) -> str | None:
    """3.11 to 3.13: try blocks are the exception table's (``with`` blocks resume)."""
    for start, end in _try_ranges(code):
        if start <= break_offset < end:
            return "the break is inside a try block"
    starts = {inst.offset: inst.opname for inst in bytecode.decode(code)}
    for entry in bytecode.exception_table(code):
        # A cleanup handler (not PUSH_EXC_INFO) covers code that runs while an exception is
        # handled: an except or finally body, whose exception sys.exc_info() would not see in
        # a resume function.
        if starts.get(entry.target) != "PUSH_EXC_INFO" and \
                entry.start <= break_offset < entry.end:
            return "the break is inside an except or finally block"
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


def with_exit_slots(code: types.CodeType, offset: int) -> list[int]:
    """The stack index of the ``__exit__`` of each ``with`` block open at ``offset``."""
    if bytecode.VERSION == (3, 10):
        return [block.level - 1 for block in _block_stacks_310(code).get(offset, ())
                if block.kind == "with"]
    extents: dict[int, tuple[int, int, int]] = {}
    for entry in bytecode.exception_table(code):
        if _is_with_handler(code, entry.target):
            low, high, depth = extents.get(entry.target, (entry.start, entry.end, entry.depth))
            extents[entry.target] = (min(low, entry.start), max(high, entry.end), depth)
    return sorted(depth - 1 for low, high, depth in extents.values() if low <= offset < high)


def local_cells(code: types.CodeType) -> tuple[str, ...]:
    """Cell variables that are not arguments: they get parameters of their own when resuming."""
    return tuple(name for name in code.co_cellvars if name not in code.co_varnames)


@dataclass(frozen=True)
class _Parameters:
    """The resume function's parameters: every old local, then the stack values, then the
    values of the cells that are not arguments."""

    varnames: tuple[str, ...]
    stack: tuple[str, ...]
    cells: tuple[str, ...]  # in local_cells order


def _parameters(code: types.CodeType, key: ResumeKey) -> _Parameters:
    # Numbered after the existing locals: a resume function's own resume functions stay unique.
    first = len(code.co_varnames)
    stack_names = tuple(f"{RESUME_STACK_PREFIX}{first + i}" for i in range(key.stack_depth))
    # Numbered like the stack names: a resume function of a resume function carries the same
    # cells again, next to the old parameters of that name.
    cell_names = tuple(f"{RESUME_CELL_PREFIX}{first + len(stack_names) + i}_{name}"
                       for i, name in enumerate(local_cells(code)))
    return _Parameters(code.co_varnames + stack_names + cell_names, stack_names, cell_names)


def make_resume_code(code: types.CodeType, key: ResumeKey) -> types.CodeType:
    """Build the resume code object for ``key`` (see the module docstring)."""
    params = _parameters(code, key)
    return code.replace(
        co_argcount=len(params.varnames),
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_nlocals=len(params.varnames),
        co_varnames=params.varnames,
        co_flags=code.co_flags & ~(CO_VARARGS | CO_VARKEYWORDS),
        co_name=f"__resume_at_{key.offset}_{code.co_name}",
        # The version's own fields: code, line table, exception table, qualified name...
        **_ASSEMBLERS[bytecode.VERSION](code, key, params),
    )


# -- 3.11 to 3.13: relative jumps and an exception table -----------------------------------------
def _assemble_311(code: types.CodeType, key: ResumeKey, params: _Parameters) -> dict:
    cells = local_cells(code)
    shift = len(params.stack) + len(params.cells)
    prefix = bytearray()
    for name in code.co_cellvars:
        if name in code.co_varnames:  # an argument's cell shares the argument's slot
            prefix += _instruction("MAKE_CELL", code.co_varnames.index(name))
        else:
            slot = len(params.varnames) + cells.index(name)
            prefix += _instruction("MAKE_CELL", slot)
            prefix += _instruction("LOAD_FAST",
                                   params.varnames.index(params.cells[cells.index(name)]))
            prefix += _instruction("STORE_DEREF", slot)
    if code.co_freevars:
        prefix += bytes((dis.opmap["COPY_FREE_VARS"], len(code.co_freevars)))
    prefix += bytes((dis.opmap["RESUME"], 0))
    for name in sorted(key.unbound):  # passed as None; unbound again, as in the original frame
        # An argument's cell is in the argument's slot: emptied, not taken out of the slot.
        prefix += _instruction("DELETE_DEREF" if name in code.co_cellvars else "DELETE_FAST",
                               code.co_varnames.index(name))
    values = iter(range(len(code.co_varnames), len(code.co_varnames) + key.stack_depth))
    for is_null in key.stack_nulls:
        prefix += _instruction("PUSH_NULL", 0) if is_null else \
            _instruction("LOAD_FAST", next(values))
    # The jump ends the prefix, so its target is relative to the start of the copied code.
    prefix += _instruction("JUMP_FORWARD", key.offset // 2)
    body = _shift_deref_args(code.co_code, len(code.co_varnames), shift)
    prefix_units = len(prefix) // 2
    return {
        "co_code": bytes(prefix) + body,
        "co_qualname": f"__resume_at_{key.offset}_{code.co_qualname}",
        "co_exceptiontable": _shift_exception_table(code, prefix_units),
        "co_linetable": _no_location_entries(prefix_units) + code.co_linetable,
        "co_stacksize": code.co_stacksize + len(key.stack_nulls),
    }


def _instruction(opname: str, arg: int, units: int = 1) -> bytes:
    """One instruction with the EXTENDED_ARG prefixes its argument needs, or more (zeros) to
    take ``units`` code units."""
    out = bytearray()
    for shift in range(8 * (max(units, _units_for(arg)) - 1), 0, -8):
        out += bytes((dis.opmap["EXTENDED_ARG"], (arg >> shift) & 0xFF))
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


# -- 3.10: absolute jumps, the block stack in the frame, a line table of pairs ------------------
_ABSOLUTE_JUMPS_310 = frozenset({"JUMP_ABSOLUTE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE",
                                 "JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP",
                                 "JUMP_IF_NOT_EXC_MATCH"})  # argument: the target's code unit
_RELATIVE_JUMPS_310 = frozenset({"JUMP_FORWARD", "FOR_ITER", "SETUP_FINALLY", "SETUP_WITH",
                                 "SETUP_ASYNC_WITH"})  # argument: code units after the next one
_NO_FALLTHROUGH_310 = frozenset({"JUMP_ABSOLUTE", "JUMP_FORWARD", "RETURN_VALUE",
                                 "RAISE_VARARGS", "RERAISE"})
# Block-stack opcodes: the SETUP_* that push a block, and what pops the block on top. A block
# is a with block when its handler calls __exit__ (a resume function sets one up again with
# SETUP_FINALLY), else a try block.
_BLOCK_SETUPS_310 = frozenset({"SETUP_FINALLY", "SETUP_WITH", "SETUP_ASYNC_WITH"})
_WITH_HANDLER_310 = "WITH_EXCEPT_START"
_BLOCK_POPS_310 = frozenset({"POP_BLOCK", "POP_EXCEPT"})
# Why a break inside a block of that kind cannot resume (``with`` blocks are set up again).
_BLOCK_REASONS_310 = {"try": "the break is inside a try block",
                      "except": "the break is inside an exception handler"}


@dataclass(frozen=True)
class _Block:
    """An entry of 3.10's block stack: a try or with block, or an exception handler running."""

    kind: str  # "try", "with" or "except"
    handler: int  # where an exception inside the block goes (its SETUP_* target)
    level: int  # the stack depth the block unwinds to (SETUP_WITH's: the __exit__ included)


def _why_not_in_frame_blocks(code: types.CodeType, break_offset: int) -> str | None:
    """3.10: the blocks open at the break (the prefix sets ``with`` blocks up again)."""
    for block in _block_stacks_310(code).get(break_offset, ()):
        if block.kind in _BLOCK_REASONS_310:
            return _BLOCK_REASONS_310[block.kind]
    return None


def _block_stacks_310(code: types.CodeType) -> dict[int, tuple[_Block, ...]]:
    """The block stack at each instruction reachable from the start, raising included (the
    compiler gives every instruction one block stack and one stack depth)."""
    raw = list(dis.get_instructions(code))
    index_of = {inst.offset: i for i, inst in enumerate(raw)}
    stacks: dict[int, tuple[_Block, ...]] = {}
    todo: list[tuple[int, int, tuple[_Block, ...]]] = [(0, 0, ())]
    while todo:
        i, depth, blocks = todo.pop()
        if i >= len(raw) or raw[i].offset in stacks:
            continue
        inst = raw[i]
        stacks[inst.offset] = after = blocks
        if inst.opname in _BLOCK_SETUPS_310:  # SETUP_WITH's __exit__ replaced the manager
            handler = raw[index_of[inst.argval]].opname
            kind = "with" if handler == _WITH_HANDLER_310 else "try"
            after = (*blocks, _Block(kind, inst.argval, depth))
            todo.append((index_of[inst.argval], depth + _stack_effect(inst, jump=True),
                         (*blocks, _Block("except", inst.argval, depth))))
        elif inst.opname in _BLOCK_POPS_310:
            after = blocks[:-1]
        elif inst.opname in _ABSOLUTE_JUMPS_310 | _RELATIVE_JUMPS_310:
            todo.append((index_of[inst.argval], depth + _stack_effect(inst, jump=True), blocks))
        if inst.opname not in _NO_FALLTHROUGH_310:
            todo.append((i + 1, depth + _stack_effect(inst, jump=False), after))
    return stacks


def _stack_effect(inst: dis.Instruction, jump: bool) -> int:
    arg = inst.arg if inst.opcode >= dis.HAVE_ARGUMENT else None
    return dis.stack_effect(inst.opcode, arg, jump=jump)


@dataclass(frozen=True)
class _Op:
    """One instruction of 3.10 wordcode with the EXTENDED_ARG prefixes of its argument."""

    offset: int  # of its first code unit (jumps target that one)
    units: int  # code units, the EXTENDED_ARGs included
    opcode: int
    arg: int
    target: int | None  # a jump's target offset
    absolute: bool  # the argument is the target's code unit (else: units past the next one)


# Copied with the 3.10 instruction that does the same without a NULL on the stack (the same
# argument: LOAD_ATTR's name index, CALL_FUNCTION's argument count). eager_callees's routed
# copies use it too.
WITHOUT_NULL_310 = {"LOAD_METHOD": "LOAD_ATTR", "CALL_METHOD": "CALL_FUNCTION"}


def _ops_310(co_code: bytes) -> list[_Op]:
    ops, start, arg = [], 0, 0
    for i in range(0, len(co_code), 2):
        opcode, arg = co_code[i], arg << 8 | co_code[i + 1]
        if opcode == dis.opmap["EXTENDED_ARG"]:
            continue
        name = dis.opname[opcode]
        if name in WITHOUT_NULL_310:
            name = WITHOUT_NULL_310[name]
            opcode = dis.opmap[name]
        target = 2 * arg if name in _ABSOLUTE_JUMPS_310 else \
            i + 2 + 2 * arg if name in _RELATIVE_JUMPS_310 else None
        ops.append(_Op(start, (i - start) // 2 + 1, opcode, arg, target,
                       name in _ABSOLUTE_JUMPS_310))
        start, arg = i + 2, 0
    return ops


class _Relocation:
    """The copied code with every jump retargeted, when it starts ``base`` code units into the
    new code: a jump whose argument outgrows its EXTENDED_ARGs gets one more, which moves what
    follows, so the arguments are computed again until no instruction grows."""

    def __init__(self, ops: list[_Op], base: int) -> None:
        self.ops = ops
        self._unit_of = {op.offset + 2 * u: (k, u) for k, op in enumerate(ops)
                         for u in range(op.units)}
        self.units = [op.units for op in ops]
        while True:
            self.starts = [0]
            for units in self.units[:-1]:
                self.starts.append(self.starts[-1] + 2 * units)
            self.args = [self._arg(k, base) for k in range(len(ops))]
            grown = [max(units, _units_for(arg)) for units, arg in zip(self.units, self.args)]
            if grown == self.units:
                break
            self.units = grown

    def offset(self, old: int) -> int:
        """Where the old offset ``old`` is, from the start of the copied code."""
        k, u = self._unit_of[old]
        return self.starts[k] + (0 if u == 0 else 2 * (u + self.units[k] - self.ops[k].units))

    def _arg(self, k: int, base: int) -> int:
        op = self.ops[k]
        if op.target is None:
            return op.arg
        target = self.offset(op.target)
        if op.absolute:
            return base + target // 2
        return (target - self.starts[k] - 2 * self.units[k]) // 2

    def code(self) -> bytes:
        return b"".join(_instruction(dis.opname[op.opcode], arg, units)
                        for op, units, arg in zip(self.ops, self.units, self.args))

    def origins(self) -> list[int]:
        """For each new code unit, the old one whose line it takes (an added EXTENDED_ARG: its
        instruction's first)."""
        out = []
        for op, units in zip(self.ops, self.units):
            added = units - op.units
            out += [op.offset + 2 * max(0, u - added) for u in range(units)]
        return out


def _units_for(arg: int) -> int:
    """Code units an instruction with this argument takes (EXTENDED_ARGs included)."""
    return 1 + (arg > 0xFF) + (arg > 0xFFFF) + (arg > 0xFFFFFF)


def _assemble_310(code: types.CodeType, key: ResumeKey, params: _Parameters) -> dict:
    blocks = _block_stacks_310(code).get(key.offset, ())
    if any(block.kind != "with" for block in blocks):
        raise ValueError(f"offset {key.offset} is inside a try block or exception handler")
    ops = _ops_310(code.co_code)
    base = 0  # the prefix's code units: the copied code's absolute jumps depend on it
    while True:
        moved = _Relocation(ops, base)
        prefix = _prefix_310(code, key, params, blocks, base, moved)
        if len(prefix) == 2 * base:  # only grows with ``base``: reached from below
            break
        base = len(prefix) // 2
    old_lines = bytecode.unit_lines(code)
    lines = [None] * base + [old_lines[offset // 2] for offset in moved.origins()]
    return {
        "co_code": prefix + moved.code(),
        "co_linetable": bytecode.line_table_310(lines, code.co_firstlineno),
        "co_stacksize": code.co_stacksize + len(key.stack_nulls),
    }


def _prefix_310(code: types.CodeType, key: ResumeKey, params: _Parameters,
                blocks: tuple[_Block, ...], base: int, moved: _Relocation) -> bytes:
    """The prefix, for copied code that starts ``base`` code units into the new code."""
    out = bytearray()
    for name, parameter in zip(local_cells(code), params.cells):
        out += _instruction("LOAD_FAST", params.varnames.index(parameter))
        out += _instruction("STORE_DEREF", code.co_cellvars.index(name))
    for name in sorted(key.unbound):  # passed as None; unbound again, as in the original frame
        out += _instruction("DELETE_DEREF", code.co_cellvars.index(name)) \
            if name in code.co_cellvars else \
            _instruction("DELETE_FAST", code.co_varnames.index(name))
    values = iter(params.varnames.index(name) for name in params.stack)
    for depth in range(len(key.stack_nulls) + 1):  # the original's depth: NULLs count
        for block in blocks:
            if block.level == depth:  # the with block's __exit__ is on the stack now
                out += _jump_310(len(out), "SETUP_FINALLY", 2 * base + moved.offset(block.handler))
        if depth < len(key.stack_nulls) and not key.stack_nulls[depth]:
            out += _instruction("LOAD_FAST", next(values))  # a NULL: none (WITHOUT_NULL_310)
    if any(block.level > len(key.stack_nulls) for block in blocks):
        raise ValueError("a with block above the stack at the break")
    out += _jump_310(len(out), "JUMP_FORWARD", 2 * base + moved.offset(key.offset))
    return bytes(out)


def _jump_310(at: int, opname: str, target: int) -> bytes:
    """A relative jump at offset ``at`` to offset ``target`` (3.10 counts code units from the
    end of the jump, which its own EXTENDED_ARGs move)."""
    units = 1
    while _units_for((target - at - 2 * units) // 2) > units:
        units += 1
    return _instruction(opname, (target - at - 2 * units) // 2, units)


# How each version makes the fields of a resume code object that differ between versions.
_ASSEMBLERS: dict[tuple[int, int], Callable[[types.CodeType, ResumeKey, _Parameters], dict]] = {
    (3, 10): _assemble_310,
    (3, 11): _assemble_311,
    (3, 12): _assemble_311,
    (3, 13): _assemble_311,
}
# Which blocks a break may be inside: the exception table's (3.11 on) or the frame's (3.10).
_BLOCK_CHECKS: dict[tuple[int, int], Callable[[types.CodeType, int], str | None]] = {
    (3, 10): _why_not_in_frame_blocks,
    (3, 11): _why_not_in_table_blocks,
    (3, 12): _why_not_in_table_blocks,
    (3, 13): _why_not_in_table_blocks,
}


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
    if INTERNALS_OBSERVERS & set(code.co_names):
        return "the frame observes its objects' lifetimes or memory (weak references, gc, " \
            "getsizeof), which the run function and the replayed writes would change"
    if inst.opname not in SPLITTABLE:
        return f"{inst.opname} cannot run on its own between two graphs"
    if inst.opname.startswith("POP_JUMP") and \
            getattr(error, "break_type", "") not in VALUE_CONDITIONS:
        return "a jump that failed for another reason than a tensor condition"
    return why_not_resumable(code, offset)


# Names (globals or attributes) of a frame that watches its objects' lifetimes or memory:
# split, its objects would live on in the run function's temporaries while the resume function
# runs, and a container's writes replayed after the graph lay it out anew.
INTERNALS_OBSERVERS = frozenset({
    "weakref",  # weakref.ref / proxy / finalize: a dead object must be dead
    "getrefcount",  # sys.getrefcount counts the run function's references too
    "gc_collect",  # test.support.gc_collect(), then a check that an object died
    "getsizeof",  # sys.getsizeof: a dict's table after popitem() replayed differs
})

# Break types of a jump whose condition the graph computes and the run function then tests:
# a tensor's truth, or an unbacked symbol's (``if x.item() > 0`` under capture_scalar_outputs).
VALUE_CONDITIONS = frozenset({"data_dependent_branch", "data_dependent_guard"})

# Instructions at which a frame can be split: run eagerly, then resume after them.
SPLITTABLE = frozenset({
    "CALL",  # a call graphlift cannot trace: it runs eagerly (user functions compiled on their own)
    "CALL_FUNCTION_EX",  # the same, with *args / **kwargs
    "CALL_FUNCTION",  # 3.10's call without a NULL (its CALL_METHOD decodes as CALL)
    "CALL_FUNCTION_KW",  # 3.10's, with the keyword names on the stack
    "POP_JUMP_FORWARD_IF_TRUE",  # a branch on a tensor's value: the run function branches
    "POP_JUMP_FORWARD_IF_FALSE",
    "JUMP_IF_TRUE_OR_POP",  # `a or b` / `a and b` on a tensor's value
    "JUMP_IF_FALSE_OR_POP",
})
