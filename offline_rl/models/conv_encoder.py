"""``ConvEncoder``: RLlib's ``conv_filters`` stack for image-like observations."""

from __future__ import annotations

import math

import torch
from torch import nn

from offline_rl.errors import ConfigError
from offline_rl.models.model_config import ACTIVATIONS


class ConvEncoder(nn.Module):
    """Conv layers over ``(batch, height, width, channels)`` observations (channels last, as
    RLlib's), each ``[out_channels, kernel, stride]`` with ``"same"`` padding (the output is
    ``ceil(size / stride)`` on each side) and followed by ``activation``, then flattened to
    ``out_dim`` features.

    Examples:
        >>> encoder = ConvEncoder((9, 1, 4), [[8, 4, 2], [16, 4, 2]], "relu")
        >>> encoder(torch.zeros(5, 9, 1, 4)).shape, encoder.out_dim
        (torch.Size([5, 48]), 48)
    """

    def __init__(self, obs_shape: tuple[int, ...], filters: list[list[int]], activation: str):
        super().__init__()
        if len(obs_shape) != 3:
            raise ConfigError(f"model_config conv_filters need (height, width, channels) "
                              f"observations; the observation shape is {tuple(obs_shape)}")
        height, width, channels = obs_shape
        layers: list[nn.Module] = []
        for out_channels, kernel, stride in filters:
            out_h, out_w = math.ceil(height / stride), math.ceil(width / stride)
            pad_h = max((out_h - 1) * stride + kernel - height, 0)
            pad_w = max((out_w - 1) * stride + kernel - width, 0)
            layers += [nn.ZeroPad2d((pad_w // 2, pad_w - pad_w // 2,
                                     pad_h // 2, pad_h - pad_h // 2)),
                       nn.Conv2d(channels, out_channels, kernel, stride),
                       getattr(nn, ACTIVATIONS[activation])()]
            height, width, channels = out_h, out_w, out_channels
        self.layers = nn.Sequential(*layers)
        #: The number of features an observation is encoded into.
        self.out_dim = height * width * channels

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(batch, height, width, channels)`` -> ``(batch, out_dim)``."""
        return self.layers(obs.float().permute(0, 3, 1, 2)).flatten(1)
