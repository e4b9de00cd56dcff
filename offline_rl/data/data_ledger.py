"""``DataLedger``: where PreLearner actors count what they drop or note in the data, claim
episode ids, and register themselves, for the driver to report and to stop them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import ray

#: Ledger entries that count data dropped from training (the others count data kept).
DROP_REASONS = ("duplicate_episodes", "empty_episodes", "nonfinite_episodes", "nonfinite_rows",
                "out_of_bounds_episodes", "out_of_bounds_rows")


@ray.remote(num_cpus=0)
class DataLedger:
    """Totals by reason (``duplicate_episodes``, ``nonfinite_rows``, ``actions_out_of_bounds``,
    ...), the file each episode id was first read from, so that the same episode in two files
    is caught even when different PreLearner actors read them, and the PreLearner actors of the
    pipeline, so that stopping it can release them (an actor still being created when the
    pipeline stops registers later, and fails to once the ledger is gone).

    Example:
        >>> ledger = DataLedger.remote()
        >>> ray.get(ledger.claim.remote(["a", "b"], ["x.parquet"] * 2))
        [False, False]
        >>> ray.get(ledger.claim.remote(["b"], ["y.parquet"]))
        [True]
        >>> ray.get(ledger.add.remote({"duplicate_episodes": 1}))
        >>> ray.get(ledger.totals.remote())
        {'duplicate_episodes': 1}
        >>> ray.kill(ledger)
    """

    def __init__(self) -> None:
        self._totals: Counter[str] = Counter()
        self._sources: dict[str, str] = {}
        self._actors: list[ray.actor.ActorHandle] = []

    def register(self, actor: ray.actor.ActorHandle) -> None:
        """Records a PreLearner actor of the pipeline."""
        self._actors.append(actor)

    def actors(self) -> list[ray.actor.ActorHandle]:
        """The PreLearner actors registered so far."""
        return list(self._actors)

    def add(self, counts: Mapping[str, int]) -> None:
        """Adds ``counts`` to the totals."""
        self._totals.update(counts)

    def totals(self) -> dict[str, int]:
        """The totals so far."""
        return dict(self._totals)

    def claim(self, episode_ids: Sequence[str], sources: Sequence[str]) -> list[bool]:
        """Records where each episode was read; True for an id already read from another
        source (a duplicate). Reading the same source again (a later epoch) is no duplicate."""
        duplicates = []
        for episode_id, source in zip(episode_ids, sources):
            first = self._sources.setdefault(episode_id, source)
            duplicates.append(first != source)
        return duplicates
