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
        >>> EnvironmentConfig().has_spaces, EnvironmentConfig(env="CartPole-v1").has_spaces
        (False, True)
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

    @property
    def has_spaces(self) -> bool:
        """Whether the env, or both spaces, give the module its spaces (a multi-agent
        config's modules may take theirs from their ``RLModuleSpec``s instead: see
        ``multi_agent_problems``)."""
        return self.env is not None or (self.observation_space is not None
                                        and self.action_space is not None)
