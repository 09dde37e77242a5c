"""CI's fuzzing: on a fixed set of seeds, compiled and eager agree on every generated program.

A failure prints the report: each differing seed grouped by signature, and a minimized program
for the first few groups. Rerun one seed with ``python -m tests.fuzz --seed S --programs 1``.
"""

import pytest

from .campaign import fuzz

# About 0.7 s of CPU a program: sized to keep this test under a minute on a busy machine.
CI_SEEDS = range(0, 32)


def test_fixed_seeds_agree():
    report = fuzz(CI_SEEDS, minimize_seconds=10, max_minimized=3)
    if report.findings:
        pytest.fail(report.render(), pytrace=False)
