"""Compiler collectives (``config.enable_compiler_collectives``): ranks agree on automatic dynamic.

Each rank of a distributed program has its own cache, so a rank whose input has another size
than the others' (a last batch cut short) makes its own automatic-dynamic decision: one rank
compiles a static graph, another a dynamic one. With the setting on, every compile of a frame
(the first one too) exchanges what its first trace asked automatic dynamic about (sizes and ints
by source name, :class:`~graphlift.dynamic_shapes.SeenValues`) with the other ranks; a value that
differs between ranks becomes dynamic on all of them, and a rank whose trace had it static
traces again. So ranks that compile together compile the same graph.

The exchange goes through the default group's key-value store, not through a collective of the
group: a collective issued by one rank only (one rank recompiles, the others hit their cache)
would be paired with the next collective of the user's program on the others, a deadlock or a
wrong result. A store key waits at most ``config.compiler_collectives_timeout_s``; a rank that
waited in vain marks its round abandoned (a peer that comes later does not wait for it) and
decides alone, as without the setting. Rounds are counted per code object location, alike on
ranks that compile alike. torch.compile's setting all-gathers over a process group of its own,
which deadlocks when one rank compiles alone.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import torch

from graphlift import logs
from graphlift.config import config

ABANDONED = b"abandoned"  # a rank's value for a round it stopped waiting for
_rounds: dict[str, int] = {}  # code location -> rounds so far (never reset: ranks count alike)


def active() -> bool:
    """Whether compiles exchange their automatic-dynamic inputs with other ranks now."""
    if not config.enable_compiler_collectives or not torch.distributed.is_available():
        return False
    dist = torch.distributed
    return dist.is_initialized() and dist.get_world_size() > 1


def exchange(location: str, local: dict[str, Any]) -> list[dict[str, Any]]:
    """The other ranks' ``local`` for this round of ``location``; [] when one does not come
    within the timeout (a warning says so) or has given the round up."""
    dist = torch.distributed
    store = dist.PrefixStore("graphlift/compiler_collectives/",
                             dist.distributed_c10d._get_default_store())
    round_ = _rounds[location] = _rounds.get(location, 0) + 1
    rank, world = dist.get_rank(), dist.get_world_size()
    key = f"{location}#{round_}@{{}}".format
    store.set(key(rank), json.dumps(local))
    others = [key(peer) for peer in range(world) if peer != rank]
    try:
        store.wait(others, timedelta(seconds=config.compiler_collectives_timeout_s))
    except dist.DistStoreError:
        store.set(key(rank), ABANDONED)
        logs.warn(f"compiler collectives: rank {rank} waited "
                  f"{config.compiler_collectives_timeout_s} s in vain for the other ranks to "
                  f"compile {location} (round {round_}); it decides which sizes are dynamic "
                  f"alone (do all ranks compile this frame at the same time?)")
        return []
    values = store.multi_get(others)
    if any(value == ABANDONED for value in values):
        return []
    return [json.loads(value) for value in values]
