"""The instruction layer: decoding CPython bytecode for the translator, one version at a time.

graphlift targets CPython 3.11 exactly. Everything that differs between versions (the CALL
protocol, jump encoding, the exception table) is decoded here, so opcode handlers never branch on
the version.
"""

from __future__ import annotations

import dis
import sys
import types
import weakref
from dataclasses import dataclass
from typing import Any

SUPPORTED_VERSIONS = ((3, 11),)


def check_python_version(version: tuple[int, int] = sys.version_info[:2]) -> None:
    """Raise with a clear message on a CPython whose bytecode graphlift does not know."""
    if tuple(version) not in SUPPORTED_VERSIONS:
        supported = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_VERSIONS)
        raise ImportError(
            f"graphlift interprets CPython bytecode and supports Python {supported} only; "
            f"this is Python {version[0]}.{version[1]}"
        )


@dataclass(frozen=True)
class Instruction:
    """One decoded instruction; ``argval`` is resolved (names, constants, jump targets)."""

    opname: str
    arg: int | None
    argval: Any
    offset: int
    lineno: int | None
    is_jump_target: bool

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
    result = []
    lineno = code.co_firstlineno
    for inst in dis.get_instructions(code):
        if inst.positions is not None and inst.positions.lineno is not None:
            lineno = inst.positions.lineno
        result.append(Instruction(inst.opname, inst.arg, inst.argval, inst.offset, lineno,
                                  inst.is_jump_target))
    return result


def all_opnames() -> set[str]:
    """Every real opcode name of the running CPython (pseudo-opcodes excluded)."""
    return {name for name in dis.opmap if not name.startswith("<")}


def kw_names(code: types.CodeType, inst: Instruction) -> tuple[str, ...]:
    """KW_NAMES' argument indexes co_consts in 3.11."""
    return code.co_consts[inst.arg]


def pushes_null(inst: Instruction) -> bool:
    """LOAD_GLOBAL's low bit asks for a NULL below the value (3.11 CALL protocol)."""
    return bool(inst.arg & 1)


def dump(code: types.CodeType) -> str:
    """The code's instructions in dis's columns, for the ``bytecode`` log artifact."""
    return "\n".join(str(inst) for inst in decode(code))


def exception_handler(code: types.CodeType, offset: int) -> Any:
    """The 3.11 exception-table entry covering ``offset`` (start, end, target, depth, lasti)."""
    for entry in exception_table(code):
        if entry.start <= offset < entry.end:
            return entry
    return None


# Per code object, dropped with it: decoded instructions and parsed exception tables.
_decoded: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def exception_table(code: types.CodeType) -> list:
    """The parsed 3.11 exception table (cached per code object)."""
    table = _tables.get(code)
    if table is None:
        table = _tables[code] = dis._parse_exception_table(code)
    return table


# 3.11 location table (Objects/locations.md): an entry's first byte is 0x80 | code << 3 |
# (code units - 1), at most 8 units; code 13 has no columns, then a signed varint line delta.
_NO_COLUMNS = 13


def at_line(code: types.CodeType, filename: str, name: str, line: int) -> types.CodeType:
    """``code`` with every instruction placed at ``filename:line`` in function ``name``.

    Generated code that runs on behalf of a user's frame gets the user's location, so that a
    traceback through it shows the user's line (and Python folds a recursion's repeated lines).
    """
    table = bytearray()
    units = len(code.co_code) // 2
    while units:
        chunk = min(units, 8)
        table += bytes((0x80 | _NO_COLUMNS << 3 | (chunk - 1), 0))  # delta 0: the first line
        units -= chunk
    return code.replace(co_filename=filename, co_name=name, co_firstlineno=line,
                        co_linetable=bytes(table))
