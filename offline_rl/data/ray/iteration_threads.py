"""Ray Data's ``iter_batches`` threads: noting those a consumer's fetches start, and waiting
for them when it stops.

A pass's iteration threads (named ``RAY_DATA_ITERATION_THREAD``) end shortly after the pass,
cleaning up through Ray as they do; one still running at ``ray.shutdown()`` ends the whole
process ("The core worker has already been shutdown"). Ray Data keeps no handle on them, so an
``IterationThreads`` notes those that start while its owner fetches. Owners fetching at once
(the sources of a mix, a multi-agent run's modules) each note the others' threads too, so
``release`` waits only for those no other watching owner noted: the last one released waits
for them all.

Examples:
    >>> import ray.data
    >>> watch = IterationThreads().watch()
    >>> [len(batch["id"]) for batch in watch.fetches(
    ...     ray.data.range(4).iter_batches(batch_size=2))]
    [2, 2]
    >>> watch.release(wait_s=2.0)
    >>> any(thread.is_alive() for thread in watch.threads)
    False
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Collection, Iterable, Iterator
from typing import TypeVar

#: The name Ray Data gives the threads that run an ``iter_batches`` pass.
RAY_DATA_ITERATION_THREAD = "iter_threaded"

Item = TypeVar("Item")


class IterationThreads:
    """The Ray Data iteration threads that started while its owner fetched."""

    def __init__(self) -> None:
        self.threads: set[threading.Thread] = set()

    def watch(self) -> IterationThreads:
        """Counts this owner among those fetching (see ``release``); returns ``self``."""
        with _WATCHING_LOCK:
            _WATCHING.add(self)
        return self

    def fetches(self, items: Iterable[Item]) -> Iterator[Item]:
        """``items``, noting the iteration threads that start during each fetch (an
        ``iter_batches`` pass starts them in its first one)."""
        iterator = iter(items)
        while True:
            before = set(threading.enumerate())
            try:
                item = next(iterator, None)
            finally:
                started = {thread for thread in threading.enumerate()  # alive: joinable
                           if thread.name == RAY_DATA_ITERATION_THREAD and thread not in before
                           and thread.is_alive()}
                if started:
                    self.threads = {thread for thread in self.threads
                                    if thread.is_alive()} | started
            if item is None:
                return
            yield item

    def release(self, wait_s: float) -> None:
        """Stops watching and waits (at most ``wait_s``) for the threads noted that no other
        watching owner noted too."""
        with _WATCHING_LOCK:
            _WATCHING.discard(self)
            others = set().union(*(watch.threads for watch in _WATCHING))
        join_threads(self.threads - others, wait_s)


#: The owners watching, whose threads another's ``release`` leaves to them.
_WATCHING: weakref.WeakSet[IterationThreads] = weakref.WeakSet()
_WATCHING_LOCK = threading.Lock()


def join_threads(threads: Collection[threading.Thread], timeout_s: float) -> None:
    """Waits until ``threads`` have ended, at most ``timeout_s`` in all.

    Examples:
        >>> done = threading.Thread(target=time.sleep, args=(0.01,))
        >>> done.start()
        >>> join_threads([done], timeout_s=2.0)
        >>> done.is_alive()
        False
    """
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
