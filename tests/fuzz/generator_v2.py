"""Version 2 of the program generator: version 1's programs, and the constructs below.

Each construct is a statement kind (``s_*``) added to version 1's table, so a version-2
program mixes them with everything version 1 writes. The typed scope keeps the programs valid:
names of new kinds (``knob``, ``module``) are read only by the statements that know them, and a
construct that needs a class, a hook or a global defines it at module level on first use.

Some constructs change the program's state *between calls* (``variant_setup``): a class
attribute, a metaclass setting or a global list is set anew before the third and the fourth
call, so what the first compile folded must be guarded. The first two calls change nothing, so
the second call must be a cache hit (the runner checks it).
"""

from __future__ import annotations

from .generator import STATEMENTS, Program, Ty, _Builder, _Param
from .text import indent, wrap

# Names of the kinds version 2 adds, in the order a user would reach for them.
NAMES_V2 = {
    "knob": ("knob", "cfg_obj", "tuner"),
    "module": ("mod", "block", "net"),
    "cnt": ("calls_n", "counter", "ticks", "hits"),
    "table": ("table", "lookup", "slots"),
    "rec": ("span", "point", "acc", "record"),
    "log": ("events", "trace_log", "journal"),
    "fnv": ("clip_fn", "add_fn", "act2"),
    "err": ("err", "exc", "failure"),
}

TENSOR_ATTRS = ("scale_hint", "step_no", "tag_w", "meta_k")
MODULE_CLASSES = ("Block", "Hooked", "Wrapped")
BUFFER = {"Block": "seen", "Hooked": "seen", "Wrapped": "inner.seen"}
SCALE = {"Block": "scale", "Hooked": "scale", "Wrapped": "inner.scale"}


class BuilderV2(_Builder):
    VERSION = 2

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.setup: dict[int, list[str]] = {2: [], 3: []}
        self.setup_done: set[str] = set()  # the constructs whose between-call changes are drawn

    def statement_table(self) -> dict[str, int]:
        return STATEMENTS_V2 if self.depth < 3 else LEAF_STATEMENTS_V2

    def fresh(self, kind: str) -> str:
        if kind not in NAMES_V2:
            return super().fresh(kind)
        for name in NAMES_V2[kind]:
            if name not in self.used:
                self.used.add(name)
                return name
        name = f"{NAMES_V2[kind][0]}{len(self.used)}"
        self.used.add(name)
        return name

    # -- inputs and the calls ------------------------------------------------------------------
    def more_inputs(self) -> None:
        if self.chance(0.25):
            cls = self.pick(MODULE_CLASSES)
            self.define_module_class(cls)
            self.params.append(_Param("mod", Ty("module", cls=cls), [f"{cls}(@M)"] * 4))
        if self.chance(0.25):
            cls = self.pick(("Knob", "Fine"))
            self.define_knob()
            values = [f"{cls}(bias={b})" for b in self.vary(("0.0", "0.5", "-1.0"))]
            self.params.append(_Param("knob", Ty("knob", cls=cls), values,
                                      keyword=self.chance(0.3)))

    def variant_value(self, text: str, n: int, m: int) -> str:
        return text.replace("@M", str(m))

    def variant_setup(self, variant: int) -> list[str]:
        return list(self.setup.get(variant, []))

    def change_between_calls(self, what: str, options: list[str]) -> None:
        """Draw, once per construct, a change of the program's state before calls 3 and 4."""
        if what in self.setup_done:
            return
        self.setup_done.add(what)
        for variant in (2, 3):
            if self.chance(0.7):
                self.setup[variant].append(self.pick(options))

    # -- module-level definitions --------------------------------------------------------------
    def define_knob(self) -> None:
        if "Knob" in self.classes:
            return
        self.classes["Knob"] = [
            "class Knob:",
            "    scale = 2.0",
            "    steps = 1",
            "",
            "    def __init__(self, bias=0.0):",
            "        self.bias = bias",
            "",
            "    def scaled(self, t):",
            "        return t * type(self).scale + self.bias",
            "",
            "    @classmethod",
            "    def factor(cls):",
            "        return cls.scale * 2",
            "",
            "    def __len__(self):",
            "        return Knob.steps + 1",
            "",
            "",
            "class Fine(Knob):",
            "    scale = 0.5",
            "",
            "    def scaled(self, t):",
            "        return super().scaled(t) + super().scale",
            "",
            "    def parent_scale(self):",
            "        return super().scale",
        ]
        self.used |= {"Knob", "Fine"}
        self.change_between_calls("knob", [
            "Knob.scale = 3.0", "Knob.scale = 0.25", "Fine.scale = 1.5", "Knob.flag = 4",
            "Fine.flag = 2", "Knob.steps = 3", "Knob.__len__ = lambda self: 4",
            "Knob.scaled = lambda self, t: t - self.bias",
            'if "scale" in vars(Fine):\n    del Fine.scale'])

    def define_meta(self) -> None:
        if "Meta" in self.classes:
            return
        self.classes["Meta"] = [
            "class Meta(type):",
            "    wanted = 2",
            '    names = ("Tensor",)',
            "",
            "    def __instancecheck__(cls, obj):",
            '        return getattr(obj, "ndim", -1) == Meta.wanted',
            "",
            "    def __subclasscheck__(cls, sub):",
            "        return sub.__name__ in Meta.names",
            "",
            "",
            "class Matrixlike(metaclass=Meta):",
            "    pass",
        ]
        self.used |= {"Meta", "Matrixlike"}
        self.change_between_calls("meta", ["Meta.wanted = 1", "Meta.wanted = 2",
                                           'Meta.names = ("list",)', "Meta.wanted = 0"])

    def define_module_class(self, cls: str) -> None:
        if cls in self.classes:
            return
        if cls == "Wrapped":
            self.define_module_class("Block")
        self.imports.add("import torch.nn as nn")
        self.used.add(cls)
        self.classes[cls] = {
            "Block": [
                "class Block(nn.Module):",
                "    def __init__(self, m):",
                "        super().__init__()",
                "        self.lin = nn.Linear(m, m)",
                '        self.register_buffer("seen", torch.zeros(m))',
                "        self.calls = 0",
                "        self.scale = 1.0",
                "",
                "    def forward(self, t):",
                "        self.calls += 1",
                "        self.seen.add_(t.detach().reshape(-1, t.shape[-1]).mean(0))",
                "        return self.lin(t) * self.scale"],
            "Hooked": [
                "def halve_input(module, args):",
                "    return (args[0] * 0.5,)",
                "",
                "",
                "def count_output(module, args, out):",
                "    module.hooked += 1",
                "    return out + 1",
                "",
                "",
                "class Hooked(nn.Module):",
                "    def __init__(self, m):",
                "        super().__init__()",
                "        self.lin = nn.Linear(m, m, bias=False)",
                '        self.register_buffer("seen", torch.zeros(m))',
                "        self.calls = 0",
                "        self.hooked = 0",
                "        self.scale = 1.0",
                "        self.register_forward_pre_hook(halve_input)",
                "        self.register_forward_hook(count_output)",
                "",
                "    def forward(self, t):",
                "        self.calls += 1",
                "        self.seen.copy_(t.detach().reshape(-1, t.shape[-1])[0])",
                "        return torch.tanh(self.lin(t)) * self.scale"],
            "Wrapped": [
                "class Wrapped(nn.Module):",
                "    def __init__(self, m):",
                "        super().__init__()",
                "        self.inner = Block(m)",
                "        self.calls = 0",
                "",
                "    def __call__(self, t):",
                "        self.calls += 1",
                "        return super().__call__(t) * 0.5",
                "",
                "    def forward(self, t):",
                "        self.inner.calls += 1",
                "        return self.inner(t) + t"],
        }[cls]

    def define_scope_manager(self) -> None:
        if "Scope" in self.classes:
            return
        self.imports.add("import contextlib")
        self.used |= {"Scope", "scaled_by"}
        self.classes["Scope"] = [
            "class Scope:",
            "    depth = 0",
            "",
            "    def __init__(self, log, swallow=False):",
            "        self.log = log",
            "        self.swallow = swallow",
            "",
            "    def __enter__(self):",
            "        Scope.depth += 1",
            '        self.log.append("enter")',
            "        return self",
            "",
            "    def __exit__(self, kind, value, tb):",
            "        Scope.depth -= 1",
            '        self.log.append(kind.__name__ if kind else "exit")',
            "        return self.swallow",
            "",
            "",
            "@contextlib.contextmanager",
            "def scaled_by(k, log):",
            '    log.append("open")',
            "    try:",
            "        yield k * 2",
            "    finally:",
            '        log.append("close")',
        ]

    def define_records(self) -> None:
        if "Span" in self.classes:
            return
        self.imports |= {"import dataclasses", "from typing import NamedTuple"}
        self.used |= {"Span", "Acc", "Point"}
        self.classes["Span"] = [
            "@dataclasses.dataclass(frozen=True)",
            "class Span:",
            "    lo: float",
            "    hi: float = 1.0",
            "",
            "    def width(self):",
            "        return self.hi - self.lo",
            "",
            "",
            "@dataclasses.dataclass",
            "class Acc:",
            "    total: torch.Tensor",
            "    seen: list = dataclasses.field(default_factory=list)",
            "",
            "    def __post_init__(self):",
            "        self.seen.append(len(self.seen))",
            "",
            "",
            "class Point(NamedTuple):",
            "    t: torch.Tensor",
            "    w: float = 1.0",
            "",
            "    def weighted(self):",
            "        return self.t * self.w",
        ]

    def a_tensor(self, shapes: tuple[str, ...] = ("NM", "M", "N", "0d", "MM")) -> tuple[str, str]:
        """A shape that can be made here and an expression of it."""
        options = [s for s in shapes if self.can_make(s)]
        shape = self.pick(options) if options else self.new_shape()
        return shape, self.tensor(shape, 1)

    def result(self, shape: str, value: str) -> str:
        """``name = value`` binding a fresh tensor of ``shape`` after the statement."""
        name = self.fresh("tensor")
        self.define(name, Ty("tensor", shape))
        return f"{name} = {value}"

    # -- statements: Python attributes on tensors ----------------------------------------------
    def s_tensor_attr(self) -> list[str] | None:
        names = [n for n in self.vars_of("tensor")]
        if not names:
            return None
        target = self.pick(names)
        attr = self.pick(TENSOR_ATTRS)
        shape, t = self.a_tensor()
        value = self.pick([self.float_expr(), self.int_expr()])
        kind = self.pick(("set_read", "set_read", "count", "default", "has"))
        if kind == "set_read":
            return [f"{target}.{attr} = {value}",
                    self.result(shape, f"{wrap(t)} * {target}.{attr}")]
        if kind == "count":
            return [f'{target}.{attr} = getattr({target}, "{attr}", 0) + 1',
                    self.result(shape, f"{wrap(t)} + {target}.{attr}")]
        if kind == "default":
            return [self.result(shape, f'{wrap(t)} * getattr({target}, "{attr}", {value})')]
        return [f'if hasattr({target}, "{attr}"):', f"    {target}.{attr} += 1", "else:",
                f"    {target}.{attr} = {value}"]

    # -- statements: class attributes, type(obj), super() and metaclasses ----------------------
    def s_class_attr(self) -> list[str] | None:
        self.define_knob()
        knobs = self.vars_of("knob")
        k = self.pick(knobs) if knobs else None
        shape, t = self.a_tensor()
        t = wrap(t)
        options = [f"{t} * Knob.scale", f"{t} * Fine.factor()", f"{t} * len(Knob())",
                   f'{t} * getattr(Knob, "flag", 1)', f"{t} * len(Fine(1.0))",
                   f'{t} * 2 if hasattr(Fine, "flag") else {t}', f"Fine().scaled({t})",
                   f"{t} * super(Fine, Fine()).scale"]
        if k:
            cls = self.scope[k].cls
            options += [f"{t} * type({k}).scale", f"{k}.scaled({t})", f"{t} * {k}.factor()",
                        f'{t} * getattr(type({k}), "flag", 1)', f"{t} * len({k})",
                        f"{t} * {k}.scale + {k}.bias"]
            if cls == "Fine":
                options += [f"{t} * {k}.parent_scale()", f"{t} * super(Fine, {k}).scale"]
        lines = []
        if self.chance(0.2) and not self.in_def:
            lines.append(self.pick(["Knob.steps += 1", "Fine.scale = Fine.scale * 2"]))
        if k and self.chance(0.2):
            lines.append(f"{k}.scale = {self.float_expr()}")
        return lines + [self.result(shape, self.pick(options))]

    def s_metaclass(self) -> list[str] | None:
        self.define_meta()
        names = self.vars_of("tensor")
        if not names:
            return None
        v = self.pick(names)
        shape, t = self.a_tensor()
        other = self.tensor(shape, 1)
        test = self.pick([f"isinstance({v}, Matrixlike)", f"issubclass(type({v}), Matrixlike)",
                          f"isinstance({v}, (Matrixlike, int))",
                          f"isinstance([{v}], Matrixlike)"])
        if self.chance(0.5):
            return [self.result(shape, f"{wrap(t)} if {test} else {wrap(other)}")]
        return [f"if {test}:"] + indent(self.block(1)) + ["else:"] + indent(self.block(1))

    # -- statements: closures writing nonlocals through inlined helpers ------------------------
    def s_nonlocal_helpers(self) -> list[str] | None:
        if self.depth or self.in_def:
            return None
        cnt = self.fresh("cnt")
        bump, peek = f"bump_{cnt}", f"peek_{cnt}"
        self.used |= {bump, peek}
        shape, t = self.a_tensor()
        lines = [f"{cnt} = {self.int_expr()}",
                 f"def {bump}(by=1):", f"    nonlocal {cnt}", f"    {cnt} = {cnt} + by",
                 f"    return {cnt}",
                 f"def {peek}():", f"    return {cnt}"]
        uses = [f"{wrap(t)} * ({bump}() + {bump}(2))", f"{wrap(t)} * {peek}()",
                f"{wrap(t)} * {bump}() - {peek}()", f"{wrap(t)} + {cnt}"]
        lines.append(self.result(shape, self.pick(uses)))
        if self.chance(0.5):
            lines.append(f"{cnt} = {self.rng.randint(0, 5)}")
            lines.append(self.result(shape, self.pick(uses[1:])))
        self.define(cnt, Ty("int"))
        return lines

    # -- statements: containers mutated in the frame, read at a graph break --------------------
    def s_container_break(self) -> list[str] | None:
        if self.in_def:
            return None
        shape, t = self.a_tensor()
        if self.chance(0.5):
            self.define_global("G_ORDER", Ty("gilist"), "[1, 2]")
            self.change_between_calls("order", ["G_ORDER[:] = [5, 6]", "G_ORDER[:] = [3, 4, 2]",
                                                "G_ORDER[:] = [-1, 7]"])
            lst, lines = "G_ORDER", []
        else:
            if self.depth:
                return None
            lst = self.fresh("ilist")
            lines = [f"{lst} = [{self.int_expr()}, {self.int_expr()}, {self.rng.randint(1, 4)}]"]
            self.define(lst, Ty("ilist"))
        mutate = self.pick([f"{lst}.reverse()", f"{lst}.sort(reverse=True)",
                            f"{lst}.insert(0, {lst}.pop())", f"{lst}.append({lst}[0] + 1)",
                            f"{lst}[0], {lst}[-1] = {lst}[-1], {lst}[0]",
                            f"{lst}[:] = {lst}[::-1]"])
        if self.chance(0.5):
            lines += [f"if {self.bool_expr()}:", f"    {mutate}"]
        else:
            lines.append(mutate)
        lines.append(self.pick([f"print({lst}, next(e for e in {lst} if e > 0))",
                                f"print({lst}[0], len({lst}))",
                                f"print(sum({lst}), {wrap(self.tensor('0d', 1))}.item() > 0)"]))
        lines.append(self.result(shape, f"{wrap(t)} * {lst}[{self.pick(('0', '-1', '1'))}]"))
        return lines

    # -- statements: dicts and sets iterated while they change ---------------------------------
    def s_iter_mutation(self) -> list[str] | None:
        if self.loop_depth >= 2:
            return None
        shape, t = self.a_tensor()
        table = self.fresh("table")
        k = self.fresh("key")
        a, b = self.tensor(shape, 1), self.tensor(shape, 1)
        make = f'{table} = {{"a": {a}, "b": {b}}}'
        loops = [  # (header, body); the comment says what CPython does
            (f"for {k} in {table}:", [f'del {table}["a"]', f'{table}["a"] = {wrap(t)} * 2']),
            (f"for {k} in {table}.values():", [f'{table}.pop("b")', f'{table}["b"] = {k}']),
            (f"for {k} in {table}.items():", [f'{table}["c{{}}".format(len({table}))] = {t}']),
            (f"for {k} in {table}:", [f"{table}[{k}] = {table}[{k}] + 1"]),  # allowed
            (f"for {k} in list({table}):", [f'if {k} == "a":', f"    del {table}[{k}]"]),
            (f"for {k} in sorted({table}, key=len):", [f'{table}[{k} + "2"] = {t}']),
        ]
        header, body = self.pick(loops)
        lines = [make]
        if self.chance(0.3):
            seen = self.fresh("iset")
            lines += [f"{seen} = {{0, 1}}"]
            header, body = self.pick([(f"for {k} in {seen}:", [f"{seen}.add({k} + 2)"]),
                                      (f"for {k} in list({seen}):", [f"{seen}.discard({k})"]),
                                      (f"for {k} in {seen}:", [f"{seen}.discard({k})",
                                                               f"{seen}.add({k} + 5)"])])
        loop = [header] + indent(body)
        if self.chance(0.7):
            err = self.fresh("err")
            lines += ["try:"] + indent(loop) + [f"except RuntimeError as {err}:",
                                                f'    print("caught:", {err})']
        else:
            lines += loop
        return lines + [self.result(shape, f"{wrap(t)} + len({table})")]

    # -- statements: exception chaining ---------------------------------------------------------
    def s_chain(self) -> list[str] | None:
        shape, t = self.a_tensor()
        out = self.fresh("tensor")
        inner, kind = self.pick([('raise KeyError("inner")', "KeyError"),
                                 (f'{out} = {{"a": {t}}}["missing"]', "KeyError"),
                                 (f"{out} = [{t}][{self.rng.randint(3, 9)}]", "IndexError"),
                                 ('int("not a number")', "ValueError")])
        err, outer = self.fresh("err"), self.fresh("err")
        rethrow = self.pick([f'raise RuntimeError("wrapped") from {err}',
                             'raise RuntimeError("wrapped") from None',
                             'raise RuntimeError("wrapped")', "raise",
                             "raise IndexError from KeyError", 'raise IndexError("bad") from 5',
                             f"raise {err}", f"raise {err}.with_traceback(None)"])
        chained = ["try:", "    " + inner, f"except {kind} as {err}:", "    " + rethrow]
        self.define(out, Ty("tensor", shape))
        if self.chance(0.1) and not self.depth and not self.in_def:
            return [f"{out} = {t}"] + chained  # escapes: the caller sees the chain
        show = self.pick([
            f"print(type({outer}).__name__, type({outer}.__cause__).__name__, "
            f"type({outer}.__context__).__name__, {outer}.__suppress_context__)",
            f"print(repr({outer}), repr({outer}.__cause__))",
            f"print({outer}.args, {outer}.__context__ is not None)"])
        return [f"{out} = {t}", "try:"] + indent(chained) + [
            f"except (RuntimeError, IndexError, TypeError, {kind}) as {outer}:",
            "    " + show, f"    {out} = {wrap(self.tensor(shape, 1))} * 2"]

    # -- statements: modules with hooks, buffers and their own __call__ ------------------------
    def s_module(self) -> list[str] | None:
        mods = self.vars_of("module")
        if not mods:
            return None
        mod = self.pick(mods)
        cls = self.scope[mod].cls
        shapes = [s for s in ("NM", "M") if self.can_make(s)]
        if not shapes:
            return None
        shape = self.pick(shapes)
        t = self.tensor(shape, 1)
        buf, scale = f"{mod}.{BUFFER[cls]}", f"{mod}.{SCALE[cls]}"
        options = [lambda: [self.result(shape, f"{mod}({t})")],
                   lambda: [self.result(shape, f"{mod}({t}) + {mod}({self.tensor(shape, 1)})")],
                   lambda: [f"{mod}.calls += 1", self.result(shape, f"{wrap(t)} * {mod}.calls")],
                   lambda: [f"{buf}.mul_({self.float_expr()})",
                            self.result(shape, f"{wrap(t)} + {buf}")],
                   lambda: [f"{scale} = {self.float_expr()}", self.result(shape, f"{mod}({t})")],
                   lambda: [self.result(shape, f"{wrap(t)} * sum(p.sum() for p in "
                                                   f"{mod}.parameters())")],
                   lambda: ["with torch.no_grad():", "    " + self.result(shape, f"{mod}({t})")]]
        if cls == "Wrapped":
            sub = self.fresh("module")
            options += [lambda: [f"{mod}.inner.calls = {self.rng.randint(2, 9)}",
                         self.result(shape, f"{wrap(t)} * {mod}.inner.calls")],
                        lambda: [f"{sub} = {mod}.inner", f"{sub}.k = {self.rng.randint(1, 5)}",
                         self.result(shape, f"{wrap(t)} * {mod}.inner.k")],
                        lambda: [f'setattr({mod}.inner, "calls", {mod}.inner.calls + 1)',
                         self.result(shape, f"{mod}.inner({t}) * {mod}.inner.calls")]]
        if cls == "Hooked":
            options.append(lambda: [self.result(shape, f"{mod}({t}) * {mod}.hooked")])
        return self.pick(options)()

    # -- statements: dataclasses and NamedTuples -----------------------------------------------
    def s_records(self) -> list[str] | None:
        self.define_records()
        shape, t = self.a_tensor()
        rec = self.fresh("rec")
        f1, f2 = self.float_expr(), self.float_expr()
        kind = self.pick(("span", "acc", "point"))
        if kind == "span":
            other = self.fresh("rec")
            return self.pick([
                lambda: [f"{rec} = Span({f1}, hi={f2})",
                         self.result(shape, f"{wrap(t)} * {rec}.width()")],
                lambda: [f"{rec} = dataclasses.replace(Span({f1}), hi={f2})",
                 self.result(shape, f"{wrap(t)} * sum(dataclasses.astuple({rec}))")],
                lambda: [f"{rec} = Span({f1})", f"{other} = Span({f1}, 1.0)",
                 self.result(shape, f"{wrap(t)} if {rec} == {other} else -{wrap(t)}")],
                lambda: [f"{rec} = Span({f1})", "try:", f"    {rec}.lo = {f2}",
                 "except dataclasses.FrozenInstanceError as e:", "    print(type(e).__name__)",
                 self.result(shape, f"{wrap(t)} * {rec}.lo")]])()
        if kind == "acc":
            return self.pick([
                lambda: [f"{rec} = Acc({wrap(t)}.clone())", f"{rec}.seen.append({self.int_expr()})",
                 self.result(shape, f"{rec}.total * len({rec}.seen)")],
                lambda: [f"{rec} = Acc({t})",
                         self.result(shape, f"{rec}.total + len(dataclasses.fields({rec}))")],
                lambda: [f"{rec} = Acc({t}, [1, 2])",
                 self.result(shape, f'{rec}.total * sum(dataclasses.asdict({rec})["seen"])')]])()
        return self.pick([
            lambda: [f"{rec} = Point({t}, {f1})", self.result(shape, f"{rec}.weighted()")],
            lambda: [f"{rec} = Point({t})._replace(w={f1})",
             self.result(shape, f'{rec}.weighted() * {rec}._asdict()["w"]')],
            lambda: [self.result(shape, f"Point._make([{t}, {f1}]).weighted()")],
            lambda: [f"{rec} = Point({t}, w={f1})",
                     f"{self.fresh('tensor')}, {self.fresh('float')} = {rec}",
                     self.result(shape, f"{rec}.t * {rec}[1]")]])()

    # -- statements: functools, sorted(key=), itertools ----------------------------------------
    def s_functional(self) -> list[str] | None:
        shape, t = self.a_tensor()
        fn = self.fresh("fnv")
        lists = [n for n in self.vars_of("tlist", shape) if self.scope[n].size >= 1]
        ilists = self.vars_of("ilist")
        kind = self.pick(("partial", "sorted", "itertools", "itertools", "reduce"))
        if kind == "partial":
            self.imports.add("import functools")
            made = self.pick([f"functools.partial(torch.clamp, min={self.float_expr()})",
                              f"functools.partial(torch.add, alpha={self.float_expr()})",
                              "functools.partial(F.leaky_relu, negative_slope=0.2)",
                              f"functools.partial(torch.mul, other={self.float_expr()})"])
            call = f"{fn}({t}, {self.tensor(shape, 1)})" if "torch.add" in made else f"{fn}({t})"
            return [f"{fn} = {made}", self.result(shape, call)]
        if kind == "reduce":
            self.imports.add("import functools")
            if lists:
                return [self.result(shape, f"functools.reduce(lambda a, b: a + b * 0.5, "
                                           f"{self.pick(lists)})")]
            return [self.result(shape, f"functools.reduce(lambda a, b: a * b, "
                                       f"[{t}, {self.tensor(shape, 1)}], 1.0)")]
        if kind == "sorted":
            key = self.pick(["lambda v: v.sum().item()", "lambda v: v.shape[0]",
                             "lambda v: -float(v.abs().max())"])
            if lists:
                lst = self.pick(lists)
                return [self.result(shape, self.pick([f"sorted({lst}, key={key})[0]",
                                                      f"max({lst}, key={key})",
                                                      f"min({lst}, key={key}, default={t})"]))]
            if ilists:
                return [self.result(shape, f"{wrap(t)} * sorted({self.pick(ilists)} + [1], "
                                           f"key=lambda v: -v)[0]")]
            return [self.result(shape, f"{wrap(t)} * min(range(4), key=lambda i: (i - 2) ** 2)")]
        self.imports.add("import itertools")
        if lists:
            lst = self.pick(lists)
            return [self.result(shape, self.pick([
                f"list(itertools.accumulate({lst}))[-1]",
                f"sum(itertools.chain({lst}, [{t}]))",
                f"list(itertools.islice({lst}, 1))[0]",
                f"sum(a * b for a, b in itertools.pairwise({lst} + [{t}]))",
                f"sum(itertools.starmap(torch.mul, zip({lst}, itertools.repeat({t}))))",
                f"sum(itertools.chain.from_iterable([{lst}, {lst}]))"]))]
        return [self.result(shape, self.pick([
            f"{wrap(t)} * sum(i * j for i, j in itertools.product(range(2), range(3)))",
            f"{wrap(t)} * len(list(itertools.combinations(range(4), 2)))",
            f"sum(v * i for i, v in zip(itertools.count(1), [{t}, {t}]))",
            f"{wrap(t)} * sum(1 for _ in itertools.zip_longest([1], [2, 3]))"]))]

    # -- statements: custom context managers ---------------------------------------------------
    def s_with_custom(self) -> list[str] | None:
        if self.loop_depth >= 2 or self.depth >= 2:
            return None
        self.define_scope_manager()
        shape, t = self.a_tensor()
        log = self.fresh("log")
        out = self.fresh("tensor")
        lines = [f"{log} = []", f"{out} = {t}"]
        kind = self.pick(("scope", "scope", "suppress", "generator", "exitstack"))
        if kind == "scope":
            swallow = self.pick(("True", "False", self.bool_expr()))
            body = self.block(1)
            lines.append(f"with Scope({log}, swallow={swallow}) as sc:")
            lines += indent(body)
            if swallow == "True" and self.chance(0.5):
                lines += indent([f"if {self.bool_expr()}:", '    raise ValueError("stop")'])
            lines += indent([f"{out} = {wrap(self.tensor(shape, 1))} * (Scope.depth + 1)"])
        elif kind == "suppress":
            bad = self.pick([f"{wrap(t)}.view(4, -1)", f"{wrap(t)}.view(-1, 7)",
                             f"{wrap(t)}.reshape(3, -1)", f"{wrap(t)}[{self.rng.randint(2, 6)}]"])
            lines += ["with contextlib.suppress(RuntimeError, IndexError):",
                      f"    {out} = {bad}.sum() + {out}"]
        elif kind == "generator":
            k = self.fresh("float")
            lines += [f"with scaled_by({self.float_expr()}, {log}) as {k}:",
                      f"    {out} = {wrap(t)} * {k}"]
        else:
            lines += ["with contextlib.ExitStack() as stack:",
                      f"    stack.enter_context(Scope({log}))",
                      f'    stack.callback({log}.append, "callback")',
                      f"    {out} = {wrap(t)} * len({log})"]
        lines.append(f"print({log}, Scope.depth)")
        self.define(out, Ty("tensor", shape))
        return lines


STATEMENTS_V2 = {
    **STATEMENTS,
    "s_tensor_attr": 3, "s_class_attr": 3, "s_metaclass": 2, "s_nonlocal_helpers": 2,
    "s_container_break": 2, "s_iter_mutation": 2, "s_chain": 3, "s_module": 4, "s_records": 2,
    "s_functional": 3, "s_with_custom": 2,
}
# Deep inside blocks: no more nesting.
LEAF_STATEMENTS_V2 = {k: v for k, v in STATEMENTS_V2.items()
                      if k not in ("s_if", "s_if_tensor", "s_for_range", "s_for_list",
                                   "s_for_dict", "s_while", "s_try", "s_no_grad", "s_config",
                                   "s_comprehension", "s_closure", "s_metaclass",
                                   "s_iter_mutation", "s_chain", "s_with_custom")}


class BuilderV3(BuilderV2):
    """Version 3: version 2, and a third call that repeats the first call's arguments after a
    change of state (a class attribute, a metaclass setting, a global list).

    In version 2 the state changed only before calls with new sizes, which recompile anyway,
    so a guard missing on the changed state went unseen. Here the calls are the first
    arguments twice, the same arguments after the change (what the first compile folded must
    now fail a guard), then the other sizes."""

    VERSION = 3
    CHANGED = 4  # the variant with the first call's arguments after a change of state

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.setup[self.CHANGED] = []

    def change_between_calls(self, what: str, options: list[str]) -> None:
        if what not in self.setup_done:
            self.setup[self.CHANGED].append(self.pick(options))
        super().change_between_calls(what, options)

    def variant_texts(self) -> list[str]:
        texts = super().variant_texts()
        return texts + ["\n".join(self.setup[self.CHANGED] + [texts[0]])]

    def build(self) -> Program:
        return super().build().replace(calls=(0, 0, self.CHANGED, 1, 2, 3))
