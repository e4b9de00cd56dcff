"""Importance sampling estimators: the logged rewards reweighted by how much more (or less)
likely the target policy was to take the logged actions."""

from __future__ import annotations

import numpy as np

from offline_rl.evaluation.off_policy.estimator import OffPolicyEstimator
from offline_rl.evaluation.off_policy.logged_episodes import LoggedEpisode


class ImportanceSampling(OffPolicyEstimator):
    """Per-decision importance sampling: an episode's value is
    ``sum_t gamma ** t * p_t * r_t`` with ``p_t`` the product of the importance ratios of steps
    ``0..t``. Unbiased, with variance growing with the horizon.

    Examples:
        >>> import gymnasium as gym, torch
        >>> from offline_rl.models.model_config import DefaultModelConfig
        >>> from offline_rl.models.torch_rl_module import DefaultTorchRLModule
        >>> uniform = DefaultTorchRLModule(gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2),
        ...                                DefaultModelConfig(fcnet_hiddens=[]))
        >>> for parameter in uniform.parameters():
        ...     _ = torch.nn.init.zeros_(parameter)
        >>> steps = {"eps_id": [0, 0], "obs": [[0.0], [0.0]], "actions": [1, 1],
        ...          "rewards": [1.0, 1.0], "new_obs": [[0.0], [0.0]],
        ...          "terminateds": [False, True], "action_prob": [0.25, 0.25]}
        >>> estimate = ImportanceSampling(uniform, gamma=1.0).estimate(steps)
        >>> estimate["v_behavior"], round(estimate["v_target"], 6)
        (2.0, 6.0)
    """

    def episode_values(self, episodes: list[LoggedEpisode]
                       ) -> tuple[list[float], list[float]]:
        """Discounted returns, and their importance-weighted counterparts."""
        behaviour, target = [], []
        for episode, ratios in zip(episodes, self.importance_ratios(episodes), strict=True):
            discounts = self.gamma ** np.arange(len(episode))
            weights = np.cumprod(ratios)
            behaviour.append(float(np.sum(discounts * episode.rewards)))
            target.append(float(np.sum(discounts * weights * episode.rewards)))
        return behaviour, target


class TrajectoryImportanceSampling(OffPolicyEstimator):
    """Trajectory-wise importance sampling: an episode's value is its discounted return times
    the product of all its steps' importance ratios (RLlib 2.60's
    ``offline_evaluation_type="is"``). Unbiased, with more variance than the per-decision
    ``ImportanceSampling``: every reward carries the ratios of the whole episode.

    Examples:
        >>> import gymnasium as gym, torch
        >>> from offline_rl.models.model_config import DefaultModelConfig
        >>> from offline_rl.models.torch_rl_module import DefaultTorchRLModule
        >>> uniform = DefaultTorchRLModule(gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2),
        ...                                DefaultModelConfig(fcnet_hiddens=[]))
        >>> for parameter in uniform.parameters():
        ...     _ = torch.nn.init.zeros_(parameter)
        >>> steps = {"eps_id": [0, 0], "obs": [[0.0], [0.0]], "actions": [1, 1],
        ...          "rewards": [1.0, 1.0], "new_obs": [[0.0], [0.0]],
        ...          "terminateds": [False, True], "action_prob": [0.25, 0.25]}
        >>> round(TrajectoryImportanceSampling(uniform, gamma=1.0).estimate(steps)["v_target"],
        ...       6)
        8.0
    """

    def episode_values(self, episodes: list[LoggedEpisode]
                       ) -> tuple[list[float], list[float]]:
        """Discounted returns, and those times the episode's importance weight."""
        behaviour, target = [], []
        for episode, ratios in zip(episodes, self.importance_ratios(episodes), strict=True):
            behaviour.append(episode.discounted_return(self.gamma))
            target.append(float(np.prod(ratios)) * behaviour[-1])
        return behaviour, target


class WeightedImportanceSampling(OffPolicyEstimator):
    """Per-decision weighted importance sampling: as ``ImportanceSampling``, but each ``p_t``
    is divided by the mean ``p_t`` of all episodes, an episode that ended before ``t`` keeping
    its last weight (it stays in its terminal state, where every policy has ratio 1). Biased
    (consistent), with far less variance."""

    def episode_values(self, episodes: list[LoggedEpisode]
                       ) -> tuple[list[float], list[float]]:
        """Discounted returns, and their returns under per-step normalized weights."""
        weights = [np.cumprod(ratios) for ratios in self.importance_ratios(episodes)]
        horizon = max(len(episode) for episode in episodes)
        mean_weights = np.mean([np.pad(episode_weights, (0, horizon - len(episode_weights)),
                                       mode="edge") for episode_weights in weights], axis=0)
        behaviour, target = [], []
        for episode, episode_weights in zip(episodes, weights, strict=True):
            discounts = self.gamma ** np.arange(len(episode))
            normalized = episode_weights / mean_weights[:len(episode)]
            behaviour.append(float(np.sum(discounts * episode.rewards)))
            target.append(float(np.sum(discounts * normalized * episode.rewards)))
        return behaviour, target
