"""``import graphlift`` loads what wrapping a function needs, and the rest on first use.

Each test runs a fresh interpreter (the suite's own process has everything imported already) and
reads which modules it ended up with. The figures in milliseconds are in
``benchmarks/cold_start.py`` and ``docs/benchmarks.md``; a timing here would fail on a busy machine
and pass on a broken one, so what is checked is what got imported.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What wrapping a function never needs: the symbolic interpreter and what it stands on, sympy and
# the ShapeEnv, TorchDynamo and inductor, the doctor.
NOT_ON_IMPORT = ("sympy", "torch.fx.experimental.symbolic_shapes", "torch._dynamo",
                 "torch._inductor", "graphlift.translator", "graphlift.variables",
                 "graphlift.codegen", "graphlift.output_graph", "graphlift.shape_guards",
                 "graphlift.doctor")

REPORT = """
import json as _json, sys as _sys
print(_json.dumps({"modules": sorted(_sys.modules), "result": result}))
"""


def run_child(source: str, **env_vars: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHLIFT_")}
    env.update(OMP_NUM_THREADS="1", **env_vars)
    done = subprocess.run([sys.executable, "-c", source + REPORT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_import_and_wrapping_load_none_of_the_heavy_modules():
    # One interpreter for both steps: what `import graphlift` loaded, then what wrapping a
    # function and a module added.
    child = run_child("""
import sys
import torch
import graphlift
after_import = sorted(sys.modules)
f = graphlift.compile(lambda x: x + 1)
m = graphlift.compile(torch.nn.Linear(2, 2), backend="aot_eager")
result = [after_import, callable(f), type(m).__name__]
""")
    after_import, *wrapped = child["result"]
    assert [name for name in NOT_ON_IMPORT if name in after_import] == []
    assert "graphlift.eval_frame" in after_import  # the check reads the child's modules
    assert wrapped == [True, "OptimizedModule"]
    assert [name for name in NOT_ON_IMPORT if name in child["modules"]] == []


FIRST_COMPILE = """
import torch
import graphlift
def f(x):
    return x.sin() + 1
x = torch.randn(8)
calls = []
def backend(gm, examples):
    calls.append(len(examples))
    return gm.forward
compiled = graphlift.compile(f, backend={backend})
out = compiled(x)
result = {{"same": torch.equal(out, f(x)), "calls": calls,
          "compiles": graphlift.stats(f).compiles}}
"""


def test_the_first_compile_imports_the_translator_and_gives_eager_s_result():
    eager = run_child(FIRST_COMPILE.format(backend='"eager"'))
    assert eager["result"] == {"same": True, "calls": [], "compiles": 1}
    assert {"graphlift.translator", "graphlift.output_graph"} <= set(eager["modules"])
    own = run_child(FIRST_COMPILE.format(backend="backend"))
    assert own["result"] == {"same": True, "calls": [1], "compiles": 1}
    # Neither backend imports inductor's compiler (torch's fake tensors import torch._dynamo).
    assert "torch._inductor.compile_fx" not in eager["modules"]
    assert "torch._inductor.compile_fx" not in own["modules"]


def test_names_imported_on_first_use_are_the_real_ones_and_a_region_compiles():
    child = run_child("""
import sys
import torch
import graphlift
before = "graphlift.variables.regions" in sys.modules
from graphlift import nested_compile_region
from graphlift.variables import regions
try:
    graphlift.no_such_name
    missing = None
except AttributeError as error:
    missing = str(error)
import graphlift.structured_trace as trace
assert {"nested_compile_region", "region_stats", "compile"} <= set(dir(graphlift))
@graphlift.nested_compile_region
def block(x):
    return x.cos() * 2
def f(x):
    return block(x) + block(x + 1)
x = torch.randn(4)
result = [before, nested_compile_region is regions.nested_compile_region,
          graphlift.region_stats is regions.region_stats, graphlift.structured_trace is trace,
          missing, torch.equal(graphlift.compile(f)(x), f(x))]
""")
    assert child["result"] == [False, True, True, True,
                               "module 'graphlift' has no attribute 'no_such_name'", True]


def test_a_dynamic_size_after_the_late_imports_is_guarded(tmp_path):
    child = run_child("""
import torch
import graphlift
def f(x):
    return x * x.shape[0]
compiled = graphlift.compile(f, dynamic=True)
outs = [torch.equal(compiled(torch.ones(n)), f(torch.ones(n))) for n in (3, 5)]
guards = graphlift.cache_entries(f)[0].guards
result = [outs, "2 <= L['x'].size()[0]" in guards, graphlift.stats(f).compiles]
""")
    assert child["result"] == [[True, True], True, 1]
    assert "sympy" in child["modules"]


def test_graphlift_trace_at_import_still_writes_the_structured_trace(tmp_path):
    child = run_child("""
import torch
import graphlift
result = graphlift.compile(lambda x: x * 2)(torch.ones(2)).tolist()
""", GRAPHLIFT_TRACE=str(tmp_path))
    assert child["result"] == [2.0, 2.0]
    logs = list(tmp_path.glob("dedicated_log_torch_trace_*.log"))
    assert len(logs) == 1 and "dynamo_output_graph" in logs[0].read_text()
