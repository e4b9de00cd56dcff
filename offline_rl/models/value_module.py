"""The default policy network plus a state-value network (RLlib's ``ValueFunctionAPI``)."""

from __future__ import annotations

import gymnasium as gym
import torch

from offline_rl.columns import Columns
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.torch_rl_module import DefaultTorchRLModule, mlp


class PolicyValueTorchRLModule(DefaultTorchRLModule):
    """``DefaultTorchRLModule``'s policy plus ``vf``, an MLP of ``fcnet_hiddens`` mapping an
    observation to its value ``V(s)``. ``compute_values(batch)`` is what connector pieces
    such as ``GeneralAdvantageEstimation`` call.

    Examples:
        >>> import gymnasium as gym, torch
        >>> module = PolicyValueTorchRLModule(gym.spaces.Box(-1, 1, (3,)),
        ...                                   gym.spaces.Discrete(2),
        ...                                   DefaultModelConfig(fcnet_hiddens=[16]))
        >>> module.compute_values({"obs": torch.zeros(5, 3)}).shape
        torch.Size([5])
    """

    #: Its other networks read the flat observation.
    supports_conv_filters = False

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 model_config: DefaultModelConfig):
        super().__init__(observation_space, action_space, model_config)
        self.vf = mlp([self.obs_dim, *model_config.fcnet_hiddens, 1],
                      model_config.fcnet_activation, activate_last=False)

    def state_value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)``, shape ``(batch,)``."""
        return self.vf(self._encode_obs(obs)).squeeze(-1)

    def compute_values(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """``V`` of the batch's ``obs``, shape ``(batch,)``."""
        return self.state_value(batch[Columns.OBS])
