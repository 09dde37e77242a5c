"""The instruction layer: decoding CPython bytecode for the translator, one version at a time.

graphlift supports CPython 3.11, 3.12 and 3.13. Each version's bytecode is decoded into one
normalized form whose opcode names are 3.11's (the canonical form), so opcode handlers never
branch on the version: 3.12's ``POP_JUMP_IF_TRUE`` (which only jumps forward) becomes
``POP_JUMP_FORWARD_IF_TRUE``, ``LOAD_ATTR`` with its method bit becomes
``LOAD_METHOD``, each ``CALL_INTRINSIC_1`` function gets the name of the 3.11 opcode it replaced,
jumps over ``END_FOR`` / ``END_SEND`` land where the interpreter lands, and 3.13's
``LOAD_CONST kwnames; CALL_KW`` pair becomes 3.11's ``KW_NAMES; CALL``. Opcodes new in a
version that have no 3.11 counterpart keep their own names (``RETURN_CONST``, ``BINARY_SLICE``,
``LOAD_FAST_AND_CLEAR``, 3.13's ``LOAD_FAST_LOAD_FAST``, ``TO_BOOL``, ``FORMAT_SIMPLE``...) and
get handlers of their own. The tables below are the whole difference; :func:`canonical_names`
tells the translator's import-time coverage check what each opcode of the running CPython can
decode to.

One difference is in the stack, not in an opcode: where ``CALL`` finds the NULL of a call
without ``self``. 3.11 and 3.12 push ``NULL, callable``, 3.13 ``callable, NULL`` (a method is
``function, self`` in all three). :func:`call_slots` gives the running version's order to the
handlers that push a NULL; :func:`call_target` reads either order, so ``CALL`` needs no version.
"""

from __future__ import annotations

import dis
import sys
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SUPPORTED_VERSIONS = ((3, 11), (3, 12), (3, 13))
VERSION: tuple[int, int] = tuple(sys.version_info[:2])


def check_python_version(version: tuple[int, int] = VERSION) -> None:
    """Raise with a clear message on a CPython whose bytecode graphlift does not know."""
    if tuple(version) not in SUPPORTED_VERSIONS:
        supported = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_VERSIONS)
        raise ImportError(
            f"graphlift interprets CPython bytecode and supports Python {supported} only; "
            f"this is Python {version[0]}.{version[1]}"
        )


# -- normalization tables (3.12 and 3.13 -> the canonical 3.11 names) -------------------------
# Opcodes renamed one to one.
_RENAMED_312 = {
    "LOAD_FAST_CHECK": "LOAD_FAST",  # LOAD_FAST that may find the local unbound
    "LOAD_FROM_DICT_OR_DEREF": "LOAD_CLASSDEREF",  # a free variable read in a class body
    "LOAD_FROM_DICT_OR_GLOBALS": "LOAD_NAME",  # a global read in a class body
    # 3.12's conditional jumps only go forward (loops end with JUMP_BACKWARD).
    **{f"POP_JUMP_IF_{stem}": f"POP_JUMP_FORWARD_IF_{stem}"
       for stem in ("TRUE", "FALSE", "NONE", "NOT_NONE")},
}
_RENAMED: dict[tuple[int, int], dict[str, str]] = {
    (3, 11): {},
    (3, 12): _RENAMED_312,
    # 3.13's END_FOR pops one value (the POP_TOP after it pops the iterator); FOR_ITER's exit
    # jumps past both, so it is only reached by falling through.
    (3, 13): {**_RENAMED_312, "END_FOR": "POP_TOP"},
}

# CALL_INTRINSIC_1/2 name their function by argument; most replaced a 3.11 opcode.
_INTRINSIC_1 = ("INTRINSIC_1_INVALID", "PRINT_EXPR", "IMPORT_STAR", "STOPITERATION_ERROR",
                "ASYNC_GEN_WRAP", "UNARY_POSITIVE", "LIST_TO_TUPLE", "INTRINSIC_TYPEVAR",
                "INTRINSIC_PARAMSPEC", "INTRINSIC_TYPEVARTUPLE", "INTRINSIC_SUBSCRIPT_GENERIC",
                "INTRINSIC_TYPEALIAS")
_INTRINSIC_2 = ("INTRINSIC_2_INVALID", "PREP_RERAISE_STAR", "INTRINSIC_TYPEVAR_WITH_BOUND",
                "INTRINSIC_TYPEVAR_WITH_CONSTRAINTS", "INTRINSIC_SET_FUNCTION_TYPE_PARAMS")
_INTRINSIC_2_313 = (*_INTRINSIC_2, "INTRINSIC_SET_TYPEPARAM_DEFAULT")  # PEP 696


def _by_low_bit(plain: str, method: str) -> tuple[Callable[[dis.Instruction], str],
                                                   tuple[str, ...]]:
    """The argument's low bit asks for a method load (NULL/self below the attribute)."""
    return (lambda inst: method if inst.arg & 1 else plain), (plain, method)


def _by_table(table: tuple[str, ...]) -> tuple[Callable[[dis.Instruction], str],
                                               tuple[str, ...]]:
    return (lambda inst: table[inst.arg]), table


# Opcodes whose canonical name depends on the argument: (decoder, every name it gives).
_BY_ARGUMENT: dict[tuple[int, int], dict[str, tuple[Callable[[dis.Instruction], str],
                                                    tuple[str, ...]]]] = {
    (3, 11): {},
    (3, 12): {
        "LOAD_ATTR": _by_low_bit("LOAD_ATTR", "LOAD_METHOD"),
        "LOAD_SUPER_ATTR": _by_low_bit("LOAD_SUPER_ATTR", "LOAD_SUPER_METHOD"),
        "CALL_INTRINSIC_1": _by_table(_INTRINSIC_1),
        "CALL_INTRINSIC_2": _by_table(_INTRINSIC_2),
    },
    (3, 13): {
        "LOAD_ATTR": _by_low_bit("LOAD_ATTR", "LOAD_METHOD"),
        "LOAD_SUPER_ATTR": _by_low_bit("LOAD_SUPER_ATTR", "LOAD_SUPER_METHOD"),
        "CALL_INTRINSIC_1": _by_table(_INTRINSIC_1),
        "CALL_INTRINSIC_2": _by_table(_INTRINSIC_2_313),
        # Decoded as a pair with the LOAD_CONST of its names before it (see _decode); alone,
        # it keeps its name (its handler takes the names from the stack).
        "CALL_KW": ((lambda inst: "CALL_KW"), ("CALL_KW", "CALL")),
        "LOAD_CONST": ((lambda inst: "LOAD_CONST"), ("LOAD_CONST", "KW_NAMES")),
    },
}

# Jumps whose canonical target is after the instructions they point at in 3.12 and 3.13
# (FOR_ITER's exit skips END_FOR, and 3.13's POP_TOP after it; the canonical SEND pops the
# receiver that END_SEND pops).
_SKIPS_END: dict[tuple[int, int], dict[str, tuple[str, ...]]] = {
    (3, 11): {},
    (3, 12): {"FOR_ITER": ("END_FOR",), "SEND": ("END_SEND",)},
    (3, 13): {"FOR_ITER": ("END_FOR", "POP_TOP"), "SEND": ("END_SEND",)},
}

# Opcodes a version added that keep their own names (handled or refused under them).
_ADDED: dict[tuple[int, int], frozenset[str]] = {
    (3, 11): frozenset(),
    (3, 12): frozenset({"BINARY_SLICE", "STORE_SLICE", "END_FOR", "END_SEND", "CLEANUP_THROW",
                        "LOAD_FAST_AND_CLEAR", "LOAD_LOCALS", "LOAD_SUPER_ATTR",
                        "RETURN_CONST"}),
}
_ADDED[(3, 13)] = _ADDED[(3, 12)] - {"END_FOR"} | {
    "LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST", "CALL_KW", "TO_BOOL",
    "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE", "SET_FUNCTION_ATTRIBUTE"}

# Opcodes that never appear in a code object's co_code (instrumentation is removed from it,
# the others exist only inside the interpreter), with the reason.
NEVER_DECODED: dict[str, str] = {
    "CACHE": "inline cache entries are skipped by the decoder",
    "INTERPRETER_EXIT": "only in the interpreter's own entry frame",
    "RESERVED": "a placeholder number, no instruction",
    "ENTER_EXECUTOR": "only in code the tier-2 optimizer rewrote in place",
    "EXIT_INIT_CHECK": "only in the interpreter's shim frame of a specialized class call",
}
_INSTRUMENTED = "instrumentation (sys.monitoring) is stripped from co_code"


def all_opnames() -> set[str]:
    """Every real opcode name of the running CPython (pseudo-opcodes excluded)."""
    return {name for name, number in dis.opmap.items()
            if not name.startswith("<") and number < 256}


def never_decoded(opname: str) -> str | None:
    """Why an opcode of this CPython never reaches the translator (None: it can)."""
    if opname.startswith("INSTRUMENTED_"):
        return _INSTRUMENTED
    return NEVER_DECODED.get(opname)


def canonical_names(opname: str, version: tuple[int, int] = VERSION) -> tuple[str, ...]:
    """The canonical names an opcode of ``version`` can decode to."""
    if opname in _BY_ARGUMENT[version]:
        return _BY_ARGUMENT[version][opname][1]
    return (_RENAMED[version].get(opname, opname),)


def decoded_elsewhere() -> set[str]:
    """Canonical names some supported version decodes to (for the coverage check's test that
    a refused name is no leftover)."""
    names = {name for table in _RENAMED.values() for name in table.values()}
    names.update(*_ADDED.values())
    for table in _BY_ARGUMENT.values():
        for _, produced in table.values():
            names.update(produced)
    return names


def _canonical(inst: dis.Instruction) -> str:
    by_argument = _BY_ARGUMENT.get(VERSION, {}).get(inst.opname)
    if by_argument is not None:
        return by_argument[0](inst)
    return _RENAMED.get(VERSION, {}).get(inst.opname, inst.opname)


@dataclass(frozen=True)
class Instruction:
    """One decoded instruction; ``argval`` is resolved (names, constants, jump targets)."""

    opname: str
    arg: int | None
    argval: Any
    offset: int
    lineno: int | None  # the line of the last instruction that had one, when this has none
    is_jump_target: bool
    # Whether the line table gives this instruction a line of its own (a resume function's
    # prologue has none: it loads the stack the break left).
    located: bool = True

    def __str__(self) -> str:
        # The columns of dis: offset, opcode name, argument, resolved value.
        arg = "" if self.arg is None else str(self.arg)
        return f"{self.offset:>6} {self.opname:<28} {arg:>4} ({self.argval!r})"


def decode(code: types.CodeType) -> tuple[Instruction, ...]:
    """The code's instructions without CACHE entries; jump argvals are target offsets.

    Decoded once per code object: the translator, the break analysis and resume functions all
    read the same instructions, often several times per compile.
    """
    instructions = _decoded.get(code)
    if instructions is None:
        instructions = _decoded[code] = tuple(_decode(code))
    return instructions


def _decode(code: types.CodeType) -> list[Instruction]:
    raw = list(dis.get_instructions(code))
    index_of = {inst.offset: i for i, inst in enumerate(raw)}
    skips = _SKIPS_END.get(VERSION, {})
    targets = set()
    result = []
    lineno = code.co_firstlineno
    cells = frozenset(code.co_cellvars + code.co_freevars)
    for inst in raw:
        located = inst.positions is not None and inst.positions.lineno is not None
        if located:
            lineno = inst.positions.lineno
        argval = inst.argval
        skipped = skips.get(inst.opname, ())
        if skipped and _opnames(raw, index_of[argval], len(skipped)) == skipped:
            # Where the canonical form goes on: FOR_ITER's exit jumps past END_FOR (and 3.13's
            # POP_TOP); the canonical SEND pops the receiver itself, which END_SEND would pop.
            argval = raw[index_of[argval] + len(skipped)].offset
            targets.add(argval)
        opname = _canonical(inst)
        if inst.opname == "LOAD_FAST" and inst.argval in cells:
            # 3.13 loads a cell itself (to build a closure) with LOAD_FAST of its slot; 3.11
            # and 3.12 with LOAD_CLOSURE, and never LOAD_FAST a cell or free variable.
            opname = "LOAD_CLOSURE"
        if opname == "CALL_KW" and result and result[-1].opname == "LOAD_CONST" and \
                isinstance(result[-1].argval, tuple) and not inst.is_jump_target:
            # 3.13 loads the keyword names as a constant right before CALL_KW: 3.11's KW_NAMES
            # (whose argument indexes co_consts too) and CALL.
            names = result.pop()
            result.append(Instruction("KW_NAMES", names.arg, names.argval, names.offset,
                                      names.lineno, names.is_jump_target, names.located))
            opname = "CALL"
        arg = inst.arg
        if opname == "RESUME":
            # The low two bits say where the frame resumes (0 start, 1 yield, 2 yield from,
            # 3 await); 3.13 adds bit 2 for a yield inside an except block, a hint to the
            # interpreter only.
            arg = argval = inst.arg & 3
        result.append(Instruction(opname, arg, argval, inst.offset, lineno,
                                  inst.is_jump_target, located))
    return [inst if inst.offset not in targets else
            Instruction(inst.opname, inst.arg, inst.argval, inst.offset, inst.lineno, True,
                        inst.located)
            for inst in result]


def _opnames(raw: list, start: int, count: int) -> tuple[str, ...]:
    return tuple(inst.opname for inst in raw[start:start + count])


def kw_names(code: types.CodeType, inst: Instruction) -> tuple[str, ...]:
    """KW_NAMES' argument indexes co_consts (3.11, 3.12, and 3.13's LOAD_CONST before
    CALL_KW)."""
    return code.co_consts[inst.arg]


def pushes_null(inst: Instruction) -> bool:
    """LOAD_GLOBAL's low bit asks for a NULL beside the value (see :func:`call_slots`)."""
    return bool(inst.arg & 1)


# 3.13's CALL expects ``callable, self_or_null``; 3.11 and 3.12's ``NULL_or_method,
# callable_or_self``. For a call without self the NULL is above the callable in 3.13 only.
NULL_ABOVE_CALLABLE = VERSION >= (3, 13)


def call_slots(callable_: Any, null: Any) -> tuple[Any, Any]:
    """A callable without self and its NULL, in the order the running CPython's CALL expects
    them on the stack (bottom first)."""
    return (callable_, null) if NULL_ABOVE_CALLABLE else (null, callable_)


def call_target(lower: Any, upper: Any, is_null: Callable[[Any], bool]) -> tuple[Any, Any]:
    """The two stack slots below a call's arguments as (callable, self or None), in any
    supported version's order: a NULL on either side, or a method's function below its self."""
    if is_null(lower):
        return upper, None
    if is_null(upper):
        return lower, None
    return lower, upper


def dump(code: types.CodeType) -> str:
    """The code's instructions in dis's columns, for the ``bytecode`` log artifact."""
    return "\n".join(str(inst) for inst in decode(code))


def exception_handler(code: types.CodeType, offset: int) -> Any:
    """The exception-table entry covering ``offset`` (start, end, target, depth, lasti); the
    table's format is the same in 3.11, 3.12 and 3.13."""
    for entry in exception_table(code):
        if entry.start <= offset < entry.end:
            return entry
    return None


def user_handler(code: types.CodeType, offset: int) -> Any:
    """The entry covering ``offset`` that belongs to a try or with block of the source.

    3.12 also covers a whole generator body with a handler of its own, which turns an escaping
    StopIteration into RuntimeError (3.11 does it in C): that one is no block of the program
    (None). And 3.12's ``yield from`` catches what is thrown into it with a ``CLEANUP_THROW``
    handler of its own, which passes anything but StopIteration on from its own offset: the
    block around the ``yield from`` is the entry covering that offset.
    """
    entry = exception_handler(code, offset)
    while entry is not None:
        target = next(inst for inst in decode(code) if inst.offset == entry.target)
        if target.opname == "STOPITERATION_ERROR":
            return None
        if target.opname != "CLEANUP_THROW":
            return entry
        entry = exception_handler(code, target.offset)
    return None


# Instructions after which execution never goes on to the next one.
_NO_FALLTHROUGH = frozenset({"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                             "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"})


def normal_flow(code: types.CodeType) -> frozenset[int]:
    """Offsets reachable from the start without raising: all but the exception handlers.

    3.12 places handlers after the function's last return, and a handler that goes on after
    its ``try`` or ``with`` block jumps backward: such a jump is no loop.
    """
    instructions = decode(code)
    index_of = {inst.offset: i for i, inst in enumerate(instructions)}
    seen: set[int] = set()
    todo = [0]
    while todo:
        i = todo.pop()
        if i >= len(instructions) or instructions[i].offset in seen:
            continue
        inst = instructions[i]
        seen.add(inst.offset)
        if inst.opname not in _NO_FALLTHROUGH:
            todo.append(i + 1)
        if isinstance(inst.argval, int) and inst.opname in _JUMPS and inst.argval in index_of:
            todo.append(index_of[inst.argval])
    return frozenset(seen)


# Every jump opcode's canonical name (their argvals are target offsets).
_JUMPS = frozenset({"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "FOR_ITER",
                    "SEND", "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP",
                    *(f"POP_JUMP_{way}_IF_{stem}" for way in ("FORWARD", "BACKWARD")
                      for stem in ("TRUE", "FALSE", "NONE", "NOT_NONE"))})


# Per code object, dropped with it: decoded instructions and parsed exception tables.
_decoded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def exception_table(code: types.CodeType) -> list:
    """The parsed exception table (cached per code object)."""
    table = _tables.get(code)
    if table is None:
        table = _tables[code] = dis._parse_exception_table(code)
    return table


# 3.11 to 3.13 location table (Objects/locations.md): an entry's first byte is 0x80 | code << 3 |
# (code units - 1), at most 8 units; code 13 has no columns, then a signed varint line delta.
_NO_COLUMNS = 13


def at_line(code: types.CodeType, filename: str, name: str, line: int) -> types.CodeType:
    """``code`` with every instruction placed at ``filename:line`` in function ``name``.

    Generated code that runs on behalf of a user's frame gets the user's location, so that a
    traceback through it shows the user's line (and Python folds a recursion's repeated lines).
    """
    units = len(code.co_code) // 2
    if VERSION == (3, 10):
        table = line_table_310([line] * units, line)
    else:
        table = bytearray()
        while units:
            chunk = min(units, 8)
            table += bytes((0x80 | _NO_COLUMNS << 3 | (chunk - 1), 0))  # delta 0: the first line
            units -= chunk
    return code.replace(co_filename=filename, co_name=name, co_firstlineno=line,
                        co_linetable=bytes(table))


# 3.10's line table (Objects/lnotab_notes.txt of 3.10): pairs of (bytes covered, at most 254;
# signed line delta from the last line, -128 for "no line", which keeps the last line).
_NO_LINE_310, _MAX_BYTES_310, _MAX_DELTA_310 = -128, 254, 127


def line_table_310(lines: list[int | None], first_line: int) -> bytes:
    """A 3.10 ``co_linetable`` placing each code unit at its line in ``lines`` (None: none).

    A line delta beyond a signed byte goes first in pairs that cover no bytes.
    """
    out = bytearray()
    last, i = first_line, 0
    while i < len(lines):
        run = 1
        while i + run < len(lines) and lines[i + run] == lines[i]:
            run += 1
        size, delta = 2 * run, _NO_LINE_310 if lines[i] is None else lines[i] - last
        while delta != _NO_LINE_310 and abs(delta) > _MAX_DELTA_310:
            step = _MAX_DELTA_310 if delta > 0 else -_MAX_DELTA_310
            out += bytes((0, step & 0xFF))
            delta -= step
        while size:
            chunk = min(size, _MAX_BYTES_310)
            out += bytes((chunk, delta & 0xFF))
            size -= chunk
            delta = delta if delta == _NO_LINE_310 else 0  # the rest: the same line
        if lines[i] is not None:
            last = lines[i]
        i += run
    return bytes(out)
