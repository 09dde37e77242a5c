"""CPython's own test suite with every test method compiled: graphlift against torch.compile.

The test files are the running interpreter's own (its ``test`` package, read at run time, never
copied here). Each module runs in a process of its own; there every ``unittest`` test method
runs twice on a fresh instance: once eagerly, once with the bound method compiled (backend
``eager``), each under a per-test timeout. ``unittest`` itself is traced (graphlift's
``config.inline_modules``, torch's ``enable_trace_unittest``, as PyTorch runs these tests), so
``assertEqual`` and its kin are compiled with the test. Per test the outcome is one of:

- ``pass``: passes eagerly and compiled;
- ``eager_fail``: fails (or is skipped) eagerly too; left out of every count below;
- ``wrong``: passes eagerly, fails compiled (a wrong value, a wrong exception, an error of our
  own): the number that must be 0;
- ``timeout``: the compiled run took longer than the timeout (counted apart: on a loaded
  machine a slow compile is no wrong result, but it is no pass either).

graphlift's runs also count the graphs and breaks of each test's compiled frames and the break
causes (a test counted once per cause). ``--frontend torch`` runs the same with
``torch.compile(backend="eager")`` in processes that never import graphlift, and ``--record``
writes its passes to ``benchmarks/cpython_suite_torch.json`` (per CPython minor version, per
module); graphlift's table reads that file and never runs torch.compile itself.

    .venv/bin/python benchmarks/cpython_suite.py                       # the default modules
    .venv/bin/python benchmarks/cpython_suite.py test_bool test_sort   # some of them
    .venv/bin/python benchmarks/cpython_suite.py --frontend torch --record
    .venv/bin/python benchmarks/cpython_suite.py --markdown            # docs/coverage.md's table
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import doctest
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TORCH_FIGURES = Path(__file__).resolve().parent / "cpython_suite_torch.json"
VERSION = "{}.{}".format(*sys.version_info[:2])

# The modules run by default, small and quick ones first.
MODULES = ("test_bool", "test_sort", "test_with", "test_operator", "test_tuple", "test_list",
           "test_dict", "test_set", "test_int", "test_math", "test_string", "test_functools",
           "test_itertools", "test_enum", "test_collections", "test_exceptions")
TEST_TIMEOUT = 20.0  # seconds per test and run
MODULE_TIMEOUT = 1500.0  # seconds per module process


class _Timeout(BaseException):
    """Raised in a test that ran past its time (a BaseException: user code's ``except
    Exception`` does not swallow it)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _cases(suite: unittest.TestSuite) -> list[unittest.TestCase]:
    """The test methods of ``suite``, flattened, in order (a module's doctests, which its
    ``load_tests`` may add, have no method to compile: left out)."""
    found: list[unittest.TestCase] = []
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            found.extend(_cases(item))
        elif not isinstance(item, (doctest.DocTestCase, unittest.FunctionTestCase)):
            found.append(item)
    return found


def _outcome(result: unittest.TestResult) -> tuple[str, str]:
    """``pass``, ``fail`` or ``skip``, and the first failure's last traceback line."""
    problems = result.errors + result.failures
    if problems:
        lines = problems[0][1].strip().splitlines()
        # A refused trace names its cause on the exception's line; else the error's last line.
        refused = [line for line in lines if line.startswith(_REFUSALS)]
        return "fail", (refused or lines)[-1][:300]
    if result.unexpectedSuccesses:
        return "fail", "unexpected success"
    if result.skipped or result.expectedFailures:
        return "skip", ""
    return "pass", ""


# How each frontend's refusal under fullgraph=True starts its line in a traceback.
_REFUSALS = ("graphlift.exc.Unsupported: ", "torch._dynamo.exc.Unsupported: ",
             "graphlift.translator.TranslationError: ")


def _run_one(case: unittest.TestCase, compiler: Any, timeout: float,
             fullgraph: bool = False) -> tuple[str, str]:
    """Run a fresh copy of ``case``, its method compiled by ``compiler`` (or eagerly if None)."""
    name = case._testMethodName
    fresh = type(case)(name)
    if compiler is not None:
        setattr(fresh, name, compiler(getattr(fresh, name), fullgraph))
    result = unittest.TestResult()
    timed_out = False
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            unittest.TestSuite([fresh]).run(result)
    except _Timeout:
        timed_out = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if timed_out or any("_Timeout" in text for _, text in result.errors):
        return "timeout", f"ran past {timeout:g} s"
    return _outcome(result)


def _graphlift_compiler() -> tuple[Any, Any]:
    """graphlift's compile for bound methods, and a function giving a test's counts and causes."""
    import graphlift
    from graphlift.graph_break import listeners

    graphlift.config.inline_modules = ("unittest",)  # as torch's enable_trace_unittest
    seen: list = []
    listeners.append(seen.append)
    compiled: list = []

    def compiler(method: Any, fullgraph: bool) -> Any:
        compiled.append(method.__func__)
        return graphlift.compile(method, backend="eager", fullgraph=fullgraph)

    def counts() -> dict[str, Any]:
        stats = graphlift.stats(compiled[-1]) if compiled else None
        causes = sorted({f"{record.break_type.value}: {record.explanation.splitlines()[0][:120]}"
                         for record in seen})
        seen.clear()
        graphlift.reset()
        if stats is None or not stats.compiles:
            return {"graphs": 0, "breaks": 0, "eager_frame": True, "causes": causes}
        return {"graphs": stats.graphs, "breaks": stats.graph_breaks,
                "eager_frame": stats.eager_frames > 0, "causes": causes}

    return compiler, counts


def _torch_compiler() -> tuple[Any, Any]:
    """torch.compile's, the same way (only in ``--frontend torch`` processes)."""
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.config.enable_trace_unittest = True

    def compiler(method: Any, fullgraph: bool) -> Any:
        return torch.compile(method, backend="eager", fullgraph=fullgraph)

    def counts() -> dict[str, Any]:
        causes = sorted(str(reason)[:120] for reason in counters["graph_break"])
        breaks = sum(counters["graph_break"].values())
        counters.clear()
        torch._dynamo.reset()
        return {"graphs": 0, "breaks": breaks, "eager_frame": True, "causes": causes}

    return compiler, counts


def run_module(module_name: str, frontend: str, timeout: float,
               only: str | None = None) -> dict[str, Any]:
    """Every test of ``test.<module_name>``: eagerly, compiled, and compiled with
    ``fullgraph=True`` (no break allowed, as PyTorch runs these tests): outcomes per test."""
    import importlib

    import torch
    torch.set_num_threads(1)
    module = importlib.import_module(f"test.{module_name}")
    cases = _cases(unittest.defaultTestLoader.loadTestsFromModule(module))
    if only:
        cases = [case for case in cases if only in case.id()]
    compiler, counts = _graphlift_compiler() if frontend == "graphlift" else _torch_compiler()
    signal.signal(signal.SIGALRM, _on_alarm)
    tests: dict[str, Any] = {}
    for case in cases:
        key = case.id().removeprefix(f"test.{module_name}.")
        eager, _ = _run_one(case, None, timeout)
        counts()  # forget what the eager run did
        if eager != "pass":
            tests[key] = {"outcome": "eager_fail"}
            continue
        start = time.perf_counter()
        compiled, message = _run_one(case, compiler, timeout)
        entry: dict[str, Any] = {"seconds": round(time.perf_counter() - start, 3)}
        entry.update(counts())
        if compiled == "pass":
            entry["outcome"] = "pass"
        else:
            entry["outcome"] = "wrong" if compiled != "timeout" else "timeout"
            entry["message"] = message
        fullgraph, message = _run_one(case, compiler, timeout, fullgraph=True)
        counts()
        entry["fullgraph"] = fullgraph == "pass"
        if fullgraph != "pass":
            entry["fullgraph_message"] = message
        tests[key] = entry
    return {"module": module_name, "frontend": frontend, "python": VERSION, "tests": tests}


def _run_child(module_name: str, frontend: str, timeout: float,
               only: str | None) -> dict[str, Any]:
    """:func:`run_module` in a fresh process (its state cannot leak into the next module)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--child", module_name,
                   "--frontend", frontend, "--timeout", str(timeout), "--out", str(out)]
        if only:
            command += ["--only", only]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=MODULE_TIMEOUT, cwd=str(ROOT))
        except subprocess.TimeoutExpired:
            return {"module": module_name, "error": f"ran past {MODULE_TIMEOUT:g} s"}
        if done.returncode != 0 or not out.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {"module": module_name, "error": f"exit {done.returncode}: {' | '.join(tail)}"}
        return json.loads(out.read_text())


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The counts of one module's run: tests, eager passes, compiled passes, wrong ones."""
    tests = result.get("tests", {})
    outcomes = collections.Counter(test["outcome"] for test in tests.values())
    eager_passed = len(tests) - outcomes["eager_fail"]
    return {"tests": len(tests), "eager_passed": eager_passed, "passed": outcomes["pass"],
            "wrong": sorted(name for name, test in tests.items() if test["outcome"] == "wrong"),
            "timeouts": sorted(name for name, test in tests.items()
                               if test["outcome"] == "timeout"),
            # passes with fullgraph=True: the whole test traced, no break
            "fullgraph": sum(1 for test in tests.values() if test.get("fullgraph"))}


def torch_figures(version: str = VERSION) -> dict[str, Any]:
    """torch.compile's recorded passes, by module, for CPython ``version``."""
    if not TORCH_FIGURES.exists():
        return {}
    return json.loads(TORCH_FIGURES.read_text()).get(version, {})


def record(results: list[dict[str, Any]]) -> None:
    """Write torch.compile's counts for this CPython into :data:`TORCH_FIGURES`."""
    data = json.loads(TORCH_FIGURES.read_text()) if TORCH_FIGURES.exists() else {}
    figures = data.setdefault(VERSION, {})
    for result in results:
        if "error" in result:
            continue
        counts = summary(result)
        figures[result["module"]] = {
            "tests": counts["tests"], "eager_passed": counts["eager_passed"],
            "passed": counts["passed"], "fullgraph_passed": counts["fullgraph"],
            "failed": counts["wrong"] + counts["timeouts"]}
    data[VERSION] = dict(sorted(figures.items()))
    TORCH_FIGURES.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")


def causes(results: list[dict[str, Any]]) -> collections.Counter:
    """Break causes over every test that passes eagerly, each test counted once per cause."""
    counted: collections.Counter = collections.Counter()
    for result in results:
        for test in result.get("tests", {}).values():
            counted.update(test.get("causes", ()))
    return counted


def table(results: list[dict[str, Any]], frontend: str, markdown: bool) -> str:
    """One row per module: tests, eager passes, then passes and fullgraph passes of ``frontend``
    and of torch.compile (recorded), and the wrong results."""
    reference = torch_figures()
    name = "graphlift" if frontend == "graphlift" else "torch.compile (this run)"
    head = ["module", "tests", "eager passes", f"{name} passes", "wrong", "timeouts",
            f"{name} fullgraph", "torch.compile passes", "torch.compile fullgraph"]
    rows = []
    totals: collections.Counter = collections.Counter()
    for result in results:
        if "error" in result:
            rows.append([result["module"], "error", result["error"][:60], *[""] * 6])
            continue
        counts = summary(result)
        torch_row = reference.get(result["module"], {})
        row = {"tests": counts["tests"], "eager": counts["eager_passed"],
               "passed": counts["passed"], "wrong": len(counts["wrong"]),
               "timeouts": len(counts["timeouts"]),
               "fullgraph": counts["fullgraph"], "torch": torch_row.get("passed", "-"),
               "torch_fullgraph": torch_row.get("fullgraph_passed", "-")}
        rows.append([result["module"], *row.values()])
        totals.update({key: value for key, value in row.items() if isinstance(value, int)})
    keys = ("tests", "eager", "passed", "wrong", "timeouts", "fullgraph", "torch",
            "torch_fullgraph")
    rows.append(["total", *(totals[key] for key in keys)])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(row[i])) for row in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths))
                     for row in [head, *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"modules of test (default: {MODULES})")
    parser.add_argument("--frontend", choices=("graphlift", "torch"), default="graphlift")
    parser.add_argument("--record", action="store_true",
                        help="with --frontend torch: write benchmarks/cpython_suite_torch.json")
    parser.add_argument("--timeout", type=float, default=TEST_TIMEOUT, help="seconds per test")
    parser.add_argument("--only", help="only tests whose id contains this")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--causes", type=int, default=10, help="top break causes to list")
    parser.add_argument("--json", help="write every module's outcomes to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = run_module(args.child, args.frontend, args.timeout, args.only)
        Path(args.out).write_text(json.dumps(result))
        return 0
    results = []
    for name in args.modules or MODULES:
        results.append(_run_child(name, args.frontend, args.timeout, args.only))
        print(f"{name}: {summary(results[-1]) if 'error' not in results[-1] else results[-1]}",
              file=sys.stderr, flush=True)
    if args.record and args.frontend == "torch":
        record(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(table(results, args.frontend, args.markdown))
    for result in results:
        counts = summary(result) if "error" not in result else {"wrong": [], "timeouts": []}
        for name in counts["wrong"] + counts["timeouts"]:
            print(f"{result['tests'][name]['outcome']}: {result['module']}.{name}: "
                  f"{result['tests'][name].get('message')}")
    if args.causes:
        print(f"\ntop break causes (tests, over {len(results)} modules):")
        for cause, count in causes(results).most_common(args.causes):
            print(f"{count:6d}  {cause}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
