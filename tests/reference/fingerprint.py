"""A measure's fingerprint: a hash of the test code it runs, so a recording knows it is current.

torch is pinned, so a recorded figure stays true while the code of its measure is unchanged.
That code is the measure function and what it reaches that lives in ``tests/``: the functions
and classes it names (through globals, closure cells, defaults and ``functools.partial``
arguments), and the test objects (cases, scenarios) it holds, followed transitively. Only
sources and plain constants go into the hash, never ids, so it is the same in every process.
What lives outside ``tests/`` (torch, the standard library) is pinned with the interpreter and
left out; graphlift is never called by a measure.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import pathlib
import types
from typing import Any

TESTS = pathlib.Path(__file__).resolve().parent.parent
_CONSTANTS = (int, float, complex, str, bytes, bool, type(None))


def fingerprint(measure: Any) -> str:
    """16 hex digits naming the test code ``measure`` runs."""
    parts: list[str] = []
    _Walk(parts).visit(measure)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _in_tests(path: str | None) -> bool:
    return path is not None and pathlib.Path(path).resolve().is_relative_to(TESTS)


class _Walk:
    def __init__(self, parts: list[str]) -> None:
        self.parts, self.seen = parts, set()

    def visit(self, value: Any) -> None:
        if isinstance(value, _CONSTANTS):
            self.parts.append(repr(value))
            return
        if id(value) in self.seen:
            return
        self.seen.add(id(value))
        if isinstance(value, functools.partial):
            self.visit(value.func)
            self.visit_all(value.args)
            self.visit_all(value.keywords.values())
        elif isinstance(value, types.FunctionType):
            self.visit_function(value)
        elif isinstance(value, types.MethodType):
            self.visit(value.__func__)
        elif isinstance(value, type):
            self.visit_class(value)
        elif isinstance(value, (list, tuple, set, frozenset)):
            self.visit_all(sorted(value, key=_order) if isinstance(value, (set, frozenset))
                           else value)
        elif isinstance(value, dict):
            self.visit_all(value.keys())
            self.visit_all(value.values())
        elif _in_tests(getattr(inspect.getmodule(type(value)), "__file__", None)):
            self.visit_class(type(value))  # a test's case or scenario object: its fields too
            self.visit_all(getattr(value, "__dict__", {}).values())

    def visit_all(self, values: Any) -> None:
        for value in values:
            self.visit(value)

    def visit_function(self, fn: types.FunctionType) -> None:
        if not _in_tests(fn.__code__.co_filename):
            return
        self.parts.append(_source(fn))
        for name in sorted(_names(fn.__code__)):
            if name in fn.__globals__:
                self.visit(fn.__globals__[name])
        self.visit_all(cell.cell_contents for cell in fn.__closure__ or ()
                       if _filled(cell))
        self.visit_all(fn.__defaults__ or ())
        self.visit_all((fn.__kwdefaults__ or {}).values())

    def visit_class(self, cls: type) -> None:
        if not _in_tests(getattr(inspect.getmodule(cls), "__file__", None)):
            return
        self.parts.append(_source(cls))
        for name, value in vars(cls).items():
            if name != "__firstlineno__":  # 3.13's: moves with edits above the class
                self.visit(value)


def _order(value: Any) -> str:
    """A set's items in an order that is the same in every process (no ids)."""
    return repr(value) if isinstance(value, _CONSTANTS) else getattr(
        value, "__qualname__", type(value).__qualname__)


_sources: dict[int, tuple[Any, str]] = {}  # id -> (the object, kept alive; its source)


def _source(obj: Any) -> str:
    """The source of a function or class, once per object and process."""
    known = _sources.get(id(obj))
    if known is None or known[0] is not obj:
        known = _sources[id(obj)] = (obj, _read_source(obj))
    return known[1]


def _read_source(obj: Any) -> str:
    try:
        if isinstance(obj, type):  # inspect parses the whole file per class: once per file here
            return _class_sources(inspect.getsourcefile(obj))[obj.__qualname__]
        return inspect.getsource(obj)
    except (OSError, TypeError, KeyError):  # made by exec or type(): its name stands for it
        return f"{obj.__module__}.{obj.__qualname__}"


@functools.cache
def _class_sources(path: str) -> dict[str, str]:
    """Every class statement of a file, by qualified name."""
    text = pathlib.Path(path).read_text()
    lines = text.splitlines()
    found: dict[str, str] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = prefix + child.name
                found.setdefault(name, "\n".join(lines[child.lineno - 1:child.end_lineno]))
                walk(child, name + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(child, f"{prefix}{child.name}.<locals>.")
            else:
                walk(child, prefix)

    walk(ast.parse(text), "")
    return found


def _names(code: types.CodeType) -> set[str]:
    """The global names a code object and the code objects nested in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _filled(cell: types.CellType) -> bool:
    try:
        return cell.cell_contents is not _filled  # any value: the read is the test
    except ValueError:  # an empty cell
        return False
