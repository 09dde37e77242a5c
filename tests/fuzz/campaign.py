"""A fuzzing campaign: many seeds, grouped differences, one minimized repro per group."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from .generator import Program
from .minimizer import minimize
from .runner import KINDS, Difference, run_program
from .versions import LATEST, generate


@dataclass
class Finding:
    program: Program
    difference: Difference
    minimized: Program | None = None
    minimized_difference: Difference | None = None


@dataclass
class Report:
    """What a campaign ran and found; ``render()`` is the text printed at the end of a run."""

    programs: int = 0
    calls: int = 0
    eager_errors: int = 0
    programs_with_eager_errors: int = 0
    graphs: int = 0
    graph_breaks: int = 0
    eager_frames: int = 0
    # Compiles that failed inside graphlift and fell back to eager (a warning, not a wrong
    # result, so no difference: counted here, with the programs that had one).
    internal_errors: int = 0
    internal_error_seeds: list[int] = field(default_factory=list)
    recompiles: int = 0
    hit_checks: int = 0  # programs whose second call had to be a cache hit (and was checked)
    seconds: float = 0.0
    seeds: tuple[int, int] = (0, 0)
    version: int = LATEST  # the generator version that wrote the programs
    findings: list[Finding] = field(default_factory=list)

    def add(self, program: Program, result) -> None:
        self.programs += 1
        self.calls += result.calls
        self.eager_errors += result.eager_errors
        self.programs_with_eager_errors += result.eager_errors > 0
        stats = result.stats
        self.graphs += stats.get("graphs", 0)
        self.graph_breaks += stats.get("graph_breaks", 0)
        self.eager_frames += stats.get("eager_frames", 0)
        self.internal_errors += stats.get("internal_errors", 0)
        if stats.get("internal_errors", 0):
            self.internal_error_seeds.append(program.seed)
        self.recompiles += max(stats.get("compiles", 1) - 1, 0)
        self.hit_checks += result.hit_checked
        if result.difference:
            self.findings.append(Finding(program, result.difference))

    def groups(self) -> dict[str, list[Finding]]:
        """Findings by signature, most frequent first within each kind, kinds by severity."""
        by_signature: dict[str, list[Finding]] = {}
        for finding in self.findings:
            by_signature.setdefault(finding.difference.signature, []).append(finding)
        order = list(KINDS)
        return dict(sorted(by_signature.items(), key=lambda item: (
            order.index(item[1][0].difference.kind), -len(item[1]), item[0])))

    def render(self) -> str:
        lines = [f"graphlift differential fuzzer: {self.programs} programs "
                 f"(generator version {self.version}, seeds {self.seeds[0]}.."
                 f"{self.seeds[1] - 1}), {self.calls} calls, "
                 f"{self.seconds:.0f} s",
                 f"  eager raised in {self.eager_errors} calls "
                 f"({self.programs_with_eager_errors} programs); compiled: {self.graphs} graphs, "
                 f"{self.graph_breaks} graph breaks, {self.eager_frames} frames run eagerly, "
                 f"{self.recompiles} recompiles (entry function only)",
                 f"  second call checked to be a cache hit in {self.hit_checks} programs (the "
                 "others changed their state in the first call)",
                 f"  internal errors that fell back to eager: {self.internal_errors} (programs: "
                 f"{', '.join(map(str, self.internal_error_seeds[:12])) or 'none'}"
                 f"{', ...' if len(self.internal_error_seeds) > 12 else ''})",
                 f"differences: {len(self.findings)} programs"]
        for kind, words in KINDS.items():
            count = sum(f.difference.kind == kind for f in self.findings)
            lines.append(f"  {words:<42} {count}")
        groups = self.groups()
        if groups:
            lines.append("by signature (count, signature, seeds):")
        for signature, findings in groups.items():
            seeds = ", ".join(str(f.program.seed) for f in findings[:8])
            more = f", ... ({len(findings)} in all)" if len(findings) > 8 else ""
            lines.append(f"  {len(findings):4d}  {signature}\n        seeds {seeds}{more}")
        for signature, findings in groups.items():
            shown = next((f for f in findings if f.minimized), None)
            if shown:
                lines += ["", f"=== {signature}", describe(shown)]
        return "\n".join(lines)


def describe(finding: Finding) -> str:
    """A finding as text: the (minimized) source, the calls, and how compiled differed."""
    program = finding.minimized or finding.program
    difference = finding.minimized_difference or finding.difference
    label = "minimized from" if finding.minimized else "program of"
    lines = [f"{KINDS[difference.kind]} at call {difference.call + 1} of {len(program.calls)} "
             f"({label} seed {finding.program.seed}; rerun: python -m tests.fuzz "
             f"--generator {finding.program.version} --seed {finding.program.seed} "
             "--programs 1)", "", program.source.rstrip(), ""]
    for number, variant in enumerate(program.calls, 1):
        lines.append(f"# call {number}:")
        lines.append(program.variants[variant])
        mode = program.ambient[variant] if program.ambient else ""
        if mode:
            lines += [f"with {mode}:", f"    {program.entry}(*args, **kwargs)"]
        else:
            lines.append(f"{program.entry}(*args, **kwargs)")
    lines += ["", "difference:", "    " + difference.detail.replace("\n", "\n    ")]
    return "\n".join(lines)


def fuzz(seeds: Iterable[int], *, version: int = LATEST, timeout: float = 20.0,
         minimize_seconds: float = 60.0, max_minimized: int = 10,
         progress: bool = False) -> Report:
    """Run the program of every seed (written by generator ``version``); minimize the first
    finding of up to ``max_minimized`` signatures."""
    seeds = list(seeds)
    report = Report(seeds=(seeds[0], seeds[-1] + 1) if seeds else (0, 0), version=version)
    start = time.perf_counter()
    for count, seed in enumerate(seeds, 1):
        program = generate(seed, version)
        result = run_program(program, timeout)
        report.add(program, result)
        if progress and result.difference:
            print(f"seed {seed}: {result.difference.signature}", file=sys.stderr)
        if progress and count % 100 == 0:
            print(f"[{count}/{len(seeds)}] {len(report.findings)} differences, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    for findings in list(report.groups().values())[:max_minimized]:
        finding = findings[0]
        finding.minimized = minimize(finding.program, finding.difference, minimize_seconds)
        finding.minimized_difference = run_program(finding.minimized, timeout).difference
    report.seconds = time.perf_counter() - start
    return report
