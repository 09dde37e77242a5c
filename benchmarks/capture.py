"""How much of torch.compile's graph graphlift captures on real models, side by side.

For each model family of the transformers zoo (``benchmarks/models/hf.py``: tiny configs with
random weights, nothing downloaded), one forward under ``no_grad`` in eval mode is run
eagerly, under graphlift and under torch.compile, both with a counting backend (graphs run
eagerly). Reported per model: graphs, graph breaks and operations (call nodes) of each, whether
graphlift's output equals eager's, and graphlift's operations as a share of torch.compile's. The
total line sums the operations over all models.

    .venv/bin/python benchmarks/capture.py                # every family
    .venv/bin/python benchmarks/capture.py llama bert     # some of them
    .venv/bin/python benchmarks/capture.py --markdown     # a Markdown table

A share near 100% with equal outputs is what counts; a share near 0% with equal outputs means the
model ran eagerly (correct, but nothing was compiled). ``benchmarks/zoo.py`` runs the same
families in every mode (a KV cache, a decode step, a training step) and times them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch._dynamo
import torch._dynamo.testing

# The checkout this file is in, not whichever graphlift is installed: run as a script, Python
# puts benchmarks/ (not the working directory) first on the path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import hf  # noqa: E402
from models.table import print_rows  # noqa: E402

import graphlift  # noqa: E402

torch.set_num_threads(1)

# The families of the zoo (benchmarks/models/hf.py, ZOO), in inference only; benchmarks/zoo.py
# runs them in every mode and times them.
FAMILIES = hf.ZOO


@dataclass
class Capture:
    """What one system captured in one forward."""

    graphs: int = 0
    breaks: int = 0
    ops: int = 0
    error: str | None = None


def build_family(family: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    return hf.build_family(family, "eval")


def first_tensor(value: object) -> torch.Tensor:
    """The model's main output (logits or last hidden state), whatever container holds it."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        return first_tensor(next(iter(value.values())))
    if isinstance(value, (tuple, list)):
        return first_tensor(value[0])
    return first_tensor(value.to_tuple())


def run_graphlift_explained(model: torch.nn.Module, inputs: dict) -> tuple[Capture, object]:
    """graphlift's graphs, breaks and ops through explain(), which counts every frame it ran."""
    graphlift.reset()
    with torch.no_grad():
        report = graphlift.explain(type(model).forward)(model, **inputs)
    capture = Capture(report.graph_count, report.graph_break_count, report.op_count)
    graphlift.reset()
    with torch.no_grad():
        out = graphlift.compile(model, backend="eager")(**inputs)
    return capture, out


def run_torch_compile(model: torch.nn.Module, inputs: dict) -> Capture:
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    with torch.no_grad():
        torch.compile(model, backend=counter)(**inputs)
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    torch._dynamo.utils.counters.clear()
    return Capture(counter.frame_count, breaks, counter.op_count)


def measure(name: str, build: Callable) -> dict:
    model, inputs = build(name)
    with torch.no_grad():
        expected = first_tensor(model(**inputs))
    row = {"model": name}
    start = time.perf_counter()
    try:
        ours, out = run_graphlift_explained(model, inputs)
        row["equal"] = torch.allclose(first_tensor(out), expected, atol=1e-5, rtol=1e-4)
    except Exception as error:  # a benchmark reports what broke and carries on
        ours, row["equal"] = Capture(error=f"{type(error).__name__}: {error}"[:120]), False
    row["graphlift_s"] = time.perf_counter() - start
    try:
        theirs = run_torch_compile(model, inputs)
    except Exception as error:
        theirs = Capture(error=f"{type(error).__name__}: {error}"[:120])
    row["graphlift"], row["torch_compile"] = ours, theirs
    return row


def share(ours: int, theirs: int) -> str:
    return f"{100 * ours / theirs:.0f}%" if theirs else "-"


def print_table(rows: list[dict], markdown: bool) -> None:
    head = ("model", "graphlift graphs/breaks/ops", "torch.compile graphs/breaks/ops",
            "ops captured", "equals eager")
    lines = []
    for row in rows:
        ours, theirs = row["graphlift"], row["torch_compile"]
        cells = (row["model"],
                 ours.error or f"{ours.graphs}/{ours.breaks}/{ours.ops}",
                 theirs.error or f"{theirs.graphs}/{theirs.breaks}/{theirs.ops}",
                 share(ours.ops, theirs.ops), "yes" if row["equal"] else "NO")
        lines.append(cells)
    total_ours = sum(r["graphlift"].ops for r in rows)
    total_theirs = sum(r["torch_compile"].ops for r in rows)
    whole = sum(r["graphlift"].graphs == 1 and r["graphlift"].breaks == 0 for r in rows)
    lines.append(("total", f"{total_ours} ops", f"{total_theirs} ops",
                  share(total_ours, total_theirs),
                  f"{sum(r['equal'] for r in rows)}/{len(rows)}"))
    print_rows(head, lines, markdown)
    print(f"\n{whole}/{len(rows)} models in one graph with no break under graphlift "
          f"({Path(graphlift.__file__).parent})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help=f"some of: {', '.join(FAMILIES)}")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    options = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    rows = []
    for family in options.families or FAMILIES:
        with contextlib.redirect_stdout(io.StringIO()):
            rows.append(measure(family, build_family))
        row = rows[-1]
        print(f"  {family}: graphlift {row['graphlift']}  torch.compile {row['torch_compile']}",
              flush=True)
    print()
    print_table(rows, options.markdown)


if __name__ == "__main__":
    main()
