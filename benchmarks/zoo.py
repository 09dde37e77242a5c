"""The transformers model zoo of issue 13: graphlift against torch.compile, family by family.

Each family of ``benchmarks/models/hf.py`` (``ZOO``: tiny configs, random weights, nothing
downloaded) runs in each mode that applies to it:

- ``eval``: one forward under ``no_grad`` in eval mode, no cache (backend ``eager``);
- ``cache``: the same with ``use_cache=True``: the prefill returns a cache (decoder LMs);
- ``decode``: one new token given the prefill's cache as an input (decoder LMs; each call gets
  its own copy of the cache, made outside the timed region);
- ``train``: train mode with dropout 0, the forward with labels (decoder LMs) or a loss over the
  first output (the others), then ``backward`` (backend ``aot_eager``); the loss and every
  parameter's gradient are compared with eager's.

What is compiled is the model itself (``compile(model)(**inputs)``), or in ``train`` the
function computing the loss from ``(model, inputs)``; both systems get the same thing and the same
backend wrapped in a counter. Reported per entry: graphs, graph breaks and operations (the
call_function/call_method/call_module nodes of the graphs the backend receives) of each system;
graphlift's operations as a share of torch.compile's; whether graphlift's outputs (and gradients)
equal eager's; and the per-call time on a cache hit of eager, graphlift and torch.compile, taken
in turns (eager, graphlift, torch.compile, eager, ...) in one run, medians, one thread. Times are
the process's CPU time (``time.process_time``) by default, so that other jobs on a loaded machine
are not counted (wall-clock medians of 2 ms calls came out as the scheduler's time slice at a
load of 14 on 2 cores); ``--clock wall`` takes ``perf_counter`` instead.

    .venv/bin/python benchmarks/zoo.py                      # every family and mode
    .venv/bin/python benchmarks/zoo.py llama bert --modes eval,train
    .venv/bin/python benchmarks/zoo.py --markdown           # the table in docs/coverage.md
    .venv/bin/python benchmarks/zoo.py --no-timing          # counts and correctness only
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch._dynamo
import torch._dynamo.testing

# The checkout this file is in, not whichever graphlift is installed (see capture.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import hf  # noqa: E402
from models.table import print_rows  # noqa: E402

import graphlift  # noqa: E402
import graphlift.testing  # noqa: E402
from graphlift.graph_break import listeners as break_listeners  # noqa: E402

torch.set_num_threads(1)

# mode -> the backend both systems compile with (inside a counter)
BACKENDS = {"eval": "eager", "cache": "eager", "decode": "eager", "train": "aot_eager"}


@dataclass
class Capture:
    """What one system captured on the first call, and whether a second call compiled again."""

    graphs: int = 0
    breaks: int = 0
    ops: int = 0
    recompiled: bool = False
    error: str | None = None

    def cell(self) -> str:
        if self.error:
            return self.error
        return f"{self.graphs}/{self.breaks}/{self.ops}" + (" (recompiles)" * self.recompiled)


@dataclass
class Entry:
    """One (family, mode) of the zoo, measured."""

    family: str
    mode: str
    graphlift: Capture = field(default_factory=Capture)
    torch_compile: Capture = field(default_factory=Capture)
    equal: bool = False
    times_us: dict[str, float] = field(default_factory=dict)

    def no_worse(self) -> bool:
        """Graph and break counts no worse than torch.compile's (the bar of issue 13)."""
        ours, theirs = self.graphlift, self.torch_compile
        return (ours.error is None and ours.graphs <= max(theirs.graphs, 1)
                and ours.breaks <= theirs.breaks and not (ours.recompiled > theirs.recompiled))


# ---------------------------------------------------------------------------------------------
# What runs: the same step for eager, graphlift and torch.compile

def lm_loss(model: torch.nn.Module, inputs: dict) -> torch.Tensor:
    """A decoder LM's training loss: the forward given labels."""
    return model(**inputs).loss


def output_loss(model: torch.nn.Module, inputs: dict) -> torch.Tensor:
    """A loss over the model's first output, for models trained without labels here."""
    return model(**inputs)[0].pow(2).mean()


def compile_target(model: torch.nn.Module, mode: str, inputs: dict) -> Callable:
    """What gets compiled: the model, or in training the loss function."""
    if mode != "train":
        return model
    return lm_loss if "labels" in inputs else output_loss


def step(fn: Callable, model: torch.nn.Module, mode: str, inputs: dict) -> list[torch.Tensor]:
    """One call of ``fn`` (the model or its compiled form) in ``mode``; the tensors to compare.

    Inference returns every tensor of the output (the cache included); training returns the
    loss and then each parameter's gradient."""
    if mode != "train":
        with torch.no_grad():
            return tensors_of(fn(**hf.fresh_inputs(inputs)))
    model.zero_grad(set_to_none=True)
    loss = fn(model, inputs)
    loss.backward()
    return [loss.detach()] + [p.grad for p in model.parameters() if p.grad is not None]


def tensors_of(value: object, depth: int = 0) -> list[torch.Tensor]:
    """The tensors in a model's output: ModelOutput fields, tuples, and cache objects' layers."""
    if isinstance(value, torch.Tensor):
        return [value]
    if depth > 6 or isinstance(value, (torch.nn.Module, str, int, float, bool, type(None))):
        return []
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif type(value).__module__.startswith("transformers.") and hasattr(value, "__dict__"):
        items = [v for k, v in vars(value).items() if not k.startswith("config")]
    else:
        return []
    return [t for item in items for t in tensors_of(item, depth + 1)]


def all_close(got: list[torch.Tensor], expected: list[torch.Tensor]) -> bool:
    return len(got) == len(expected) and all(
        g.shape == e.shape and torch.allclose(g, e, atol=1e-5, rtol=1e-4)
        for g, e in zip(got, expected))


# ---------------------------------------------------------------------------------------------
# Counting graphs, breaks and ops the same way for both systems

def compile_graphlift(target: Callable, backend: str, breaks: list
                      ) -> tuple[Callable, Callable[[], Capture]]:
    """graphlift's compiled target and a function reading what it captured so far (the
    breaks are those ``breaks`` collects)."""
    counter = graphlift.testing.CompileCounterWithBackend(backend)

    def captured() -> Capture:
        return Capture(counter.frame_count, len(breaks), counter.op_count)

    return graphlift.compile(target, backend=counter), captured


@contextlib.contextmanager
def collecting_breaks() -> Iterator[list]:
    """A list that collects every graph break graphlift reports inside the block, in any frame
    (resume functions and callees compiled on their own included)."""
    breaks: list = []
    break_listeners.append(breaks.append)
    try:
        yield breaks
    finally:
        break_listeners.remove(breaks.append)


def compile_torch(target: Callable, backend: str) -> tuple[Callable, Callable[[], Capture]]:
    """torch.compile's compiled target and a function reading what it captured so far."""
    counter = torch._dynamo.testing.CompileCounterWithBackend(backend)

    def captured() -> Capture:
        breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
        return Capture(counter.frame_count, breaks, counter.op_count)

    return torch.compile(target, backend=counter), captured


def first_calls(name: str, compiled: Callable, captured: Callable[[], Capture], model, mode,
                inputs, expected: list[torch.Tensor] | None) -> tuple[Capture, bool]:
    """Call twice: the capture of the first call, whether the second compiled again, and
    whether the outputs equal ``expected``."""
    try:
        got = step(compiled, model, mode, inputs)
        first = captured()
        again = step(compiled, model, mode, inputs)
        first.recompiled = captured().graphs > first.graphs
        equal = expected is None or (all_close(got, expected) and all_close(again, expected))
        return first, equal
    except Exception as error:  # a benchmark reports what broke and carries on
        return Capture(error=f"{name}: {type(error).__name__}: {error}"[:120]), False


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def time_calls(systems: dict[str, Callable], model, mode, inputs, repeats: int,
               clock: Callable[[], float] = time.process_time) -> dict[str, float]:
    """Median µs per call of each system, taken in turns; inputs are made outside the timer."""
    samples: dict[str, list[float]] = {name: [] for name in systems}
    grad = torch.enable_grad() if mode == "train" else torch.no_grad()
    with grad:
        for _ in range(repeats):
            for name, fn in systems.items():
                args = hf.fresh_inputs(inputs)
                if mode == "train":
                    model.zero_grad(set_to_none=True)
                    start = clock()
                    fn(model, args).backward()
                else:
                    start = clock()
                    fn(**args)
                samples[name].append(clock() - start)
    return {name: 1e6 * statistics.median(s) for name, s in samples.items()}


def measure(family: str, mode: str, timing: bool = True, with_torch: bool = True,
            repeats: int = 15, clock: Callable[[], float] = time.process_time) -> Entry:
    """One zoo entry: counts, correctness and (with ``timing``) per-call times."""
    entry = Entry(family, mode)
    model, inputs = hf.build_family(family, mode)
    expected = step(compile_target(model, mode, inputs), model, mode, inputs)
    backend = BACKENDS[mode]
    target = compile_target(model, mode, inputs)

    graphlift.reset()
    with collecting_breaks() as breaks:
        ours, ours_captured = compile_graphlift(target, backend, breaks)
        entry.graphlift, entry.equal = first_calls("graphlift", ours, ours_captured, model, mode,
                                                   inputs, expected)
    systems = {"eager": target, "graphlift": ours}
    if with_torch:
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        theirs, theirs_captured = compile_torch(target, backend)
        entry.torch_compile, _ = first_calls("torch.compile", theirs, theirs_captured, model,
                                             mode, inputs, None)
        if entry.torch_compile.error is None:
            systems["torch.compile"] = theirs
    if timing and entry.graphlift.error is None:
        entry.times_us = time_calls(systems, model, mode, inputs, repeats, clock)
    torch._dynamo.reset()
    graphlift.reset()
    return entry


# ---------------------------------------------------------------------------------------------
# The table

def share(ours: int, theirs: int) -> str:
    return f"{100 * ours / theirs:.0f}%" if theirs else "-"


def summary(entries: list[Entry]) -> list[str]:
    """The bar of issue 13, line by line."""
    ours = sum(e.graphlift.ops for e in entries)
    theirs = sum(e.torch_compile.ops for e in entries)
    capped = sum(min(e.graphlift.ops, e.torch_compile.ops) for e in entries)
    families = len({e.family for e in entries})
    return [
        f"{families} families, {len(entries)} entries (family x mode)",
        f"graph and break counts no worse than torch.compile's: "
        f"{sum(e.no_worse() for e in entries)}/{len(entries)}",
        f"operations: {ours} against torch.compile's {theirs} ({share(ours, theirs)}; counting "
        f"at most torch.compile's per entry: {share(capped, theirs)})",
        f"outputs{' and gradients' * any(e.mode == 'train' for e in entries)} equal to eager's: "
        f"{sum(e.equal for e in entries)}/{len(entries)}",
    ]


def print_table(entries: list[Entry], markdown: bool) -> None:
    head = ("model", "mode", "graphlift graphs/breaks/ops", "torch.compile graphs/breaks/ops",
            "ops captured", "equals eager", "eager µs", "graphlift µs", "torch.compile µs")
    lines = []
    for e in entries:
        times = [f"{e.times_us[k]:.0f}" if k in e.times_us else "-"
                 for k in ("eager", "graphlift", "torch.compile")]
        lines.append((e.family, e.mode, e.graphlift.cell(), e.torch_compile.cell(),
                      share(e.graphlift.ops, e.torch_compile.ops), "yes" if e.equal else "NO",
                      *times))
    print_rows(head, lines, markdown)
    print()
    for line in summary(entries):
        print(f"- {line}")
    print(f"- graphlift from {Path(graphlift.__file__).parent}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help=f"some of: {', '.join(hf.ZOO)}")
    parser.add_argument("--modes", default="eval,cache,decode,train",
                        help="comma-separated modes to run (those that apply to each family)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--no-timing", action="store_true", help="counts and correctness only")
    parser.add_argument("--no-torch", action="store_true", help="skip torch.compile")
    parser.add_argument("--repeats", type=int, default=15, help="timed calls per system")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: the process's CPU time (default); wall: perf_counter")
    options = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    wanted = options.modes.split(",")
    entries = []
    for family in options.families or hf.ZOO:
        for mode in hf.family_modes(family):
            if mode not in wanted:
                continue
            with contextlib.redirect_stdout(io.StringIO()):
                entry = measure(family, mode, timing=not options.no_timing,
                                with_torch=not options.no_torch, repeats=options.repeats,
                                clock=CLOCKS[options.clock])
            entries.append(entry)
            print(f"  {family} {mode}: graphlift {entry.graphlift.cell()}  torch.compile "
                  f"{entry.torch_compile.cell()}  equal {entry.equal}  {entry.times_us}",
                  flush=True)
    print()
    print_table(entries, options.markdown)


if __name__ == "__main__":
    main()
