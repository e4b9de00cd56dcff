"""Adds the ``new_obs`` column from episodes."""

from __future__ import annotations

from connectors.connector_v2 import ConnectorV2
from offline_rl.columns import Columns


class AddNextObservationsFromEpisodesToTrainBatch(ConnectorV2):
    """Adds, for each timestep, the observation that followed the action (``new_obs``), unless the
    batch already has that column.

    Examples:
        >>> from offline_rl import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0],
        ...                         len_lookback_buffer=0)
        >>> piece = AddNextObservationsFromEpisodesToTrainBatch()
        >>> piece(rl_module=None, batch={}, episodes=[ep])["new_obs"]
        [array([1, 2])]
    """

    needs_episodes = True

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        if Columns.NEXT_OBS in batch:
            return batch
        for episode in self.single_agent_episode_iterator(episodes):
            next_observations = episode.get_observations(slice(1, len(episode) + 1))
            self.add_n_batch_items(
                batch, Columns.NEXT_OBS, next_observations, len(episode), episode
            )
        return batch
