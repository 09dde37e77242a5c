"""Version 5 of the program generator: version 4's programs, and the constructs below.

- custom operators (``torch.library.custom_op``) defined at the program's module level, with a
  fake kernel; one with ``register_autograd``, one with ``mutates_args``; called as the
  decorated function, through the namespace's packet and its ``.default`` overload, and
  differentiated with ``torch.autograd.grad``;
- ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``, ``nn.LSTM`` and ``nn.GRU`` (tiny,
  ``batch_first``, in training or eval mode) passed in, called with and without attention and
  key padding masks, on unbatched and batched inputs;
- higher-order operators: ``torch.cond`` (a tensor predicate, a Python one, a size
  comparison; lambdas and nested functions closing over the frame's tensors), ``while_loop``
  (counted and data-dependent), ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``;
- NumPy: ``np.sum`` / ``np.mean`` / ``np.cumsum`` / ``@`` of float32 arrays made from tensors
  and of an ndarray argument;
- ``torch._check`` and ``torch._check_is_size`` (some of them fail), size marks put on the
  first argument by the caller (``maybe_mark_dynamic``, ``mark_static``);
- helpers decorated with ``allow_in_graph`` and ``disable`` (torch's and graphlift's).

Operator names are process-wide and the runner loads each program more than once (eagerly,
compiled, while minimizing), so the program's operators live in a namespace of the seed that
no earlier load used (``ops_namespace``). Eagerly, torch's ``torch.cond`` and ``while_loop``
compile the call with torch.compile; the runner gives them their Python meaning instead
(``runner.eager_hops``).
"""

from __future__ import annotations

from .generator import Ty, _Param
from .generator_v4 import LEAF_STATEMENTS_V4, STATEMENTS_V4, BuilderV4
from .shapes import BROADCAST, NDIM
from .text import wrap

# The modules a program may take: class -> its construction over the size M.
NN_MODULES = {
    "MultiheadAttention": "nn.MultiheadAttention(@M, 1, batch_first=True)",
    "TransformerEncoderLayer": "nn.TransformerEncoderLayer(@M, 1, 8, dropout=0.0, "
                               "batch_first=True)",
    "LSTM": "nn.LSTM(@M, @M, batch_first=True)",
    "GRU": "nn.GRU(@M, @M, batch_first=True)",
}
NN_NAMES = {"MultiheadAttention": "attn", "TransformerEncoderLayer": "enc_layer",
            "LSTM": "lstm", "GRU": "gru"}

# Bodies of higher-order operator branches and loops: ``a`` the operand, ``w`` a tensor of the
# frame the body closes over (broadcast to ``a``'s shape); each keeps the shape and dtype.
BODIES = ("{a}.sin() * {w}", "{a}.cos() + {w}", "torch.tanh({a}) - {w}", "({a} * 2.0).relu()",
          "{a}.exp().clamp(max=4.0)", "{a} * 0.5 + 1.0", "torch.sigmoid({a}) * {w}",
          "{a} - abs({w})")
STEPS = ("{a} * 0.5 + {w}", "torch.tanh({a}) + {w}", "{a}.sin() * 2.0", "{a} * 1.5 - 0.25")

# Size marks the caller puts on the first argument before a call (documented marks only:
# a strict mark_dynamic raises where tracing specializes, which eager never does).
MARKS = ("torch._dynamo.maybe_mark_dynamic(args[0], 0)", "torch._dynamo.mark_static(args[0], 1)",
         "graphlift.mark_static(args[0], 0)", "torch._dynamo.maybe_mark_dynamic(args[0], 1)")


class BuilderV5(BuilderV4):
    VERSION = 5

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.marks: list[str] = []

    def statement_table(self) -> dict[str, int]:
        return STATEMENTS_V5 if self.depth < 3 else LEAF_STATEMENTS_V5

    # -- inputs and the calls ------------------------------------------------------------------
    def more_inputs(self) -> None:
        super().more_inputs()
        if self.chance(0.25):
            cls = self.pick(NN_MODULES)
            self.imports.add("import torch.nn as nn")
            made = NN_MODULES[cls] + self.pick(("", "", ".eval()", ".train()"))
            self.params.append(_Param(NN_NAMES[cls], Ty("nnmod", cls=cls), [made] * 4))
        if self.chance(0.15):
            self.imports.add("import numpy as np")
            self.params.append(_Param("arr", Ty("ndarray", "NM"), ["NM.numpy()"] * 4))
        if self.chance(0.15):
            self.marks = self.rng.sample(MARKS, self.rng.randint(1, 2))
            self.imports.add("import graphlift")
            self.imports.add("import torch._dynamo")

    def variant_texts(self) -> list[str]:
        texts = super().variant_texts()
        return ["\n".join([text] + self.marks) for text in texts]

    # -- module-level definitions --------------------------------------------------------------
    def define_custom_ops(self) -> None:
        if "scale_op" in self.classes:
            return
        self.imports.add("import functools")
        self.used |= {"ops_namespace", "scale_op", "bump_op", "pair_op", "OPS"}
        base = f"fuzz_s{self.seed}"
        body = self.pick(("t * k + 1.0", "t * k - 0.5"))
        self.classes["scale_op"] = [
            "@functools.cache",
            "def ops_namespace():",
            '    """A namespace no operator of this process uses yet: operator names are',
            '    process-wide, and each load of this module defines its operators anew."""',
            "    n = 0",
            f'    while any(q.startswith(f"{base}_{{n}}::") for q in '
            "torch._library.custom_ops.OPDEFS):",
            "        n += 1",
            f'    return f"{base}_{{n}}"',
            "",
            "",
            '@torch.library.custom_op(ops_namespace() + "::scale", mutates_args=())',
            "def scale_op(t: torch.Tensor, k: float) -> torch.Tensor:",
            f"    return {body}",
            "",
            "",
            "@scale_op.register_fake",
            "def _(t, k):",
            "    return torch.empty_like(t)",
            "",
            "",
            "def scale_op_setup(ctx, inputs, output):",
            "    ctx.k = inputs[1]",
            "",
            "",
            "def scale_op_backward(ctx, grad):",
            "    return grad * ctx.k, None",
            "",
            "",
            "scale_op.register_autograd(scale_op_backward, setup_context=scale_op_setup)",
            "",
            "",
            '@torch.library.custom_op(ops_namespace() + "::bump", mutates_args=("t",))',
            "def bump_op(t: torch.Tensor, k: float) -> None:",
            "    t.add_(k)",
            "",
            "",
            "@bump_op.register_fake",
            "def _(t, k):",
            "    return None",
            "",
            "",
            '@torch.library.custom_op(ops_namespace() + "::pair", mutates_args=())',
            "def pair_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:",
            "    return torch.sin(a) * b",
            "",
            "",
            "@pair_op.register_fake",
            "def _(a, b):",
            "    return torch.empty_like(a)",
            "",
            "",
            "OPS = getattr(torch.ops, ops_namespace())",
        ]

    def define_decorated(self) -> None:
        if "opaque_mix" in self.classes:
            return
        self.imports.add("import graphlift")
        self.used |= {"opaque_mix", "opaque_norm", "eager_log", "eager_shape"}
        self.classes["opaque_mix"] = [
            "@torch.compiler.allow_in_graph",
            "def opaque_mix(t, k):",
            "    return t * k + t.sin()",
            "",
            "",
            "@graphlift.allow_in_graph",
            "def opaque_norm(t):",
            "    return t / (t.abs().sum() + 1.0)",
            "",
            "",
            "@torch.compiler.disable",
            "def eager_log(t, log):",
            "    log.append(t.dim())",
            "    return t.cos() * 2",
            "",
            "",
            f"@graphlift.disable(recursive={self.pick(('True', 'False'))}, "
            'reason="prints its input\'s shape")',
            "def eager_shape(t):",
            '    print("shape", tuple(t.shape))',
            "    return t - 1.0",
        ]

    def define_checkpointed(self) -> None:
        if "ckpt_block" in self.classes:
            return
        self.imports.add("import torch.utils.checkpoint")
        self.used.add("ckpt_block")
        self.classes["ckpt_block"] = [
            "def ckpt_block(a, w, k=1.5):",
            "    return torch.tanh(a * k) + w.sin()",
        ]

    # -- helpers -------------------------------------------------------------------------------
    def tensor_var(self, shapes: tuple[str, ...] = ("NM", "M", "N", "MM", "0d")) -> tuple | None:
        """A tensor variable (a name, for a body to close over) and its shape."""
        names = [n for n in self.vars_of("tensor") if self.scope[n].shape in shapes]
        if not names:
            return None
        name = self.pick(names)
        return name, self.scope[name].shape

    def outer(self, shape: str) -> str:
        """A tensor variable of the frame that broadcasts to ``shape``, or a constant."""
        names = [n for s in BROADCAST[shape] for n in self.vars_of("tensor", s)]
        return self.pick(names) if names and self.chance(0.8) else "0.5"

    def grad_free(self) -> bool:
        """Whether no tensor here requires grad (in-place writes and loop carries are safe)."""
        return not self.requires_grad or self.no_grad

    # -- statements: custom operators ----------------------------------------------------------
    def s_custom_op(self) -> list[str] | None:
        self.define_custom_ops()
        shape, t = self.a_tensor()
        k = self.float_expr()
        if "x" in self.grad_leaves and "x" in self.scope and not self.no_grad and \
                self.chance(0.6):
            return [self.result("NM", f"torch.autograd.grad(scale_op(x, {k}).sum(), x)[0]")]
        kind = self.pick(("call", "default", "packet", "bump", "bump", "pair"))
        if kind in ("call", "default", "packet"):
            fn = {"call": "scale_op", "default": "OPS.scale.default", "packet": "OPS.scale"}[kind]
            return [self.result(shape, f"{fn}({t}, {k})")]
        if kind == "pair":
            fn = self.pick(("pair_op", "OPS.pair.default"))
            return [self.result(shape, f"{fn}({t}, {self.tensor(shape, 1)})")]
        targets = [n for n in self.vars_of("tensor") if self.assignable(n)
                   and n not in self.grad_leaves and self.grad_free()]
        fn = self.pick(("bump_op", "OPS.bump.default"))
        if targets and self.chance(0.4):
            target = self.pick(targets)
            return [f"{fn}({target}, {k})"]
        out = self.fresh("tensor")
        self.define(out, Ty("tensor", shape))
        return [f"{out} = {wrap(t)}.detach().clone()", f"{fn}({out}, {k})"]

    # -- statements: attention and recurrent modules -------------------------------------------
    def s_nn(self) -> list[str] | None:
        mods = self.vars_of("nnmod")
        found = self.tensor_var(("NM",))
        if not mods or not found:
            return None
        mod, (v, _) = self.pick(mods), found
        cls = self.scope[mod].cls
        b = f"{v}.unsqueeze(0)"
        pad = f"torch.arange({v}.shape[0]) >= 2"
        causal = f"torch.ones({v}.shape[0], {v}.shape[0], dtype=torch.bool).triu(1)"
        options = {  # (the result's shape, its text)
            "MultiheadAttention": [
                ("NM", f"{mod}({v}, {v}, {v})[0]"),
                ("NM", f"{mod}({v}, {v}, {v}, need_weights=False)[0]"),
                ("NM", f"{mod}({v}, {v}, {v}, key_padding_mask={pad})[0]"),
                ("NM", f"{mod}({v}, {v}, {v}, attn_mask={causal}, need_weights=False)[0]"),
                ("NM", f"{mod}({b}, {b}, {b}, key_padding_mask=({pad}).unsqueeze(0))[0][0]"),
                ("0d", f"{mod}({v}, {v}, {v})[1].sum()")],
            "TransformerEncoderLayer": [
                ("NM", f"{mod}({v})"), ("NM", f"{mod}({v}, src_key_padding_mask={pad})"),
                ("NM", f"{mod}({v}, src_mask={causal})"), ("NM", f"{mod}({b})[0]"),
                ("NM", f"{mod}({b}, src_key_padding_mask=({pad}).unsqueeze(0))[0]")],
            "LSTM": [
                ("NM", f"{mod}({v})[0]"), ("1M", f"{mod}({v})[1][0]"),
                ("NM", f"{mod}({b})[0][0]"),
                ("NM", f"{mod}({v}, (torch.zeros(1, {v}.shape[1]), "
                       f"torch.ones(1, {v}.shape[1])))[0]")],
            "GRU": [
                ("NM", f"{mod}({v})[0]"), ("1M", f"{mod}({v})[1]"), ("NM", f"{mod}({b})[0][0]"),
                ("NM", f"{mod}({v}, torch.zeros(1, {v}.shape[1]))[0]")],
        }[cls]
        shape, value = self.pick(options)
        line = self.result(shape, value)
        if self.chance(0.15):
            return ["with torch.no_grad():", "    " + line]
        if self.chance(0.1) and not self.depth:
            return [f"{mod}.train({self.pick(('True', 'False'))})", line]
        return [line]

    # -- statements: higher-order operators ----------------------------------------------------
    def s_hop(self) -> list[str] | None:
        found = self.tensor_var()
        if not found:
            return None
        a, shape = found
        kind = self.pick(("cond", "cond", "cond_py", "cond_def", "while", "while_data",
                          "checkpoint"))
        w = self.outer(shape)
        then, other = (self.pick(BODIES).format(a="a", w=w) for _ in range(2))
        if kind == "cond":
            pred = self.pick([f"{a}.sum() > 0", f"{wrap(self.tensor(shape, 1))}.mean() < "
                              f"{self.float_expr()}", self.tensor_cond(),
                              f"{a}.shape[0] > 2"])
            return [self.result(shape, f"torch.cond({pred}, lambda a: {then}, "
                                       f"lambda a: {other}, ({a},))")]
        if kind == "cond_py":
            return [self.result(shape, f"torch.cond({self.bool_expr()}, lambda a: {then}, "
                                       f"lambda a: {other}, [{a}])")]
        if kind == "cond_def":
            if self.loop_depth or self.depth >= 2:
                return None
            yes, no = self.fresh_def("then_fn"), self.fresh_def("else_fn")
            b = self.tensor(shape, 1)
            lines = [f"def {yes}(a, b):", f"    return {then} + b", "",
                     f"def {no}(a, b):", f"    return {other} - b * 0.5"]
            return lines + [self.result(shape, f"torch.cond(({a} * {wrap(b)}).sum() > 0, {yes}, "
                                               f"{no}, ({a}, {b}))")]
        if kind in ("while", "while_data"):
            self.imports.add("from torch._higher_order_ops import while_loop")
            carry = a if self.grad_free() else f"{a}.detach()"
            if not self.grad_free():
                w = "0.5"  # no tensor that requires grad in the carried state
            step = self.pick(STEPS).format(a="a", w=w)
            if kind == "while":
                test = f"i < {self.rng.randint(1, 4)}"
            else:
                test = f"(i < 6) & (a.abs().sum() < {self.pick(('5.0', '20.0'))})"
            return [self.result(shape, f"while_loop(lambda i, a: {test}, lambda i, a: "
                                       f"(i + 1, {step}), (torch.tensor(0), {carry}))[1]")]
        self.define_checkpointed()
        if "x" in self.grad_leaves and "x" in self.scope and not self.no_grad and \
                self.chance(0.6):
            w = self.outer("NM")
            w = w if w != "0.5" else "x"
            return [self.result("NM", "torch.autograd.grad(torch.utils.checkpoint.checkpoint("
                                      f"ckpt_block, x, {w}, use_reentrant=False).sum(), x)[0]")]
        call = self.pick([f"ckpt_block, {a}, {w if w != '0.5' else a}",
                          f"lambda a: {then}, {a}",
                          f"ckpt_block, {a}, {a}, {self.pick(('0.5', '2.0'))}"])
        return [self.result(shape, f"torch.utils.checkpoint.checkpoint({call}, "
                                   "use_reentrant=False)")]

    def fresh_def(self, base: str) -> str:
        name = base if base not in self.used else f"{base}{len(self.used)}"
        self.used.add(name)
        return name

    # -- statements: NumPy of float32 arrays ---------------------------------------------------
    def s_numpy5(self) -> list[str] | None:
        self.imports.add("import numpy as np")
        arrays = self.vars_of("ndarray")
        found = self.tensor_var(("NM",))
        if arrays and (not found or self.chance(0.5)):
            arr = self.pick(arrays)
        elif found:
            arr = f"{found[0]}.detach().numpy()"
        else:
            return None
        shape, t = self.a_tensor()
        kind, value = self.pick([
            (shape, f"{wrap(t)} * float(np.sum({arr}))"),
            (shape, f"{wrap(t)} + float(np.mean({arr}))"),
            (shape, f"{wrap(t)} - float(np.sum({arr} @ {arr}.T))"),
            ("NM", f"torch.from_numpy(np.cumsum({arr}, axis={self.pick(('0', '1'))}))"),
            ("NN", f"torch.from_numpy({arr} @ {arr}.T)"),
            ("MM", f"torch.as_tensor({arr}.T @ {arr})"),
            ("M", f"torch.as_tensor(np.sum({arr}, axis=0))"),
            ("N", f"torch.from_numpy(np.mean({arr}, axis=1))")])
        return [self.result(kind, value)]

    # -- statements: torch._check --------------------------------------------------------------
    def s_check(self) -> list[str] | None:
        found = self.tensor_var(("NM", "M", "N", "MM"))
        ints = self.vars_of("int")
        options = []
        if found:
            v = found[0]
            options += [f"torch._check({v}.shape[0] >= 1)",
                        f"torch._check({v}.dim() == {NDIM[found[1]]})",
                        f'torch._check({v}.shape[-1] > 0, lambda: "an empty last dimension")',
                        f"torch._check({v}.numel() < 1000)"]
        if ints:
            n = self.pick(ints)
            options += [f"torch._check({n} >= 0)", f"torch._check_is_size({n})",
                        f'torch._check({n} < 3, lambda: "too many steps")']
        return [self.pick(options)] if options else None

    # -- statements: allow_in_graph and disable ------------------------------------------------
    def s_decorated(self) -> list[str] | None:
        self.define_decorated()
        shape, t = self.a_tensor()
        kind = self.pick(("mix", "norm", "log", "shape"))
        if kind == "mix":
            return [self.result(shape, f"opaque_mix({t}, {self.float_expr()})")]
        if kind == "norm":
            return [self.result(shape, f"opaque_norm({t}) * 2")]
        if kind == "shape":
            return [self.result(shape, f"eager_shape({t})")]
        log = self.fresh("log")
        return [f"{log} = []", self.result(shape, f"eager_log({t}, {log}) + len({log})")]


STATEMENTS_V5 = {
    **STATEMENTS_V4,
    "s_custom_op": 3, "s_nn": 14, "s_hop": 6, "s_numpy5": 2, "s_check": 2, "s_decorated": 2,
}
# Deep inside blocks: no more nesting (a higher-order operator's bodies are expressions).
LEAF_STATEMENTS_V5 = {**LEAF_STATEMENTS_V4, "s_custom_op": 3, "s_nn": 14, "s_hop": 4,
                      "s_numpy5": 2, "s_check": 2, "s_decorated": 2}
