"""Guards: what a cache entry assumed about its inputs, compiled into one Python function.

Every guard has a display text in torch.compile's notation (``L['n'] == 3``,
``L['x'].size()[0] == 8``) and a check expression for diagnosis. The fast path does not evaluate
them one by one: :meth:`GuardBuilder.compile` joins a compact set of expressions (one tuple compare
for a tensor's sizes, not one per dimension) into a single generated function whose source is kept.
Only on a miss are the per-guard checks run, to name the first guard that failed and its value now.

On a hit, the checks of the tensors (type, dtype, device, requires_grad, sizes, strides) run
in C++: one call of torch's ``TensorGuards`` checks them all, about 0.05 µs a tensor against about
0.3 µs in Python (a type check stays in Python where an earlier check reads through the tensor:
:class:`_TypeInCpp`). The generated Python function with every check written out stays what
users read (``GRAPHLIFT_LOGS=guards``) and is the fallback: it runs where ``TensorGuards`` is off
(``config.cpp_tensor_guards``) or refuses the tensors, and a miss is explained from its checks.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import operator
import re
import reprlib
import sys
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._C._dynamo.guards import TensorGuards

from graphlift.config import config
from graphlift.sources import GLOBALS_NAME, Source, is_pinned

# ``type.__flags__`` bit of a class whose attributes cannot be set (a static builtin type).
_IMMUTABLE_TYPE = 1 << 8


class GuardKind(enum.Enum):
    """The closed set of things a guard can assert."""

    TYPE_MATCH = "type_match"  # type(v) is T
    ID_MATCH = "id_match"  # v is <the object seen while tracing> (functions, modules, classes)
    CONSTANT_MATCH = "constant_match"  # type and value of an int/float/bool/str/None/dtype...
    TENSOR_MATCH = "tensor_match"  # type, dtype, device, requires_grad, sizes, strides
    SAME_OBJECT = "same_object"  # two sources hold one object (an aliased argument)
    NOT_ALIASED = "not_aliased"  # a tensor mutated by the graph is not also another input
    LENGTH_CHECK = "length_check"  # len(v) == n for tuples and lists whose items were read
    DICT_KEYS = "dict_keys"  # list(d) == [keys...] for dicts whose items were read
    SET_ITEMS = "set_items"  # list(s) == [items...] for sets of constants, in iteration order
    ATTR_ABSENT = "attr_absent"  # not hasattr(v, name); or name not in v.__dict__ (unshadowed)
    GLOBAL_STATE = "global_state"  # grad mode, autocast, default dtype; switches the frame read
    NN_MODULE = "nn_module"  # a pinned module is unchanged: structure version, tensor flags
    SYMBOLIC_SHAPE = "symbolic_shape"  # what the ShapeEnv assumed: 2 <= s0, s0 == s1, 2*s0 <= 100


@dataclass(frozen=True)
class Guard:
    """One assumption, as shown to users and as checked on a miss."""

    kind: GuardKind
    text: str  # display, e.g. "L['n'] == 3"
    check: str  # Python expression over the generated function's parameters
    current: str | None = None  # expression for "now ..." in recompile reasons
    current_names: tuple[str, ...] = ()  # set when ``current`` is a tuple: what each item is
    zero_one: bool = False  # a size's lower bound of 2: failing it means a size of 0 or 1
    # The user's line whose use of the value made the trace rely on it, as shown after the
    # guard (``y = x * n  at demo.py:5``); None for what the call itself fixes (types, sizes).
    origin: str | None = None

    def shown(self, now: str = "") -> str:
        """The guard as logs show it to users: its text, what it sees ``now`` (a miss's
        `` (now 4)``) and, where known, the line behind it."""
        return f"{self.text}{now}  # {self.origin}" if self.origin else f"{self.text}{now}"


# Global state that changes what a graph computes. Bound C functions: cheapest to call.
_is_grad_enabled = torch.is_grad_enabled
_is_autocast_enabled = torch._C._is_any_autocast_enabled
_get_default_dtype = torch.get_default_dtype
# The checks that no TorchFunctionMode / TorchDispatchMode is active; every entry's check
# function runs them first (_modes_first).
MODE_STACK_CHECKS = ("__gl_function_modes() == 0", "__gl_dispatch_modes() == 0")


class _NowRepr(reprlib.Repr):
    """What a miss shows a value as: long containers and strings cut short, a tensor as its
    type, shape and dtype (a Parameter's own repr prints its data, lines of it)."""

    def __init__(self) -> None:
        super().__init__()  # keyword limits only from 3.12 on
        self.maxlevel, self.maxstring, self.maxother = 3, 80, 80
        self.maxtuple = self.maxlist = self.maxdict = self.maxset = 6

    def repr1(self, x: Any, level: int) -> str:
        if isinstance(x, torch.Tensor):
            return f"{type(x).__name__}(shape={list(x.shape)}, dtype={x.dtype})"
        return super().repr1(x, level)


_short_repr = _NowRepr().repr


@dataclass
class CompiledGuards:
    """The generated check function of one cache entry, with its source and per-guard checks."""

    fn: Callable[..., bool]
    source: str
    guards: list[Guard]
    params: tuple[str, ...]
    namespace: dict[str, Any]
    _checks: list[Callable[..., bool]] | None = field(default=None, repr=False)
    # (source, weak reference) of each nn.Module the entry pinned by identity: the per-instance
    # recompile limit and dropping the entry when the module dies read these.
    module_roots: tuple[tuple[Source, Any], ...] = ()
    # The function that runs on a hit when it is not ``source``: the same checks with the
    # tensors' metadata checks left to one TensorGuards call (None: ``source`` runs).
    fast_source: str | None = None
    # What TensorGuards checks, per tensor, as data (graphlift.persist saves and rebuilds it).
    tensor_specs: tuple[TensorSpec, ...] = ()
    # (source, structure function, structure id) of each nn.Module guarded by its structure:
    # the recompile limit counts per structure, as it counts per pinned instance.
    structure_roots: tuple[tuple[Source, Callable[[Any], int], int], ...] = ()

    def texts(self) -> list[str]:
        return [g.text for g in self.guards]

    def shown_texts(self) -> list[str]:
        return [g.shown() for g in self.guards]

    def first_failure(self, args: tuple) -> str | None:
        """Text of the first guard that fails for ``args`` (with what it sees now), or None."""
        for guard, check in zip(self.guards, self._per_guard_checks()):
            try:
                if check(*args):
                    continue
            except Exception:  # a guard that cannot even be evaluated has failed
                return guard.shown()
            return guard.shown(self._now(guard, args))
        if self.fast_source is not None and not self.fn(*args):
            # TensorGuards also compares each tensor's dispatch keys, which the Python checks do
            # not see: a conjugate or negative view, an inference tensor, inference mode.
            return ("a tensor's dispatch keys differ from the compiled ones (torch's "
                    "TensorGuards: a conjugate or negative view, an inference tensor or mode)")
        return None

    def _now(self, guard: Guard, args: tuple) -> str:
        if guard.current is None:
            return ""
        try:
            value = _lambda(self.params, guard.current, self.namespace)(*args)
        except Exception:
            return ""
        if guard.current_names:
            now = ", ".join(f"{n} = {_short_repr(v)}" for n, v in zip(guard.current_names, value))
        else:
            now = _short_repr(value)
        if guard.zero_one and value in (0, 1):
            now += "; sizes 0 and 1 are always specialized, so this size gets an entry of its own"
        return f" (now {now})"

    def _per_guard_checks(self) -> list[Callable[..., bool]]:
        if self._checks is None:
            self._checks = [_lambda(self.params, g.check, self.namespace) for g in self.guards]
        return self._checks


def _nowhere() -> None:
    return None


def _lambda(params: tuple[str, ...], expr: str, namespace: dict[str, Any]) -> Callable:
    return eval(f"lambda {', '.join(params)}: {expr}", namespace)  # noqa: S307 - generated


class GuardBuilder:
    """Collects guards while tracing; ``compile`` turns them into one function."""

    def __init__(self) -> None:
        self.guards: list[Guard] = []
        self._fast: list[str] = []
        self._seen: set[tuple] = set()
        # Global state as the call found it; tracing may switch grad mode before guards are built.
        self.initial_state = (torch.is_grad_enabled(), bool(torch._C._is_any_autocast_enabled()),
                              torch.get_default_dtype())
        # No globals dict here: the generated functions take it as a parameter (see
        # convert_frame.FrameSignature), so that no cache entry keeps a module's globals alive.
        self.namespace: dict[str, Any] = {
            "torch": torch,
            "math": math,  # rendered shape guards may call math.floor, math.ceil
            "__gl_copysign": math.copysign,
            "__gl_grad": _is_grad_enabled,
            "__gl_autocast": _is_autocast_enabled,
            "__gl_default_dtype": _get_default_dtype,
            "__gl_requires_grad": operator.attrgetter("requires_grad"),
            "__gl_function_modes": torch._C._len_torch_function_stack,
            "__gl_dispatch_modes": torch._C._len_torch_dispatch_stack,
        }
        self.module_roots: list[tuple[Source, Any]] = []
        self.structure_roots: list[tuple[Source, Callable[[Any], int], int]] = []
        self._structural: dict[Source, tuple[Any, Callable]] = {}  # root -> (module, grad_flags)
        self._refs: dict[int, str] = {}  # id -> object_ref expression, one name per object
        self._kept: list[Any] = []
        self._tensors = _TensorBatch()
        self._module_flags: tuple[list[torch.Tensor], list[bool]] | None = None
        # Where the trace is in the user's code, for each guard's ``origin``: set by whoever
        # traces (the output graph knows the running translators); nowhere by default.
        self.locate: Callable[[], str | None] = _nowhere

    # -- helpers -------------------------------------------------------------------------------
    def const(self, value: Any) -> str:
        """Name under which ``value`` is reachable from the generated code."""
        name = f"__gl_c{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def object_ref(self, value: Any) -> str:
        """An expression for ``value`` that keeps it alive only if it lives as long as its module.

        Anything else (a function or class made at run time, by exec or inside a function) is held
        through a weak reference: a strong one from a cache entry could reach the entry's own code
        object through the object's ``__globals__`` or methods, a cycle through the code object's
        extra slot that the garbage collector cannot see. A dead reference reads None.
        """
        known = self._refs.get(id(value))
        if known is not None:
            return known
        if _reachable_by_import(value):
            ref = self.const(value)
        else:
            try:
                ref = f"{self.const(weakref.ref(value))}()"
            except TypeError:  # not weak-referenceable
                ref = self.const(value)
        self._refs[id(value)] = ref
        self._kept.append(value)  # while tracing: an id is not reused before compile()
        return ref

    def expr(self, source: Source) -> str:
        """``source`` as a Python expression here; pinned objects are bound, not walked to."""
        return source.render(self.object_ref)

    def _once(self, key: tuple) -> bool:
        """True the first time ``key`` is seen; guards are deduplicated by kind and source."""
        if key in self._seen:
            return False
        self._seen.add(key)
        return True

    def _add(self, guard: Guard) -> None:
        if guard.origin is None:
            origin = self.locate()
            if origin is not None:
                guard = dataclasses.replace(guard, origin=origin)
        self.guards.append(guard)

    # -- guard kinds ---------------------------------------------------------------------------
    def type_match(self, source: Source, value: Any, tensor: bool = False) -> None:
        """``type(v) is T``. ``tensor``: the check of a tensor that TensorGuards checks too,
        which the hit function may leave to it (see :class:`_TypeInCpp`)."""
        if not self._once((GuardKind.TYPE_MATCH, source)):
            return
        e = self.expr(source)
        check = f"type({e}) is {self.object_ref(type(value))}"
        self._add(Guard(GuardKind.TYPE_MATCH, f"type({source.name()}) is {_qualname(type(value))}",
                        check, f"type({e})"))
        self._fast.append(_TypeInCpp(check, e) if tensor else check)

    def id_match(self, source: Source, value: Any) -> None:
        if not self._once((GuardKind.ID_MATCH, source)):
            return
        # "is not None": a dead weak reference must not match a source that now holds None.
        check = f"{self.expr(source)} is {self.object_ref(value)} is not None"
        self._add(Guard(GuardKind.ID_MATCH, f"{source.name()} is {_describe(value)}", check))
        self._fast.append(check)

    def constant_match(self, source: Source, value: Any) -> None:
        """Type and value; None, bools and dtypes compare by identity."""
        if not self._once((GuardKind.CONSTANT_MATCH, source)):
            return
        expr = self.expr(source)
        if value is None or isinstance(value, (bool, torch.dtype)):
            check = f"{expr} is {self.const(value)}"
            self._add(Guard(GuardKind.CONSTANT_MATCH, f"{source.name()} is {value!r}", check, expr))
            self._fast.append(check)
            return
        self.type_match(source, value)
        check = f"{expr} == {self.const(value)}"
        if type(value) is float and value == 0.0:
            # 0.0 == -0.0, but a graph that baked one in differs from eager for the other.
            check += f" and __gl_copysign(1.0, {expr}) == {math.copysign(1.0, value)}"
        elif type(value) is float and value != value:
            check = f"{expr} != {expr}"  # NaN equals nothing, not even itself
        self._add(Guard(GuardKind.CONSTANT_MATCH, f"{source.name()} == {value!r}", check, expr))
        self._fast.append(check)

    def tensor_match(self, source: Source, tensor: torch.Tensor,
                     dynamic_dims: frozenset[int] = frozenset()) -> None:
        """Type, dtype, device, requires_grad, rank, and the sizes and strides the graph fixed.

        Dimensions in ``dynamic_dims`` are symbols: their sizes, and the tensor's strides, are
        guarded by the ShapeEnv's guards instead (see :mod:`graphlift.dynamic_shapes`).
        """
        if not self._once((GuardKind.TENSOR_MATCH, source)):
            return
        e, n = self.expr(source), source.name()
        self.type_match(source, tensor, tensor=True)
        self._tensors.add(e, tensor, dynamic_dims)
        dtype = self.const(tensor.dtype)
        self._tensor_guard(f"{n}.dtype == {tensor.dtype}", f"{e}.dtype is {dtype}", f"{e}.dtype")
        if tensor.device.type == "cpu":
            device_check = f"{e}.is_cpu"
        else:
            device_check = f"{e}.device == {self.const(tensor.device)}"
        self._tensor_guard(f"{n}.device == {tensor.device!r}", device_check, f"{e}.device")
        rg = tensor.requires_grad
        self._tensor_guard(f"{n}.requires_grad == {rg}",
                           f"{e}.requires_grad is {rg}", f"{e}.requires_grad")
        sizes = tuple(tensor.shape)
        if dynamic_dims:
            self._fast.extend(map(_InCpp, _static_size_checks(e, sizes, dynamic_dims, self.const)))
        else:
            self._fast.append(_InCpp(f"{e}.shape == {self.const(sizes)}"))
            self._fast.append(_InCpp(f"{e}.stride() == {self.const(tuple(tensor.stride()))}"))
        self._tensors.end = len(self._fast)
        self._add(Guard(GuardKind.TENSOR_MATCH, f"{n}.dim() == {len(sizes)}",
                        f"{e}.dim() == {len(sizes)}", f"{e}.dim()"))
        for i, size in enumerate(sizes):
            if i not in dynamic_dims:
                self._add(Guard(GuardKind.TENSOR_MATCH, f"{n}.size()[{i}] == {size}",
                                f"{e}.size()[{i}] == {size}", f"{e}.size()[{i}]"))
        if not dynamic_dims:
            for i, stride in enumerate(tensor.stride()):
                self._add(Guard(GuardKind.TENSOR_MATCH, f"{n}.stride()[{i}] == {stride}",
                                f"{e}.stride()[{i}] == {stride}", f"{e}.stride()[{i}]"))

    def _tensor_guard(self, text: str, check: str, current: str) -> None:
        self._add(Guard(GuardKind.TENSOR_MATCH, text, check, current))
        self._fast.append(_InCpp(check))

    def symbolic_shape(self, text: str, check: str, fast: str | None,
                       currents: tuple[tuple[str, str], ...] = (), zero_one: bool = False,
                       origin: str | None = None) -> None:
        """A relation between sizes and ints that the trace assumed (rendered by
        :func:`graphlift.shape_guards.install_shape_guards`).

        ``fast`` is the form for the generated function, where it may bind a symbol to a name
        (``2 <= (__gl_s0 := x.size()[0])``) for the guards after it; None when another guard's
        fast form already covers this one. ``currents`` lists (display, expression) of the values
        that a miss message shows; ``origin`` the user's line where the ShapeEnv assumed it.
        """
        if not self._once((GuardKind.SYMBOLIC_SHAPE, text)):
            return
        if len(currents) == 1:
            current, names = currents[0][1], ()
        else:
            current = f"({''.join(c[1] + ', ' for c in currents)})" if currents else None
            names = tuple(c[0] for c in currents)
        self._add(Guard(GuardKind.SYMBOLIC_SHAPE, text, check, current, names, zero_one,
                        origin))
        if fast is not None:
            self._fast.append(fast)

    def same_object(self, source: Source, other: Source) -> None:
        if not self._once((GuardKind.SAME_OBJECT, source, other)):
            return
        if is_pinned(source) and is_pinned(other):
            return  # both objects are proven by identity: they are the objects seen while tracing
        check = f"{self.expr(source)} is {self.expr(other)}"
        self._add(Guard(GuardKind.SAME_OBJECT, f"{source.name()} is {other.name()}", check))
        self._fast.append(check)

    def not_aliased(self, source: Source, other: Source) -> None:
        if not self._once((GuardKind.NOT_ALIASED, source, other)):
            return
        if is_pinned(source) and is_pinned(other):
            return  # two distinct objects, each proven by identity
        check = f"{self.expr(source)} is not {self.expr(other)}"
        self._add(Guard(GuardKind.NOT_ALIASED, f"{source.name()} is not {other.name()}", check))
        self._fast.append(check)

    def none_aliased(self, mutated: list[Source], others: list[Source]) -> None:
        """:meth:`not_aliased` for every pair of a mutated input and another input, as one
        guard: the mutated inputs are distinct objects, and none of them is one of the others."""
        if not self._once((GuardKind.NOT_ALIASED, tuple(mutated), tuple(others))):
            return
        listed = ", ".join(self.expr(source) for source in mutated)
        rest = ", ".join(self.expr(source) for source in others)
        check = (f"(lambda ids: len(ids) == {len(mutated)} and ids.isdisjoint(map(id, "
                 f"({rest}{',' if others else ''})))) (set(map(id, ({listed},))))")
        self._add(Guard(GuardKind.NOT_ALIASED, f"{len(mutated)} mutated inputs from "
                        f"{mutated[0].name()} on are distinct objects, none of them one of the "
                        f"other {len(others)} inputs", check))
        self._fast.append(check)

    def same_globals(self, source: Source) -> None:
        """The value is the frame's own globals dict (a parameter: no reference is kept)."""
        if not self._once((GuardKind.ID_MATCH, source)):
            return
        check = f"{self.expr(source)} is {GLOBALS_NAME}"
        self._add(Guard(GuardKind.ID_MATCH, f"{source.name()} is G", check))
        self._fast.append(check)

    def length_check(self, source: Source, length: int, through: type | None = None) -> None:
        """``len(v) == n``; ``through`` a builtin (``list``): ``list.__len__(v)``, so that a
        subclass's override never runs in a guard."""
        if through is None:
            self._derived_value(GuardKind.LENGTH_CHECK, source, "len", length, repr(length))
        else:
            self._derived_value(GuardKind.LENGTH_CHECK, source, "{}.__len__", length,
                                repr(length), through)

    def dict_keys(self, source: Source, keys: list, through: type | None = None) -> None:
        """``list(d) == keys``; ``through`` a dict type: ``list(dict.keys(d))`` (a subclass)."""
        if through is None:
            self._derived_value(GuardKind.DICT_KEYS, source, "list", keys, self.const(keys))
        else:
            self._derived_value(GuardKind.DICT_KEYS, source, "list({}.keys", keys,
                                self.const(keys), through)

    def dict_keys_identical(self, source: Source, keys: list) -> None:
        """The keys of ``d`` are these, in order: each key's type, then the key itself compared
        by ``==`` for a constant and by ``is`` for a class, a function, a module or an enum
        member (a registry keyed by types). Objects made at run time are held weakly."""
        if not self._once((GuardKind.DICT_KEYS, source)):
            return
        expected = ", ".join(self._key_expr(key) for key in keys)
        current = f"[(type(k), k) for k in {self.expr(source)}]"
        check = f"len({self.expr(source)}) == {len(keys)} and all(__gl_is_key(k, e) for k, e " \
                f"in zip({self.expr(source)}, ({expected},)))"
        self.namespace.setdefault("__gl_is_key", _is_same_key)
        self._add(Guard(GuardKind.DICT_KEYS, f"list({source.name()}) == {keys!r}", check,
                        current))
        self._fast.append(check)

    def _key_expr(self, key: Any) -> str:
        """An expression for a dict key, its objects held as :meth:`object_ref` holds them."""
        if type(key) is tuple:
            return "(" + "".join(f"{self._key_expr(item)}, " for item in key) + ")"
        if type(key) in (str, int, type(None), bool, float, bytes):
            return self.const(key)
        return self.object_ref(key)

    def keys_flagged(self, source: Source, flags_source: Source, flags: list[bool]) -> None:
        """``[k in flags_table for k in d] == flags``: which keys of ``d`` another dict names,
        by position (a hook table and its ``_with_kwargs`` table, both keyed by handle ids)."""
        if not self._once((GuardKind.DICT_KEYS, source, flags_source)):
            return
        current = f"[k in {self.expr(flags_source)} for k in {self.expr(source)}]"
        check = f"{current} == {flags!r}"
        self._add(Guard(GuardKind.DICT_KEYS,
                        f"[k in {flags_source.name()} for k in {source.name()}] == {flags!r}",
                        check, current))
        self._fast.append(check)

    def set_items(self, source: Source, items: list, through: type | None = None) -> None:
        """``list(s) == items``; ``through`` a set type: ``list(set.__iter__(s))`` (a
        subclass, whose ``__iter__`` never runs in a guard)."""
        if through is None:
            self._derived_value(GuardKind.SET_ITEMS, source, "list", items, self.const(items))
        else:
            self._derived_value(GuardKind.SET_ITEMS, source, "list({}.__iter__", items,
                                self.const(items), through)

    def _derived_value(self, kind: GuardKind, source: Source, fn: str, expected: Any,
                       expected_expr: str, through: type | None = None) -> None:
        """``fn(source) == expected``: a container's length or its keys. With ``through``,
        ``fn`` has a ``{}`` for the builtin and an open parenthesis that is closed after."""
        if not self._once((kind, source)):
            return
        shown, called, close = fn, fn, ""
        if through is not None:
            shown, called = fn.format(through.__name__), fn.format(self.const(through))
            close = ")" * fn.count("(")
        current = f"{called}({self.expr(source)}){close}"
        check = f"{current} == {expected_expr}"
        self._add(Guard(kind, f"{shown}({source.name()}){close} == {expected!r}", check,
                        current))
        self._fast.append(check)

    def attr_absent(self, source: Source, name: str) -> None:
        """``source`` has no attribute ``name``: the trace took ``getattr``'s default, ``hasattr``
        was False, or an ``AttributeError`` was caught. (Only for objects without a
        ``__getattr__`` of their own, so the check runs no user code.)"""
        if not self._once((GuardKind.ATTR_ABSENT, source, name)):
            return
        check = f"not hasattr({self.expr(source)}, {name!r})"
        self._add(Guard(GuardKind.ATTR_ABSENT, f"not hasattr({source.name()}, {name!r})", check))
        self._fast.append(check)

    def not_shadowed(self, source: Source, name: str) -> None:
        """A class attribute read through an object stays the class's: the object gets no
        instance attribute of that name (``o.method = ...`` later would win over it)."""
        if not self._once((GuardKind.ATTR_ABSENT, source, name, "__dict__")):
            return
        check = f"{name!r} not in __gl_instance_dict({self.expr(source)})"
        self.namespace.setdefault("__gl_instance_dict", instance_dict)
        self._add(Guard(GuardKind.ATTR_ABSENT, f"{name!r} not in {source.name()}.__dict__", check))
        self._fast.append(check)

    def class_attr(self, cls: type, name: str, value: Any, start_after: type | None = None) \
            -> None:
        """Looking ``name`` up along the MRO of ``cls`` (after ``start_after``, as ``super()``
        does) still finds ``value`` in the same class ``__dict__``, or, for ``absent``, finds
        nothing: a class attribute read through ``type(o)``, ``super()`` or an object made in
        the frame, which no source reaches. Each class before the one holding it is checked
        not to have gained the name. A class whose type is immutable (``object``, ``int``)
        cannot change and costs no check. (A later ``__bases__`` assignment is not seen.)"""
        if not self._once((GuardKind.ID_MATCH, id(cls), name, id(start_after))):
            return
        mro = cls.__mro__
        if start_after is not None:
            mro = mro[mro.index(start_after) + 1:]
        for klass in mro:
            if klass.__flags__ & _IMMUTABLE_TYPE:
                if name in klass.__dict__:
                    return
                continue
            ref, shown = self.object_ref(klass), _qualname(klass)
            if name not in klass.__dict__:
                check = f"{name!r} not in {ref}.__dict__"
                self._add(Guard(GuardKind.ATTR_ABSENT, f"{name!r} not in {shown}.__dict__", check))
                self._fast.append(check)
                continue
            found = f"{ref}.__dict__.get({name!r})"
            if type(value) in (int, float, str, bytes) and value == value:
                # By value: an equal number stored again (``K.n = 2 * 3``) is a new object.
                check = f"type({found}) is {self.const(type(value))} and {found} == " \
                        f"{self.const(value)}"
                text = f"{shown}.{name} == {value!r}"
            else:
                check = f"{found} is {self.object_ref(value)}"
                text = f"{shown}.__dict__[{name!r}] is {_describe(value)}"
            self._add(Guard(GuardKind.ID_MATCH, text, check, found))
            self._fast.append(check)
            return

    def builtin_unshadowed(self, globals_source: Source | None, builtins_dict: dict, name: str,
                           value: Any) -> None:
        """A builtin the frame resolved stays the one used: no global of its name appears in
        the frame's globals (``globals_source``; None for the frame's own), and the builtins
        dict still holds ``value`` (``builtins.len = ...`` is seen too)."""
        if not self._once((GuardKind.ATTR_ABSENT, globals_source, "__builtins__", name)):
            return
        where = GLOBALS_NAME if globals_source is None else self.expr(globals_source)
        shown = "G" if globals_source is None else globals_source.name()
        check = f"{name!r} not in {where}"
        self._add(Guard(GuardKind.ATTR_ABSENT, f"{name!r} not in {shown}", check))
        self._fast.append(check)
        found = f"{self.const(builtins_dict)}.get({name!r})"
        check = f"{found} is {self.object_ref(value)}"
        self._add(Guard(GuardKind.ID_MATCH, f"builtins.{name} is {_describe(value)}", check,
                        found))
        self._fast.append(check)

    def global_switch(self, read: Callable[[], Any], text: str, value: Any) -> None:
        """A switch of the process the frame read (``torch.are_deterministic_algorithms_enabled()``,
        ``torch.backends.cudnn.benchmark``): ``read()`` still gives ``value``."""
        if not self._once((GuardKind.GLOBAL_STATE, text)):
            return
        current = f"{self.const(read)}()"
        check = f"{current} == {self.const(value)}"
        self._add(Guard(GuardKind.GLOBAL_STATE, f"{text} == {value!r}", check, current))
        self._fast.append(check)

    # -- nn.Module guards (see graphlift.variables.nn_module) -----------------------------------
    def nn_module_root(self, source: Source, module: Any, version: Any) -> None:
        """A module pinned by identity, and the one integer that keeps its members pinned.

        ``version.value`` is bumped by torch's registration hooks whenever a parameter, buffer or
        submodule of a module that some entry pinned is assigned or registered. While it holds,
        every member reached through the module's registries is the object seen while tracing.
        """
        self.id_match(source, module)
        if self._once((GuardKind.NN_MODULE, "root", source)):
            self.module_roots.append((source, weakref.ref(module)))
        if self._once((GuardKind.NN_MODULE, "version")):
            holder = self.const(version)
            check = f"{holder}.value == {version.value}"
            self._add(Guard(GuardKind.NN_MODULE,
                            f"nn_module_structure_version == {version.value}", check,
                            f"{holder}.value"))
            self._fast.append(check)

    def nn_module_structure(self, source: Source, module: Any, structure_id: Callable[[Any], int],
                            grad_flags: Callable[[Any], tuple[bool, ...]]) -> None:
        """A module guarded by its structure, not its identity (regional compilation).

        ``structure_id(module)`` names the module tree's structure (classes, registry keys,
        parameter and buffer shapes, dtypes and devices, hooks, torch.nn hyperparameters) with a
        small int, memoized per instance: every instance of one structure passes, so identical
        transformer blocks share the entry; their members are walked to on each call.
        ``grad_flags(module)`` gives the requires_grad of all its tensors (see nn_module_tensor).
        """
        if not self._once((GuardKind.NN_MODULE, "structure", source)):
            return
        self._structural[source] = (module, grad_flags)
        self.type_match(source, module)
        e, sid = self.expr(source), structure_id(module)
        current = f"{self.const(structure_id)}({e})"
        self._add(Guard(GuardKind.NN_MODULE, f"nn_module_structure({source.name()}) == {sid}",
                        f"{current} == {sid}", current))
        self._fast.append(f"{current} == {sid}")
        self.structure_roots.append((source, structure_id, sid))

    def nn_module_tensor(self, source: Source, tensor: torch.Tensor) -> None:
        """A parameter or buffer of a pinned module: its identity is proven, not its flags.

        What a tensor changes in place without a registration hook is checked cheaply instead of
        a full tensor match: requires_grad (when grad mode is on, where it decides what autograd
        records; one C-level map over all such tensors), and dtype and device of the first
        parameter of each root (``model.half()`` or ``model.to(device)`` change every one of them
        in place). Shapes changed in place (``resize_``, ``p.data = ...``) are not checked.
        A member of a structurally guarded module is another object for each instance: its
        requires_grad is checked through its path.
        """
        if not self._once((GuardKind.NN_MODULE, "tensor", source)):
            return
        e, n = self.expr(source), source.name()
        if self.initial_state[0] and not is_pinned(source):
            # Named one by one for diagnosis; checked for the whole tree in one call.
            self._add(Guard(GuardKind.NN_MODULE, f"{n}.requires_grad == {tensor.requires_grad}",
                            f"{e}.requires_grad is {tensor.requires_grad}", f"{e}.requires_grad"))
            self._structural_grad_flags(source.root())
        elif self.initial_state[0]:
            if self._module_flags is None:
                self._module_flags = ([], [])
                tensors, flags = (self.const(x) for x in self._module_flags)
                self._fast.append(f"list(map(__gl_requires_grad, {tensors})) == {flags}")
            self._module_flags[0].append(tensor)
            self._module_flags[1].append(tensor.requires_grad)
            self._add(Guard(GuardKind.NN_MODULE, f"{n}.requires_grad == {tensor.requires_grad}",
                            f"{e}.requires_grad is {tensor.requires_grad}", f"{e}.requires_grad"))
        if isinstance(tensor, torch.nn.Parameter) and \
                self._once((GuardKind.NN_MODULE, "dtype", source.root())):
            device = f"{e}.is_cpu" if tensor.device.type == "cpu" else \
                f"{e}.device == {self.const(tensor.device)}"
            for text, check, current in (
                (f"{n}.dtype == {tensor.dtype}", f"{e}.dtype is {self.const(tensor.dtype)}",
                 f"{e}.dtype"),
                (f"{n}.device == {tensor.device!r}", device, f"{e}.device"),
            ):
                self._add(Guard(GuardKind.NN_MODULE, text, check, current))
                self._fast.append(check)

    def _structural_grad_flags(self, root: Source) -> None:
        """One check of the requires_grad flags of all tensors of a structurally guarded root."""
        if root not in self._structural or \
                not self._once((GuardKind.NN_MODULE, "grad_flags", root)):
            return
        module, grad_flags = self._structural[root]
        current = f"{self.const(grad_flags)}({self.expr(root)})"
        flags = self.const(grad_flags(module))
        self._add(Guard(GuardKind.NN_MODULE, f"requires_grad of every tensor of {root.name()}",
                        f"{current} == {flags}", current))
        self._fast.append(f"{current} == {flags}")

    def global_state(self) -> None:
        """Grad mode, autocast, the default dtype and the mode stacks: each changes what a graph
        computes."""
        if not self._once((GuardKind.GLOBAL_STATE,)):
            return
        grad, autocast, dtype = self.initial_state
        for text, check, current in (
            (f"torch.is_grad_enabled() == {grad}", f"__gl_grad() is {grad}", "__gl_grad()"),
            (f"torch.is_autocast_enabled() == {autocast}", f"__gl_autocast() is {autocast}",
             "__gl_autocast()"),
            (f"torch.get_default_dtype() == {dtype}",
             f"__gl_default_dtype() is {self.const(dtype)}", "__gl_default_dtype()"),
        ):
            self._add(Guard(GuardKind.GLOBAL_STATE, text, check, current))
            self._fast.append(check)
        self.mode_stacks()

    def mode_stacks(self) -> None:
        """No TorchFunctionMode or TorchDispatchMode active: an entry is traced with none, and
        a call under a mode runs eagerly (eval_frame), so an entry must not run under one. An
        entry that runs the frame eagerly checks them too, so that under a caller's mode its
        other guards (Python reads of tensor attributes) never run: the mode would see them."""
        if not self._once((GuardKind.GLOBAL_STATE, "mode stacks")):
            return
        for text, check, current in (
            ("torch._C._len_torch_function_stack() == 0", MODE_STACK_CHECKS[0],
             "__gl_function_modes()"),
            ("torch._C._len_torch_dispatch_stack() == 0", MODE_STACK_CHECKS[1],
             "__gl_dispatch_modes()"),
        ):
            self._add(Guard(GuardKind.GLOBAL_STATE, text, check, current))
            self._fast.append(check)

    # -- output --------------------------------------------------------------------------------
    def compile(self, params: tuple[str, ...], name: str = "guards") -> CompiledGuards:
        """Generate ``def __gl_guards(<params>): return <all checks>`` and exec it; where the
        tensors' checks can run in C++, the function that runs on a hit calls TensorGuards."""
        namespace = dict(self.namespace)
        source = _check_function(name, params, _modes_first([str(c) for c in self._fast]))
        fast_source = None
        checker = self._tensors.checker() if config.cpp_tensor_guards else None
        if checker is not None:
            namespace["__gl_tensors"] = checker
            end = self._tensors.end
            checks = _left_in_python(self._fast[:end], self._tensors.exprs)
            checks.append(f"__gl_tensors({', '.join(self._tensors.exprs)})")
            checks += [str(c) for c in self._fast[end:]]
            fast_source = _check_function(name, params, _modes_first(checks))
        exec(compile(fast_source or source, f"<graphlift {name}>", "exec"), namespace)  # noqa: S102
        fn = namespace[f"__gl_{name}"]
        return CompiledGuards(fn, source, list(self.guards), params, namespace,
                              module_roots=tuple(self.module_roots), fast_source=fast_source,
                              structure_roots=tuple(self.structure_roots),
                              tensor_specs=tuple(self._tensors.specs) if checker else ())


def _modes_first(checks: list[str]) -> list[str]:
    """``checks`` with the mode-stack checks first: under a caller's TorchFunctionMode, every
    tensor attribute a later check reads (``p.requires_grad``) would call the mode."""
    first = [c for c in MODE_STACK_CHECKS if c in checks]
    return first + [c for c in checks if c not in MODE_STACK_CHECKS]


def _check_function(name: str, params: tuple[str, ...], checks: list[str]) -> str:
    """Source of ``def __gl_<name>(<params>)`` returning whether every check holds."""
    body = "\n            and ".join(checks) if checks else "True"
    # A guard that raises (an attribute gone from an object) is a failed guard, not an error.
    return (f"def __gl_{name}({', '.join(params)}):\n    try:\n        return (\n"
            f"            {body}\n        )\n    except Exception:\n        return False\n")


@dataclass(frozen=True)
class TensorSpec:
    """What TensorGuards checks of one tensor; None in sizes or strides: any."""

    type: type
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    sizes: tuple[int | None, ...]
    strides: tuple[int | None, ...]

    def example(self) -> torch.Tensor:
        """A new tensor with exactly these properties (a free size is 2)."""
        sizes = [2 if s is None else s for s in self.sizes]
        strides = torch.empty(sizes).stride() if None in self.strides else self.strides
        t = torch.empty_strided(sizes, strides, dtype=self.dtype, device=self.device)
        if self.type is torch.nn.Parameter:
            return torch.nn.Parameter(t, requires_grad=self.requires_grad)
        return t.requires_grad_(self.requires_grad) if self.requires_grad else t


def tensor_checker(specs: tuple[TensorSpec, ...]) -> Callable[..., bool] | None:
    """``TensorGuards(...).check`` over tensors made to ``specs``, or None if it refuses them."""
    if not specs or any(s.type not in (torch.Tensor, torch.nn.Parameter) for s in specs):
        return None
    examples = [s.example() for s in specs]
    guards = TensorGuards(*examples, dynamic_dims_sizes=[list(s.sizes) for s in specs],
                          dynamic_dims_strides=[list(s.strides) for s in specs])
    return guards.check if guards.check(*examples) else None


class _InCpp(str):
    """A tensor check of the Python source that the hit path leaves to TensorGuards."""


class _TypeInCpp(_InCpp):
    """A tensor's ``type(e) is T``, left to TensorGuards where nothing reads through ``e`` first.

    TensorGuards compares each object's exact type with the traced tensor's before it reads
    anything from it, so on its own the check is redundant there. But the hit function calls
    TensorGuards after the checks that precede it: where one of them (or another tensor's
    expression, ``x.grad``) reads through ``e``, the type check stays in Python ahead of it, so
    that nothing is read from an object of another type.
    """

    expr: str

    def __new__(cls, check: str, expr: str) -> _TypeInCpp:
        made = super().__new__(cls, check)
        made.expr = expr
        return made


def _left_in_python(head: list[str], exprs: list[str]) -> list[str]:
    """The checks of ``head`` (those ahead of the TensorGuards call over ``exprs``) that the hit
    function keeps: every one not left to C++, and each tensor type check that something after it
    reads through (see :class:`_TypeInCpp`)."""
    kept = []
    for i, check in enumerate(head):
        if isinstance(check, _TypeInCpp):
            later = [c for c in head[i + 1:] if type(c) is not _InCpp]
            later += [e for e in exprs if e != check.expr]
            if any(_reads_through(check.expr, text) for text in later):
                kept.append(str(check))
        elif not isinstance(check, _InCpp):
            kept.append(check)
    return kept


def _reads_through(expr: str, text: str) -> bool:
    """Whether ``text`` (generated code) may evaluate ``expr``: it contains it as a whole
    expression, not as part of a longer name or an attribute of something else. Errs to yes."""
    return re.search(rf"(?<![\w.]){re.escape(expr)}(?!\w)", text) is not None


@dataclass
class _TensorBatch:
    """The tensors one TensorGuards call checks: their expressions, the real tensors seen while
    tracing (only until compile), and per dimension the size and stride to match (None: any).
    A dynamic tensor's strides are left to the ShapeEnv's guards, as in the Python checks."""

    exprs: list[str] = field(default_factory=list)
    examples: list[torch.Tensor] = field(default_factory=list)
    sizes: list[list[int | None]] = field(default_factory=list)
    strides: list[list[int | None]] = field(default_factory=list)
    specs: list[TensorSpec] = field(default_factory=list)
    end: int = 0  # the fast checks up to here come before the TensorGuards call

    def add(self, expr: str, tensor: torch.Tensor, dynamic_dims: frozenset[int]) -> None:
        self.exprs.append(expr)
        self.examples.append(tensor)
        self.sizes.append([None if d in dynamic_dims else s for d, s in enumerate(tensor.shape)])
        self.strides.append([None] * tensor.dim() if dynamic_dims else list(tensor.stride()))
        self.specs.append(TensorSpec(type(tensor), tensor.dtype, tensor.device,
                                     tensor.requires_grad, tuple(self.sizes[-1]),
                                     tuple(self.strides[-1])))

    def checker(self) -> Callable[..., bool] | None:
        """``TensorGuards(...).check``, or None where it would not serve: no tensors, or it
        refuses the tensors seen while tracing under the thread's current dispatch state (the
        state it compares against on every call)."""
        if not self.exprs:
            return None
        guards = TensorGuards(*self.examples, dynamic_dims_sizes=self.sizes,
                              dynamic_dims_strides=self.strides)
        passes = guards.check(*self.examples)
        self.examples = []  # TensorGuards keeps no reference to them; neither should the builder
        return guards.check if passes else None


def _static_size_checks(expr: str, sizes: tuple[int, ...], dynamic_dims: frozenset[int],
                        const: Callable[[Any], str]) -> list[str]:
    """Rank and static sizes of a tensor with dynamic dimensions, in as few checks as can be.

    The common case, dynamic leading dimensions (batch, sequence), is one slice compare, which
    also fixes the rank: ``x.shape[1:] == (4,)``.
    """
    first_static = max(dynamic_dims) + 1
    tail = sizes[first_static:]
    if dynamic_dims == frozenset(range(first_static)) and tail:
        return [f"{expr}.shape[{first_static}:] == {const(tail)}"]
    checks = [f"{expr}.dim() == {len(sizes)}"]
    checks += [f"{expr}.shape[{i}] == {size}" for i, size in enumerate(sizes)
               if i not in dynamic_dims]
    return checks


def has_instance_dict(value: Any) -> bool:
    """Whether ``value``'s class gives its objects an instance dict, read off the class (reading
    ``value.__dict__`` may make the dict: see :func:`instance_dict`)."""
    return type(value).__dictoffset__ != 0


def instance_dict(value: Any) -> dict:
    """``value.__dict__`` without making one where it has none yet ({} then, or where its class
    gives none). A C ``functools.partial`` makes its dict on the first read of ``__dict__``, and
    one with a dict is no longer flattened into a partial made of it (``partial(p, 1)`` keeps
    ``p`` as its ``func``): reading it while tracing or guarding would change what the program
    computes. Its ``__reduce__`` gives the dict, or None, without making it."""
    if not has_instance_dict(value):
        return {}
    if _is_c_partial(type(value)):
        return value.__reduce__()[2][3] or {}
    return getattr(value, "__dict__", {})


def _is_c_partial(cls: type) -> bool:
    """A C ``functools.partial`` class (of any import of ``_functools``) or a subclass."""
    return any(klass.__name__ == "partial" and klass.__module__ == "functools"
               and type(vars(klass).get("__reduce__")) is types.MethodDescriptorType
               for klass in cls.__mro__)


def _is_same_key(key: Any, expected: Any) -> bool:
    """``key`` is the guarded dict key ``expected``: the same object, or an equal constant of
    the same type (``1`` is not ``True`` nor ``1.0`` here), or a tuple of such."""
    if type(key) is not type(expected):
        return False
    if type(key) is tuple:
        return len(key) == len(expected) and all(map(_is_same_key, key, expected))
    if type(key) in (str, int, type(None), bool, float, bytes):
        return key == expected or (key != key and expected != expected)
    return key is expected


def _reachable_by_import(value: Any) -> bool:
    """Whether ``value`` is a module in ``sys.modules`` or a module-level object of one."""
    if isinstance(value, types.ModuleType):
        return sys.modules.get(value.__name__) is value
    module_name = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    if module is None or not isinstance(qualname, str):
        return False
    found: Any = module
    try:  # a lazy module's __getattr__ may raise anything; then hold the value weakly
        for part in qualname.split("."):
            found = getattr(found, part, None)
    except Exception:
        return False
    return found is value


def _qualname(t: type) -> str:
    module = t.__module__
    if module == "builtins":
        return t.__qualname__
    if module.startswith("torch"):
        module = "torch"
    return f"{module}.{t.__qualname__}"


def _describe(value: Any) -> str:
    # Only a str counts: a module's own __getattr__ may answer anything (torch.classes gives a
    # namespace whose repr raises).
    name = None
    for attr in ("__qualname__", "__name__"):
        try:
            # A module's own __getattr__ is the program's code (a lazy module imports): only
            # what its dict holds.
            name = vars(value).get(attr) if isinstance(value, types.ModuleType) else \
                getattr(value, attr, None)
        except Exception:
            name = None
        if isinstance(name, str) and name:
            break
        name = None
    return f"<{type(value).__name__} {name}>" if name else f"<{type(value).__name__} object>"
