"""Callees of eager frames: a frame that runs eagerly as a whole still has its callees compiled.

torch.compile's frame-evaluation hook sees every Python frame, so a frame it skips (a break in a
``try`` block, in a loop, a generator, ``disable(recursive=False)``) still has the frames of the
user functions and modules it calls compiled. CPython 3.10 to 3.13 give Python code no such
hook. Instead, where graphlift runs a frame's code eagerly as a whole it runs a *routed copy* of
that code object, made once per code object and options (kept in its ExtraState). The copy
differs from the original at call sites only (3.11 shown)::

    original                         routed copy
    LOAD_FAST    obj                 LOAD_FAST    obj
    LOAD_METHOD  forward             LOAD_ATTR    forward     # the bound method, then NULL
    LOAD_FAST    x                   PUSH_NULL                # below it: every call the
    PRECALL      1                   SWAP         2           # rewrite routes has a NULL slot
    CALL         1                   LOAD_FAST    x
                                     SWAP         2           # the callable to the top,
                                     LOAD_CONST   <route>     # route(callable) in its place,
                                     SWAP         2
                                     PRECALL      0           # (a call with a non-NULL self
                                     CALL         0           # slot: route(callable))
                                     SWAP         2           # and back below the arguments
                                     PRECALL      1           # the original call, unchanged
                                     CALL         1

3.12 has no PRECALL. 3.13 keeps a call's NULL above the callable (``callable, NULL``, see
``bytecode.NULL_ABOVE_CALLABLE``): a method load becomes the attribute load and ``PUSH_NULL``
without the ``SWAP``, the callable sits one slot deeper, and ``CALL_KW``'s keyword names (on the
stack, not in 3.11's ``KW_NAMES`` register) one more. The route call itself is the same in all
three (``route, callable`` is a call with a self slot).

3.10's calls have no NULL slot and 3.10 has no ``SWAP``: every ``CALL_FUNCTION n``,
``CALL_FUNCTION_KW n`` and ``CALL_FUNCTION_EX`` is routed where it stands, its callable found at
the depth its opcode gives (below the n arguments, the keyword names' tuple, the star tuple and
dict), brought to the top by depth - 1 rotations (``ROT_TWO``/``ROT_THREE``/``ROT_FOUR``/
``ROT_N``), replaced, and rotated back once. ``LOAD_METHOD`` / ``CALL_METHOD`` are copied as
``LOAD_ATTR`` / ``CALL_FUNCTION`` (as resume functions copy them), so a method call routes its
bound method::

    original                         routed copy
    LOAD_FAST      obj               LOAD_FAST      obj
    LOAD_METHOD    forward           LOAD_ATTR      forward   # the bound method
    LOAD_FAST      x                 LOAD_FAST      x
    CALL_METHOD    1                 ROT_TWO                  # the callable to the top,
                                     LOAD_CONST     <route>   # route(callable) in its place,
                                     ROT_TWO
                                     CALL_FUNCTION  1
                                     ROT_TWO                  # and back below the argument
                                     CALL_FUNCTION  1         # the original call

Absolute jumps are retargeted with the relative ones (``SETUP_*`` targets too: 3.10's block
stack), and the line table is 3.10's (``bytecode.line_table_310``). :data:`LAYOUTS` is the table
of what differs; a version without a layout there raises :class:`NotRoutable`.

``route(f)`` returns what the call should call: the compiled wrapper of a user function
(graphlift's wrapper for it, cached on the function, so its entries live on its code object as
usual), the bound wrapper of a user method, a module's compiled ``forward`` (a module with hooks
gets ``Module._call_impl`` run as a routed copy, so hooks and forward are user frames routed in
turn, as torch.compile compiles them), the compiled ``__call__`` of an object of a user class
(a module class's own ``__call__`` too), and anything else as it is (a C function or type
first: one ``type()`` test). The arguments, keyword names and the call instruction are the
program's own, so identities,
``inspect.signature`` of objects passed around, exceptions and their tracebacks are unchanged:
the copy keeps the line table, jump targets and exception table of the original (re-encoded for
the new offsets), and a routed callee's wrapper trims its own frames from a traceback. What the
program can see is the frame's code object (``sys._getframe().f_code``, a generator's
``gi_code``): a copy with the same name, file and lines. :func:`original_code` maps it back
(profilers in tests use it).

Which call sites: a static pass over the bytecode tracks which stack slots hold a NULL pushed for
a call (``PUSH_NULL``, ``LOAD_GLOBAL``'s NULL bit, the method loads turned into attribute loads);
a call whose self slot is such a NULL is routed. Calls whose self slot holds an object (the
compiler's own ``__exit__`` calls and 3.11's comprehension calls) stay as they are; on 3.10 the
same compiler calls are known by the instructions they end (the layout's ``compiler_calls``).
The code objects of comprehensions (3.10's and 3.11's; 3.12 and 3.13 inline all but generator
expressions) are routed copies too (their functions are never seen).

The alternative, a small C extension installing a PEP 523 frame-evaluation function, would catch
every frame (also those that C code such as ``map`` or ``sorted(key=...)`` calls) at no per-call
cost in Python, but needs a compiler and per-version private CPython structures at install
time, wheels per platform and Python version, and a hook that cooperates with torch._dynamo's
own (one slot per interpreter). See docs/design.md ("Callees of eager frames") for the design and
docs/benchmarks.md ("Routing the calls of eager frames") for what the routing costs per call.
"""

from __future__ import annotations

import dis
import functools
import types
import weakref

# Bound here, not looked up in builtins at each call: routing runs inside the program's frames,
# where a program may replace ``builtins.len`` (CPython's test_functools wraps it in an
# lru_cache, which then refused the set that _route_object measures).
from builtins import getattr, isinstance, len, next, type, vars  # noqa: UP029
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from graphlift import bytecode, cache, logs, trace_rules
from graphlift.rebuild import FrameWrappers
from graphlift.resume import WITHOUT_NULL_310, encode_exception_table

ROUTES_ATTR = "_graphlift_routes"  # on a user function: {options: what route() returns,
#                                    (options, "eager"): its routed eager function}
NONRECURSIVE_ATTR = "_graphlift_nonrecursive"  # on a disable(recursive=False) wrapper: the fn

# Comprehensions compiled to functions of their own (3.12 on: generator expressions only): routed
# with the frame.
_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})


class NotRoutable(Exception):
    """The static pass cannot follow this code (the frame then runs its original code)."""


_OP = dis.opmap


def _cache_counts() -> list[int]:
    """Inline cache entries per opcode number of the running CPython: 3.11 and 3.12 list them by
    number, 3.13 by name (both from ``opcode._cache_format``); 3.10 has none."""
    entries = getattr(dis, "_inline_cache_entries", None)
    if isinstance(entries, dict):
        return [entries.get(name, 0) for name in dis.opname[:256]]
    return list(entries) if entries is not None else [0] * 256


_CACHES = _cache_counts()
_ABSOLUTE = frozenset(op for op in dis.hasjabs if op < 256)  # 3.10's: to the argument's unit
_JUMPS = frozenset(op for op in dis.hasjrel if op < 256) | _ABSOLUTE  # no pseudo-ops (3.12 on)
_BACKWARD = frozenset(op for op in _JUMPS if "BACKWARD" in dis.opname[op])
_NO_FALLTHROUGH = frozenset(_OP[name] for name in (
    "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "RETURN_VALUE",
    "RETURN_CONST", "RAISE_VARARGS", "RERAISE") if name in _OP)


def _swap(depth: int) -> list[tuple[str, int]]:
    """3.11 on: the slot ``depth`` down and the top trade places (both ways)."""
    return [("SWAP", depth)] if depth > 1 else []


_ROTATIONS_310 = {2: "ROT_TWO", 3: "ROT_THREE", 4: "ROT_FOUR"}  # deeper: ROT_N depth


def _rotation_310(depth: int) -> tuple[str, int]:
    """3.10: the top down to ``depth``, the slots above it one up (3.10 has no SWAP)."""
    name = _ROTATIONS_310.get(depth)
    return (name, 0) if name is not None else ("ROT_N", depth)


def _fetch_310(depth: int) -> list[tuple[str, int]]:
    """3.10: the slot ``depth`` down to the top, the ones above it in their order below it."""
    return [_rotation_310(depth)] * (depth - 1)


def _put_back_310(depth: int) -> list[tuple[str, int]]:
    return [_rotation_310(depth)] if depth > 1 else []


def _code_positions(code: types.CodeType) -> list[tuple]:
    """3.11 on: (line, end line, column, end column) per code unit."""
    return list(code.co_positions())


def _tables_311(code: types.CodeType, unit_positions: list,
                new_offset: dict[int, int]) -> dict[str, bytes]:
    """3.11 on: the exception table for the new offsets, the location table."""
    table = [(new_offset[e.start], new_offset[e.end], new_offset[e.target], e.depth, e.lasti)
             for e in bytecode.exception_table(code)]
    return {"co_exceptiontable": encode_exception_table(table),
            "co_linetable": encode_positions(unit_positions, code.co_firstlineno)}


def _tables_310(code: types.CodeType, unit_lines: list,
                new_offset: dict[int, int]) -> dict[str, bytes]:
    """3.10: the line table only (its blocks are SETUP_* jumps, retargeted with the others)."""
    return {"co_linetable": bytecode.line_table_310(unit_lines, code.co_firstlineno)}


@dataclass(frozen=True)
class CallLayout:
    """What the rewrite needs to know of one version's calls."""

    # The method loads: opname -> the attribute load that replaces it (a function of the
    # argument; None where the argument asks for no method).
    method_loads: dict[str, Callable[[int], tuple[str, int] | None]]
    precall: bool  # 3.11: PRECALL n pops the arguments, CALL n the two slots below them
    null_above: bool  # 3.13: ``callable, NULL`` (bytecode.NULL_ABOVE_CALLABLE); else NULL below
    kw_call: str | None  # 3.13's CALL_KW: the keyword names on the stack; None: KW_NAMES
    route_call: tuple[tuple[str, int], ...]  # ``route, callable`` -> ``route(callable)``
    # The stack ops that bring the callable ``depth`` slots down to the top, and put it back.
    fetch: Callable[[int], list[tuple[str, int]]] = _swap
    put_back: Callable[[int], list[tuple[str, int]]] = _swap
    # 3.10: no NULL marks a call. Every call of these opcodes is routed (the function of its
    # argument says how deep its callable sits, 1: the top) but for the compiler's own calls:
    # the rows of ``compiler_calls``, opnames ending with the call's.
    call_depths: dict[str, Callable[[int], int]] | None = None
    compiler_calls: tuple[tuple[str, ...], ...] = ()
    renamed: dict[str, str] = field(default_factory=dict)  # opcodes copied as another opcode
    positions: Callable[[types.CodeType], list] = _code_positions  # a position per code unit
    tables: Callable[[types.CodeType, list, dict[int, int]], dict[str, bytes]] = _tables_311


def _method_bit(attr_op: str) -> Callable[[int], tuple[str, int] | None]:
    """3.12 and 3.13: the low bit of the argument asks for a method load."""
    return lambda arg: (attr_op, arg & ~1) if arg & 1 else None


_BIT_METHOD_LOADS = {"LOAD_ATTR": _method_bit("LOAD_ATTR"),
                     "LOAD_SUPER_ATTR": _method_bit("LOAD_SUPER_ATTR")}

# 3.10's calls: how deep the callable sits below what the call pops.
_CALL_DEPTHS_310: dict[str, Callable[[int], int]] = {
    "CALL_FUNCTION": lambda count: count + 1,  # below its arguments
    "CALL_FUNCTION_KW": lambda count: count + 2,  # below them and the tuple of keyword names
    "CALL_FUNCTION_EX": lambda flags: 2 + (flags & 1),  # below the tuple (and the dict)
}
# 3.10's calls that the compiler makes (3.11 on: their self slot holds an object), by the
# opnames that end with them; not routed, as on 3.11.
_COMPILER_CALLS_310 = (
    ("LOAD_CONST", "DUP_TOP", "DUP_TOP", "CALL_FUNCTION"),  # a with block's __exit__(None x 3)
    ("GET_ITER", "CALL_FUNCTION"),  # a comprehension's function (its code: a routed copy)
    ("GET_AITER", "CALL_FUNCTION"),  # an async comprehension's
)

# Per version: its calls' layout, or why its calls are not rewritten (routed_code then raises
# NotRoutable: the frame runs its original code, logged, its callees uncompiled).
LAYOUTS: dict[tuple[int, int], CallLayout | str] = {
    # LOAD_METHOD / CALL_METHOD copied as LOAD_ATTR / CALL_FUNCTION (no NULL), every call
    # routed by the depth its opcode gives, ROT_* for 3.10's missing SWAP, 3.10's line table.
    (3, 10): CallLayout({}, precall=False, null_above=False, kw_call=None,
                        route_call=(("ROT_TWO", 0), ("CALL_FUNCTION", 1)), fetch=_fetch_310,
                        put_back=_put_back_310, call_depths=_CALL_DEPTHS_310,
                        compiler_calls=_COMPILER_CALLS_310, renamed=WITHOUT_NULL_310,
                        positions=bytecode.unit_lines, tables=_tables_310),
    (3, 11): CallLayout({"LOAD_METHOD": lambda arg: ("LOAD_ATTR", arg)}, precall=True,
                        null_above=False, kw_call=None,
                        route_call=(("SWAP", 2), ("PRECALL", 0), ("CALL", 0))),
    (3, 12): CallLayout(_BIT_METHOD_LOADS, precall=False, null_above=False, kw_call=None,
                        route_call=(("SWAP", 2), ("CALL", 0))),
    (3, 13): CallLayout(_BIT_METHOD_LOADS, precall=False, null_above=True, kw_call="CALL_KW",
                        route_call=(("SWAP", 2), ("CALL", 0))),
}


def not_routed(version: tuple[int, int] = bytecode.VERSION) -> str | None:
    """Why the eager frames of ``version`` run their original code (None: they are routed)."""
    layout = LAYOUTS.get(tuple(version))
    if layout is None:
        return f"no call-site rewrite for Python {version[0]}.{version[1]}"
    return layout if isinstance(layout, str) else None


def _layout(version: tuple[int, int]) -> CallLayout:
    """The layout of ``version``'s calls, or NotRoutable with the reason it has none."""
    reason = not_routed(version)
    if reason is not None:
        raise NotRoutable(reason)
    return LAYOUTS[version]


NULL, OTHER = "null", "other"  # what the static pass knows of a stack slot


# -- the rewrite ---------------------------------------------------------------------------------
class _Ins:
    """One instruction of the new code: opcode, argument, jump target, source position."""

    __slots__ = ("op", "arg", "target", "position")

    def __init__(self, op: int, arg: int, position: tuple, target: int | None = None) -> None:
        self.op, self.arg, self.position, self.target = op, arg, position, target


def routed_code(code: types.CodeType, route: Callable) -> types.CodeType:
    """A copy of ``code`` whose calls with a NULL self slot (3.10: every call but the compiler's
    own) call ``route(callable)`` first."""
    layout = _layout(bytecode.VERSION)
    originals = _parse(code)
    # 3.10's calls need no pass over the stack: their opcode says where the callable is.
    states = _slot_states(code, originals, layout) if layout.call_depths is None else {}
    route_index = len(code.co_consts)
    consts = list(code.co_consts) + [route]
    for i, const in enumerate(consts[:route_index]):
        if isinstance(const, types.CodeType) and const.co_name in _COMPREHENSIONS:
            consts[i] = routed_code(const, route)
    emitted = _rewrite(code, originals, states, route_index, layout)
    return _assemble(code, originals, emitted, tuple(consts), layout)


def _parse(code: types.CodeType) -> list[tuple[int, int, int, int]]:
    """(start offset, opcode, argument, offset of the opcode) per instruction, EXTENDED_ARG
    folded in and inline caches skipped."""
    raw = code.co_code
    out, i, extended, start = [], 0, 0, None
    while i < len(raw):
        op, arg = raw[i], raw[i + 1]
        start = i if start is None else start
        if op == _OP["EXTENDED_ARG"]:
            extended = (extended | arg) << 8
            i += 2
            continue
        out.append((start, op, extended | arg, i))
        i += 2 + 2 * _CACHES[op]
        extended, start = 0, None
    return out


def _next_offset(op_offset: int, op: int) -> int:
    return op_offset + 2 + 2 * _CACHES[op]


def _jump_target(op: int, arg: int, op_offset: int) -> int:
    if op in _ABSOLUTE:
        return 2 * arg
    after = _next_offset(op_offset, op)
    return after - 2 * arg if op in _BACKWARD else after + 2 * arg


def _slot_states(code: types.CodeType, originals: list,
                 layout: CallLayout) -> dict[int, tuple[str, ...]]:
    """The stack before each reachable instruction: NULL where a call's NULL sits, else OTHER.

    Only calls consume a NULL, so an instruction that pops fewer slots than it really does
    (``dis.stack_effect`` gives the net effect) only mislabels OTHER slots as OTHER. Where two
    paths disagree the slot is OTHER, and a call whose self slot is OTHER stays as it is.
    """
    index_of = {}
    for i, (start, _, _, op_offset) in enumerate(originals):
        index_of[start] = index_of[op_offset] = i
    handlers = [(e.start, e.end, index_of[e.target], e.depth, e.lasti)
                for e in bytecode.exception_table(code)]
    states: dict[int, tuple[str, ...]] = {0: ()}
    todo = [0]
    while todo:
        i = todo.pop()
        start, op, arg, op_offset = originals[i]
        stack = states[i]
        successors = []
        if op not in _NO_FALLTHROUGH and i + 1 < len(originals):
            successors.append((i + 1, _after(op, arg, stack, layout, jump=False)))
        if op in _JUMPS:
            successors.append((index_of[_jump_target(op, arg, op_offset)],
                               _after(op, arg, stack, layout, jump=True)))
        for low, high, target, depth, lasti in handlers:
            if low <= start < high:
                successors.append((target, stack[:depth] + (OTHER,) * (1 + lasti)))
        for j, new in successors:
            old = states.get(j)
            if old is not None:
                if len(old) != len(new):
                    raise NotRoutable(f"stack depths disagree at offset {originals[j][0]}")
                new = tuple(a if a == b else OTHER for a, b in zip(old, new))
            if new != old:
                states[j] = new
                todo.append(j)
    return states


def _after(op: int, arg: int, stack: tuple[str, ...], layout: CallLayout,
           jump: bool) -> tuple[str, ...]:
    """The slots after one instruction (see :func:`_slot_states`)."""
    name = dis.opname[op]
    pair = (OTHER, NULL) if layout.null_above else (NULL, OTHER)  # a callable and its NULL
    if name == "PUSH_NULL":
        return stack + (NULL,)
    if name == "LOAD_GLOBAL":
        return stack + (pair if arg & 1 else (OTHER,))
    method_load = layout.method_loads.get(name)
    if method_load is not None and method_load(arg) is not None:  # becomes attribute + NULL
        return stack[:-3 if name == "LOAD_SUPER_ATTR" else -1] + pair
    if name == "RETURN_GENERATOR":  # the generator, popped by the POP_TOP after it
        return stack + (OTHER,)
    if name == "SWAP":
        swapped = list(stack)
        swapped[-1], swapped[-arg] = swapped[-arg], swapped[-1]
        return tuple(swapped)
    if name == "COPY":
        return stack + (OTHER,)
    if name == "CALL":  # 3.11: PRECALL has popped the arguments already
        taken = 2 if layout.precall else arg + 2
        return stack[:-taken] + (OTHER,)
    if name == layout.kw_call:  # the keyword names above the arguments
        return stack[:-(arg + 3)] + (OTHER,)
    if name == "CALL_FUNCTION_EX":
        return stack[:-(3 + (arg & 1))] + (OTHER,)
    effect = dis.stack_effect(op, arg if op >= dis.HAVE_ARGUMENT else None, jump=jump)
    if len(stack) + effect < 0:
        raise NotRoutable(f"{name} pops below the bottom of the stack")
    return stack[:len(stack) + effect] if effect < 0 else stack + (OTHER,) * effect


def _rewrite(code: types.CodeType, originals: list, states: dict, route_index: int,
             layout: CallLayout) -> list[list[_Ins]]:
    """The new instructions standing for each original one (jump targets: original indexes)."""
    positions = layout.positions(code)
    index_of = {}
    for i, (start, _, _, op_offset) in enumerate(originals):
        index_of[start] = index_of[op_offset] = i
    names = [dis.opname[op] for _, op, _, _ in originals]
    emitted: list[list[_Ins]] = []
    for i, (_, op, arg, op_offset) in enumerate(originals):
        position = positions[op_offset // 2]
        name = layout.renamed.get(names[i], names[i])
        op = _OP[name]
        target = index_of[_jump_target(op, arg, op_offset)] if op in _JUMPS else None
        plain = [_Ins(op, arg, position, target)]
        method_load = layout.method_loads.get(name)
        replacement = method_load(arg) if method_load is not None else None
        if replacement is not None:
            attr_op, attr_arg = replacement
            # The bound method and a NULL, where this version's CALL wants it.
            below = [] if layout.null_above else [_Ins(_OP["SWAP"], 2, position)]
            plain = [_Ins(_OP[attr_op], attr_arg, position),
                     _Ins(_OP["PUSH_NULL"], 0, position), *below]
        depth = _routed_depth(name, arg, states.get(i), layout) if layout.call_depths is None \
            else _depth_by_opcode(name, arg, names, i, layout)
        if depth is not None:
            routing = _route_sequence(depth, route_index, position, layout)
            if i > 0 and dis.opname[originals[i - 1][1]] == "KW_NAMES":
                emitted[-1][:0] = routing  # before KW_NAMES, which the route call would consume
            else:
                plain[:0] = routing
        emitted.append(plain)
    return emitted


def _routed_depth(name: str, arg: int, stack: tuple[str, ...] | None,
                  layout: CallLayout) -> int | None:
    """How deep the callable of a routed call sits (1: the top), or None: not routed.

    A call's callable and its NULL (in the layout's order) sit below ``above`` slots: the
    arguments (3.11's PRECALL, CALL), 3.13's keyword names too (CALL_KW), or
    CALL_FUNCTION_EX's tuple and dict.
    """
    if stack is None:
        return None  # unreachable
    if name == ("PRECALL" if layout.precall else "CALL"):
        above = arg
    elif name == layout.kw_call:
        above = arg + 1
    elif name == "CALL_FUNCTION_EX":
        above = 1 + (arg & 1)
    else:
        return None
    null_slot, depth = (-above - 1, above + 2) if layout.null_above else (-above - 2, above + 1)
    return depth if len(stack) >= above + 2 and stack[null_slot] == NULL else None


def _depth_by_opcode(name: str, arg: int, names: list[str], i: int,
                     layout: CallLayout) -> int | None:
    """3.10: how deep the callable of a routed call sits, or None: not a call, or one of the
    compiler's own (the opnames up to instruction ``i`` end with a row of compiler_calls)."""
    depth = layout.call_depths.get(name)
    if depth is None or any(tuple(names[max(0, i + 1 - len(row)):i + 1]) == row
                            for row in layout.compiler_calls):
        return None
    return depth(arg)


def _route_sequence(depth: int, route_index: int, position: tuple,
                    layout: CallLayout) -> list[_Ins]:
    """Replace the callable ``depth`` slots down by ``route(callable)``: fetched to the top,
    ``route, callable`` called (a call with a self slot where calls have one, 3.11 on, so
    ``CALL 0``; 3.10's ``CALL_FUNCTION 1``), put back."""
    ops = [*layout.fetch(depth), ("LOAD_CONST", route_index), *layout.route_call,
           *layout.put_back(depth)]
    return [_Ins(_OP[name], arg, position) for name, arg in ops]


def _assemble(code: types.CodeType, originals: list, emitted: list[list[_Ins]],
              consts: tuple, layout: CallLayout) -> types.CodeType:
    """Encode the new instructions: jump arguments for the new offsets (EXTENDED_ARG grows them
    until nothing moves; 3.10's absolute jumps too), the exception table and the line table."""
    flat = [ins for group in emitted for ins in group]
    first, count = [], 0  # the index in ``flat`` where each original instruction's group starts
    for group in emitted:
        first.append(count)
        count += len(group)
    sizes = [_size(ins.op, ins.arg) for ins in flat]
    while True:
        offsets = [0]
        for size in sizes:
            offsets.append(offsets[-1] + size)
        changed = False
        for k, ins in enumerate(flat):
            if ins.target is None:
                continue
            after, target = offsets[k + 1], offsets[first[ins.target]]
            ins.arg = target // 2 if ins.op in _ABSOLUTE else \
                (after - target if ins.op in _BACKWARD else target - after) // 2
            if ins.arg < 0:
                raise NotRoutable("a jump changed direction")
            size = _size(ins.op, ins.arg)
            if size != sizes[k]:
                sizes[k], changed = size, True
        if not changed:
            break
    out = bytearray()
    for ins in flat:
        out += _encode(ins.op, ins.arg)
    new_offset = {}
    for i, (start, _, _, op_offset) in enumerate(originals):
        new_offset[start] = new_offset[op_offset] = offsets[first[i]]
    new_offset[len(code.co_code)] = len(out)
    unit_positions = [ins.position for ins, size in zip(flat, sizes) for _ in range(size // 2)]
    return code.replace(co_code=bytes(out), co_consts=consts,
                        co_stacksize=code.co_stacksize + 2,
                        **layout.tables(code, unit_positions, new_offset))


def _size(op: int, arg: int) -> int:
    """Bytes of one instruction: EXTENDED_ARG prefixes, the opcode, its inline caches."""
    prefixes = sum(1 for shift in (24, 16, 8) if arg >> shift)
    return 2 * (1 + prefixes + _CACHES[op])


def _encode(op: int, arg: int) -> bytes:
    out = bytearray()
    for shift in (24, 16, 8):
        if arg >> shift:
            out += bytes((_OP["EXTENDED_ARG"], (arg >> shift) & 0xFF))
    out += bytes((op, arg & 0xFF)) + bytes(2 * _CACHES[op])
    return bytes(out)


# 3.11 and 3.12 location table (Objects/locations.md): an entry covers 1 to 8 code units;
# code 15 has no location, 13 a line without columns, 14 the long form (line delta, end-line
# delta, column + 1, end column + 1). Line deltas are relative to the previous entry's line.
_NO_LOCATION, _NO_COLUMNS, _LONG = 15, 13, 14


def encode_positions(positions: list[tuple], first_line: int) -> bytes:
    """The line table for one (line, end line, column, end column) per code unit."""
    out = bytearray()
    line = first_line
    i = 0
    while i < len(positions):
        position = positions[i]
        run = 1
        while run < 8 and i + run < len(positions) and positions[i + run] == position:
            run += 1
        start, end, column, end_column = position
        if start is None:
            out.append(0x80 | _NO_LOCATION << 3 | (run - 1))
        elif column is None and end_column is None and end in (start, None):
            out.append(0x80 | _NO_COLUMNS << 3 | (run - 1))
            out += _signed_varint(start - line)
            line = start
        else:
            out.append(0x80 | _LONG << 3 | (run - 1))
            out += _signed_varint(start - line) + _varint((end if end is not None else start)
                                                           - start)
            out += _varint(0 if column is None else column + 1)
            out += _varint(0 if end_column is None else end_column + 1)
            line = start
        i += run
    return bytes(out)


def _varint(value: int) -> bytes:
    """The line table's varint: low 6-bit groups first, bit 6 set when more follow."""
    out = bytearray()
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)
    return bytes(out)


def _signed_varint(value: int) -> bytes:
    return _varint((-value) << 1 | 1 if value < 0 else value << 1)


# -- what route() calls instead ------------------------------------------------------------------
_originals: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # routed copy -> original


def original_code(code: types.CodeType) -> types.CodeType:
    """The code object a routed copy was made from (``code`` itself if it is none)."""
    return _originals.get(code, code)


def eager_code(code: types.CodeType, options: Any, wrappers: FrameWrappers) -> types.CodeType:
    """The routed copy of ``code`` for ``options``, made once (None where the rewrite cannot
    follow the code: the frame then runs its original code)."""
    state = cache.get_state(code)
    if options not in state.eager_code:
        try:
            routed = routed_code(code, router(options, wrappers))
        except NotRoutable as error:
            logs.emit("graph_breaks", f"{code.co_name} ({state.location}) runs its original "
                      f"code, its callees uncompiled: {error}")
            routed = None
        if routed is not None:
            _originals[routed] = code
        state.eager_code[options] = routed
    return state.eager_code[options]


def eager_function(fn: types.FunctionType, options: Any,
                   wrappers: FrameWrappers) -> types.FunctionType:
    """``fn`` running its code eagerly, with its callees routed to their compiled form (``fn``
    itself where the routing is off or cannot follow the code). Made once per function."""
    routes = fn.__dict__.get(ROUTES_ATTR)
    if routes is None:
        routes = fn.__dict__[ROUTES_ATTR] = {}
    key = (options, "eager")
    routed = routes.get(key)
    # Made again when ``fn.__code__`` was replaced since.
    if routed is None or (routed is not fn and original_code(routed.__code__) is not fn.__code__):
        code = eager_code(fn.__code__, options, wrappers)
        if code is None:
            routed = fn
        else:
            routed = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                                        fn.__closure__)
            routed.__kwdefaults__ = fn.__kwdefaults__
            routed.__qualname__ = fn.__qualname__
        routes[key] = routed
    return routed


_routers: dict[Any, Callable] = {}  # options -> route (options are interned and few)


def router(options: Any, wrappers: FrameWrappers) -> Callable[[Any], Any]:
    """The ``route`` of routed copies compiled with ``options``."""
    route = _routers.get(options)
    if route is None:
        route = _routers[options] = _make_router(options, wrappers)
    return route


# Types whose instances are called as they are, without a second look (C functions, methods
# of C types, classes); filled with the other types route() finds nothing to do for.
_PLAIN: set[type] = {types.BuiltinFunctionType, types.MethodWrapperType, type,
                     types.MethodDescriptorType, types.WrapperDescriptorType,
                     functools.partial}
_PLAIN_LIMIT = 4096  # types met (classes included): forgotten past this many


def _make_router(options: Any, wrappers: FrameWrappers) -> Callable[[Any], Any]:
    plain, function_type, method_type = _PLAIN, types.FunctionType, types.MethodType
    skipped = _skipped

    def route(f: Any) -> Any:
        kind = type(f)
        if kind in plain:
            return f
        if kind is function_type:
            if f in skipped:
                return f
            routes = f.__dict__.get(ROUTES_ATTR)
            if routes is not None:
                target = routes.get(options)
                if target is not None:
                    return target
            return _route_function(f, options, wrappers)
        if kind is method_type:
            target = route(f.__func__)
            return f if target is f.__func__ else method_type(target, f.__self__)
        call = calls.get(kind)
        if call is not None:
            return method_type(call, f)
        return _route_object(f, kind, options, wrappers, calls)

    calls: dict[type, Callable] = {}  # a user class with a __call__: its compiled __call__
    return route


# Functions that route to themselves (torch's, the standard library's): held, as the types in
# _PLAIN are, and forgotten past _PLAIN_LIMIT of them (functions made on the fly).
_skipped: set[types.FunctionType] = set()


def _route_function(fn: types.FunctionType, options: Any, wrappers: FrameWrappers) -> Any:
    """What an eager frame calls for ``fn``: decided once per function and options."""
    target = routed_target(fn, options, wrappers)
    if target is fn:
        if len(_skipped) > _PLAIN_LIMIT:
            _skipped.clear()
        _skipped.add(fn)
    else:
        fn.__dict__.setdefault(ROUTES_ATTR, {})[options] = target
    return target


def routed_target(fn: Any, options: Any, wrappers: FrameWrappers) -> Any:
    """A user function's compiled wrapper; a ``disable(recursive=False)`` function (graphlift's
    or torch's) running eagerly with its callees routed; ``fn`` itself for anything else."""
    nonrecursive = non_recursive_disabled(fn)
    if nonrecursive is not None:
        return eager_function(nonrecursive, options, wrappers)
    if isinstance(fn, types.FunctionType) and fn.__code__ in _CALL_IMPL_INNER:
        return eager_function(fn, options, wrappers)  # Module._call_impl's inner(): hooks
    if not isinstance(fn, types.FunctionType) or not _is_user_code(fn):
        return fn
    return wrappers.function(fn, options)


def non_recursive_disabled(fn: Any) -> types.FunctionType | None:
    """The function that ``disable(fn, recursive=False)`` made ``fn`` from, if it is one:
    graphlift's wrapper or torch's (``torch.compiler.disable``), or a function that torch's
    ``skip`` marked in place."""
    if not isinstance(fn, types.FunctionType):
        return None
    marks = fn.__dict__
    original = marks.get(NONRECURSIVE_ATTR)
    if original is None and marks.get(trace_rules.TORCH_DISABLED_ATTR):
        if marks.get(TORCH_RECURSIVE_ATTR) is False:
            original = trace_rules.torch_original(fn)
        elif trace_rules.torch_original(fn) is None and TORCH_RECURSIVE_ATTR not in marks:
            original = fn  # torch._dynamo.skip(fn): the mark is on fn itself
    return original if isinstance(original, types.FunctionType) else None


TORCH_RECURSIVE_ATTR = "_torchdynamo_disable_recursive"  # False on disable(recursive=False)'s


def _is_user_code(fn: types.FunctionType) -> bool:
    """What a frame-evaluation hook would compile: user code, and a function torch's
    ``disallow_in_graph`` took out of the graph (its frame is compiled, not traced inline)."""
    decision = trace_rules.lookup(fn)
    if decision.rule is trace_rules.TORCH_DISALLOWED:
        decision = trace_rules.module_rule(fn)
    return decision.rule in (trace_rules.USER_CODE, trace_rules.CONFIG_INLINE)


def _route_object(obj: Any, kind: type, options: Any, wrappers: FrameWrappers,
                  calls: dict[type, Callable]) -> Any:
    """A module's call (its forward compiled), an object's user ``__call__`` compiled (kept in
    ``calls`` for its type; a module class's own too, transformers' GradientCheckpointingLayer:
    the compiled ``__call__`` inlines ``Module.__call__``); anything else as it is."""
    module = isinstance(obj, torch.nn.Module)
    if module and kind.__call__ is torch.nn.Module.__call__:
        if not _user_module_class(kind) or "forward" in obj.__dict__ or \
                obj.__dict__.get("_compiled_call_impl") is not None:
            return obj  # torch's own modules, as torch.compile leaves them
        if not has_hooks(obj):
            return wrappers.module_call(obj, options)
        return functools.partial(eager_function(torch.nn.Module._call_impl, options, wrappers),
                                 obj)
    call = next((vars(klass)["__call__"] for klass in kind.__mro__
                 if "__call__" in vars(klass)), None)  # the class's own, not type's
    if isinstance(call, types.FunctionType) and _is_user_code(call):
        calls[kind] = wrappers.function(call, options)
        return types.MethodType(calls[kind], obj)
    if not module:
        if len(_PLAIN) > _PLAIN_LIMIT:
            _PLAIN.intersection_update(_PLAIN_START)
        _PLAIN.add(kind)
    return obj


_PLAIN_START = frozenset(_PLAIN)
# The functions Module._call_impl defines and calls (``inner``, which runs the hooks and the
# forward): routed copies too, so that hooks and forward are compiled as torch.compile does.
_CALL_IMPL_INNER = frozenset(const for const in torch.nn.Module._call_impl.__code__.co_consts
                             if isinstance(const, types.CodeType))


def _user_module_class(kind: type) -> bool:
    """A module class that keeps ``Module.__call__`` and has a ``forward`` of user code."""
    known = _USER_MODULES.get(kind)
    if known is None:
        forward = kind.forward
        known = _USER_MODULES[kind] = kind.__call__ is torch.nn.Module.__call__ and \
            kind._call_impl is torch.nn.Module._call_impl and \
            isinstance(forward, types.FunctionType) and _is_user_code(forward)
    return known


_USER_MODULES: dict[type, bool] = {}  # decided once per module class (reset() forgets)


def has_hooks(module: torch.nn.Module) -> bool:
    """What ``Module._call_impl`` checks before it takes its fast path."""
    hooks = torch.nn.modules.module
    return bool(module._backward_hooks or module._backward_pre_hooks or module._forward_hooks
                or module._forward_pre_hooks or hooks._global_backward_pre_hooks
                or hooks._global_backward_hooks or hooks._global_forward_hooks
                or hooks._global_forward_pre_hooks)


def has_backward_hooks(module: torch.nn.Module) -> bool:
    """Whether calling ``module`` runs backward hooks, which no trace models (nn_module.py
    refuses the call): its own or global ones."""
    hooks = torch.nn.modules.module
    return bool(module._backward_hooks or module._backward_pre_hooks
                or hooks._global_backward_pre_hooks or hooks._global_backward_hooks)


def reset() -> None:
    """Forget which functions route to themselves (the trace rules may have changed)."""
    _skipped.clear()
    _PLAIN.intersection_update(_PLAIN_START)
    _USER_MODULES.clear()
    _routers.clear()
