"""What a workload hands its child: how to compile, and a log of every training step.

A workload is written once for the three systems. It compiles through :class:`Run` (``compile``
is ``torch.compile``: graphlift's under its drop-in switch, torch's, or nothing at all for eager)
and brackets each step with :meth:`StepLog.begin` and :meth:`StepLog.end`, from its own loop or
from a library's callbacks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

# Both compiling systems use the same backend. AOTAutograd without inductor: the backward is
# traced as torch.compile traces it, and the table runs in minutes on a CPU (inductor takes
# minutes per workload here).
BACKEND = "aot_eager"


@dataclass
class StepLog:
    """Each step's loss, wall time and the process's CPU time, in order.

    The CPU time (``time.process_time``) leaves out other jobs on a loaded machine, which the
    wall clock counts; the table's ratios take it (see ``benchmarks/zoo.py``).
    """

    losses: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    _start: tuple[float, float] | None = None

    def begin(self) -> None:
        self._start = time.perf_counter(), time.process_time()

    def end(self, loss: torch.Tensor | float) -> None:
        """Close the step begun last; ``loss`` is read after the clock stops."""
        stop = time.perf_counter(), time.process_time()
        if self._start is None:
            raise RuntimeError("StepLog.end without begin")
        self.seconds.append(stop[0] - self._start[0])
        self.cpu_seconds.append(stop[1] - self._start[1])
        self._start = None
        self.losses.append(float(loss.detach() if isinstance(loss, torch.Tensor) else loss))


@dataclass
class Run:
    """One system's run of one workload: ``steps`` training steps, logged in ``log``."""

    system: str
    steps: int
    log: StepLog = field(default_factory=StepLog)
    checks: dict[str, Any] = field(default_factory=dict)  # workload-specific facts to report

    @property
    def compiling(self) -> bool:
        return self.system != "eager"

    def compile(self, target: Callable, **options: Any) -> Callable:
        """``torch.compile(target, backend=BACKEND)``; the target itself under eager."""
        if not self.compiling:
            return target
        return torch.compile(target, **{"backend": BACKEND, **options})

    def compile_module_in_place(self, module: torch.nn.Module) -> None:
        """``module.compile(backend=BACKEND)`` (``nn.Module.compile``); nothing under eager."""
        if self.compiling:
            module.compile(backend=BACKEND)
