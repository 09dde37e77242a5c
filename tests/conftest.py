"""Every test starts and ends with an empty cache, default settings and every log artifact off.

One setting differs from its default: graphlift's own errors raise (``raise_internal_errors``),
so that no test passes because a frame quietly fell back to eager. Tests of that fallback turn
it off themselves.
"""

import pytest

import graphlift
from graphlift import logs


def _clean() -> None:
    graphlift.reset()
    graphlift.config.reset_to_defaults()
    graphlift.config.raise_internal_errors = True
    graphlift.set_logs(**dict.fromkeys(logs.ARTIFACTS, False))


@pytest.fixture(autouse=True)
def clean_graphlift():
    _clean()
    yield
    _clean()
