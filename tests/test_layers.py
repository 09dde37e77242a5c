"""The package's imports run one way, as the layer table in ``graphlift/__init__.py`` says.

The table is parsed from the package docstring, so the documentation and this check cannot drift
apart: a new module must be placed in a layer, and an import against the order fails here.
"""

from __future__ import annotations

import ast
import pathlib
import re

import graphlift

PACKAGE = pathlib.Path(graphlift.__file__).parent

# Imports that run from a lower layer up to a higher one, each with its reason. The issue that
# introduced the layering allows at most three; today there are none.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def layer_table(doc: str) -> list[tuple[str, list[str]]]:
    """``[(layer, [module, ...]), ...]`` top to bottom, from the docstring's literal block."""
    block = doc.split("Layers, top to bottom", 1)[1].split("::", 1)[1]
    layers: list[tuple[str, list[str]]] = []
    text = ""
    for line in block.splitlines():
        match = re.match(r"    (\w+):\s+(.*)", line)
        if match:
            if layers:
                layers[-1] = (layers[-1][0], _modules(text))
            layers.append((match.group(1), []))
            text = match.group(2)
        elif line.startswith("     ") and layers:
            text += " " + line.strip()
    layers[-1] = (layers[-1][0], _modules(text))
    return layers


def _modules(text: str) -> list[str]:
    return [name.strip() for name in text.split("--", 1)[0].split(",") if name.strip()]


def rank_of(layers: list[tuple[str, list[str]]]) -> dict[str, int]:
    """Bottom layer first; within a layer, in the listed (import) order."""
    order = [name for _, names in reversed(layers) for name in names]
    return {name: index for index, name in enumerate(order)}


def package_modules() -> dict[str, pathlib.Path]:
    """Module names relative to the package (``variables.base``; ``graphlift`` for the root)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts) or "graphlift"] = path
    return modules


def imports_of(source: str, modules: set[str]) -> list[tuple[str, int, bool]]:
    """``(imported module, line, inside a function)`` for each import of a graphlift module.

    Imports under ``if TYPE_CHECKING:`` never run and are left out.
    """
    found: list[tuple[str, int, bool]] = []

    def target(name: str) -> str | None:
        relative = name.removeprefix("graphlift").removeprefix(".")
        while relative and relative not in modules:
            relative = relative.rpartition(".")[0]
        return relative or ("graphlift" if name.startswith("graphlift") else None)

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                base = child.module
                names = [f"{base}.{a.name}" if f"{base}.{a.name}".removeprefix("graphlift.")
                         in modules else base for a in child.names]
            for name in names:
                if name.startswith("graphlift"):
                    module = target(name)
                    if module is not None:
                        found.append((module, child.lineno, nested))
            visit(child, nested)

    visit(ast.parse(source), False)
    return found


def violations(importer: str, source: str, rank: dict[str, int]) -> list[str]:
    """Imports in ``source`` (module ``importer``) that run against the layer order."""
    problems = []
    lines = source.splitlines()
    for module, line, in_function in imports_of(source, set(rank)):
        if module == importer:
            continue
        if rank[module] >= rank[importer] and (importer, module) not in ALLOWED_UPWARD:
            problems.append(f"{importer}:{line} imports {module}, which is not below it")
        context = " ".join(lines[max(line - 2, 0):line])
        if in_function and "cycle:" not in context:
            problems.append(f"{importer}:{line} imports {module} inside a function without a "
                            "'# cycle:' comment naming the cycle")
    return problems


LAYERS = layer_table(graphlift.__doc__)
RANK = rank_of(LAYERS)
MODULES = package_modules()


def test_every_module_has_one_place_in_the_table():
    listed = [name for _, names in LAYERS for name in names]
    assert sorted(listed) == sorted(set(listed)), "a module is listed twice"
    assert set(listed) == set(MODULES), (set(MODULES) - set(listed), set(listed) - set(MODULES))


def test_imports_run_down_the_layers():
    problems = []
    for name, path in sorted(MODULES.items()):
        problems += violations(name, path.read_text(), RANK)
    assert problems == []


def test_at_most_three_upward_imports_each_with_a_reason():
    assert len(ALLOWED_UPWARD) <= 3
    assert all(reason.strip() for reason in ALLOWED_UPWARD.values())


def test_no_import_cycle():
    graph = {name: {m for m, _, _ in imports_of(path.read_text(), set(MODULES)) if m != name}
             for name, path in MODULES.items()}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            assert state.get(nxt) != 1, f"import cycle: {' -> '.join([*trail, node, nxt])}"
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name, [])


def test_variables_never_import_the_translator():
    for name, path in MODULES.items():
        if name.startswith("variables"):
            imported = {m for m, _, _ in imports_of(path.read_text(), set(MODULES))}
            assert "translator" not in imported and "convert_frame" not in imported, name


def test_the_check_catches_an_upward_import_and_a_hidden_one():
    upward = "from graphlift.translator import InstructionTranslator\n"
    assert violations("variables.tensor", upward, RANK) == [
        "variables.tensor:1 imports translator, which is not below it"]
    hidden = "def f():\n    from graphlift.variables import base\n"
    assert violations("translator", hidden, RANK) == [
        "translator:2 imports variables.base inside a function without a '# cycle:' comment "
        "naming the cycle"]
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n" \
                  "    from graphlift.translator import InstructionTranslator\n"
    assert violations("variables.tensor", typing_only, RANK) == []


def test_the_layer_table_reads_top_down():
    names = [layer for layer, _ in LAYERS]
    assert names[0] == "entry" and names[-1] == "primitives"
    assert RANK["config"] < RANK["bytecode"] < RANK["variables.base"] < RANK["translator"] \
        < RANK["eval_frame"] < RANK["graphlift"]
