"""The package's imports run one way, as the layer table in ``graphlift/__init__.py`` says.

The table is parsed from the package docstring, so the documentation and this check cannot drift
apart: a new module must be placed in a layer, and an import against the order fails here. Every
import counts: those under ``if TYPE_CHECKING:``, relative ones, and ``importlib.import_module``.

A lower layer names what it asks of a higher one as a protocol (``variables.base.Translator``,
``rebuild.Codegen``...); the last tests check that the real classes have every member each
protocol names, so that a protocol cannot drift from what it stands for.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import pathlib
import re
import types
from collections.abc import Iterator
from typing import Protocol

import graphlift
from graphlift import rebuild, shape_guards
from graphlift.codegen import ErrorPathCodegen, OutputCodegen
from graphlift.guards import GuardBuilder
from graphlift.output_graph import OutputGraph
from graphlift.translator import InliningTranslator, InstructionTranslator
from graphlift.variables import base, iterators
from graphlift.variables.base import VariableTracker
from graphlift.variables.containers import DictVariable, ListVariable, SetVariable
from graphlift.variables.functions import CellVariable, UserFunctionVariable

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


def package_of(name: str, path: pathlib.Path) -> str:
    """The dotted package that relative imports in module ``name`` (file ``path``) start from."""
    full = "graphlift" if name == "graphlift" else f"graphlift.{name}"
    return full if path.name == "__init__.py" else full.rpartition(".")[0]


def imports_of(source: str, modules: set[str],
               package: str = "graphlift") -> list[tuple[str, int, bool]]:
    """``(imported module, line, inside a function)`` for each import of a graphlift module.

    Every form counts: ``import``, ``from ... import`` (absolute, or relative to ``package``),
    ``importlib.import_module`` and ``__import__`` of a literal name; at module level, under
    ``if TYPE_CHECKING:`` (which never runs) or inside a function.
    """
    found: list[tuple[str, int, bool]] = []

    def target(name: str) -> str | None:
        relative = name.removeprefix("graphlift").removeprefix(".")
        while relative and relative not in modules:
            relative = relative.rpartition(".")[0]
        return relative or ("graphlift" if name.startswith("graphlift") else None)

    def imported(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        if isinstance(node, ast.ImportFrom):
            origin = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                 package) if node.level else node.module or ""
            return [f"{origin}.{a.name}" if f"{origin}.{a.name}".removeprefix("graphlift.")
                    in modules else origin for a in node.names]
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and ast.unparse(node.func) in ("importlib.import_module", "import_module",
                                               "__import__"):
            return [node.args[0].value] if isinstance(node.args[0].value, str) else []
        return []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            for name in imported(child):
                if name == "graphlift" or name.startswith("graphlift."):
                    module = target(name)
                    if module is not None:
                        found.append((module, child.lineno, nested))
            visit(child, nested)

    visit(ast.parse(source), False)
    return found


def violations(importer: str, source: str, rank: dict[str, int],
               package: str = "graphlift") -> list[str]:
    """Imports in ``source`` (module ``importer`` of ``package``) against the layer order."""
    problems = []
    lines = source.splitlines()
    for module, line, in_function in imports_of(source, set(rank), package):
        if module == importer:
            continue
        if rank[module] >= rank[importer] and (importer, module) not in ALLOWED_UPWARD:
            problems.append(f"{importer}:{line} imports {module}, which is not below it")
        context = " ".join(lines[max(line - 2, 0):line])
        if in_function and "cycle:" not in context and "deferred:" not in context:
            problems.append(f"{importer}:{line} imports {module} inside a function without a "
                            "'# cycle:' comment naming the cycle or a '# deferred:' one")
    return problems


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """A cycle of ``graph`` (``[a, b, a]``: a imports b imports a), or ``[]`` if it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done (no cycle through it)

    def visit(node: str, trail: list[str]) -> list[str]:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*trail, node, nxt][[*trail, node].index(nxt):]
            if nxt not in state:
                cycle = visit(nxt, [*trail, node])
                if cycle:
                    return cycle
        state[node] = 2
        return []

    for name in sorted(graph):
        if name not in state:
            cycle = visit(name, [])
            if cycle:
                return cycle
    return []


def import_graph() -> dict[str, set[str]]:
    """Each module and the modules it imports, in any form (see :func:`imports_of`)."""
    return {name: {m for m, _, _ in imports_of(path.read_text(), set(MODULES),
                                               package_of(name, path)) if m != name}
            for name, path in MODULES.items()}


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
        problems += violations(name, path.read_text(), RANK, package_of(name, path))
    assert problems == []


def test_at_most_three_upward_imports_each_with_a_reason():
    assert len(ALLOWED_UPWARD) <= 3
    assert all(reason.strip() for reason in ALLOWED_UPWARD.values())


def test_no_import_cycle():
    """The drawing of every import, ``if TYPE_CHECKING:`` ones included, has no cycle."""
    cycle = find_cycle(import_graph())
    assert cycle == [], f"import cycle: {' -> '.join(cycle)}"


def test_the_cycle_check_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"d": {"b"}, "b": {"c"}, "c": {"b"}}) == ["b", "c", "b"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_variables_never_import_the_translator():
    """Not even for an annotation: a tracker's ``tx`` is a ``variables.base.Translator``."""
    graph = import_graph()
    for name in graph:
        if name.startswith("variables"):
            assert not graph[name] & {"translator", "convert_frame"}, name


def test_every_form_of_an_import_counts():
    forms = [
        "import graphlift.translator\n",
        "import graphlift.translator as t\n",
        "from graphlift import translator\n",
        "from graphlift.translator import InstructionTranslator\n",
        "from .. import translator\n",
        "from ..translator import InliningTranslator\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from graphlift.translator import InstructionTranslator\n",
        "def f():\n    from graphlift.translator import InstructionTranslator\n",
        "import importlib\nimportlib.import_module('graphlift.translator')\n",
        "def f():\n    return __import__('graphlift.translator')\n",
    ]
    for source in forms:
        found = {m for m, _, _ in imports_of(source, set(MODULES), "graphlift.variables")}
        assert found == {"translator"}, source
    assert imports_of("from . import base\n", set(MODULES), "graphlift.variables") == [
        ("variables.base", 1, False)]
    assert imports_of("import importlib\nimportlib.import_module(name)\n", set(MODULES)) == []


def test_the_check_catches_an_upward_import_and_a_hidden_one():
    upward = "from graphlift.translator import InstructionTranslator\n"
    assert violations("variables.tensor", upward, RANK) == [
        "variables.tensor:1 imports translator, which is not below it"]
    hidden = "def f():\n    from graphlift.variables import base\n"
    assert violations("translator", hidden, RANK) == [
        "translator:2 imports variables.base inside a function without a '# cycle:' comment "
        "naming the cycle or a '# deferred:' one"]
    deferred = "def f():\n    # deferred: sympy\n    from graphlift import shape_guards\n"
    assert violations("output_graph", deferred, RANK) == []
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n" \
                  "    from graphlift.translator import InstructionTranslator\n"
    assert violations("variables.tensor", typing_only, RANK) == [
        "variables.tensor:3 imports translator, which is not below it"]
    relative = "from ..codegen import OutputCodegen\n"
    assert violations("variables.tensor", relative, RANK, "graphlift.variables") == [
        "variables.tensor:1 imports codegen, which is not below it"]


def test_the_layer_table_reads_top_down():
    names = [layer for layer, _ in LAYERS]
    assert names[0] == "entry" and names[-1] == "primitives"
    assert RANK["config"] < RANK["bytecode"] < RANK["variables.base"] < RANK["translator"] \
        < RANK["eval_frame"] < RANK["graphlift"]


# -- the protocols a lower layer names instead of a higher module ------------------------------
def protocol_members(protocol: type) -> dict[str, object]:
    """The members ``protocol`` and its protocol bases declare: name -> the declaration (a
    function, a property, or None for an annotated attribute)."""
    members: dict[str, object] = {}
    for klass in reversed(protocol.__mro__):
        if Protocol not in klass.__bases__:
            continue
        members.update(dict.fromkeys(inspect.get_annotations(klass)))
        members.update({name: value for name, value in vars(klass).items()
                        if not name.startswith("_")
                        and isinstance(value, (types.FunctionType, property))})
    return members


def drift(protocol: type, obj: object) -> list[str]:
    """The members of ``protocol`` that ``obj`` lacks, or has with other parameters."""
    problems = []
    for name, declared in sorted(protocol_members(protocol).items()):
        try:
            real = inspect.getattr_static(obj, name)  # static: a property is not run
        except AttributeError:
            problems.append(f"{name}: missing")
            continue
        if isinstance(declared, types.FunctionType):
            want = list(inspect.signature(declared).parameters)[1:]
            have = list(inspect.signature(real).parameters)[1:] if callable(real) else None
            if want != have:
                problems.append(f"{name}: takes {have}, the protocol says {want}")
    return problems


def _frame() -> Iterator[None]:
    yield


def translators() -> tuple[InstructionTranslator, InliningTranslator]:
    """A translator of a compiled frame, and the inliner of a generator call in it."""
    root = InstructionTranslator(_frame, {}, OutputGraph(), GuardBuilder())
    return root, InliningTranslator(root, UserFunctionVariable(_frame), {})


def test_the_translator_protocols_match_the_translators():
    root, inliner = translators()
    assert drift(base.RootTranslator, root) == []
    assert drift(base.Translator, inliner) == []
    assert drift(iterators.GeneratorFrame, inliner) == []
    assert drift(base.Builder, root.builder) == []
    assert drift(base.Cell, CellVariable()) == []


def test_the_rebuild_protocols_match_codegen_and_trackers():
    main = OutputCodegen(None)
    assert drift(rebuild.Codegen, main) == []
    assert drift(rebuild.ErrorCodegen, ErrorPathCodegen(main)) == []
    assert drift(rebuild.Tracker, VariableTracker()) == []
    for container in (ListVariable([]), DictVariable({}), SetVariable([])):
        assert drift(rebuild.Container, container) == []
    assert drift(shape_guards.ShapeRecords, OutputGraph()) == []


def test_the_drift_check_finds_a_missing_member_and_other_parameters():
    class Drifted(base.Translator, Protocol):
        frame_locals: dict
        """Not on any translator."""

        def reread(self) -> None:
            """Not on any translator either."""

        def is_same(self, a: VariableTracker, b: VariableTracker) -> bool:
            """The translator's takes ``left, right``."""

    root, _ = translators()
    assert drift(Drifted, root) == [
        "frame_locals: missing",
        "is_same: takes ['left', 'right'], the protocol says ['a', 'b']",
        "reread: missing"]
    assert "frame_fn" in protocol_members(base.RootTranslator)
    assert "output" in protocol_members(base.RootTranslator)  # from its base, Translator
    _, inliner = translators()
    assert drift(base.RootTranslator, inliner) == ["frame_arguments: missing", "frame_fn: missing"]


def attributes_asked(source: str, names: set[str]) -> set[str]:
    """The attributes read of a variable, parameter or attribute named one of ``names``
    (``tx.output``, ``builder.tx.guards``: ``output``, ``guards`` for ``{"tx"}``)."""
    asked = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            value = node.value
            if (isinstance(value, ast.Name) and value.id in names) or \
                    (isinstance(value, ast.Attribute) and value.attr in names):
                asked.add(node.attr)
    return asked


def test_trackers_ask_only_what_the_protocols_name():
    """The other direction: what the lower layers use of ``tx`` and ``codegen`` is declared."""
    variables = "".join(path.read_text() for name, path in MODULES.items()
                        if name.startswith("variables"))
    assert attributes_asked(variables, {"tx"}) - set(protocol_members(base.Translator)) == set()
    assert attributes_asked(variables, {"codegen", "cg"}) - \
        set(protocol_members(rebuild.Codegen)) == set()
    ledger = MODULES["side_effects"].read_text()
    assert attributes_asked(ledger, {"codegen"}) - \
        set(protocol_members(rebuild.ErrorCodegen)) == set()
    assert attributes_asked("tx.output.graph\nbuilder.tx.guards\ncodegen.hoist(x)\n",
                            {"tx"}) == {"output", "guards"}
