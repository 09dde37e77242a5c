"""CI's fuzzing: on a fixed set of seeds, compiled and eager agree on every generated program.

A failure prints the report: each differing seed grouped by signature, and a minimized program
for the first few groups. Rerun one seed with ``python -m tests.fuzz --seed S --programs 1``.
"""

from .campaign import fuzz

# About 1.3 s a program on one core: sized to keep this test near a minute.
CI_SEEDS = range(0, 40)


def test_fixed_seeds_agree():
    report = fuzz(CI_SEEDS, minimize_seconds=10, max_minimized=3)
    assert not report.findings, report.render()
