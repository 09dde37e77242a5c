"""The instruction layer: decoding CPython bytecode for the translator, one version at a time.

graphlift supports CPython 3.10 (partly, see below), 3.11, 3.12 and 3.13. Each version's
bytecode is decoded into one normalized form whose opcode names are 3.11's (the canonical form),
so opcode handlers never branch on the version: 3.12's ``POP_JUMP_IF_TRUE`` (which only jumps
forward) becomes ``POP_JUMP_FORWARD_IF_TRUE``, ``LOAD_ATTR`` with its method bit becomes
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

3.10 (partial: its translation; resume functions and generated code are done elsewhere) decodes
``BINARY_*``/``INPLACE_*`` to ``BINARY_OP`` with 3.11's argument, ``DUP_TOP``/``ROT_TWO`` to
``COPY 1``/``SWAP 2``, ``ROT_THREE``/``ROT_FOUR`` to ``ROT_N``, ``JUMP_ABSOLUTE`` and its
``POP_JUMP_IF_*`` to the directed 3.11 jumps, ``CALL_METHOD`` to ``CALL`` and ``SETUP_WITH`` to
``BEFORE_WITH``. Its calls without a NULL (``CALL_FUNCTION``, ``CALL_FUNCTION_KW``), its block
stack (``SETUP_FINALLY``, ``POP_BLOCK``), ``JUMP_IF_NOT_EXC_MATCH``, ``GEN_START``,
``YIELD_FROM``, ``DUP_TOP_TWO`` and ``COPY_DICT_WITHOUT_KEYS`` keep their names; opcodes whose
3.11 namesake takes another stack are renamed ``<name>_310`` (``RERAISE``, ``POP_EXCEPT``,
``WITH_EXCEPT_START``, ``MAKE_FUNCTION``, ``MATCH_KEYS``, ``MATCH_CLASS``). 3.10 has no
exception table: :func:`exception_table` derives one from a walk of the block stack, and
:data:`HANDLER_ENTRY` says what a handler finds on the stack (3.10: two exception triples).
Refused on 3.10: ``SETUP_ASYNC_WITH`` (async code, as on every version).
"""

from __future__ import annotations

import dis
import sys
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SUPPORTED_VERSIONS = ((3, 10), (3, 11), (3, 12), (3, 13))
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
# 3.10's opcodes whose 3.11 namesakes take a different stack: the exception's (type, value,
# traceback) triples of 3.10's handlers (see HANDLER_ENTRY), MAKE_FUNCTION's qualified name,
# the match results. They get handlers of their own, named ``<3.11 name>_310``.
_RENAMED_310 = {
    "RERAISE": "RERAISE_310",  # pops the raised triple
    "POP_EXCEPT": "POP_EXCEPT_310",  # pops the previous exception's triple
    "WITH_EXCEPT_START": "WITH_EXCEPT_START_310",  # __exit__ below two triples
    "MAKE_FUNCTION": "MAKE_FUNCTION_310",  # the qualified name above the code
    "SETUP_WITH": "BEFORE_WITH",  # and a block, which is in the derived exception table
    "CALL_METHOD": "CALL",  # after LOAD_METHOD: the same stack as 3.11's CALL
    "MATCH_KEYS": "MATCH_KEYS_310",  # pushes whether it matched too
    "MATCH_CLASS": "MATCH_CLASS_310",  # likewise, and keeps the subject where it fails
}
_RENAMED: dict[tuple[int, int], dict[str, str]] = {
    (3, 10): _RENAMED_310,
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
    (3, 10): {},
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

# 3.10's opcodes that are a 3.11 opcode with an argument: (decoder giving the canonical name and
# argument, every name it gives). 3.10's jumps have absolute targets or go one way; the canonical
# jump says its direction (dis gives argval as the target offset in every version).
_NB_OPS_310 = ("ADD", "AND", "FLOOR_DIVIDE", "LSHIFT", "MATRIX_MULTIPLY", "MULTIPLY", "MODULO",
               "OR", "POWER", "RSHIFT", "SUBTRACT", "TRUE_DIVIDE", "XOR")  # 3.11's NB_* order


def _fixed(name: str, arg: int) -> tuple[Callable[[dis.Instruction], tuple[str, int]],
                                          tuple[str, ...]]:
    return (lambda inst: (name, arg)), (name,)


def _by_direction(forward: str, backward: str) -> tuple[
        Callable[[dis.Instruction], tuple[str, int]], tuple[str, ...]]:
    return (lambda inst: (forward if inst.argval > inst.offset else backward, inst.arg)), \
        (forward, backward)


_REWRITTEN: dict[tuple[int, int], dict[str, tuple[Callable[[dis.Instruction], tuple[str, int]],
                                                  tuple[str, ...]]]] = {
    (3, 10): {
        **{f"BINARY_{op}": _fixed("BINARY_OP", i) for i, op in enumerate(_NB_OPS_310)},
        **{f"INPLACE_{op}": _fixed("BINARY_OP", 13 + i) for i, op in enumerate(_NB_OPS_310)},
        "DUP_TOP": _fixed("COPY", 1),
        "ROT_TWO": _fixed("SWAP", 2),
        "ROT_THREE": _fixed("ROT_N", 3),
        "ROT_FOUR": _fixed("ROT_N", 4),
        "JUMP_ABSOLUTE": _by_direction("JUMP_FORWARD", "JUMP_BACKWARD"),
        **{f"POP_JUMP_IF_{stem}": _by_direction(f"POP_JUMP_FORWARD_IF_{stem}",
                                                f"POP_JUMP_BACKWARD_IF_{stem}")
           for stem in ("TRUE", "FALSE")},
    },
}

# Jumps whose canonical target is after the instructions they point at in 3.12 and 3.13
# (FOR_ITER's exit skips END_FOR, and 3.13's POP_TOP after it; the canonical SEND pops the
# receiver that END_SEND pops).
_SKIPS_END: dict[tuple[int, int], dict[str, tuple[str, ...]]] = {
    (3, 10): {},
    (3, 11): {},
    (3, 12): {"FOR_ITER": ("END_FOR",), "SEND": ("END_SEND",)},
    (3, 13): {"FOR_ITER": ("END_FOR", "POP_TOP"), "SEND": ("END_SEND",)},
}

# Opcodes a version added that keep their own names (handled or refused under them).
_ADDED: dict[tuple[int, int], frozenset[str]] = {
    # 3.10's opcodes without a 3.11 form: calls without a NULL, its block stack, its yield from.
    (3, 10): frozenset({"CALL_FUNCTION", "CALL_FUNCTION_KW", "COPY_DICT_WITHOUT_KEYS",
                        "DUP_TOP_TWO", "GEN_START", "JUMP_IF_NOT_EXC_MATCH", "POP_BLOCK",
                        "ROT_N", "SETUP_ASYNC_WITH", "SETUP_FINALLY", "YIELD_FROM"}),
    # The canonical names themselves, where 3.11 added them (for the coverage check on 3.10).
    (3, 11): frozenset({
        "ASYNC_GEN_WRAP", "BEFORE_WITH", "BINARY_OP", "CALL", "CHECK_EG_MATCH", "CHECK_EXC_MATCH",
        "COPY", "COPY_FREE_VARS", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "KW_NAMES",
        "MAKE_CELL", "PRECALL", "PREP_RERAISE_STAR", "PUSH_EXC_INFO", "PUSH_NULL", "RESUME",
        "RETURN_GENERATOR", "SEND", "SWAP",
        *(f"POP_JUMP_{way}_IF_{stem}" for way in ("FORWARD", "BACKWARD")
          for stem in ("TRUE", "FALSE", "NONE", "NOT_NONE"))}),
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
    if opname in _REWRITTEN.get(version, {}):
        return _REWRITTEN[version][opname][1]
    if opname in _BY_ARGUMENT[version]:
        return _BY_ARGUMENT[version][opname][1]
    return (_RENAMED[version].get(opname, opname),)


def decoded_elsewhere() -> set[str]:
    """Canonical names some supported version decodes to (for the coverage check's test that
    a refused name is no leftover)."""
    names = {name for table in _RENAMED.values() for name in table.values()}
    names.update(*_ADDED.values())
    for table in (*_BY_ARGUMENT.values(), *_REWRITTEN.values()):
        for _, produced in table.values():
            names.update(produced)
    return names


def _canonical(inst: dis.Instruction) -> tuple[str, int | None]:
    """The canonical name and argument of a raw instruction."""
    rewritten = _REWRITTEN.get(VERSION, {}).get(inst.opname)
    if rewritten is not None:
        return rewritten[0](inst)
    return _canonical_name(inst), inst.arg


def _canonical_name(inst: dis.Instruction) -> str:
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
    line_at = _lines(code)
    for inst in raw:
        line = line_at.get(inst.offset)
        located = line is not None
        if located:
            lineno = line
        argval = inst.argval
        skipped = skips.get(inst.opname, ())
        if skipped and _opnames(raw, index_of[argval], len(skipped)) == skipped:
            # Where the canonical form goes on: FOR_ITER's exit jumps past END_FOR (and 3.13's
            # POP_TOP); the canonical SEND pops the receiver itself, which END_SEND would pop.
            argval = raw[index_of[argval] + len(skipped)].offset
            targets.add(argval)
        opname, arg = _canonical(inst)
        if arg != inst.arg:
            argval = arg  # an opcode with its argument in the name (BINARY_ADD, DUP_TOP)
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


def _lines(code: types.CodeType) -> dict[int, int | None]:
    """Each instruction offset's line (None: the line table gives it none). ``co_lines`` reads
    the line table of every supported version (3.10 has no ``positions`` on instructions)."""
    lines = {}
    for start, end, line in code.co_lines():
        for offset in range(start, end, 2):
            lines[offset] = line
    return lines


def qualname(code: types.CodeType) -> str:
    """The code's qualified name; 3.10's code objects have only ``co_name`` (no class or
    enclosing function prefix)."""
    return getattr(code, "co_qualname", code.co_name)


def _opnames(raw: list, start: int, count: int) -> tuple[str, ...]:
    return tuple(inst.opname for inst in raw[start:start + count])


def kw_names(code: types.CodeType, inst: Instruction) -> tuple[str, ...]:
    """KW_NAMES' argument indexes co_consts (3.11, 3.12, and 3.13's LOAD_CONST before
    CALL_KW)."""
    return code.co_consts[inst.arg]


# 3.11 added LOAD_GLOBAL's NULL bit; 3.10's argument is the name's index alone.
GLOBAL_NULL_BIT = VERSION >= (3, 11)


def pushes_null(inst: Instruction) -> bool:
    """LOAD_GLOBAL's low bit asks for a NULL beside the value (see :func:`call_slots`)."""
    return GLOBAL_NULL_BIT and bool(inst.arg & 1)


def cells_at_start(code: types.CodeType) -> tuple[str, ...]:
    """The cell variables a frame has before its first instruction: 3.10 makes them with the
    frame (an argument's cell holds the argument); 3.11 on with MAKE_CELL."""
    return code.co_cellvars if VERSION < (3, 11) else ()


def resumes_yield_from(inst: Instruction) -> bool:
    """Whether a generator suspended before ``inst`` is inside a ``yield from`` (its delegate
    on top of the stack): 3.11's RESUME 2 after the yield, or 3.10's YIELD_FROM, which runs
    again when the generator resumes."""
    return (inst.opname == "RESUME" and inst.arg == 2) or inst.opname == "YIELD_FROM"


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


@dataclass(frozen=True)
class HandlerEntry:
    """One exception-table entry: a raise in ``[start, end)`` goes to ``target`` with the stack
    cut to ``depth`` (and the raising offset pushed when ``lasti``). ``restore`` is 3.10's: the
    stack slot of the previous exception (the handled one again after the raise leaves the
    except blocks it crosses), None where the raise leaves none."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool
    restore: int | None = None


# What a handler finds above its entry's depth, bottom first. 3.11 on push the exception
# (PUSH_EXC_INFO then saves the handled one); 3.10 pushes the handled exception's triple, then
# the raised one's, and makes the raised one the handled exception at once.
HANDLER_ENTRY: tuple[str, ...] = (
    ("previous_traceback", "previous", "previous_type", "traceback", "exception", "type")
    if VERSION < (3, 11) else ("exception",))
HANDLER_SETS_EXCEPTION = "previous" in HANDLER_ENTRY


def exception_handler(code: types.CodeType, offset: int) -> HandlerEntry | None:
    """The exception-table entry covering ``offset``; the table's format is the same in 3.11,
    3.12 and 3.13, and 3.10's is derived from its block stack."""
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
                             "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE",
                             "RERAISE_310"})


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
                    "JUMP_IF_NOT_EXC_MATCH",
                    *(f"POP_JUMP_{way}_IF_{stem}" for way in ("FORWARD", "BACKWARD")
                      for stem in ("TRUE", "FALSE", "NONE", "NOT_NONE"))})


# Per code object, dropped with it: decoded instructions and parsed exception tables.
_decoded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def exception_table(code: types.CodeType) -> list[HandlerEntry]:
    """The parsed exception table (cached per code object); 3.10's is derived from its block
    stack (:func:`_block_table`)."""
    table = _tables.get(code)
    if table is None:
        if VERSION < (3, 11):
            table = _block_table(code)
        else:
            table = [HandlerEntry(e.start, e.end, e.target, e.depth, e.lasti)
                     for e in dis._parse_exception_table(code)]
        _tables[code] = table
    return table


# -- 3.10's block stack as an exception table ---------------------------------------------------
# SETUP_FINALLY / SETUP_WITH push a block whose handler is their target; POP_BLOCK pops it; a
# raise inside it cuts the stack to the block's level, pushes an EXCEPT_HANDLER block and the six
# values of HANDLER_ENTRY; POP_EXCEPT pops that block (and three values). A raise inside an
# EXCEPT_HANDLER block unwinds it (the handled exception becomes the previous one again) on its
# way to the next handler out. The compiler keeps the block stack and the stack depth the same
# at an instruction on every path to it, so one walk of the control flow gives both.
_SETUP_310 = {"SETUP_FINALLY": 0, "SETUP_WITH": 0, "SETUP_ASYNC_WITH": -1}  # level - depth
_ENDS_310 = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_ABSOLUTE",
                       "JUMP_FORWARD"})
_HANDLER_VALUES_310 = 6
_PREVIOUS_SLOT_310 = 1  # above the block's level: the previous traceback, exception, type


def _effect_310(inst: dis.Instruction) -> int:
    """The stack effect of going on to the next instruction. GEN_START pops the value sent to
    start the generator, which the translator's generator frames never push: none here."""
    if inst.opname == "GEN_START":
        return 0
    return dis.stack_effect(inst.opcode, inst.arg, jump=False)


def _block_table(code: types.CodeType) -> list[HandlerEntry]:
    """3.10's exception table: each offset's innermost handler, from a walk of the block stack.
    A block is (handler target or None for an EXCEPT_HANDLER block, stack level)."""
    raw = list(dis.get_instructions(code))
    index_of = {inst.offset: i for i, inst in enumerate(raw)}
    states: dict[int, tuple[tuple[tuple[int | None, int], ...], int]] = {0: ((), 0)}
    todo = [0]
    while todo:
        i = todo.pop()
        blocks, depth = states[i]
        inst = raw[i]
        name = inst.opname
        successors = []
        if name in _SETUP_310:
            level = depth + _SETUP_310[name]
            successors.append((i + 1, blocks + ((inst.argval, level),),
                               depth + dis.stack_effect(inst.opcode, inst.arg, jump=False)))
            successors.append((index_of[inst.argval], blocks + ((None, level),),
                               level + _HANDLER_VALUES_310))
        else:
            if name in ("POP_BLOCK", "POP_EXCEPT"):
                blocks = blocks[:-1]
            if inst.opcode in dis.hasjabs or inst.opcode in dis.hasjrel:
                successors.append((index_of[inst.argval], blocks,
                                   depth + dis.stack_effect(inst.opcode, inst.arg, jump=True)))
            if name not in _ENDS_310:
                successors.append((i + 1, blocks, depth + _effect_310(inst)))
        for j, next_blocks, next_depth in successors:
            if j < len(raw) and j not in states:
                states[j] = (next_blocks, next_depth)
                todo.append(j)
    entries: list[HandlerEntry] = []
    for i in sorted(states):
        entry = _innermost_handler(states[i][0], raw[i].offset)
        if entry is None:
            continue
        last = entries[-1] if entries else None
        if last is not None and last.end == entry.start and \
                (last.target, last.depth, last.restore) == (entry.target, entry.depth,
                                                            entry.restore):
            entries[-1] = HandlerEntry(last.start, entry.end, last.target, last.depth, False,
                                       last.restore)
        else:
            entries.append(entry)
    return entries


def _innermost_handler(blocks: tuple[tuple[int | None, int], ...],
                       offset: int) -> HandlerEntry | None:
    """Where a raise at ``offset`` goes under ``blocks``: the innermost SETUP block's handler,
    restoring the previous exception of the outermost EXCEPT_HANDLER block it leaves."""
    restore = None
    for target, level in reversed(blocks):
        if target is None:
            restore = level + _PREVIOUS_SLOT_310
            continue
        return HandlerEntry(offset, offset + 2, target, level, False, restore)
    return None


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


def unit_lines(code: types.CodeType) -> list[int | None]:
    """The line of each code unit (None: none), from ``co_lines`` (every version)."""
    lines: list[int | None] = [None] * (len(code.co_code) // 2)
    for start, end, line in code.co_lines():
        for offset in range(start, end, 2):
            lines[offset // 2] = line
    return lines
