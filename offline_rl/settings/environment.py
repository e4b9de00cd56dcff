"""The ``environment`` section: the env evaluation plays, and the spaces of the data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offline_rl.settings.options import A_BOOL, Rule, Section, option


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
    #: RLlib's ``normalize_actions``: the module acts in [-1, 1] on each dimension of a
    #: ``Box`` action space (as RLlib's recorded actions are), and the env unsquashes its
    #: actions onto the ``Box`` when evaluating, recording or sampling. Default ``False``
    #: (RLlib's: ``True``): the module acts in the env's bounds.
    normalize_actions: bool = option(False, A_BOOL)
    #: RLlib's ``clip_actions``: ``Box`` actions are clipped into the bounds of the space the
    #: module acts in before the env takes them.
    clip_actions: bool = option(False, A_BOOL)

    @property
    def has_spaces(self) -> bool:
        """Whether the env, or both spaces, give the module its spaces (a multi-agent
        config's modules may take theirs from their ``RLModuleSpec``s instead: see
        ``multi_agent_problems``)."""
        return self.env is not None or (self.observation_space is not None
                                        and self.action_space is not None)
