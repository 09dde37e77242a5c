"""The ``graphlift`` command: ``doctor`` reports on a script, ``run`` runs it under graphlift.

``graphlift doctor [--json] [--html FILE] SCRIPT [ARGS...]`` and ``graphlift run SCRIPT
[ARGS...]`` (also ``python -m graphlift ...``). The exit status is the script's own (0 when it
ran).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from collections.abc import Sequence

from graphlift import doctor
from graphlift.dropin import INSTALL_ENV, install


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the command; returns the exit status."""
    parser = argparse.ArgumentParser(prog="graphlift", description="graphlift's command line.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor_parser = commands.add_parser(
        "doctor", help="run a script and report graph breaks, recompiles and time",
        usage="graphlift doctor [-h] [--json] [--html FILE] SCRIPT [ARGS...]",
        description="Run SCRIPT in a fresh process with graphlift's recording on, then report, "
                    "in the order to fix them: graph breaks, recompiles, time.")
    doctor_parser.add_argument("--json", action="store_true",
                               help="print the report as JSON (the script's output goes to stderr)")
    doctor_parser.add_argument("--html", metavar="FILE",
                               help="also write the report as a self-contained HTML page")
    run_parser = commands.add_parser(
        "run", help="run a script with torch.compile routed through graphlift",
        usage="graphlift run [-h] SCRIPT [ARGS...]",
        description="Run SCRIPT in this process after graphlift.install(): its torch.compile "
                    "and nn.Module.compile calls, and its libraries', compile with graphlift. "
                    f"{INSTALL_ENV}=1 is set for the processes it starts.")
    for sub in (doctor_parser, run_parser):
        sub.add_argument("script", nargs="?", help="the Python script to run")
        sub.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(argv)
    if options.command is None or options.script is None:  # nothing to do: say how to use it
        (parser if options.command is None else commands.choices[options.command]).print_help(
            sys.stderr)
        return 2
    if not os.path.isfile(options.script):
        commands.choices[options.command].error(f"no such script: {options.script}")
    return _doctor(options) if options.command == "doctor" else _run(options)


def _run(options: argparse.Namespace) -> int:
    """Run the script as ``python SCRIPT ARGS`` would, with graphlift installed."""
    os.environ[INSTALL_ENV] = "1"
    install()
    sys.argv = [options.script, *options.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(options.script)))
    try:
        runpy.run_path(options.script, run_name="__main__")
    except SystemExit as exit_request:
        code = exit_request.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    return 0


def _doctor(options: argparse.Namespace) -> int:
    # With --json, stdout carries only the report: the script's own output goes to stderr.
    report = doctor.run(options.script, options.args,
                        stdout=sys.stderr.fileno() if options.json else None)
    if options.html:
        doctor.write_html(report, options.html)
    if options.json:
        sys.stdout.write(doctor.format_json(report))
    else:
        sys.stdout.write(doctor.format_text(report))
        if options.html:
            sys.stdout.write(f"HTML report: {options.html}\n")
    sys.stdout.flush()
    return doctor.exit_status(report)


if __name__ == "__main__":
    sys.exit(main())
