"""Stopping offline-rl's background work before ``ray.shutdown()``.

RLlib's tests and many scripts end with ``ray.shutdown()`` and never stop the algorithm. A
data stream still at work in its thread then calls Ray while it shuts down, and Ray ends the
whole process ("The core worker has already been shutdown ... The process will exit"), or
its auto-init starts a new local instance from that thread, which kills the process a minute
later ("Failed to connect to GCS within 60 seconds"). Ray offers no hook on shutdown, so
``ray.shutdown`` is wrapped, once, to run the registered stops first.

Examples:
    >>> import gc, ray
    >>> stop_before_ray_shutdown(gc.collect)  # ray.shutdown() now collects garbage first
    >>> ray.shutdown.__name__, getattr(ray.shutdown, _MARK)
    ('shutdown', True)
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import ray

_LOCK = threading.Lock()
_STOPS: list[Callable[[], None]] = []
#: Set on the wrapper, so that ``ray.shutdown`` is wrapped once.
_MARK = "_offline_rl_stops_first"


def stop_before_ray_shutdown(stop: Callable[[], None]) -> None:
    """Has ``ray.shutdown()`` call ``stop`` first (each function registered once)."""
    with _LOCK:
        if stop in _STOPS:
            return
        _STOPS.append(stop)
        if not getattr(ray.shutdown, _MARK, False):
            ray.shutdown = _stopping_first(ray.shutdown)


def _stopping_first(shutdown: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(shutdown)
    def stopping_first(*args: Any, **kwargs: Any) -> Any:
        for stop in list(_STOPS):
            stop()
        return shutdown(*args, **kwargs)

    setattr(stopping_first, _MARK, True)
    return stopping_first
