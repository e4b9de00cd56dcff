"""Running a policy in gymnasium envs and reporting episode returns (RLlib's metric names)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from offline_rl.evaluation.env_limits import EpisodeLimits, warn_cut
from offline_rl.evaluation.rollout import EnvSpec, make_env, rollout
from offline_rl.evaluation.space_adapters import adapted_env
from offline_rl.statistics import episode_statistics


class EnvEvaluator:
    """Plays whole episodes with a policy in ``num_envs`` envs stepped side by side.

    Episode ``i`` of every evaluation is reset with ``seed + i`` when a seed is given, so
    evaluations are repeatable and comparable across training iterations. The envs are made
    once and kept until ``close()``. ``limits`` (``EpisodeLimits``) cuts and times the
    episodes; ``evaluate()`` warns of the episodes it cut, ``play`` leaves them counted in
    ``limits``.

    Examples:
        >>> evaluator = EnvEvaluator("CartPole-v1", num_envs=2, seed=0)
        >>> result = evaluator.evaluate(lambda obs: np.zeros(len(obs), dtype=int), 4)
        >>> result["num_episodes"], result["episode_return_max"] < 20
        (4, True)
        >>> evaluator.close()
    """

    def __init__(self, env: EnvSpec, env_config: dict[str, Any] | None = None,
                 num_envs: int = 8, seed: int | None = None,
                 limits: EpisodeLimits | None = None):
        self.envs = [make_env(env, env_config) for _ in range(num_envs)]
        self.limits = EpisodeLimits(player="evaluate()") if limits is None else limits
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self.seed = seed

    def adapt_to(self, observation_space: Any, action_space: Any) -> None:
        """Wraps the envs for a module of these spaces (``space_adapters.adapted_env``:
        ``Dict``/``Tuple`` observations flattened as ``FlattenObservations`` flattened the
        data, packed composite actions unpacked)."""
        self.envs = [adapted_env(env, observation_space, action_space) for env in self.envs]
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space

    def evaluate(self, compute_actions: Callable[[np.ndarray], np.ndarray],
                 num_episodes: int) -> dict[str, int | float | None]:
        """Runs ``num_episodes`` complete episodes with ``compute_actions(obs_batch) ->
        actions``; returns their ``offline_rl.statistics.episode_statistics``."""
        return episode_statistics(*self.evaluate_episodes(compute_actions, num_episodes))

    def evaluate_episodes(self, compute_actions: Callable[[np.ndarray], np.ndarray],
                          num_episodes: int) -> tuple[list[float], list[int]]:
        """``evaluate``'s episodes: their returns and lengths (a warning for those cut)."""
        episodes = self.play(compute_actions, num_episodes)
        warn_cut(self.limits.take_cut()[1])
        return episodes

    def play(self, compute_actions: Callable[[np.ndarray], np.ndarray], num_episodes: int,
             first_episode: int = 0) -> tuple[list[float], list[int]]:
        """Plays episodes ``first_episode .. first_episode + num_episodes - 1`` (their
        numbers pick their reset seeds); returns their returns and lengths."""

        def policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            return np.asarray(compute_actions(obs)), {}

        seed = None if self.seed is None else self.seed + first_episode
        returns, lengths = [], []
        for episode in rollout(self.envs, policy, num_episodes, seed=seed, limits=self.limits):
            returns.append(episode.get_return())
            lengths.append(len(episode))
        return returns, lengths

    def close(self) -> None:
        """Closes the envs."""
        for env in self.envs:
            env.close()
