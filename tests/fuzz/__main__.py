"""``python -m tests.fuzz --programs N --seed S``: run a campaign and print its report.

Program ``k`` of a run has seed ``S + k``, so ``--seed K --programs 1`` reruns one program;
``--show`` prints it. ``--generator V`` picks the generator version (the newest by default; a
seed's program is fixed within a version). The exit status is 1 when compiled and eager
differed anywhere.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

from .campaign import fuzz  # noqa: E402
from .versions import BUILDERS, LATEST, generate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--programs", type=int, default=200, help="how many programs (200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the first program (0)")
    parser.add_argument("--generator", type=int, default=LATEST, choices=sorted(BUILDERS),
                        help=f"generator version ({LATEST}, the newest)")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds per call before a compiled call counts as hung (20)")
    parser.add_argument("--minimize-seconds", type=float, default=60.0,
                        help="time to shrink each difference group's first program (60)")
    parser.add_argument("--max-minimized", type=int, default=10,
                        help="how many difference groups get a minimized repro (10)")
    parser.add_argument("--show", action="store_true", help="print each program before running")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    seeds = range(args.seed, args.seed + args.programs)
    if args.show:
        for seed in seeds:
            program = generate(seed, args.generator)
            print(f"# seed {seed}\n{program.source}")
            for variant in program.calls:
                mode = program.ambient[variant] if program.ambient else ""
                call = f"{program.entry}(*args, **kwargs)"
                print(program.variants[variant] + "\n" + (f"with {mode}:\n    {call}\n"
                                                          if mode else call + "\n"))
    report = fuzz(seeds, version=args.generator, timeout=args.timeout,
                  minimize_seconds=args.minimize_seconds, max_minimized=args.max_minimized,
                  progress=not args.quiet)
    print(report.render())
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
