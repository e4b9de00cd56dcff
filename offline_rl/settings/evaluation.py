"""The ``evaluation`` and ``checkpointing`` sections: how the policy is judged while it trains,
and how its progress is kept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from offline_rl.settings.offline_data import OfflineDataConfig
from offline_rl.settings.options import (
    A_BOOL,
    A_NUMBER_ABOVE_0,
    AN_INT_AT_LEAST_0,
    AN_INT_AT_LEAST_1,
    Rule,
    Section,
    is_int_at_least,
    option,
    optional,
)


@dataclass
class EvaluationConfig(Section):
    """See ``AlgorithmConfig.evaluation``.

    Examples:
        >>> EvaluationConfig(evaluation_parallel_to_training=True).problems()[0][0]
        'evaluation_parallel_to_training'
    """

    #: Iterations between evaluations (``None``: only on ``evaluate()``).
    evaluation_interval: int | None = option(None, optional(AN_INT_AT_LEAST_1))
    #: Episodes per evaluation.
    evaluation_duration: int = option(10, AN_INT_AT_LEAST_1)
    #: RLlib's option; evaluation counts episodes, the one value.
    evaluation_duration_unit: str = option("episodes", Rule(
        "'episodes'", lambda value: value == "episodes"))
    #: Ray actors that share the episodes (0: this process plays them).
    evaluation_num_env_runners: int = option(0, AN_INT_AT_LEAST_0)
    #: The actors play while the iteration trains, with the weights from before it.
    evaluation_parallel_to_training: bool = option(False, A_BOOL)
    #: Seconds an evaluation episode may run without ending before ``evaluate()`` raises
    #: ``EnvError`` (RLlib's option, for a complete episode); ``None``: no limit.
    evaluation_sample_timeout_s: float | None = option(120.0, optional(A_NUMBER_ABOVE_0,
                                                                       "None (no limit)"))
    #: ``{name: {"type": estimator, **its arguments}}``, estimated on ``evaluation_config``'s
    #: data.
    off_policy_estimation_methods: dict[str, dict[str, Any]] = option({})
    #: ``offline_data`` settings of the held-out data (``input_`` at least).
    evaluation_config: dict[str, Any] = option({})
    #: Iterations between the learner's losses on ``offline_eval_input_`` (``None``: never).
    offline_evaluation_interval: int | None = option(None, optional(AN_INT_AT_LEAST_1))
    #: The held-out data of those losses.
    offline_eval_input_: str | list[str] | None = option(None)

    def joint_problems(self) -> list[tuple[str, str]]:
        """Parallel evaluation's runners, the estimators' held-out data, and the held-out
        losses' data."""
        problems = []
        if self.evaluation_parallel_to_training and not (
                self.evaluation_num_env_runners and self.evaluation_interval):
            problems.append(("evaluation_parallel_to_training", "needs "
                             "evaluation_num_env_runners >= 1 (the actors that play while this "
                             "process trains) and an evaluation_interval"))
        if self.offline_evaluation_interval is not None and not self.offline_eval_input_:
            problems.append(("offline_eval_input_", "offline_evaluation_interval reports "
                             "losses on held-out data: set offline_eval_input_ to the path(s) "
                             "of data not trained on"))
        return problems + self._estimation_problems()

    def _estimation_problems(self) -> list[tuple[str, str]]:
        """The shape of ``off_policy_estimation_methods`` and ``evaluation_config`` (the
        estimator classes and their arguments are checked when the algorithm is built)."""
        methods, overrides = self.off_policy_estimation_methods, self.evaluation_config
        if not isinstance(overrides, dict):
            return [("evaluation_config", f"must be a dict of offline_data settings, got "
                                          f"{overrides!r}")]
        valid = OfflineDataConfig.option_names()
        unknown = sorted(set(overrides) - set(valid))
        if unknown:
            return [("evaluation_config", f"unknown offline_data setting(s) {unknown}; valid: "
                                          f"{valid}")]
        if not isinstance(methods, dict) or not all(
                isinstance(spec, dict) and "type" in spec for spec in methods.values()):
            return [("off_policy_estimation_methods", "must map names to dicts with a 'type' "
                     f"(an estimator) and its arguments, got {methods!r}")]
        if methods and not overrides.get("input_"):
            return [("evaluation_config", "off_policy_estimation_methods estimate on held-out "
                     "data: set evaluation_config={'input_': path of data not trained on}")]
        return []


@dataclass
class CheckpointingConfig(Section):
    """See ``AlgorithmConfig.checkpointing`` (and ``PeriodicCheckpoints``).

    Examples:
        >>> CheckpointingConfig(keep_checkpoints_num=0).problems()
        [('keep_checkpoints_num', 'must be None (keep all) or an int >= 1, got 0')]
    """

    #: Iterations between checkpoints (0: only the final one).
    checkpoint_frequency: int = option(0, Rule(
        "an int >= 0 (iterations between checkpoints; 0: only the final one)",
        lambda value: is_int_at_least(value, 0)))
    #: How many of the newest checkpoints stay (``None``: all).
    keep_checkpoints_num: int | None = option(None, optional(AN_INT_AT_LEAST_1,
                                                             "None (keep all)"))
