"""Action distributions parameterized by a module's ``action_dist_inputs``."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from offline_rl.formats.composite import leaf_spaces, leaf_width

#: Keeps ``tanh``-squashed actions off the bounds, where their log-density is infinite.
SQUASH_EPSILON = 1e-6


class TorchCategorical:
    """Categorical distribution over discrete actions, from logits.

    Examples:
        >>> import torch
        >>> TorchCategorical.from_logits(torch.tensor([[0.0, 2.0]])).deterministic_sample()
        tensor([1])
    """

    def __init__(self, logits: torch.Tensor):
        self.logits = logits

    @functools.cached_property
    def _dist(self) -> torch.distributions.Categorical:
        """torch's distribution, built when first needed: acting greedily needs only the
        logits, and building it (normalizing and checking them) doubled a small batch's
        ``compute_actions``."""
        return torch.distributions.Categorical(logits=self.logits)

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


class TorchMultiCategorical:
    """One categorical distribution per component of a ``MultiDiscrete`` action, from the
    components' logits concatenated; an action's log-probability is the sum of its
    components'. ``for_space(space)`` makes the class for one action space.

    Examples:
        >>> import gymnasium as gym, torch
        >>> dist_cls = TorchMultiCategorical.for_space(gym.spaces.MultiDiscrete([2, 3]))
        >>> dist = dist_cls.from_logits(torch.tensor([[0.0, 1.0, 3.0, 0.0, 0.0]]))
        >>> dist.deterministic_sample()
        tensor([[1, 0]])
        >>> dist.logp(torch.tensor([[1, 0]])).shape
        torch.Size([1])
    """

    #: Values per component (flat) and the action's shape (``MultiDiscrete.nvec``'s).
    nvec: tuple[int, ...] = ()
    action_shape: tuple[int, ...] = (0,)
    #: Each component's smallest value (``MultiDiscrete.start``, flat).
    start: tuple[int, ...] = ()

    def __init__(self, logits: torch.Tensor):
        self.logits = logits
        self.categoricals = [TorchCategorical(part)
                             for part in logits.split(list(self.nvec), dim=-1)]

    @classmethod
    def for_space(cls, space: Any) -> type[TorchMultiCategorical]:
        """The distribution class for the ``MultiDiscrete`` ``space``."""
        nvec = np.asarray(space.nvec)
        return type(cls.__name__, (cls,), {
            "nvec": tuple(int(n) for n in nvec.reshape(-1)), "action_shape": nvec.shape,
            "start": tuple(int(n) for n in np.asarray(space.start).reshape(-1))})

    @classmethod
    def from_logits(cls, logits: torch.Tensor) -> TorchMultiCategorical:
        """Builds the distribution from the module's raw outputs."""
        return cls(logits)

    @classmethod
    def required_input_dim(cls, space: Any) -> int:
        """Outputs the module must produce for the ``MultiDiscrete`` ``space``."""
        return int(np.asarray(space.nvec).sum())

    def _components(self, actions: torch.Tensor) -> torch.Tensor:
        """``actions`` as one column per component, counted from 0."""
        flat = actions.reshape(*actions.shape[:actions.dim() - len(self.action_shape)], -1)
        return flat.long() - torch.tensor(self.start, device=flat.device)

    def _actions(self, components: list[torch.Tensor]) -> torch.Tensor:
        flat = torch.stack(components, dim=-1) + torch.tensor(self.start,
                                                               device=self.logits.device)
        return flat.reshape(*flat.shape[:-1], *self.action_shape)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of each action: the sum of its components'."""
        components = self._components(actions).unbind(-1)
        return sum(dist.logp(component)
                   for dist, component in zip(self.categoricals, components, strict=True))

    def entropy(self) -> torch.Tensor:
        """Entropy per row (the components are independent: the sum of theirs)."""
        return sum(dist.entropy() for dist in self.categoricals)

    def sample(self) -> torch.Tensor:
        """A random action per row."""
        return self._actions([dist.sample() for dist in self.categoricals])

    def deterministic_sample(self) -> torch.Tensor:
        """The most likely action per row (each component's most likely value)."""
        return self._actions([dist.deterministic_sample() for dist in self.categoricals])


class TorchDiagGaussian:
    """Diagonal Gaussian over continuous actions; inputs are ``[mean, log_std]`` concatenated.

    Examples:
        >>> import torch
        >>> dist = TorchDiagGaussian.from_logits(torch.tensor([[0.5, 0.0]]))
        >>> dist.deterministic_sample()
        tensor([[0.5000]])
    """

    #: The shape of one action (``None``: one flat vector, the module's outputs as they are);
    #: ``shaped(shape)`` makes the class for a ``Box`` of another shape.
    action_shape: tuple[int, ...] | None = None

    def __init__(self, loc: torch.Tensor, scale: torch.Tensor):
        self.loc = loc
        self.scale = scale

    @classmethod
    def shaped(cls, action_shape: tuple[int, ...]) -> type[TorchDiagGaussian]:
        """The distribution class for actions of ``action_shape`` (a ``Box`` of shape ``()``
        or ``(2, 2)``): it works on the flat vector and its samples have that shape.

        Examples:
            >>> import torch
            >>> dist = TorchDiagGaussian.shaped((2, 2)).from_logits(torch.zeros(3, 8))
            >>> dist.sample().shape, dist.logp(torch.zeros(3, 2, 2)).shape
            (torch.Size([3, 2, 2]), torch.Size([3]))
        """
        return type(cls.__name__, (cls,), {"action_shape": tuple(action_shape)})

    def _flat(self, actions: torch.Tensor) -> torch.Tensor:
        """``actions`` (of ``action_shape``) as flat vectors like ``loc``'s."""
        actions = actions.to(self.loc.dtype)
        if self.action_shape is None:
            return actions
        return actions.reshape(*actions.shape[:actions.dim() - len(self.action_shape)], -1)

    def _shaped(self, actions: torch.Tensor) -> torch.Tensor:
        """Flat action vectors in ``action_shape``."""
        if self.action_shape is None:
            return actions
        return actions.reshape(*actions.shape[:-1], *self.action_shape)

    @functools.cached_property
    def _dist(self) -> torch.distributions.Normal:
        """torch's distribution, built when first needed (acting greedily needs only ``loc``)."""
        return torch.distributions.Normal(self.loc, self.scale)

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
        """Log-density of each action."""
        return self._dist.log_prob(self._flat(actions)).sum(dim=-1)

    def entropy(self) -> torch.Tensor:
        """Entropy per row."""
        return self._dist.entropy().sum(dim=-1)

    def sample(self) -> torch.Tensor:
        """A random action per row."""
        return self._shaped(self._dist.sample())

    def deterministic_sample(self) -> torch.Tensor:
        """The mean action per row."""
        return self._shaped(self.loc)


class TorchSquashedGaussian(TorchDiagGaussian):
    """A diagonal Gaussian squashed by ``tanh`` into the action bounds ``[low, high]`` (SAC's
    policy); ``bounded(low, high)`` makes the class for one action space.

    Examples:
        >>> import torch
        >>> dist_cls = TorchSquashedGaussian.bounded([0.0], [4.0])
        >>> dist = dist_cls.from_logits(torch.tensor([[0.0, -1.0]]))
        >>> dist.deterministic_sample()  # tanh(0) is the middle of [0, 4]
        tensor([[2.]])
        >>> actions, logp = dist.rsample_with_logp()
        >>> torch.allclose(dist.logp(actions), logp, atol=1e-4)
        True
    """

    low: np.ndarray = np.array([-1.0], np.float32)
    high: np.ndarray = np.array([1.0], np.float32)

    @classmethod
    def bounded(cls, low: Any, high: Any) -> type[TorchSquashedGaussian]:
        """The distribution class squashing into ``[low, high]``."""
        return type(cls.__name__, (cls,), {"low": np.asarray(low, np.float32),
                                           "high": np.asarray(high, np.float32)})

    def _half_range(self) -> tuple[torch.Tensor, torch.Tensor]:
        # Copies: the class's arrays arrive read-only where Ray unpickled the module.
        low = torch.tensor(self.low, device=self.loc.device)
        high = torch.tensor(self.high, device=self.loc.device)
        return (high + low) / 2, (high - low) / 2

    def _squash(self, unsquashed: torch.Tensor) -> torch.Tensor:
        middle, half = self._half_range()
        return middle + half * torch.tanh(unsquashed)

    def _logp_unsquashed(self, unsquashed: torch.Tensor) -> torch.Tensor:
        _, half = self._half_range()
        correction = torch.log(half * (1 - torch.tanh(unsquashed).pow(2)) + SQUASH_EPSILON)
        return (self._dist.log_prob(unsquashed) - correction).sum(dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-density of each action vector (actions at the bounds are moved just inside)."""
        middle, half = self._half_range()
        scaled = ((actions.to(self.loc.dtype) - middle) / half).clamp(-1 + SQUASH_EPSILON,
                                                                      1 - SQUASH_EPSILON)
        return self._logp_unsquashed(torch.atanh(scaled))

    def entropy(self) -> torch.Tensor:
        """A one-sample estimate of the entropy per row (it has no closed form)."""
        return -self.rsample_with_logp()[1]

    def sample(self) -> torch.Tensor:
        """A random action vector per row."""
        with torch.no_grad():
            return self._squash(self._dist.sample())

    def rsample_with_logp(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterized sample per row and its log-density (gradients flow to the
        distribution's inputs)."""
        unsquashed = self._dist.rsample()
        return self._squash(unsquashed), self._logp_unsquashed(unsquashed)

    def deterministic_sample(self) -> torch.Tensor:
        """The squashed mean per row."""
        return self._squash(self.loc)


class TorchMultiDistribution:
    """One distribution per leaf of a ``Dict``/``Tuple`` action space (nested or not): a
    categorical for ``Discrete``, a ``TorchMultiCategorical`` for ``MultiDiscrete``, a diagonal
    Gaussian for ``Box``; inputs are the leaves' inputs concatenated, actions the leaves'
    numbers packed into one row (``offline_rl.formats.composite.pack_values``), and an
    action's log-probability the sum of its leaves'. ``for_space(space)`` makes the class.

    Examples:
        >>> import gymnasium as gym, torch
        >>> space = gym.spaces.Dict(a=gym.spaces.Discrete(3), b=gym.spaces.Box(0, 1, (2,)))
        >>> dist_cls = TorchMultiDistribution.for_space(space)
        >>> dist_cls.required_input_dim(space)
        7
        >>> dist = dist_cls.from_logits(torch.tensor([[0.0, 5.0, 0.0, 0.5, 0.2, 0.0, 0.0]]))
        >>> dist.deterministic_sample()
        tensor([[1.0000, 0.5000, 0.2000]])
        >>> dist.logp(torch.tensor([[1.0, 0.5, 0.2]])).shape
        torch.Size([1])
    """

    #: Each leaf's distribution class, the width of its inputs and of its packed action.
    leaves: tuple[tuple[type, int, int], ...] = ()

    def __init__(self, logits: torch.Tensor):
        self.logits = logits
        widths = [inputs for _, inputs, _ in self.leaves]
        self.parts = [dist_cls.from_logits(part) for (dist_cls, _, _), part in
                      zip(self.leaves, logits.split(widths, dim=-1), strict=True)]

    @classmethod
    def for_space(cls, space: Any) -> type[TorchMultiDistribution]:
        """The distribution class for the ``Dict``/``Tuple`` ``space``."""
        leaves = []
        for leaf in leaf_spaces(space):
            if isinstance(leaf, gym.spaces.Discrete):
                leaves.append((TorchCategorical, int(leaf.n), 1))
            elif isinstance(leaf, gym.spaces.MultiDiscrete):
                leaves.append((TorchMultiCategorical.for_space(leaf),
                               TorchMultiCategorical.required_input_dim(leaf), leaf_width(leaf)))
            elif isinstance(leaf, gym.spaces.Box):
                width = leaf_width(leaf)
                leaves.append((TorchDiagGaussian.shaped((width,)),
                               TorchDiagGaussian.required_input_dim(width), width))
            else:
                raise ValueError(f"no distribution for the action space part {leaf}: "
                                 "Discrete, MultiDiscrete or Box parts only")
        return type(cls.__name__, (cls,), {"leaves": tuple(leaves)})

    @classmethod
    def from_logits(cls, logits: torch.Tensor) -> TorchMultiDistribution:
        """Builds the distribution from the module's raw outputs."""
        return cls(logits)

    @classmethod
    def required_input_dim(cls, space: Any) -> int:
        """Outputs the module must produce for ``space`` (the class for it)."""
        return sum(inputs for _, inputs, _ in cls.for_space(space).leaves)

    def _split(self, actions: torch.Tensor) -> list[torch.Tensor]:
        parts = actions.split([width for _, _, width in self.leaves], dim=-1)
        return [part.squeeze(-1) if dist_cls is TorchCategorical else part
                for (dist_cls, _, _), part in zip(self.leaves, parts, strict=True)]

    def _packed(self, parts: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat([part.reshape(len(part), -1).to(self.logits.dtype) for part in parts],
                         dim=-1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        """Log-probability of each packed action: the sum of its leaves'."""
        return sum(dist.logp(part) for dist, part in
                   zip(self.parts, self._split(actions), strict=True))

    def entropy(self) -> torch.Tensor:
        """Entropy per row (the leaves are independent: the sum of theirs)."""
        return sum(dist.entropy() for dist in self.parts)

    def sample(self) -> torch.Tensor:
        """A random packed action per row."""
        return self._packed([dist.sample() for dist in self.parts])

    def deterministic_sample(self) -> torch.Tensor:
        """Each leaf's most likely value, packed, per row."""
        return self._packed([dist.deterministic_sample() for dist in self.parts])
