"""The policy an off-policy estimator judges: a module's action distribution, stochastic or
epsilon-greedy."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from offline_rl.columns import Columns
from offline_rl.errors import ConfigError


def check_epsilon_greedy(epsilon_greedy: Any) -> None:
    """Raises ``ConfigError`` unless ``epsilon_greedy`` is ``None`` or a number in [0, 1]."""
    if epsilon_greedy is not None and (isinstance(epsilon_greedy, bool) or not isinstance(
            epsilon_greedy, int | float) or not 0 <= epsilon_greedy <= 1):
        raise ConfigError(f"epsilon_greedy must be None or in [0, 1], got {epsilon_greedy!r}")


class TargetPolicy:
    """Probabilities of actions under ``module`` (an RLModule: ``forward_inference`` and
    ``get_inference_action_dist_cls``): its own distribution, or with ``epsilon_greedy`` set,
    its greedy action with probability ``1 - epsilon_greedy`` and a uniform action otherwise
    (``Discrete`` actions only).

    Examples:
        >>> import torch
        >>> from offline_rl.models.model_config import DefaultModelConfig
        >>> from offline_rl.models.torch_rl_module import DefaultTorchRLModule
        >>> module = DefaultTorchRLModule(gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2),
        ...                               DefaultModelConfig(fcnet_hiddens=[]))
        >>> with torch.no_grad():
        ...     _ = module.pi[0].weight.copy_(torch.tensor([[0.0], [1.0]]))
        ...     _ = module.pi[0].bias.zero_()
        >>> policy = TargetPolicy(module, epsilon_greedy=0.1)
        >>> policy.probabilities(np.array([[1.0]]), np.array([1])).round(3).tolist()
        [0.95]
        >>> policy.all_probabilities(np.array([[-1.0]])).round(3).tolist()
        [[0.95, 0.05]]
    """

    def __init__(self, module: Any, *, epsilon_greedy: float | None = None):
        self.module = module
        self.action_space = module.action_space
        check_epsilon_greedy(epsilon_greedy)
        if epsilon_greedy is not None and not isinstance(self.action_space,
                                                         gym.spaces.Discrete):
            raise ConfigError(f"epsilon_greedy={epsilon_greedy} needs Discrete actions, "
                              f"but the module acts in {self.action_space}; leave it None "
                              "to judge the module's own (stochastic) distribution")
        self.epsilon_greedy = epsilon_greedy

    @property
    def device(self) -> torch.device:
        """Where the module's parameters are."""
        return next(self.module.parameters()).device

    def _distribution(self, obs: np.ndarray) -> Any:
        obs_tensor = torch.as_tensor(np.asarray(obs, dtype=np.float32), device=self.device)
        with torch.no_grad():
            inputs = self.module.forward_inference({Columns.OBS: obs_tensor})[
                Columns.ACTION_DIST_INPUTS]
        return self.module.get_inference_action_dist_cls().from_logits(inputs)

    def all_probabilities(self, obs: np.ndarray) -> np.ndarray:
        """``(len(obs), n)``: the probability of each of the ``n`` ``Discrete`` actions."""
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise ConfigError(f"action probabilities per action need Discrete actions; the "
                              f"module acts in {self.action_space}")
        dist = self._distribution(obs)
        n = int(self.action_space.n)
        if self.epsilon_greedy is not None:
            greedy = dist.deterministic_sample().cpu().numpy()
            probabilities = np.full((len(obs), n), self.epsilon_greedy / n)
            probabilities[np.arange(len(obs)), greedy] += 1 - self.epsilon_greedy
            return probabilities
        with torch.no_grad():
            logp = torch.stack([dist.logp(torch.full((len(obs),), action, device=self.device))
                                for action in range(n)], dim=-1)
        return logp.exp().double().cpu().numpy()

    def probabilities(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """The probability (for ``Box`` actions, the density) of each ``actions[i]`` at
        ``obs[i]``."""
        if isinstance(self.action_space, gym.spaces.Discrete):
            chosen = np.asarray(actions, dtype=np.int64).reshape(-1)
            return self.all_probabilities(obs)[np.arange(len(chosen)), chosen]
        dist = self._distribution(obs)
        with torch.no_grad():
            logp = dist.logp(torch.as_tensor(np.asarray(actions, dtype=np.float32),
                                             device=self.device))
        return logp.exp().double().cpu().numpy()

    def sample(self, obs: np.ndarray, num_samples: int) -> torch.Tensor:
        """``(num_samples, len(obs), ...)`` actions drawn from the policy."""
        dist = self._distribution(obs)
        with torch.no_grad():
            return torch.stack([dist.sample() for _ in range(num_samples)])
