"""``nn.Module`` instances while tracing: calls inline ``forward``, parameters become graph inputs.

A module read from the frame's inputs (``L['self']``, ``G['model']``) is **pinned**: one ID_MATCH
guard proves it is the object seen while tracing, and one integer compare proves that none of the
modules the trace looked into has had a parameter, buffer or submodule assigned or registered
since (torch's global registration hooks bump :data:`STRUCTURE_VERSION`). Together they prove
that every member reached through a module's registries (``_modules``, ``_parameters``,
``_buffers``) is the very object seen while tracing, so members carry a
:class:`~graphlift.sources.ModuleMemberSource` that generated code binds directly:

- submodules are :class:`NNModuleVariable` too, with no guard of their own;
- parameters and buffers become graph inputs (so an optimizer step that changes them in place
  needs no recompile) with no tensor match; :meth:`GuardBuilder.nn_module_tensor` checks the
  flags that can change in place (requires_grad, and dtype/device of one parameter per root);
- plain attributes (``training``, ``eps``, a config object) are read from the real module and
  guarded like any other input, through the bound module (``__gl_c3().training is True``).

Calling a module runs what ``Module._call_impl`` runs: forward pre-hooks, ``forward`` (inlined:
the whole module tree becomes one graph), forward hooks. Modules that have hooks when traced
guard their hook dicts; hooks added later to a module that had none are not seen (like
torch.compile's default, ``skip_nnmodule_hook_guards``). Backward hooks and global module hooks
are refused (the frame splits at the call).

What the guards do not see (call ``graphlift.reset()`` after doing it): deleting a parameter,
buffer or submodule (``del m.w``), setting a parameter to None, writing the registry dicts
directly, replacing a method on a module class or instance after compiling, and in-place changes
of a parameter's shape or of one module's dtype (``resize_``, ``p.data = ...``,
``model.head.half()``); ``model.half()`` and ``model.to(device)`` are seen.

**Regional compilation.** A module passed as an argument (``L['self']`` of a compiled
``forward``, ``L['block']``) is guarded by its *structure* instead of its identity, as
torch.compile's ``inline_inbuilt_nn_modules`` does (``config.share_module_entries``): one
:func:`structure_id` compare, memoized per instance, proves the classes, registry keys,
parameter and buffer shapes, strides, dtypes and devices, the presence of hooks and torch.nn's
hyperparameters of the whole tree; members are walked to through their registries on each call
(``ModuleMemberSource(pinned=False)``), so the twelve identical blocks of a decoder compiled
one by one share one cache entry, each block running with its own parameters. Plain attributes of
user modules are guarded through the path as for pinned modules. The memo is recomputed when
the tree changes in place (:class:`_Memo`): a hook registered on any module of it or globally,
``del m.w``, ``m.forward = f``, a registry written directly. Not seen: a hook dict written
directly (``m._forward_hooks[k] = f``, no handle made) or replaced by another dict of the same
length, and a plain attribute replaced in place that no trace read.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable
from typing import Any

from torch import nn

from graphlift.config import config
from graphlift.exc import Unsupported
from graphlift.module_structure import (
    STRUCTURE_VERSION,
    has_global_hooks,
    requires_grad_flags,
    structure_id,
    watch,
)
from graphlift.sources import (
    AttrSource,
    DictValueSource,
    ModuleMemberSource,
    Source,
    SourceKind,
)
from graphlift.variables.base import (
    MISSING,
    Translator,
    VariableTracker,
    lookup_class_attr,
    raise_real,
)
from graphlift.variables.constant import ConstantVariable, is_constant_value
from graphlift.variables.containers import DictVariable, ListVariable, TupleVariable
from graphlift.variables.iterators import IteratorVariable
from graphlift.variables.objects import (
    CONSTRUCTOR_FINDERS,
    ClassVariable,
    UserObjectVariable,
    bind_class_attr,
    register_constructors,
)
from graphlift.variables.symbolic import static_int
from graphlift.variables.tensor import TensorVariable


def wrap_module(tx: Translator, module: nn.Module, source: Source) -> NNModuleVariable:
    """The builder's row for modules reached from the inputs: an argument or a free variable of
    the frame is guarded by its structure (instances alike share the entry: a closure made per
    call over a fresh module, too), anything else pinned by identity."""
    local = source.kind in (SourceKind.LOCAL, SourceKind.CLOSURE)
    if config.share_module_entries and local:
        tx.guards.nn_module_structure(source, module, structure_id, requires_grad_flags)
        return one_tracker(tx, module, source, lambda: NNModuleVariable(module, source, False))
    tx.guards.nn_module_root(source, module, STRUCTURE_VERSION)
    if local:  # an argument may also be a member of another (``f(m, m.inner)``)
        return one_tracker(tx, module, source, lambda: NNModuleVariable(module, source))
    return NNModuleVariable(module, source)


def one_tracker(tx: Translator, module: nn.Module, source: Source,
                make: Callable[[], NNModuleVariable]) -> NNModuleVariable:
    """The trace's one tracker of ``module`` (``make`` builds it the first time): an attribute
    written through one path (``m.inner.calls += 1``, ``self.calls += 1`` in its forward, an
    argument that is also ``m.inner``) is seen through every other. A second path to it is
    guarded to lead to the same object."""
    known = tx.output.side_effects.tracker_of(module)
    if known is None:
        known = make()
        tx.output.side_effects.keep_tracker(module, known)
    elif known.source != source:
        tx.guards.same_object(source, known.source)
    return known


# -- the tracker -------------------------------------------------------------------------------
_REGISTRIES = ("_parameters", "_buffers", "_modules")  # Module.__getattr__'s lookup order
_INDEXED = (nn.ModuleList, nn.Sequential, nn.ParameterList)  # members "0", "1", ... shown as [0]


class NNModuleVariable(UserObjectVariable):
    """An ``nn.Module`` read from the inputs (pinned) or reached through a pinned module."""

    def __init__(self, module: nn.Module, source: Source | None = None,
                 pinned: bool = True) -> None:
        super().__init__(module, source)
        self.module = module
        self.pinned = pinned  # False: guarded by structure, members walked to by path
        if source is not None:
            watch(module)

    def describe(self) -> str:
        return type(self.module).__qualname__

    def truthy(self, tx: Translator) -> bool:
        if self._native("__len__") is not None:
            return len(self.module) > 0
        return super().truthy(tx)

    # -- attributes ----------------------------------------------------------------------------
    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        """``Module.__getattribute__`` then ``Module.__getattr__``, on the real module."""
        if name in self.attrs:  # stored earlier in this trace
            return self.attrs[name]
        cls = type(self.module)
        if name == "__class__":
            return ClassVariable(cls)
        class_attr = lookup_class_attr(cls, name)
        if hasattr(type(class_attr), "__set__"):  # a data descriptor (property) wins
            return bind_class_attr(tx, self, cls, name, class_attr, None)
        instance_dict = self.module.__dict__
        if name in instance_dict:
            return self._plain_attr(tx, name, instance_dict[name])
        if class_attr is not MISSING:
            if self.source is not None:
                tx.guards.not_shadowed(self.source, name)  # module.method = ... later would win
            native = NATIVE_METHODS.get(class_attr) if isinstance(class_attr, types.FunctionType) \
                else None
            if native is not None:
                return NativeMethodVariable(self, name, native)
            return bind_class_attr(tx, self, cls, name, class_attr, None)
        for registry in _REGISTRIES:
            if name in instance_dict.get(registry, ()):
                return self.member(tx, registry, name)
        if lookup_class_attr(cls, "__getattr__") is not nn.Module.__getattr__:
            raise Unsupported(f"{cls.__qualname__}.__getattr__ is not traced")
        if self.source is not None:
            tx.guards.attr_absent(self.source, name)  # hasattr(module, name) was False
        raise Unsupported(f"'{cls.__qualname__}' object has no attribute {name!r}",
                          break_type="user_exception")

    def _plain_attr(self, tx: Translator, name: str, value: Any) -> VariableTracker:
        if self.source is None:
            return tx.wrap_unguarded(value)
        source = AttrSource(self.source, name)
        if name != "training" and is_constant_value(value) and \
                type(self.module).__module__.startswith("torch.nn.") and \
                not config.guard_torch_module_constants:
            # A hyperparameter of torch's own layer (Dropout.p, LayerNorm.eps): set when the
            # layer was built, and not guarded (config.guard_torch_module_constants).
            return ConstantVariable(value, source)
        if type(value) is int:
            return static_int(tx, value, source)  # never a symbol (dynamic_shapes)
        return tx.builder.wrap(value, source)

    def member(self, tx: Translator, registry: str, name: str) -> VariableTracker:
        """A submodule, parameter or buffer, reached by identity through the pinned module."""
        value = self.module.__dict__[registry][name]
        if value is None:
            return ConstantVariable(None)
        if self.source is None:
            raise Unsupported(f"a member of {self!r}, a module reached without a source")
        source = ModuleMemberSource(self.source, name, registry, value,
                                    indexed=isinstance(self.module, _INDEXED), pinned=self.pinned)
        if isinstance(value, nn.Module):
            return one_tracker(tx, value, source,
                               lambda: NNModuleVariable(value, source, self.pinned))
        return tx.builder.wrap(value, source)

    def member_path(self, tx: Translator, dotted: str) -> VariableTracker:
        """``"blocks.0.attn.weight"`` (a name from ``named_parameters``) as a member tracker."""
        owner: VariableTracker = self
        for part in dotted.split("."):
            module = owner.module
            registry = next((r for r in _REGISTRIES if part in module.__dict__.get(r, ())), None)
            if registry is None:
                raise Unsupported(f"{dotted!r} is not a registered member of {self!r}")
            owner = owner.member(tx, registry, part)
        return owner

    def store_attr(self, tx: Translator, name: str, value: VariableTracker) -> None:
        """A plain attribute store goes to the side-effect ledger; members cannot change."""
        registered = any(name in self.module.__dict__.get(r, ()) for r in _REGISTRIES)
        if registered or isinstance(value, NNModuleVariable) or \
                (isinstance(value, TensorVariable) and value.python_type() is nn.Parameter):
            raise Unsupported(f"assigning {self.describe()}.{name} inside the compiled frame "
                              "changes the module's parameters, buffers or submodules",
                              break_type="side_effect",
                              hints=("assign it outside the compiled function",))
        if lookup_class_attr(type(self.module), "__setattr__") is nn.Module.__setattr__:
            self.generic_setattr(tx, name, value)  # a plain attribute: what it would store
        else:
            super().store_attr(tx, name, value)  # the class's own __setattr__

    # -- calls ---------------------------------------------------------------------------------
    def call(self, tx: Translator, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``module(*args)``: the class's own ``__call__`` inlined, else :meth:`call_impl`."""
        if lookup_class_attr(type(self.module), "__call__") is not nn.Module.__call__:
            # A class with its own __call__ (transformers' GradientCheckpointingLayer) is
            # inlined; its ``super().__call__(...)`` comes back to call_impl (NATIVE_METHODS).
            return self.call_own_dunder(tx, args, kwargs)
        return self.call_impl(tx, args, kwargs)

    def call_impl(self, tx: Translator, args: list[VariableTracker],
                  kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """``Module._call_impl``: pre-hooks, forward (inlined), hooks."""
        module = self.module
        if module._backward_hooks or module._backward_pre_hooks or has_global_hooks():
            raise Unsupported(f"{self.describe()} has backward hooks or there are global module "
                              "hooks; graphlift traces forward hooks only",
                              break_type="unsupported_call")
        hooks = self._hooks(tx)
        for hook_id, hook in hooks["_forward_pre_hooks"]:
            if hook_id in module._forward_pre_hooks_with_kwargs:
                result = hook.call(tx, [self, TupleVariable(args), DictVariable(kwargs)], {})
                if not _is_none(result):
                    new_args, new_kwargs = result.unpack(tx)
                    args, kwargs = new_args.unpack(tx), dict(new_kwargs.items)
            else:
                result = hook.call(tx, [self, TupleVariable(args)], {})
                if not _is_none(result):
                    args = result.unpack(tx) if isinstance(result, TupleVariable) else [result]
        output = self.var_getattr(tx, "forward").call(tx, args, kwargs)
        for hook_id, hook in hooks["_forward_hooks"]:
            if hook_id in module._forward_hooks_with_kwargs:
                result = hook.call(tx, [self, TupleVariable(args), DictVariable(kwargs), output],
                                   {})
            else:
                result = hook.call(tx, [self, TupleVariable(args), output], {})
            if not _is_none(result):
                output = result
        return output

    def _hooks(self, tx: Translator) -> dict[str, list[tuple[int, VariableTracker]]]:
        """The forward (pre-)hooks, wrapped; a module that has any guards its hook dicts."""
        hooks: dict[str, list[tuple[int, VariableTracker]]] = {}
        for attr in ("_forward_pre_hooks", "_forward_hooks"):
            table = getattr(self.module, attr)
            hooks[attr] = []
            if not table:
                continue
            if self.source is None:
                raise Unsupported(f"hooks of {self!r}, a module reached without a source")
            # Guarded by position, not by key: the keys are handle ids from a process-wide
            # counter, so a fresh module with the same hooks would never hit the cache.
            table_source = AttrSource(self.source, attr)
            tx.guards.length_check(table_source, len(table), through=dict)
            kwargs_table = f"{attr}_with_kwargs"
            tx.guards.keys_flagged(table_source, AttrSource(self.source, kwargs_table),
                                   [key in getattr(self.module, kwargs_table) for key in table])
            hooks[attr] = [(key, tx.builder.wrap(hook, DictValueSource(table_source, position)))
                           for position, (key, hook) in enumerate(table.items())]
        return hooks

    # -- containers (ModuleList, Sequential, ModuleDict, ParameterList, ParameterDict) ---------
    def _native(self, name: str) -> Callable | None:
        attr = lookup_class_attr(type(self.module), name)
        return NATIVE_METHODS.get(attr) if isinstance(attr, types.FunctionType) else None

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        native = self._native("__iter__")
        if native is not None:
            return native(tx, self, [], {}).unpack(tx)
        if isinstance(lookup_class_attr(type(self.module), "__iter__"), types.FunctionType):
            return self.var_getattr(tx, "__iter__").call(tx, [], {}).unpack(tx)
        return super().unpack(tx)

    def getitem(self, tx: Translator, index: VariableTracker) -> VariableTracker:
        """``self.layers[0]``, ``self.heads["a"]``, ``self.blocks[1:]``."""
        return self.var_getattr(tx, "__getitem__").call(tx, [index], {})


class NativeMethodVariable(VariableTracker):
    """A method of ``nn.Module`` or a torch container, answered from the real module."""

    def __init__(self, module: NNModuleVariable, name: str, handler: Callable) -> None:
        super().__init__()
        self.module, self.name, self.handler = module, name, handler

    def describe(self) -> str:
        return f"{self.module.describe()}.{self.name}"

    def call(self, tx, args, kwargs):
        return self.handler(tx, self.module, args, kwargs)


def _is_none(value: VariableTracker) -> bool:
    return value.is_constant() and value.as_constant() is None


def _constants(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> tuple:
    return [a.as_constant() for a in args], {k: v.as_constant() for k, v in kwargs.items()}


def _iterator(items: list[VariableTracker]) -> VariableTracker:
    return IteratorVariable(items)


# -- native methods: the real method lists names, trackers follow the registries ---------------
def _named(method: str, with_names: bool) -> Callable:
    """``parameters()``, ``named_modules()``...: run for real, then reach each member by name."""
    def handler(tx, self: NNModuleVariable, args, kwargs):
        positional, keywords = _constants(args, kwargs)
        named = getattr(nn.Module, method)(self.module, *positional, **keywords)
        items = []
        for name, _ in named:
            member = self.member_path(tx, name) if name else self
            items.append(TupleVariable([ConstantVariable(name), member]) if with_names else member)
        return _iterator(items)

    return handler


def _module_call(tx, self: NNModuleVariable, args, kwargs) -> VariableTracker:
    """``self._call_impl(*args)`` and ``nn.Module.__call__(self, *args)`` (which a class's own
    ``__call__`` reaches through ``super()``): hooks, then forward."""
    return self.call_impl(tx, args, kwargs)


def _children(tx, self: NNModuleVariable, args, kwargs) -> VariableTracker:
    return _iterator([self.member(tx, "_modules", k) for k, v in self.module._modules.items()
                      if v is not None])


def _len(tx, self: NNModuleVariable, args, kwargs) -> VariableTracker:
    return ConstantVariable(len(self.module))


def _values(tx, self: NNModuleVariable, args, kwargs) -> VariableTracker:
    """Iterating a ModuleList, Sequential or ParameterList: its members in order."""
    return _iterator([self.var_getattr(tx, key) for key in _member_keys(self.module)])


def _keys(tx, self: NNModuleVariable, args, kwargs) -> VariableTracker:
    return _iterator([ConstantVariable(key) for key in _member_keys(self.module)])


def _items(tx, self: NNModuleVariable, args, kwargs) -> VariableTracker:
    return _iterator([TupleVariable([ConstantVariable(key), self.var_getattr(tx, key)])
                      for key in _member_keys(self.module)])


def _member_keys(module: nn.Module) -> list[str]:
    if isinstance(module, nn.ParameterDict):
        return list(module.keys())
    if isinstance(module, nn.ParameterList):
        return [str(i) for i in range(len(module))]
    return list(module._modules)


def _getitem(tx, self: NNModuleVariable, args, kwargs) -> VariableTracker:
    """An index (negative too), a slice (a list of members) or a ModuleDict/ParameterDict key."""
    (index,) = args
    key = index.as_constant()
    keys = _member_keys(self.module)
    if isinstance(self.module, (nn.ModuleDict, nn.ParameterDict)):
        if key not in keys:
            raise raise_real(KeyError(key))
        return self.var_getattr(tx, key)
    if isinstance(key, slice):
        # A real slice builds a new container; the trace gives the members as a list.
        return ListVariable([self.var_getattr(tx, k) for k in keys[key]])
    try:
        return self.var_getattr(tx, keys[key])
    except IndexError as error:
        raise raise_real(IndexError(f"index {key} is out of range")) from error


def _contains(tx, self: NNModuleVariable, args, kwargs) -> VariableTracker:
    return ConstantVariable(args[0].as_constant() in _member_keys(self.module))


def _refuse(what: str) -> Callable:
    def handler(tx, self: NNModuleVariable, args, kwargs):
        raise Unsupported(f"{self.describe()}: {what} inside the compiled frame",
                          break_type="side_effect",
                          hints=("do it outside the compiled function",))

    return handler


_M, _ML, _SEQ, _MD = nn.Module, nn.ModuleList, nn.Sequential, nn.ModuleDict
_PL, _PD = nn.ParameterList, nn.ParameterDict

# torch's own methods -> handler(tx, module tracker, args, kwargs). A subclass that overrides
# one of them gets its own method inlined instead (the table is keyed by function object).
NATIVE_METHODS: dict[Any, Callable] = {
    _M.parameters: _named("named_parameters", with_names=False),  # each parameter, lifted
    _M.named_parameters: _named("named_parameters", with_names=True),
    _M.buffers: _named("named_buffers", with_names=False),
    _M.named_buffers: _named("named_buffers", with_names=True),
    _M.modules: _named("named_modules", with_names=False),  # pinned submodules, self first
    _M.named_modules: _named("named_modules", with_names=True),
    _M.children: _children,
    _M._call_impl: _module_call,  # what graphlift's compiled module calls and module.compile() run
    _M.__call__: _module_call,  # self.__call__(x): torch.compile(model.__call__) compiles this
    _M.named_children: _named("named_children", with_names=True),
    _ML.__dict__["__len__"]: _len,  # len(self.layers)
    _ML.__dict__["__iter__"]: _values,  # for layer in self.layers
    _ML.__dict__["__getitem__"]: _getitem,  # self.layers[0], self.layers[1:]
    _SEQ.__dict__["__len__"]: _len,
    _SEQ.__dict__["__iter__"]: _values,  # Sequential.forward iterates itself
    _SEQ.__dict__["__getitem__"]: _getitem,
    _MD.__dict__["__len__"]: _len,
    _MD.__dict__["__iter__"]: _keys,  # iterating a ModuleDict gives its keys
    _MD.__dict__["__getitem__"]: _getitem,  # self.heads["a"]
    _MD.__dict__["__contains__"]: _contains,
    _MD.__dict__["keys"]: _keys,
    _MD.__dict__["values"]: _values,
    _MD.__dict__["items"]: _items,
    _PL.__dict__["__len__"]: _len,
    _PL.__dict__["__iter__"]: _values,
    _PL.__dict__["__getitem__"]: _getitem,
    _PD.__dict__["__len__"]: _len,
    _PD.__dict__["__iter__"]: _keys,
    _PD.__dict__["__getitem__"]: _getitem,
    _PD.__dict__["__contains__"]: _contains,
    _PD.__dict__["keys"]: _keys,
    _PD.__dict__["values"]: _values,
    _PD.__dict__["items"]: _items,
    # Changing the module's structure or state inside a graph: refused, the frame splits there.
    _M.register_buffer: _refuse("register_buffer changes the module's buffers"),
    _M.register_parameter: _refuse("register_parameter changes the module's parameters"),
    _M.add_module: _refuse("add_module changes the module's submodules"),
    _M.register_module: _refuse("register_module changes the module's submodules"),
    _M.train: _refuse("train() changes the training flags"),
    _M.eval: _refuse("eval() changes the training flags"),
    _M.requires_grad_: _refuse("requires_grad_() changes parameter flags"),
    _M.to: _refuse("to() converts the module in place"),
    _M.zero_grad: _refuse("zero_grad() changes gradients"),
}



# -- torch.nn modules made in the frame --------------------------------------------------------
# Modules of these torch.nn files have no parameters or buffers when made from constants
# (activations, losses without a weight tensor, Flatten), so constructing one while tracing
# allocates nothing and draws no random numbers: it is made for real, and its forward inlined.
# The ones that do hold parameters are left out.
_PARAMETER_FREE_FILES = (nn.modules.activation, nn.modules.loss, nn.modules.flatten)
_WITH_PARAMETERS = frozenset({nn.MultiheadAttention, nn.PReLU})


def _parameter_free_classes() -> list[type]:
    classes = [nn.Identity]
    for file in _PARAMETER_FREE_FILES:
        classes += [value for value in vars(file).values()
                    if isinstance(value, type) and issubclass(value, nn.Module) and
                    value.__module__ == file.__name__ and value not in _WITH_PARAMETERS]
    return classes


def _construct_in_frame(cls: type):
    def construct(tx, args, kwargs):
        values = [*args, *kwargs.values()]
        if not all(v.is_constant() for v in values):
            raise Unsupported(f"constructing {cls.__qualname__} from values that are not "
                              "constants", break_type="unsupported_call")
        try:
            module = cls(*(a.as_constant() for a in args),
                         **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as error:
            raise raise_real(error) from error
        if any(True for _ in itertools.chain(module.parameters(), module.buffers())):
            raise Unsupported(f"{cls.__qualname__} made in the frame holds tensors",
                              break_type="unsupported_call")
        return NNModuleVariable(module)  # no source: returning it is a break

    return construct


_PARAMETER_FREE = frozenset(_parameter_free_classes())
register_constructors({cls: _construct_in_frame(cls) for cls in _PARAMETER_FREE})

# What a subclass may define and still be made for real while tracing: making one must run only
# torch.nn's own __init__ (which sets attributes and draws nothing), never code of the user's.
_CONSTRUCTION_HOOKS = ("__init__", "__new__", "__setattr__", "__post_init__")


def _plain_module_subclass(cls: type) -> Any:
    """The construction rule for a user subclass of ``nn.Module`` or of a parameter-free torch.nn
    layer that adds only methods (transformers' ``SiLUActivation``), else None."""
    if type(cls) is not type or not issubclass(cls, nn.Module):
        return None
    for klass in cls.__mro__:
        if klass is object or klass is nn.Module or klass in _PARAMETER_FREE:
            continue
        if klass.__module__.startswith("torch.") or \
                any(name in vars(klass) for name in _CONSTRUCTION_HOOKS):
            return None  # another torch class, or code of the user's that construction runs
    return _construct_in_frame(cls)


CONSTRUCTOR_FINDERS.append(_plain_module_subclass)
