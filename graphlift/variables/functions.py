"""User functions, closures and methods: all of them are inlined into the caller's trace.

Inlining runs the callee's bytecode in an :class:`~graphlift.translator.InliningTranslator` that
shares the caller's graph and guards, so a call costs nothing at run time and the whole call tree
becomes one graph.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from graphlift import bytecode, trace_rules
from graphlift.exc import Unsupported
from graphlift.rebuild import Codegen
from graphlift.sources import (
    FN_NAME,
    GLOBALS_NAME,
    AttrSource,
    ClosureSource,
    FreshModuleGlobalsSource,
    ItemSource,
    ModuleGlobalsSource,
    Source,
)
from graphlift.variables.base import (
    MISSING,
    Translator,
    VariableTracker,
    lookup_class_attr,
    raise_real,
)
from graphlift.variables.constant import ConstantVariable, is_constant_value, wrap_constant
from graphlift.variables.containers import DictVariable, TupleVariable

CO_VARARGS, CO_VARKEYWORDS = 0x04, 0x08

# Python functions of torch whose calls a tracker above this module models instead of inlining
# them (function -> handler(tx, args, kwargs)), filled by those modules at import:
# variables/autograd.py registers ``torch.autograd.Function.apply``.
CALL_HANDLERS: dict[Any, Any] = {}


class CellVariable(VariableTracker):
    """A closure cell. In-frame cells hold a tracker; cells of input functions read their source.

    ``contents`` is None until the cell is assigned (or first read, for a sourced cell).
    """

    def __init__(self, contents: VariableTracker | None = None,
                 contents_source: Source | None = None, real_cell: Any = None) -> None:
        super().__init__()
        self.contents = contents
        self.contents_source = contents_source  # set for cells of functions from the inputs
        self.real_cell = real_cell

    def describe(self) -> str:
        return f"cell {self.contents!r}"

    def load(self, tx: Translator, name: str) -> VariableTracker:
        if self.real_cell is not None:
            # A real cell: what the trace last read or wrote through any closure holding it.
            known = tx.output.side_effects.cell_contents(self.real_cell)
            if known is not None:
                self.contents = known
            elif self.contents_source is not None:  # read for real once, guarded
                self.contents = tx.builder.wrap(self._read(name), self.contents_source)
                tx.output.side_effects.set_cell_contents(self.real_cell, self.contents)
        if self.contents is None:
            raise Unsupported(f"free variable {name!r} referenced before assignment",
                              break_type="user_exception")
        return self.contents

    def _read(self, name: str) -> Any:
        try:
            return self.real_cell.cell_contents
        except ValueError as error:
            raise Unsupported(f"free variable {name!r} referenced before assignment",
                              break_type="user_exception") from error

    def store(self, tx: Translator, value: VariableTracker) -> None:
        if self.real_cell is not None:
            if self.contents_source is None:
                raise Unsupported("assigning a closure variable of a function reached without "
                                  "a source to write it back through", break_type="side_effect")
            # A cell that outlives the frame: written back after the graph runs.
            tx.output.side_effects.store(self.contents_source, value)
            tx.output.side_effects.set_cell_contents(self.real_cell, value)
        else:
            tx.output.side_effects.write_local(self)
        self.contents = value


class BaseUserFunctionVariable(VariableTracker):
    """What inlining needs from any kind of user function."""

    callable_kind = True

    code: types.CodeType
    globals: dict[str, Any]

    def python_type(self) -> type:
        return types.FunctionType

    def truthy(self, tx: Translator) -> bool:
        return True  # a function defines neither __bool__ nor __len__: always true

    def defaults(self, tx: Translator) -> list[VariableTracker]:
        raise NotImplementedError

    def kwdefaults(self, tx: Translator) -> dict[str, VariableTracker]:
        raise NotImplementedError

    def closure_cells(self, tx: Translator) -> list[CellVariable]:
        raise NotImplementedError

    def globals_source(self) -> Source | None:
        """How to reach the function's globals when they are not the frame's own."""
        return None

    def call(self, tx, args, kwargs):
        return tx.inline_call(self, args, kwargs)

    def qualname(self) -> str:
        """The function's ``__qualname__`` (3.10's code objects do not carry it)."""
        return bytecode.qualname(self.code)

    def var_getattr(self, tx, name):
        if name == "__qualname__":
            return ConstantVariable(self.qualname())
        if name in ("__name__", "__module__"):
            return ConstantVariable(self.code.co_name if name == "__name__"
                                    else self.globals.get("__name__"))
        if name == "__code__":  # read-only inspection (co_varnames, co_argcount): a constant
            return ConstantVariable(self.code)
        if name == "__class__":  # a function's class cannot be reassigned (torchvision's
            return tx.wrap_unguarded(types.FunctionType)  # usage logging reads its name)
        if name == "__get__":  # binding by hand (LRScheduler's wrapper of optimizer.step)
            return FunctionGetVariable(self)
        if lookup_class_attr(types.FunctionType, name) is MISSING and \
                self.lacks_attribute(tx, name):
            # Not a function's attribute, nor one the program gave it (hasattr(f, "func"),
            # as the Python functools.partial asks of its argument).
            raise raise_real(AttributeError(f"'function' object has no attribute {name!r}"))
        raise Unsupported(f"attribute {name!r} of a function")

    def lacks_attribute(self, tx: Translator, name: str) -> bool:
        """Whether the function's ``__dict__`` certainly lacks ``name``: a function made in the
        frame has no attributes (storing one is a graph break)."""
        return True


class FunctionGetVariable(VariableTracker):
    """``function.__get__``: ``__get__(obj, type=None)`` binds the function to ``obj`` (a method
    inlined with it), and gives the function itself for ``obj`` None, as descriptors do."""

    callable_kind = True

    def __init__(self, fn: BaseUserFunctionVariable) -> None:
        super().__init__()
        self.fn = fn

    def describe(self) -> str:
        return f"{self.fn.describe()}.__get__"

    def call(self, tx, args, kwargs):
        if kwargs or not 1 <= len(args) <= 2:
            raise Unsupported("function.__get__ with other than (obj, type=None)")
        obj = args[0]
        if obj.is_constant() and obj.as_constant() is None:
            return self.fn
        return UserMethodVariable(self.fn, obj)


class UserFunctionVariable(BaseUserFunctionVariable):
    """A real Python function reached from the inputs (a global, an attribute, a closure)."""

    def __init__(self, fn: types.FunctionType, source: Source | None = None) -> None:
        super().__init__(source)
        self.fn = fn
        self.code = fn.__code__
        self.globals = fn.__globals__

    def describe(self) -> str:
        return self.fn.__qualname__

    def qualname(self) -> str:
        return self.fn.__qualname__

    def is_constant(self) -> bool:
        return False

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__doc__", "__module__"):
            # The function's own attributes, which functools.wraps / update_wrapper rewrite
            # (its code's names are what it was defined with), guarded when from the inputs.
            value = getattr(self.fn, name)
            if self.source is not None:
                return tx.builder.wrap(value, AttrSource(self.source, name))
            return ConstantVariable(value)
        if self.source is not None and name in self.fn.__dict__ and \
                lookup_class_attr(types.FunctionType, name) is MISSING:
            # An attribute the program gave the function (__wrapped__, a marker), guarded.
            return tx.builder.wrap(self.fn.__dict__[name], AttrSource(self.source, name))
        return super().var_getattr(tx, name)

    def lacks_attribute(self, tx, name):
        # Without a source no guard could see the function gain the attribute later.
        if self.source is None or name in self.fn.__dict__:
            return False
        tx.guards.not_shadowed(self.source, name)
        return True

    def call(self, tx, args, kwargs):
        handler = CALL_HANDLERS.get(self.fn)
        if handler is not None:
            return handler(tx, args, kwargs)
        folded = call_marked_constant(tx, self.fn, self.fn, args, kwargs)
        return folded if folded is not None else tx.inline_call(self, args, kwargs)

    def defaults(self, tx):
        values = self.fn.__defaults__ or ()
        if self.source is None:
            return [_wrap_unsourced(tx, v) for v in values]
        base = AttrSource(self.source, "__defaults__")
        return [tx.builder.wrap(v, ItemSource(base, i)) for i, v in enumerate(values)]

    def kwdefaults(self, tx):
        values = self.fn.__kwdefaults__ or {}
        if self.source is None:
            return {k: _wrap_unsourced(tx, v) for k, v in values.items()}
        base = AttrSource(self.source, "__kwdefaults__")
        return {k: tx.builder.wrap(v, ItemSource(base, k)) for k, v in values.items()}

    def closure_cells(self, tx):
        cells = self.fn.__closure__ or ()
        if self.source is None:
            return [self._unsourced_cell(tx, i, c) for i, c in enumerate(cells)]
        base = AttrSource(self.source, "__closure__")
        return [CellVariable(contents_source=AttrSource(ItemSource(base, i), "cell_contents"),
                             real_cell=c) for i, c in enumerate(cells)]

    def _unsourced_cell(self, tx, index: int, cell: types.CellType) -> CellVariable:
        """A cell of a function reached without a source (a method read through a guarded
        class). A list in it (a decorator's list of names) must be guarded to be traced, so it
        is read through the path to the function from its module, when there is one."""
        if type(cell.cell_contents) is list:
            source = definition_source(self.fn)
            if source is not None:
                closure = ItemSource(AttrSource(source, "__closure__"), index)
                return CellVariable(contents_source=AttrSource(closure, "cell_contents"),
                                    real_cell=cell)
        return CellVariable(_wrap_unsourced(tx, cell.cell_contents), real_cell=cell)

    def globals_source(self) -> Source | None:
        imported = module_globals_source(self.globals)
        if imported is not None:
            return imported  # bound directly, not walked to through the function every call
        return AttrSource(self.source, "__globals__") if self.source is not None else None

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.source_expr(self.source) if self.source else codegen.constant(self.fn)


def module_globals_source(globals_dict: dict[str, Any]) -> Source | None:
    """The source of an imported module's globals, if ``globals_dict`` is one (a method of a
    model class defined in another file reads its globals through this); a module's globals
    that ``sys.modules`` does not hold (a fresh import of it) are pinned as they are."""
    spec = globals_dict.get("__spec__")
    # The import name first: _collections_abc calls itself collections.abc in __name__.
    names = (getattr(spec, "name", None), globals_dict.get("__name__"))
    for name in names:
        module = sys.modules.get(name) if isinstance(name, str) else None
        if module is not None and getattr(module, "__dict__", None) is globals_dict:
            return ModuleGlobalsSource(name, globals_dict)
    if isinstance(names[1], str) and getattr(spec, "name", None) == names[1]:
        return FreshModuleGlobalsSource(names[1], globals_dict)
    return None


def definition_source(fn: types.FunctionType | type) -> Source | None:
    """A source reading ``fn`` (a function or a class) from its module by its qualified name
    (``Class.method``, through the class's ``__dict__`` values), if that path leads to ``fn``
    itself."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    qualname = getattr(fn, "__qualname__", "")
    if module is None or "<" in qualname:
        return None
    source = module_globals_source(vars(module))
    if source is None:
        return None
    first, *rest = qualname.split(".")
    value, source = vars(module).get(first), ItemSource(source, first)
    for name in rest:
        if not isinstance(value, type) or name not in vars(value):
            return None
        value, source = vars(value)[name], AttrSource(source, name)
    return source if value is fn else None


def _wrap_unsourced(tx: Translator, value: Any) -> VariableTracker:
    return tx.wrap_unguarded(value)


class NestedFunctionVariable(BaseUserFunctionVariable):
    """A function made by MAKE_FUNCTION inside the traced frame (def, lambda, comprehension)."""

    def __init__(self, code: types.CodeType, globals_dict: dict[str, Any],
                 defaults: TupleVariable | None, kwdefaults: DictVariable | None,
                 closure: TupleVariable | None, parent_globals_source: Source | None) -> None:
        super().__init__()
        self.code = code
        self.globals = globals_dict
        self._defaults = defaults.items if defaults is not None else []
        self._kwdefaults = dict(kwdefaults.items) if kwdefaults is not None else {}
        self._closure = closure.items if closure is not None else []
        self._globals_source = parent_globals_source
        self.qualified_name: str | None = None  # 3.10: MAKE_FUNCTION's, not the code's
        self._annotations: list[VariableTracker] = []  # name, value, name, value...

    def describe(self) -> str:
        return self.qualname()

    def qualname(self) -> str:
        return self.qualified_name or bytecode.qualname(self.code)

    def set_function_attribute(self, flag: int, value: VariableTracker) -> None:
        """3.13's SET_FUNCTION_ATTRIBUTE: ``flag`` is 3.11's MAKE_FUNCTION bit of the value."""
        if flag == 0x01:
            self._defaults = value.items
        elif flag == 0x02:
            self._kwdefaults = dict(value.items)
        elif flag == 0x08:
            self._closure = value.items
        elif flag == 0x04:  # not needed to run it, but the function made anew carries them
            self._annotations = list(value.items) if isinstance(value, TupleVariable) else \
                [wrap_constant(v) for v in value.as_constant()]

    def defaults(self, tx):
        return list(self._defaults)

    def kwdefaults(self, tx):
        return dict(self._kwdefaults)

    def closure_cells(self, tx):
        return list(self._closure)

    def globals_source(self) -> Source | None:
        return self._globals_source

    def reconstruct(self, codegen: Codegen) -> str:
        """The function made anew after the graph (alive at a graph break, or returned).

        Only when its cells are cells of the inputs' functions: a cell of the frame itself is
        rebuilt by the resume function, and the two copies would drift apart.
        """
        if self._globals_source is not None:
            raise Unsupported("a function made by an inlined function of another module cannot "
                              "leave the compiled frame")
        cells = []
        for cell in self._closure:
            if cell.contents_source is None:
                raise Unsupported(f"the function {self.qualname()} captures "
                                  "variables of the compiled frame and cannot leave it")
            cells.append(_cell_expr(cell.contents_source))
        return codegen.remember(self, lambda cg: self._make(cg, cells))

    def _make(self, codegen: Codegen, cells: list[str]) -> str:
        defaults = ", ".join(d.reconstruct(codegen) for d in self._defaults)
        kwdefaults = ", ".join(f"{k!r}: {v.reconstruct(codegen)}"
                               for k, v in self._kwdefaults.items())
        closure = f"({', '.join(cells)},)" if cells else "None"
        annotations = "".join(f"{a.reconstruct(codegen)}, " for a in self._annotations)
        return (f"{codegen.constant(make_function)}({codegen.constant(self.code)}, "
                f"{GLOBALS_NAME}, ({defaults}{',' if defaults else ''}), {{{kwdefaults}}}, "
                f"{closure}, {self.qualname()!r}, ({annotations}))")


def _cell_expr(contents_source: Source) -> str:
    """The cell object whose contents ``contents_source`` reads."""
    if isinstance(contents_source, ClosureSource):
        return f"{FN_NAME}.__closure__[{contents_source.index}]"
    return contents_source.base.expr()


def make_function(code: types.CodeType, globals_dict: dict, defaults: tuple,
                  kwdefaults: dict, closure: tuple | None, qualname: str,
                  annotations: tuple = ()) -> types.FunctionType:
    """Recreate a function defined inside a compiled frame, after the graph ran
    (``annotations``: MAKE_FUNCTION's flat tuple, name, value, name, value...)."""
    fn = types.FunctionType(code, globals_dict, code.co_name, defaults or None, closure)
    fn.__kwdefaults__ = kwdefaults or None
    fn.__qualname__ = qualname
    fn.__annotations__ = dict(zip(annotations[::2], annotations[1::2]))
    return fn


class LruCacheVariable(VariableTracker):
    """A ``functools.lru_cache`` wrapper: a call traces the wrapped function, when what the
    cache would hand back cannot differ from that: every argument is a hashable constant, the
    call has no side effect, and its result is an immutable constant."""

    callable_kind = True

    def __init__(self, wrapper: Any, source: Source | None = None) -> None:
        super().__init__(source)
        self.wrapper = wrapper

    def describe(self) -> str:
        return f"lru_cache({getattr(self.wrapper, '__qualname__', '?')})"

    def python_type(self) -> type:
        return type(self.wrapper)

    def call(self, tx, args, kwargs):
        values = [*args, *kwargs.values()]
        if not all(v.is_constant() and trace_rules.hashable(v.as_constant()) for v in values):
            raise Unsupported(f"{self.describe()} called with arguments that are not hashable "
                              "constants")
        wrapped = self.wrapper.__wrapped__
        folded = call_marked_constant(tx, wrapped, self.wrapper, args, kwargs)
        if folded is not None:
            return folded
        fn = tx.builder.wrap(wrapped, AttrSource(self.source, "__wrapped__")) \
            if self.source is not None else UserFunctionVariable(wrapped)
        ledger = tx.output.side_effects
        before = (len(ledger.mutated_containers), len(ledger.stores), len(ledger.calls))
        result = fn.call(tx, args, kwargs)
        after = (len(ledger.mutated_containers), len(ledger.stores), len(ledger.calls))
        if after != before or not (isinstance(result, ConstantVariable) or
                                   (isinstance(result, TupleVariable) and result.is_constant())):
            raise Unsupported(f"{self.describe()}: the wrapped function has side effects or a "
                              "result that is not an immutable constant, so the cache matters")
        return result

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.source_expr(self.source) if self.source else \
            codegen.constant(self.wrapper)


def call_marked_constant(tx: Translator, marked: Any, fn: Any,
                         args: list[VariableTracker], kwargs: dict[str, VariableTracker]
                         ) -> VariableTracker | None:
    """``fn(*args)`` run for real while tracing, its result a constant, when ``marked`` carries
    torch's ``assume_constant_result`` mark (``_dynamo_marked_constant``: transformers' install
    probes such as ``is_torch_available``) and every argument is a constant, as torch.compile
    does; None otherwise. Like torch.compile, the result gets no guard: the mark promises it is
    fixed for the life of the process."""
    if not getattr(marked, "_dynamo_marked_constant", False):
        return None
    values = [*args, *kwargs.values()]
    if not all(v.is_constant() for v in values):
        return None
    result = fn(*[a.as_constant() for a in args],
                **{k: v.as_constant() for k, v in kwargs.items()})
    return tx.wrap_unguarded(result) if is_constant_value(result) else None



class UserMethodVariable(VariableTracker):
    """``obj.method`` for a Python method: inlined with ``obj`` as the first argument."""

    callable_kind = True

    def __init__(self, fn: BaseUserFunctionVariable, obj: VariableTracker) -> None:
        super().__init__()
        self.fn, self.obj = fn, obj

    def describe(self) -> str:
        return f"method {self.fn.describe()}"

    def python_type(self) -> type:
        return types.MethodType

    def call(self, tx, args, kwargs):
        return self.fn.call(tx, [self.obj, *args], kwargs)

    def var_getattr(self, tx, name):
        if name == "__func__":
            return self.fn
        if name == "__self__":
            return self.obj
        return self.fn.var_getattr(tx, name)  # __name__, __qualname__, __doc__, __module__

    def reconstruct(self, codegen: Codegen) -> str:
        """The bound method made anew from its function and object (alive at a graph break)."""
        function, obj = self.fn.reconstruct(codegen), self.obj.reconstruct(codegen)
        return f"{codegen.constant(types.MethodType)}({function}, {obj})"


def bind_arguments(code: types.CodeType, args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker], defaults: list[VariableTracker],
                   kwdefaults: dict[str, VariableTracker]) -> dict[str, VariableTracker]:
    """Python's argument binding, on trackers. A TypeError eager would raise is reported as one."""
    names = code.co_varnames
    positional = names[:code.co_argcount]
    keyword_only = names[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    index = code.co_argcount + code.co_kwonlyargcount
    varargs = names[index] if code.co_flags & CO_VARARGS else None
    index += bool(varargs)
    varkw = names[index] if code.co_flags & CO_VARKEYWORDS else None

    bound: dict[str, VariableTracker] = dict(zip(positional, args))
    extra = args[len(positional):]
    if extra and varargs is None:
        raise _type_error(f"{code.co_name}() takes {len(positional)} positional arguments "
                          f"but {len(args)} were given")
    if varargs is not None:
        bound[varargs] = TupleVariable(list(extra))
    extra_kwargs: dict[str, VariableTracker] = {}
    for name, value in kwargs.items():
        if name in positional[code.co_posonlyargcount:] or name in keyword_only:
            if name in bound:
                raise _type_error(f"{code.co_name}() got multiple values for argument {name!r}")
            bound[name] = value
        elif varkw is not None:
            extra_kwargs[name] = value
        else:
            raise _type_error(f"{code.co_name}() got an unexpected keyword argument {name!r}")
    first_default = len(positional) - len(defaults)
    for i, name in enumerate(positional):
        if name not in bound:
            if i < first_default:
                raise _type_error(f"{code.co_name}() missing required argument {name!r}")
            bound[name] = defaults[i - first_default]
    for name in keyword_only:
        if name not in bound:
            if name not in kwdefaults:
                raise _type_error(f"{code.co_name}() missing keyword-only argument {name!r}")
            bound[name] = kwdefaults[name]
    if varkw is not None:
        bound[varkw] = DictVariable(extra_kwargs)
    return bound


def _type_error(message: str) -> Unsupported:
    return Unsupported(f"TypeError: {message}", break_type="user_exception")
