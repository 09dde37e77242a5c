"""The first second: import and first result in a fresh process, graphlift vs torch.compile.

Every sample is a new Python process (``python -c``): what a user pays on every start of a script
or a server. Each child imports torch, builds its workload with a fixed seed, then starts the
clock: each frontend pays its own imports from there (``import graphlift``; torch.compile imports
``torch._dynamo`` on its first call), then compiles and makes the first call; the clock stops at
the first result. Backend ``"eager"`` (or a user's callable, where the row says so), ``no_grad``,
one thread. The systems are interleaved (A B, A B, ...); each figure is a median over samples and
each ratio the median of per-round ratios, which a slow spell on the shared machine moves least.

Rows:

- ``import``: ``import graphlift`` against ``import torch._dynamo`` (what torch.compile's first
  call imports), nothing else;
- ``x.sin() + 1`` on 8 floats: a trivial first result;
- the model zoo's GPT, 12 blocks (d_model 64, seq 16), compiled whole (``compile(model)``) and
  block by block (``model.h[i] = compile(block)``: regional);
- the whole GPT in a *second* process: graphlift with ``GRAPHLIFT_CACHE_DIR`` filled by an earlier
  process, torch.compile with its own caches filled (``TORCHINDUCTOR_CACHE_DIR``; with these
  backends Dynamo itself keeps nothing), with backend ``"eager"`` and with a callable backend
  defined in the script (``def my_backend(gm, example_inputs): return gm.forward``); and the same
  decoder written as a function of its weights (``benchmarks/warm_start.py``), whose entry guards
  no module, with ``"eager"``.

graphlift's bytecode caches (``__pycache__``) are written and used, as for an installed package
(torch's are): the children run without ``PYTHONDONTWRITEBYTECODE``, after one untimed import.

    .venv/bin/python benchmarks/cold_start.py                 # the table
    .venv/bin/python benchmarks/cold_start.py --importtime    # plus the heaviest imports
    .venv/bin/python benchmarks/cold_start.py --json out.json

``benchmarks/warm_start.py`` reuses these children for its cold/warm/second-process table (and
``--backend inductor``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GPT = """
import copy, sys
sys.path.insert(0, {bench!r})
from models.gpt import GPT
torch.manual_seed(0)
target = GPT(vocab=256, block=32, layers=12, heads=4, dim=64).eval()
reference = copy.deepcopy(target)  # eager, for the check after the timing
args = (torch.randint(0, 256, (2, 16)),)
"""
# Each workload: the setup code (after ``import torch``), which binds ``target`` (what is
# compiled), ``reference`` (the same, run eagerly after the timing) and ``args``.
WORKLOADS: dict[str, str] = {
    "GPT, 12 blocks (d 64)": GPT,
    "GPT, 12 blocks, regional": GPT + "REGIONAL = True\n",
    "functional decoder, 12 blocks": """
import sys
sys.path.insert(0, {bench!r})
from warm_start import decoder, decoder_params
torch.manual_seed(0)
target = reference = decoder
args = (torch.randn(2, 16, 64), decoder_params(12, 64))
""",
    "x + 1 (8 floats)": """
def target(x):
    return x + 1
reference = target
args = (torch.randn(8),)
""",
    "x.sin() + 1 (8 floats)": """
def target(x):
    return x.sin() + 1
reference = target
args = (torch.randn(8),)
""",
    "import": "target = None\n",
    # For benchmarks/warm_start.py --backend inductor: a real model's graph (attention, layer
    # norm, GELU) that inductor compiles in minutes here, where the 12 blocks take tens.
    "functional decoder, 2 blocks (d 32)": """
import sys
sys.path.insert(0, {bench!r})
from warm_start import decoder, decoder_params
torch.manual_seed(0)
target = reference = decoder
args = (torch.randn(2, 16, 32), decoder_params(2, 32))
""",
}
COLD_WORKLOADS = ("import", "x.sin() + 1 (8 floats)", "GPT, 12 blocks (d 64)",
                  "GPT, 12 blocks, regional")
# The second-process rows: (workload, backend source text, label).
WARM_ROWS = (("GPT, 12 blocks (d 64)", '"eager"', "GPT, 12 blocks, second process, eager"),
             ("GPT, 12 blocks (d 64)", "my_backend", "GPT, 12 blocks, second process, a callable"),
             ("functional decoder, 12 blocks", '"eager"',
              "decoder function, 12 blocks, second process, eager"))

PRELUDE = """
import sys
import time
import torch
FIRST_CALL_MARK = {mark!r}
REGIONAL = False
def my_backend(gm, example_inputs):  # a user's backend: runs the graph as it is
    return gm.forward
"""

# What each system imports once the clock runs (its ``compile`` function, and its imports).
FRONTENDS: dict[str, str] = {
    "graphlift": "import graphlift\ncompile_fn = graphlift.compile\n",
    "torch.compile": "import torch._dynamo\ncompile_fn = torch.compile\n",
}

TIMED = """
torch.set_num_threads(1)
print(FIRST_CALL_MARK, file=sys.stderr, flush=True)
start = time.perf_counter()
{frontend}
import_s = time.perf_counter() - start
options = dict(backend="eager")
out = None
with torch.no_grad():
    if REGIONAL:
        target.h = torch.nn.ModuleList(compile_fn(b, **options) for b in target.h)
        out = target(*args)
    elif target is not None:
        out = compile_fn(target, **options)(*args)
first_s = time.perf_counter() - start
"""

REPORT = """
import json, sys
if target is not None:
    with torch.no_grad():
        expected = reference(*args)
    assert torch.equal(out, expected), "compiled result differs from eager"
# Read after the timing; inductor's counters live in torch._dynamo.utils (imported by then).
counters = sys.modules["torch._dynamo.utils"].counters \\
    if "torch._dynamo.utils" in sys.modules else {"inductor": {}, "aot_autograd": {}}
print(json.dumps({"import_s": import_s, "first_s": first_s,
                  "inductor_cache_hits": counters["inductor"].get("fxgraph_cache_hit", 0),
                  "aot_autograd_cache_hits": counters["aot_autograd"].get("autograd_cache_hit", 0),
                  "dynamo_imported": "torch._dynamo" in sys.modules,
                  "sympy_imported": "sympy" in sys.modules}))
"""

FIRST_CALL_MARK = "-- clock starts --"
CHECK_LOADED = """
stats = graphlift.stats(type(target).forward if isinstance(target, torch.nn.Module) else target)
assert stats.compiles == 0 and stats.loaded >= 1, f"not a warm start: {stats}"
"""


def child_source(system: str, workload: str, backend: str = '"eager"') -> str:
    """The child script: imports, setup, the timed import and first call, the report.
    ``backend``: the source text of the backend argument (``my_backend``: the script's own)."""
    setup = WORKLOADS[workload].format(bench=str(ROOT / "benchmarks"))
    timed = TIMED.format(frontend=FRONTENDS[system])
    if backend != '"eager"':
        timed = timed.replace('backend="eager"', f"backend={backend}")
    return PRELUDE.format(mark=FIRST_CALL_MARK) + setup + timed + REPORT


def run_child(source: str, extra: tuple[str, ...] = (),
              env_vars: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # A cold start never sees a cache directory from the caller's environment; graphlift's
    # bytecode caches are used as an installed package's are (see the module doc).
    env = {k: v for k, v in os.environ.items()
           if k not in ("GRAPHLIFT_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")}
    env.update(OMP_NUM_THREADS="1", **(env_vars or {}))
    return subprocess.run([sys.executable, *extra, "-c", source], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True, timeout=900)


def report(source: str, env_vars: dict[str, str] | None = None) -> dict:
    return json.loads(run_child(source, env_vars=env_vars).stdout.splitlines()[-1])


def summary(name: str, rounds: list[dict[str, dict]]) -> dict:
    gl = [r["graphlift"] for r in rounds]
    tc = [r["torch.compile"] for r in rounds]
    return {
        "row": name,
        "graphlift_ms": statistics.median(r["first_s"] for r in gl) * 1e3,
        "torch_compile_ms": statistics.median(r["first_s"] for r in tc) * 1e3,
        "ratio": statistics.median(r["graphlift"]["first_s"] / r["torch.compile"]["first_s"]
                                   for r in rounds),
        "graphlift_import_ms": statistics.median(r["import_s"] for r in gl) * 1e3,
        "graphlift_imports_dynamo": any(r["dynamo_imported"] for r in gl),
        "graphlift_imports_sympy": any(r["sympy_imported"] for r in gl),
        "rounds": [{system: r[system]["first_s"] for system in r} for r in rounds],
    }


def measure_cold(workload: str, samples: int) -> dict:
    sources = {system: child_source(system, workload) for system in FRONTENDS}
    rounds = [{system: report(source) for system, source in sources.items()}
              for _ in range(samples)]
    return summary(workload, rounds)


def measure_warm(workload: str, backend: str, label: str, samples: int, root: Path) -> dict:
    """A second process: each system's caches filled by one untimed process first."""
    gl_env = {"GRAPHLIFT_CACHE_DIR": str(root / "graphlift"),
              "TORCHINDUCTOR_CACHE_DIR": str(root / "graphlift-inductor")}
    tc_env = {"TORCHINDUCTOR_CACHE_DIR": str(root / "torch-compile-inductor")}
    envs = {"graphlift": gl_env, "torch.compile": tc_env}
    sources = {system: child_source(system, workload, backend) for system in FRONTENDS}
    for system, source in sources.items():
        report(source, envs[system])  # fill the caches
    sources["graphlift"] = sources["graphlift"].replace("\nimport json, sys\n",
                                                        CHECK_LOADED + "\nimport json, sys\n", 1)
    rounds = []
    for _ in range(samples):
        rounds.append({system: report(source, envs[system]) for system, source in sources.items()})
    return summary(label, rounds)


def heaviest_imports(workload: str, top: int) -> list[tuple[int, str]]:
    """graphlift's child under ``-X importtime``: the slowest imports (cumulative µs) made once
    the clock runs (``import graphlift`` and the first call)."""
    lines = run_child(child_source("graphlift", workload),
                      ("-X", "importtime")).stderr.splitlines()
    lines = lines[lines.index(FIRST_CALL_MARK) + 1:]
    rows = []
    for line in lines:
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        if cumulative.strip().isdigit():
            rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--json")
    opts = parser.parse_args()
    run_child(child_source("graphlift", "import"))  # writes graphlift's bytecode caches
    results = [measure_cold(w, opts.samples) for w in COLD_WORKLOADS]
    with tempfile.TemporaryDirectory() as root:
        results += [measure_warm(*row, opts.samples, Path(root) / str(i))
                    for i, row in enumerate(WARM_ROWS)]
    print(f"{'first result in a fresh process':<44}{'gl ms':>8}{'tc ms':>8}{'gl/tc':>7}"
          f"{'gl import ms':>14}  graphlift imported torch._dynamo / sympy")
    for r in results:
        print(f"{r['row']:<44}{r['graphlift_ms']:>8.0f}{r['torch_compile_ms']:>8.0f}"
              f"{r['ratio']:>7.2f}{r['graphlift_import_ms']:>14.0f}  "
              f"{r['graphlift_imports_dynamo']} / {r['graphlift_imports_sympy']}")
    if opts.importtime:
        for workload in ("import", "x.sin() + 1 (8 floats)"):
            print(f"\nheaviest imports in graphlift's child once the clock runs, {workload} "
                  "(cumulative ms):")
            for cumulative, name in heaviest_imports(workload, 12):
                print(f"  {cumulative / 1e3:8.1f}  {name}")
    if opts.json:
        Path(opts.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
