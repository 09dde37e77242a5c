"""Sources: where a traced value came from, so guards and generated code can reach it again.

A source prints the way torch.compile users read it (``L['x']``, ``G['w']``, ``L['self'].w``,
``L['xs'][0]``) and renders as a Python expression (:meth:`Source.expr`) inside the functions that
graphlift generates for guards and cache hits. Those functions take the frame's arguments under
their own names, the function object as ``__gl_fn`` and the module globals as ``__gl_G``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from graphlift.exc import Unsupported

FN_NAME = "__gl_fn"  # the function object, for closure cells
GLOBALS_NAME = "__gl_G"  # the function's module globals


class SourceKind(enum.Enum):
    """The closed set of places a value can come from."""

    LOCAL = "local"  # an argument of the frame
    GLOBAL = "global"  # a module global of the frame's function
    CLOSURE = "closure"  # a free variable (closure cell) of the frame's function
    ATTR = "attr"  # an attribute of another source
    ITEM = "item"  # an index into another source (tuple, list, dict)
    BASE_ITEM = "base_item"  # an item of a builtin's subclass, read through the builtin's method
    MODULE_MEMBER = "module_member"  # a submodule, parameter or buffer of a pinned nn.Module
    MODULE_GLOBALS = "module_globals"  # the globals of an imported Python module
    VIEW_DICT = "view_dict"  # the dict that a dict_keys/dict_values/dict_items view shows
    FLOAT_TENSOR = "float_tensor"  # a float of another source, as a 0-d float64 tensor
    NUMPY_TENSOR = "numpy_tensor"  # an ndarray of another source, as the tensor over its memory
    PLAIN_TENSOR = "plain_tensor"  # a tensor subclass's object of another source, as a Tensor
    ENVIRON = "environ"  # an environment variable's value, os.environ.get(name) (None if unset)
    DICT_VALUE = "dict_value"  # the value at a position of a dict (hook tables keyed by handle ids)
    DICT_KEY = "dict_key"  # the key at a position of a dict (an optimizer's state, by parameter)
    KEYED_ITEM = "keyed_item"  # a dict's value at a key read from another source (a parameter)


@dataclass(frozen=True)
class Source:
    """Base class; subclasses are frozen dataclasses so sources hash and compare by value."""

    kind = SourceKind.LOCAL

    def name(self) -> str:
        """How logs and guard strings show this source."""
        raise NotImplementedError

    def expr(self) -> str:
        """A Python expression that evaluates to the value inside generated code."""
        raise NotImplementedError

    def root(self) -> Source:
        """The source this one is reached through (itself for locals, globals and cells)."""
        return self

    def render(self, bind: Callable[[Any], str]) -> str:
        """Like :meth:`expr`, but objects pinned at compile time become names made by ``bind``.

        A pinned object's identity is proven by other guards (see :class:`ModuleMemberSource`),
        so generated code may refer to it directly instead of walking the path every call.
        """
        return self.expr()


# Parameters of resume functions that hold the stack and the cells of the frame they resume
# (``__gl_stack5``, ``__gl_cell6_c``; see graphlift.resume).
RESUME_STACK_PREFIX = "__gl_stack"
RESUME_CELL_PREFIX = "__gl_cell"


@dataclass(frozen=True)
class LocalSource(Source):
    local_name: str
    kind = SourceKind.LOCAL

    def name(self) -> str:
        """``L['x']``; a resume function's own parameters by what they hold (never the
        ``__gl_`` names users did not write): ``L['c']`` for the cell of ``c``,
        ``<stack value 5 at the graph break>`` for a value the break left on the stack."""
        name = self.local_name
        if name.startswith(RESUME_STACK_PREFIX):
            return f"<stack value {name[len(RESUME_STACK_PREFIX):]} at the graph break>"
        if name.startswith(RESUME_CELL_PREFIX):
            name = name.split("_", 4)[-1]  # __gl_cell3_c -> c
        return f"L[{name!r}]"

    def expr(self) -> str:
        return self.local_name


@dataclass(frozen=True)
class GlobalSource(Source):
    global_name: str
    kind = SourceKind.GLOBAL

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def expr(self) -> str:
        return f"{GLOBALS_NAME}[{self.global_name!r}]"


@dataclass(frozen=True)
class ClosureSource(Source):
    """A free variable; shown as a local because the frame sees it as one."""

    var_name: str
    index: int
    kind = SourceKind.CLOSURE

    def name(self) -> str:
        return f"L[{self.var_name!r}]"

    def expr(self) -> str:
        return f"{FN_NAME}.__closure__[{self.index}].cell_contents"


@dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str
    kind = SourceKind.ATTR

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.attr}"

    def render(self, bind: Callable[[Any], str]) -> str:
        return f"{self.base.render(bind)}.{self.attr}"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class ItemSource(Source):
    base: Source
    index: object  # int or a hashable dict key with an exact repr
    kind = SourceKind.ITEM

    def name(self) -> str:
        return f"{self.base.name()}[{self.index!r}]"

    def expr(self) -> str:
        return f"{self.base.expr()}[{self.index!r}]"

    def render(self, bind: Callable[[Any], str]) -> str:
        return f"{self.base.render(bind)}[{self.index!r}]"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class BaseItemSource(Source):
    """An item of an object of a subclass of dict, list or tuple, read through the builtin's own
    ``__getitem__`` (``dict.__getitem__(L['d'], 'k')``): an overridden ``__getitem__`` never runs
    in a guard or in the run function."""

    base: Source
    index: object  # int or a hashable dict key with an exact repr
    owner: str  # "dict", "list" or "tuple": a builtin name, resolved in generated code
    kind = SourceKind.BASE_ITEM

    def name(self) -> str:
        return f"{self.owner}.__getitem__({self.base.name()}, {self.index!r})"

    def expr(self) -> str:
        return f"{self.owner}.__getitem__({self.base.expr()}, {self.index!r})"

    def render(self, bind: Callable[[Any], str]) -> str:
        return f"{self.owner}.__getitem__({self.base.render(bind)}, {self.index!r})"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class ModuleMemberSource(Source):
    """A submodule, parameter or buffer of an ``nn.Module``, read from its registry dict.

    Shown the way users write it (``L['self'].layers[0].weight``); evaluated through the registry
    (``self._modules['layers']._modules['0']._parameters['weight']``), which skips the slow
    ``Module.__getattr__``. The module guards (identity of the root module, and the structure
    version that registration hooks bump) prove that the member is still ``value``, so
    generated code may use ``value`` itself (:meth:`render`): no path walk on a cache hit.
    """

    base: Source
    member: str
    registry: str  # "_modules", "_parameters" or "_buffers"
    value: Any = field(compare=False, repr=False)
    indexed: bool = False  # a ModuleList/Sequential/ParameterList item: shown as base[0]
    pinned: bool = True  # False: reached by path from a structurally guarded module
    kind = SourceKind.MODULE_MEMBER

    def name(self) -> str:
        if self.indexed:
            return f"{self.base.name()}[{self.member}]"
        if not self.member.isidentifier():  # a ModuleDict key
            return f"{self.base.name()}[{self.member!r}]"
        return f"{self.base.name()}.{self.member}"

    def expr(self) -> str:
        return f"{self.base.expr()}.{self.registry}[{self.member!r}]"

    def root(self) -> Source:
        return self.base.root()

    def render(self, bind: Callable[[Any], str]) -> str:
        if not self.pinned:
            return f"{self.base.render(bind)}.{self.registry}[{self.member!r}]"
        return bind(self.value)


@dataclass(frozen=True)
class ModuleGlobalsSource(Source):
    """The globals of an imported module: where an inlined function from that module reads.

    ``value`` is the module's ``__dict__`` (a function's ``__globals__`` cannot be reassigned, so
    it stays the same dict); generated code binds it directly.
    """

    module_name: str
    value: Any = field(compare=False, repr=False)
    kind = SourceKind.MODULE_GLOBALS

    def name(self) -> str:
        return f"sys.modules[{self.module_name!r}].__dict__"

    def expr(self) -> str:
        return f"__import__('sys').modules[{self.module_name!r}].__dict__"

    def render(self, bind: Callable[[Any], str]) -> str:
        return bind(self.value)


@dataclass(frozen=True)
class FreshModuleGlobalsSource(ModuleGlobalsSource):
    """The globals of a module that is not ``sys.modules[module_name]`` (a fresh import, as
    ``test.support.import_helper.import_fresh_module`` makes): reached only as the pinned dict
    (generated code binds it), never by its name, which would find the other module."""

    def name(self) -> str:
        return f"<globals of a fresh import of {self.module_name}>"

    def expr(self) -> str:
        raise Unsupported(f"{self.name()} has no path that generated code could walk")


@dataclass(frozen=True)
class DictValueSource(Source):
    """The value at ``position`` in a dict's order, whatever its key.

    For tables whose keys are incidental: a module's hook dicts are keyed by RemovableHandle
    ids, a process-wide counter, so a fresh module with the same hooks has other keys.
    """

    base: Source
    position: int
    kind = SourceKind.DICT_VALUE

    def name(self) -> str:
        return f"list({self.base.name()}.values())[{self.position}]"

    def expr(self) -> str:
        return f"list(dict.values({self.base.expr()}))[{self.position}]"

    def render(self, bind: Callable[[Any], str]) -> str:
        return f"list(dict.values({self.base.render(bind)}))[{self.position}]"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class DictKeySource(Source):
    """The key at ``position`` in a dict's order: a dict keyed by objects (an optimizer's state,
    keyed by its parameters) is read key by key, each key's value by :class:`DictValueSource`."""

    base: Source
    position: int
    kind = SourceKind.DICT_KEY

    def name(self) -> str:
        return f"list({self.base.name()}.keys())[{self.position}]"

    def expr(self) -> str:
        return f"list(dict.keys({self.base.expr()}))[{self.position}]"

    def render(self, bind: Callable[[Any], str]) -> str:
        return f"list(dict.keys({self.base.render(bind)}))[{self.position}]"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class KeyedItemSource(Source):
    """A dict's value at the key that ``key`` reads (an optimizer's state entry of a parameter
    read from its ``param_groups``), through ``dict.__getitem__``: one lookup, where
    :class:`DictValueSource` walks the dict to a position."""

    base: Source
    key: Source
    kind = SourceKind.KEYED_ITEM

    def name(self) -> str:
        return f"{self.base.name()}[{self.key.name()}]"

    def expr(self) -> str:
        return f"dict.__getitem__({self.base.expr()}, {self.key.expr()})"

    def render(self, bind: Callable[[Any], str]) -> str:
        return f"dict.__getitem__({self.base.render(bind)}, {self.key.render(bind)})"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class ViewDictSource(Source):
    """The dict that a ``dict_keys``, ``dict_values`` or ``dict_items`` view shows.

    Shown as ``view.mapping``; ``mapping`` is only a read-only proxy, so generated code reaches
    the dict itself as the view's one referent (a view's only reference is to its dict).
    """

    base: Source
    kind = SourceKind.VIEW_DICT

    def name(self) -> str:
        return f"{self.base.name()}.mapping"

    def expr(self) -> str:
        return f"__import__('gc').get_referents({self.base.expr()})[0]"

    def render(self, bind: Callable[[Any], str]) -> str:
        return f"__import__('gc').get_referents({self.base.render(bind)})[0]"

    def root(self) -> Source:
        return self.base.root()


def _as_float64_tensor(value: float) -> Any:
    return torch.tensor(value, dtype=torch.float64)


@dataclass(frozen=True)
class FloatTensorSource(Source):
    """A dynamic float fed to the graph as a 0-d float64 tensor (torch.compile's form of it).

    Shown as the float itself; the run function converts it on every call.
    """

    base: Source
    kind = SourceKind.FLOAT_TENSOR

    def name(self) -> str:
        return self.base.name()

    def expr(self) -> str:
        return f"__import__('torch').tensor({self.base.expr()}, dtype=__import__('torch').float64)"

    def render(self, bind: Callable[[Any], str]) -> str:
        return f"{bind(_as_float64_tensor)}({self.base.render(bind)})"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class NumpyTensorSource(Source):
    """An ndarray input fed to the graph as ``torch.from_numpy(array)``: a tensor over the
    array's own memory, made anew on every call."""

    base: Source
    kind = SourceKind.NUMPY_TENSOR

    def name(self) -> str:
        return f"torch.from_numpy({self.base.name()})"

    def expr(self) -> str:
        return f"__import__('torch').from_numpy({self.base.expr()})"

    def render(self, bind: Callable[[Any], str]) -> str:
        return f"{bind(torch.from_numpy)}({self.base.render(bind)})"

    def root(self) -> Source:
        return self.base.root()


@dataclass(frozen=True)
class PlainTensorSource(Source):
    """A tensor subclass's object fed to the graph as a plain ``torch.Tensor`` over the same
    memory and autograd history (``as_subclass(torch.Tensor)``, which runs no
    ``__torch_function__``): the graph's own operations must not dispatch to the subclass
    again, and its guards must not run the subclass's Python."""

    base: Source
    kind = SourceKind.PLAIN_TENSOR

    def name(self) -> str:
        return f"as_tensor({self.base.name()})"

    def expr(self) -> str:
        return f"__import__('torch')._C.TensorBase.as_subclass({self.base.expr()}, " \
            "__import__('torch').Tensor)"

    def render(self, bind: Callable[[Any], str]) -> str:
        return f"{bind(as_plain_tensor)}({self.base.render(bind)})"

    def root(self) -> Source:
        return self.base.root()


def as_plain_tensor(value: torch.Tensor) -> torch.Tensor:
    """The plain ``torch.Tensor`` over a subclass object's memory (see PlainTensorSource)."""
    return torch._C.TensorBase.as_subclass(value, torch.Tensor)


@dataclass(frozen=True)
class EnvironSource(Source):
    """The value of one environment variable, or None when it is unset: what a trace that read
    ``os.environ`` relied on (guarded, so setting the variable recompiles)."""

    variable: str
    kind = SourceKind.ENVIRON

    def name(self) -> str:
        return f"os.environ.get({self.variable!r})"

    def expr(self) -> str:
        return f"__import__('os').environ.get({self.variable!r})"


def is_pinned(source: Source) -> bool:
    """Whether generated code may refer to the source's object directly (see ``render``)."""
    if source.kind is SourceKind.MODULE_MEMBER:
        return source.pinned
    return source.kind is SourceKind.MODULE_GLOBALS


def is_module_member(source: Source) -> bool:
    """A parameter, buffer or submodule of a guarded module (pinned or structural): its
    shapes are static and its metadata is proven by the module guards."""
    return source.kind is SourceKind.MODULE_MEMBER


def placeholder_name(source: Source) -> str:
    """An FX-friendly name for a graph input: ``L['x'].w`` -> ``L_x_w``."""
    text = source.name()
    cleaned = "".join(ch if ch.isalnum() else "_" for ch in text)
    return "_".join(filter(None, cleaned.split("_")))
