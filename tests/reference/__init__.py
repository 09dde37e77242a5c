"""torch.compile's figures, recorded: what the suite compares graphlift with.

torch.compile's first call changes torch for the whole process (it turns off
``torch.distributions`` argument validation and wraps every optimizer's ``_init_group`` in
``torch._dynamo.disable``), so a test that ran it beside graphlift would test graphlift on a torch
no user has. The suite therefore never runs torch.compile in its own processes. Instead:

- a test module **registers** each figure it compares with, as a key and a *measure*: a
  zero-argument function that runs torch.compile and returns a JSON value (graph and break
  counts, whether it agreed with eager, what it printed); ``measure(key, fn)`` registers, at
  import time;
- the figures are **recorded** per CPython minor version, since torch.compile's bytecode
  handling differs between versions, in ``tests/reference/torch_compile_<X.Y>.json``
  (``python -m tests.reference record``, or ``make reference`` for every venv); torch is pinned,
  so a recording stays true until a measure changes;
- a test reads a figure with ``recorded(key)``;
- each figure is recorded with the **fingerprint** of its measure: a hash of the test code the
  measure runs (``reference/fingerprint.py``). torch is pinned, so a figure whose measure's code
  is unchanged is still what torch.compile gives. The suite checks that in one place,
  ``tests/test_reference.py`` (``python -m tests.reference current``: no torch.compile run): a
  measure edited without recording anew, a registered figure with no recording and a recorded
  one that nothing registers fail there, named. ``python -m tests.reference check`` runs every
  measure again and compares (after a change of torch or of the interpreter).
"""

from __future__ import annotations

import functools
import json
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import torch

FOLDER = pathlib.Path(__file__).resolve().parent
VERSION = "{}.{}".format(*sys.version_info[:2])

# Registered measures, by key; filled when the test modules that compare with torch.compile
# are imported.
MEASURES: dict[str, Callable[[], Any]] = {}


def recording_path(version: str = VERSION) -> pathlib.Path:
    return FOLDER / f"torch_compile_{version}.json"


def measure(key: str, fn: Callable[[], Any]) -> str:
    """Register ``fn`` as the measure of ``key`` (unique across the suite); returns ``key``."""
    if key in MEASURES and MEASURES[key] is not fn:
        raise ValueError(f"torch.compile reference {key!r} is registered twice")
    MEASURES[key] = fn
    return key


@functools.cache
def _data(version: str) -> dict[str, Any]:
    path = recording_path(version)
    if not path.exists():
        return {"figures": {}, "fingerprints": {}}
    data = json.loads(path.read_text())
    if data["torch"] != torch.__version__.split("+")[0]:
        raise RuntimeError(f"{path.name} was recorded with torch {data['torch']}, this is "
                           f"{torch.__version__}: record it anew (make reference)")
    data.setdefault("fingerprints", {})
    return data


def _recording(version: str) -> dict[str, Any]:
    """The recorded figures, by key."""
    return _data(version)["figures"]


def recorded_fingerprints(version: str = VERSION) -> dict[str, str]:
    """The fingerprint (:mod:`reference.fingerprint`) of each figure's measure when recorded."""
    return _data(version)["fingerprints"]


def recorded(key: str) -> Any:
    """torch.compile's figure for ``key`` on this CPython, from the recording."""
    figures = _recording(VERSION)
    if key not in figures:
        raise LookupError(f"no recording of torch.compile's {key!r} for CPython {VERSION}: run "
                          f"`python -m tests.reference record` on it (make reference)")
    return figures[key]


def run_measure(key: str) -> Any:
    """Run one measure with torch.compile's caches empty before and after; a JSON round trip
    makes tuples lists, as the recording holds them."""
    import torch._dynamo

    torch._dynamo.reset()
    try:
        return json.loads(json.dumps(MEASURES[key]()))
    finally:
        torch._dynamo.reset()


def stale(figures: dict[str, Any], fingerprints: dict[str, str],
          current: dict[str, str]) -> list[str]:
    """What makes the recording not current: ``current`` holds the fingerprint of every
    registered measure as its code is now."""
    problems = []
    for key, now in sorted(current.items()):
        if key not in figures:
            problems.append(f"{key}: not recorded for CPython {VERSION} (make reference "
                            f"REFERENCE_ARGS=--missing)")
        elif fingerprints.get(key) != now:
            problems.append(f"{key}: its measure changed since it was recorded (make reference "
                            f"REFERENCE_ARGS=--missing)")
    problems += [f"{key}: recorded, but no test registers it (make reference "
                 f"REFERENCE_ARGS=--missing)" for key in sorted(set(figures) - set(current))]
    return problems


def differences(figures: dict[str, Any], measured: dict[str, Any],
                registered: set[str] | None = None) -> list[str]:
    """How ``measured`` differs from the recording ``figures``; with ``registered``, also the
    recorded keys that no test registers any more."""
    problems = []
    for key, got in measured.items():
        if key not in figures:
            problems.append(f"{key}: not recorded for CPython {VERSION}; torch.compile gives "
                            f"{got!r} (make reference)")
        elif got != figures[key]:
            problems.append(f"{key}: recorded {figures[key]!r}, torch.compile now gives {got!r} "
                            f"(make reference)")
    if registered is not None:
        problems += [f"{key}: recorded, but no test registers it (make reference)"
                     for key in sorted(set(figures) - registered)]
    return problems
