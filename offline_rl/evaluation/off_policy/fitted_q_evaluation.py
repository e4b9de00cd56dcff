"""Fitted Q evaluation: a torch Q-network of the target policy, fitted to the logged steps by
temporal differences, for the model-based estimators (``DirectMethod``, ``DoublyRobust``):
``FQETorchModel``, as RLlib names it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from offline_rl.errors import ConfigError
from offline_rl.evaluation.off_policy.logged_episodes import LoggedEpisode
from offline_rl.evaluation.off_policy.target_policy import TargetPolicy
from offline_rl.import_path import resolve_class
from offline_rl.models.model_config import ACTIVATIONS
from offline_rl.models.optimizers import adam
from offline_rl.models.target_networks import polyak
from offline_rl.models.torch_rl_module import mlp


@dataclass(frozen=True)
class FQEConfig:
    """The Q-model of fitted Q evaluation (an estimator's ``q_model_config``, but for its
    ``type``): the network (``fcnet_hiddens``, ``fcnet_activation``), Adam's ``lr``,
    ``n_iters`` passes over the data
    in minibatches of ``minibatch_size`` steps, the target network moved ``polyak_coef``
    towards the Q-network after each minibatch, ``num_action_samples`` policy actions
    averaged for a state's value (``Box`` actions; ``Discrete`` ones are summed exactly), and
    the ``seed`` of the initial weights and the minibatch order."""

    fcnet_hiddens: tuple[int, ...] = (64, 64)
    fcnet_activation: str = "relu"
    lr: float = 1e-3
    n_iters: int = 100
    minibatch_size: int = 256
    polyak_coef: float = 0.05
    num_action_samples: int = 10
    seed: int = 0

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> FQEConfig:
        """The config of ``values`` (a subset of the fields); ``ConfigError`` names unknown
        keys and values out of range."""
        known = [field.name for field in fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(f"q_model_config has unknown keys {unknown}; known: {known}")
        hiddens = values.get("fcnet_hiddens", cls.fcnet_hiddens)
        if not isinstance(hiddens, list | tuple):
            raise ConfigError(f"q_model_config fcnet_hiddens must be a list of layer sizes, "
                              f"got {hiddens!r}")
        config = cls(**{**values, "fcnet_hiddens": tuple(hiddens)})
        config.check()
        return config

    def check(self) -> None:
        """Raises ``ConfigError`` naming the first value out of range."""
        if not isinstance(self.fcnet_activation, str) or self.fcnet_activation not in ACTIVATIONS:
            raise ConfigError(f"q_model_config fcnet_activation must be one of "
                              f"{sorted(ACTIVATIONS)}, got {self.fcnet_activation!r}")
        counts = {"n_iters": self.n_iters, "minibatch_size": self.minibatch_size,
                  "num_action_samples": self.num_action_samples,
                  **{f"fcnet_hiddens[{i}]": size for i, size in enumerate(self.fcnet_hiddens)}}
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"q_model_config {name} must be an int >= 1, got {value!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"q_model_config seed must be an int >= 0, got {self.seed!r}")
        for name in ("lr", "polyak_coef"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"q_model_config {name} must be a number, got {value!r}")
        if not self.lr > 0 or not 0 < self.polyak_coef <= 1:
            raise ConfigError(f"q_model_config needs lr > 0 and polyak_coef in (0, 1], got "
                              f"lr={self.lr}, polyak_coef={self.polyak_coef}")


class FQETorchModel:
    """``Q(s, a)`` of the target policy: ``train`` fits ``Q(s, a) = r + gamma * (1 -
    terminated) * V(s')`` on logged steps with ``V(s') = E_{a'~pi}[Q_target(s', a')]``.
    Estimators build it from their ``q_model_config`` (see ``q_model_of``)."""

    def __init__(self, policy: TargetPolicy, gamma: float, config: FQEConfig):
        space = policy.module.observation_space
        if not isinstance(space, gym.spaces.Box):
            raise ConfigError(f"fitted Q evaluation reads Box observations, got {space}")
        self.policy, self.gamma, self.config = policy, gamma, config
        self.discrete = isinstance(policy.action_space, gym.spaces.Discrete)
        obs_dim = int(np.prod(space.shape))
        sizes = ([obs_dim, *config.fcnet_hiddens, int(policy.action_space.n)] if self.discrete
                 else [obs_dim + int(np.prod(policy.action_space.shape)),
                       *config.fcnet_hiddens, 1])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            self.q = mlp(sizes, config.fcnet_activation, activate_last=False)
            self.target_q = mlp(sizes, config.fcnet_activation, activate_last=False)
        self.q.to(policy.device)
        self.target_q.to(policy.device).load_state_dict(self.q.state_dict())
        self.optimizer = adam(self.q.parameters(), lr=config.lr)
        self.trained = False

    def _tensor(self, values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(values, dtype=np.float32), device=self.policy.device)

    def _q(self, network: torch.nn.Module, obs: torch.Tensor, actions: torch.Tensor
           ) -> torch.Tensor:
        flat = obs.reshape(len(obs), -1)
        if self.discrete:
            return network(flat).gather(1, actions.long().reshape(-1, 1)).squeeze(1)
        return network(torch.cat([flat, actions.reshape(len(obs), -1)], dim=1)).squeeze(1)

    def _values(self, network: torch.nn.Module, obs: np.ndarray) -> torch.Tensor:
        obs_tensor = self._tensor(obs)
        if self.discrete:
            probabilities = self._tensor(self.policy.all_probabilities(obs))
            return (network(obs_tensor.reshape(len(obs), -1)) * probabilities).sum(1)
        samples = self.policy.sample(obs, self.config.num_action_samples)
        repeated = obs_tensor.expand(len(samples), *obs_tensor.shape).flatten(0, 1)
        return self._q(network, repeated, samples.flatten(0, 1)).view(len(samples), -1).mean(0)

    def train(self, episodes: list[LoggedEpisode]) -> dict[str, float]:
        """Fits the Q-network; returns the mean squared TD error of the last pass
        (``loss``)."""
        obs = np.concatenate([episode.obs for episode in episodes])
        next_obs = np.concatenate([episode.next_obs for episode in episodes])
        actions = self._tensor(np.concatenate([episode.actions for episode in episodes]))
        rewards = self._tensor(np.concatenate([episode.rewards for episode in episodes]))
        terminals = self._tensor(np.concatenate([
            np.arange(len(episode)) == len(episode) - 1 if episode.terminated
            else np.zeros(len(episode), bool) for episode in episodes]))
        obs_tensor = self._tensor(obs)
        rng = np.random.default_rng(self.config.seed)
        size = self.config.minibatch_size
        for _ in range(self.config.n_iters):
            losses, order = [], rng.permutation(len(obs))
            for start in range(0, len(obs), size):
                rows = order[start:start + size]
                with torch.no_grad():
                    targets = rewards[rows] + self.gamma * (1 - terminals[rows]) * self._values(
                        self.target_q, next_obs[rows])
                loss = torch.nn.functional.mse_loss(
                    self._q(self.q, obs_tensor[rows], actions[rows]), targets)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                polyak((self.target_q, self.q), tau=self.config.polyak_coef)
                losses.append(loss.item())
        self.trained = True
        return {"loss": float(np.mean(losses))}

    def _ready(self) -> None:
        if not self.trained:
            raise ConfigError("the Q-model is untrained: call estimator.train(data) before "
                              "estimator.estimate(data)")

    def q_values(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """``Q(s, a)`` per logged step."""
        self._ready()
        with torch.no_grad():
            return self._q(self.q, self._tensor(obs), self._tensor(actions)).double().cpu(
                ).numpy()

    def state_values(self, obs: np.ndarray) -> np.ndarray:
        """``V(s) = E_{a~pi}[Q(s, a)]`` per observation."""
        self._ready()
        with torch.no_grad():
            return self._values(self.q, obs).double().cpu().numpy()


def q_model_of(q_model_config: Mapping[str, Any] | None) -> tuple[type[FQETorchModel], FQEConfig]:
    """The Q-model class and config of an estimator's ``q_model_config``: RLlib's
    ``{"type": FQETorchModel, **options}``, ``type`` (optional) being ``FQETorchModel`` or a
    subclass, its name, or a ``"package.module:Name"`` path to one in a module this process
    imported (as a config file would give it), and the options ``FQEConfig``'s fields.
    ``ConfigError`` names a bad type, key or value.

    Examples:
        >>> kind, config = q_model_of({"type": "FQETorchModel", "n_iters": 160})
        >>> kind.__name__, config.n_iters, config.polyak_coef
        ('FQETorchModel', 160, 0.05)
        >>> q_model_of({"type": dict})
        Traceback (most recent call last):
        ...
        offline_rl.errors.ConfigError: q_model_config type <class 'dict'> is no Q-model; ...
    """
    if not isinstance(q_model_config, Mapping | None):
        raise ConfigError(f"q_model_config must be a dict of FQEConfig's fields and an "
                          f"optional 'type', got {q_model_config!r}")
    options = dict(q_model_config or {})
    kind = options.pop("type", FQETorchModel)
    if kind == FQETorchModel.__name__:
        kind = FQETorchModel
    elif isinstance(kind, str):
        kind = resolve_class(kind, FQETorchModel, "q_model_config type")
    if not (isinstance(kind, type) and issubclass(kind, FQETorchModel)):
        raise ConfigError(f"q_model_config type {kind!r} is no Q-model; use FQETorchModel (or "
                          "a subclass of it)")
    return kind, FQEConfig.from_dict(options)
