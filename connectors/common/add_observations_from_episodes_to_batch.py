"""Adds the ``obs`` column from episodes."""

from __future__ import annotations

from typing import Any

from connectors.connector_v2 import ConnectorV2
from offline_rl.columns import Columns
from offline_rl.errors import ConfigError
from offline_rl.formats.composite import is_composite


class AddObservationsFromEpisodesToBatch(ConnectorV2):
    """Adds observations to the batch unless ``obs`` is already there.

    As a learner connector it adds every observation an action was taken on (``len(episode)``
    rows per episode); otherwise it adds each episode's latest observation (one row per episode,
    for acting).

    Examples:
        >>> from offline_rl import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0],
        ...                         len_lookback_buffer=0)
        >>> piece = AddObservationsFromEpisodesToBatch(as_learner_connector=True)
        >>> piece(rl_module=None, batch={}, episodes=[ep])["obs"]
        [array([0, 1])]
    """

    needs_episodes = True

    def __init__(self, input_observation_space=None, input_action_space=None, *,
                 as_learner_connector: bool = False, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.as_learner_connector = as_learner_connector

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        if Columns.OBS in batch:
            return batch
        if is_composite(self.input_observation_space):
            raise ConfigError(
                f"the observation space {self.input_observation_space} holds Dict/Tuple "
                "values, which a train batch cannot carry as they are: add the "
                "FlattenObservations connector (config.training(learner_connector="
                "FlattenObservations)) to flatten them")
        for episode in self.single_agent_episode_iterator(episodes):
            if self.as_learner_connector:
                observations = episode.get_observations(slice(0, len(episode)))
                self.add_n_batch_items(batch, Columns.OBS, observations, len(episode), episode)
            else:
                observation = episode.get_observations(-1)
                self.add_n_batch_items(batch, Columns.OBS, [observation], 1, episode)
        return batch
