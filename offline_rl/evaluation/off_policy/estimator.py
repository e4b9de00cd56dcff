"""What every off-policy estimator shares: the target policy, and how per-episode values
become one estimate."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.evaluation.off_policy.logged_episodes import LoggedEpisode, logged_episodes
from offline_rl.evaluation.off_policy.target_policy import TargetPolicy

#: What ``estimate`` returns (RLlib's names).
ESTIMATE_KEYS = ("v_behavior", "v_behavior_std", "v_target", "v_target_std", "v_gain",
                 "v_delta")

LoggedData = Sequence[SingleAgentEpisode | LoggedEpisode] | Mapping[str, Any]


class OffPolicyEstimator(ABC):
    """Estimates the discounted return of ``module``'s policy (see ``TargetPolicy`` for
    ``epsilon_greedy``) from episodes logged by another policy. Subclasses say how one
    episode is valued (``episode_values``); estimators with a model learn it in ``train``."""

    def __init__(self, module: Any, *, gamma: float = 0.99,
                 epsilon_greedy: float | None = None):
        if not 0 <= gamma <= 1:
            raise ConfigError(f"gamma must be in [0, 1], got {gamma}")
        self.gamma = gamma
        self.policy = TargetPolicy(module, epsilon_greedy=epsilon_greedy)

    def train(self, data: LoggedData) -> dict[str, float]:
        """Fits what the estimator learns from ``data``; returns its training metrics (none
        for estimators without a model)."""
        return {}

    def estimate(self, data: LoggedData) -> dict[str, float]:
        """``v_behavior`` (the mean discounted return of the logged episodes) and ``v_target``
        (the estimated one of the target policy), their std over episodes, ``v_gain`` (=
        ``v_target / max(v_behavior, 1e-8)``) and ``v_delta`` (= ``v_target - v_behavior``)."""
        episodes = logged_episodes(data)
        if not episodes:
            raise DataFormatError("off-policy estimation got no episodes to estimate on")
        behaviour, target = np.asarray(self.episode_values(episodes), dtype=np.float64)
        v_behavior, v_target = float(behaviour.mean()), float(target.mean())
        return {"v_behavior": v_behavior, "v_behavior_std": float(behaviour.std()),
                "v_target": v_target, "v_target_std": float(target.std()),
                "v_gain": v_target / max(v_behavior, 1e-8), "v_delta": v_target - v_behavior}

    @abstractmethod
    def episode_values(self, episodes: list[LoggedEpisode]
                       ) -> tuple[list[float], list[float]]:
        """Per episode: its discounted return, and the target policy's value estimated from
        it."""

    def importance_ratios(self, episodes: list[LoggedEpisode]) -> list[np.ndarray]:
        """Per episode and step, the target policy's probability of the logged action over the
        behaviour policy's (one forward pass of the module for all steps)."""
        obs = np.concatenate([episode.obs for episode in episodes])
        actions = np.concatenate([episode.actions for episode in episodes])
        behaviour = np.concatenate([episode.behaviour_prob for episode in episodes])
        ratios = self.policy.probabilities(obs, actions) / behaviour
        return np.split(ratios, np.cumsum([len(episode) for episode in episodes])[:-1])
