"""Joins the per-episode chunks of every column into one array."""

from __future__ import annotations

import numpy as np

from connectors.connector_v2 import ConnectorV2


class BatchIndividualItems(ConnectorV2):
    """Concatenates each column's list of per-episode chunks into a single numpy array.

    Columns that already are arrays are left as they are.

    Example:
        >>> import numpy as np
        >>> batch = {"obs": [np.zeros((2, 4)), np.ones((3, 4))], "rewards": np.ones(5)}
        >>> out = BatchIndividualItems()(rl_module=None, batch=batch, episodes=[])
        >>> out["obs"].shape, out["rewards"].shape
        ((5, 4), (5,))
    """

    #: It closes the episode stage: it joins the chunks the episode pieces made.
    needs_episodes = True

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        for column, value in batch.items():
            if isinstance(value, list):
                batch[column] = np.concatenate(value) if value else np.empty(0)
        return batch
