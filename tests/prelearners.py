"""A custom PreLearner for tests (imported by Ray Data workers by its module path)."""

from __future__ import annotations

from offline_rl import OfflinePreLearner


class NegatedRewards(OfflinePreLearner):
    """Maps rows as usual, then negates the rewards."""

    def __call__(self, batch):
        columns = super().__call__(batch)
        columns["rewards"] = -columns["rewards"]
        return columns
