"""First calls in a fresh process: graphlift vs torch.compile, both with backend "eager".

Every sample is a new Python process (``python -c``), so nothing is imported or cached before it
starts: this is what a user pays on every start of a script or a server. Each child imports torch
(and graphlift), builds the workload with a fixed seed, then times its first compiled call: for
graphlift from after ``import graphlift``, for torch.compile from before ``torch.compile(...)``
(which imports ``torch._dynamo`` on that call, as a user's first call does). The systems are
interleaved (A B, A B, ...) and each figure is a median over samples; the ratio is the median of
per-round ratios, which a slow spell on the shared machine moves least.

Workloads: the model zoo's GPT with 12 blocks (d_model 64, seq 16, no_grad), the same decoder
written as a function of its weights (``benchmarks/warm_start.py``), and ``x + 1`` on 8 floats.
Each child also reports whether ``torch._dynamo`` ended up imported.

    .venv/bin/python benchmarks/cold_start.py                 # the table
    .venv/bin/python benchmarks/cold_start.py --importtime    # plus graphlift's heaviest imports
    .venv/bin/python benchmarks/cold_start.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Each workload: the setup code (after the imports) and the expression making the compiled call's
# arguments; the model (or function) is bound to ``target``.
WORKLOADS: dict[str, str] = {
    "GPT, 12 blocks (d 64)": """
import sys
sys.path.insert(0, {bench!r})
from models.gpt import GPT
torch.manual_seed(0)
target = GPT(vocab=256, block=32, layers=12, heads=4, dim=64).eval()
args = (torch.randint(0, 256, (2, 16)),)
""",
    "functional decoder, 12 blocks": """
import sys
sys.path.insert(0, {bench!r})
from warm_start import decoder, decoder_params
torch.manual_seed(0)
target = decoder
args = (torch.randn(2, 16, 64), decoder_params(12, 64))
""",
    "x + 1 (8 floats)": """
def target(x):
    return x + 1
args = (torch.randn(8),)
""",
    # For benchmarks/warm_start.py --backend inductor: a real model's graph (attention, layer
    # norm, GELU) that inductor compiles in minutes here, where the 12 blocks take tens.
    "functional decoder, 2 blocks (d 32)": """
import sys
sys.path.insert(0, {bench!r})
from warm_start import decoder, decoder_params
torch.manual_seed(0)
target = decoder
args = (torch.randn(2, 16, 32), decoder_params(2, 32))
""",
}
COLD_WORKLOADS = ("GPT, 12 blocks (d 64)", "functional decoder, 12 blocks", "x + 1 (8 floats)")

# What each system's child runs: imports, then the workload, then the timed first call.
SYSTEMS: dict[str, str] = {
    "graphlift": """
import sys
import time
start_import = time.perf_counter()
import torch
import graphlift
import_s = time.perf_counter() - start_import
{workload}
torch.set_num_threads(1)
print(FIRST_CALL_MARK, file=sys.stderr, flush=True)
with torch.no_grad():
    start = time.perf_counter()
    compiled = graphlift.compile(target, backend="eager")
    out = compiled(*args)
    first_s = time.perf_counter() - start
""",
    "torch.compile": """
import time
start_import = time.perf_counter()
import torch
import_s = time.perf_counter() - start_import
{workload}
torch.set_num_threads(1)
with torch.no_grad():
    start = time.perf_counter()
    compiled = torch.compile(target, backend="eager")
    out = compiled(*args)
    first_s = time.perf_counter() - start
""",
}

REPORT = """
import json, sys
with torch.no_grad():
    expected = target(*args)
assert torch.equal(out, expected), "compiled result differs from eager"
# Read after the timing; inductor's counters live in torch._dynamo.utils (imported by then).
counters = sys.modules["torch._dynamo.utils"].counters \
    if "torch._dynamo.utils" in sys.modules else {"inductor": {}, "aot_autograd": {}}
print(json.dumps({"import_s": import_s, "first_s": first_s,
                  "inductor_cache_hits": counters["inductor"].get("fxgraph_cache_hit", 0),
                  "aot_autograd_cache_hits": counters["aot_autograd"].get("autograd_cache_hit", 0),
                  "dynamo_imported": "torch._dynamo" in sys.modules}))
"""


FIRST_CALL_MARK = "-- first call --"


def child_source(system: str, workload: str) -> str:
    setup = WORKLOADS[workload].format(bench=str(ROOT / "benchmarks"))
    return (f"FIRST_CALL_MARK = {FIRST_CALL_MARK!r}\n"
            + SYSTEMS[system].format(workload=setup) + REPORT)


def run_child(source: str, extra: tuple[str, ...] = (),
              env_vars: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # A cold start never sees a cache directory from the caller's environment.
    env = {k: v for k, v in os.environ.items() if k != "GRAPHLIFT_CACHE_DIR"}
    env.update(OMP_NUM_THREADS="1", **(env_vars or {}))
    return subprocess.run([sys.executable, *extra, "-c", source], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True, timeout=600)


def measure(workload: str, samples: int) -> dict:
    rounds = []
    for _ in range(samples):
        rounds.append({system: json.loads(run_child(child_source(system, workload)).stdout)
                       for system in SYSTEMS})
    gl = [r["graphlift"] for r in rounds]
    tc = [r["torch.compile"] for r in rounds]
    return {
        "workload": workload,
        "graphlift_first_ms": statistics.median(r["first_s"] for r in gl) * 1e3,
        "torch_compile_first_ms": statistics.median(r["first_s"] for r in tc) * 1e3,
        "ratio": statistics.median(r["graphlift"]["first_s"] / r["torch.compile"]["first_s"]
                                   for r in rounds),
        "graphlift_import_ms": statistics.median(r["import_s"] for r in gl) * 1e3,
        "graphlift_imports_dynamo": any(r["dynamo_imported"] for r in gl),
    }


def heaviest_imports(workload: str, top: int) -> list[tuple[int, str]]:
    """graphlift's child under ``-X importtime``: the slowest imports (cumulative µs) made by the
    first call (after ``import graphlift`` and the workload's setup)."""
    lines = run_child(child_source("graphlift", workload), ("-X", "importtime")).stderr.splitlines()
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
    results = [measure(w, opts.samples) for w in COLD_WORKLOADS]
    print(f"{'workload':<32}{'gl 1st ms':>11}{'tc 1st ms':>11}{'gl/tc':>8}"
          f"{'gl import ms':>14}  torch._dynamo imported by graphlift")
    for r in results:
        print(f"{r['workload']:<32}{r['graphlift_first_ms']:>11.0f}"
              f"{r['torch_compile_first_ms']:>11.0f}{r['ratio']:>8.2f}"
              f"{r['graphlift_import_ms']:>14.0f}  {r['graphlift_imports_dynamo']}")
    if opts.importtime:
        for workload in COLD_WORKLOADS:
            print(f"\nheaviest imports in graphlift's child, {workload} (cumulative ms):")
            for cumulative, name in heaviest_imports(workload, 12):
                print(f"  {cumulative / 1e3:8.1f}  {name}")
    if opts.json:
        Path(opts.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
