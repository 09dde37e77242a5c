"""Tensor shapes the generator tracks, and the expressions that turn one shape into another.

A shape is a short key over the program's two size symbols ``N`` and ``M`` (the sizes of the
input ``x``, which change between calls): ``"NM"`` is ``(N, M)``, ``"N1"`` is ``(N, 1)``,
``"0d"`` a scalar tensor, ``"F"`` the flattened ``(N * M,)``. Every expression in these tables is
well-typed for every ``N >= 1`` and ``M >= 2``, so generated programs fail only where they mean to.

Templates name their tensor operands ``{0}``, ``{1}`` and the sizes ``{N}``, ``{M}`` (filled with
``x.shape[0]``, ``x.size(1)``, ``len(x)`` or an int variable holding that size).
"""

from __future__ import annotations

from collections.abc import Callable

SHAPES = ("NM", "MN", "N", "M", "N1", "1M", "0d", "NN", "MM", "F")

NDIM = {"NM": 2, "MN": 2, "N": 1, "M": 1, "N1": 2, "1M": 2, "0d": 0, "NN": 2, "MM": 2, "F": 1}

# How often a new tensor variable gets each shape: mostly the input's own shape and its reductions.
NEW_SHAPE_WEIGHTS = {"NM": 10, "N": 3, "M": 3, "N1": 2, "1M": 1, "0d": 3, "NN": 1, "MM": 1,
                     "MN": 1, "F": 1}

# Second operands of a broadcasting binary op whose result has the first operand's shape.
BROADCAST = {
    "NM": ("NM", "NM", "M", "N1", "1M", "0d"),
    "MN": ("MN", "N", "0d"),
    "N": ("N", "N", "0d"),
    "M": ("M", "M", "0d"),
    "N1": ("N1", "0d"),
    "1M": ("1M", "M", "0d"),
    "0d": ("0d",),
    "NN": ("NN", "N", "N1", "0d"),
    "MM": ("MM", "M", "0d"),
    "F": ("F", "0d"),
}

# target shape -> (operand shapes, template). One row per way users write it.
DERIVE: dict[str, list[tuple[tuple[str, ...], str]]] = {
    "NM": [
        (("MN",), "{0}.t()"),
        (("MN",), "{0}.T"),
        (("MN",), "{0}.transpose(0, 1)"),
        (("MN",), "{0}.permute(1, 0)"),
        (("F",), "{0}.view({N}, {M})"),
        (("F",), "{0}.reshape({N}, -1)"),
        (("F",), "{0}.reshape(-1, {M})"),
        (("M",), "{0}.expand({N}, -1)"),
        (("M",), "{0}.repeat({N}, 1)"),
        (("M",), "{0}.unsqueeze(0).expand({N}, {M})"),
        (("N1",), "{0}.expand(-1, {M})"),
        (("NN", "NM"), "{0} @ {1}"),
        (("NN", "NM"), "torch.mm({0}, {1})"),
        (("NM", "MM"), "torch.matmul({0}, {1})"),
        (("NM", "MM"), "{0} @ {1}"),
        (("NM", "NM"), "torch.stack([{0}, {1}]).sum(0)"),
        (("NM", "NM"), "torch.cat([{0}, {1}], dim=0)[:{N}]"),
        (("NM", "N"), "{0}[{1}.argsort()]"),
    ],
    "MN": [
        (("NM",), "{0}.t()"),
        (("NM",), "{0}.T"),
        (("NM",), "{0}.transpose(0, 1)"),
        (("NM",), "{0}.permute(1, 0)"),
        (("F",), "{0}.view({M}, {N})"),
    ],
    "N": [
        (("NM",), "{0}.sum(1)"),
        (("NM",), "{0}.mean(dim=1)"),
        (("NM",), "{0}.amax(-1)"),
        (("NM",), "{0}[:, 0]"),
        (("NM",), "{0}[:, -1]"),
        (("NM",), "{0}.max(dim=1).values"),
        (("NM",), "{0}.norm(dim=1)"),
        (("NM",), "torch.logsumexp({0}, dim=1)"),
        (("N1",), "{0}.squeeze(1)"),
        (("N1",), "{0}.squeeze(-1)"),
        (("N1",), "{0}.view(-1)"),
        (("NN",), "{0}.diagonal()"),
        (("NN",), "{0}.sum(0)"),
        (("MN",), "{0}.sum(0)"),
        (("MN",), "{0}[0]"),
        (("NM", "M"), "{0} @ {1}"),
        (("NM", "M"), "torch.mv({0}, {1})"),
    ],
    "M": [
        (("NM",), "{0}.sum(0)"),
        (("NM",), "{0}.mean(0)"),
        (("NM",), "{0}[0]"),
        (("NM",), "{0}[-1]"),
        (("NM",), "{0}.amin(dim=0)"),
        (("NM",), "{0}.max(0)[0]"),
        (("NM",), "{0}.std(0, unbiased=False)"),
        (("1M",), "{0}.squeeze(0)"),
        (("1M",), "{0}[0]"),
        (("MM",), "{0}.diagonal()"),
        (("MN",), "{0}.sum(1)"),
        (("MN",), "{0}[:, 0]"),
        (("N", "NM"), "{0} @ {1}"),
    ],
    "N1": [
        (("NM",), "{0}.sum(1, keepdim=True)"),
        (("NM",), "{0}.mean(dim=-1, keepdim=True)"),
        (("NM",), "{0}[:, :1]"),
        (("NM",), "{0}.amax(dim=1, keepdim=True)"),
        (("N",), "{0}.unsqueeze(1)"),
        (("N",), "{0}.unsqueeze(-1)"),
        (("N",), "{0}.view(-1, 1)"),
        (("N",), "{0}[:, None]"),
    ],
    "1M": [
        (("NM",), "{0}.mean(0, keepdim=True)"),
        (("NM",), "{0}[:1]"),
        (("NM",), "{0}[0:1]"),
        (("M",), "{0}.unsqueeze(0)"),
        (("M",), "{0}[None]"),
        (("M",), "{0}.view(1, -1)"),
    ],
    "0d": [
        (("NM",), "{0}.sum()"),
        (("NM",), "{0}.mean()"),
        (("NM",), "{0}.max()"),
        (("NM",), "{0}.amin()"),
        (("NM",), "{0}.norm()"),
        (("NM",), "{0}[0, 0]"),
        (("NM",), "{0}.abs().mean()"),
        (("N",), "{0}.sum()"),
        (("N",), "{0}.mean()"),
        (("N",), "{0}[0]"),
        (("M",), "{0}.sum()"),
        (("M",), "{0}.min()"),
        (("M",), "{0}[-1]"),
        (("M", "M"), "{0}.dot({1})"),
        (("M", "M"), "torch.dot({0}, {1})"),
        (("F",), "{0}.sum()"),
        (("NM", "NM"), "F.mse_loss({0}, {1})"),
        (("NM", "NM"), "({0} - {1}).pow(2).mean()"),
    ],
    "NN": [
        (("NM", "NM"), "{0} @ {1}.t()"),
        (("NM", "NM"), "{0} @ {1}.T"),
        (("NM", "NM"), "torch.mm({0}, {1}.transpose(0, 1))"),
        (("N", "N"), "torch.outer({0}, {1})"),
        (("N",), "torch.diag({0})"),
    ],
    "MM": [
        (("NM", "NM"), "{0}.t() @ {1}"),
        (("NM", "NM"), "{0}.T @ {1}"),
        (("M", "M"), "torch.outer({0}, {1})"),
        (("M",), "torch.diag({0})"),
    ],
    "F": [
        (("NM",), "{0}.reshape(-1)"),
        (("NM",), "{0}.flatten()"),
        (("NM",), "{0}.contiguous().view(-1)"),
        (("MN",), "{0}.reshape(-1)"),
        (("MN",), "{0}.flatten()"),
    ],
}

# Shape-preserving functions of one tensor: (minimum ndim, template).
UNARY: list[tuple[int, str]] = [
    (0, "torch.relu({0})"),
    (0, "{0}.relu()"),
    (0, "torch.sigmoid({0})"),
    (0, "torch.tanh({0})"),
    (0, "{0}.abs()"),
    (0, "-{0}"),
    (0, "{0}.neg()"),
    (0, "torch.sin({0})"),
    (0, "{0}.cos()"),
    (0, "F.gelu({0})"),
    (0, "F.silu({0})"),
    (0, "torch.exp(-{0}.abs())"),
    (0, "torch.log1p({0}.abs())"),
    (0, "torch.sqrt({0}.abs() + 1e-6)"),
    (0, "{0}.clamp(-1.0, 1.0)"),
    (0, "{0}.clamp(min=0)"),
    (0, "torch.clamp({0}, max=2.0)"),
    (0, "{0}.square()"),
    (0, "{0} ** 2"),
    (0, "torch.floor({0})"),
    (0, "{0}.round()"),
    (0, "{0}.sign()"),
    (0, "{0}.detach()"),
    (0, "{0}.clone()"),
    (0, "{0}.float()"),
    (0, "{0}.double().float()"),
    (0, "torch.nan_to_num({0})"),
    (0, "F.leaky_relu({0}, 0.1)"),
    (1, "torch.softmax({0}, dim=-1)"),
    (1, "{0}.softmax(-1)"),
    (1, "F.log_softmax({0}, dim=-1)"),
    (1, "F.normalize({0}, dim=-1)"),
    (1, "{0}.cumsum(0)"),
    (1, "{0}.flip(-1)"),
    (1, "{0}.roll(1, dims=0)"),
    (1, "{0} - {0}.mean(-1, keepdim=True)"),
    (2, "F.layer_norm({0}, {0}.shape[-1:])"),
    (2, "{0}.t().t()"),
]

# Two tensors of broadcastable shapes.
BINARY = [
    "{0} + {1}",
    "{0} - {1}",
    "{0} * {1}",
    "{0} / ({1}.abs() + 1.0)",
    "torch.maximum({0}, {1})",
    "torch.minimum({0}, {1})",
    "torch.where({0} > {1}, {0}, {1})",
    "torch.add({0}, {1}, alpha=0.5)",
    "torch.lerp({0}, {1}, 0.25)",
    "{0}.add({1})",
    "{0}.mul({1})",
    "{0}.sub({1}, alpha=2)",
]

# A tensor and a Python number: {f} a float, {i} an int, {nz} a float that is never zero.
SCALAR = [
    "{0} * {f}",
    "{0} + {i}",
    "{0} - {f}",
    "{0} / {nz}",
    "{f} * {0}",
    "{0} * {i}",
    "torch.pow({0}, 2)",
    "{0}.clamp(min={f})",
    "{0}.add({f})",
    "{0}.mul({i})",
    "{0}.div({nz})",
    "{0}.masked_fill({0} < 0, {f})",
    "torch.where({0} > 0, {0}, {f})",
    "torch.full_like({0}, {f})",
    "torch.zeros_like({0}) + {i}",
]


def reachable(have: set[str], usable: Callable[[str], bool]) -> dict[str, int]:
    """Each shape buildable from variables of the shapes in ``have`` through rules whose
    template is ``usable``, with its derivation depth."""
    rank = {shape: 0 for shape in have}
    changed = True
    while changed:
        changed = False
        for target, rules in DERIVE.items():
            for sources, template in rules:
                if usable(template) and all(s in rank for s in sources):
                    depth = 1 + max(rank[s] for s in sources)
                    if depth < rank.get(target, 99):
                        rank[target] = depth
                        changed = True
    return rank
