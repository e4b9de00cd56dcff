"""Envs that fail as users' envs do, for tests (imported by Ray actors by their module path;
``gymnasium.make("tests.envs:LosesConnection-v0")`` imports this module, which registers it)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class NeverEnds(gym.Env):
    """CartPole's spaces; its episodes neither terminate nor truncate."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, env_config: dict[str, Any] | None = None, **kwargs: Any):
        self.config = {**(env_config or {}), **kwargs}
        self.obs = np.zeros(4, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.obs, {}

    def step(self, action):
        return self.obs, 1.0, False, False, {}


class LosesConnection(NeverEnds):
    """Raises ``RuntimeError`` in its ``fails_at``-th ``step()`` call (``env_config``, 3 by
    default); its episodes are 20 steps long until then."""

    def __init__(self, env_config: dict[str, Any] | None = None, **kwargs: Any):
        super().__init__(env_config, **kwargs)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps >= self.config.get("fails_at", 3):
            raise RuntimeError("simulator connection lost")
        return self.obs, 1.0, False, self.steps % 20 == 0, {}


gym.register("LosesConnection-v0", entry_point=LosesConnection)
