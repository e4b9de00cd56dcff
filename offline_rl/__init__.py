"""offline-rl: train RL policies from logged experience, streamed from Parquet through Ray Data
into torch learners, with RLlib's offline API.

Names are imported on first use, so that Ray Data workers, which unpickle configs and
PreLearners, never import torch or the algorithm code they do not run.

Example:
    >>> from offline_rl import BCConfig, Columns
    >>> Columns.OBS
    'obs'
"""

from __future__ import annotations

import importlib
from typing import Any

from offline_rl.columns import SCHEMA, Columns
from offline_rl.names import (
    COMPONENT_LEARNER,
    COMPONENT_LEARNER_GROUP,
    COMPONENT_RL_MODULE,
    DEFAULT_MODULE_ID,
    ENV_RUNNER_RESULTS,
    EPISODE_RETURN_MEAN,
    EVALUATION_RESULTS,
)

__version__ = "0.1.0"

_LAZY = {
    "AlgorithmConfig": "offline_rl.algorithms.algorithm_config",
    "Algorithm": "offline_rl.algorithms.algorithm",
    "BCConfig": "offline_rl.algorithms.bc",
    "BC": "offline_rl.algorithms.bc",
    "LearnerGroup": "offline_rl.core.learner_group",
    "OfflineData": "offline_rl.data.offline_data",
    "OfflinePreLearner": "offline_rl.data.prelearner",
    "SingleAgentEpisode": "offline_rl.episodes.episode",
    "EpisodeReplayBuffer": "offline_rl.episodes.replay_buffer",
    "RLModuleSpec": "offline_rl.models.rl_module_spec",
    "DefaultModelConfig": "offline_rl.models.model_config",
}

__all__ = [
    "COMPONENT_LEARNER",
    "COMPONENT_LEARNER_GROUP",
    "COMPONENT_RL_MODULE",
    "DEFAULT_MODULE_ID",
    "ENV_RUNNER_RESULTS",
    "EPISODE_RETURN_MEAN",
    "EVALUATION_RESULTS",
    "SCHEMA",
    "Columns",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'offline_rl' has no attribute {name!r}")
