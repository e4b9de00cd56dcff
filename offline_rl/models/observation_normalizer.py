"""``ObservationNormalizer``: the module's input filter, ``(obs - mean) / std`` per feature."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

#: Standard deviations below this count as constant features, which are only centred.
MIN_STD = 1e-6


class ObservationNormalizer(nn.Module):
    """Standardizes flat observations with a dataset's per-feature mean and std.

    Both are buffers, so they travel in the module's ``state_dict``: checkpoints, the weights
    the PreLearners and evaluation runners load, and ``offline-rl evaluate`` all apply the
    statistics the policy was trained with.

    Examples:
        >>> normalizer = ObservationNormalizer([1.0, 0.0], [2.0, 0.0])
        >>> normalizer(torch.tensor([[3.0, 5.0]]))
        tensor([[1., 5.]])
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float]):
        super().__init__()
        std_tensor = torch.as_tensor(std, dtype=torch.float32)
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.where(std_tensor < MIN_STD, 1.0, std_tensor))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Flat float observations, standardized."""
        return (obs - self.mean) / self.std
