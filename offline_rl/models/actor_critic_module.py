"""The default policy network plus the critics value-based offline RL learns with: twin
Q-networks with Polyak-averaged targets and a state-value network."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from offline_rl.errors import ConfigError
from offline_rl.models.distributions import TorchSquashedGaussian
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.target_networks import polyak
from offline_rl.models.torch_rl_module import mlp
from offline_rl.models.value_module import PolicyValueTorchRLModule

#: Name prefixes of the parameters that are not the policy's: the critics, the targets.
NOT_POLICY_PREFIXES = ("qf", "vf", "encoder_target", "pi_target")


def check_critic_actions(action_space: gym.Space, module_name: str) -> None:
    """Raises ``ConfigError`` unless the critics read ``action_space``: ``Discrete``, or a
    ``Box`` of one dimension (a ``MultiDiscrete`` or a shaped ``Box`` trains with BC or
    MARWIL, whose policy alone reads them)."""
    if isinstance(action_space, gym.spaces.Discrete) or (
            isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        return
    raise ConfigError(f"{module_name} has Q-networks for Discrete actions or Box actions of "
                      f"shape (n,), got {action_space}; train these actions with BC or MARWIL, "
                      "or set config.environment(action_space=...) to such a space")


class ActorCriticTorchRLModule(PolicyValueTorchRLModule):
    """``PolicyValueTorchRLModule``'s policy (it acts, as in evaluation and recording) and
    state-value network ``vf``, plus twin Q-networks ``qf``/``qf_twin`` and their targets, each
    an MLP of ``fcnet_hiddens``. With ``Discrete`` actions a Q-network maps an observation to
    one value per action; with ``Box`` actions, an observation and an action to one value.

    Examples:
        >>> import gymnasium as gym, torch
        >>> module = ActorCriticTorchRLModule(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2),
        ...                                   DefaultModelConfig(fcnet_hiddens=[16]))
        >>> obs, actions = torch.zeros(5, 3), torch.tensor([0, 1, 0, 1, 1])
        >>> [q.shape for q in module.q_values(obs, actions)], module.state_value(obs).shape
        ([torch.Size([5]), torch.Size([5])], torch.Size([5]))
        >>> module.q_values(obs)[0].shape  # every action's value
        torch.Size([5, 2])
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 model_config: DefaultModelConfig):
        check_critic_actions(action_space, type(self).__name__)
        super().__init__(observation_space, action_space, model_config)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        inputs = (self.obs_dim if self.discrete
                  else self.obs_dim + int(np.prod(action_space.shape)))
        outputs = int(action_space.n) if self.discrete else 1
        hiddens, activation = list(model_config.fcnet_hiddens), model_config.fcnet_activation
        self.qf = mlp([inputs, *hiddens, outputs], activation, activate_last=False)
        self.qf_twin = mlp([inputs, *hiddens, outputs], activation, activate_last=False)
        self.qf_target = copy.deepcopy(self.qf).requires_grad_(False)
        self.qf_twin_target = copy.deepcopy(self.qf_twin).requires_grad_(False)

    def policy_parameters(self) -> list[nn.Parameter]:
        """The policy's parameters (encoder and head)."""
        return [parameter for name, parameter in self.named_parameters()
                if not name.startswith(NOT_POLICY_PREFIXES)]

    def critic_parameters(self) -> list[nn.Parameter]:
        """Both Q-networks' parameters (not their targets')."""
        return [*self.qf.parameters(), *self.qf_twin.parameters()]

    def q_values(self, obs: torch.Tensor, actions: torch.Tensor | None = None, *,
                 target: bool = False, twin: bool = True) -> tuple[torch.Tensor, ...]:
        """Both Q-networks' (or their targets') values of ``actions`` in ``obs``, or with
        ``twin=False`` the first's alone (RLlib's ``twin_q=False``: the twin is not run): shape
        ``(batch,)``; for ``Discrete`` actions without ``actions``, every action's:
        ``(batch, n)``."""
        networks = (self.qf_target, self.qf_twin_target) if target else (self.qf, self.qf_twin)
        networks = networks if twin else networks[:1]
        encoded = self._encode_obs(obs)
        if not self.discrete:
            inputs = torch.cat([encoded, actions.reshape(len(actions), -1).float()], dim=-1)
            return tuple(network(inputs).squeeze(-1) for network in networks)
        values = [network(encoded) for network in networks]
        if actions is None:
            return tuple(values)
        index = actions.long().reshape(-1, 1)
        return tuple(value.gather(1, index).squeeze(-1) for value in values)

    def update_targets(self, tau: float) -> None:
        """Moves each target network ``tau`` of the way to its Q-network (Polyak averaging)."""
        polyak((self.qf_target, self.qf), (self.qf_twin_target, self.qf_twin), tau=tau)


class TargetPolicyActorCriticTorchRLModule(ActorCriticTorchRLModule):
    """``ActorCriticTorchRLModule`` plus a Polyak-averaged target copy of the policy, for
    deterministic actor-critics (TD3+BC); their actions are the policy's means.

    Examples:
        >>> import gymnasium as gym, torch
        >>> module = TargetPolicyActorCriticTorchRLModule(
        ...     gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (1,)),
        ...     DefaultModelConfig(fcnet_hiddens=[16]))
        >>> module.mean_actions(torch.zeros(5, 3), target=True).shape
        torch.Size([5, 1])
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 model_config: DefaultModelConfig):
        super().__init__(observation_space, action_space, model_config)
        self.encoder_target = copy.deepcopy(self.encoder).requires_grad_(False)
        self.pi_target = copy.deepcopy(self.pi).requires_grad_(False)

    def mean_actions(self, obs: torch.Tensor, *, target: bool = False) -> torch.Tensor:
        """The policy's (or its target's) mean action in ``obs``, the one it acts with:
        inside the action bounds where ``model_config.bound_mean`` squashes it, else not
        clipped."""
        encoder, pi = (self.encoder_target, self.pi_target) if target else (self.encoder,
                                                                             self.pi)
        outputs = pi(encoder(self._encode_obs(obs)))
        return self._bound_mean(outputs if self.log_std is not None
                                else outputs.chunk(2, dim=-1)[0])

    def update_policy_target(self, tau: float) -> None:
        """Moves the target policy ``tau`` of the way to the policy (Polyak averaging)."""
        polyak((self.encoder_target, self.encoder), (self.pi_target, self.pi), tau=tau)


class SquashedActorCriticTorchRLModule(ActorCriticTorchRLModule):
    """``ActorCriticTorchRLModule`` whose policy is a ``tanh``-squashed Gaussian inside the
    ``Box`` action bounds (SAC's policy, which continuous CQL trains): it acts with the
    squashed mean, and ``sample_actions`` draws differentiable actions with their
    log-densities.

    Examples:
        >>> import gymnasium as gym, torch
        >>> module = SquashedActorCriticTorchRLModule(
        ...     gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-2, 2, (1,)),
        ...     DefaultModelConfig(fcnet_hiddens=[16]))
        >>> actions, logp = module.sample_actions(module.forward_train(
        ...     {"obs": torch.zeros(5, 3)})["action_dist_inputs"], num_samples=4)
        >>> actions.shape, logp.shape, bool(actions.abs().max() <= 2)
        (torch.Size([5, 4, 1]), torch.Size([5, 4]), True)
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 model_config: DefaultModelConfig):
        if not isinstance(action_space, gym.spaces.Box):
            raise ValueError(f"SquashedActorCriticTorchRLModule needs Box actions, got "
                             f"{action_space}")
        if model_config.bound_mean:
            raise ConfigError("model_config bound_mean=True squashes a Gaussian's mean; this "
                             "policy squashes its samples into the bounds already")
        super().__init__(observation_space, action_space, model_config)
        self._dist_cls = TorchSquashedGaussian.bounded(action_space.low, action_space.high)

    def sample_actions(self, dist_inputs: torch.Tensor, num_samples: int = 1
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """``num_samples`` reparameterized actions per row of ``dist_inputs`` and their
        log-densities: shapes ``(batch, num_samples, *action_shape)`` and
        ``(batch, num_samples)``."""
        repeated = dist_inputs.unsqueeze(1).expand(-1, num_samples, -1)
        actions, logp = self._dist_cls.from_logits(repeated).rsample_with_logp()
        return actions.reshape(*repeated.shape[:2], *self.action_space.shape), logp
