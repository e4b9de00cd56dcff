"""Target networks: slowly moving copies of a network, for stable TD targets."""

from __future__ import annotations

import torch
from torch import nn


def polyak(*pairs: tuple[nn.Module, nn.Module], tau: float) -> None:
    """``target <- (1 - tau) * target + tau * source``, parameter by parameter, for each
    ``(target, source)`` pair.

    Examples:
        >>> target, source = nn.Linear(1, 1, bias=False), nn.Linear(1, 1, bias=False)
        >>> _ = target.weight.data.fill_(0.0), source.weight.data.fill_(1.0)
        >>> polyak((target, source), tau=0.25)
        >>> target.weight.item()
        0.25
    """
    with torch.no_grad():
        for target, source in pairs:
            for target_parameter, parameter in zip(target.parameters(), source.parameters()):
                target_parameter.lerp_(parameter, tau)
