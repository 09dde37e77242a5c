"""Version 4 of the program generator: version 3's programs, and the constructs below.

- tensor subclasses with ``__torch_function__``: one that passes every op through, one that
  changes the result of ``add``, one that carries a Python attribute; made in the frame
  (``as_subclass``, ``torch.Tensor._make_subclass``) and passed in as arguments; results of
  subclass type are returned, so the harness compares their types;
- modes: a ``TorchFunctionMode`` and a ``TorchDispatchMode`` that log op names into a global
  list, and one of each that changes results, entered with ``with Mode():`` in the frame and
  by the caller around the call (``Program.ambient``, per variant: a call under a mode after
  calls without one must not reuse their compile);
- ``torch.autograd.Function`` (forward and a custom backward, with ``torch.autograd.grad``);
- a ``torch.compiler.nested_compile_region`` helper called more than once;
- NumPy interop (``t.numpy()``, NumPy functions, ``torch.from_numpy``);
- generators driven by ``close()``, ``throw()`` and ``send()`` (``GeneratorExit`` caught,
  a return value, ``finally``);
- ``torch.autocast`` on the CPU.

Names of new kinds (``sub``: a subclass tensor) are read only by the statements that know them,
so version 3's statements keep working on plain tensors. The global op log is emptied before
every call, so the first two calls still start from equal state (and the second must hit).
"""

from __future__ import annotations

from .generator import Program, Ty, _Param
from .generator_v2 import LEAF_STATEMENTS_V2, STATEMENTS_V2, BuilderV3
from .text import wrap

SUBCLASSES = ("PassT", "ScaledT", "TaggedT")
# Modes the frame or the caller enters: (class, what it does).
MODES = {
    "OpLog": "a TorchFunctionMode that logs each function's name",
    "AtenLog": "a TorchDispatchMode that logs each aten op's name",
    "BumpMul": "a TorchFunctionMode that adds 1 to the result of every mul",
    "DoubleAdd": "a TorchDispatchMode that doubles the output of aten.add.Tensor",
}


class BuilderV4(BuilderV3):
    VERSION = 4

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.ambient: list[str] = ["", "", "", "", ""]  # per variant (4: CHANGED)

    def statement_table(self) -> dict[str, int]:
        return STATEMENTS_V4 if self.depth < 3 else LEAF_STATEMENTS_V4

    def fresh(self, kind: str) -> str:
        if kind != "gen":
            return super().fresh(kind)
        name = next((n for n in ("gen", "it", "stream") if n not in self.used),
                    f"gen{len(self.used)}")
        self.used.add(name)
        return name

    # -- inputs, the calls and the modes around them -------------------------------------------
    def more_inputs(self) -> None:
        super().more_inputs()
        if self.chance(0.2):
            cls = self.pick(SUBCLASSES)
            self.define_subclasses()
            value = f"NM.as_subclass({cls})"
            if cls == "TaggedT" and self.chance(0.6):
                value = f"with_tag({value}, {self.rng.randint(2, 5)})"
            self.params.append(_Param("sx", Ty("sub", "NM", cls=cls), [value] * 4))
        if self.chance(0.3):
            self.plan_ambient()

    def plan_ambient(self) -> None:
        """A mode the caller enters around some calls: the first two calls alike (the second
        must hit), the call with the first arguments flipped (with and without the mode)."""
        mode = self.pick(MODES) + "()"
        self.define_modes()
        first = self.pick(("", mode))
        self.ambient = [first, first, self.pick(("", mode)), self.pick(("", mode)),
                        "" if first else mode]

    def variant_setup(self, variant: int) -> list[str]:
        clear = ["G_OPS.clear()"] if "G_OPS" in self.globals else []
        return clear + super().variant_setup(variant)

    def build(self) -> Program:
        program = super().build()
        if not any(self.ambient):
            return program
        return program.replace(ambient=tuple(self.ambient))

    def return_stmt(self) -> list[str]:
        lines = super().return_stmt()
        subs = self.vars_of("sub")
        if subs and self.chance(0.5):
            sub = self.pick(subs)
            return [lines[-1] + f", {sub}"] if lines else [f"return {sub}"]
        return lines

    # -- module-level definitions --------------------------------------------------------------
    def define_subclasses(self) -> None:
        if "PassT" in self.classes:
            return
        self.used |= {"PassT", "ScaledT", "TaggedT", "with_tag"}
        self.classes["PassT"] = [
            "class PassT(torch.Tensor):",
            "    @classmethod",
            "    def __torch_function__(cls, func, types, args=(), kwargs=None):",
            "        return super().__torch_function__(func, types, args, kwargs or {})",
            "",
            "",
            "class ScaledT(torch.Tensor):",
            "    @classmethod",
            "    def __torch_function__(cls, func, types, args=(), kwargs=None):",
            "        out = super().__torch_function__(func, types, args, kwargs or {})",
            "        if func in (torch.add, torch.Tensor.add, torch.Tensor.__add__,",
            "                    torch.Tensor.__radd__):",
            "            out = out * 2",
            "        return out",
            "",
            "",
            "class TaggedT(torch.Tensor):",
            "    tag = 1",
            "",
            "    def tagged(self):",
            "        return self * self.tag",
            "",
            "",
            "def with_tag(t, tag):",
            "    t.tag = tag",
            "    return t",
        ]

    def define_modes(self) -> None:
        if "OpLog" in self.classes:
            return
        self.imports |= {"from torch.overrides import TorchFunctionMode",
                         "from torch.utils._python_dispatch import TorchDispatchMode"}
        self.define_global("G_OPS", Ty("gslist"), "[]")
        self.used |= set(MODES)
        self.classes["OpLog"] = [
            "class OpLog(TorchFunctionMode):",
            "    def __torch_function__(self, func, types, args=(), kwargs=None):",
            '        G_OPS.append(getattr(func, "__name__", "?"))',
            "        return func(*args, **(kwargs or {}))",
            "",
            "",
            "class AtenLog(TorchDispatchMode):",
            "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):",
            "        G_OPS.append(func.overloadpacket.__name__)",
            "        return func(*args, **(kwargs or {}))",
            "",
            "",
            "class BumpMul(TorchFunctionMode):",
            "    def __torch_function__(self, func, types, args=(), kwargs=None):",
            "        out = func(*args, **(kwargs or {}))",
            "        if func in (torch.mul, torch.Tensor.mul, torch.Tensor.__mul__,",
            "                    torch.Tensor.__rmul__):",
            "            out = out + 1",
            "        return out",
            "",
            "",
            "class DoubleAdd(TorchDispatchMode):",
            "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):",
            "        out = func(*args, **(kwargs or {}))",
            "        if func is torch.ops.aten.add.Tensor:",
            "            out = out * 2",
            "        return out",
        ]

    def define_autograd_functions(self) -> None:
        if "Square" in self.classes:
            return
        self.used |= {"Square", "ClampGrad"}
        self.classes["Square"] = [
            "class Square(torch.autograd.Function):",
            "    @staticmethod",
            "    def forward(ctx, t):",
            "        ctx.save_for_backward(t)",
            "        return t * t",
            "",
            "    @staticmethod",
            "    def backward(ctx, grad):",
            "        (t,) = ctx.saved_tensors",
            "        return grad * 2 * t",
            "",
            "",
            "class ClampGrad(torch.autograd.Function):",
            "    @staticmethod",
            "    def forward(ctx, t, k):",
            "        ctx.k = k",
            "        return t.clamp(-k, k)",
            "",
            "    @staticmethod",
            "    def backward(ctx, grad):",
            "        return grad * ctx.k, None",
        ]

    def define_region(self) -> None:
        if "region_block" in self.classes:
            return
        self.used.add("region_block")
        self.classes["region_block"] = [
            "@torch.compiler.nested_compile_region",
            "def region_block(t, k):",
            "    return torch.tanh(t) * k + t",
        ]

    def define_generators(self) -> None:
        if "ticks" in self.classes:
            return
        self.used |= {"ticks", "absorb"}
        self.classes["ticks"] = [
            "def ticks(log, k):",
            "    try:",
            "        for i in range(3):",
            "            yield k * (i + 1)",
            "    except GeneratorExit:",
            '        log.append("exit")',
            "        return -1",
            "    finally:",
            '        log.append("finally")',
            "",
            "",
            "def absorb(log):",
            "    total = 0",
            "    while True:",
            "        try:",
            "            got = yield total",
            "        except ValueError as e:",
            "            log.append(str(e))",
            "            total -= 1",
            "        else:",
            "            total += got or 1",
        ]

    def sub_result(self, cls: str, value: str) -> str:
        """``name = value`` binding a fresh subclass tensor (shape NM) after the statement."""
        name = self.fresh("tensor")
        self.define(name, Ty("sub", "NM", cls=cls))
        return f"{name} = {value}"

    # -- statements: tensor subclasses ---------------------------------------------------------
    def s_subclass(self) -> list[str] | None:
        if not self.can_make("NM"):  # a helper's body may have no tensor of that shape
            return None
        self.define_subclasses()
        t = self.tensor("NM", 1)
        subs = self.vars_of("sub")
        if not subs or self.chance(0.35):
            cls = self.pick(SUBCLASSES)
            made = self.pick([f"{wrap(t)}.as_subclass({cls})",
                              f"torch.Tensor._make_subclass({cls}, {wrap(t)}.detach())"])
            name = self.fresh("tensor")
            self.define(name, Ty("sub", "NM", cls=cls))
            lines = [f"{name} = {made}"]
            if cls == "TaggedT" and self.chance(0.5):
                lines.append(f"{name}.tag = {self.int_expr()}")
            return lines
        s = self.pick(subs)
        cls = self.scope[s].cls
        options = [  # (the result's kind, its text)
            ("sub", f"{s} + {wrap(t)}"), ("sub", f"torch.add({s}, 1.0)"),
            ("sub", f"{s} * {self.float_expr()}"), ("sub", f"{s}.relu() + {s}"),
            ("sub", f"torch.tanh({s})"),
            ("tensor", f"{s}.as_subclass(torch.Tensor) * 2"),
            ("tensor", f"{wrap(t)} * ({s}.sum().item() > 0)"),
            ("tensor", f"{wrap(t)} + 1 if isinstance({s}, {cls}) else {wrap(t)}"),
            ("tensor", f'{wrap(t)} * len(type({s}).__name__)'),
        ]
        if cls == "TaggedT":
            options += [("tensor", f'{wrap(t)} * getattr({s}, "tag", 0)'),
                        ("sub", f"{s}.tagged()"), ("tensor", f"{wrap(t)} * {s}.tag")]
        kind, value = self.pick(options)
        if kind == "sub":
            return [self.sub_result(cls, value)]
        return [self.result("NM", value)]

    # -- statements: modes entered in the frame ------------------------------------------------
    def s_mode(self) -> list[str] | None:
        if self.loop_depth >= 2:
            return None
        self.define_modes()
        mode = self.pick(MODES)
        shape, t = self.a_tensor()
        out = self.fresh("tensor")
        body = self.pick([f"{out} = {wrap(t)} * 2 + 1", f"{out} = {wrap(t)} + {wrap(t)}",
                          f"{out} = torch.mul({wrap(t)}, {self.float_expr()}).sin()",
                          f"{out} = {self.tensor(shape, 2)}"])
        lines = [f"with {mode}():", "    " + body]
        if self.chance(0.3):
            lines.append("print(len(G_OPS), G_OPS[-3:])")
        self.define(out, Ty("tensor", shape))
        return lines

    # -- statements: torch.autograd.Function ---------------------------------------------------
    def s_autograd_fn(self) -> list[str] | None:
        self.define_autograd_functions()
        shape, t = self.a_tensor()
        if "x" in self.grad_leaves and "x" in self.scope and not self.no_grad and \
                self.chance(0.4):
            grad = self.pick(["Square.apply(x * 1.5).sum()",
                              f"ClampGrad.apply(x, {self.pick(('0.5', '1.0'))}).sum()"])
            return [self.result("NM", f"torch.autograd.grad({grad}, x)[0]")]
        return [self.result(shape, self.pick([
            f"Square.apply({t})", f"ClampGrad.apply({t}, {self.pick(('0.5', '2.0'))})",
            f"Square.apply({t}) + ClampGrad.apply({t}, 1.0)"]))]

    # -- statements: nested_compile_region -----------------------------------------------------
    def s_region(self) -> list[str] | None:
        self.define_region()
        shape, t = self.a_tensor()
        other = self.tensor(shape, 1)
        return [self.result(shape, self.pick([
            f"region_block({t}, {self.float_expr()})",
            f"region_block({t}, 0.5) + region_block({wrap(other)}, 0.5)",
            f"region_block(region_block({t}, 2.0), 1.0)"]))]

    # -- statements: NumPy interop -------------------------------------------------------------
    def s_numpy(self) -> list[str] | None:
        self.imports.add("import numpy as np")
        shape, t = self.a_tensor(("NM", "M", "N", "MM"))  # a 0-d array gives NumPy scalars
        if shape == "0d":
            return None
        arr = f"{wrap(t)}.detach().numpy()"
        return [self.result(shape, self.pick([
            f"torch.from_numpy(np.tanh({arr}) * 2)",
            f"{wrap(t)} * float(np.sum({arr}))",
            f"torch.as_tensor(np.clip({arr}, -0.5, 0.5))",
            f"{wrap(t)} + float(np.abs({arr}).max())",
            f"torch.from_numpy(np.where({arr} > 0, {arr}, 0.0))"]))]

    # -- statements: generators driven by close, throw and send --------------------------------
    def s_gen_drive(self) -> list[str] | None:
        if self.loop_depth >= 2:
            return None
        self.define_generators()
        shape, t = self.a_tensor()
        log, g = self.fresh("log"), self.fresh("gen")
        r = self.fresh("float")
        lines = [f"{log} = []"]
        kind = self.pick(("close", "close_after", "throw", "throw_escapes", "send"))
        if kind == "close":
            lines += [f"{g} = ticks({log}, {self.float_expr()})", f"{r} = next({g})",
                      f"print({g}.close(), {log})"]
        elif kind == "close_after":
            lines += [f"{g} = ticks({log}, 2.0)", f"{r} = sum({g})", f"print({g}.close(), {log})"]
        elif kind == "throw":
            lines += [f"{g} = absorb({log})", f"next({g})", f"{g}.send({self.int_expr()})",
                      f'{r} = {g}.throw(ValueError("bad"))', f"print({r}, {log})"]
        elif kind == "throw_escapes":
            lines += [f"{g} = ticks({log}, 1.0)", f"{r} = next({g})", "try:",
                      f'    {g}.throw(KeyError("k"))', "except KeyError as e:",
                      f"    print(repr(e), {log})"]
        else:
            lines += [f"{g} = absorb({log})", f"next({g})",
                      f"{r} = {g}.send(3) + {g}.send(None)", f"{g}.close()"]
        return lines + [self.result(shape, f"{wrap(t)} * {r}")]

    # -- statements: autocast ------------------------------------------------------------------
    def s_autocast(self) -> list[str] | None:
        if self.loop_depth >= 2:
            return None
        shape, t = self.a_tensor(("NM", "MM"))
        if shape not in ("NM", "MM") or not self.can_make("MM"):
            return None
        out = self.fresh("tensor")
        w = self.tensor("MM", 1)
        enabled = self.pick(("True", "True", "False"))
        lines = [f'with torch.autocast("cpu", dtype=torch.bfloat16, enabled={enabled}):',
                 f"    {out} = ({wrap(t)} @ {wrap(w)}).float()"]
        self.define(out, Ty("tensor", shape))
        return lines


STATEMENTS_V4 = {
    **STATEMENTS_V2,
    "s_subclass": 4, "s_mode": 2, "s_autograd_fn": 2, "s_region": 1, "s_numpy": 2,
    "s_gen_drive": 2, "s_autocast": 1,
}
# Deep inside blocks: no more nesting.
LEAF_STATEMENTS_V4 = {**LEAF_STATEMENTS_V2, "s_subclass": 4, "s_autograd_fn": 2, "s_region": 1,
                      "s_numpy": 2}
