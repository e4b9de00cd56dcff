"""``get_preprocessor``: RLlib's old-stack observation preprocessors, for logging code that
calls ``prep.transform(obs)`` before ``add_values``.

A ``Box`` observation is kept as it is (``NoPreprocessor``); any other space is
flattened into one float32 vector as RLlib's old stack did (discrete values one-hot, tuples and
dicts concatenated in the space's order), with gymnasium's ``flatten``. offline-rl's models read
observations as the env gives them, so flatten only data meant for RLlib's old stack.

Examples:
    >>> import gymnasium as gym
    >>> prep = get_preprocessor(gym.spaces.Discrete(3))(gym.spaces.Discrete(3))
    >>> prep.transform(1), prep.shape
    (array([0., 1., 0.], dtype=float32), (3,))
    >>> box = gym.spaces.Box(-1.0, 1.0, (2,))
    >>> get_preprocessor(box)(box).transform([0.5, 0.25])
    array([0.5 , 0.25], dtype=float32)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import gymnasium as gym
import numpy as np


class Preprocessor(ABC):
    """Turns an observation of ``obs_space`` into what is logged (``transform``); ``shape`` is
    the result's shape."""

    def __init__(self, obs_space: gym.Space):
        self.observation_space = obs_space
        self.shape: tuple[int, ...] = obs_space.shape or ()

    @abstractmethod
    def transform(self, observation: Any) -> np.ndarray:
        """The observation as it is logged."""


class NoPreprocessor(Preprocessor):
    """Keeps an observation as it is (as an array of the space's dtype)."""

    def transform(self, observation: Any) -> np.ndarray:
        """The observation as an array of the space's dtype."""
        return np.asarray(observation, dtype=self.observation_space.dtype)


class FlatteningPreprocessor(Preprocessor):
    """Flattens any space into one float32 vector (discrete values one-hot)."""

    def __init__(self, obs_space: gym.Space):
        super().__init__(obs_space)
        self.shape = (gym.spaces.flatdim(obs_space),)

    def transform(self, observation: Any) -> np.ndarray:
        """The flattened observation."""
        flat = gym.spaces.flatten(self.observation_space, observation)
        return np.asarray(flat, dtype=np.float32)


def get_preprocessor(space: gym.Space) -> type[Preprocessor]:
    """The preprocessor class for observations of ``space`` (RLlib's function of that name)."""
    return NoPreprocessor if isinstance(space, gym.spaces.Box) else FlatteningPreprocessor
