"""The generator's versions: ``generate(seed, version)`` is the program of ``seed`` written by
that version of the generator.

A version never changes once a campaign has run on it: a new construct goes into a new
version, so that every seed of an old version (``FOUND_SEEDS``, a campaign's report) keeps its
program. ``docs/fuzzing.md`` lists the constructs and the version that added each.
"""

from __future__ import annotations

from .generator import Program, _Builder
from .generator_v2 import BuilderV2, BuilderV3
from .generator_v4 import BuilderV4
from .generator_v5 import BuilderV5

BUILDERS: dict[int, type[_Builder]] = {1: _Builder, 2: BuilderV2, 3: BuilderV3, 4: BuilderV4,
                                       5: BuilderV5}
LATEST = max(BUILDERS)


def generate(seed: int, version: int = LATEST) -> Program:
    """The program of ``seed`` in generator ``version``."""
    if version not in BUILDERS:
        raise ValueError(f"no generator version {version} (versions: {sorted(BUILDERS)})")
    return BUILDERS[version](seed).build()
