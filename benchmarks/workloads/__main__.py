"""``python -m benchmarks.workloads``: the driver (:mod:`benchmarks.workloads.run`)."""

from benchmarks.workloads.run import main

main()
