"""An env's ``Dict``/``Tuple`` spaces as the module acting in it reads and writes them: its
observations flattened as the ``FlattenObservations`` connector flattened the training data,
and the module's packed actions (``offline_rl.formats.composite.pack_values``) unpacked into
the env's structures.

Examples:
    >>> import gymnasium as gym
    >>> from connectors.common.flatten_observations import flattened_space
    >>> env = gym.make("CartPole-v1")
    >>> adapted_env(env, env.observation_space, env.action_space) is env
    True
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from connectors.common.flatten_observations import flatten_observation, flattened_space
from offline_rl.formats.composite import is_composite, leaf_spaces, leaf_width, unpack_value


class FlatObservations(gym.ObservationWrapper):
    """The env's ``Dict``/``Tuple`` observations as ``flatten_observation`` makes them."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._space = env.observation_space
        self.observation_space = flattened_space(self._space)

    def observation(self, observation: Any) -> np.ndarray:
        return flatten_observation(self._space, observation)


class PackedActions(gym.ActionWrapper):
    """Takes ``Dict``/``Tuple`` actions packed into one row and gives the env the structure,
    each ``Box`` part clipped to its bounds."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._space = env.action_space
        width = sum(leaf_width(leaf) for leaf in leaf_spaces(self._space))
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (width,), np.float32)

    def action(self, action: Any) -> Any:
        return _clipped(unpack_value(np.asarray(action), self._space), self._space)


def _clipped(value: Any, space: gym.Space) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return {key: _clipped(value[key], part) for key, part in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_clipped(item, part) for item, part in zip(value, space.spaces,
                                                                strict=True))
    if isinstance(space, gym.spaces.Box):
        return np.clip(value, space.low, space.high)
    return value


def adapted_env(env: gym.Env, observation_space: gym.Space | None,
                action_space: gym.Space | None) -> gym.Env:
    """``env`` wrapped so that a module of ``observation_space`` and ``action_space`` acts
    in it: ``FlatObservations`` where the env's observations are ``Dict``/``Tuple`` and the
    module reads them flattened, ``PackedActions`` where its actions are ``Dict``/``Tuple``;
    else ``env`` itself."""
    if (is_composite(env.observation_space)
            and observation_space == flattened_space(env.observation_space)):
        env = FlatObservations(env)
    if is_composite(env.action_space) and action_space == env.action_space:
        env = PackedActions(env)
    return env
