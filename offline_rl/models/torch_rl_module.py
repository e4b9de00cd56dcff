"""The default torch policy network: an MLP with a categorical or diagonal-Gaussian head."""

from __future__ import annotations

import itertools
from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from offline_rl.columns import Columns
from offline_rl.errors import ConfigError
from offline_rl.models.conv_encoder import ConvEncoder
from offline_rl.models.distributions import (
    TorchCategorical,
    TorchDiagGaussian,
    TorchMultiCategorical,
    TorchMultiDistribution,
)
from offline_rl.models.model_config import ACTIVATIONS, DefaultModelConfig
from offline_rl.models.observation_encoding import (
    check_encoded_space,
    encode_observations,
    observation_dim,
)
from offline_rl.models.observation_normalizer import ObservationNormalizer
from offline_rl.models.rl_module import TorchRLModule


def mlp(sizes: list[int], activation: str, activate_last: bool = True) -> nn.Sequential:
    """Linear layers of the given sizes, each followed by ``activation`` (but maybe the last)."""
    layers: list[nn.Module] = []
    for i, (size_in, size_out) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(size_in, size_out))
        if activate_last or i < len(sizes) - 2:
            layers.append(getattr(nn, ACTIVATIONS[activation])())
    return nn.Sequential(*layers)


class DefaultTorchRLModule(TorchRLModule):
    """MLP policy for Box, Discrete, MultiDiscrete or MultiBinary observations (flattened,
    one-hot: ``encode_observations``) and Discrete (categorical), MultiDiscrete (one
    categorical per component), Box (Gaussian, any shape) or Dict/Tuple (one of those per
    part: ``TorchMultiDistribution``, actions packed into one row) actions; with
    ``model_config.conv_filters``, a ``ConvEncoder`` before the MLP.

    ``forward_train``/``forward_inference``/``forward_exploration`` return ``action_dist_inputs``,
    which ``get_*_action_dist_cls()`` turns into a distribution (RLlib's RLModule contract).

    Examples:
        >>> import gymnasium as gym, torch
        >>> module = DefaultTorchRLModule(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2),
        ...                               DefaultModelConfig(fcnet_hiddens=[32]))
        >>> module.forward_train({"obs": torch.zeros(3, 4)})["action_dist_inputs"].shape
        torch.Size([3, 2])
    """

    #: Whether the module builds ``model_config.conv_filters`` (subclasses whose other
    #: networks read the flat observation refuse them).
    supports_conv_filters: ClassVar[bool] = True

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        model_config: DefaultModelConfig,
    ):
        check_encoded_space(observation_space, type(self).__name__)
        super().__init__(observation_space=observation_space, action_space=action_space,
                         model_config=model_config)
        if isinstance(action_space, gym.spaces.Discrete):
            self._dist_cls = TorchCategorical
            outputs = TorchCategorical.required_input_dim(int(action_space.n))
        elif isinstance(action_space, gym.spaces.MultiDiscrete):
            self._dist_cls = TorchMultiCategorical.for_space(action_space)
            outputs = TorchMultiCategorical.required_input_dim(action_space)
        elif isinstance(action_space, gym.spaces.Dict | gym.spaces.Tuple):
            self._dist_cls = TorchMultiDistribution.for_space(action_space)
            outputs = TorchMultiDistribution.required_input_dim(action_space)
        elif isinstance(action_space, gym.spaces.Box):
            # The Gaussian is over the flat action vector; its samples have the Box's shape.
            self._dist_cls = (TorchDiagGaussian if len(action_space.shape) == 1
                              else TorchDiagGaussian.shaped(action_space.shape))
            outputs = TorchDiagGaussian.required_input_dim(int(np.prod(action_space.shape)))
            # The flat bounds as tensors on the module's device, for the losses that need
            # them; copies (a space sent to a Ray actor holds read-only arrays, which torch
            # warns of).
            for name, bound in (("action_low", action_space.low),
                                ("action_high", action_space.high)):
                self.register_buffer(name, torch.tensor(bound, dtype=torch.float32).reshape(-1),
                                     persistent=False)
        else:
            raise ValueError(f"DefaultTorchRLModule supports Discrete, MultiDiscrete, Box, Dict "
                             f"or Tuple actions, got {action_space}")
        #: The size of an encoded observation (``observation_dim``).
        self.obs_dim = obs_dim = observation_dim(observation_space)
        #: The input filter with ``normalize_observations`` (identity until given statistics).
        self.obs_normalizer = (self._build_normalizer() if model_config.normalize_observations
                               else None)
        #: The conv layers with ``model_config.conv_filters``, else ``None``.
        self.conv = self._build_conv()
        features = obs_dim if self.conv is None else self.conv.out_dim
        hiddens = list(model_config.fcnet_hiddens)
        self.encoder = mlp([features, *hiddens], model_config.fcnet_activation)
        head_sizes = [hiddens[-1] if hiddens else features, *model_config.head_fcnet_hiddens]
        free_log_std = model_config.free_log_std and issubclass(self._dist_cls, TorchDiagGaussian)
        self.pi = mlp([*head_sizes, outputs // 2 if free_log_std else outputs],
                      model_config.head_fcnet_activation, activate_last=False)
        self.log_std = nn.Parameter(torch.zeros(outputs // 2)) if free_log_std else None

    def _build_conv(self) -> ConvEncoder | None:
        filters = self.model_config.conv_filters
        if filters is None:
            return None
        if not self.supports_conv_filters:
            raise ConfigError(f"model_config conv_filters: {type(self).__name__} reads flat "
                              "observations and builds no conv layers; leave conv_filters out")
        if not isinstance(self.observation_space, gym.spaces.Box):
            raise ConfigError("model_config conv_filters need Box observations; the "
                              f"observation space is {self.observation_space}")
        return ConvEncoder(self.observation_space.shape, filters,
                           self.model_config.conv_activation)

    def _build_normalizer(self) -> ObservationNormalizer:
        config = self.model_config
        if not isinstance(self.observation_space, gym.spaces.Box):
            raise ConfigError("model_config normalize_observations=True needs Box observations; "
                              f"the observation space is {self.observation_space}")
        mean = config.observation_mean or [0.0] * self.obs_dim
        std = config.observation_std or [1.0] * self.obs_dim
        if len(mean) != self.obs_dim or len(std) != self.obs_dim:
            raise ConfigError(f"model_config observation_mean/observation_std have {len(mean)}/"
                              f"{len(std)} values; the observations have {self.obs_dim} features")
        return ObservationNormalizer(mean, std)

    def _encode_obs(self, obs: torch.Tensor) -> torch.Tensor:
        flat = encode_observations(self.observation_space, obs)
        if self.obs_normalizer is not None:
            flat = self.obs_normalizer(flat)
        return flat if self.conv is None else self.conv(flat.reshape(obs.shape))

    def _dist_inputs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        outputs = self.pi(self.encoder(self._encode_obs(batch[Columns.OBS])))
        if not issubclass(self._dist_cls, TorchDiagGaussian):
            return outputs
        loc, log_std = ((outputs, self.log_std.expand_as(outputs)) if self.log_std is not None
                        else outputs.chunk(2, dim=-1))
        return torch.cat([self._bound_mean(loc),
                          log_std.clamp(*self.model_config.log_std_range())], dim=-1)

    def _bound_mean(self, loc: torch.Tensor) -> torch.Tensor:
        """``loc`` squashed into the ``Box`` action bounds with ``tanh`` where
        ``model_config.bound_mean`` asks for it; else ``loc`` as it is."""
        if not self.model_config.bound_mean:
            return loc
        low, high = self.action_low, self.action_high
        return (high + low) / 2 + (high - low) / 2 * torch.tanh(loc)

    def forward_train(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Outputs for the loss."""
        return {Columns.ACTION_DIST_INPUTS: self._dist_inputs(batch)}

    def forward_inference(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Outputs for acting greedily."""
        with torch.no_grad():
            return {Columns.ACTION_DIST_INPUTS: self._dist_inputs(batch)}

    forward_exploration = forward_inference

    def get_train_action_dist_cls(self) -> type:
        """The distribution class ``action_dist_inputs`` parameterize."""
        return self._dist_cls

    get_inference_action_dist_cls = get_train_action_dist_cls
    get_exploration_action_dist_cls = get_train_action_dist_cls
