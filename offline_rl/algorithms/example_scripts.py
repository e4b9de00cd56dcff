"""RLlib's example-script helpers (``ray.rllib.utils.test_utils`` / ``ray.rllib.examples.utils``
in Ray 2.60): ``add_rllib_example_script_args`` adds RLlib's command-line arguments to a
parser, ``run_rllib_example_script_experiment`` runs a config through Ray Tune (or a plain loop
with ``--no-tune``) until a ``stop`` criterion is met, and with ``--as-test`` raises unless the
return asked for was reached. RLlib's tuned examples run with their imports changed.

Arguments offline-rl cannot honour say so in ``--help``, and giving them is a ``ConfigError``.

Examples:
    >>> parser = add_rllib_example_script_args(default_reward=450.0)
    >>> args = parser.parse_args(["--as-test", "--no-tune", "--stop-iters", "3"])
    >>> args.stop_reward, args.stop_iters, args.num_gpus, args.evaluation_interval
    (450.0, 3, 0, 0)
    >>> should_stop({"evaluation/env_runners/episode_return_mean": 100.0},
    ...             {"evaluation": {"env_runners": {"episode_return_mean": 120.0}}})
    Stop criterion (evaluation/env_runners/episode_return_mean=100.0) fulfilled!
    True
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import ray

from offline_rl.algorithms.ray_start import start_ray
from offline_rl.errors import ConfigError
from offline_rl.names import (
    ENV_RUNNER_RESULTS,
    EPISODE_RETURN_MEAN,
    EVALUATION_RESULTS,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    TRAINING_ITERATION,
)

if TYPE_CHECKING:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig

#: The metrics ``--as-test`` checks when no ``success_metric`` is given, the first in ``stop``.
SUCCESS_METRICS = (f"{EVALUATION_RESULTS}/{ENV_RUNNER_RESULTS}/{EPISODE_RETURN_MEAN}",
                   f"{ENV_RUNNER_RESULTS}/{EPISODE_RETURN_MEAN}")
NOT_HERE = "Not supported by offline-rl (giving it is an error): "


def add_rllib_example_script_args(parser: argparse.ArgumentParser | None = None,
                                  default_reward: float = 100.0, default_iters: int = 200,
                                  default_timesteps: int = 100000) -> argparse.ArgumentParser:
    """Adds RLlib 2.60's example-script arguments (same names and defaults, except
    ``--num-gpus``: 0 here, so that examples computing ``max(args.num_gpus, 1)`` run) to
    ``parser`` (a new one if ``None``) and returns it."""
    parser = parser or argparse.ArgumentParser()
    add = parser.add_argument
    add("--algo", type=str, default="PPO",
        help="RLlib's registered algorithm name (unused: the config names the algorithm).")
    add("--framework", choices=["tf", "tf2", "torch"], default="torch",
        help="The deep-learning framework: torch only (another is a ConfigError).")
    add("--env", type=str, default=None, help="The gymnasium env id (used when the config "
        "sets none).")
    add("--num-env-runners", type=int, default=None,
        help="Env runner actors (for recording and the sampler of input_).")
    add("--num-envs-per-env-runner", type=int, default=None, help="Envs per env runner.")
    add("--num-agents", type=int, default=0, help="RLlib's multi-agent cloning of the env, "
        "which the script itself sets up; here only a label.")
    add("--evaluation-num-env-runners", type=int, default=0,
        help="Evaluation actors (0: this process plays the episodes).")
    add("--evaluation-interval", type=int, default=0,
        help="Iterations between evaluations (0: keep the config's evaluation settings).")
    add("--evaluation-duration", type=lambda v: v if v == "auto" else int(v), default=10,
        help="Episodes per evaluation ('auto' is RLlib's and not supported here).")
    add("--evaluation-duration-unit", type=str, default="episodes",
        choices=["episodes", "timesteps"], help="'episodes', the one unit evaluation counts.")
    add("--evaluation-parallel-to-training", action="store_true",
        help="Evaluate while the iteration trains, with the weights from before it.")
    add("--output", type=str, default=None,
        help="Record evaluation episodes there (offline_data(output=...)).")
    add("--log-level", type=str, default=None, choices=["INFO", "DEBUG", "WARN", "ERROR"],
        help="The level of offline-rl's logger.")
    add("--no-tune", action="store_true",
        help="Run a plain loop of algo.train() calls instead of tune.Tuner().")
    add("--num-samples", type=int, default=1, help="Tune trials to run.")
    add("--max-concurrent-trials", type=int, default=None, help="Tune trials run at once.")
    add("--verbose", type=int, default=2, help="tune.Tuner()'s verbosity.")
    add("--checkpoint-freq", type=int, default=0, help="Iterations between Tune checkpoints.")
    add("--checkpoint-at-end", action="store_true", help="A Tune checkpoint at the end.")
    add("--tune-max-report-freq", type=int, default=5,
        help="Seconds between Tune's progress reports.")
    for name in ("--wandb-key", "--wandb-project", "--wandb-run-name"):
        add(name, type=str, default=None, help=NOT_HERE + "offline-rl does not log to WandB.")
    add("--stop-reward", type=float, default=default_reward,
        help="The return at which training stops (when the script gives no stop dict).")
    add("--stop-iters", type=int, default=default_iters, help="Iterations to train at most.")
    add("--stop-timesteps", type=int, default=default_timesteps,
        help="Rows to train on at most (num_env_steps_sampled_lifetime).")
    add("--as-test", action="store_true", help="Raise unless the stop return is reached "
        "(also with --no-tune, where RLlib refuses the pair).")
    add("--as-release-test", action="store_true", help="As --as-test, and write a JSON summary "
        "to the file TEST_OUTPUT_JSON names, if set.")
    add("--num-learners", type=int, default=None, help="Learner actors (0: this process).")
    add("--num-cpus-per-learner", type=float, default=None, help="CPUs per learner.")
    add("--num-gpus-per-learner", type=float, default=None,
        help="GPUs per learner (None: 1 where the cluster has a GPU per learner, else 0).")
    add("--num-aggregator-actors-per-learner", type=int, default=None,
        help=NOT_HERE + "the PreLearner pool (map_batches_kwargs) does that work.")
    add("--num-cpus", type=int, default=0, help="CPUs of the Ray instance started (0: all).")
    add("--num-gpus", type=int, default=0, help="The old stack's GPU count: 0 only (use "
        "--num-gpus-per-learner); RLlib 2.60's default is None.")
    add("--old-api-stack", action="store_true",
        help=NOT_HERE + "offline-rl offers the new API stack only.")
    add("--enable-new-api-stack", action="store_true", help=argparse.SUPPRESS)
    add("--local-mode", action="store_true", help=argparse.SUPPRESS)
    return parser


def should_stop(stop: dict[str, Any], results: dict[str, Any],
                keep_ray_up: bool = True) -> bool:
    """Whether any criterion of ``stop`` (``"a/b/c"`` keys into the nested ``results``) is
    met: its value is a number at least the criterion's. Missing or non-numeric values count
    as not met. Unlike RLlib's, it never shuts Ray down (``keep_ray_up`` is kept for RLlib's
    signature)."""
    for key, threshold in stop.items():
        value = _metric(results, key)
        if value is not None and value >= threshold:
            print(f"Stop criterion ({key}={threshold}) fulfilled!")
            return True
    return False


def _metric(results: dict[str, Any], key: str) -> float | None:
    value: Any = results
    for part in key.split("/"):
        if not isinstance(value, dict) or part.strip() not in value:
            return None
        value = value[part.strip()]
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        return None
    return None if np.isnan(value) else float(value)


def run_rllib_example_script_experiment(
        base_config: AlgorithmConfig, args: argparse.Namespace | None = None, *,
        stop: dict[str, Any] | None = None, success_metric: dict[str, float] | None = None,
        trainable: str | None = None, tune_callbacks: list | None = None,
        keep_config: bool = False, keep_ray_up: bool = False, scheduler: Any = None,
        progress_reporter: Any = None) -> Any:
    """Runs ``base_config`` (with ``args`` applied unless ``keep_config``) until a ``stop``
    criterion is met (default: ``env_runners/episode_return_mean >= --stop-reward``, ``--stop-
    timesteps`` rows, ``--stop-iters`` iterations): through ``tune.Tuner(<algorithm name>)``,
    returning its ``ResultGrid``, or with ``--no-tune`` in a loop of ``algo.train()``, returning
    the last result. With ``--as-test``, raises ``TrainingError`` unless ``success_metric``
    (default: the first return metric in ``stop``, else ``--stop-reward``) was reached.

    Ray is started when not running (``--num-cpus``) and shut down at the end only if this call
    started it and ``keep_ray_up`` is false (RLlib's always shuts it down)."""
    from offline_rl.errors import TrainingError

    if args is None:
        args = add_rllib_example_script_args().parse_args()
    _refuse_unsupported(args)
    if args.as_release_test:
        args.as_test = True
    if args.as_test:
        args.verbose, args.tune_max_report_freq = 1, 30
    if stop is None:
        stop = {f"{ENV_RUNNER_RESULTS}/{EPISODE_RETURN_MEAN}": args.stop_reward,
                NUM_ENV_STEPS_SAMPLED_LIFETIME: args.stop_timesteps,
                TRAINING_ITERATION: args.stop_iters}
    started_ray = not ray.is_initialized() and start_ray(num_cpus=args.num_cpus or None)
    config = base_config if keep_config else _apply_args(base_config, args)
    started = time.time()
    try:
        if args.no_tune:
            results = _run_loop(config, args, stop)
            rows = [results]
        else:
            results = _run_tune(config, args, stop, trainable, tune_callbacks, scheduler,
                                progress_reporter)
            rows = [result.metrics for result in results if result.metrics]
    finally:
        if started_ray and not keep_ray_up:
            ray.shutdown()
    if args.as_test:
        key, wanted = next(iter((success_metric or _success_metric(stop, args)).items()))
        reached = [value for value in (_metric(row, key) for row in rows) if value is not None]
        best = max(reached) if reached else None
        passed = best is not None and best >= wanted
        if args.as_release_test and os.environ.get("TEST_OUTPUT_JSON"):
            with open(os.environ["TEST_OUTPUT_JSON"], "w") as file:
                json.dump({"time_taken": time.time() - started, "passed": [passed],
                           "success_metric": key, "best_value": best,
                           "target_value": wanted}, file)
        if not passed:
            raise TrainingError(f"`{key}` of {wanted} not reached! Best value reached is {best}")
        print(f"`{key}` of {wanted} reached! ok")
    return results


def _refuse_unsupported(args: argparse.Namespace) -> None:
    if args.enable_new_api_stack:
        raise ConfigError("--enable-new-api-stack is no longer an option (RLlib's new API "
                          "stack is the default, and offline-rl's only one): drop it")
    if args.local_mode:
        raise ConfigError("--local-mode is not supported (nor by RLlib 2.60): drop it")
    if args.old_api_stack:
        raise ConfigError("--old-api-stack: offline-rl offers the new API stack only (old-"
                          "stack config keys are translated; see docs/rllib.md): drop it")
    if args.num_gpus:
        raise ConfigError(f"--num-gpus={args.num_gpus} is the old stack's option: train on "
                          "GPUs with --num-gpus-per-learner=1 and --num-learners=N")
    given = [name for name in ("wandb_key", "wandb_project", "wandb_run_name",
                               "num_aggregator_actors_per_learner")
             if getattr(args, name) is not None]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise ConfigError(f"{flags}: not supported by offline-rl (no WandB logging; the "
                          "PreLearner pool, map_batches_kwargs, does the aggregators' work)")
    if args.evaluation_interval and args.evaluation_duration == "auto":
        raise ConfigError("--evaluation-duration=auto is not supported: give a number of "
                          "episodes")


def _apply_args(config: AlgorithmConfig, args: argparse.Namespace) -> AlgorithmConfig:
    """RLlib's changes of the config from ``args`` (only those given)."""
    config.framework(args.framework)
    if args.env is not None and config.sections.environment.env is None:
        config.environment(args.env)
    runners = {name: value for name, value in (
        ("num_env_runners", args.num_env_runners),
        ("num_envs_per_env_runner", args.num_envs_per_env_runner)) if value is not None}
    if runners:
        config.env_runners(**runners)
    learners: dict[str, Any] = {}
    if args.num_learners is not None:
        learners["num_learners"] = args.num_learners
    if args.num_cpus_per_learner is not None:
        learners["num_cpus_per_learner"] = args.num_cpus_per_learner
    count = (args.num_learners if args.num_learners is not None
             else config.sections.learners.num_learners) or 1
    gpus = ray.cluster_resources().get("GPU", 0)
    if args.num_gpus_per_learner is None:
        learners["num_gpus_per_learner"] = 1 if gpus >= count else 0
    elif gpus < args.num_gpus_per_learner * count:
        raise ConfigError(f"--num-learners={args.num_learners} and --num-gpus-per-learner="
                          f"{args.num_gpus_per_learner} need {args.num_gpus_per_learner * count}"
                          f" GPUs, but the cluster has {gpus}")
    else:
        learners["num_gpus_per_learner"] = args.num_gpus_per_learner
    config.learners(**learners)
    if args.evaluation_interval > 0:
        config.evaluation(evaluation_num_env_runners=args.evaluation_num_env_runners,
                          evaluation_interval=args.evaluation_interval,
                          evaluation_duration=args.evaluation_duration,
                          evaluation_duration_unit=args.evaluation_duration_unit,
                          evaluation_parallel_to_training=args.evaluation_parallel_to_training)
    if args.log_level is not None:
        logging.getLogger("offline_rl").setLevel(
            logging.WARNING if args.log_level == "WARN" else args.log_level)
    if args.output is not None:
        config.offline_data(output=args.output)
    return config


def _success_metric(stop: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    for key in SUCCESS_METRICS:
        if key in stop:
            return {key: stop[key]}
    return {SUCCESS_METRICS[1]: args.stop_reward}


def _run_loop(config: AlgorithmConfig, args: argparse.Namespace,
              stop: dict[str, Any]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with config.build() as algo:
        for iteration in range(int(stop.get(TRAINING_ITERATION, args.stop_iters))):
            results = algo.train()
            evaluated = _metric(results, SUCCESS_METRICS[0])
            print(f"iter={iteration}" + ("" if evaluated is None else f" R(eval)={evaluated}"))
            if should_stop(stop, results):
                break
    return results


def _run_tune(config: AlgorithmConfig, args: argparse.Namespace, stop: dict[str, Any],
              trainable: str | None, callbacks: list | None, scheduler: Any,
              progress_reporter: Any) -> Any:
    from ray import tune

    if progress_reporter is None:
        progress_reporter = tune.CLIReporter(
            metric_columns={TRAINING_ITERATION: "iter", "time_total_s": "total time (s)",
                            NUM_ENV_STEPS_SAMPLED_LIFETIME: "ts",
                            SUCCESS_METRICS[0]: "eval return mean"},
            max_report_frequency=args.tune_max_report_freq)
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"  # Tune's new output ignores a CLIReporter
    return tune.Tuner(
        trainable or config.algo_name, param_space=config,
        run_config=tune.RunConfig(
            stop=stop, verbose=args.verbose, callbacks=callbacks or [],
            failure_config=tune.FailureConfig(max_failures=0, fail_fast="raise"),
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=args.checkpoint_freq,
                                                    checkpoint_at_end=args.checkpoint_at_end),
            progress_reporter=progress_reporter),
        tune_config=tune.TuneConfig(num_samples=args.num_samples,
                                    max_concurrent_trials=args.max_concurrent_trials,
                                    scheduler=scheduler),
    ).fit()
