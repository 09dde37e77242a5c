"""Seeded generation of small PyTorch programs, written the way users write them.

This module is version 1 of the generator (``tests/fuzz/versions.py`` maps each version to its
builder; ``generator_v2.py`` adds constructs on top of this one). ``_Builder(seed).build()``
returns a :class:`Program`: the text of a module (imports, a few globals, helper functions,
small classes, and the entry function ``f``), and the code that builds the arguments of each
call. The same seed and version always give the same program: a later version changes nothing
here, so that old seeds keep their old programs (``test_fuzz_tools.py`` pins a few).

The generator keeps a typed scope: every variable it may read has a :class:`Ty` (a tensor of a
known shape, an int, a list of tensors of at least ``size`` items, a dict with known keys...).
Statements read only variables that exist and have the right type, so a program raises only
where it means to (a raise, an out-of-range index, a missing key). Blocks (branches, loop
bodies, ``try``) may rebind variables with values of the same type; names they create are not
read after the block, since the block may not have run.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from . import shapes
from .shapes import BINARY, BROADCAST, DERIVE, NDIM, NEW_SHAPE_WEIGHTS, SCALAR, UNARY
from .text import indent, replace_word, wrap


@dataclass(frozen=True)
class Program:
    """One generated program and how to call it.

    ``variants[i]`` is code that binds ``args`` (a tuple) and ``kwargs`` (a dict), run in the
    program's namespace (it may construct the program's classes); ``calls`` lists the variant of
    each call in order (the first two are equal, so the second call is a cache hit).
    """

    seed: int
    source: str
    entry: str
    variants: tuple[str, ...]
    calls: tuple[int, ...]
    counter: bool  # compile with a CompileCounter backend instead of backend="eager"
    version: int = 1  # the generator version that wrote it (rerun with --generator)
    # Per variant, an expression of a mode (a TorchFunctionMode or TorchDispatchMode of the
    # program) the harness enters around that call, eagerly and compiled alike; "" for none.
    # Versions 1-3 enter none (an empty tuple).
    ambient: tuple[str, ...] = ()

    def replace(self, **changes) -> Program:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Ty:
    """The type of a variable in scope.

    kind: tensor, mask (a bool tensor), int, float, bool, str, tlist (list of tensors of
    ``shape``), ilist (list of ints), flist (list of floats), tdict (str -> tensor of ``shape``;
    ``keys`` are certainly present), iset (set of ints), obj (an instance of class ``cls``),
    num (a float or a 0-d tensor: a running total). ``size`` is a list's least length.
    """

    kind: str
    shape: str = ""
    size: int = 0
    keys: tuple[str, ...] = ()
    cls: str = ""


# Variable names per kind, in the order a user would reach for them.
NAMES = {
    "tensor": ("h", "out", "z", "a", "b", "res", "feat", "tmp", "y1", "act", "logits", "u", "v",
               "hidden", "scores", "delta", "base"),
    "mask": ("mask", "keep", "pos", "sel"),
    "int": ("k", "rows", "cols", "steps", "count", "idx", "width", "total_n", "depth", "m"),
    "float": ("alpha", "eps", "lr", "coef", "weight", "gamma", "bias_v"),
    "bool": ("use_relu", "ok", "is_big", "done", "training", "cond"),
    "str": ("mode", "name", "key", "tag"),
    "tlist": ("outs", "parts", "buf", "history", "layers_out", "chunks"),
    "ilist": ("sizes", "ids", "counts", "dims"),
    "flist": ("vals", "losses", "values"),
    "tdict": ("cache", "state", "feats_d", "named"),
    "iset": ("seen", "visited", "ids_set"),
    "obj": ("stat", "acc", "tracker", "layer", "buffer"),
    "num": ("total", "loss", "running"),
    "fn": ("scale_fn", "act_fn", "inner", "transform", "apply"),
    "loop": ("i", "j", "step", "idx2"),
    "each": ("t", "item", "row", "elem", "piece"),
    "key": ("k", "key", "name_k"),
    "value": ("v", "val", "value_t"),
}

FLOATS = ("0.5", "2.0", "0.1", "1.5", "-0.5", "0.25", "3.0", "1e-3")
KEYS = ("a", "b", "mean", "max", "out", "norm", "h0", "h1")
ERRORS = ("ValueError", "KeyError", "IndexError", "RuntimeError", "TypeError")


@dataclass
class _Param:
    name: str
    ty: Ty
    values: list[str]  # the argument's text in each variant (tensors: filled in later)
    keyword: bool = False


@dataclass
class _Helper:
    """A module-level function: its text, and how to call it.

    ``call()`` returns None where it cannot be called from the current scope, else a tuple whose
    first item says what the call gives: a shape key (a tensor of that shape, then the call's
    text), "int" or "pair" (two 0-d tensors) then the text, "gen" (a generator function over a
    list of tensors, then their shape), "record" (a function appending to a list of ints).
    """

    lines: list[str]
    call: Callable[[], tuple | None] = field(repr=False)


class _Builder:
    VERSION = 1

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.imports = {"import torch", "import torch.nn.functional as F"}
        self.globals: dict[str, Ty] = {}
        self.global_lines: list[str] = []
        self.helpers: dict[str, _Helper] = {}
        self.classes: dict[str, list[str]] = {}
        self.class_shape: dict[str, str] = {}
        self.scope: dict[str, Ty] = {}
        self.dims: dict[str, list[str]] = {"N": [], "M": []}
        self.used: set[str] = set()
        self.depth = 0
        self.loop_depth = 0
        self.iterating: set[str] = set()
        self.global_writes: set[str] = set()
        # Leaves that require grad, and names bound to them: no in-place ops on these.
        self.grad_leaves: set[str] = set()
        self.no_grad = False
        self.stmt_budget = 0
        self.pending: list[tuple[str, Ty]] = []
        self.readonly: set[str] = set()  # captured by the closure being generated
        self.in_def = False  # generating a helper's or a closure's body

    # -- names and choices ---------------------------------------------------------------------
    def pick(self, seq):
        return self.rng.choice(list(seq))

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def weighted(self, table: dict):
        keys = list(table)
        return self.rng.choices(keys, weights=[table[k] for k in keys])[0]

    def fresh(self, kind: str) -> str:
        for name in NAMES[kind]:
            if name not in self.used:
                self.used.add(name)
                return name
        name = f"{NAMES[kind][0]}{len(self.used)}"
        self.used.add(name)
        return name

    def fresh_pair(self) -> tuple[str, str]:
        """Names for the two sizes of a 2-d shape."""
        for pair in (("rows", "cols"), ("batch", "dim"), ("n_rows", "n_cols"), ("b", "d")):
            if not set(pair) & self.used:
                self.used |= set(pair)
                return pair
        return self.fresh("int"), self.fresh("int")

    def vars_of(self, kind: str, shape: str | None = None) -> list[str]:
        return [n for n, t in self.scope.items()
                if t.kind == kind and (shape is None or t.shape == shape)]

    def define(self, name: str, ty: Ty) -> None:
        """Bind ``name`` once the statement being generated is done (its own right-hand side
        must not read it)."""
        self.pending.append((name, ty))

    def bind(self, name: str, ty: Ty) -> None:
        """Bind ``name`` now: a loop variable, read by the loop's body."""
        self.scope[name] = ty

    # -- scopes --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def nested(self, loop: bool = False) -> Iterator[None]:
        """A block: names it creates are forgotten after it (it may not run), and so are the
        lists it iterates."""
        saved = dict(self.scope), {k: list(v) for k, v in self.dims.items()}, set(self.iterating)
        self.depth += 1
        self.loop_depth += loop
        try:
            yield
        finally:
            self.depth -= 1
            self.loop_depth -= loop
            self.scope, self.dims, self.iterating = saved

    @contextlib.contextmanager
    def function_scope(self, params: dict[str, Ty], captured: bool = False) -> Iterator[None]:
        """The body of a def: its parameters, plus the enclosing scope's values if captured."""
        saved = (self.scope, self.dims, self.depth, self.loop_depth, self.iterating,
                 self.no_grad, self.global_writes)
        inner = {n: t for n, t in self.scope.items() if t.kind != "fn"} if captured else {}
        self.scope = {**inner, **params}
        self.dims = {k: list(v) for k, v in self.dims.items()} if captured else {"N": [], "M": []}
        for name, ty in params.items():
            self.register_dims(name, ty)
        self.depth, self.loop_depth, self.iterating = 1, 0, set(self.iterating)
        self.global_writes = set()
        readonly, self.readonly = self.readonly, set(inner) | self.readonly
        in_def, self.in_def = self.in_def, True
        try:
            yield
        finally:
            (self.scope, self.dims, self.depth, self.loop_depth, self.iterating, self.no_grad,
             self.global_writes) = saved
            self.readonly, self.in_def = readonly, in_def

    def register_dims(self, name: str, ty: Ty) -> None:
        """Remember the int expressions that give the size symbols, from a tensor's shape."""
        if ty.kind != "tensor":
            return
        if ty.shape in ("NM", "N1", "N", "NN"):
            self.dims["N"] += [f"{name}.shape[0]", f"{name}.size(0)", f"len({name})"]
        if ty.shape in ("NM", "1M"):
            self.dims["M"] += [f"{name}.shape[1]", f"{name}.size(1)", f"{name}.shape[-1]"]
        if ty.shape in ("M", "MM"):
            self.dims["M"] += [f"{name}.shape[0]", f"{name}.numel()" if ty.shape == "M"
                               else f"{name}.size(0)"]

    # -- tensor expressions ----------------------------------------------------------------------
    def have(self) -> set[str]:
        return {t.shape for t in self.scope.values() if t.kind == "tensor"}

    def can_make(self, shape: str) -> bool:
        return shape in self.reachable()

    def reachable(self) -> dict[str, int]:
        return shapes.reachable(self.have(), self.usable)

    def usable(self, template: str) -> bool:
        """Whether the sizes ``template`` names have an int expression in scope."""
        return all(self.dims[sym] or "{" + sym + "}" not in template for sym in ("N", "M"))

    def _rule_ok(self, sources, template: str, rank: dict[str, int], below: int) -> bool:
        return self.usable(template) and all(rank.get(s, 99) < below for s in sources)

    def dim(self, sym: str) -> str:
        return self.pick(self.dims[sym])

    def tensor(self, shape: str, depth: int = 1) -> str:
        """An expression of ``shape`` over the tensors in scope, ``depth`` operations deep."""
        roll = self.rng.random()
        if depth <= 0 or roll < 0.3:
            return self.leaf(shape)
        if roll < 0.55:
            return self.unary(shape, self.tensor(shape, depth - 1))
        if roll < 0.8:
            return self.binary(shape, self.tensor(shape, depth - 1), depth - 1)
        if roll < 0.92:
            return self.scalar_op(shape, self.tensor(shape, depth - 1))
        return self.derived(shape) or self.leaf(shape)

    def tensor_of(self, name: str, shape: str) -> str:
        """One operation on the variable ``name`` (a parameter, a loop variable)."""
        roll = self.rng.random()
        if roll < 0.4:
            return self.unary(shape, name)
        if roll < 0.75:
            return self.scalar_op(shape, name)
        return self.binary(shape, name, 0)

    def leaf(self, shape: str) -> str:
        """A variable of ``shape``, or one view, reduction or product of variables."""
        names = self.vars_of("tensor", shape)
        if names and self.chance(0.85):
            return self.pick(names)
        return self.derived(shape) or self.pick(names)

    def derived(self, shape: str) -> str | None:
        rank = self.reachable()
        if shape not in rank:
            return None
        below = max(rank[shape], 1)
        rules = [(s, t) for s, t in DERIVE[shape] if self._rule_ok(s, t, rank, below)]
        if not rules:
            return None
        sources, template = self.pick(rules)
        return self.fill(template, [self.leaf(s) for s in sources])

    def unary(self, shape: str, operand: str) -> str:
        template = self.pick(t for n, t in UNARY if NDIM[shape] >= n)
        return self.fill(template, [self.atom(shape, operand, template)])

    def binary(self, shape: str, operand: str, depth: int) -> str:
        other = self.pick(s for s in BROADCAST[shape] if self.can_make(s))
        template = self.pick(BINARY)
        return self.fill(template, [self.atom(shape, operand, template),
                                    self.atom(other, self.tensor(other, depth), template, 1)])

    def scalar_op(self, shape: str, operand: str) -> str:
        template = self.pick(SCALAR)
        return self.fill(template, [self.atom(shape, operand, template)])

    def atom(self, shape: str, operand: str, template: str, slot: int = 0) -> str:
        """``operand``, or a variable where ``template`` repeats the slot (no repeated work)."""
        if template.count("{" + str(slot) + "}") > 1 and not operand.isidentifier():
            return self.leaf(shape)
        return operand

    def fill(self, template: str, operands: list[str]) -> str:
        values = {}
        for sym in ("N", "M"):
            if "{" + sym + "}" in template:
                values[sym] = self.dim(sym)
        for slot, make in (("f", self.float_expr), ("i", self.int_expr), ("nz", self.nz_expr)):
            if "{" + slot + "}" in template:
                values[slot] = wrap(make())
        return template.format(*[wrap(op) for op in operands], **values)

    def new_shape(self) -> str:
        options = {s: w for s, w in NEW_SHAPE_WEIGHTS.items() if self.can_make(s)}
        return self.weighted(options)

    # -- Python values -------------------------------------------------------------------------
    def int_expr(self) -> str:
        names = self.vars_of("int")
        options = [lambda: str(self.rng.randint(0, 4))]
        if names:
            options += [lambda: self.pick(names)] * 3
            options += [lambda: f"{self.pick(names)} + 1", lambda: f"{self.pick(names)} * 2",
                        lambda: f"{self.pick(names)} // 2", lambda: f"{self.pick(names)} % 3",
                        lambda: f"max({self.pick(names)}, 1)",
                        lambda: f"min({self.pick(names)}, 3)"]
        for sym in ("N", "M"):
            if self.dims[sym]:
                options.append(lambda sym=sym: self.dim(sym))
        for lst in self.vars_of("tlist") + self.vars_of("ilist"):
            options.append(lambda lst=lst: f"len({lst})")
        if "G_STEPS" in self.globals:
            options.append(lambda: "G_STEPS")
        return self.pick(options)()

    def small_int(self) -> str:
        """A loop bound: at most 6."""
        options = [str(self.rng.randint(1, 4))] * 3
        options += [n for n in self.vars_of("int") if n in self.small_ints]
        for sym in ("N", "M"):
            options += self.dims[sym][:2]
        options += [f"len({lst})" for lst in self.vars_of("tlist") if lst not in self.iterating]
        return self.pick(options)

    @property
    def small_ints(self) -> set[str]:
        return {p.name for p in self.params if p.ty.kind == "int"} | self.small_int_vars

    def float_expr(self) -> str:
        names = self.vars_of("float")
        options = [lambda: self.pick(FLOATS)] * 3
        if names:
            options += [lambda: self.pick(names)] * 3 + [lambda: f"{self.pick(names)} * 2"]
        ints = self.vars_of("int")
        if ints:
            options += [lambda: f"float({self.pick(ints)})", lambda: f"{self.pick(ints)} / 2",
                        lambda: f"1.0 / ({self.pick(ints)} + 1)"]
        if "G_SCALE" in self.globals:
            options.append(lambda: "G_SCALE")
        for cfg in self.vars_of("obj"):
            if self.scope[cfg].cls == "Config":
                options.append(lambda cfg=cfg: f"{cfg}.scale")
        for d in self.vars_of("opts"):
            options.append(lambda d=d: f'{d}["scale"]')
        return self.pick(options)()

    def nz_expr(self) -> str:
        options = ["2.0", "0.5", "3.0"]
        options += [n for n in self.vars_of("float") if n in self.nonzero]
        ints = self.vars_of("int")
        if ints:
            options.append(f"({self.pick(ints)} + 1)")
            options.append(f"max({self.pick(ints)}, 1)")
        return self.pick(options)

    def bool_expr(self) -> str:
        options = [lambda: f"{self.int_expr()} > {self.rng.randint(0, 3)}",
                   lambda: f"{self.int_expr()} % 2 == 0"]
        names = self.vars_of("bool")
        if names:
            options += [lambda: self.pick(names)] * 3
            options += [lambda: f"not {self.pick(names)}",
                        lambda: f"{self.pick(names)} and {self.int_expr()} > 1"]
        for d in self.vars_of("tdict"):
            options.append(lambda d=d: f'"{self.pick(KEYS)}" in {d}')
        for s in self.vars_of("iset"):
            options.append(lambda s=s: f"{self.int_expr()} in {s}")
        for lst in self.vars_of("tlist"):
            options.append(lambda lst=lst: f"len({lst}) > {self.rng.randint(1, 3)}")
        for cfg in self.vars_of("obj"):
            if self.scope[cfg].cls == "Config":
                options.append(lambda cfg=cfg: f'{cfg}.mode == "sum"')
        for d in self.vars_of("opts"):
            options.append(lambda d=d: f'{d}["mode"] == "mean"')
        tensors = self.vars_of("tensor")
        if tensors:
            options += [lambda: f"{self.pick(tensors)}.dim() == 2",
                        lambda: f"{self.pick(tensors)}.requires_grad",
                        lambda: "torch.is_grad_enabled()",
                        lambda: f"{self.pick(tensors)}.is_contiguous()",
                        lambda: f"isinstance({self.pick(tensors)}, torch.Tensor)"]
        if "G_FLAG" in self.globals:
            options.append(lambda: "G_FLAG")
        return self.pick(options)()

    def tensor_cond(self) -> str:
        """A condition on tensor values: a graph break in the compiled program."""
        scalar = self.tensor("0d", 1)
        options = [f"{wrap(scalar)} > 0", f"{wrap(scalar)} < {self.float_expr()}",
                   f"{wrap(scalar)}.item() > 0.5", f"bool({wrap(scalar)} >= 0)"]
        shape = self.new_shape()
        t = wrap(self.tensor(shape, 1))
        options += [f"({t} > 0).any()", f"({t} < 1).all()", f"torch.all({t} > -2)"]
        masks = self.vars_of("mask")
        if masks:
            options.append(f"{self.pick(masks)}.any()")
        return self.pick(options)

    # -- the program -----------------------------------------------------------------------------
    def build(self) -> Program:
        self.plan_inputs()
        entry = self.pick(("f", "forward", "step", "compute", "loss_fn", "train_step"))
        self.used |= {entry, "torch", "F", "x"}
        body = self.body()
        header = self.signature(entry)
        glob = sorted(self.global_writes)
        lines = [header] + (["    global " + ", ".join(glob)] if glob else [])
        lines += indent(body)
        source = "\n".join(self.module_lines() + [""] + lines) + "\n"
        ast.parse(source)  # the generator writes only valid Python
        return Program(self.seed, source, entry, tuple(self.variant_texts()), (0, 0, 1, 2, 3),
                       self.chance(0.25), self.VERSION)

    def module_lines(self) -> list[str]:
        out = sorted(self.imports, key=lambda s: (s.startswith("from"), s))
        if self.global_lines:
            out += [""] + self.global_lines
        for lines in self.classes.values():
            out += ["", ""] + lines
        for helper in self.helpers.values():
            out += ["", ""] + helper.lines
        return out + [""]

    def body(self) -> list[str]:
        self.stmt_budget = self.rng.randint(4, 11)
        lines: list[str] = []
        while self.stmt_budget > 0:
            lines += self.statement()
        if self.chance(0.15):
            lines += self.escape()
        return lines + self.return_stmt()

    def block(self, count: int | None = None, loop: bool = False) -> list[str]:
        lines: list[str] = []
        with self.nested(loop):
            for _ in range(count or self.rng.randint(1, 3)):
                lines += self.statement()
        return lines or ["pass"]

    def statement(self) -> list[str]:
        self.stmt_budget -= 1
        table = self.statement_table()
        for _ in range(20):
            outer, self.pending = self.pending, []
            try:
                lines = getattr(self, self.weighted(table))()
            finally:
                pending, self.pending = self.pending, outer
            if lines:
                self.scope.update(pending)
                return lines
        return ["pass"]

    def statement_table(self) -> dict[str, int]:
        """The statement kinds this version draws from at the current depth."""
        return STATEMENTS if self.depth < 3 else LEAF_STATEMENTS

    # -- inputs --------------------------------------------------------------------------------
    def plan_inputs(self) -> None:
        """Choose the parameters and their values in the four variants (sizes change in 2, 3)."""
        n0, m0 = self.pick((2, 3, 4)), self.pick((2, 3, 4, 5))
        self.sizes = [(n0, m0), (n0, m0), (self.pick((1, 2, 3, 5, 6)), m0),
                      (self.pick((2, 4, 5, 6)), self.pick((2, 3, 4, 5)))]
        if self.sizes[2][0] == n0:
            self.sizes[2] = (n0 + 1, m0)
        self.params: list[_Param] = []
        self.small_int_vars: set[str] = set()
        self.nonzero: set[str] = set()
        grad = self.chance(0.2)
        self.add_param("x", Ty("tensor", "NM"), ["NM"] * 4)
        if grad:
            self.grad_leaves.add("x")
        for name, prob, make in INPUTS:
            if self.chance(prob):
                make(self, name)
        self.more_inputs()
        for p in self.params:
            self.bind(p.name, p.ty)
            self.register_dims(p.name, p.ty)
            self.used.add(p.name)
        self.requires_grad = grad

    def more_inputs(self) -> None:
        """Parameters a later version adds after version 1's (none here: no draws)."""

    def add_param(self, name: str, ty: Ty, values: list[str], keyword: bool = False) -> None:
        self.params.append(_Param(name, ty, values, keyword))

    def vary(self, options) -> list:
        """A value per variant: the first two equal (the cache-hit call), the others drawn."""
        first = self.pick(options)
        rest = [self.pick(options) for _ in range(2)]
        return [first, first] + rest

    def input_y(self, name: str) -> None:
        self.add_param(name, Ty("tensor", "NM"), ["NM"] * 4)

    def input_b(self, name: str) -> None:
        self.add_param(name, Ty("tensor", "M"), ["M"] * 4)

    def input_w(self, name: str) -> None:
        self.add_param(name, Ty("tensor", "MM"), ["MM"] * 4)

    def input_n(self, name: str) -> None:
        values = self.vary(range(0, 5))
        self.add_param(name, Ty("int"), [str(v) for v in values], self.chance(0.3))
        self.small_int_vars.add(name)
        self.int_range = (min(values), max(values))

    def input_flag(self, name: str) -> None:
        self.add_param(name, Ty("bool"), [str(v) for v in self.vary((True, False))],
                       self.chance(0.5))

    def input_scale(self, name: str) -> None:
        self.add_param(name, Ty("float"), self.vary(("0.5", "1.0", "1.5", "2.0", "0.25")),
                       self.chance(0.3))
        self.nonzero.add(name)

    def input_items(self, name: str) -> None:
        shape = self.pick(("M", "NM", "M"))
        lengths = self.vary((1, 2, 3))
        self.add_param(name, Ty("tlist", shape, size=min(lengths)),
                       [f"[{shape} for _ in range({n})]" for n in lengths])

    def input_opts(self, name: str) -> None:
        values = [f'{{"scale": {s}, "mode": "{m}", "steps": {k}}}' for s, m, k in zip(
            self.vary(("0.5", "2.0", "1.0")), self.vary(("sum", "mean")), self.vary((1, 2, 3)))]
        self.add_param(name, Ty("opts"), values)

    def input_cfg(self, name: str) -> None:
        self.define_config()
        values = [f'Config(scale={s}, steps={k}, mode="{m}")' for s, m, k in zip(
            self.vary(("0.5", "2.0", "1.0")), self.vary(("sum", "mean")), self.vary((1, 2, 3)))]
        self.add_param(name, Ty("obj", cls="Config"), values)

    def input_feats(self, name: str) -> None:
        self.add_param(name, Ty("tdict", "NM", keys=("q", "k")),
                       ['{"q": NM, "k": NM}'] * 4)

    def signature(self, entry: str) -> str:
        positional = [p.name for p in self.params if not p.keyword]
        keyword = [p for p in self.params if p.keyword]
        parts = positional + (["*"] + [f"{p.name}={p.values[0]}" for p in keyword]
                              if keyword else [])
        return f"def {entry}({', '.join(parts)}):"

    def variant_texts(self) -> list[str]:
        texts = []
        for v, (n, m) in enumerate(self.sizes):
            def tensor(shape: str, n=n, m=m) -> str:
                dims = {"NM": f"{n}, {m}", "M": f"{m}", "MM": f"{m}, {m}"}[shape]
                return f"torch.randn({dims})"
            args, kwargs = [], []
            for p in self.params:
                text = self.variant_value(p.values[v], n, m)
                for key in ("NM", "MM", "M"):
                    text = replace_word(text, key, tensor(key))
                if p.name == "x" and self.requires_grad:
                    text = text[:-1] + ", requires_grad=True)"
                (kwargs if p.keyword else args).append((p.name, text))
            lines = self.variant_setup(v) + [f"torch.manual_seed({self.seed * 10 + v})",
                     "args = (" + "".join(t + ", " for _, t in args).rstrip() + ")",
                     "kwargs = {" + ", ".join(f'"{k}": {t}' for k, t in kwargs) + "}"]
            texts.append("\n".join(lines))
        return texts

    def variant_value(self, text: str, n: int, m: int) -> str:
        """An argument's text for a variant of sizes ``n``, ``m`` (version 1: unchanged)."""
        return text

    def variant_setup(self, variant: int) -> list[str]:
        """Lines run before building the arguments of ``variant``: state changed between calls
        (version 1 changes none)."""
        return []

    # -- module-level definitions ----------------------------------------------------------------
    def define_global(self, name: str, ty: Ty, value: str) -> None:
        if name not in self.globals:
            self.globals[name] = ty
            self.global_lines.append(f"{name} = {value}")
            self.used.add(name)

    def define_config(self) -> None:
        self.classes.setdefault("Config", [
            "class Config:",
            '    def __init__(self, scale=1.0, steps=2, mode="sum"):',
            "        self.scale = scale",
            "        self.steps = steps",
            "        self.mode = mode",
            "        self.calls = 0",
        ])
        self.used.add("Config")

    def define_helper(self, kind: str) -> str | None:
        """A module-level helper function of ``kind`` (see HELPERS); its name."""
        existing = [n for n, h in self.helpers.items() if n.startswith(kind + "_") or n == kind]
        if existing and self.chance(0.7):
            return existing[0]
        name = kind if kind not in self.used else f"{kind}_{len(self.used)}"
        made = getattr(self, "helper_" + kind)(name)
        if made is None:
            return None
        self.used.add(name)
        self.helpers[name] = made
        return name

    def helper_scaled(self, name: str) -> _Helper | None:
        shape = self.new_shape()
        with self.function_scope({"t": Ty("tensor", shape), "k": Ty("float")}):
            body = wrap(self.tensor_of("t", shape))
        expr = self.pick(("{} * k", "{} + k", "k * {}")).format(body)
        lines = [f"def {name}(t, k={self.pick(FLOATS)}):", f"    return {expr}"]
        return _Helper(lines, lambda: self._call_shaped(name, shape, "{0}, {f}", "{0}"))

    def helper_combine(self, name: str) -> _Helper | None:
        shape = self.new_shape()
        with self.function_scope({"a": Ty("tensor", shape), "b": Ty("tensor", shape)}):
            expr = self.fill(self.pick(BINARY), [self.tensor_of("a", shape), "b"])
            extra = self.block(1)
        lines = [f"def {name}(a, b):"] + indent(extra) + [f"    return {expr}"]
        return _Helper(lines, lambda: self._call_shaped(name, shape, "{0}, {1}", "b={1}, a={0}"))

    def helper_branchy(self, name: str) -> _Helper | None:
        shape = self.new_shape()
        with self.function_scope({"t": Ty("tensor", shape)}):
            cond = self.tensor_cond() if self.chance(0.5) else None
            yes, no = self.tensor_of("t", shape), self.tensor_of("t", shape)
        cond = cond or "t.sum() > 0"
        lines = [f"def {name}(t):", f"    if {cond}:", f"        return {yes}",
                 f"    return {no}"]
        return _Helper(lines, lambda: self._call_shaped(name, shape, "{0}"))

    def helper_varargs(self, name: str) -> _Helper | None:
        shape = self.new_shape()
        lines = [f"def {name}(*ts, weight=1.0, **options):",
                 "    out = ts[0]",
                 "    for t in ts[1:]:",
                 "        out = out + t * weight",
                 '    if options.get("relu", False):',
                 "        out = torch.relu(out)",
                 '    if "shift" in options:',
                 '        out = out + options["shift"]',
                 "    return out"]

        def call() -> str | None:
            if not self.can_make(shape):
                return None
            lists = [n for n in self.vars_of("tlist", shape) if self.scope[n].size >= 1]
            if lists and self.chance(0.3):
                return shape, f"{name}(*{self.pick(lists)}, weight={self.float_expr()})"
            args = ", ".join(self.tensor(shape, 1) for _ in range(self.rng.randint(1, 3)))
            opts = self.pick(["", ", relu=True", f", shift={self.float_expr()}",
                              f", weight={self.float_expr()}, relu={self.bool_expr()}",
                              f", **{{'relu': {self.bool_expr()}}}"])
            return shape, f"{name}({args}{opts})"
        return _Helper(lines, call)

    def helper_check(self, name: str) -> _Helper | None:
        shape = self.new_shape()
        error = self.pick(("ValueError", "ValueError", "KeyError", "IndexError"))
        lines = [f"def {name}(t, n):",
                 "    if n < 1:",
                 f'        raise {error}(f"n must be positive, got {{n}}")',
                 "    return t * n"]
        return _Helper(lines, lambda: self._call_shaped(name, shape, "{0}, {i}"))

    def helper_stats(self, name: str) -> _Helper | None:
        shape = self.pick(("NM", "N", "M"))
        lines = [f"def {name}(t):", "    return t.mean(), t.amax()"]

        def call() -> str | None:
            if not self.can_make(shape):
                return None
            return "pair", f"{name}({self.tensor(shape, 1)})"
        return _Helper(lines, call)

    def helper_record(self, name: str) -> _Helper | None:
        lines = [f"def {name}(log, value):", "    log.append(value)", "    return len(log)"]
        return _Helper(lines, lambda: ("record",))

    def helper_tick(self, name: str) -> _Helper | None:
        self.define_global("G_CALLS", Ty("int"), "0")
        lines = [f"def {name}(amount=1):", "    global G_CALLS", "    G_CALLS += amount",
                 "    return G_CALLS"]
        return _Helper(lines, lambda: ("int", f"{name}()" if self.chance(0.5)
                                       else f"{name}({self.rng.randint(1, 3)})"))

    def helper_gen(self, name: str) -> _Helper | None:
        shape = self.pick(("M", "NM"))
        with self.function_scope({"t": Ty("tensor", shape), "k": Ty("float")}):
            expr = self.tensor_of("t", shape)
        lines = self.pick([
            [f"def {name}(ts, k):", "    for t in ts:", f"        yield {expr}"],
            [f"def {name}(ts, k):", "    for i, t in enumerate(ts):", "        if i % 2 == 0:",
             f"            yield {expr}", "        else:", "            yield t"],
            [f"def {name}(ts, k):", "    yield from (t * k for t in ts)"],
        ])
        return _Helper(lines, lambda: ("gen", shape, name))

    def helper_depth(self, name: str) -> _Helper | None:
        lines = [f"def {name}(n):", "    if n <= 0:", "        return 0",
                 f"    return 1 + {name}(n - 1)"]
        return _Helper(lines, lambda: ("int", f"{name}({self.small_int()})"))

    def _call_shaped(self, name: str, shape: str, args: str, alt: str | None = None):
        if not self.can_make(shape):
            return None
        template = alt if alt and self.chance(0.3) else args
        operands = [self.tensor(shape, 1), self.tensor(shape, 1)]
        return shape, self.fill(name + "(" + template + ")", operands)

    # -- classes --------------------------------------------------------------------------------
    def define_class(self, cls: str, shape: str) -> bool:
        if cls in self.classes:
            return self.class_shape.get(cls, shape) == shape
        with self.function_scope({"t": Ty("tensor", shape)}):
            expr = self.tensor_of("t", shape)
        counter = self.chance(0.4)
        lines = getattr(self, "class_" + cls)(expr, counter)
        self.classes[cls] = lines
        self.class_shape[cls] = shape
        self.used.add(cls)
        return True

    def class_RunningStat(self, expr: str, counter: bool) -> list[str]:
        return ["class RunningStat:"] + (["    instances = 0", ""] if counter else []) + [
            "    def __init__(self, init):",
            "        self.total = init",
            "        self.steps = 0",
        ] + (["        RunningStat.instances += 1"] if counter else []) + [
            "",
            "    def update(self, t):",
            f"        self.total = self.total + {expr}",
            "        self.steps += 1",
            "        return self.total",
            "",
            "    def mean(self):",
            "        return self.total / max(self.steps, 1)",
        ]

    def class_Affine(self, expr: str, counter: bool) -> list[str]:
        return ["class Affine:",
                "    def __init__(self, scale, shift=0.0):",
                "        self.scale = scale",
                "        self.shift = shift",
                "",
                "    def __call__(self, t):",
                "        return t * self.scale + self.shift",
                "",
                "    def inverse(self, t):",
                "        return (t - self.shift) / self.scale",
                "",
                "    def extra(self, t):",
                f"        return {expr}"]

    def class_Buffer(self, expr: str, counter: bool) -> list[str]:
        return ["class Buffer:",
                f"    limit = {self.rng.randint(2, 4)}",
                "",
                "    def __init__(self):",
                "        self.items = []",
                "",
                "    def push(self, t):",
                "        self.items.append(t)",
                "        if len(self.items) > self.limit:",
                "            self.items.pop(0)",
                "",
                "    @property",
                "    def size(self):",
                "        return len(self.items)",
                "",
                "    def stacked(self):",
                "        return torch.stack(self.items)",
                "",
                "    def total(self):",
                "        return sum(self.items)"]

    def class_Output(self, expr: str, counter: bool) -> list[str]:
        self.imports.add("import dataclasses")
        return ["@dataclasses.dataclass",
                "class Output:",
                "    value: torch.Tensor",
                "    steps: int = 0",
                "    tag: str = \"\""]

    def class_Stats(self, expr: str, counter: bool) -> list[str]:
        self.imports.add("from typing import NamedTuple")
        return ["class Stats(NamedTuple):",
                "    mean: torch.Tensor",
                "    count: int"]

    # -- statements: tensors ------------------------------------------------------------------
    def s_tensor(self) -> list[str] | None:
        if self.depth and self.chance(0.7):
            return self.s_rebind()
        shape = self.new_shape()
        name = self.fresh("tensor")
        value = self.tensor(shape)
        self.define(name, Ty("tensor", shape))
        self.track_leaf(name, value)
        return [f"{name} = {value}"]

    def track_leaf(self, name: str, value: str) -> None:
        """``name = x`` or ``name = x[0]`` with ``x`` a leaf that requires grad: in-place ops on
        ``name`` fail in eager, so the generator keeps them off it too."""
        match = re.match(r"(\w+)(\.|\[|$)", value)
        if match and match.group(1) in self.grad_leaves:
            self.grad_leaves.add(name)

    def s_rebind(self) -> list[str] | None:
        names = [n for n in self.vars_of("tensor") if self.assignable(n)]
        if not names:
            return None
        name = self.pick(names)
        shape = self.scope[name].shape
        if self.chance(0.3) and name not in self.grad_leaves:
            operand = self.operand_for(name, shape)
            return operand and [f"{name} {self.pick(('+=', '-=', '*='))} {operand}"]
        value = self.tensor(shape)
        self.track_leaf(name, value)
        return [f"{name} = {value}"]

    def assignable(self, name: str) -> bool:
        """Whether a statement may rebind ``name`` (not a loop's iterable or variable, and not
        a variable the closure being generated reads from its enclosing function)."""
        return name not in self.iterating and name not in self.readonly

    def operand_for(self, name: str, shape: str, broadcast: bool = True) -> str | None:
        """A second operand for an in-place update of ``name`` that does not read ``name``
        (a view of the tensor being written is an error in eager PyTorch)."""
        for _ in range(5):
            other = self.pick(s for s in BROADCAST[shape] if self.can_make(s)) if broadcast \
                else shape
            operand = self.tensor(other, 1)
            if not re.search(rf"\b{name}\b", operand):
                return operand
        return None

    def s_inplace(self) -> list[str] | None:
        names = [n for n in self.vars_of("tensor")
                 if n not in self.grad_leaves or self.no_grad]
        lines = []
        if not names or self.chance(0.4):
            if self.depth:
                return None
            src = self.pick(self.vars_of("tensor"))
            shape = self.scope[src].shape
            name = self.fresh("tensor")
            self.define(name, Ty("tensor", shape))
            maker = self.pick([f"{src}.clone()", f"torch.zeros_like({src})",
                               f"torch.ones_like({src})", f"{src}.detach().clone()",
                               f"torch.empty_like({src}).fill_({self.float_expr()})"])
            if shape == "NM" and self.dims["N"] and self.dims["M"]:
                maker = self.pick([maker, f"torch.zeros({self.dim('N')}, {self.dim('M')})",
                                   f"{src}.new_zeros({src}.shape)"])
            lines.append(f"{name} = {maker}")
        else:
            name = self.pick(names)
            shape = self.scope[name].shape
        other, same = self.operand_for(name, shape), self.operand_for(name, shape, False)
        if other is None or same is None:
            return None
        f = self.float_expr
        ops = [f"{name}.add_({other})", f"{name}.mul_({f()})", f"{name}.relu_()",
               f"{name}.sub_({other}, alpha={f()})", f"{name}.clamp_(min={f()})",
               f"{name}.div_({self.nz_expr()})", f"{name}.copy_({same})",
               f"{name}.masked_fill_({wrap(same)} > 0, {f()})",
               f"{name}.mul_({other}).add_({f()})"]
        if NDIM[shape] == 2:
            ops += [f"{name}[0] = {f()}", f"{name}[:, 0] = {f()}", f"{name}[0].mul_({f()})",
                    f"{name}[-1] = 0.0"]
            column = self.operand_for(name, "N1", False) if shape == "NM" else None
            if column:
                ops.append(f"{name}[:, -1:] = {column}")
        if NDIM[shape] >= 1:
            ops += [f"{name}[{name} < 0] = 0.0", f"{name}[0] += {f()}"]
        return lines + [self.pick(ops)]

    def s_mask(self) -> list[str] | None:
        if self.depth:
            return None
        shape = self.new_shape()
        name = self.fresh("mask")
        t = wrap(self.tensor(shape, 1))
        self.define(name, Ty("mask", shape))
        line = f"{name} = " + self.pick([f"{t} > 0", f"{t} < {self.float_expr()}",
                                         f"{t}.abs() > 0.5"])
        use = self.fresh("tensor")
        other = self.tensor(shape, 1)
        uses = [f"torch.where({name}, {other}, {self.tensor(shape, 1)})",
                f"{wrap(other)}.masked_fill({name}, {self.float_expr()})",
                f"{wrap(other)} * {name}", f"{wrap(other)} * {name}.float()"]
        self.define(use, Ty("tensor", shape))
        return [line, f"{use} = {self.pick(uses)}"]

    def s_shape(self) -> list[str] | None:
        tensors = [n for n in self.vars_of("tensor") if self.scope[n].shape in ("NM", "N")]
        if not tensors or self.depth:
            return None
        t = self.pick(tensors)
        if self.scope[t].shape == "NM" and self.chance(0.4):
            rows, cols = self.fresh_pair()
            self.define(rows, Ty("int"))
            self.define(cols, Ty("int"))
            self.dims["N"].append(rows)
            self.dims["M"].append(cols)
            self.small_int_vars |= {rows, cols}
            return [f"{rows}, {cols} = {t}.{self.pick(['shape', 'size()'])}"]
        name = self.fresh("int")
        self.define(name, Ty("int"))
        self.small_int_vars.add(name)
        self.dims["N"].append(name)
        return [f"{name} = {self.pick([f'{t}.shape[0]', f'{t}.size(0)', f'len({t})'])}"]

    # -- statements: Python values ------------------------------------------------------------
    def s_scalar(self) -> list[str] | None:
        kind = self.pick(("int", "float", "bool", "int", "float"))
        # Sizes and loop bounds keep their values: code after this statement relies on them.
        fixed = self.small_ints | self.nonzero | set(self.dims["N"]) | set(self.dims["M"])
        existing = [n for n in self.vars_of(kind) if self.assignable(n) and n not in fixed]
        if kind == "int" and existing and self.chance(0.4):
            name = self.pick(existing)
            return [f"{name} {self.pick(('+=', '-=', '*='))} {self.rng.randint(1, 3)}"]
        if self.depth and existing and self.chance(0.6):
            name = self.pick(existing)
            self.nonzero.discard(name)
        else:
            name = self.fresh(kind)
        value = {"int": self.int_expr, "float": self.float_expr, "bool": self.bool_expr}[kind]()
        self.define(name, Ty(kind))
        return [f"{name} = {value}"]

    # -- statements: control flow ---------------------------------------------------------------
    def s_if(self) -> list[str] | None:
        lines = [f"if {self.bool_expr()}:"] + indent(self.block())
        if self.chance(0.25):
            lines += [f"elif {self.bool_expr()}:"] + indent(self.block())
        if self.chance(0.5):
            lines += ["else:"] + indent(self.block())
        return lines

    def s_if_tensor(self) -> list[str] | None:
        lines = [f"if {self.tensor_cond()}:"] + indent(self.block())
        if self.chance(0.5):
            lines += ["else:"] + indent(self.block())
        return lines

    def s_ternary(self) -> list[str] | None:
        shape = self.new_shape()
        name = self.fresh("tensor")
        line = (f"{name} = {wrap(self.tensor(shape, 1))} if {self.bool_expr()} "
                f"else {wrap(self.tensor(shape, 1))}")
        self.define(name, Ty("tensor", shape))
        return [line]

    def s_for_range(self) -> list[str] | None:
        if self.loop_depth >= 2:
            return None
        var = self.fresh("loop")
        bound = self.small_int()
        header = self.pick([f"range({bound})", f"range(1, {bound})", f"range(0, {bound}, 2)",
                            f"reversed(range({bound}))"])
        with self.nested(loop=True):
            self.bind(var, Ty("int"))
            self.small_int_vars.add(var)
            body = self.block(loop=True)
            if self.chance(0.3):
                body = [f"if {var} {self.pick(('==', '>', '%'))} {self.rng.randint(1, 2)}:",
                        f"    {self.pick(('continue', 'break'))}"] + body
            self.small_int_vars.discard(var)
        return [f"for {var} in {header}:"] + indent(body)

    def s_for_list(self) -> list[str] | None:
        lists = self.vars_of("tlist")
        if not lists or self.loop_depth >= 2:
            return None
        lst = self.pick(lists)
        shape = self.scope[lst].shape
        var = self.fresh("each")
        with self.nested(loop=True):
            self.iterating.add(lst)
            self.bind(var, Ty("tensor", shape))
            self.iterating.add(var)
            if self.chance(0.4):
                idx = self.fresh("loop")
                self.bind(idx, Ty("int"))
                header = f"for {idx}, {var} in enumerate({lst}):"
            elif self.chance(0.2):
                header = f"for {var} in reversed({lst}):"
            elif self.chance(0.25):
                other = self.fresh("each")
                pair = [n for n in self.vars_of("tlist") if n != lst]
                if pair:
                    self.iterating.add(pair[0])
                    self.bind(other, Ty("tensor", self.scope[pair[0]].shape))
                    header = f"for {var}, {other} in zip({lst}, {pair[0]}):"
                else:
                    self.bind(other, Ty("float"))
                    header = f"for {var}, {other} in zip({lst}, [0.5, 1.0, 2.0]):"
            else:
                header = f"for {var} in {lst}:"
            body = self.block(loop=True)
        return [header] + indent(body)

    def s_for_dict(self) -> list[str] | None:
        dicts = self.vars_of("tdict")
        if not dicts or self.loop_depth >= 2:
            return None
        d = self.pick(dicts)
        k, v = self.fresh("key"), self.fresh("value")
        with self.nested(loop=True):
            self.iterating.add(d)
            self.bind(k, Ty("str"))
            self.bind(v, Ty("tensor", self.scope[d].shape))
            header = self.pick([f"for {k}, {v} in {d}.items():",
                                f"for {k}, {v} in sorted({d}.items()):"])
            body = self.block(loop=True)
            if self.chance(0.4):
                body = [f'if {k} == "{self.pick(KEYS)}":', "    continue"] + body
        return [header] + indent(body)

    def s_while(self) -> list[str] | None:
        if self.loop_depth >= 2 or self.depth >= 2:
            return None
        counter = self.fresh("int")
        limit = self.rng.randint(2, 4)
        with self.nested(loop=True):
            cond = f"{counter} < {limit}"
            if self.chance(0.35):
                cond += f" and {self.tensor_cond()}"
            body = self.block(loop=True)
            if self.chance(0.2):
                body = [f"if {self.bool_expr()}:", "    break"] + body
        return [f"{counter} = 0", f"while {cond}:"] + indent(body + [f"{counter} += 1"])

    # -- statements: containers ----------------------------------------------------------------
    def s_list_new(self) -> list[str] | None:
        if self.depth:
            return None
        shape = self.new_shape()
        name = self.fresh("tlist")
        src = [n for n in self.vars_of("tlist", shape) if self.scope[n].kind == "tlist"]
        options = [("[]", 0), (f"[{self.tensor(shape, 1)}, {self.tensor(shape, 1)}]", 2),
                   (f"[{self.tensor(shape, 1)}]", 1)]
        if src:
            s = self.pick(src)
            size = self.scope[s].size
            options += [(f"list({s})", size), (f"{s}[:]", size), (f"{s}.copy()", size),
                        (f"{s} + [{self.tensor(shape, 1)}]", size + 1)]
        value, size = self.pick(options)
        self.define(name, Ty("tlist", shape, size=size))
        return [f"{name} = {value}"]

    def s_list_mut(self) -> list[str] | None:
        lists = [n for n in self.vars_of("tlist") if n not in self.iterating]
        if not lists:
            return None
        name = self.pick(lists)
        ty = self.scope[name]
        rebinds = name in self.readonly  # `lst += [...]` would make it the closure's local
        if not self.can_make(ty.shape):
            return None
        if rebinds:  # a closure may run while its caller iterates the list: no appends
            return ty.size >= 1 and [f"{name}[0] = {self.tensor(ty.shape, 1)}"] or None
        value = self.tensor(ty.shape, 1)
        # (statement, change of the least length, name of a new tensor it binds)
        ops = [(f"{name}.append({value})", 0, None),
               (f"{name}.append({value})" if rebinds else f"{name} += [{value}]", 0, None),
               (f"{name}.extend([{value}, {self.tensor(ty.shape, 1)}])", 0, None)]
        if not self.depth:
            ops += [(f"{name}.insert(0, {value})", 1, None), (f"{name}.append({value})", 1, None)]
        if ty.size >= 1:
            index = self.pick(("0", "-1"))
            ops += [(f"{name}[{index}] = {value}", 0, None)]
            if not self.depth:
                popped = self.fresh("tensor")
                ops += [(f"{popped} = {name}.pop()", -1, popped),
                        (f"del {name}[{index}]", -1, None), (f"{name}.pop(0)", -1, None)]
        if ty.size >= 2 and not self.depth:
            ops += [(f"{name}.reverse()", 0, None), (f"{name}[1] = {value}", 0, None),
                    (f"{name}[:] = {name}[::-1]", 0, None)]
        line, change, bound = self.pick(ops)
        if not self.depth:
            self.define(name, dataclasses.replace(ty, size=ty.size + change))
        if bound:
            self.define(bound, Ty("tensor", ty.shape))
        return [line]

    def s_list_use(self) -> list[str] | None:
        lists = [n for n in self.vars_of("tlist") if self.scope[n].size >= 1]
        if not lists or self.depth:
            return None
        lst = self.pick(lists)
        shape = self.scope[lst].shape
        name = self.fresh("tensor")
        options = [(f"{lst}[0]", shape), (f"{lst}[-1]", shape), (f"sum({lst})", shape)]
        if shape in ("M", "N"):
            options += [(f"torch.stack({lst}).sum(0)", shape), (f"torch.cat({lst}).sum()", "0d"),
                        (f"torch.stack({lst}).mean(0)", shape)]
        if shape == "NM":
            options += [(f"torch.stack({lst}).amax(0)", "NM"), (f"torch.cat({lst}).mean(0)", "M"),
                        (f"torch.stack({lst}, dim=1).sum(1)", "NM")]
        value, result = self.pick(options)
        self.define(name, Ty("tensor", result))
        return [f"{name} = {value}"]

    def s_ints(self) -> list[str] | None:
        if self.depth:
            return None
        name = self.fresh("ilist")
        options = [f"[{self.int_expr()}, {self.int_expr()}]", "[]",
                   f"[i * 2 for i in range({self.small_int()})]",
                   f"list(range({self.small_int()}))"]
        tensors = [n for n in self.vars_of("tensor") if NDIM[self.scope[n].shape] == 2]
        if tensors:
            options.append(f"list({self.pick(tensors)}.shape)")
        self.define(name, Ty("ilist"))
        lines = [f"{name} = {self.pick(options)}"]
        follow = [f"{name}.append({self.int_expr()})", f"{name}.sort()",
                  f"{name}.sort(reverse=True)", f"{name} = sorted({name})",
                  f"{name}.insert(0, {self.int_expr()})", f"{name} = {name}[::-1]",
                  f"{name}.extend([{self.int_expr()}] * 2)"]
        lines.append(self.pick(follow))
        value = self.pick([f"len({name})", f"sum({name})", f"max({name}, default=0)",
                           f"{name}.count({self.int_expr()})",
                           f"min({name} + [{self.int_expr()}])"])
        use = self.fresh("int")
        self.define(use, Ty("int"))
        return lines + [f"{use} = {value}"]

    def s_dict_new(self) -> list[str] | None:
        if self.depth:
            return None
        shape = self.new_shape()
        name = self.fresh("tdict")
        keys = tuple(self.rng.sample(KEYS, self.rng.randint(0, 3)))
        values = [self.tensor(shape, 1) for _ in keys]
        literal = "{" + ", ".join(f'"{k}": {v}' for k, v in zip(keys, values)) + "}"
        call = "dict(" + ", ".join(f"{k}={v}" for k, v in zip(keys, values)) + ")"
        value = self.pick([literal, literal, call])
        self.define(name, Ty("tdict", shape, keys=keys))
        return [f"{name} = {value}"]

    def s_dict_mut(self) -> list[str] | None:
        dicts = [n for n in self.vars_of("tdict") if n not in self.iterating]
        if not dicts:
            return None
        name = self.pick(dicts)
        ty = self.scope[name]
        if not self.can_make(ty.shape):
            return None
        key = self.pick(KEYS)
        value = self.tensor(ty.shape, 1)
        ops = [(f'{name}["{key}"] = {value}', key), (f'{name}.update({key}={value})', key),
               (f'{name}.update({{"{key}": {value}}})', key),
               (f'{name}.setdefault("{key}", {value})', key)]
        loops = [v for v, t in self.scope.items() if t.kind == "int" and v in NAMES["loop"]]
        if loops:
            ops.append((f'{name}[f"layer{{{self.pick(loops)}}}"] = {value}', None))
        if ty.keys and not self.depth:
            old = self.pick(ty.keys)
            ops += [(f'del {name}["{old}"]', "-" + old), (f'{name}.pop("{old}")', "-" + old),
                    (f'{name}["{old}"] = {name}["{old}"] * 2', None)]
        ops.append((f'{name}.pop("{key}", None)', "-" + key))
        line, change = self.pick(ops)
        if not self.depth and change:
            keys = set(ty.keys)
            if change.startswith("-"):
                keys.discard(change[1:])
            else:
                keys.add(change)
            self.define(name, dataclasses.replace(ty, keys=tuple(sorted(keys))))
        elif change and change.startswith("-"):
            self.define(name, dataclasses.replace(ty, keys=tuple(k for k in ty.keys
                                                                 if k != change[1:])))
        return [line]

    def s_dict_use(self) -> list[str] | None:
        dicts = self.vars_of("tdict")
        if not dicts or self.depth:
            return None
        d = self.pick(dicts)
        ty = self.scope[d]
        name = self.fresh("tensor")
        options = [f'{d}.get("{self.pick(KEYS)}", {self.tensor(ty.shape, 1)})']
        if ty.keys:
            options += [f'{d}["{self.pick(ty.keys)}"]'] * 2
            options.append(f"sum({d}.values())")
            options.append(f"list({d}.values())[-1]")
        self.define(name, Ty("tensor", ty.shape))
        lines = [f"{name} = {self.pick(options)}"]
        if self.chance(0.3):
            n = self.fresh("int")
            self.define(n, Ty("int"))
            lines.append(self.pick([f"{n} = len({d})", f"{n} = len(list({d}.keys()))",
                                    f'{n} = sum(1 for k in {d} if k.startswith("h"))']))
        return lines

    def s_opts(self) -> list[str] | None:
        opts = self.vars_of("opts")
        if not opts:
            return None
        d = self.pick(opts)
        return [self.pick([f'{d}["steps"] = {d}.get("steps", 0) + 1',
                           f'{d}["seen"] = True', f'{d}.setdefault("count", 0)',
                           f'{d}.update(last={self.int_expr()})'])]

    def s_tuple(self) -> list[str] | None:
        if self.depth:
            names = [n for n in self.vars_of("tensor") if self.assignable(n)
                     and n not in self.grad_leaves]
            pairs = [(a, b) for a in names for b in names
                     if a < b and self.scope[a].shape == self.scope[b].shape]
            if not pairs:
                return None
            a, b = self.pick(pairs)
            return [f"{a}, {b} = {b}, {a}"]
        shape = self.new_shape()
        value = f"({self.tensor(shape, 1)}, {self.int_expr()})"
        pair, t, k = self.fresh("tensor"), self.fresh("tensor"), self.fresh("int")
        self.define(t, Ty("tensor", shape))
        self.define(k, Ty("int"))
        return self.pick([[f"{pair} = {value}", f"{t}, {k} = {pair}"],
                          [f"{t}, {k} = {value}"],
                          [f"{pair} = {value}", f"{t} = {pair}[0]", f"{k} = {pair}[-1] + 1"]])

    def s_set(self) -> list[str] | None:
        sets = self.vars_of("iset")
        if not sets:
            if self.depth:
                return None
            name = self.fresh("iset")
            self.define(name, Ty("iset"))
            return [f"{name} = {self.pick(['set()', '{0, 1}', f'{{{self.int_expr()}}}'])}"]
        name = self.pick(sets)
        return [self.pick([f"{name}.add({self.int_expr()})", f"{name}.discard({self.int_expr()})",
                           f"{name} |= {{{self.int_expr()}, 3}}",
                           f"{name}.update([{self.int_expr()}])"])]

    def s_comprehension(self) -> list[str] | None:
        if self.depth >= 2:
            return None
        lists = [n for n in self.vars_of("tlist")]
        name = self.fresh("tlist")
        if lists and self.chance(0.6):
            lst = self.pick(lists)
            shape = self.scope[lst].shape
            with self.function_scope({"t": Ty("tensor", shape)}, captured=True):
                expr = self.tensor_of("t", shape)
                cond = self.pick(["", "", f" if {self.tensor_cond()}", " if t.sum() > 0"])
            value = f"[{expr} for t in {lst}{cond}]"
            size = self.scope[lst].size if not cond else 0
        else:
            shape = self.new_shape()
            with self.function_scope({"i": Ty("int")}, captured=True):
                expr = self.tensor(shape, 1)
                factor = self.pick(["", " * i", " + i", " * (i + 1)"])
            bound = self.small_int()
            value = f"[{wrap(expr)}{factor} for i in range({bound})]"
            size = 0
        self.define(name, Ty("tlist", shape, size=size))
        lines = [f"{name} = {value}"]
        if self.chance(0.5):
            out = self.fresh("num")
            self.define(out, Ty("num"))
            lines.append(self.pick([f"{out} = sum(t.sum() for t in {name})",
                                    f"{out} = sum([t.mean() for t in {name}], 0.0)",
                                    f"{out} = max((t.max() for t in {name}), default=0.0)"]))
        dicts = self.vars_of("tdict")
        if dicts and self.chance(0.4):
            d = self.pick(dicts)
            other = self.fresh("tdict")
            self.define(other, Ty("tdict", self.scope[d].shape, keys=self.scope[d].keys))
            lines.append(self.pick([f"{other} = {{k: v * 2 for k, v in {d}.items()}}",
                                    f"{other} = {{k: v for k, v in {d}.items() if v.sum() > 0}}",
                                    f"{other} = {{k.upper(): v.relu() for k, v in {d}.items()}}"]))
            if "if v.sum()" in lines[-1] or ".upper()" in lines[-1]:
                self.define(other, Ty("tdict", self.scope[d].shape))
        return lines

    # -- statements: functions ------------------------------------------------------------------
    def s_closure(self) -> list[str] | None:
        shape = self.new_shape()
        name = self.fresh("fn")
        kind = self.pick(("read", "read", "nonlocal", "lambda", "accumulate"))
        if kind == "lambda":
            with self.function_scope({"t": Ty("tensor", shape)}, captured=True):
                expr = self.tensor_of("t", shape)
            lines = [f"{name} = lambda t: {expr}"]
        elif kind == "read":
            with self.function_scope({"t": Ty("tensor", shape)}, captured=True):
                body = self.block(1) if self.chance(0.4) else []
                expr = self.tensor_of("t", shape)
            lines = [f"def {name}(t):"] + indent(body + [f"return {expr}"])
        elif kind == "nonlocal":
            if self.depth:
                return None
            count = self.fresh("int")
            with self.function_scope({"t": Ty("tensor", shape)}, captured=True):
                expr = self.tensor_of("t", shape)
            lines = [f"{count} = 0", f"def {name}(t):", f"    nonlocal {count}",
                     f"    {count} += 1", f"    return {expr}"]
            self.define(count, Ty("int"))
        else:
            total = self.fresh("tensor")
            if self.depth or not self.can_make(shape):
                return None
            with self.function_scope({"t": Ty("tensor", shape)}, captured=True):
                expr = self.tensor_of("t", shape)
            lines = [f"{total} = torch.zeros_like({self.leaf(shape)})", f"def {name}(t):",
                     f"    nonlocal {total}", f"    {total} = {total} + {expr}",
                     f"    return {total}"]
            self.define(total, Ty("tensor", shape))
        use = self.fresh("tensor")
        arg = self.tensor(shape, 1)
        call = self.pick([f"{name}({arg})", f"{name}({name}({arg}))", f"{name}({arg}) + {name}(t2)"
                          .replace("t2", self.leaf(shape))])
        lists = self.vars_of("tlist", shape)
        if lists and self.chance(0.3):
            out = self.fresh("tlist")
            lines.append(f"{out} = " + self.pick([f"list(map({name}, {self.pick(lists)}))",
                                                  f"[{name}(t) for t in {self.pick(lists)}]"]))
            self.define(out, Ty("tlist", shape, size=self.scope[lists[0]].size
                                if len(lists) == 1 else 0))
        lines.append(f"{use} = {call}")
        self.define(use, Ty("tensor", shape))
        return lines

    def s_helper(self) -> list[str] | None:
        if self.in_def:
            return None  # helpers call no helpers (no accidental recursion)
        kind = self.weighted(HELPERS)
        name = self.define_helper(kind)
        if name is None:
            return None
        made = self.helpers[name].call()
        if made is None:
            return None
        tag = made[0]
        if tag == "record":
            return self._use_record(name)
        if tag == "gen":
            return self._use_gen(name, made[1])
        if tag == "pair":
            a, b = self.fresh("tensor"), self.fresh("tensor")
            self.define(a, Ty("tensor", "0d"))
            self.define(b, Ty("tensor", "0d"))
            return [f"{a}, {b} = {made[1]}"]
        if tag == "int":
            out = self.fresh("int")
            self.define(out, Ty("int"))
            return [f"{out} = {made[1]}"]
        out = self.fresh("tensor") if not self.depth or self.chance(0.3) else None
        targets = [n for n in self.vars_of("tensor", tag) if self.assignable(n)
                   and n not in self.grad_leaves]
        if out is None and targets:
            out = self.pick(targets)
        out = out or self.fresh("tensor")
        self.define(out, Ty("tensor", tag))
        return [f"{out} = {made[1]}"]

    def _use_record(self, helper: str) -> list[str] | None:
        logs = [n for n in self.vars_of("ilist") if n not in self.iterating]
        if "G_HISTORY" in self.globals and self.chance(0.5) or not logs:
            self.define_global("G_HISTORY", Ty("ilist"), "[]")
            target = "G_HISTORY"
        else:
            target = self.pick(logs)
        out = self.fresh("int")
        self.define(out, Ty("int"))
        return [f"{out} = {helper}({target}, {self.int_expr()})"]

    def _use_gen(self, helper: str, shape: str) -> list[str] | None:
        lists = [n for n in self.vars_of("tlist", shape)]
        if not lists:
            return None
        lst = self.pick(lists)
        arg = f"{helper}({lst}, {self.float_expr()})"
        if self.loop_depth < 2 and self.chance(0.4):
            var = self.fresh("each")
            with self.nested(loop=True):
                self.bind(var, Ty("tensor", shape))
                self.iterating.add(lst)
                body = self.block(loop=True)
            return [f"for {var} in {arg}:"] + indent(body)
        name = self.fresh("tlist")
        if self.chance(0.5):
            self.define(name, Ty("tlist", shape, size=self.scope[lst].size))
            return [f"{name} = list({arg})"]
        total = self.fresh("num")
        self.define(total, Ty("num"))
        return [self.pick([f"{total} = sum({arg})", f"{total} = sum(t.sum() for t in {arg})"])]

    # -- statements: objects ------------------------------------------------------------------
    def s_object(self) -> list[str] | None:
        objs = [n for n in self.vars_of("obj") if self.scope[n].cls != "Config"]
        if objs and self.chance(0.6):
            return self.use_object(self.pick(objs))
        if self.depth:
            return None
        cls = self.pick(("RunningStat", "Affine", "Buffer", "Output", "Stats"))
        shape = self.class_shape.get(cls) or self.new_shape()
        if not self.can_make(shape) or not self.define_class(cls, shape):
            return None
        name = self.fresh("obj")
        arg = {"RunningStat": f"torch.zeros_like({self.leaf(shape)})",
               "Affine": f"{self.nz_expr()}, shift={self.float_expr()}",
               "Buffer": "", "Output": f"{self.tensor(shape, 1)}, steps={self.int_expr()}",
               "Stats": f"{self.tensor('0d', 1)}, {self.int_expr()}"}[cls]
        if cls == "Stats":
            self.define(name, Ty("obj", "0d", cls=cls))
        else:
            self.define(name, Ty("obj", shape, cls=cls))
        return [f"{name} = {cls}({arg})"]

    def use_object(self, name: str) -> list[str] | None:
        ty = self.scope[name]
        shape = ty.shape
        if not self.can_make(shape):
            return None
        out = self.fresh("tensor")
        t = self.tensor(shape, 1)
        options = {
            "RunningStat": [(f"{out} = {name}.update({t})", shape),
                            (f"{out} = {name}.mean()", shape), (f"{name}.update({t})", None),
                            (f"{out} = {name}.total * 2", shape)],
            "Affine": [(f"{out} = {name}({t})", shape), (f"{out} = {name}.inverse({t})", shape),
                       (f"{out} = {name}.extra({t})", shape),
                       (f"{name}.scale = {name}.scale * 2", None),
                       (f"{name}.shift += {self.float_expr()}", None)],
            "Buffer": [(f"{name}.push({t})", None), (f"{name}.push({t})", None),
                       (f"{out} = {name}.total() + {t}", shape),
                       (f"{name}.limit = {self.rng.randint(1, 3)}", None)],
            "Output": [(f"{name}.steps += 1", None), (f"{out} = {name}.value + {t}", shape),
                       (f'{name}.tag = "{self.pick(KEYS)}"', None),
                       (f"{name}.value = {t}", None)],
            "Stats": [(f"{out} = {name}.mean * {name}.count", "0d"),
                      (f"{out} = {name}[0] + {name}.mean", "0d"),
                      (f"{out}, {self.fresh('int')} = {name}", "0d")],
        }[ty.cls]
        line, result = self.pick(options)
        if ty.cls == "Buffer" and ty.size and self.chance(0.4):
            line, result = f"{out} = {name}.stacked().sum(0) if {name}.size > 1 else {t}", shape
        if result:
            self.define(out, Ty("tensor", result))
        if ty.cls == "Buffer" and ".push(" in line and not self.depth:
            self.define(name, dataclasses.replace(ty, size=ty.size + 1))
        return [line]

    def s_config(self) -> list[str] | None:
        cfgs = [n for n in self.vars_of("obj") if self.scope[n].cls == "Config"]
        if not cfgs:
            return None
        cfg = self.pick(cfgs)
        if self.chance(0.4):
            return [f"{cfg}.calls += 1"]
        if self.loop_depth >= 2:
            return None
        var = self.fresh("loop")
        with self.nested(loop=True):
            self.bind(var, Ty("int"))
            body = self.block(loop=True)
        return [f"for {var} in range({cfg}.steps):"] + indent(body)

    # -- statements: globals --------------------------------------------------------------------
    def s_global(self) -> list[str] | None:
        kind = self.pick(("G_SCALE", "G_STEPS", "G_HISTORY", "G_CACHE", "G_LAST", "G_FLAG"))
        if kind == "G_SCALE":
            self.define_global("G_SCALE", Ty("float"), self.pick(("0.5", "2.0", "1.5")))
            shape = self.new_shape()
            out = self.fresh("tensor")
            self.define(out, Ty("tensor", shape))
            return [f"{out} = {wrap(self.tensor(shape, 1))} * G_SCALE"]
        if kind == "G_FLAG":
            self.define_global("G_FLAG", Ty("bool"), self.pick(("True", "False")))
            return ["if G_FLAG:"] + indent(self.block())
        if kind in ("G_STEPS", "G_LAST") and self.in_def:
            return None  # a def writing a global needs its own global statement
        if kind == "G_STEPS":
            self.define_global("G_STEPS", Ty("int"), "0")
            self.global_writes.add("G_STEPS")
            return [self.pick(["G_STEPS += 1", f"G_STEPS = G_STEPS + {self.int_expr()}"])]
        if kind == "G_HISTORY":
            self.define_global("G_HISTORY", Ty("ilist"), "[]")
            return [self.pick([f"G_HISTORY.append({self.int_expr()})",
                               f"G_HISTORY.extend([{self.int_expr()}, {self.int_expr()}])",
                               "G_HISTORY.append(len(G_HISTORY))"])]
        if kind == "G_CACHE":
            self.define_global("G_CACHE", Ty("gdict"), "{}")
            shape = self.new_shape()
            return [f'G_CACHE["{self.pick(KEYS)}"] = {self.tensor(shape, 1)}']
        self.define_global("G_LAST", Ty("gany"), "None")
        self.global_writes.add("G_LAST")
        value = wrap(self.tensor(self.new_shape(), 1))
        return [f"G_LAST = {value}" + self.pick(["", ".detach()", ".clone()"])]

    # -- statements: exceptions -----------------------------------------------------------------
    def s_try(self) -> list[str] | None:
        kind = self.pick(("key", "index", "raise", "helper", "multi"))
        shape = self.new_shape()
        target = self.fresh("tensor")
        fallback = self.tensor(shape, 1)
        handler_extra: list[str] = []
        if kind == "key" and self.vars_of("tdict", shape):
            d = self.pick(self.vars_of("tdict", shape))
            body, error = [f'{target} = {d}["{self.pick(KEYS)}"]'], "KeyError"
        elif kind == "index" and self.vars_of("tlist", shape):
            lst = self.pick(self.vars_of("tlist", shape))
            body, error = [f"{target} = {lst}[{self.int_expr()}]"], "IndexError"
        elif kind == "helper":
            helper = self.define_helper("check")
            made = self.helpers[helper].call() if helper else None
            if not made:
                return None
            shape = made[0]
            fallback = self.tensor(shape, 1)
            error = self.helpers[helper].lines[2].split("raise ")[1].split("(")[0]
            body = [f"{target} = {made[1]}"]
        elif kind == "multi":
            d = self.pick(self.vars_of("tdict", shape) or [None])
            lst = self.pick(self.vars_of("tlist", shape) or [None])
            if not d or not lst:
                return None
            body = [f'{target} = {d}["{self.pick(KEYS)}"] + {lst}[{self.int_expr()}]']
            error = "(KeyError, IndexError)"
        else:
            error = self.pick(("ValueError", "RuntimeError", "KeyError"))
            body = [f"if {self.bool_expr()}:",
                    f'    raise {error}("{self.pick(["bad input", "too small", "skip"])}")',
                    f"{target} = {self.tensor(shape, 1)}"]
        alias = self.chance(0.5)
        with self.nested():
            pre = self.block(1) if self.chance(0.3) else []
        lines = ["try:"] + indent(pre + body)
        lines.append(f"except {error}" + (" as e:" if alias else ":"))
        if alias:
            msg = self.fresh("str")
            handler_extra = self.pick([[f"{msg} = str(e)", f'print("skipped:", {msg})'],
                                       ['print("caught:", e)'],
                                       [f"{msg} = repr(e)", f"print({msg})"],
                                       ["print(type(e).__name__, e.args)"]])
        lines += indent(handler_extra + [f"{target} = {fallback}"])
        if self.chance(0.25):
            with self.nested():
                lines += ["else:"] + indent(self.block(1))
        if self.chance(0.25):
            counter = [n for n in self.vars_of("int") if self.assignable(n)
                       and n not in self.small_ints | set(self.dims["N"]) | set(self.dims["M"])]
            lines += ["finally:"] + indent([f"{self.pick(counter)} += 1"] if counter
                                           else ['print("done")'])
        self.define(target, Ty("tensor", shape))
        return lines

    def escape(self) -> list[str]:
        """A statement that sometimes raises out of the function (depending on the inputs)."""
        error = self.pick(ERRORS)
        message = f"f'unsupported: {{{self.int_expr()}}}'"
        options = [[f"if {self.bool_expr()}:", f"    raise {error}({message})"],
                   [f"assert {self.bool_expr()}, \"check failed\""]]
        lists = self.vars_of("tlist")
        if lists:
            options.append([f"{self.fresh('tensor')} = {self.pick(lists)}[{self.int_expr()}]"])
        dicts = self.vars_of("tdict")
        if dicts:
            options.append([f'{self.fresh("tensor")} = {self.pick(dicts)}["{self.pick(KEYS)}"]'])
        options.append([f"if {self.tensor_cond()}:", f'    raise {error}("negative")'])
        return self.pick(options)

    # -- statements: autograd and graph breaks --------------------------------------------------
    def s_no_grad(self) -> list[str] | None:
        header = self.pick(["with torch.no_grad():", "with torch.no_grad():",
                            f"with torch.set_grad_enabled({self.bool_expr()}):",
                            "with torch.enable_grad():", "with torch.inference_mode(False):"])
        saved = self.no_grad
        self.no_grad = header.endswith("no_grad():")
        try:
            body = self.block()
        finally:
            self.no_grad = saved
        return [header] + indent(body)

    def s_break(self) -> list[str] | None:
        kind = self.pick(("print", "print", "item", "tolist", "int"))
        if kind == "print":
            return [self.print_stmt()]
        if kind == "item":
            name = self.fresh("float")
            self.define(name, Ty("float"))
            return [f"{name} = {wrap(self.tensor('0d', 1))}.item()"]
        if kind == "int":
            name = self.fresh("int")
            self.define(name, Ty("int"))
            return [f"{name} = int(({wrap(self.tensor(self.new_shape(), 1))} > 0).sum())"]
        options = [s for s in ("M", "N", "NM") if self.can_make(s)]
        if not options:
            return None
        shape = self.pick(options)
        name = self.fresh("flist")
        self.define(name, Ty("flist"))
        lines = [f"{name} = {wrap(self.tensor(shape, 1))}.tolist()"]
        if shape != "NM":
            out = self.fresh("float")
            self.define(out, Ty("float"))
            lines.append(self.pick([f"{out} = sum({name})", f"{out} = max({name})",
                                    f"{out} = {name}[0] + len({name})",
                                    f"{out} = sum(round(v, 3) for v in {name})"]))
        return lines

    def print_stmt(self) -> str:
        pieces = []
        for _ in range(self.rng.randint(1, 3)):
            pieces.append(self.pick([
                lambda: f'"{self.pick(["step", "shape", "debug", "n ="])}"',
                lambda: self.int_expr(),
                lambda: f"{self.pick(self.vars_of('tensor'))}.shape",
                lambda: f"tuple({self.pick(self.vars_of('tensor'))}.size())",
                lambda: f"f'{{{wrap(self.tensor('0d', 1))}.item():.3f}}'",
                lambda: f"f'value={{{self.float_expr()}:.2f}}'",
                lambda: f"{self.pick(self.vars_of('tensor'))}.dtype",
                lambda: f"{self.bool_expr()}",
            ])())
        return f"print({', '.join(pieces)})"

    # -- the end -----------------------------------------------------------------------------
    def return_stmt(self) -> list[str]:
        tensors = self.vars_of("tensor")
        others = [n for n, t in self.scope.items()
                  if t.kind in ("int", "float", "bool", "tlist", "tdict", "num", "obj", "ilist",
                                "iset", "str", "flist", "mask")]
        recent = tensors[-3:]
        pick = self.rng.sample(recent, min(len(recent), self.rng.randint(1, 2)))
        if others and self.chance(0.6):
            pick.append(self.pick(others))
        if self.chance(0.08):
            return []
        form = self.rng.random()
        if len(pick) == 1 or form < 0.15:
            return [f"return {pick[0]}"]
        if form < 0.6:
            return [f"return {', '.join(pick)}"]
        if form < 0.8:
            return ["return {" + ", ".join(f'"{p}": {p}' for p in pick) + "}"]
        return [f"return [{', '.join(pick)}]"]


# Parameters: (name, probability, how to add it).
INPUTS = [
    ("y", 0.5, _Builder.input_y),
    ("bias", 0.25, _Builder.input_b),
    ("w", 0.2, _Builder.input_w),
    ("n", 0.5, _Builder.input_n),
    ("flag", 0.35, _Builder.input_flag),
    ("scale", 0.3, _Builder.input_scale),
    ("items", 0.4, _Builder.input_items),
    ("opts", 0.2, _Builder.input_opts),
    ("cfg", 0.2, _Builder.input_cfg),
    ("feats", 0.15, _Builder.input_feats),
]

# Statement kinds and how often each is drawn.
STATEMENTS = {
    "s_tensor": 14, "s_rebind": 6, "s_inplace": 5, "s_mask": 2, "s_shape": 3, "s_scalar": 4,
    "s_if": 5, "s_if_tensor": 3, "s_ternary": 1, "s_for_range": 4, "s_for_list": 3,
    "s_for_dict": 1, "s_while": 2, "s_list_new": 3, "s_list_mut": 4, "s_list_use": 2,
    "s_ints": 1, "s_dict_new": 2, "s_dict_mut": 3, "s_dict_use": 2, "s_opts": 1, "s_tuple": 2,
    "s_set": 1, "s_comprehension": 3, "s_closure": 3, "s_helper": 5, "s_object": 3,
    "s_config": 2, "s_global": 3, "s_try": 3, "s_no_grad": 2, "s_break": 3,
}
# Deep inside blocks: no more nesting.
LEAF_STATEMENTS = {k: v for k, v in STATEMENTS.items()
                   if k not in ("s_if", "s_if_tensor", "s_for_range", "s_for_list", "s_for_dict",
                                "s_while", "s_try", "s_no_grad", "s_config", "s_comprehension",
                                "s_closure")}

# Module-level helper kinds and how often each is drawn.
HELPERS = {"scaled": 5, "combine": 3, "branchy": 2, "varargs": 2, "check": 1, "stats": 2,
           "record": 1, "tick": 1, "gen": 3, "depth": 1}
