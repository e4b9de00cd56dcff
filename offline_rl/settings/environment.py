"""The ``environment`` section: the env evaluation plays, and the spaces of the data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offline_rl.settings.options import Rule, Section, option


@dataclass
class EnvironmentConfig(Section):
    """See ``AlgorithmConfig.environment``.

    Examples:
        >>> EnvironmentConfig().problems()
        [('environment', 'set env=, or both observation_space= and action_space=')]
    """

    #: A gymnasium id, or a creator ``env_config -> env``.
    env: str | Callable[[dict], gym.Env] | None = option(None, Rule(
        "a gymnasium id or a creator env_config -> env",
        lambda value: value is None or isinstance(value, str) or callable(value)))
    #: Keyword arguments of the env.
    env_config: dict[str, Any] = option({}, Rule(
        "a dict of keyword arguments for the env", lambda value: isinstance(value, dict)))
    #: The spaces (taken from the env when not given; both given: no env needed).
    observation_space: gym.Space | None = option(None)
    action_space: gym.Space | None = option(None)

    def joint_problems(self) -> list[tuple[str, str]]:
        """An env, or both spaces, so that the module can be built."""
        if self.env is None and (self.observation_space is None or self.action_space is None):
            return [("environment", "set env=, or both observation_space= and action_space=")]
        return []
