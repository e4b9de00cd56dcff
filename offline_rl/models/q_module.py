"""A Q-network that acts greedily: ``DefaultTorchRLModule``'s network, whose outputs are read
as one value per discrete action, plus a Polyak-averaged target copy."""

from __future__ import annotations

import copy

import gymnasium as gym
import torch

from offline_rl.columns import Columns
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.target_networks import polyak
from offline_rl.models.torch_rl_module import DefaultTorchRLModule


class QTorchRLModule(DefaultTorchRLModule):
    """``Q(s, .)``: the MLP's outputs, one per action, are also the categorical distribution's
    logits, so the greedy action (``compute_actions``, evaluation) is ``argmax Q`` and sampling
    (recording) is Boltzmann over ``Q``. ``Discrete`` actions only.

    Examples:
        >>> import gymnasium as gym, torch
        >>> module = QTorchRLModule(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2),
        ...                         DefaultModelConfig(fcnet_hiddens=[16]))
        >>> obs = torch.zeros(5, 3)
        >>> module.q_values(obs).shape, module.q_values(obs, target=True).shape
        (torch.Size([5, 2]), torch.Size([5, 2]))
    """

    #: Its other networks read the flat observation.
    supports_conv_filters = False

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 model_config: DefaultModelConfig):
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"QTorchRLModule needs Discrete actions, got {action_space}")
        super().__init__(observation_space, action_space, model_config)
        self.encoder_target = copy.deepcopy(self.encoder).requires_grad_(False)
        self.pi_target = copy.deepcopy(self.pi).requires_grad_(False)

    def q_values(self, obs: torch.Tensor, *, target: bool = False) -> torch.Tensor:
        """Every action's value in ``obs`` (of the target network with ``target``):
        ``(batch, n)``."""
        if target:
            return self.pi_target(self.encoder_target(self._encode_obs(obs)))
        return self.forward_train({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]

    def update_targets(self, tau: float) -> None:
        """Moves the target network ``tau`` of the way to the Q-network."""
        polyak((self.encoder_target, self.encoder), (self.pi_target, self.pi), tau=tau)
