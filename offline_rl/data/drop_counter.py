"""``DropCounter``: where PreLearner actors count the data they drop, for the driver to report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import ray


@ray.remote(num_cpus=0)
class DropCounter:
    """Totals of dropped data by reason (``duplicate_episodes``, ``nonfinite_rows``, ...).

    Example:
        >>> counter = DropCounter.remote()                        # doctest: +SKIP
        >>> ray.get(counter.add.remote({"duplicate_episodes": 2}))  # doctest: +SKIP
        >>> ray.get(counter.totals.remote())                       # doctest: +SKIP
        {'duplicate_episodes': 2}
    """

    def __init__(self) -> None:
        self._totals: Counter[str] = Counter()

    def add(self, counts: Mapping[str, int]) -> None:
        """Adds ``counts`` to the totals."""
        self._totals.update(counts)

    def totals(self) -> dict[str, int]:
        """The totals so far."""
        return dict(self._totals)
