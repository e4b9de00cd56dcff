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
    AUTO_OR_A_NUMBER_AT_LEAST_0,
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
    # RLlib 2.60's ``OfflineEvaluationRunner`` options (the algorithm's held-out losses above
    # are computed in this process on all of ``offline_eval_input_``). Those of RLlib's
    # ``OfflineEvaluationRunnerGroup`` (the runner count, their CPUs and resources, the timeout,
    # ignoring failures) are checked but have no effect yet: the group is not here yet.
    #: The group's Ray actors, each on a ``streaming_split`` shard (0: one local runner).
    num_offline_eval_runners: int = option(0, AN_INT_AT_LEAST_0)
    #: ``"eval_loss"`` (``OfflineEvaluationRunner``: the learner's loss), or the
    #: ``OfflinePolicyEvaluationRunner``'s importance-sampling estimates of the policy's return:
    #: ``"is"`` (trajectory-wise) or ``"pdis"`` (per-decision).
    offline_evaluation_type: str = option("eval_loss", Rule(
        "'eval_loss', 'is' or 'pdis'", lambda value: value in ("eval_loss", "is", "pdis")))
    #: An ``OfflineEvaluationRunner`` subclass the group builds (``None``: that class).
    offline_eval_runner_class: type | None = option(None)
    #: ``fn(runner, *, module_id, config, batch, fwd_out)`` -> loss tensor (or ``(loss,
    #: stats)``); ``None``: the learner's own losses.
    offline_loss_for_module_fn: Any = option(None, optional(Rule("a callable", callable)))
    #: Rows per evaluated batch.
    offline_eval_batch_size_per_runner: int = option(256, AN_INT_AT_LEAST_1)
    #: Batches per ``run()`` (``None``: the runner's whole shard).
    dataset_num_iters_per_offline_eval_runner: int | None = option(
        1, optional(AN_INT_AT_LEAST_1, "None (the whole shard)"))
    #: ``False`` only: the loss needs the whole module, and offline-rl's have no
    #: inference-only form.
    offline_eval_rl_module_inference_only: bool = option(False, Rule(
        "False (the loss needs the learner's whole module)", lambda value: value is False))
    #: Each remote runner's CPUs; ``"auto"``: 1 where the runners fit beside the rest of the
    #: run, else they share the CPUs (with a warning).
    num_cpus_per_offline_eval_runner: float | str = option("auto", AUTO_OR_A_NUMBER_AT_LEAST_0)
    #: ``0`` only: the runners evaluate on CPU.
    num_gpus_per_offline_eval_runner: float = option(0, Rule(
        "0 (the runners evaluate on CPU; train on GPUs with num_gpus_per_learner)",
        lambda value: value == 0 and not isinstance(value, bool)))
    custom_resources_per_offline_eval_runner: dict[str, float] = option({}, Rule(
        "a dict {resource name: amount}", lambda value: isinstance(value, dict)))
    #: Seconds the group waits for its runners' ``run()`` (``None``: no limit).
    offline_evaluation_timeout_s: float | None = option(120.0, optional(A_NUMBER_ABOVE_0))
    #: No effect: the group sends each runner one call at a time.
    max_requests_in_flight_per_offline_eval_runner: int = option(1, AN_INT_AT_LEAST_1)
    #: No effect, as in RLlib 2.60: the runners hold no connector states.
    broadcast_offline_eval_runner_states: bool = option(False, A_BOOL)
    #: No effect: the group always waits for its runners' construction.
    validate_offline_eval_runners_after_construction: bool = option(True, A_BOOL)
    #: ``False`` only: a runner's ``streaming_split`` shard cannot move to a new actor, so a
    #: failed runner is not restarted (see ``ignore_offline_eval_runner_failures``).
    restart_failed_offline_eval_runners: bool = option(False, Rule(
        "False (a failed runner's streaming_split shard cannot move to a new actor; set "
        "ignore_offline_eval_runner_failures=True to go on without it)",
        lambda value: value is False))
    #: The group goes on without a failed runner instead of raising.
    ignore_offline_eval_runner_failures: bool = option(False, A_BOOL)
    #: No effect: failed runners are not restarted.
    max_num_offline_eval_runner_restarts: int = option(1000, AN_INT_AT_LEAST_0)
    #: No effect: the group sends no health probes (a failed call raises or is ignored).
    offline_eval_runner_health_probe_timeout_s: float = option(30.0, A_NUMBER_ABOVE_0)
    #: No effect: no runner is restored.
    offline_eval_runner_restore_timeout_s: float = option(1800.0, A_NUMBER_ABOVE_0)

    def evaluates_training_input(self) -> bool:
        """Whether the algorithm builds RLlib's offline evaluation runner group (on the
        training input): ``offline_evaluation_interval`` or ``num_offline_eval_runners`` set,
        without ``offline_eval_input_`` (whose held-out losses are computed in-process)."""
        return ((self.offline_evaluation_interval is not None
                 or self.num_offline_eval_runners > 0) and not self.offline_eval_input_)

    def joint_problems(self) -> list[tuple[str, str]]:
        """Parallel evaluation's runners, the estimators' held-out data, and the held-out
        losses' data."""
        problems = []
        if self.evaluation_parallel_to_training and not (
                self.evaluation_num_env_runners and self.evaluation_interval):
            problems.append(("evaluation_parallel_to_training", "needs "
                             "evaluation_num_env_runners >= 1 (the actors that play while this "
                             "process trains) and an evaluation_interval"))
        if self.offline_loss_for_module_fn is not None and self.offline_eval_input_:
            problems.append(("offline_loss_for_module_fn", "is the loss "
                             "OfflineEvaluationRunner computes; the algorithm's held-out losses "
                             "(offline_eval_input_) are the learner's own loss terms: leave one "
                             "of the two unset"))
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
