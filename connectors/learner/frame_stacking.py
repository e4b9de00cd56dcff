"""``FrameStackingLearner``: each timestep's observation stacked with the ones before it."""

from __future__ import annotations

from typing import Any

import numpy as np

from connectors.connector_v2 import ConnectorV2
from offline_rl.columns import Columns


class FrameStackingLearner(ConnectorV2):
    """Adds ``obs`` (and ``new_obs``) as the last ``num_frames`` observations of each timestep,
    concatenated along the last axis (an ``(84, 84, 1)`` frame becomes ``(84, 84, 4)``); before
    an episode's start, its first observation stands in. Place it before the default pieces,
    which then keep its columns. The module's observation space is the stacked one.

    Examples:
        >>> from offline_rl import SingleAgentEpisode
        >>> episode = SingleAgentEpisode(observations=[[0.0], [1.0], [2.0]], actions=[0, 1],
        ...                              rewards=[0.0, 1.0], len_lookback_buffer=0)
        >>> batch = FrameStackingLearner(num_frames=2)(rl_module=None, batch={},
        ...                                            episodes=[episode])
        >>> batch["obs"][0].tolist(), batch["new_obs"][0].tolist()
        ([[0.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 2.0]])
    """

    needs_episodes = True

    def __init__(self, input_observation_space=None, input_action_space=None, *,
                 num_frames: int = 1, **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        if not isinstance(num_frames, int) or num_frames < 1:
            raise ValueError(f"num_frames must be an int >= 1, got {num_frames!r}")
        self.num_frames = num_frames

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        for episode in self.single_agent_episode_iterator(episodes):
            observations = np.asarray(episode.get_observations())
            padded = np.concatenate([np.repeat(observations[:1], self.num_frames - 1, axis=0),
                                     observations])
            stacked = np.concatenate([padded[i:i + len(observations)]
                                      for i in range(self.num_frames)], axis=-1)
            self.add_n_batch_items(batch, Columns.OBS, stacked[:-1], len(episode), episode)
            self.add_n_batch_items(batch, Columns.NEXT_OBS, stacked[1:], len(episode), episode)
        return batch
