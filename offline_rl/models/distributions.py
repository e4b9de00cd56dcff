"""Action distributions parameterized by a module's ``action_dist_inputs``."""

from __future__ import annotations

import torch


class TorchCategorical:
    """Categorical distribution over discrete actions, from logits.

    Example:
        >>> import torch
        >>> TorchCategorical.from_logits(torch.tensor([[0.0, 2.0]])).deterministic_sample()
        tensor([1])
    """

    def __init__(self, logits: torch.Tensor):
        self.logits = logits
        self._dist = torch.distributions.Categorical(logits=logits)

    @classmethod
    def from_logits(cls, logits: torch.Tensor) -> TorchCategorical:
        """Builds the distribution from the module's raw outputs."""
        return cls(logits)

    @staticmethod
    def required_input_dim(num_actions: int) -> int:
        """Outputs the module must produce for ``num_actions`` actions."""
        return num_actions

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of each action."""
        return self._dist.log_prob(actions.long())

    def entropy(self) -> torch.Tensor:
        """Entropy per row."""
        return self._dist.entropy()

    def sample(self) -> torch.Tensor:
        """A random action per row."""
        return self._dist.sample()

    def deterministic_sample(self) -> torch.Tensor:
        """The most likely action per row."""
        return self.logits.argmax(dim=-1)


class TorchDiagGaussian:
    """Diagonal Gaussian over continuous actions; inputs are ``[mean, log_std]`` concatenated.

    Example:
        >>> import torch
        >>> dist = TorchDiagGaussian.from_logits(torch.tensor([[0.5, 0.0]]))
        >>> dist.deterministic_sample()
        tensor([[0.5000]])
    """

    def __init__(self, loc: torch.Tensor, scale: torch.Tensor):
        self.loc = loc
        self._dist = torch.distributions.Normal(loc, scale)

    @classmethod
    def from_logits(cls, logits: torch.Tensor) -> TorchDiagGaussian:
        """Splits the module's outputs into mean and log standard deviation."""
        loc, log_std = logits.chunk(2, dim=-1)
        return cls(loc, log_std.exp())

    @staticmethod
    def required_input_dim(action_dim: int) -> int:
        """Outputs the module must produce for ``action_dim``-dimensional actions."""
        return 2 * action_dim

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-density of each action vector."""
        return self._dist.log_prob(actions.to(self.loc.dtype)).sum(dim=-1)

    def entropy(self) -> torch.Tensor:
        """Entropy per row."""
        return self._dist.entropy().sum(dim=-1)

    def sample(self) -> torch.Tensor:
        """A random action vector per row."""
        return self._dist.sample()

    def deterministic_sample(self) -> torch.Tensor:
        """The mean action per row."""
        return self.loc
