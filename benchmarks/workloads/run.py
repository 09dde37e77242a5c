"""The driver: every workload under eager, graphlift and torch.compile, each in its own process.

    python -m benchmarks.workloads                      # every workload, 20 steps
    python -m benchmarks.workloads llama-model cnn-step --steps 5
    python -m benchmarks.workloads --markdown --json out.json

Each (workload, system) pair is a fresh child (:mod:`benchmarks.workloads.child`, started as
``benchmarks/cold_start.py`` starts its children: one OpenMP thread, no graphlift cache folder),
so no system sees another's compiles or changes to torch. Per workload, the table gives:

- ``losses``: whether each compiled system's loss at every step equals eager's (``exact``, or
  the largest absolute difference over the steps); ``gl vs tc``: graphlift's against
  torch.compile's;
- ``g/b/r``: graphs, graph breaks and recompiles of graphlift and of torch.compile
  (:mod:`benchmarks.workloads.systems`);
- ``1st``: the first step's time (the compile included) as a multiple of eager's first step;
- ``steady``: the median step time over the second half of the steps, as a multiple of eager's.

Times are the child's CPU time (``time.process_time``), which a loaded machine disturbs less
than the wall clock. Below the table: the break and recompile reasons of each workload where
graphlift's counts differ from torch.compile's, the checks a workload makes beside its losses,
and any error.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

# Run as a script (python benchmarks/workloads/run.py): the checkout's root, for ``benchmarks``.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.cold_start import report  # noqa: E402
from benchmarks.models.table import print_rows  # noqa: E402
from benchmarks.workloads.catalog import WORKLOADS  # noqa: E402
from benchmarks.workloads.systems import SYSTEMS  # noqa: E402

COMPILERS = ("graphlift", "torch.compile")
COUNTS = ("graphs", "breaks", "recompiles")


def run_child(workload: str, system: str, steps: int) -> dict:
    """One child's report; a child that died is reported as its error and last stderr line."""
    argv = [workload, system, "--steps", str(steps)]
    source = f"from benchmarks.workloads.child import main\nmain({argv!r})\n"
    try:
        return report(source)
    except subprocess.CalledProcessError as died:
        last = (died.stderr or "").strip().splitlines()[-1:] or [f"exit status {died.returncode}"]
        return {"workload": workload, "system": system, "losses": [], "cpu_seconds": [],
                "error": f"child died: {last[0]}"[:300]}


def losses_cell(got: dict, expected: dict) -> str:
    """``exact`` when every step's loss is the expected one; else the largest difference."""
    ours, theirs = got["losses"], expected["losses"]
    if got.get("error") or expected.get("error") or len(ours) != len(theirs) or not ours:
        return f"{len(ours)} of {len(theirs)} steps"
    if ours == theirs:
        return "exact"
    return f"{max(abs(a - b) for a, b in zip(ours, theirs)):.1e}"


def counts_cell(got: dict) -> str:
    if got.get("error") and not got.get("losses"):
        return "error"
    return "/".join(str(got.get(key, "?")) for key in COUNTS)


def steady(seconds: list[float]) -> float:
    """The median of the second half of the steps."""
    return statistics.median(seconds[len(seconds) // 2:])


def ratio(got: dict, eager: dict, of) -> str:
    if not got.get("cpu_seconds") or not eager.get("cpu_seconds"):
        return "-"
    return f"{of(got['cpu_seconds']) / of(eager['cpu_seconds']):.1f}x"


def row(name: str, results: dict[str, dict]) -> list[str]:
    eager = results["eager"]
    cells = [name]
    cells += [losses_cell(results[s], eager) for s in COMPILERS]
    cells.append(losses_cell(results["graphlift"], results["torch.compile"]))
    cells += [counts_cell(results[s]) for s in COMPILERS]
    cells += [ratio(results[s], eager, lambda s: s[0]) for s in COMPILERS]
    cells += [ratio(results[s], eager, steady) for s in COMPILERS]
    return cells


HEAD = ("workload", "losses gl", "losses tc", "gl vs tc", "gl g/b/r", "tc g/b/r", "1st gl",
        "1st tc", "steady gl", "steady tc")


def notes(name: str, results: dict[str, dict]) -> list[str]:
    """What the table leaves out: errors, checks, and reasons where the counts differ."""
    lines = []
    ours, theirs = results["graphlift"], results["torch.compile"]
    for system, got in results.items():
        if got.get("error"):
            lines.append(f"{name}, {system}: error: {got['error']}")
        if got.get("internal_errors"):
            lines.append(f"{name}, {system}: {got['internal_errors']} internal errors (ran "
                         "eagerly)")
        if got.get("checks"):
            lines.append(f"{name}, {system}: checks {got['checks']}")
    if any(ours.get(key) != theirs.get(key) for key in COUNTS):
        for system, got in (("graphlift", ours), ("torch.compile", theirs)):
            lines += [f"{name}, {system} breaks at: {r}" for r in got.get("break_reasons", [])]
            lines += [f"{name}, {system} recompiles: {r}"
                      for r in got.get("recompile_reasons", [])]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", help=f"some of: {', '.join(WORKLOADS)}")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", help="also write every child's report to this file")
    options = parser.parse_args(argv)
    names = options.workloads or list(WORKLOADS)
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads: {', '.join(unknown)}")
    everything: dict[str, dict[str, dict]] = {}
    for name in names:
        everything[name] = {system: run_child(name, system, options.steps) for system in SYSTEMS}
        print(f"  {name}: {' | '.join(row(name, everything[name])[1:])}", flush=True)
    print()
    print_rows(HEAD, [row(name, results) for name, results in everything.items()],
               options.markdown)
    print()
    for name in everything:
        print(f"- {name}: {WORKLOADS[name].what}")
    for name, results in everything.items():
        for line in notes(name, results):
            print(f"- {line}")
    if options.json:
        Path(options.json).write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
