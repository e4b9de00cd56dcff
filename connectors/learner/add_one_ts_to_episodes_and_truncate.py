"""``AddOneTsToEpisodesAndTruncate``: one artificial timestep at the end of every episode."""

from __future__ import annotations

import numpy as np

from connectors.connector_v2 import ConnectorV2
from offline_rl.columns import Columns


class AddOneTsToEpisodesAndTruncate(ConnectorV2):
    """Appends one artificial timestep to each episode, so that one forward pass over the
    batch's ``obs`` also sees each episode's final observation (what value bootstrapping
    needs, see ``GeneralAdvantageEstimation``), and marks that timestep in ``loss_mask``.

    The artificial step repeats the episode's last action, infos and extra model outputs,
    has reward 0 and leads to the final observation again; the episode is then truncated.
    The piece adds ``loss_mask`` (``False`` on the artificial step), and ``terminateds`` and
    ``truncateds`` as the episode had them on its last real step (both ``True`` on the
    artificial one). Place it first (``pipeline.prepend``): the default pieces then read the
    elongated episodes and keep these columns. It changes the episodes it is given; the
    PreLearners give it fresh ones (rows mapped to episodes, or the buffer's samples).

    Examples:
        >>> from offline_rl import SingleAgentEpisode
        >>> from connectors import ConnectorPipelineV2, default_learner_pipeline
        >>> episode = SingleAgentEpisode(observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                              rewards=[1.0, 1.0], terminated=True,
        ...                              len_lookback_buffer=0)
        >>> pipeline = default_learner_pipeline()
        >>> _ = pipeline.prepend(AddOneTsToEpisodesAndTruncate())
        >>> batch = pipeline(rl_module=None, batch={}, episodes=[episode])
        >>> batch["obs"].tolist(), batch["new_obs"].tolist(), batch["rewards"].tolist()
        ([0.0, 1.0, 2.0], [1.0, 2.0, 2.0], [1.0, 1.0, 0.0])
        >>> batch["loss_mask"].tolist(), batch["terminateds"].tolist()
        ([True, True, False], [False, True, True])
    """

    needs_episodes = True

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        for episode in self.single_agent_episode_iterator(episodes):
            steps = len(episode)
            terminated, truncated = episode.is_terminated, episode.is_truncated
            episode.is_terminated = episode.is_truncated = False
            episode.add_env_step(
                episode.get_observations(-1), episode.get_actions(-1), 0.0,
                episode.get_infos(-1), truncated=True,
                extra_model_outputs={key: episode.get_extra_model_outputs(key, -1)
                                     for key in episode.extra_model_outputs})
            episode.is_terminated = terminated
            real_steps = np.zeros(steps + 1, dtype=bool)
            real_steps[:steps] = True
            flags = {Columns.LOSS_MASK: real_steps,
                     Columns.TERMINATEDS: ~real_steps,
                     Columns.TRUNCATEDS: ~real_steps.copy()}
            flags[Columns.TERMINATEDS][steps - 1] = terminated
            flags[Columns.TRUNCATEDS][steps - 1] = truncated
            for column, values in flags.items():
                self.add_n_batch_items(batch, column, values, steps + 1, episode)
        return batch

    @staticmethod
    def on_single_steps(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The same on the default pieces' columns of one-step episodes: each row followed by
        its artificial step.

        Examples:
            >>> columns = {"obs": np.array([0.0, 5.0]), "new_obs": np.array([1.0, 6.0]),
            ...            "actions": np.array([1, 0]), "rewards": np.array([2.0, 3.0]),
            ...            "terminateds": np.array([True, False]),
            ...            "truncateds": np.array([False, False])}
            >>> out = AddOneTsToEpisodesAndTruncate.on_single_steps(columns)
            >>> out["obs"].tolist(), out["rewards"].tolist(), out["loss_mask"].tolist()
            ([0.0, 1.0, 5.0, 6.0], [2.0, 0.0, 3.0, 0.0], [True, False, True, False])
        """
        out = {name: np.repeat(values, 2, axis=0) for name, values in columns.items()}
        out[Columns.OBS][1::2] = columns[Columns.NEXT_OBS]
        out[Columns.REWARDS][1::2] = 0
        out[Columns.TERMINATEDS][1::2] = True
        out[Columns.TRUNCATEDS][1::2] = True
        out[Columns.LOSS_MASK] = np.tile([True, False], len(columns[Columns.ACTIONS]))
        return out
