"""``DataConfig``: what the data pipeline reads, maps and iterates, and nothing else.

``AlgorithmConfig.data_config(spaces)`` builds it; the data layer (``OfflineData``, the
PreLearners, the readers) never sees the algorithm's config. Fields keep RLlib's
``offline_data()`` names, so a custom PreLearner reads ``self.config.input_read_schema`` as it
would in RLlib. It is sent to every PreLearner actor: unpickling it imports neither torch nor
any algorithm.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from connectors import ConnectorPipelineV2, default_learner_pipeline
from offline_rl.models.rl_module_spec import RLModuleSpec


@dataclass
class DataConfig:
    """The data layer's settings (see ``AlgorithmConfig.offline_data`` for each field).

    Example:
        >>> import gymnasium as gym
        >>> config = DataConfig(input_="data/cartpole-expert", train_batch_size_per_learner=256)
        >>> config.reads_episodes
        False
        >>> pipeline = config.build_learner_connector(gym.spaces.Box(-1, 1, (4,)),
        ...                                           gym.spaces.Discrete(2))
        >>> [piece.name for piece in pipeline][-1]
        'BatchIndividualItems'
    """

    input_: str | list[str] | None = None
    input_read_method: str | Callable[..., Any] = "read_parquet"
    input_read_method_kwargs: dict[str, Any] = field(default_factory=dict)
    input_read_schema: dict[str, str] = field(default_factory=dict)
    input_read_episodes: bool = False
    input_read_sample_batches: bool = False
    input_read_batch_size: int | None = None
    input_filesystem: Any = None
    input_filesystem_kwargs: dict[str, Any] = field(default_factory=dict)
    input_compress_columns: list[str] = field(default_factory=list)
    input_nonfinite: str = "raise"
    input_obs_bounds: str = "raise"
    input_action_bounds: str = "keep"
    materialize_data: bool = False
    materialize_mapped_data: bool = True
    map_batches_kwargs: dict[str, Any] = field(default_factory=dict)
    iter_batches_kwargs: dict[str, Any] = field(default_factory=dict)
    #: The PreLearner class (``OfflinePreLearner`` when ``None``).
    prelearner_class: type | None = None
    #: The PreLearners' episode buffer class (``EpisodeReplayBuffer`` when ``None``).
    prelearner_buffer_class: type | None = None
    prelearner_buffer_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Extra keyword arguments of the PreLearner's constructor and ``_map_to_episodes``.
    prelearner_kwargs: dict[str, Any] = field(default_factory=dict)
    prelearner_module_synch_period: int = 10
    dataset_num_iters_per_learner: int | None = None
    #: Steps per sampled transition of episode inputs (TD algorithms' ``n_step``), and the
    #: discount of the rewards summed over them.
    n_step: int = 1
    gamma: float = 0.99
    train_batch_size_per_learner: int = 1024
    seed: int | None = None
    #: The learner connector pipeline, built by the algorithm's config for the data's spaces.
    learner_pipeline: ConnectorPipelineV2 | None = None
    #: The policy module's spec, for connector pieces that need the module.
    rl_module_spec: RLModuleSpec | None = None

    @property
    def reads_episodes(self) -> bool:
        """Whether the input holds whole episodes (msgpack episodes or SampleBatch JSON)."""
        return self.input_read_episodes or self.input_read_sample_batches

    def build_learner_connector(self, input_observation_space: gym.Space | None,
                                input_action_space: gym.Space | None,
                                device: Any = None) -> ConnectorPipelineV2:
        """A fresh copy of the learner connector pipeline (RLlib's name for building it); the
        default pipeline when the config holds none."""
        if self.learner_pipeline is None:
            return default_learner_pipeline(input_observation_space, input_action_space)
        return copy.deepcopy(self.learner_pipeline)


def as_data_config(config: Any, spaces: tuple[gym.Space, gym.Space]) -> DataConfig:
    """``config`` itself when it is a ``DataConfig``; else an algorithm's config (as RLlib's
    PreLearners and ``OfflineData`` take), whose ``data_config(spaces)`` is used."""
    return config if isinstance(config, DataConfig) else config.data_config(spaces)
