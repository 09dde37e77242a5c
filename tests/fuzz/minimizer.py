"""Shrink a program while its difference persists.

``minimize(program, difference)`` tries smaller programs, keeping each one that still shows a
difference of the same kind while eager still returns, or raises the same type, as before (an
internal error also keeps its exception type and message). First it drops calls; then, until
nothing more helps, it deletes statements (halves of a block, then smaller pieces), replaces a
compound statement by one of its bodies, drops unused parameters, and replaces an expression by
one of its parts. Candidates that do not compile are skipped; every source is tried once.
"""

from __future__ import annotations

import ast
import copy
import time
from collections.abc import Callable, Iterator

from .generator import Program
from .runner import Difference, run_program

Check = Callable[[Program], bool]


def minimize(program: Program, difference: Difference, seconds: float = 60.0) -> Program:
    """The smallest program found within ``seconds`` that still differs like ``difference``."""
    deadline = time.monotonic() + seconds
    check = _same_difference(difference)
    program = program.replace(calls=program.calls[:difference.call + 1])
    program = _fewer_calls(program, check, deadline)
    tried: set[tuple[str, tuple]] = set()
    passes = (_delete_statements, _unwrap_statements, _drop_parameters, _drop_state_changes,
              _simplify_expressions)
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for edits in passes:
            for candidate in edits(program):
                if time.monotonic() > deadline:
                    return program
                key = (candidate.source, candidate.variants)
                if key in tried:
                    continue
                tried.add(key)
                if check(candidate):
                    program, progress = candidate, True
                    break
            if progress:
                break
    return program


def _same_difference(difference: Difference) -> Check:
    want = difference.signature.split(" at ")[0] if difference.kind == "internal" else None

    def check(candidate: Program) -> bool:
        try:
            found = run_program(candidate, timeout=10.0).difference
        except Exception:  # the candidate broke the harness (a missing entry, bad arguments)
            return False
        if found is None or found.kind != difference.kind or found.eager != difference.eager:
            return False
        return want is None or found.signature.split(" at ")[0] == want
    return check


def _fewer_calls(program: Program, check: Check, deadline: float) -> Program:
    index = 0
    while index < len(program.calls) - 1 and time.monotonic() < deadline:
        candidate = program.replace(calls=program.calls[:index] + program.calls[index + 1:])
        if check(candidate):
            program = candidate
        else:
            index += 1
    return program


# -- edits -------------------------------------------------------------------------------------
def _with_tree(program: Program, tree: ast.Module) -> Program | None:
    try:
        # ast.unparse refuses some edited trees: an f-string's part replaced by a plain
        # expression (3.11 raises ValueError "Unexpected node inside JoinedStr", 3.10
        # AttributeError "no attribute '_fstring_Call'").
        source = ast.unparse(tree) + "\n"
        compile(source, "<candidate>", "exec")
    except (SyntaxError, ValueError, AttributeError):  # or a nonlocal whose binding was deleted
        return None
    return program.replace(source=source)


def _statement_lists(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], (ast.stmt,
                                                                           ast.excepthandler)):
                yield node, name


def _delete_statements(program: Program) -> Iterator[Program]:
    """Delete a chunk of a block: halves first, then smaller pieces, then single statements."""
    tree = ast.parse(program.source)
    sites = list(_statement_lists(tree))
    for site_index, (node, name) in enumerate(sites):
        length = len(getattr(node, name))
        size = length
        while size >= 1:
            for start in range(0, length, size):
                candidate = copy.deepcopy(tree)
                cnode, cname = list(_statement_lists(candidate))[site_index]
                block = getattr(cnode, cname)
                del block[start:start + size]
                if not block and cname in ("body", "handlers"):
                    if cname == "handlers":
                        continue
                    block.append(ast.Pass())
                if isinstance(cnode, ast.Module) and not any(
                        isinstance(s, ast.FunctionDef) and s.name == program.entry for s in block):
                    continue
                made = _with_tree(program, candidate)
                if made:
                    yield made
            size //= 2


def _unwrap_statements(program: Program) -> Iterator[Program]:
    """Replace an if, loop, with or try by one of its bodies."""
    tree = ast.parse(program.source)
    compound = (ast.If, ast.For, ast.While, ast.With, ast.Try)
    count = sum(isinstance(n, compound) for n in ast.walk(tree))
    for index in range(count):
        for field in ("body", "orelse", "finalbody", "handler"):
            candidate = copy.deepcopy(tree)
            nodes = [n for n in ast.walk(candidate) if isinstance(n, compound)]
            target = nodes[index]
            if field == "handler":
                replacement = target.handlers[0].body if isinstance(target, ast.Try) and \
                    target.handlers else None
            else:
                replacement = getattr(target, field, None)
            if not replacement:
                continue
            if not _replace_statement(candidate, target, replacement):
                continue
            made = _with_tree(program, candidate)
            if made:
                yield made


def _replace_statement(tree: ast.AST, target: ast.stmt, replacement: list[ast.stmt]) -> bool:
    for node, name in _statement_lists(tree):
        block = getattr(node, name)
        if target in block:
            i = block.index(target)
            block[i:i + 1] = replacement
            return True
    return False


def _drop_parameters(program: Program) -> Iterator[Program]:
    """Remove a parameter of the entry function and its argument from every call."""
    tree = ast.parse(program.source)
    entry = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == program.entry)
    positional = [a.arg for a in entry.args.args]
    keyword = [a.arg for a in entry.args.kwonlyargs]
    for name in positional + keyword:
        candidate = copy.deepcopy(tree)
        fn = next(n for n in candidate.body if isinstance(n, ast.FunctionDef)
                  and n.name == program.entry)
        if name in positional:
            i = [a.arg for a in fn.args.args].index(name)
            del fn.args.args[i]
            variants = tuple(_drop_argument(v, index=positional.index(name)) for v in
                             program.variants)
        else:
            i = [a.arg for a in fn.args.kwonlyargs].index(name)
            del fn.args.kwonlyargs[i]
            del fn.args.kw_defaults[i]
            variants = tuple(_drop_argument(v, key=name) for v in program.variants)
        made = _with_tree(program.replace(variants=variants), candidate)
        if made:
            yield made


def _drop_argument(variant: str, index: int | None = None, key: str | None = None) -> str:
    tree = ast.parse(variant)
    for stmt in tree.body:
        if not isinstance(stmt, ast.Assign) or not isinstance(stmt.targets[0], ast.Name):
            continue  # a state change before the call (Knob.scale = 3.0), not an argument
        target = stmt.targets[0].id
        if target == "args" and index is not None:
            del stmt.value.elts[index]
        if target == "kwargs" and key is not None:
            i = [k.value for k in stmt.value.keys].index(key)
            del stmt.value.keys[i]
            del stmt.value.values[i]
    return ast.unparse(tree)


def _drop_state_changes(program: Program) -> Iterator[Program]:
    """Drop a change of the program's state that a variant makes before its call."""
    for index, variant in enumerate(program.variants):
        body = ast.parse(variant).body
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.Expr) or isinstance(stmt, ast.Assign) and isinstance(
                    stmt.targets[0], ast.Name):
                continue  # the seed and the arguments
            text = ast.unparse(ast.Module(body=body[:i] + body[i + 1:], type_ignores=[]))
            variants = program.variants[:index] + (text,) + program.variants[index + 1:]
            yield program.replace(variants=variants)


def _simplify_expressions(program: Program) -> Iterator[Program]:
    """Replace an expression by one of its parts, or drop an item of a list or tuple."""
    tree = ast.parse(program.source)
    for index, original in enumerate(_expressions(tree)):
        for option in range(len(_parts(original))):
            candidate = copy.deepcopy(tree)
            node = _expressions(candidate)[index]
            if _substitute(candidate, node, _parts(node)[option]):
                made = _with_tree(program, candidate)
                if made:
                    yield made
        if isinstance(original, (ast.List, ast.Tuple)) and len(original.elts) > 1:
            for i in range(len(original.elts)):
                candidate = copy.deepcopy(tree)
                del _expressions(candidate)[index].elts[i]
                made = _with_tree(program, candidate)
                if made:
                    yield made


def _parts(node: ast.expr) -> list[ast.expr]:
    """What ``node`` may shrink to: its sub-expressions; for ``x.relu()``, ``x`` (not the bound
    method ``x.relu``)."""
    parts = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        parts = [node.func.value] + [p for p in parts if p is not node.func]
    return parts


def _expressions(tree: ast.AST) -> list[ast.expr]:
    """Expressions in a fixed order, leaving out assignment targets and names."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.expr) and not isinstance(node, (ast.Name, ast.Constant)) and \
                not isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
            out.append(node)
    return out


def _substitute(tree: ast.AST, old: ast.expr, new: ast.expr) -> bool:
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return True
            if isinstance(value, list) and any(v is old for v in value):
                value[[i for i, v in enumerate(value) if v is old][0]] = new
                return True
    return False
