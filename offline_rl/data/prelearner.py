"""``OfflinePreLearner``: the Ray Data actor that turns rows into train batches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import pyarrow as pa

from connectors.learner import DEFAULT_LEARNER_PIECES
from offline_rl.columns import SCHEMA, Columns
from offline_rl.data.tabular import (
    resolve_schema,
    rows_to_episodes,
    rows_to_train_columns,
    table_to_numpy,
    train_column_names,
)
from offline_rl.episode import SingleAgentEpisode

#: Bookkeeping columns episodes are built with (agent and module ids are not: single-agent).
EPISODE_BOOKKEEPING = (Columns.EPS_ID, Columns.T, Columns.INFOS)

if TYPE_CHECKING:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig


class OfflinePreLearner:
    """Maps a batch of tabular rows to a flat dict of numpy train columns.

    Ray Data runs one instance per actor of the ``map_batches`` pool. Rows become
    ``SingleAgentEpisode``s (``_map_to_episodes``), which the learner connector pipeline turns
    into columns. When neither is customized, the same output is computed column by column
    without building per-row objects. Subclasses override ``_map_to_episodes`` or ``__call__``
    (RLlib's extension points) and are named with ``offline_data(prelearner_class=...)``.

    Example:
        >>> import gymnasium as gym, numpy as np, pyarrow as pa
        >>> from offline_rl import BCConfig
        >>> config = BCConfig().environment("CartPole-v1")
        >>> spaces = (gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(2))
        >>> rows = pa.table({"obs": [[0.0, 0.1]], "new_obs": [[0.2, 0.3]], "actions": [1],
        ...                  "rewards": [1.0], "terminateds": [True]})
        >>> OfflinePreLearner(config, spaces)(rows)["new_obs"]
        array([[0.2, 0.3]], dtype=float32)
    """

    def __init__(self, config: AlgorithmConfig, spaces: tuple[gym.Space, gym.Space],
                 **kwargs: Any):
        self.config = config
        self.observation_space, self.action_space = spaces
        self.schema = resolve_schema(config.input_read_schema)
        self._learner_connector = config.build_learner_connector(*spaces)
        self._vectorized = (
            type(self)._map_to_episodes.__func__ is OfflinePreLearner._map_to_episodes.__func__
            and all(type(piece) in DEFAULT_LEARNER_PIECES for piece in self._learner_connector)
        )

    def __call__(self, batch: pa.Table | Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Rows (an Arrow table or a dict of numpy columns) -> train columns."""
        if isinstance(batch, pa.Table):
            rows = table_to_numpy(batch, self._columns_to_read(batch.column_names))
        else:
            rows = dict(batch)
        if self._vectorized:
            return rows_to_train_columns(rows, self.schema, self.observation_space)
        episodes = self._map_to_episodes(
            False, rows, schema=self.schema,
            observation_space=self.observation_space, action_space=self.action_space,
        )["episodes"]
        return self._learner_connector(
            rl_module=None, batch={}, episodes=episodes, shared_data={}, metrics={}
        )

    def _columns_to_read(self, column_names: list[str]) -> list[str]:
        names = train_column_names(column_names, self.schema)
        if not self._vectorized:
            names += [self.schema[field] for field in EPISODE_BOOKKEEPING
                      if self.schema[field] in column_names]
        return names

    @classmethod
    def _map_to_episodes(
        cls,
        is_multi_agent: bool,
        batch: Mapping[str, np.ndarray],
        schema: Mapping[str, str] = SCHEMA,
        to_numpy: bool = True,
        input_compress_columns: list[str] | None = None,
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        **kwargs: Any,
    ) -> dict[str, list[SingleAgentEpisode]]:
        """Rows -> ``{"episodes": [...]}``, one single-step episode per row (RLlib's signature)."""
        if is_multi_agent:
            raise ValueError("offline-rl reads single-agent data; got is_multi_agent=True")
        return {"episodes": rows_to_episodes(batch, schema, observation_space, action_space)}
