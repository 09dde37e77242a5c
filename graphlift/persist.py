"""Warm start: cache entries saved to ``config.cache_dir`` (``GRAPHLIFT_CACHE_DIR``) and loaded by
a later process, which then runs the function without tracing it.

An entry is saved as data, never as pickled objects: its guard and run functions as their
generated source, the FX graph node by node, and every object their namespaces hold as a
*portable* value: a constant (numbers, strings, tuples, dtypes, devices, sizes) or an object
reached by import, written as its module and qualified name (``torch.add``, a user's module-level
function or class). Loading rebinds each such name to the object the new process has there, and
the guards then check the call as usual (``G['torch'] is <module torch>`` compares the frame's
global with the rebound module). Modules: a module argument guarded by its structure id is saved
with the structure's key and renumbered on load; a module pinned by identity is saved when it is
a module-level global, by its name, and its members by their dotted names (sections below). A
resume function after a graph break is saved as its recipe (the frame's code and the resume key)
and made again by the loader; its own entries have a file of their own, keyed by the resume
code's contents, which the recipe reproduces exactly. An entry holding anything else (a module
pinned as a closure, a closure made at run time, a grad-mode block's exit) is not saved: the
next process traces it.

What may be saved and loaded, by kind of value (``_encode`` / ``_decode``):

==================  ============================================================================
constant            None, bool, int, str, float (bit-exact), tuple, list, dict, slice, dtype,
                    device, torch.Size, memory formats and layouts
import              modules, functions, classes, builtins reachable as ``module.qualname``;
                    only modules the loading process has imported already are used
module globals      an imported module's ``__dict__`` (guards on another module's helper)
pinned member       a pinned global module, its submodules, parameters and buffers, as
                    ``module.global`` and a dotted member name (``fc.weight``)
weak reference      a weak reference to an importable object or a code object (below)
code                a module-level function's code object, by that function's import path; it
                    loads only if the code there still has the saved contents
resume point        (in a run function) the resume key over the frame's own code
operator getter     ``operator.attrgetter`` / ``itemgetter`` of constants; ``functools.partial``
                    of portable values
==================  ============================================================================

Files: one per code object and options, named by a SHA-256 key over the code object's contents
(bytecode, constants, names, file, line), torch's, Python's and graphlift's versions (graphlift's
by a hash of its own sources) and the backend. Each file starts with a line
``graphlift-cache 1 <hmac>``: an HMAC-SHA256 of the rest under a random key kept in the
directory (``.graphlift-key``, mode 0600). A file whose HMAC, version or key does not match, or
that does not parse, is ignored with a warning and never executed. The directory must belong to
the user and not be writable by others, else the cache is off (with a warning): whoever can
write there could plant code.

Backends: ``eager`` runs the loaded graph as it is. ``aot_eager`` and ``inductor`` compile it
again on load, with example inputs made from the saved metadata of each placeholder (sizes,
strides, dtype, device, requires_grad: ``torch.empty_strided``; backends read no values); inductor
then finds its own FX graph and AOTAutograd caches (``TORCHINDUCTOR_CACHE_DIR``) warm and skips
code generation: the cold process filled them, its static graph compiled under a tracing context
with a ShapeEnv too (``OutputGraph._backend_context``). A graph with symbolic sizes or int inputs
is not saved for them (its examples would need this process's ShapeEnv). A callable backend
reachable by import is saved under its import path (:func:`saved_as`) and called again on the
loaded graph, with zero tensors of the saved metadata (static graphs only, as for ``aot_eager``):
only the backend's own work is repeated. Other backends (a lambda, a closure, an object,
``mode=`` settings) are not saved. The graph saved is the one the entry keeps, after
the backend ran: inductor's pre-grad passes may have rewritten it in place (the same computation;
its cache keys stay those of the cold compile where the passes leave their own output as it is,
as on ``x + 1`` and a 2-block decoder: the first warm process hits both caches).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import hmac
import itertools
import json
import operator
import os
import re
import secrets
import stat
import sys
import tempfile
import types
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.fx

from graphlift import bytecode, logs, module_structure
from graphlift.backends import call_graph_callable, lookup_backend
from graphlift.cache import CacheEntry, ExtraState
from graphlift.config import config
from graphlift.guards import CompiledGuards, Guard, GuardKind, TensorSpec, tensor_checker
from graphlift.resume import ResumeKey, ResumePoint, make_resume_code
from graphlift.sources import GlobalSource, LocalSource

FORMAT = 1
MAGIC = b"graphlift-cache"
KEY_FILE = ".graphlift-key"
SAVED_BACKENDS = frozenset({"eager", "aot_eager", "inductor"})  # and callables: see saved_as
EXAMPLES_NOT_NEEDED = frozenset({"eager"})  # backends compiling the graph without examples


class NotPortable(Exception):
    """A value that cannot be written as data and rebound in another process."""


# -- values ------------------------------------------------------------------------------------
_SCALARS = (type(None), bool, int, str)
_TORCH_NAMED = (torch.memory_format, torch.layout)


# While an entry is encoded: the code object of its frame (resume points continue it).
_frame_code: list[types.CodeType] = []
# While an entry is encoded: id -> [module, global name, dotted member] of the modules pinned by
# identity that are module-level globals, their submodules, parameters and buffers.
_pinned_members: dict[int, list[str]] = {}


def _encode(value: Any) -> Any:
    """``value`` as JSON data that :func:`_decode` turns back into it, or NotPortable."""
    kind = type(value)
    if isinstance(value, (torch.nn.Module, torch.Tensor)) and id(value) in _pinned_members:
        return {"member": _pinned_members[id(value)]}
    if value is module_structure.STRUCTURE_VERSION:  # the module guards' process-wide counter
        return {"import": ["graphlift.module_structure", "STRUCTURE_VERSION"]}
    if kind is ResumePoint:
        return {"resume": _encode_resume(value)}
    if kind in _SCALARS:
        return value
    if kind is float:
        return {"float": value.hex()}
    if kind in (tuple, list, torch.Size):
        return {kind.__name__: [_encode(v) for v in value]}
    if kind is dict and _module_of_globals(value) is not None:
        return {"globals": _module_of_globals(value)}
    if kind is dict:
        return {"dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if kind is slice:
        return {"slice": [_encode(value.start), _encode(value.stop), _encode(value.step)]}
    if kind is torch.dtype:
        return {"dtype": str(value).removeprefix("torch.")}
    if kind is torch.device:
        return {"device": str(value)}
    if isinstance(value, _TORCH_NAMED):
        return {"torch": str(value).removeprefix("torch.")}
    if kind is weakref.ref:
        referent = value()
        if referent is None:
            raise NotPortable("a dead weak reference")
        return {"weak": _encode(referent)}
    if kind in (operator.attrgetter, operator.itemgetter):
        return {kind.__name__: [_encode(a) for a in value.__reduce__()[1]]}
    if kind is types.CodeType:
        return {"code": _encode_code(value)}
    if kind is functools.partial:
        return {"partial": [_encode(value.func), _encode(value.args), _encode(value.keywords)]}
    return {"import": _encode_import(value)}


def _encode_resume(point: ResumePoint) -> list[Any]:
    """A resume function after a graph break, as the recipe that makes it: its key (where the
    frame continues, the stack's shape, unbound locals) over the frame's code, which the loader
    has (:func:`resume.make_resume_code` is deterministic: the same code and key give the same
    resume code, and so the same cache file for the resume function's own entries)."""
    if not _frame_code or _code_text(make_resume_code(_frame_code[0], point.key)) != \
            _code_text(point.code):
        raise NotPortable("a resume function of another frame's code")
    key = point.key
    return [key.offset, list(key.stack_nulls), sorted(key.unbound), _portable(point.make_wrapper)]


def _decode_resume(data: list[Any], state: ExtraState, code: types.CodeType,
                   options: Any) -> ResumePoint:
    offset, nulls, unbound, make_wrapper = data
    key = ResumeKey(offset, tuple(map(bool, nulls)), frozenset(unbound))
    return state.resume_point(code, key, options, _decode(make_wrapper))


def _module_of_globals(namespace: dict) -> str | None:
    """The name of the imported module whose ``__dict__`` ``namespace`` is (a guard on a helper
    of another module reads that module's globals), or None."""
    name = namespace.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return name if module is not None and vars(module) is namespace else None


def _encode_code(code: types.CodeType) -> list[str]:
    """A module-level function's code object: that function's import path, and a digest of the
    code's contents that the loader's code must match (the user may have edited it since)."""
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == code.co_filename:
            path = [module.__name__, bytecode.qualname(code)]
            try:
                if _resolve(*path).__code__ is code:
                    return [*path, _code_digest(code)]
            except Exception:  # no such function in that module
                break
    raise NotPortable(f"the code of {bytecode.qualname(code)} (not a module-level function)")


def _decode_code(data: list[str]) -> types.CodeType:
    module, qualname, digest = data
    code = _resolve(module, qualname).__code__
    if _code_digest(code) != digest:
        raise ValueError(f"{module}.{qualname} has changed since the entry was saved")
    return code


def _encode_import(value: Any) -> list[str]:
    if isinstance(value, types.ModuleType):
        name, candidates = value.__name__, [""]
    else:
        name = getattr(value, "__module__", None)
        # A C function's qualname may name a class its module does not export
        # (torch.sin is torch._VariableFunctionsClass.sin); its plain name then serves.
        candidates = [getattr(value, "__qualname__", None), getattr(value, "__name__", None)]
    for qualname in candidates:
        if not isinstance(name, str) or not isinstance(qualname, str) or "<" in qualname:
            continue
        try:
            if _resolve(name, qualname) is value:
                return [name, qualname]
        except Exception:  # not there: try the next name
            continue
    alias = _TYPES_ALIASES.get(id(value))
    if alias is not None and getattr(types, alias) is value:
        return ["types", alias]
    raise NotPortable(f"{type(value).__name__} object {value!r:.60} (not reachable by import)")


# Builtin types whose own names are not importable (builtins.function): their names in ``types``.
_TYPES_ALIASES = {id(v): k for k, v in vars(types).items() if isinstance(v, type)}


def _resolve(module: str, qualname: str) -> Any:
    """``module.qualname`` among the modules already imported (loading never imports)."""
    parts = module.split(".")
    found: Any = sys.modules[parts[0]]
    for i, part in enumerate(parts[1:], 1):
        found = sys.modules.get(".".join(parts[:i + 1])) or getattr(found, part)
    for part in filter(None, qualname.split(".")):
        found = getattr(found, part)
    return found


def _decode(data: Any) -> Any:
    if not isinstance(data, dict):
        return data
    ((kind, value),) = data.items()
    return _DECODERS[kind](value)


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "float": float.fromhex,
    "tuple": lambda items: tuple(map(_decode, items)),
    "list": lambda items: list(map(_decode, items)),
    "Size": lambda items: torch.Size(map(_decode, items)),
    "dict": lambda pairs: {_decode(k): _decode(v) for k, v in pairs},
    "slice": lambda parts: slice(*map(_decode, parts)),
    "dtype": lambda name: _checked(getattr(torch, name), torch.dtype),
    "device": torch.device,
    "torch": lambda name: _checked(getattr(torch, name), _TORCH_NAMED),
    "weak": lambda data: weakref.ref(_decode(data)),
    "attrgetter": lambda args: operator.attrgetter(*map(_decode, args)),
    "itemgetter": lambda args: operator.itemgetter(*map(_decode, args)),
    "import": lambda path: _resolve(*path),
    "globals": lambda name: vars(sys.modules[name]),
    "member": lambda path: _member(*path),
    "resume": lambda data: _unavailable("a resume function outside a run namespace"),
    "code": _decode_code,
    "partial": lambda parts: functools.partial(_decode(parts[0]), *_decode(parts[1]),
                                               **_decode(parts[2])),
}


def _unavailable(what: str) -> Any:
    raise ValueError(f"{what} cannot be loaded")


def _member(module: str, name: str, member: str) -> Any:
    root = _resolve(module, name)
    return operator.attrgetter(member)(root) if member else root


def _checked(value: Any, kinds: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kinds):
        raise TypeError(f"{value!r} is not a {kinds}")
    return value


def _portable(value: Any) -> Any:
    """Encode ``value`` and prove that decoding gives it back (the same object, or an equal
    value of the same type)."""
    data = _encode(value)
    if type(value) is ResumePoint:  # made again by the loader's state (its recipe is checked)
        return data
    back = _decode(json.loads(json.dumps(data)))
    if back is not value and not (type(back) is type(value) and _same(back, value)):
        raise NotPortable(f"{value!r} does not survive a round trip")
    return data


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float):
        return a.hex() == b.hex()
    if isinstance(a, weakref.ref):
        return a() is b()
    if isinstance(a, (operator.attrgetter, operator.itemgetter)):
        return a.__reduce__() == b.__reduce__()
    if isinstance(a, functools.partial):
        return (a.func, a.args, a.keywords) == (b.func, b.args, b.keywords)
    return bool(a == b)


def _namespace(namespace: dict[str, Any], skip: frozenset[str]) -> dict[str, Any]:
    return {name: _portable(value) for name, value in namespace.items()
            if name not in skip and name != "__builtins__"}


# -- the graph ---------------------------------------------------------------------------------
def _encode_graph(gm: torch.fx.GraphModule) -> dict[str, Any]:
    """The graph node by node; ``code`` lets the loader prove it rebuilt the same graph."""
    if any(True for _ in gm.named_parameters()) or any(True for _ in gm.named_buffers()) or \
            any(True for _ in gm.named_children()):
        raise NotPortable("a graph holding tensors or submodules")
    nodes = []
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            raise NotPortable("a get_attr node")
        target = node.target if isinstance(node.target, str) else _portable(node.target)
        nodes.append({"op": node.op, "name": node.name, "target": target,
                      "args": _encode_arg(node.args), "kwargs": _encode_arg(node.kwargs)})
    return {"class_name": type(gm).__name__, "nodes": nodes, "code": gm.code}


def _encode_examples(gm: torch.fx.GraphModule) -> list[dict[str, Any]]:
    """Per placeholder, the metadata of the fake tensor it was traced with (what a backend that
    compiles for its inputs needs), or NotPortable for a symbolic size or a non-tensor input."""
    examples = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        fake = node.meta.get("example_value")
        if not isinstance(fake, torch.Tensor):
            raise NotPortable(f"a graph input that is not a tensor ({node.name})")
        parts = (*fake.shape, *fake.stride(), fake.storage_offset())
        if not all(type(p) is int for p in parts):
            raise NotPortable(f"a graph input of symbolic size ({node.name})")
        examples.append({"sizes": list(fake.shape), "strides": list(fake.stride()),
                         "offset": fake.storage_offset(), "dtype": _portable(fake.dtype),
                         "device": _portable(fake.device), "requires_grad": fake.requires_grad})
    return examples


def _compile_loaded(graph: torch.fx.GraphModule, examples: list[dict[str, Any]] | None,
                    backend: str | Callable) -> Callable:
    """The backend's callable for a loaded graph. A callable of the user's gets the graph and
    tensors of the saved metadata, as its cold compile got the graph and the call's tensors. A
    backend of torch's that compiles for its inputs gets fake tensors of the saved metadata,
    static sizes, under a tracing context whose fake mode has a ShapeEnv, as torch.compile hands
    them over: inductor's FX graph and AOTAutograd caches are bypassed without a ShapeEnv."""
    if examples is None:
        return lookup_backend(backend)(graph, [])
    if not isinstance(backend, str):
        return backend(graph, _decode_examples(examples))
    # Imported here: these backends import torch._dynamo anyway; the eager path never does.
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=True)
    fakes = [mode.from_tensor(t, static_shapes=True) for t in _decode_examples(examples)]
    # Each node's fake value, as the trace left it: AOTAutograd's cache serves only graphs whose
    # method calls are made on nodes with an ``example_value``.
    FakeTensorProp(graph, mode).propagate_dont_convert_inputs(*fakes)
    for node in graph.graph.nodes:
        if "val" in node.meta:
            node.meta["example_value"] = node.meta.pop("val")
    with tracing(TracingContext(mode)):
        return lookup_backend(backend)(graph, fakes)


def _decode_examples(data: list[dict[str, Any]]) -> list[torch.Tensor]:
    """Tensors of the saved metadata, filled with zeros: torch's backends trace them as fake
    tensors and read no values; a user's backend that reads them reads no garbage."""
    examples = []
    for item in data:
        sizes, strides = item["sizes"], item["strides"]
        extent = item["offset"] + sum((n - 1) * s for n, s in zip(sizes, strides)) + 1 \
            if all(sizes) else 0
        storage = torch.zeros(extent, dtype=_decode(item["dtype"]), device=_decode(item["device"]))
        example = storage.as_strided(sizes, strides, item["offset"])
        examples.append(example.requires_grad_(bool(item["requires_grad"])))
    return examples


def _encode_arg(arg: Any) -> Any:
    if isinstance(arg, torch.fx.Node):
        return {"node": arg.name}
    # FX keeps args and kwargs as its immutable_list and immutable_dict: rebuilt as FX makes them.
    if type(arg) is tuple or isinstance(arg, list):
        return {"tuple" if type(arg) is tuple else "list": [_encode_arg(a) for a in arg]}
    if isinstance(arg, dict):
        return {"dict": [[_portable(k), _encode_arg(v)] for k, v in arg.items()]}
    return _portable(arg)


def _decode_graph(data: dict[str, Any]) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    nodes: dict[str, torch.fx.Node] = {}

    def arg(value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"node"}:
            return nodes[value["node"]]
        if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("tuple", "list"):
            kind, items = next(iter(value.items()))
            return (tuple if kind == "tuple" else list)(arg(v) for v in items)
        if isinstance(value, dict) and set(value) == {"dict"}:
            return {_decode(k): arg(v) for k, v in value["dict"]}
        return _decode(value)

    for node in data["nodes"]:
        target = node["target"] if isinstance(node["target"], str) else _decode(node["target"])
        made = graph.create_node(node["op"], target, arg(node["args"]), arg(node["kwargs"]),
                                 name=node["name"])
        nodes[node["name"]] = made
    gm = torch.fx.GraphModule(torch.nn.Module(), graph, class_name=data["class_name"])
    if gm.code != data["code"]:
        raise ValueError("the rebuilt graph's code differs from the saved one")
    return gm


# -- entries -----------------------------------------------------------------------------------
def encode_entry(entry: CacheEntry, module_name: str | None = None,
                 code: types.CodeType | None = None) -> dict[str, Any]:
    """An entry as data, or NotPortable naming what keeps it from being saved. ``module_name``:
    the module whose globals the frame runs in (pinned modules are saved as its globals);
    ``code``: the frame's code object (what its resume functions continue)."""
    guards = entry.compiled_guards
    if entry.internal_error is not None:
        raise NotPortable("an entry that runs eagerly after an internal error")
    _pinned_members.clear()
    _frame_code[:] = [code] if code is not None else []
    try:
        pinned = [_pin(source, ref(), module_name) for source, ref in guards.module_roots]
        return {**_encode_entry(entry), "pinned": pinned,
                "version": _version_guard(guards) if pinned else None}
    finally:
        _pinned_members.clear()
        _frame_code.clear()


def _encode_entry(entry: CacheEntry) -> dict[str, Any]:
    guards = entry.compiled_guards
    run_code = entry.run.__code__
    return {
        "guards": {
            "name": guards.fn.__name__, "source": guards.source,
            "fast_source": guards.fast_source,
            "params": list(guards.params),
            "namespace": _namespace(guards.namespace,
                                    frozenset({"__gl_tensors", guards.fn.__name__})),
            "guards": [{**dataclasses.asdict(g), "kind": g.kind.value} for g in guards.guards],
            "tensors": [_encode_spec(s) for s in guards.tensor_specs],
            "structures": [_encode_structure(guards, *root) for root in guards.structure_roots],
        },
        "run": {
            "source": entry.run_source,
            "namespace": _namespace(entry.run.__globals__, frozenset({"__gl_run", "__gl_graph"})),
            "at": [run_code.co_filename, run_code.co_name, run_code.co_firstlineno],
        },
        "graph": None if entry.graph is None else _encode_graph(entry.graph),
        "examples": None if entry.graph is None or (isinstance(entry.options.backend, str) and
                                                    entry.options.backend in EXAMPLES_NOT_NEEDED)
        else _encode_examples(entry.graph),
    }


# -- structure ids (regional compilation) ------------------------------------------------------
# A module argument is guarded by ``nn_module_structure(L['self']) == 3``: a small int numbered
# per process (module_structure.structure_id). The entry keeps the structure *key* behind the
# int (classes by import path, registry names, tensor metadata) and the exact check that
# compares it; loading
# numbers the key in the new process and rewrites the int in the checks, so a module of that
# structure passes there and any other fails.
def _encode_structure(guards: CompiledGuards, source: Any, structure: Callable[[Any], int],
                      sid: int) -> dict[str, Any]:
    if structure is not module_structure.structure_id:
        raise NotPortable("a module guarded by an unknown structure function")
    text = f"nn_module_structure({source.name()}) == {sid}"
    found = [g for g in guards.guards if g.kind is GuardKind.NN_MODULE and g.text == text]
    if len(found) != 1:
        raise NotPortable(f"a structure guard not found once ({text})")
    return {"sid": sid, "key": _portable(module_structure.key_of_structure_id(sid)),
            "check": found[0].check, "text": text,
            "local": source.local_name if isinstance(source, LocalSource) else None}


# -- modules pinned by identity ------------------------------------------------------------------
# A module reached as a global is pinned: ``G['model'] is <module>`` and one structure version
# proving its members unchanged, its parameters passed to the graph as constants. It is saved as
# the module-level global it is (``__main__.model``) and its members by their dotted names; loading
# reads them from the module there, watches its tree and rewrites the version guard to this
# process's version. A module reached otherwise (a closure, an attribute) is not saved.
def _pin(source: Any, module: Any, module_name: str | None) -> list[str]:
    if not isinstance(source, GlobalSource) or module is None or module_name is None:
        raise NotPortable(f"a module pinned by identity at {source.name()} (not a global)")
    path = [module_name, source.global_name]
    try:
        found = _resolve(*path)
    except Exception:
        found = None
    if found is not module:
        raise NotPortable(f"a module pinned by identity at {source.name()} (not importable)")
    for name, member in itertools.chain(module.named_modules(remove_duplicate=False),
                                        module.named_parameters(remove_duplicate=False),
                                        module.named_buffers(remove_duplicate=False)):
        _pinned_members.setdefault(id(member), [*path, name])
    return path


def _version_guard(guards: CompiledGuards) -> dict[str, Any]:
    found = [g for g in guards.guards if g.kind is GuardKind.NN_MODULE
             and g.text.startswith("nn_module_structure_version == ")]
    if len(found) != 1:
        raise NotPortable("a pinned module without one structure version guard")
    return {"check": found[0].check, "text": found[0].text,
            "value": module_structure.STRUCTURE_VERSION.value}


def _rebind_pinned(data: dict[str, Any], replace: dict[str, str]) -> list:
    """Watch the pinned modules' trees here, and rewrite the version guard to this process's
    version: the members were just read from the modules, so they are what the guard proves."""
    roots = []
    for module_name, global_name in data["pinned"]:
        module = _resolve(module_name, global_name)
        watch = module_structure.watch
        for m in module.modules():
            watch(m)
        roots.append((GlobalSource(global_name), weakref.ref(module)))
    if data["version"] is not None:
        _replace_suffix(replace, data["version"], data["version"]["value"],
                        module_structure.STRUCTURE_VERSION.value)
    return roots


def _replace_suffix(replace: dict[str, str], saved: dict[str, Any], old: int, new: int) -> None:
    for text in (saved["check"], saved["text"]):
        if not text.endswith(f" == {old}"):
            raise ValueError(f"a module check of another form: {text}")
        replace[text] = text.removesuffix(f" == {old}") + f" == {new}"


def _renumber(structures: list[dict[str, Any]],
              replace: dict[str, str]) -> tuple[Callable[[str], str], list]:
    """A function rewriting saved structure checks to this process's ids (and what ``replace``
    holds already), and the entry's ``structure_roots`` (only frame locals: what the recompile
    limit counts by)."""
    roots = []
    for item in structures:
        sid = module_structure.structure_id_of_key(_decode(item["key"]))
        _replace_suffix(replace, item, item["sid"], sid)
        if item["local"] is not None:
            roots.append((LocalSource(item["local"]), module_structure.structure_id, sid))
    if not replace:
        return (lambda text: text), roots
    # One pass, whole checks only (``== 3`` is not a prefix of ``== 30``).
    pattern = re.compile("|".join(re.escape(k) for k in sorted(replace, key=len, reverse=True))
                         + r"(?!\d)")
    return (lambda text: pattern.sub(lambda m: replace[m.group(0)], text)), roots


def _encode_spec(spec: TensorSpec) -> dict[str, Any]:
    return {"type": _portable(spec.type), "dtype": _portable(spec.dtype),
            "device": _portable(spec.device), "requires_grad": spec.requires_grad,
            "sizes": list(spec.sizes), "strides": list(spec.strides)}


def decode_entry(data: dict[str, Any], compile_id: str, options: Any,
                 state: ExtraState | None = None,
                 code: types.CodeType | None = None) -> CacheEntry:
    """Rebuild an entry in this process: rebind names, rebuild the graph, exec the sources.
    ``state`` and ``code``: the frame's, where resume functions are made (after graph breaks)."""
    g = data["guards"]
    replace: dict[str, str] = {}
    module_roots = _rebind_pinned(data, replace)
    renumber, structure_roots = _renumber(g["structures"], replace)
    namespace = {name: _decode(v) for name, v in g["namespace"].items()}
    specs = tuple(TensorSpec(_decode(s["type"]), _decode(s["dtype"]), _decode(s["device"]),
                             bool(s["requires_grad"]), tuple(s["sizes"]), tuple(s["strides"]))
                  for s in g["tensors"])
    checker = tensor_checker(specs) if g["fast_source"] and config.cpp_tensor_guards else None
    if checker is not None:
        namespace["__gl_tensors"] = checker
    source = renumber(g["fast_source"] if checker is not None else g["source"])
    exec(compile(source, "<graphlift guards>", "exec"), namespace)  # noqa: S102 - authenticated
    fn = namespace[g["name"]]
    guards = [Guard(**{**item, "kind": GuardKind(item["kind"]), "text": renumber(item["text"]),
                       "check": renumber(item["check"]),
                       "current_names": tuple(item["current_names"])}) for item in g["guards"]]
    compiled = CompiledGuards(fn, renumber(g["source"]), guards, tuple(g["params"]), namespace,
                              fast_source=source if checker is not None else None,
                              tensor_specs=specs if checker is not None else (),
                              structure_roots=tuple(structure_roots),
                              module_roots=tuple(module_roots))
    r = data["run"]
    run_namespace = {name: _decode_resume(v["resume"], state, code, options)
                     if isinstance(v, dict) and "resume" in v and state is not None
                     and code is not None else _decode(v)
                     for name, v in r["namespace"].items()}
    graph = None
    if data["graph"] is not None:
        graph = _decode_graph(data["graph"])
        compiled_graph = _compile_loaded(graph, data["examples"], options.backend)
        run_namespace["__gl_graph"] = call_graph_callable(compiled_graph)
    exec(compile(r["source"], "<graphlift run>", "exec"), run_namespace)  # noqa: S102
    run = run_namespace["__gl_run"]
    run.__code__ = bytecode.at_line(run.__code__, *r["at"])
    return CacheEntry(compile_id, options, compiled, run, r["source"], graph)


# -- the key -----------------------------------------------------------------------------------
def entry_key(code: types.CodeType, options: Any) -> str:
    """Which file holds the entries of ``code`` compiled with ``options`` (hex SHA-256)."""
    parts = [f"format {FORMAT}", f"python {sys.version}", f"torch {torch.__version__}",
             f"graphlift {_graphlift_hash()}", f"options {options.describe()}",
             f"backend {saved_as(options.backend)}", f"dynamic {options.dynamic!r}",
             _code_text(code)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _code_digest(code: types.CodeType) -> str:
    return hashlib.sha256(_code_text(code).encode()).hexdigest()


def _code_text(code: types.CodeType) -> str:
    """The code object's contents as text, stable across processes (frozensets sorted)."""
    consts = []
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            consts.append(f"<code {_code_text(c)}>")
        elif isinstance(c, frozenset):
            consts.append(f"frozenset({sorted(map(repr, c))})")
        else:
            consts.append(repr(c))
    return repr((code.co_filename, bytecode.qualname(code), code.co_firstlineno,
                 code.co_code.hex(), consts, code.co_names,
                 code.co_varnames, code.co_freevars, code.co_cellvars,
                 code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                 code.co_flags, getattr(code, "co_exceptiontable", b"").hex(),  # none in 3.10
                 code.co_linetable.hex()))


@functools.cache
def _graphlift_hash() -> str:
    """A hash of graphlift's own sources: an edited graphlift never loads an older one's code."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        digest.update(path.relative_to(Path(__file__).parent).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


# -- the directory -----------------------------------------------------------------------------
def cache_dir() -> Path | None:
    """The cache directory in use, or None (unset, or refused with a warning)."""
    name = config.cache_dir or os.environ.get("GRAPHLIFT_CACHE_DIR")
    return _checked_dir(name) if name else None


@functools.cache
def _checked_dir(name: str) -> Path | None:
    path = Path(name).expanduser()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check_private(path, stat.S_IWGRP | stat.S_IWOTH)
        _key(path)
    except (OSError, PermissionError) as error:
        _warn(f"graphlift's cache directory {path} is not used: {error}")
        return None
    return path


def _check_private(path: Path, forbidden: int) -> None:
    """Refuse a path that another user owns or may change."""
    info = path.stat()
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user")
    if info.st_mode & forbidden:
        raise PermissionError(f"{path} may be changed by other users "
                              f"(mode {stat.filemode(info.st_mode)})")


@functools.cache
def _key(directory: Path) -> bytes:
    """The directory's HMAC key, made on first use (readable by its owner only)."""
    path = directory / KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        _check_private(path, 0o077)
        key = path.read_bytes()
        if len(key) != 32:
            raise PermissionError(f"{path} is not a graphlift key") from None
        return key
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key


def _sign(directory: Path, payload: bytes) -> str:
    return hmac.new(_key(directory), payload, hashlib.sha256).hexdigest()


def _warn(message: str) -> None:
    logs.warn(message)


def read_entries(directory: Path, key: str) -> list[dict[str, Any]]:
    """The verified entries saved under ``key``; [] when none, or (with a warning) when the file
    is corrupt, signed by another key, or written for other versions."""
    path = directory / f"{key}.json"
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        _warn(f"graphlift ignores the cache file {path}: {error}")
        return []
    header, _, payload = blob.partition(b"\n")
    fields = header.split(b" ")
    if len(fields) != 3 or fields[0] != MAGIC or fields[1] != str(FORMAT).encode() or \
            not hmac.compare_digest(fields[2], _sign(directory, payload).encode()):
        _warn(f"graphlift ignores the cache file {path}: it is not one this cache wrote "
              "(corrupt, from another format, or signed with another key); it is never run")
        return []
    try:
        data = json.loads(payload)
        if data["key"] != key:
            raise ValueError("written for another code object or version")
        entries = data["entries"]
        if not isinstance(entries, list):
            raise ValueError("no entry list")
    except (ValueError, KeyError, TypeError) as error:
        _warn(f"graphlift ignores the cache file {path}: {error}")
        return []
    return entries


def write_entries(directory: Path, key: str, entries: list[dict[str, Any]]) -> None:
    """Replace the file of ``key`` at once (a reader sees the old file or the new one)."""
    payload = json.dumps({"key": key, "entries": entries}, separators=(",", ":")).encode()
    blob = b"%s %d %s\n" % (MAGIC, FORMAT, _sign(directory, payload).encode()) + payload
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(blob)
        os.replace(tmp, directory / f"{key}.json")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- what eval_frame calls ---------------------------------------------------------------------
def saved_as(backend: str | Callable) -> str | None:
    """The name under which entries compiled with ``backend`` are saved, or None (not saved):
    a backend of :data:`SAVED_BACKENDS`, or a callable reachable by import, by its import path
    (``my_project.backends.my_backend``). A lambda, a closure, an object with state or a
    ``mode=`` setting is not: another process could not be sure to hold the same backend."""
    if isinstance(backend, str):
        return backend if backend in SAVED_BACKENDS else None
    try:
        module, qualname = _encode_import(backend)
    except NotPortable:
        return None
    return f"{module}.{qualname}" if callable(backend) else None


def save(fn: types.FunctionType, state: ExtraState, entry: CacheEntry) -> None:
    """Add ``entry`` to the cache file of ``fn``'s code, if it can be saved (else log why)."""
    directory = cache_dir()
    if directory is None or saved_as(entry.options.backend) is None:
        return
    try:
        data = encode_entry(entry, fn.__globals__.get("__name__"), fn.__code__)
    except NotPortable as why:
        logs.emit("guards", f"not saved to the cache: {fn.__qualname__} {entry.compile_id} "
                  f"holds {why}")
        return
    key = entry_key(fn.__code__, entry.options)
    try:
        entries = [*read_entries(directory, key), data][-config.recompile_limit:]
        write_entries(directory, key, entries)
    except OSError as error:
        _warn(f"graphlift could not write its cache in {directory}: {error}")


def load(fn: types.FunctionType, state: ExtraState, options: Any) -> list[CacheEntry]:
    """The saved entries of ``fn``'s code for ``options``, rebuilt, once per process and options;
    an entry that no longer rebinds (a name gone from a module) is left out."""
    directory = cache_dir()
    if directory is None or options in state.loaded_options or saved_as(options.backend) is None:
        return []
    state.loaded_options.add(options)
    loaded = []
    for data in read_entries(directory, entry_key(fn.__code__, options)):
        try:
            entry = decode_entry(data, state.next_compile_id(), options, state, fn.__code__)
        except Exception as error:  # a name that moved; or a file from a buggy graphlift
            logs.emit("guards", f"cache entry of {fn.__qualname__} not loaded: "
                      f"{type(error).__name__}: {error}")
            continue
        forget_with_modules(state, entry)
        loaded.append(entry)
    return loaded


def forget_with_modules(state: ExtraState, entry: CacheEntry) -> None:
    """Drop ``entry`` from ``state`` when a module it pins by identity dies: the entry holds
    that module's parameters (as graph constants) and must not keep them, nor serve a new
    module that reuses the address. The same for a loaded entry as for a traced one."""
    for _, module_ref in entry.compiled_guards.module_roots:
        module = module_ref()
        if module is not None:
            weakref.finalize(module, _drop_entry, weakref.ref(state), weakref.ref(entry))


def _drop_entry(state_ref: weakref.ref, entry_ref: weakref.ref) -> None:
    state, entry = state_ref(), entry_ref()
    if state is not None and entry is not None:
        state.remove(entry)
