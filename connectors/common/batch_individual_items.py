"""Joins the per-episode chunks of every column into one array."""

from __future__ import annotations

from typing import Any

import numpy as np

from connectors.common.module_keys import is_module_keyed, single_module_id
from connectors.connector_v2 import ConnectorV2
from offline_rl.errors import ConfigError


class BatchIndividualItems(ConnectorV2):
    """Concatenates each column's list of per-episode chunks into a single numpy array.

    Columns that already are arrays are left as they are. Run with a ``MultiRLModule`` (as
    RLlib's learners run it), the batch ends keyed by the module's id, ``{module_id:
    columns}``, as RLlib's single-agent batches do (``multi_agent=False``, the only kind
    offline-rl trains; ``multi_agent=True`` is refused). With any other module the batch
    stays flat: offline-rl's learners take flat columns.

    Examples:
        >>> import numpy as np
        >>> batch = {"obs": [np.zeros((2, 4)), np.ones((3, 4))], "rewards": np.ones(5)}
        >>> out = BatchIndividualItems()(rl_module=None, batch=batch, episodes=[])
        >>> out["obs"].shape, out["rewards"].shape
        ((5, 4), (5,))
    """

    #: It closes the episode stage: it joins the chunks the episode pieces made.
    needs_episodes = True

    def __init__(self, input_observation_space=None, input_action_space=None, *,
                 multi_agent: bool = False, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        if multi_agent:
            raise ConfigError("BatchIndividualItems(multi_agent=True): offline-rl trains "
                              "single-agent modules; multi-agent training is not supported yet")
        self.multi_agent = multi_agent

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        if is_module_keyed(batch, rl_module):
            return {module_id: _joined(columns) for module_id, columns in batch.items()}
        module_id = single_module_id(rl_module)
        batch = _joined(batch)
        return batch if module_id is None else {module_id: batch}


def _joined(batch: dict[str, Any]) -> dict[str, Any]:
    for column, value in batch.items():
        if isinstance(value, list):
            batch[column] = np.concatenate(value) if value else np.empty(0)
    return batch
