"""The ``graphlift`` command: ``graphlift doctor [--json] [--html FILE] SCRIPT [ARGS...]``.

Also ``python -m graphlift doctor ...``. The exit status is the script's own (0 when it ran).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from graphlift import doctor


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
    doctor_parser.add_argument("script", nargs="?", help="the Python script to run")
    doctor_parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(argv)
    if options.command is None or options.script is None:  # nothing to do: say how to use it
        (parser if options.command is None else doctor_parser).print_help(sys.stderr)
        return 2
    if not os.path.isfile(options.script):
        doctor_parser.error(f"no such script: {options.script}")
    return _doctor(options)


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
