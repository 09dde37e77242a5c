"""Warm start: the first call in a second process, graphlift (entries loaded from
``GRAPHLIFT_CACHE_DIR``) vs graphlift's own cold first call vs torch.compile's second process.

Each sample is a new process, as in ``benchmarks/cold_start.py``, whose child scripts this reuses:
the clock starts after ``import torch``, so graphlift's figures include ``import graphlift`` and
torch.compile's its import of ``torch._dynamo``.
Before timing, one graphlift process fills a cache directory and one torch.compile process fills
its own caches (``TORCHINDUCTOR_CACHE_DIR``: inductor's FX graph and AOTAutograd caches; with
backend "eager" Dynamo itself keeps nothing between processes). Then, interleaved per round:
graphlift cold (no cache directory), graphlift warm (the filled one), torch.compile's second
process. Backend "eager" for all by default; medians, and ratios as medians of per-round ratios.

With ``--backend inductor`` the sum is measured: graphlift's warm process loads its entries and
compiles the loaded graphs with inductor, whose FX graph and AOTAutograd caches
(``TORCHINDUCTOR_CACHE_DIR``, one directory per system) are then warm; graphlift's cold process
gets an empty inductor directory each round. The fill step is one cold process per system: for a
static graph graphlift hands inductor a tracing context whose fake mode has an (empty) ShapeEnv,
as torch.compile does, so its cold process fills inductor's caches and the first timed warm
process is the very first warm one. Each sample reports its FX graph and AOTAutograd cache hits.

Workloads: the zoo's GPT with 12 blocks compiled as a module (``graphlift.compile(model)``: its
entry guards the model by its structure id, which the saved entry keeps as the structure's key and
renumbers on load), the same 12-block decoder written as a function of its weights
(:func:`decoder`), and ``x + 1``; for inductor also a 2-block decoder of width 32 (``--workloads
"functional decoder, 2 blocks (d 32)"``), whose compile takes minutes, not tens of them.

    .venv/bin/python benchmarks/warm_start.py
    .venv/bin/python benchmarks/warm_start.py --json out.json
    .venv/bin/python benchmarks/warm_start.py --backend inductor --workloads "x + 1 (8 floats)" \
        "functional decoder, 2 blocks (d 32)"
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

HEADS = 4


def block(x: torch.Tensor, p: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """One pre-norm transformer block: causal attention and a GELU MLP, weights in ``p``."""
    batch, seq, dim = x.shape
    h = F.layer_norm(x, (dim,), p[0], p[1])
    q, k, v = F.linear(h, p[2], p[3]).split(dim, dim=-1)
    q, k, v = (t.view(batch, seq, HEADS, dim // HEADS).transpose(1, 2) for t in (q, k, v))
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    x = x + F.linear(a.transpose(1, 2).reshape(batch, seq, dim), p[4], p[5])
    h = F.layer_norm(x, (dim,), p[6], p[7])
    return x + F.linear(F.gelu(F.linear(h, p[8], p[9])), p[10], p[11])


def decoder(x: torch.Tensor, params: list[tuple[torch.Tensor, ...]]) -> torch.Tensor:
    for p in params:
        x = block(x, p)
    return x


def decoder_params(blocks: int, dim: int) -> list[tuple[torch.Tensor, ...]]:
    def weights() -> tuple[torch.Tensor, ...]:
        return (torch.ones(dim), torch.zeros(dim), torch.randn(3 * dim, dim) * 0.05,
                torch.zeros(3 * dim), torch.randn(dim, dim) * 0.05, torch.zeros(dim),
                torch.ones(dim), torch.zeros(dim), torch.randn(4 * dim, dim) * 0.05,
                torch.zeros(4 * dim), torch.randn(dim, 4 * dim) * 0.05, torch.zeros(dim))
    return [weights() for _ in range(blocks)]


WARM_WORKLOADS = ("GPT, 12 blocks (d 64)", "functional decoder, 12 blocks", "x + 1 (8 floats)")
# Also measurable (--workloads), for inductor: its 12-block compiles take tens of minutes here.
MORE_WORKLOADS = ("functional decoder, 2 blocks (d 32)",)

CHECK_LOADED = """
stats = graphlift.stats(type(target).forward if isinstance(target, torch.nn.Module) else target)
assert stats.compiles == 0 and stats.loaded >= 1, f"not a warm start: {stats}"
"""


def measure(workload: str, samples: int, root: Path, backend: str = "eager") -> dict:
    from cold_start import child_source, run_child

    gl_dir, tc_dir = root / "graphlift", root / "inductor"
    gl_env = {"GRAPHLIFT_CACHE_DIR": str(gl_dir),
              "TORCHINDUCTOR_CACHE_DIR": str(root / "graphlift-inductor")}
    tc_env = {"TORCHINDUCTOR_CACHE_DIR": str(tc_dir)}
    # inductor fuses and reorders float operations: its result is close to eager's, not equal.
    gl, tc = (child_source(system, workload).replace('backend="eager"', f"backend={backend!r}")
              .replace("torch.equal(out, expected)" if backend != "eager" else "\0",
                       "torch.allclose(out, expected, rtol=1e-4, atol=1e-5)")
              for system in ("graphlift", "torch.compile"))
    warm = gl.replace("\nimport json, sys\n", CHECK_LOADED + "\nimport json, sys\n", 1)
    run_child(gl, env_vars=gl_env)  # fill the caches: graphlift's and inductor's
    run_child(tc, env_vars=tc_env)
    rounds = []
    for i in range(samples):
        cold_env = {"TORCHINDUCTOR_CACHE_DIR": str(root / f"cold-inductor-{i}")}
        reports = {"cold": json.loads(run_child(gl, env_vars=cold_env).stdout),
                   "warm": json.loads(run_child(warm, env_vars=gl_env).stdout),
                   "tc": json.loads(run_child(tc, env_vars=tc_env).stdout)}
        rounds.append({k: r["first_s"] for k, r in reports.items()}
                      | {f"{k}_{hits}": r[hits] for k, r in reports.items()
                         for hits in ("inductor_cache_hits", "aot_autograd_cache_hits")})
    return {
        "workload": workload, "backend": backend,
        **{f"{k}_ms": statistics.median(r[k] for r in rounds) * 1e3
           for k in ("cold", "warm", "tc")},
        "warm_over_cold": statistics.median(r["warm"] / r["cold"] for r in rounds),
        "warm_over_tc": statistics.median(r["warm"] / r["tc"] for r in rounds),
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--backend", default="eager", choices=("eager", "inductor"))
    parser.add_argument("--workloads", nargs="*", default=WARM_WORKLOADS,
                        choices=WARM_WORKLOADS + MORE_WORKLOADS, metavar="WORKLOAD",
                        help=f"some of {WARM_WORKLOADS + MORE_WORKLOADS}")
    parser.add_argument("--json")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        results = [measure(w, opts.samples, Path(root) / str(i), opts.backend)
                   for i, w in enumerate(opts.workloads)]
    print(f"{'workload':<32}{'gl cold ms':>11}{'gl warm ms':>11}{'tc 2nd ms':>11}"
          f"{'warm/cold':>11}{'warm/tc':>9}")
    for r in results:
        print(f"{r['workload']:<32}{r['cold_ms']:>11.0f}{r['warm_ms']:>11.0f}{r['tc_ms']:>11.0f}"
              f"{r['warm_over_cold']:>11.2f}{r['warm_over_tc']:>9.2f}")
    if opts.backend != "eager":  # per round: FX graph / AOTAutograd cache hits of each process
        for r in results:
            print(f"cache hits (fx/aot), {r['workload']}: " + "; ".join(
                ", ".join(f"{k} {rnd[f'{k}_inductor_cache_hits']}/"
                          f"{rnd[f'{k}_aot_autograd_cache_hits']}" for k in ("cold", "warm", "tc"))
                for rnd in r["rounds"]))
    if opts.json:
        Path(opts.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
