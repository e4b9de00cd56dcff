"""The ``reporting`` section: RLlib's ``AlgorithmConfig.reporting()`` options, each either
honoured or refused with what to use instead (none is ignored)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from offline_rl.settings.options import (
    A_NUMBER_AT_LEAST_0,
    AN_INT_AT_LEAST_0,
    AN_INT_AT_LEAST_1,
    Rule,
    Section,
    option,
    optional,
)

#: RLlib's default of ``metrics_episode_collection_timeout_s``, the one value taken here.
EPISODE_COLLECTION_TIMEOUT_S = 60.0


def _only(value: Any, what: str) -> Rule:
    return Rule(f"{value!r} ({what})", lambda given: given == value
                and isinstance(given, bool) == isinstance(value, bool))


@dataclass
class ReportingConfig(Section):
    """See ``AlgorithmConfig.reporting``.

    Examples:
        >>> ReportingConfig(min_time_s_per_iteration=-1).problems()
        [('min_time_s_per_iteration', 'must be None or a number >= 0, got -1')]
        >>> ReportingConfig(log_gradients=True).problems()[0][1][:44]
        'must be False (gradient norms are not report'
    """

    #: Each ``train()`` repeats its updates until this many seconds have passed (``None`` or
    #: 0: one round of ``dataset_num_iters_per_learner`` updates).
    min_time_s_per_iteration: float | None = option(None, optional(A_NUMBER_AT_LEAST_0))
    #: ... and until this many rows have been trained on in the iteration (over all learners).
    min_train_timesteps_per_iteration: int | None = option(None, optional(AN_INT_AT_LEAST_0))
    #: ... and until this many rows have been read from the data (offline, the rows sampled are
    #: the rows trained on: the same count).
    min_sample_timesteps_per_iteration: int | None = option(None, optional(AN_INT_AT_LEAST_0))
    #: The evaluation's ``episode_return_mean`` (and its ``_min``/``_max``/``_std``) over the
    #: last N episodes played, earlier evaluations' included, or over all of this evaluation's
    #: episodes when it played more (``None``: this evaluation's episodes only; RLlib's default
    #: is 100).
    metrics_num_episodes_for_smoothing: int | None = option(None, optional(AN_INT_AT_LEAST_1))
    #: RLlib's custom episode metrics (from callbacks): offline-rl has none to keep.
    keep_per_episode_custom_metrics: bool = option(False, _only(
        False, "offline-rl has no custom episode metrics (RLlib's callbacks) to keep"))
    #: RLlib's wait for env runners' metrics: evaluation here waits for its whole episodes,
    #: bounded by ``evaluation(evaluation_sample_timeout_s=...)``.
    metrics_episode_collection_timeout_s: float = option(EPISODE_COLLECTION_TIMEOUT_S, _only(
        EPISODE_COLLECTION_TIMEOUT_S, "RLlib's default; evaluation waits for its whole "
        "episodes: bound them with evaluation(evaluation_sample_timeout_s=...)"))
    #: RLlib's gradient-norm logging: not reported here.
    log_gradients: bool = option(False, _only(
        False, "gradient norms are not reported here; the learners' results hold the losses"))
    #: RLlib's ``MetricsLogger`` stats classes: offline-rl's results are plain dicts.
    custom_stats_cls_lookup: dict[str, type] = option({}, Rule(
        "{} (offline-rl's results are plain dicts, not RLlib's MetricsLogger stats)",
        lambda value: value == {}))

    def repeats_updates(self) -> bool:
        """Whether ``train()`` may run more than one round of updates."""
        return bool(self.min_time_s_per_iteration or self.min_train_timesteps_per_iteration
                    or self.min_sample_timesteps_per_iteration)
