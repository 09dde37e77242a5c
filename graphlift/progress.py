"""Progress of long compiles: what a compile is doing, and how long each of its phases took.

A compile is a sequence of phases (:data:`PHASES`), timed here. One that runs past
``config.progress_seconds`` (2 s: inductor on a real model, a large frame) says so at INFO on the
``graphlift.progress`` logger: when it passes the mark (from a timer thread, so a phase that runs
long is named while it runs), at each phase it starts after that, and at the end (the first
compile of a process spends most of its time in ``setup``, importing torch's symbolic shapes)::

    compiling forward (m.py:12) for 2.0 s: in backend 'inductor' (translate took 0.41 s)
    compiling forward (m.py:12): in guards after 6.22 s (backend took 5.80 s)
    compiled forward (m.py:12) in 6.25 s: translate 0.41 s, backend 5.80 s, guards 0.03 s, ...

``GRAPHLIFT_LOGS=progress`` prints these lines, and so does an application that logs at INFO;
a compile under the mark logs nothing. :func:`compiling` times one compile (``eval_frame`` wraps
the frame conversion in it); :func:`phase` marks where the innermost running compile is (one-line
hooks in ``convert_frame``). The finished :class:`CompileTiming` is what the structured trace
records.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from graphlift.config import config

# The phases of one compile, in the order they run, and what each does. translate may run twice:
# at a graph break the frame is traced again, up to the break.
PHASES = {
    "setup": "the fake-tensor mode and shape environment (a first compile imports sympy)",
    "translate": "the translator runs the bytecode on fake tensors, building the graph",
    "backend": "the backend compiles the graph (inductor: most of a long compile)",
    "guards": "the guards are rendered and compiled into the check function",
    "codegen": "the run function that calls the graph is generated",
}

log = logging.getLogger("graphlift.progress")


@dataclass
class CompileTiming:
    """One compile's phases: ``(name, start, end)`` in ``time.perf_counter()`` seconds."""

    label: str  # "forward (model.py:12)"
    start: float = field(default_factory=time.perf_counter)
    phases: list[tuple[str, float, float | None]] = field(default_factory=list)
    detail: str = ""  # what the running phase works on ("'inductor'")
    end: float | None = None
    announced: bool = False  # the compile passed the mark and said so

    def seconds(self) -> dict[str, float]:
        """Seconds per phase, summed over repeats (a retranslation at a break)."""
        now = time.perf_counter()
        totals: dict[str, float] = {}
        for name, start, end in self.phases:
            totals[name] = totals.get(name, 0.0) + ((end if end is not None else now) - start)
        return totals

    def elapsed(self) -> float:
        return (self.end if self.end is not None else time.perf_counter()) - self.start

    def running(self) -> str | None:
        return self.phases[-1][0] if self.phases and self.phases[-1][2] is None else None

    def begin(self, name: str, detail: object = "") -> None:
        if name not in PHASES:
            raise ValueError(f"unknown compile phase {name!r}; known: {', '.join(PHASES)}")
        now = time.perf_counter()
        finished = self._close(now)
        self.phases.append((name, now, None))
        self.detail = _describe(detail)
        if self.announced:
            log.info(f"compiling {self.label}: {self._doing()} after {self.elapsed():.2f} s"
                     f"{_took(finished)}")

    def announce(self) -> None:
        """The timer's call at the mark: say what the compile is doing (unless it is done)."""
        if self.end is not None:
            return
        elapsed = self.elapsed()
        self.announced = True
        done = [(name, end - start) for name, start, end in self.phases if end is not None]
        took = ", ".join(f"{name} took {seconds:.2f} s" for name, seconds in done)
        log.info(f"compiling {self.label} for {elapsed:.1f} s: {self._doing()}"
                 f"{f' ({took})' if took else ''}")

    def finish(self) -> None:
        self.end = time.perf_counter()
        self._close(self.end)
        if self.elapsed() >= config.progress_seconds:
            phases = ", ".join(f"{name} {seconds:.2f} s"
                               for name, seconds in self.seconds().items())
            log.info(f"compiled {self.label} in {self.elapsed():.2f} s: {phases}")

    def _close(self, now: float) -> tuple[str, float] | None:
        """End the running phase; its name and seconds."""
        running = self.running()
        if running is None:
            return None
        _, start, _ = self.phases[-1]
        self.phases[-1] = (running, start, now)
        return running, now - start

    def _doing(self) -> str:
        running = self.running()
        if running is None:
            return "starting"
        return f"in {running}{f' {self.detail}' if self.detail else ''}"


def _describe(detail: object) -> str:
    """A phase's detail as text: a backend name quoted, a callable by its name."""
    if isinstance(detail, str):
        return repr(detail) if detail else ""
    return repr(getattr(detail, "__name__", None) or type(detail).__name__)


def _took(finished: tuple[str, float] | None) -> str:
    return f" ({finished[0]} took {finished[1]:.2f} s)" if finished else ""


# The compiles running in this thread, innermost last (a compile can start inside another: a
# function called on fake tensors while tracing may itself be compiled).
_running = threading.local()


def _stack() -> list[CompileTiming]:
    stack = getattr(_running, "stack", None)
    if stack is None:
        stack = _running.stack = []
    return stack


@contextlib.contextmanager
def compiling(label: str) -> Iterator[CompileTiming]:
    """Time one compile; phases inside are marked with :func:`phase`."""
    timing = CompileTiming(label)
    timer = threading.Timer(config.progress_seconds, timing.announce)
    timer.daemon = True
    if config.progress_seconds > 0:
        timer.start()
    else:  # every compile is long: say so now, not from a thread that may come later
        timing.announce()
    stack = _stack()
    stack.append(timing)
    try:
        yield timing
    finally:
        timer.cancel()
        stack.pop()
        timing.finish()


def phase(name: str, detail: object = "") -> None:
    """The innermost running compile starts phase ``name`` (one of :data:`PHASES`)."""
    stack = _stack()
    if stack:
        stack[-1].begin(name, detail)
