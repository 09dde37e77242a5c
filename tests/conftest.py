"""Every test starts and ends with an empty cache, default settings and every log artifact off."""

import pytest

import graphlift
from graphlift import logs


def _clean() -> None:
    graphlift.reset()
    graphlift.config.reset_to_defaults()
    graphlift.set_logs(**dict.fromkeys(logs.ARTIFACTS, False))


@pytest.fixture(autouse=True)
def clean_graphlift():
    _clean()
    yield
    _clean()
