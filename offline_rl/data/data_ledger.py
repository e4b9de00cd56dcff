"""``DataLedger``: where PreLearner actors count what they drop or note in the data, claim
episode ids, and register themselves, for the driver to report and to stop them."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence

import ray

#: Ledger entries that count data dropped from training (the others count data kept).
DROP_REASONS = ("duplicate_episodes", "empty_episodes", "nonfinite_episodes", "nonfinite_rows",
                "out_of_bounds_episodes", "out_of_bounds_rows", "skipped_files")


@ray.remote(num_cpus=0)
class DataLedger:
    """Totals by reason (``duplicate_episodes``, ``nonfinite_rows``, ``actions_out_of_bounds``,
    ...), the file each episode id was first read from, so that the same episode in two files
    is caught even when different PreLearner actors read them, and the PreLearner actors of the
    pipeline, so that stopping it can release them (an actor still being created when the
    pipeline stops registers later, and fails to once the ledger is gone).

    The driver learns of new counts without asking in every iteration: it keeps one
    ``totals_after(version)`` call waiting, which the ledger answers as soon as counts change.
    A PreLearner adds its counts before it returns the batch they concern, so the answer is
    on its way before that batch reaches a learner.

    Examples:
        >>> ledger = DataLedger.remote()
        >>> ray.get(ledger.claim.remote(["a", "b"], ["x.parquet"] * 2))
        [False, False]
        >>> ray.get(ledger.claim.remote(["b"], ["y.parquet"]))
        [True]
        >>> ray.get(ledger.add.remote({"duplicate_episodes": 1}))
        >>> ray.get(ledger.totals.remote())
        {'duplicate_episodes': 1}
        >>> ray.get(ledger.totals_after.remote(0))
        (1, {'duplicate_episodes': 1})
        >>> ray.kill(ledger)
    """

    def __init__(self) -> None:
        self._totals: Counter[str] = Counter()
        self._version = 0
        self._changed = asyncio.Event()
        self._sources: dict[str, str] = {}
        self._open: set[str] = set()
        self._ended: set[str] = set()
        self._actors: list[bytes] = []

    def register(self, pickled_actor: bytes) -> None:
        """Records a PreLearner actor of the pipeline, as its pickled handle: the ledger never
        unpickles it (unpickling a handle imports its class, Ray Data's, so all of Ray Data:
        about a second that every pipeline's start would wait for), the driver does."""
        self._actors.append(pickled_actor)

    def actors(self) -> list[bytes]:
        """The pickled handles of the PreLearner actors registered so far
        (``registered_actors`` unpickles them)."""
        return list(self._actors)

    def add(self, counts: Mapping[str, int]) -> None:
        """Adds ``counts`` to the totals."""
        self._totals.update(counts)
        self._changed_now()

    def note_episodes(self, open_ids: Sequence[str], ended_ids: Sequence[str]) -> None:
        """Records episodes read without their end (``open_ids``) and ends read
        (``ended_ids``), whichever comes first: the episodes seen open and never ended are
        the ``unfinished_episodes`` of the totals (exact once a whole epoch has been read)."""
        self._ended.update(ended_ids)
        closed = self._open.intersection(ended_ids)
        opened = set(open_ids) - self._ended - self._open
        self._open -= closed
        self._open |= opened
        if closed or opened:
            self._changed_now()

    def _changed_now(self) -> None:
        """Wakes the waiting ``totals_after`` calls."""
        self._version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def totals(self) -> dict[str, int]:
        """The totals so far."""
        unfinished = {"unfinished_episodes": len(self._open)} if self._open else {}
        return {**self._totals, **unfinished}

    async def totals_after(self, version: int) -> tuple[int, dict[str, int]]:
        """``(version, totals)`` once the totals are newer than ``version`` (at once if they
        already are)."""
        while self._version == version:
            await self._changed.wait()
        return self._version, self.totals()

    def claim(self, episode_ids: Sequence[str], sources: Sequence[str]) -> list[bool]:
        """Records where each episode was read; True for an id already read from another
        source (a duplicate). Reading the same source again (a later epoch) is no duplicate."""
        duplicates = []
        for episode_id, source in zip(episode_ids, sources):
            first = self._sources.setdefault(episode_id, source)
            duplicates.append(first != source)
        return duplicates


class LedgerClient:
    """What a PreLearner reports to its pipeline's ``DataLedger`` (``ledger``, an actor
    handle): counts, episodes seen open or ended, and episode ids claimed. With no ledger
    (``None``: a PreLearner run in this process) nothing is reported and nothing is claimed.

    Examples:
        >>> client = LedgerClient(None)
        >>> client.count({"nonfinite_rows": 2})
        >>> client.claim(["a", "b"], ["x.parquet"] * 2)
        [False, False]
    """

    def __init__(self, ledger: ray.actor.ActorHandle | None) -> None:
        self.ledger = ledger
        #: The episode ids this client has noted open, and ended: the ledger's record of
        #: them only grows, so noting one again changes nothing and is not sent (a part
        #: mapped again in a later epoch sends nothing).
        self._noted_open: set[str] = set()
        self._noted_ended: set[str] = set()

    def register(self) -> None:
        """Registers the calling actor with the ledger, so ``OfflineData.stop()`` can kill it;
        when the ledger is gone, the pipeline was stopped while this actor was starting, and
        the actor exits (giving its resources back) instead of idling. Outside an actor, or
        without a ledger: nothing."""
        if self.ledger is None or ray.get_runtime_context().get_actor_id() is None:
            return
        try:
            ray.get(self.ledger.register.remote(
                ray.cloudpickle.dumps(ray.get_runtime_context().current_actor)))
        except ray.exceptions.RayActorError:
            ray.actor.exit_actor()

    def count(self, counts: Mapping[str, int]) -> None:
        """Adds the nonzero ``counts`` to the ledger's totals."""
        counts = {name: count for name, count in counts.items() if count}
        if counts and self.ledger is not None:
            ray.get(self.ledger.add.remote(counts))

    def note_episodes(self, open_ids: Sequence[str], ended_ids: Sequence[str]) -> None:
        """Notes episodes read without their end and ends read (``DataLedger.note_episodes``),
        sending only those this client has not noted before."""
        if self.ledger is None:
            return
        ended_ids = [id_ for id_ in ended_ids if id_ not in self._noted_ended]
        open_ids = [id_ for id_ in open_ids
                    if id_ not in self._noted_open and id_ not in self._noted_ended]
        if open_ids or ended_ids:
            ray.get(self.ledger.note_episodes.remote(open_ids, ended_ids))
            self._noted_open.update(open_ids)
            self._noted_ended.update(ended_ids)

    def claim(self, episode_ids: Sequence[str], sources: Sequence[str]) -> list[bool]:
        """For each episode, whether another source already holds it, as the ledger has seen
        across actors (``DataLedger.claim``)."""
        if self.ledger is None or not episode_ids:
            return [False] * len(episode_ids)
        return ray.get(self.ledger.claim.remote(episode_ids, sources))


def registered_actors(ledger: ray.actor.ActorHandle) -> list[ray.actor.ActorHandle]:
    """The handles of the PreLearner actors registered with ``ledger`` so far. The bytes
    unpickled are only ever those ``LedgerClient.register`` pickled in an actor of this
    pipeline, passed on by Ray (which pickles every actor call's arguments alike): nothing
    read from a file, a config or a checkpoint reaches them.

    Examples:
        >>> ledger = DataLedger.remote()
        >>> ray.get(ledger.register.remote(ray.cloudpickle.dumps(ledger)))
        >>> registered_actors(ledger) == [ledger]
        True
        >>> ray.kill(ledger)
    """
    return [ray.cloudpickle.loads(pickled) for pickled in ray.get(ledger.actors.remote())]
