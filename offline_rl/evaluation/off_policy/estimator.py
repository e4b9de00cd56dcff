"""What every off-policy estimator shares: the target policy, and how per-episode values
become one estimate."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.evaluation.off_policy.logged_episodes import (
    STEP_COLUMNS,
    LoggedEpisode,
    logged_episodes,
)
from offline_rl.evaluation.off_policy.policy import Policy
from offline_rl.evaluation.off_policy.target_policy import TargetPolicy, check_epsilon_greedy
from offline_rl.formats.tabular import table_to_numpy

#: What ``estimate`` returns (RLlib's names).
ESTIMATE_KEYS = ("v_behavior", "v_behavior_std", "v_target", "v_target_std", "v_gain",
                 "v_delta")

if TYPE_CHECKING:
    import ray.data

#: What RLlib's ``estimate_on_dataset`` returns.
DATASET_ESTIMATE_KEYS = ("v_behavior", "v_target", "v_gain_mean", "v_gain_ste")

LoggedData = (Sequence[SingleAgentEpisode | LoggedEpisode] | SingleAgentEpisode
              | Mapping[str, Any])


def checked_gamma(gamma: Any) -> float:
    """``gamma``, if it is a number in [0, 1]; ``ConfigError`` otherwise."""
    if isinstance(gamma, bool) or not isinstance(gamma, int | float) or not 0 <= gamma <= 1:
        raise ConfigError(f"gamma must be in [0, 1], got {gamma!r}")
    return float(gamma)


class OffPolicyEstimator(ABC):
    """Estimates the discounted return of ``policy`` (``algo.get_policy()``, or a trained
    RLModule; see ``TargetPolicy`` for ``epsilon_greedy``) from episodes logged by another
    policy, as RLlib's estimators do. Subclasses say how one episode is valued
    (``episode_values``); estimators with a model learn it in ``train``."""

    def __init__(self, policy: Policy | Any, gamma: float = 0.99, *,
                 epsilon_greedy: float | None = None):
        self.gamma = checked_gamma(gamma)
        module = policy.model if isinstance(policy, Policy) else policy
        self.policy = TargetPolicy(module, epsilon_greedy=epsilon_greedy)

    @classmethod
    def check_arguments(cls, arguments: Mapping[str, Any]) -> None:
        """Raises ``ConfigError`` for a value of the constructor's keywords (but ``policy``)
        that it would refuse: an algorithm checks its estimation methods as it is built,
        before any policy exists."""
        checked_gamma(arguments.get("gamma", 0.99))
        check_epsilon_greedy(arguments.get("epsilon_greedy"))

    def train(self, data: LoggedData) -> dict[str, float]:
        """Fits what the estimator learns from ``data``; returns its training metrics (none
        for estimators without a model)."""
        return {}

    def estimate(self, data: LoggedData) -> dict[str, float]:
        """``v_behavior`` (the mean discounted return of the logged episodes) and ``v_target``
        (the estimated one of the target policy), their std over episodes, ``v_gain`` (=
        ``v_target / max(v_behavior, 1e-8)``) and ``v_delta`` (= ``v_target - v_behavior``)."""
        behaviour, target = self._values(data)
        v_behavior, v_target = float(behaviour.mean()), float(target.mean())
        return {"v_behavior": v_behavior, "v_behavior_std": float(behaviour.std()),
                "v_target": v_target, "v_target_std": float(target.std()),
                "v_gain": v_target / max(v_behavior, 1e-8), "v_delta": v_target - v_behavior}

    def estimate_on_dataset(self, dataset: ray.data.Dataset, *,
                            n_parallelism: int = os.cpu_count() or 1) -> dict[str, float]:
        """``estimate`` of the steps a Ray Dataset holds (tabular rows, as
        ``logged_episodes`` reads columns; ``n_parallelism`` of its batches are fetched at
        once), in the keys of RLlib's method: ``v_behavior``, ``v_target``, ``v_gain_mean``
        (``v_target / v_behavior``) and ``v_gain_ste`` (the standard error of that ratio over
        the episodes).

        Examples:
            >>> import gymnasium as gym, ray
            >>> from offline_rl.models.model_config import DefaultModelConfig
            >>> from offline_rl.models.torch_rl_module import DefaultTorchRLModule
            >>> from offline_rl.evaluation.off_policy import ImportanceSampling
            >>> module = DefaultTorchRLModule(gym.spaces.Box(-1, 1, (1,)),
            ...                               gym.spaces.Discrete(2),
            ...                               DefaultModelConfig(fcnet_hiddens=[]))
            >>> rows = ray.data.from_items([
            ...     {"eps_id": i, "obs": [0.0], "actions": i % 2, "rewards": 1.0,
            ...      "new_obs": [0.0], "terminateds": True, "action_prob": 0.5}
            ...     for i in range(8)])
            >>> estimate = ImportanceSampling(module).estimate_on_dataset(rows)
            >>> sorted(estimate), estimate["v_behavior"]
            (['v_behavior', 'v_gain_mean', 'v_gain_ste', 'v_target'], 1.0)
        """
        if isinstance(n_parallelism, bool) or not isinstance(n_parallelism, int) or (
                n_parallelism < 1):
            raise ConfigError(f"n_parallelism must be an int >= 1, got {n_parallelism!r}")
        tables = [table for table in dataset.iter_batches(
            batch_format="pyarrow", batch_size=None, prefetch_batches=n_parallelism)
            if table.num_rows]
        if not tables:
            raise DataFormatError("off-policy estimation got an empty dataset to estimate on")
        table = pa.concat_tables(tables, promote_options="default")
        behaviour, target = self._values(table_to_numpy(table, [
            name for name in STEP_COLUMNS if name in table.column_names]))
        v_behavior = float(behaviour.mean())
        scale = max(v_behavior, 1e-8)
        return {"v_behavior": v_behavior, "v_target": float(target.mean()),
                "v_gain_mean": float(target.mean()) / scale,
                "v_gain_ste": float(target.std() / scale / np.sqrt(len(target)))}

    def _values(self, data: LoggedData) -> tuple[np.ndarray, np.ndarray]:
        episodes = logged_episodes(data)
        if not episodes:
            raise DataFormatError("off-policy estimation got no episodes to estimate on")
        behaviour, target = np.asarray(self.episode_values(episodes), dtype=np.float64)
        return behaviour, target

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
