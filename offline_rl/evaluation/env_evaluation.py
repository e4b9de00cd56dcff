"""Running a policy in gymnasium envs and reporting episode returns (RLlib's metric names)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

EnvSpec = str | Callable[[dict], gym.Env]


def make_env(env: EnvSpec, env_config: dict[str, Any] | None = None) -> gym.Env:
    """A gymnasium id (``gym.make(id, **env_config)``) or a creator ``env_config -> env``."""
    if isinstance(env, str):
        return gym.make(env, **(env_config or {}))
    created = env(env_config or {})
    if not isinstance(created, gym.Env):
        raise TypeError(f"the env creator returned {type(created).__name__}, not a gymnasium.Env")
    return created


class EnvEvaluator:
    """Plays whole episodes with a policy in ``num_envs`` envs stepped side by side.

    Episode ``i`` of every evaluation is reset with ``seed + i`` when a seed is given, so
    evaluations are repeatable and comparable across training iterations.

    Example:
        >>> evaluator = EnvEvaluator("CartPole-v1", num_envs=2, seed=0)
        >>> result = evaluator.evaluate(lambda obs: np.zeros(len(obs), dtype=int), 4)
        >>> result["num_episodes"], result["episode_return_max"] < 20
        (4, True)
    """

    def __init__(self, env: EnvSpec, env_config: dict[str, Any] | None = None,
                 num_envs: int = 8, seed: int | None = None):
        self.envs = [make_env(env, env_config) for _ in range(num_envs)]
        self.observation_space = self.envs[0].observation_space
        self.action_space = self.envs[0].action_space
        self.seed = seed
        self._episodes_started = 0

    def evaluate(self, compute_actions: Callable[[np.ndarray], np.ndarray],
                 num_episodes: int) -> dict[str, float]:
        """Runs ``num_episodes`` complete episodes; returns ``episode_return_mean/min/max``,
        ``episode_len_mean`` and ``num_episodes``."""
        returns, lengths = [], []
        self._episodes_started = 0
        active: dict[int, tuple[Any, float, int]] = {}
        for index, env in enumerate(self.envs[:num_episodes]):
            active[index] = (self._reset(env), 0.0, 0)
        started = len(active)
        while active:
            indices = list(active)
            actions = compute_actions(np.stack([active[i][0] for i in indices]))
            for index, action in zip(indices, actions):
                env = self.envs[index]
                _, episode_return, length = active[index]
                obs, reward, terminated, truncated, _ = env.step(self._to_env(action))
                episode_return, length = episode_return + float(reward), length + 1
                if not (terminated or truncated):
                    active[index] = (obs, episode_return, length)
                    continue
                returns.append(episode_return)
                lengths.append(length)
                if started < num_episodes:
                    active[index] = (self._reset(env), 0.0, 0)
                    started += 1
                else:
                    del active[index]
        return {
            "episode_return_mean": float(np.mean(returns)),
            "episode_return_min": float(np.min(returns)),
            "episode_return_max": float(np.max(returns)),
            "episode_len_mean": float(np.mean(lengths)),
            "num_episodes": len(returns),
        }

    def _reset(self, env: gym.Env) -> Any:
        seed = None if self.seed is None else self.seed + self._episodes_started
        self._episodes_started += 1
        obs, _ = env.reset(seed=seed)
        return obs

    def _to_env(self, action: np.ndarray) -> Any:
        if isinstance(self.action_space, gym.spaces.Box):
            return np.clip(action, self.action_space.low, self.action_space.high)
        if isinstance(self.action_space, gym.spaces.Discrete):
            return int(action)
        return action

    def close(self) -> None:
        """Closes the envs."""
        for env in self.envs:
            env.close()
