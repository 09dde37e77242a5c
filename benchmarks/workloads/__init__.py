"""End-to-end training workloads: eager, graphlift and torch.compile, each in its own process.

Small training runs on the CPU, tiny sizes, 20 steps by default, one OpenMP thread, the same
backend for both compilers (``aot_eager``: the backward traced by AOTAutograd, no inductor).
Each workload is written once (a function of a :class:`~benchmarks.workloads.steps.Run`) and run
three times, in three fresh processes; the driver compares each step's loss with eager's and
prints graphs, breaks and recompiles of both compilers, and the first and steady-state step
times as multiples of eager's.

The rooms, in the order data flows:

- ``run.py``: the driver (``python -m benchmarks.workloads``), the table and its notes;
- ``child.py``: one workload under one system, in its process, reported as one JSON line;
- ``systems.py``: how each system sets its process up, and reads back what it counted;
- ``catalog.py``: every workload by name;
- ``llama.py``, ``libraries.py``, ``cnn.py``: the workloads (a tiny LLaMA compiled as a model or
  as a whole train step, with gradient checkpointing, with variable lengths; transformers'
  ``Trainer``, Lightning and accelerate compiling it themselves; a CNN with BatchNorm, Dropout,
  bfloat16 autocast and channels_last);
- ``steps.py``: what a workload is given: how to compile, and the log of its steps.

Run from the checkout's root: ``python -m benchmarks.workloads --help``.
"""
