"""The Q-network of DQN and DiscreteCQL: ``QTorchRLModule`` with an optional dueling head,
acting with a Boltzmann (SoftQ), epsilon-greedy or greedy policy over its Q-values."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from offline_rl.columns import Columns
from offline_rl.models.model_config import DQNModelConfig
from offline_rl.models.q_module import QTorchRLModule
from offline_rl.models.target_networks import polyak
from offline_rl.models.torch_rl_module import mlp


def dueling_q_values(value: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """``V(s) + A(s, a) - mean_a A(s, a)``: ``value`` is ``(batch, 1)``, ``advantages``
    ``(batch, n)``.

    Examples:
        >>> dueling_q_values(torch.tensor([[10.0]]), torch.tensor([[1.0, 3.0]]))
        tensor([[ 9., 11.]])
    """
    return value + advantages - advantages.mean(dim=1, keepdim=True)


def policy_logits(q_values: torch.Tensor, *, temperature: float | None = None,
                  epsilon: float = 0.0) -> torch.Tensor:
    """The logits of the policy acting on ``q_values``: ``Q / temperature`` (SoftQ), or with
    no temperature the log-probabilities of acting epsilon-greedily (``epsilon=0``: greedily;
    the other actions' logits are ``-inf``). The greedy action is the most likely in each.

    Examples:
        >>> q = torch.tensor([[1.0, 2.0]])
        >>> policy_logits(q, temperature=0.5)
        tensor([[2., 4.]])
        >>> policy_logits(q, epsilon=0.5).exp()
        tensor([[0.2500, 0.7500]])
        >>> policy_logits(q).exp()
        tensor([[0., 1.]])
    """
    if temperature is not None:
        return q_values / temperature
    n = q_values.shape[1]
    greedy = torch.nn.functional.one_hot(q_values.argmax(dim=1), n).to(q_values.dtype)
    return (epsilon / n + (1 - epsilon) * greedy).log()


class DQNTorchRLModule(QTorchRLModule):
    """``Q(s, .)`` (with ``model_config.dueling``: a value head beside the advantage head
    ``pi``, combined by ``dueling_q_values``) and its target copy. ``forward_train`` returns
    the Q-values as ``action_dist_inputs``; ``forward_inference`` and ``forward_exploration``
    return ``policy_logits``, so the categorical distribution over them (what recording
    samples and off-policy estimators judge) is the configured policy. ``compute_actions``
    samples it when ``explore`` (by default ``model_config.explore``), else takes
    ``argmax Q``.

    Examples:
        >>> import gymnasium as gym
        >>> module = DQNTorchRLModule(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2),
        ...                           DQNModelConfig(fcnet_hiddens=[16], dueling=True,
        ...                                          softq_temperature=2.0))
        >>> obs = torch.zeros(5, 3)
        >>> logits = module.forward_inference({"obs": obs})["action_dist_inputs"]
        >>> torch.allclose(logits, module.q_values(obs) / 2.0)
        True
        >>> module.compute_actions(obs.numpy(), explore=False).tolist() == (
        ...     module.q_values(obs).argmax(1).tolist())
        True
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 model_config: DQNModelConfig):
        super().__init__(observation_space, action_space, model_config)
        self.value = self.value_target = None
        if model_config.dueling:
            hiddens = list(model_config.fcnet_hiddens)
            sizes = [hiddens[-1] if hiddens else self.obs_dim, *model_config.head_fcnet_hiddens]
            self.value = mlp([*sizes, 1], model_config.head_fcnet_activation,
                             activate_last=False)
            self.value_target = copy.deepcopy(self.value).requires_grad_(False)

    def q_values(self, obs: torch.Tensor, *, target: bool = False) -> torch.Tensor:
        """Every action's value in ``obs`` (of the target network with ``target``):
        ``(batch, n)``."""
        encoder, advantage, value = ((self.encoder_target, self.pi_target, self.value_target)
                                     if target else (self.encoder, self.pi, self.value))
        features = encoder(self._encode_obs(obs))
        outputs = advantage(features)
        return outputs if value is None else dueling_q_values(value(features), outputs)

    def _dist_inputs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.q_values(batch[Columns.OBS])

    def forward_inference(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The policy's logits (see ``policy_logits``)."""
        config = self.model_config
        with torch.no_grad():
            return {Columns.ACTION_DIST_INPUTS: policy_logits(
                self.q_values(batch[Columns.OBS]), temperature=config.softq_temperature,
                epsilon=config.epsilon)}

    forward_exploration = forward_inference

    def update_targets(self, tau: float) -> None:
        """Moves the target network ``tau`` of the way to the Q-network."""
        super().update_targets(tau)
        if self.value is not None:
            polyak((self.value_target, self.value), tau=tau)

    def compute_actions(self, obs: Any, explore: bool | None = None) -> np.ndarray:
        """Actions for a batch of observations: sampled from the policy when ``explore``
        (``None``: ``model_config.explore``), else ``argmax Q``."""
        return super().compute_actions(obs, self.model_config.explore if explore is None
                                       else explore)
