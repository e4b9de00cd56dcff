"""Model-based estimators: the target policy's value read off a fitted Q-model (direct
method), or corrected by importance-weighted TD errors (doubly robust)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from offline_rl.evaluation.off_policy.estimator import LoggedData, OffPolicyEstimator
from offline_rl.evaluation.off_policy.fitted_q_evaluation import q_model_of
from offline_rl.evaluation.off_policy.logged_episodes import LoggedEpisode, logged_episodes
from offline_rl.evaluation.off_policy.policy import Policy


class DirectMethod(OffPolicyEstimator):
    """An episode's value is ``V(s_0)`` of a fitted Q evaluation model (``q_model_config``:
    RLlib's ``{"type": FQETorchModel, **options}``, see ``q_model_of``), trained by
    ``train(data)`` before ``estimate``. Low variance; as biased as the model.

    Examples:
        >>> import gymnasium as gym
        >>> from offline_rl.models.model_config import DefaultModelConfig
        >>> from offline_rl.models.torch_rl_module import DefaultTorchRLModule
        >>> from offline_rl.evaluation.off_policy import FQETorchModel, Policy
        >>> module = DefaultTorchRLModule(gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2),
        ...                               DefaultModelConfig(fcnet_hiddens=[]))
        >>> bandit = {"eps_id": [0, 1, 2, 3], "obs": [[0.0]] * 4, "actions": [0, 1, 0, 1],
        ...           "rewards": [1.0, 1.0, 1.0, 1.0], "new_obs": [[0.0]] * 4,
        ...           "terminateds": [True] * 4, "action_prob": [0.5] * 4}
        >>> estimator = DirectMethod(policy=Policy(module), gamma=0.99,
        ...                          q_model_config={"type": FQETorchModel, "n_iters": 300})
        >>> estimator.train(bandit)["loss"] < 1e-3
        True
        >>> round(estimator.estimate(bandit)["v_target"], 2)
        1.0
    """

    def __init__(self, policy: Policy | Any, gamma: float = 0.99, *,
                 epsilon_greedy: float | None = None,
                 q_model_config: Mapping[str, Any] | None = None):
        super().__init__(policy, gamma, epsilon_greedy=epsilon_greedy)
        kind, config = q_model_of(q_model_config)
        self.model = kind(self.policy, self.gamma, config)

    @classmethod
    def check_arguments(cls, arguments: Mapping[str, Any]) -> None:
        """Also ``q_model_config`` (see ``q_model_of``)."""
        super().check_arguments(arguments)
        q_model_of(arguments.get("q_model_config"))

    def train(self, data: LoggedData) -> dict[str, float]:
        """Fits the Q-model to ``data``; returns its ``loss``."""
        return self.model.train(logged_episodes(data))

    def episode_values(self, episodes: list[LoggedEpisode]
                       ) -> tuple[list[float], list[float]]:
        """Discounted returns, and the model's value of each episode's first state."""
        first_states = np.stack([episode.obs[0] for episode in episodes])
        return ([episode.discounted_return(self.gamma) for episode in episodes],
                self.model.state_values(first_states).tolist())


class DoublyRobust(DirectMethod):
    """The direct method corrected along each episode, backwards:
    ``v_t = V(s_t) + rho_t * (r_t + gamma * v_{t+1} - Q(s_t, a_t))`` with ``rho_t`` the step's
    importance ratio, from ``v_T = 0`` after a terminal step (``V(s_T)`` after a truncated
    one). Unbiased when either the model or the behaviour probabilities are right."""

    def episode_values(self, episodes: list[LoggedEpisode]
                       ) -> tuple[list[float], list[float]]:
        """Discounted returns, and their doubly robust values."""
        bounds = np.cumsum([len(episode) for episode in episodes])[:-1]
        obs = np.concatenate([episode.obs for episode in episodes])
        actions = np.concatenate([episode.actions for episode in episodes])
        ratios = self.importance_ratios(episodes)
        q_values = np.split(self.model.q_values(obs, actions), bounds)
        state_values = np.split(self.model.state_values(obs), bounds)
        final_values = self.model.state_values(np.stack([episode.next_obs[-1]
                                                         for episode in episodes]))
        target = []
        for i, episode in enumerate(episodes):
            value = 0.0 if episode.terminated else float(final_values[i])
            for t in reversed(range(len(episode))):
                value = state_values[i][t] + ratios[i][t] * (
                    episode.rewards[t] + self.gamma * value - q_values[i][t])
            target.append(float(value))
        return [episode.discounted_return(self.gamma) for episode in episodes], target
