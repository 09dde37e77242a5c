"""The structure of ``nn.Module`` trees, as guards check it: below the variable trackers, so a
warm-started module entry checks its guards without importing the translator's trackers (and
sympy through them).

Two mechanisms (``variables/nn_module.py`` explains how traces rely on them):

- :data:`STRUCTURE_VERSION`, one process-wide integer that torch's global registration hooks
  bump whenever a watched module (one some trace looked into) gets a parameter, buffer or
  submodule assigned or registered. A pinned module's guard compares it.
- :func:`structure_id`, a small int naming a module tree's structure (classes, registry keys,
  hooks present, tensor metadata, torch.nn hyperparameters), memoized per instance while the
  watched dicts of the tree are unchanged; a module passed as an argument is guarded by it, so
  identical blocks share one entry. :func:`structure_id_of_key` / :func:`key_of_structure_id`
  number the keys per process (graphlift.persist saves the keys).
"""

from __future__ import annotations

import itertools
import operator
import weakref
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from graphlift.config import config
from graphlift.constants import is_constant_value

_module_hooks = nn.modules.module


# -- the structure version ---------------------------------------------------------------------
class StructureVersion:
    """One integer for the whole process; a guard compares it (``holder.value == 7``)."""

    value = 0


STRUCTURE_VERSION = StructureVersion()
# id(module) -> weak reference, for every module whose members some trace read.
_watched: dict[int, weakref.ref] = {}
_hooks_installed = False


def _on_registration(module: nn.Module, name: str, value: Any) -> None:
    """torch's registration hook: a watched module's parameter, buffer or submodule changed.

    Modules nobody traced (a loss module built every step) do not bump the version.
    """
    if id(module) in _watched:
        STRUCTURE_VERSION.value += 1


def watch(module: nn.Module) -> None:
    """Bump the structure version whenever ``module`` gets a member assigned or registered."""
    global _hooks_installed
    if not _hooks_installed:
        _module_hooks.register_module_parameter_registration_hook(_on_registration)
        _module_hooks.register_module_buffer_registration_hook(_on_registration)
        _module_hooks.register_module_module_registration_hook(_on_registration)
        _hooks_installed = True
    key = id(module)
    if key not in _watched:
        _watched[key] = weakref.ref(module, lambda _, key=key: _watched.pop(key, None))



# -- structure ids (regional compilation) ------------------------------------------------------
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
_REGISTRY_DICTS = ("_parameters", "_buffers", "_modules")
# The hook dicts of each module of a tree: ``register_forward_hook`` and its kind mutate them in
# place (no registration hook fires), each registration making a RemovableHandle.
_HOOK_TABLES = (*_HOOK_DICTS, "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
                "_forward_hooks_always_called")
# torch's process-wide module hooks: adding one changes every tree's structure id.
_GLOBAL_HOOK_DICTS = ("_global_forward_pre_hooks", "_global_forward_hooks",
                      "_global_backward_pre_hooks", "_global_backward_hooks",
                      "_global_forward_hooks_always_called")
_structure_ids: dict[tuple, int] = {}  # structure key -> small int, process-wide
_structure_keys: list[tuple] = []  # small int -> structure key (graphlift.persist saves keys)
# id(module) -> _Memo of that instance
_structure_memo: dict[int, _Memo] = {}
_requires_grad = operator.attrgetter("requires_grad")
_chain = itertools.chain.from_iterable


class _Memo:
    """A module tree's structure id and what proves it still holds, checked on every call.

    Without a Python loop over the tree: the lengths of every module's registries and instance
    ``__dict__`` (``del m.w``, ``m.forward = f``) and the identity of the registries' values
    (``m._modules["fc"] = other``, ``m._parameters["w"] = p``) are compared in C-level maps
    against the recorded ``values``. Hooks are
    added in place; each registration (module, global or tensor hook) makes a RemovableHandle,
    whose class counter is compared first: only when it moved are the hook dicts' lengths and
    keys compared, and the counter recorded again if they are unchanged.
    """

    __slots__ = ("ref", "sid", "tensors", "sized", "registries", "lengths", "values",
                 "handle_id", "hook_dicts", "hook_keys")

    def __init__(self, ref: weakref.ref, sid: int, tensors: tuple,
                 dicts: dict[str, list[dict]]) -> None:
        self.ref, self.sid, self.tensors = ref, sid, tensors
        self.registries = tuple(dicts["registries"])
        self.sized = (*self.registries, *dicts["instance"])
        self.lengths = list(map(len, self.sized))
        self.values = list(_chain(map(dict.values, self.registries)))
        self.hook_dicts = tuple(dicts["hooks"])
        self.handle_id = RemovableHandle.next_id
        self.hook_keys = _hook_keys(self.hook_dicts)

    def holds(self) -> bool:
        # Equal lengths first, so that the pairwise identity test covers every value.
        if list(map(len, self.sized)) != self.lengths or \
                not all(map(operator.is_, _chain(map(dict.values, self.registries)), self.values)):
            return False
        if RemovableHandle.next_id != self.handle_id:
            if _hook_keys(self.hook_dicts) != self.hook_keys:
                return False
            self.handle_id = RemovableHandle.next_id
        return True


def _hook_keys(dicts: tuple[dict, ...]) -> tuple[list[int], list[Any]]:
    return list(map(len, dicts)), list(_chain(dicts))


def structure_id(module: nn.Module) -> int:
    """A small int naming ``module``'s structure; equal ints mean interchangeable modules.

    Memoized per instance while the watched dicts of its tree are unchanged (:class:`_Memo`).
    """
    return _memo(module).sid


def requires_grad_flags(module: nn.Module) -> tuple[bool, ...]:
    """``requires_grad`` of every parameter and buffer of the tree, in structure order: one
    check for all of them (flipping one changes no registry, so it is read on every call)."""
    return tuple(map(_requires_grad, _memo(module).tensors))


def _memo(module: nn.Module) -> _Memo:
    memo = _structure_memo.get(id(module))
    if memo is not None and memo.ref() is module and memo.holds():
        return memo
    tensors: dict[int, torch.Tensor] = {}
    dicts: dict[str, list[dict]] = {
        "registries": [], "instance": [],
        "hooks": [getattr(_module_hooks, name) for name in _GLOBAL_HOOK_DICTS]}
    key = (has_global_hooks(), structure_key(module, tensors, dicts))
    sid = structure_id_of_key(key)
    key_id = id(module)
    # The dict is bound as a default: at interpreter exit the module's globals may be None
    # before the last modules die.
    ref = weakref.ref(module, lambda _, key_id=key_id, memos=_structure_memo:
                      memos.pop(key_id, None))
    memo = _structure_memo[key_id] = _Memo(ref, sid, tuple(tensors.values()), dicts)
    return memo


def structure_id_of_key(key: tuple) -> int:
    """The small int of a structure key in this process, numbered on first use (a warm start
    numbers the keys it loads, so ``structure_id`` of a matching module gives the same int)."""
    sid = _structure_ids.get(key)
    if sid is None:
        sid = _structure_ids[key] = len(_structure_keys)
        _structure_keys.append(key)
    return sid


def key_of_structure_id(sid: int) -> tuple:
    """What :func:`structure_id_of_key` numbered ``sid``: the ids are per process, their keys
    (classes, names, tensor metadata) are what a saved entry keeps."""
    return _structure_keys[sid]


def structure_key(module: nn.Module, tensors: dict[int, torch.Tensor],
                  dicts: dict[str, list[dict]] | None = None) -> tuple:
    """What a trace of ``module`` may rely on without a guard of its own, as one hashable
    tuple: per module of the tree (in registration order, shared submodules by first index),
    its class, registry keys, hooks present, tensor metadata and torch.nn hyperparameters.
    ``tensors`` receives the tree's tensors (id -> tensor), in order; ``dicts`` the watched
    dicts of each module (see :class:`_Memo`)."""
    rows: list[tuple] = []
    first: dict[int, int] = {}
    pending = [module]
    while pending:
        m = pending.pop(0)
        if id(m) in first:
            rows.append(("shared", first[id(m)]))
            continue
        first[id(m)] = len(rows)
        watch(m)
        if dicts is not None:
            _collect_dicts(m, dicts)
        children = m.__dict__.get("_modules", {})
        rows.append((type(m), tuple(children),
                     tuple(bool(m.__dict__.get(h)) for h in _HOOK_DICTS),
                     _tensor_specs(m.__dict__.get("_parameters", {}), tensors),
                     _tensor_specs(m.__dict__.get("_buffers", {}), tensors),
                     _torch_constants(m)))
        pending.extend(c for c in children.values() if c is not None)
    return tuple(rows)


def _collect_dicts(m: nn.Module, dicts: dict[str, list[dict]]) -> None:
    """Add ``m``'s dicts that a memoized structure id watches (see :class:`_Memo`)."""
    own = m.__dict__
    dicts["instance"].append(own)
    for kind, names in (("registries", _REGISTRY_DICTS), ("hooks", _HOOK_TABLES)):
        dicts[kind].extend(d for d in map(own.get, names) if isinstance(d, dict))


def _tensor_specs(registry: dict, seen: dict[int, torch.Tensor]) -> tuple:
    """(name, class, sizes, strides, offset, dtype, device) per member; a tensor met before
    (tied weights) by its first index."""
    specs = []
    for name, t in registry.items():
        if t is None:
            specs.append((name, None))
        elif id(t) in seen:
            specs.append((name, "tied", list(seen).index(id(t))))
        else:
            seen[id(t)] = t
            specs.append((name, type(t), tuple(t.shape), t.stride(), t.storage_offset(),
                          t.dtype, t.device))
    return tuple(specs)


def _torch_constants(m: nn.Module) -> tuple:
    """The hyperparameters that a trace reads unguarded from torch.nn's own layers
    (``NNModuleVariable._plain_attr``); compared by repr so that 0.0 and -0.0 differ."""
    if not type(m).__module__.startswith("torch.nn.") or config.guard_torch_module_constants:
        return ()
    return tuple((k, type(v), repr(v)) for k, v in m.__dict__.items()
                 if k != "training" and is_constant_value(v))


def has_global_hooks() -> bool:
    return bool(_module_hooks._global_backward_pre_hooks or _module_hooks._global_backward_hooks
                or _module_hooks._global_forward_hooks or _module_hooks._global_forward_pre_hooks)
