"""Measure torch.compile's figures in this process: record them, or check the recording.

    python -m tests.reference record            # rewrite torch_compile_<X.Y>.json for this CPython
    python -m tests.reference record --missing  # the keys it lacks or whose measure changed
    python -m tests.reference record --only KEY...
    python -m tests.reference current           # is the recording current? (no torch.compile run)
    python -m tests.reference check [--shard 1/4] [--only KEY...] [--adopt]

Imports the test modules that register measures (those that name ``reference``) the way pytest
does (``tests/`` on ``sys.path``). ``record`` and ``check`` run the measures one after another;
``current`` compares each measure's fingerprint (a hash of its test code) with the recorded one.
``check`` prints each difference and exits 1 on any, on a registered key without a recording
and on a recorded key nothing registers; with ``--adopt`` it also records the fingerprints of
the keys whose figure it measured unchanged.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import sys
import time
import warnings

TESTS = pathlib.Path(__file__).resolve().parent.parent
# The suite's own setting (conftest): OpenMP's second thread makes torch calls far slower on a
# busy small machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(TESTS))

import torch  # noqa: E402

import reference  # noqa: E402 -- the module the test modules import, not tests.reference
from reference.fingerprint import fingerprint  # noqa: E402


def registering_modules() -> list[str]:
    """Test modules that register measures, by the import pytest gives them."""
    names = []
    for path in sorted(TESTS.glob("test_*.py")):
        if path.name != "test_reference.py" and "from reference import" in path.read_text():
            names.append(path.stem)
    return names


def load_measures() -> dict:
    # torch.compile's own warnings (lru_cache wrappers, untraceable builtins) are no findings.
    warnings.simplefilter("ignore")
    for name in registering_modules():
        importlib.import_module(name)
    return reference.MEASURES


def shard_of(keys: list[str], shard: str | None) -> list[str]:
    if shard is None:
        return keys
    index, count = (int(part) for part in shard.split("/"))
    return keys[index - 1::count]


def record(only: list[str] | None, missing: bool) -> int:
    """Record every measure anew, or (``only`` / ``missing``) just those keys, keeping the rest
    of the recording; the keys nothing registers any more are dropped either way."""
    measures = load_measures()
    kept = reference._recording(reference.VERSION) if (only or missing) else {}
    prints = reference.recorded_fingerprints() if (only or missing) else {}
    current = {key: fingerprint(fn) for key, fn in measures.items()}
    keys = only or [key for key in sorted(measures)
                    if not (missing and key in kept and prints.get(key) == current[key])]
    figures = {key: kept[key] for key in kept if key in measures}
    figures.update({key: reference.run_measure(key) for key in keys})
    prints = {key: prints[key] for key in figures if key in prints}
    prints.update({key: current[key] for key in keys})
    write(figures, prints)
    print(f"recorded {len(keys)} of {len(figures)} figures in {reference.recording_path()}")
    return 0


def write(figures: dict, fingerprints: dict) -> None:
    data = {"torch": torch.__version__.split("+")[0], "python": reference.VERSION,
            "figures": figures, "fingerprints": fingerprints}
    reference.recording_path().write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def current() -> int:
    """Exit 1, naming each key, unless every registered figure is recorded with its measure's
    fingerprint as the code is now and every recorded figure is registered."""
    measures = load_measures()
    problems = reference.stale(reference._recording(reference.VERSION),
                               reference.recorded_fingerprints(),
                               {key: fingerprint(fn) for key, fn in measures.items()})
    for problem in problems:
        print("STALE", problem)
    print(f"{len(measures)} figures registered, {len(problems)} not current")
    return 1 if problems else 0


def check(shard: str | None, only: list[str] | None, adopt: bool) -> int:
    measures = load_measures()
    figures = reference._recording(reference.VERSION)
    keys = shard_of(sorted(only or measures), shard)
    measured = {}
    for key in keys:
        started = time.perf_counter()
        measured[key] = reference.run_measure(key)
        print(f"{time.perf_counter() - started:6.2f}s {key}", flush=True)
    # Recorded keys that nothing registers are reported once, by the first shard.
    orphans_too = not only and (shard is None or shard.startswith("1/"))
    problems = reference.differences(figures, measured, set(measures) if orphans_too else None)
    for problem in problems:
        print("DIFFERS", problem)
    if adopt:
        prints = dict(reference.recorded_fingerprints())
        prints.update({key: fingerprint(measures[key]) for key, got in measured.items()
                       if figures.get(key) == got})
        write(figures, prints)
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reference", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["record", "current", "check"])
    parser.add_argument("--shard", help="i/n: check every n-th key from the i-th")
    parser.add_argument("--only", nargs="*", help="record or check these keys only")
    parser.add_argument("--missing", action="store_true",
                        help="record only the registered keys the recording lacks or whose "
                        "measure changed")
    parser.add_argument("--adopt", action="store_true",
                        help="check: record the fingerprints of the figures found unchanged")
    args = parser.parse_args()
    if args.action == "record":
        return record(args.only, args.missing)
    if args.action == "current":
        return current()
    return check(args.shard, args.only, args.adopt)


if __name__ == "__main__":
    sys.exit(main())
