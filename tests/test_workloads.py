"""The training workloads of ``benchmarks/workloads`` keep running: one of them, two steps.

The tiny LLaMA with the model compiled (``llama-model``) trains two AdamW steps eagerly in this
process and under graphlift in a child process, as the driver runs it (graphlift's drop-in
switch installed there, its recording on); every step's loss must be eager's, exactly, and the
graphs, breaks and recompiles torch.compile's, recorded (tests/reference) from the same child
under torch.compile. The full table, with every workload and 20 steps, is
``python -m benchmarks.workloads`` (docs/benchmarks.md).

The recorded figure's fingerprint covers this file only: the workload's code lives in
``benchmarks/workloads``, so a change there needs ``python -m tests.reference record --only
workloads/llama_model_counts``.
"""

import sys
from pathlib import Path

from reference import measure, recorded

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for ``benchmarks``
from benchmarks.workloads.child import run_workload  # noqa: E402
from benchmarks.workloads.run import COUNTS, run_child  # noqa: E402

WORKLOAD = "llama-model"
STEPS = 2


def _counts(report: dict) -> dict:
    return {key: report[key] for key in COUNTS}


def _torch_compile_counts() -> dict:
    """torch.compile's graphs, breaks and recompiles on the workload, in its child. A measure."""
    report = run_child(WORKLOAD, "torch.compile", STEPS)
    assert report["error"] is None, report["error"]
    return _counts(report)


measure("workloads/llama_model_counts", _torch_compile_counts)


def test_tiny_llama_trains_with_eager_s_losses_under_graphlift():
    eager = run_workload(WORKLOAD, "eager", STEPS)
    ours = run_child(WORKLOAD, "graphlift", STEPS)
    assert eager["error"] is None and ours["error"] is None, ours["error"]
    assert ours["internal_errors"] == 0
    assert len(ours["losses"]) == STEPS and ours["losses"] == eager["losses"]
    assert _counts(ours) == recorded("workloads/llama_model_counts")
