"""The three systems a workload runs under, one per process, and what each one counted.

``eager`` compiles nothing. ``graphlift`` installs graphlift's drop-in switch, so that
``torch.compile`` and ``nn.Module.compile`` (the workloads' own calls, and those transformers,
Lightning and accelerate make) compile with graphlift, and turns graphlift's recording on
(``graphlift.events``) to read every compile, break and recompile reason from. ``torch.compile``
is torch's, counted through Dynamo's process-wide counters and compilation metrics.

Counted alike for both: ``graphs`` (the graphs the frontend handed the backend; AOTAutograd's
backward graphs not included), ``breaks`` (graph breaks met while translating, every compile),
``recompiles`` (compiles of a code object that already had a compiled entry) with their reasons.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

RECORD_FILE = "graphlift-record.json"


def setup_eager() -> None:
    """Nothing to set up."""


def setup_graphlift() -> None:
    import graphlift

    if graphlift.events.recorder() is None:
        # The recording is read in this process (counts_graphlift); the file written at exit
        # goes to a folder of its own.
        graphlift.events.enable(os.path.join(tempfile.mkdtemp(), RECORD_FILE))
    graphlift.install()


def setup_torch_compile() -> None:
    """torch.compile counts into process-wide tables: nothing to set up."""


def counts_eager() -> dict[str, Any]:
    return {}


def counts_graphlift() -> dict[str, Any]:
    import graphlift

    record = graphlift.events.recorder().as_dict()
    compiles = record["compiles"]
    recompiled = [c for c in compiles if c["reasons"]]
    return {
        "graphs": sum(f["stats"]["graphs"] for f in record["functions"]),
        "breaks": sum(len(c["breaks"]) for c in compiles),
        "recompiles": len(recompiled),
        "internal_errors": len(record["internal_errors"]),
        "break_reasons": _distinct(f"{b['location']}: {b['explanation']}"
                                   for c in compiles for b in c["breaks"]),
        "recompile_reasons": _distinct(f"{c['function']} ({c['location']}): {c['reasons'][0]}"
                                       for c in recompiled),
    }


def counts_torch_compile() -> dict[str, Any]:
    import torch._dynamo.utils as dynamo_utils

    counters = dynamo_utils.counters
    recompiled = [m for m in dynamo_utils.get_compilation_metrics() if m.recompile_reason]
    return {
        "graphs": counters["stats"]["unique_graphs"],
        "breaks": sum(counters["graph_break"].values()),
        "recompiles": len(recompiled),
        "break_reasons": _distinct(str(reason) for reason in counters["graph_break"]),
        "recompile_reasons": _distinct(f"{m.co_name} ({m.co_filename}:{m.co_firstlineno}): "
                                       f"{m.recompile_reason.strip()}" for m in recompiled),
    }


def _distinct(lines, keep: int = 6) -> list[str]:
    """The first ``keep`` distinct lines, each cut to one line of text."""
    seen: list[str] = []
    for line in lines:
        line = " ".join(line.split())[:240]
        if line not in seen:
            seen.append(line)
    return seen[:keep]


# name -> (set up the process before the workload, read its counters after).
SYSTEMS: dict[str, tuple[Callable[[], None], Callable[[], dict[str, Any]]]] = {
    "eager": (setup_eager, counts_eager),
    "graphlift": (setup_graphlift, counts_graphlift),
    "torch.compile": (setup_torch_compile, counts_torch_compile),
}
