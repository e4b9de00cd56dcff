"""Stopping Ray actors for good, and waiting until the resources they held are free again, so
that the next algorithm in the same Ray session finds them when a ``stop()`` returns.

Examples:
    >>> import ray
    >>> @ray.remote(num_cpus=0)
    ... class Idle:
    ...     pass
    >>> actors = [Idle.remote() for _ in range(2)]
    >>> kill_actors(actors)
    >>> ray.get(actors[0].__ray_ready__.remote())
    Traceback (most recent call last):
    ...
    ray.exceptions.ActorDiedError: ...
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import ray

from offline_rl.placement import available_cpus, usable_resources

if TYPE_CHECKING:
    import ray.data

#: Seconds ``kill_actors`` and ``wait_for_cpus`` wait at most.
STOP_WAIT_S = 30.0
_POLL_S = 0.05


def kill_actors(actors: Sequence[ray.actor.ActorHandle], timeout_s: float = STOP_WAIT_S) -> None:
    """Kills ``actors`` (no restarts) and waits, at most ``timeout_s``, until each is dead.

    Only for actors created without restarts (``max_restarts=0``, Ray's default): waiting on
    one that Ray may restart would ask Ray to rebuild it. Ray Data's own actors are killed with
    ``ray.kill`` and waited for with ``wait_for_cpus``."""
    for actor in actors:
        ray.kill(actor, no_restart=True)
    probes = [actor.__ray_ready__.remote() for actor in actors]
    ray.wait(probes, num_returns=len(probes), timeout=timeout_s)


def kill_split_coordinators(shards: Sequence[ray.data.DataIterator]) -> None:
    """Kills the Ray Data split coordinators behind ``streaming_split`` shards (one per split)
    and waits until they are dead: the execution each runs ends with it, the actors it created
    included (Ray ends actors with their owner), and a fetch that waits on one fails at once
    instead of waiting without end."""
    kill_actors(list(dict.fromkeys(shard._coord_actor for shard in shards)))


def wait_for_cpus(cpus: float, timeout_s: float = STOP_WAIT_S) -> None:
    """Waits, at most ``timeout_s``, until ``cpus`` CPUs are free for this run (capped at its
    total; ``offline_rl.placement``): those that just-killed actors held come back
    asynchronously."""
    wanted = min(cpus, usable_resources().get("CPU", 0))
    deadline = time.monotonic() + timeout_s
    while available_cpus() < wanted and time.monotonic() < deadline:
        time.sleep(_POLL_S)
