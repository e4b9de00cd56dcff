"""All one-step transitions of a list of episodes as flat numpy columns.

``Transitions(episodes).take(indices)`` gives, column by column, the train batch the default
learner pipeline builds from ``EpisodeReplayBuffer.sample`` slices at the same timesteps
(timesteps numbered through the episodes in order, as ``sample_timesteps`` draws them), without
building one episode object per sampled timestep.

Examples:
    >>> from offline_rl import SingleAgentEpisode
    >>> episode = SingleAgentEpisode(observations=[0.0, 1.0, 2.0], actions=[1, 0],
    ...                              rewards=[1.0, 5.0], terminated=True,
    ...                              len_lookback_buffer=0).to_numpy()
    >>> batch = Transitions([episode]).take(np.array([1, 0]))
    >>> batch["new_obs"], batch["rewards"], batch["terminateds"]
    (array([2., 1.]), array([5., 1.]), array([ True, False]))
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from offline_rl.columns import Columns
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.rows import take_rows


class Transitions:
    """Flat ``obs``, ``actions``, ``rewards``, ``terminateds``, ``truncateds``, extra model
    outputs and ``new_obs`` columns over finalized episodes: the one conversion of episodes to
    columns (PreLearners sample from it; the recorder writes it as tabular rows)."""

    def __init__(self, episodes: Sequence[SingleAgentEpisode]):
        self.episodes = episodes
        lengths = [len(episode) for episode in episodes]
        observations = [np.asarray(episode.get_observations()) for episode in episodes]
        self.columns: dict[str, np.ndarray] = {
            Columns.OBS: np.concatenate([obs[:-1] for obs in observations]),
            Columns.ACTIONS: np.concatenate([episode.get_actions() for episode in episodes]),
            Columns.REWARDS: np.concatenate([episode.get_rewards() for episode in episodes]),
            Columns.TERMINATEDS: last_step_flags(lengths, [e.is_terminated for e in episodes]),
            Columns.TRUNCATEDS: last_step_flags(lengths, [e.is_truncated for e in episodes]),
        }
        for key in episodes[0].extra_model_outputs:
            self.columns[key] = np.concatenate(
                [episode.get_extra_model_outputs(key) for episode in episodes])
        self.columns[Columns.NEXT_OBS] = np.concatenate([obs[1:] for obs in observations])
        #: One past each step's episode's last step, in flat step numbers.
        self._episode_ends = np.repeat(np.cumsum(lengths), lengths)

    def take(self, indices: np.ndarray, n_step: int = 1,
             gamma: float = 0.99) -> dict[str, np.ndarray]:
        """The transitions at ``indices`` (flat timestep numbers). With ``n_step > 1``, each
        spans up to ``n_step`` steps of its episode (``n_step`` column): its reward is the
        ``gamma``-discounted sum over them, its next observation and done flags those of its
        last step, as ``EpisodeReplayBuffer.sample(n_step=...)`` builds them."""
        batch = take_rows(self.columns, indices)
        if n_step == 1:
            return batch
        steps = np.minimum(n_step, self._episode_ends[indices] - indices)
        last = indices + steps - 1
        rewards = self.columns[Columns.REWARDS]
        batch[Columns.REWARDS] = sum(
            np.where(k < steps, gamma ** k * rewards[np.minimum(indices + k, last)], 0.0)
            for k in range(n_step)).astype(rewards.dtype)
        batch.update(take_rows({name: self.columns[name] for name in (
            Columns.NEXT_OBS, Columns.TERMINATEDS, Columns.TRUNCATEDS)}, last))
        batch[Columns.N_STEP] = steps
        return batch

    def step_ids(self) -> dict[str, np.ndarray]:
        """Each transition's episode id (``eps_id``) and timestep (``t``)."""
        return {
            Columns.EPS_ID: np.concatenate([np.full(len(e), e.id_, dtype=object)
                                            for e in self.episodes]),
            Columns.T: np.concatenate([e.t_started + np.arange(len(e)) for e in self.episodes]),
        }


def last_step_flags(lengths: Sequence[int], flags: Sequence[bool]) -> np.ndarray:
    """Per-step flags over episodes of ``lengths``: only an episode's last step carries its
    flag (e.g. ``is_terminated``)."""
    result = np.zeros(sum(lengths), dtype=bool)
    result[np.cumsum(lengths)[np.asarray(flags, dtype=bool)] - 1] = True
    return result
