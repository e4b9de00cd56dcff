"""``OfflinePolicyEvaluationRunner``: RLlib 2.60's importance-sampling estimate of the trained
policy's return (``offline_evaluation_type="is"`` or ``"pdis"``) on the logged episodes of a
Ray Data iterator of the input as read (``OfflineData.data``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from offline_rl.algorithms.offline_evaluation_runner import OfflineEvaluationRunner
from offline_rl.columns import Columns
from offline_rl.data.pipeline.logged_data import step_columns
from offline_rl.data.prelearner.prelearner import OfflinePreLearner
from offline_rl.errors import ConfigError
from offline_rl.evaluation.off_policy import (
    ImportanceSampling,
    LoggedEpisode,
    OffPolicyEstimator,
    TrajectoryImportanceSampling,
    logged_episodes,
)
from offline_rl.models.multi_rl_module import MultiRLModuleSpec

#: The estimator of each ``offline_evaluation_type``.
ESTIMATORS: dict[str, type[OffPolicyEstimator]] = {"is": TrajectoryImportanceSampling,
                                                    "pdis": ImportanceSampling}


class OfflinePolicyEvaluationRunner(OfflineEvaluationRunner):
    """Estimates the return the module's policy would get from the episodes its dataset
    iterator holds, undiscounted (to compare with the env's returns, as RLlib's does):
    ``"is"`` weighs each episode's return by the product of its steps' importance ratios
    (the module's probability of the logged action over the logging policy's, ``action_logp``
    or ``action_prob``); ``"pdis"`` weighs each reward by the ratios up to its step.

    The iterator gives the input as read: episode rows (each a whole episode) or tabular rows
    (steps, an episode valued once its last step, ``terminateds`` or ``truncateds``, has come;
    the steps of episodes not ended yet wait for the next batch, and at the end of a pass over
    the data they are counted in ``num_episodes_unfinished``, not valued). ``run()`` reads
    ``dataset_num_iters_per_offline_eval_runner`` batches of ``offline_eval_batch_size_per_
    runner`` rows and returns RLlib's episode figures (``episode_return_mean``, ``_min``,
    ``_max``, ``episode_len_mean``, ... of the episodes valued, when there were any), the
    logged returns' mean (``behavior_episode_return_mean``) and the counts of
    ``OfflineEvaluationRunner``. The module, its state and the iteration over the data are
    ``OfflineEvaluationRunner``'s. Examples: ``tests/test_offline_eval_runner.py``.
    """

    BATCH_FORMAT = "pyarrow"

    def __init__(self, config: Any, module_spec: MultiRLModuleSpec | None = None):
        super().__init__(config, module_spec)
        kind = config.sections.evaluation.offline_evaluation_type
        if kind not in ESTIMATORS:
            raise ConfigError(f"OfflinePolicyEvaluationRunner estimates returns by importance "
                              f"sampling: offline_evaluation_type must be one of "
                              f"{sorted(ESTIMATORS)}, got {kind!r} (OfflineEvaluationRunner "
                              f"computes 'eval_loss')")
        self._estimator = ESTIMATORS[kind](self._learner.module, gamma=1.0)
        self._spaces = config.input_spaces()
        self._data_config = config.data_config(self._spaces)
        self._prelearner: OfflinePreLearner | None = None
        self._unfinished: dict[str, np.ndarray] = {}
        self._lifetime["unfinished"] = 0

    def run(self, *, num_samples: int | None = None, explore: bool = False,
            train: bool = True) -> dict[str, Any]:
        """The episode figures of the episodes valued and the rows and batches read, now and
        in the runner's lifetime. ``explore`` and ``train`` have no effect (the module's
        action distribution is what is judged)."""
        self._check_iterator()
        episodes: list[LoggedEpisode] = []
        rows = batches = unfinished = 0
        for batch in self._next_batches(num_samples):
            if batch is None:  # a pass ended: its unended episodes end with it
                unfinished += len(np.unique(self._unfinished.get(Columns.EPS_ID, [])))
                self._unfinished = {}
                continue
            batch_episodes, steps = self._episodes_of(batch)
            episodes += batch_episodes
            rows += steps
            batches += 1
        self._lifetime["unfinished"] += unfinished
        results: dict[str, Any] = {**self._episode_figures(episodes),
                                   "num_episodes_unfinished": unfinished,
                                   "num_episodes_unfinished_lifetime":
                                       self._lifetime["unfinished"]}
        return {**results, **self._counts(rows, batches)}

    def _episodes_of(self, table: pa.Table) -> tuple[list[LoggedEpisode], int]:
        """The episodes of a batch that can be valued, and its steps."""
        if self._data_config.reads_episodes:
            if self._prelearner is None:
                self._prelearner = (self._data_config.prelearner_class or OfflinePreLearner)(
                    self._data_config, self._spaces,
                    **self._data_config.offline_data.prelearner_kwargs)
            decoded = self._prelearner.admitted_episodes(table)
            return logged_episodes(decoded), sum(len(episode) for episode in decoded)
        columns = step_columns(table, self._data_config, self._spaces)
        if self._unfinished:
            columns = {key: np.concatenate([self._unfinished[key], columns[key]])
                       for key in columns}
        ends = np.asarray(columns[Columns.TERMINATEDS], bool)
        if Columns.TRUNCATEDS in columns:
            ends = ends | np.asarray(columns[Columns.TRUNCATEDS], bool)
        eps_ids = np.asarray(columns[Columns.EPS_ID])
        ended = np.isin(eps_ids, eps_ids[ends])
        self._unfinished = {key: values[~ended] for key, values in columns.items()}
        if not ended.any():
            return [], table.num_rows
        return logged_episodes({key: values[ended] for key, values in columns.items()}
                               ), table.num_rows

    def _episode_figures(self, episodes: list[LoggedEpisode]) -> dict[str, float]:
        """RLlib's episode figures of the estimated returns (none without episodes)."""
        if not episodes:
            return {"num_episodes": 0}
        behaviour, target = (np.asarray(values) for values in
                             self._estimator.episode_values(episodes))
        lengths = np.array([len(episode) for episode in episodes])
        return {"num_episodes": len(episodes),
                "episode_return_mean": float(target.mean()),
                "episode_return_min": float(target.min()),
                "episode_return_max": float(target.max()),
                "episode_len_mean": float(lengths.mean()),
                "episode_len_min": int(lengths.min()), "episode_len_max": int(lengths.max()),
                "behavior_episode_return_mean": float(behaviour.mean())}
