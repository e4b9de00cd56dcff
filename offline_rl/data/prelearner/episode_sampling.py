"""``EpisodeSampler``: a PreLearner's episode buffer, and the train batches drawn from it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from offline_rl.columns import Columns
from offline_rl.data.prelearner.learner_stages import LearnerStages
from offline_rl.data.source.data_config import DataConfig
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.replay_buffer import EpisodeBuffer, EpisodeReplayBuffer

#: Default PreLearner buffer capacity, in train batches.
BUFFER_CAPACITY_BATCHES = 10


class EpisodeSampler:
    """Adds episodes to ``buffer`` (``prelearner_buffer_class`` built with
    ``prelearner_buffer_kwargs``) and samples about one train batch of exactly
    ``train_batch_size_per_learner`` timesteps (``n_step`` transitions) per that many
    timesteps added, through ``stages``. With the default buffer and a ``columnar`` episode
    stage, the sampled timesteps become train columns directly (the buffer's
    ``transitions()``), else the buffer's ``sample`` gives the episodes the episode stage maps.

    Examples:
        >>> import gymnasium as gym
        >>> from connectors import default_learner_pipeline
        >>> from offline_rl import BCConfig
        >>> spaces = (gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2))
        >>> config = (BCConfig().training(train_batch_size_per_learner=4).debugging(seed=0)
        ...           .data_config(spaces))
        >>> sampler = EpisodeSampler(config, LearnerStages(default_learner_pipeline(*spaces)))
        >>> episode = SingleAgentEpisode(observations=[[0.0]] * 9, actions=[1] * 8,
        ...                              rewards=[1.0] * 8, terminated=True,
        ...                              len_lookback_buffer=0).to_numpy()
        >>> len(sampler.sample([episode])["obs"]), sampler.buffer.get_num_timesteps()
        (8, 8)
    """

    def __init__(self, config: DataConfig, stages: LearnerStages, *,
                 buffer: EpisodeBuffer | None = None) -> None:
        buffer_class = config.prelearner_buffer_class or EpisodeReplayBuffer
        self.batch_size = config.training.train_batch_size_per_learner
        self.buffer: EpisodeBuffer = buffer if buffer is not None else buffer_class(**{
            "capacity": BUFFER_CAPACITY_BATCHES * self.batch_size, "seed": config.debugging.seed,
            **config.offline_data.prelearner_buffer_kwargs})
        self.n_step, self.gamma = config.n_step, config.gamma
        self.stages = stages
        self._draw: Callable[[int, int], list[dict[str, np.ndarray]]] = (
            self._draw_transitions
            if type(self.buffer) is EpisodeReplayBuffer and stages.columnar
            else self._draw_episodes)

    def draw(self, num_rows: int) -> dict[str, np.ndarray]:
        """One train batch of ``num_rows`` timesteps drawn from the buffer (not empty)."""
        return self._draw(1, num_rows)[0]

    def sample(self, episodes: list[SingleAgentEpisode]) -> dict[str, np.ndarray]:
        """Adds the episodes to the buffer and samples about one train batch per
        ``batch_size`` new timesteps (at least one per call; none from an empty buffer).
        Episodes go in chunks of at most half the buffer's capacity, each sampled before the
        next, so no episode is evicted before it could be drawn."""
        batches, pending, chunk, chunk_steps = [], 0, [], 0
        limit = max(1, getattr(self.buffer, "capacity", 0) // 2)
        for episode in [*episodes, None]:
            if chunk and (episode is None or chunk_steps + len(episode) > limit):
                self.buffer.add(chunk)
                pending += chunk_steps
                batches += self._draw(pending // self.batch_size, self.batch_size)
                pending %= self.batch_size
                chunk, chunk_steps = [], 0
            if episode is not None:
                chunk.append(episode)
                chunk_steps += len(episode)
        if not batches or pending >= self.batch_size // 2:
            if not self.buffer.get_num_timesteps():
                return {}
            batches += self._draw(1, self.batch_size)
        return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}

    def _draw_transitions(self, count: int, num_rows: int) -> list[dict[str, np.ndarray]]:
        """``count`` train batches of ``num_rows`` timesteps drawn uniformly, as columns of
        their transitions."""
        if not count:
            return []
        transitions = self.buffer.transitions()
        return [with_n_step(self.stages.from_columns(transitions.take(
            self.buffer.sample_timesteps(num_rows), self.n_step, self.gamma)))
            for _ in range(count)]

    def _draw_episodes(self, count: int, num_rows: int) -> list[dict[str, np.ndarray]]:
        """``count`` train batches of the episodes the buffer's ``sample`` draws, ``num_rows``
        timesteps each (a custom buffer's ``sample`` need not know ``n_step`` unless it is
        used)."""
        n_step_kwargs = ({"n_step": self.n_step, "gamma": self.gamma} if self.n_step > 1
                         else {})
        return [with_n_step(self.stages.from_episodes(self.buffer.sample(num_items=num_rows,
                                                                         **n_step_kwargs)))
                for _ in range(count)]


def with_n_step(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``batch`` with the steps each transition spans (``n_step``; 1 where the draw did not
    say), as RLlib's episode buffers give every transition they sample."""
    if Columns.N_STEP in batch or Columns.ACTIONS not in batch:
        return batch
    return {**batch, Columns.N_STEP: np.ones(len(batch[Columns.ACTIONS]), np.int64)}
