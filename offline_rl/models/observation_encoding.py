"""Observations as the flat float features a module's MLP reads, by the observation space:
gymnasium's ``flatten`` rule (``flatdim`` features) applied to a batch of tensors.

``Box`` and ``MultiBinary`` values are flattened, a ``Discrete`` value is one-hot, a
``MultiDiscrete`` value is one one-hot per component, concatenated. ``Dict`` and ``Tuple``
observations reach a module flattened already, by the ``FlattenObservations`` connector piece.

Examples:
    >>> import gymnasium as gym, torch
    >>> space = gym.spaces.MultiDiscrete([2, 3])
    >>> observation_dim(space)
    5
    >>> encode_observations(space, torch.tensor([[1, 2]])).tolist()
    [[0.0, 1.0, 0.0, 0.0, 1.0]]
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

#: The observation spaces a module encodes itself.
ENCODED_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                  gym.spaces.MultiBinary)


def check_encoded_space(space: gym.Space, module_name: str) -> None:
    """Raises ``ValueError`` unless ``space`` is one ``encode_observations`` reads, saying
    how to read the others."""
    if not isinstance(space, ENCODED_SPACES):
        raise ValueError(
            f"{module_name} reads Box, Discrete, MultiDiscrete or MultiBinary observations, got "
            f"{space}; for Dict or Tuple observations add the FlattenObservations connector "
            "(config.training(learner_connector=FlattenObservations)), or write a custom module")


def observation_dim(space: gym.Space) -> int:
    """The number of features ``encode_observations`` makes of one observation."""
    return int(gym.spaces.flatdim(space))


def encode_observations(space: gym.Space, obs: torch.Tensor) -> torch.Tensor:
    """A batch of observations of ``space`` as float features, shape ``(batch,
    observation_dim(space))``."""
    if isinstance(space, gym.spaces.Discrete):
        return nn.functional.one_hot(obs.long() - int(space.start), int(space.n)).float()
    if isinstance(space, gym.spaces.MultiDiscrete):
        components = (obs.reshape(obs.shape[0], -1).long()
                      - torch.as_tensor(np.asarray(space.start).reshape(-1), device=obs.device))
        return torch.cat([nn.functional.one_hot(column, int(n)).float() for column, n in
                          zip(components.unbind(-1), np.asarray(space.nvec).reshape(-1),
                              strict=True)], dim=-1)
    return obs.reshape(obs.shape[0], -1).float()
