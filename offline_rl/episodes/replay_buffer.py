"""``EpisodeReplayBuffer``: whole episodes in, uniformly sampled timesteps out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from offline_rl.columns import Columns
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.transitions import Transitions


@runtime_checkable
class EpisodeBuffer(Protocol):
    """What a PreLearner needs of its episode buffer (``prelearner_buffer_class``).

    The class is built as ``buffer_class(capacity=..., seed=..., **prelearner_buffer_kwargs)``,
    with ``capacity`` in timesteps. The PreLearner adds each batch's checked, complete episodes,
    then draws ``sample(num_items=train_batch_size_per_learner)``: episodes (or slices of them)
    holding that many timesteps in total, which the learner connector turns into a train
    batch. Optional: ``__contains__(episode_id)`` to skip episodes it still holds, and a
    ``capacity`` attribute (episodes are added in chunks of at most half of it, each sampled
    before the next). ``EpisodeReplayBuffer`` is the default.

    Examples:
        >>> isinstance(EpisodeReplayBuffer(capacity=10), EpisodeBuffer)
        True
    """

    def add(self, episodes: Iterable[SingleAgentEpisode]) -> None:
        """Stores the episodes."""

    def sample(self, num_items: int, **kwargs: Any) -> list[SingleAgentEpisode]:
        """Episodes holding ``num_items`` timesteps in total."""

    def get_num_timesteps(self) -> int:
        """Timesteps stored."""


class EpisodeReplayBuffer:
    """Stores episodes up to ``capacity`` timesteps and samples timesteps uniformly.

    When full, whole episodes are evicted oldest first (the newest is always kept). A chunk whose
    ``id_`` is already stored continues that episode (``concat_episode``). ``sample`` returns
    episodes (slices) holding exactly ``num_items`` timesteps in total; ``transitions()`` the
    stored (finalized) episodes as flat columns, which ``sample_timesteps`` indexes.

    Examples:
        >>> from offline_rl import SingleAgentEpisode
        >>> buffer = EpisodeReplayBuffer(capacity=100, seed=0)
        >>> buffer.add([SingleAgentEpisode(observations=[0, 1, 2, 3], actions=[0, 1, 0],
        ...                                rewards=[1.0, 1.0, 1.0], terminated=True,
        ...                                len_lookback_buffer=0)])
        >>> sum(len(episode) for episode in buffer.sample(8))
        8
    """

    def __init__(self, capacity: int = 10_000, *, seed: int | None = None):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1 timestep, got {capacity}")
        self.capacity = capacity
        self._episodes: list[SingleAgentEpisode] = []
        self._ids: dict[str, SingleAgentEpisode] = {}
        self._num_timesteps = 0
        self._ends = np.zeros(0, dtype=np.int64)
        self._starts = np.zeros(0, dtype=np.int64)
        self._rng = np.random.default_rng(seed)
        self._transitions: Transitions | None = None

    def add(self, episodes: SingleAgentEpisode | Iterable[SingleAgentEpisode]) -> None:
        """Stores the episodes (or continues stored ones), then evicts down to capacity."""
        if isinstance(episodes, SingleAgentEpisode):
            episodes = [episodes]
        for episode in episodes:
            stored = self._ids.get(episode.id_)
            if stored is None:
                self._episodes.append(episode)
                self._ids[episode.id_] = episode
            elif stored.is_done or episode.t_started != stored.t:
                raise ValueError(
                    f"episode {episode.id_!r} is already stored (t {stored.t_started}..{stored.t}"
                    f", done={stored.is_done}); a chunk starting at t={episode.t_started} does "
                    "not continue it"
                )
            else:
                stored.concat_episode(episode)
            self._num_timesteps += len(episode)
        while self._num_timesteps > self.capacity and len(self._episodes) > 1:
            evicted = self._episodes.pop(0)
            del self._ids[evicted.id_]
            self._num_timesteps -= len(evicted)
        lengths = np.array([len(episode) for episode in self._episodes], dtype=np.int64)
        self._ends = np.cumsum(lengths)
        self._starts = self._ends - lengths
        self._transitions = None

    def sample(
        self,
        num_items: int,
        *,
        n_step: int = 1,
        gamma: float = 0.99,
        batch_length_T: int | None = None,
        sample_episodes: bool = True,
        lookback: int = 1,
    ) -> list[SingleAgentEpisode]:
        """Samples ``num_items`` timesteps uniformly (with replacement) over stored timesteps.

        Each draw returns a one-step slice keeping ``lookback`` steps of history; with
        ``batch_length_T``, a slice of up to ``T`` consecutive steps (shorter where the episode or
        the ``num_items`` budget ends). With ``n_step > 1`` each draw is a synthesized transition
        (no lookback) whose next observation is up to ``n_step`` steps later and whose reward is
        the ``gamma``-discounted sum in between; the steps it spans are its ``n_step`` extra
        model output.
        """
        if not sample_episodes:
            raise ValueError("EpisodeReplayBuffer samples episodes; use sample_episodes=True")
        if num_items < 1 or n_step < 1 or (batch_length_T is not None and batch_length_T < 1):
            raise ValueError("num_items, n_step and batch_length_T must be >= 1")
        if batch_length_T is None:
            return [self._n_step_sample(episode, t, n_step, gamma, lookback)
                    for episode, t in self._draw(num_items)]
        sampled, remaining = [], num_items
        while remaining:
            for episode, t in self._draw(max(1, remaining // batch_length_T)):
                steps = min(batch_length_T, len(episode) - t, remaining)
                sampled.append(episode.slice(slice(t, t + steps), len_lookback_buffer=lookback))
                remaining -= steps
                if not remaining:
                    break
        return sampled

    def sample_timesteps(self, num_items: int) -> np.ndarray:
        """``num_items`` timestep indices drawn uniformly (with replacement) from the stored
        timesteps, numbered through ``episodes`` in order (what ``sample`` slices from)."""
        if not self._num_timesteps:
            raise ValueError("cannot sample from an empty EpisodeReplayBuffer")
        return self._rng.integers(0, self._num_timesteps, size=num_items)

    def transitions(self) -> Transitions:
        """The stored episodes' one-step transitions as flat columns, numbered as
        ``sample_timesteps`` draws them (the episodes must be finalized). Built once after each
        ``add`` and kept (a flat copy of the stored columns), so that the many batches drawn
        between two ``add`` calls (an online replay buffer's) do not each rebuild it."""
        if self._transitions is None:
            self._transitions = Transitions(tuple(self._episodes))
        return self._transitions

    @property
    def episodes(self) -> tuple[SingleAgentEpisode, ...]:
        """The stored episodes, oldest first."""
        return tuple(self._episodes)

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._ids

    def _draw(self, count: int) -> list[tuple[SingleAgentEpisode, int]]:
        """``count`` (episode, timestep) pairs, uniform over stored timesteps."""
        flat = self.sample_timesteps(count)
        indices = np.searchsorted(self._ends, flat, side="right")
        offsets = flat - self._starts[indices]
        return [(self._episodes[i], int(t)) for i, t in zip(indices, offsets)]

    @staticmethod
    def _n_step_sample(episode: SingleAgentEpisode, t: int, n_step: int, gamma: float,
                       lookback: int) -> SingleAgentEpisode:
        if n_step == 1:
            return episode.slice(slice(t, t + 1), len_lookback_buffer=lookback)
        steps = min(n_step, len(episode) - t)
        rewards = episode.get_rewards(slice(t, t + steps))
        reward = float(np.sum(rewards * gamma ** np.arange(steps)))
        reaches_end = t + steps == len(episode)
        return SingleAgentEpisode(
            id_=episode.id_,
            observations=[episode.get_observations(t), episode.get_observations(t + steps)],
            observation_space=episode.observation_space,
            actions=[episode.get_actions(t)],
            action_space=episode.action_space,
            rewards=[reward],
            infos=[episode.get_infos(t), episode.get_infos(t + steps)],
            terminated=reaches_end and episode.is_terminated,
            truncated=reaches_end and episode.is_truncated,
            extra_model_outputs={**{key: [episode.get_extra_model_outputs(key, t)]
                                    for key in episode.extra_model_outputs},
                                 Columns.N_STEP: [steps]},
            t_started=episode.t_started + t,
            len_lookback_buffer=0,
        ).to_numpy()

    def get_num_timesteps(self) -> int:
        """Timesteps stored."""
        return self._num_timesteps

    def get_num_episodes(self) -> int:
        """Episodes (or episode chunks) stored."""
        return len(self._episodes)
