"""Validation of an ``AlgorithmConfig``: every field checked in one place, each problem named
with what the field must be."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

from offline_rl.core.schedules import learning_rate_problem
from offline_rl.errors import ConfigError
from offline_rl.filesystems import resolve_filesystem
from offline_rl.formats.checks import (
    ACTION_BOUNDS_POLICIES,
    NONFINITE_POLICIES,
    OBS_BOUNDS_POLICIES,
)
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.recording.writer import WRITE_METHODS

RESERVED_ITER_KWARGS = ("batch_size", "batch_format", "drop_last")
#: Largest ``train_batch_size_per_learner`` (rows): past it one batch's columns alone take tens
#: of GB. Raise it here for a learner that can hold more.
MAX_TRAIN_BATCH_SIZE = 2**24
#: Keywords ``ray.data.read_parquet``/``read_json`` pass on to pyarrow (their ``**kwargs``).
ARROW_READ_KWARGS = {
    "read_parquet": {"dataset_kwargs", "schema", "use_threads", "filter", "batch_size",
                     "batch_readahead", "fragment_readahead", "fragment_scan_options"},
    "read_json": {"read_options", "parse_options", "convert_options", "block_size"},
}
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


def config_problems(config: Any) -> list[tuple[str, str]]:
    """``(field, problem)`` for every invalid field of an ``AlgorithmConfig``."""
    problems = []

    def check(ok: bool, field: str, problem: str) -> None:
        if not ok:
            problems.append((field, problem))

    has_spaces = config.observation_space is not None and config.action_space is not None
    check(config.env is not None or has_spaces, "environment",
          "set env=, or both observation_space= and action_space=")
    problems += input_problems(config)
    problems += learning_rate_problems(config, ["lr"])
    check(_positive_int(config.train_batch_size_per_learner)
          and config.train_batch_size_per_learner <= MAX_TRAIN_BATCH_SIZE,
          "train_batch_size_per_learner",
          f"must be an int from 1 to {MAX_TRAIN_BATCH_SIZE:,} (config_checks."
          f"MAX_TRAIN_BATCH_SIZE), got {config.train_batch_size_per_learner!r}")
    check(config.grad_clip is None or _positive(config.grad_clip), "grad_clip",
          f"must be None or a number > 0, got {config.grad_clip!r}")
    check(config.grad_clip_by in ("value", "norm", "global_norm"), "grad_clip_by",
          f"must be 'value', 'norm' or 'global_norm', got {config.grad_clip_by!r}")
    check(_non_negative_int(config.num_learners), "num_learners",
          f"must be an int >= 0, got {config.num_learners!r}")
    check(config.num_cpus_per_learner == "auto" or _non_negative(config.num_cpus_per_learner),
          "num_cpus_per_learner",
          f"must be 'auto' or a number >= 0, got {config.num_cpus_per_learner!r}")
    check(config.placement_strategy in PLACEMENT_STRATEGIES, "placement_strategy",
          f"must be one of {PLACEMENT_STRATEGIES}, got {config.placement_strategy!r}")
    check(_non_negative(config.num_gpus_per_learner), "num_gpus_per_learner",
          f"must be a number >= 0, got {config.num_gpus_per_learner!r}")
    check(not (config.num_gpus_per_learner and config.num_cpus_per_learner != "auto"),
          "num_cpus_per_learner", "set either num_gpus_per_learner or num_cpus_per_learner")
    check(config.dataset_num_iters_per_learner is None
          or _positive_int(config.dataset_num_iters_per_learner),
          "dataset_num_iters_per_learner",
          f"must be None or an int >= 1, got {config.dataset_num_iters_per_learner!r}")
    check(_positive_int(config.prelearner_module_synch_period),
          "prelearner_module_synch_period",
          f"must be an int >= 1, got {config.prelearner_module_synch_period!r}")
    check(config.input_read_batch_size is None or _positive_int(config.input_read_batch_size),
          "input_read_batch_size",
          f"must be None or an int >= 1, got {config.input_read_batch_size!r}")
    for direction in ("input", "output"):
        field = f"{direction}_filesystem"
        try:
            resolve_filesystem(getattr(config, field), getattr(config, f"{field}_kwargs"),
                               field=field)
        except ConfigError as error:
            problems.append((field, error.message))
    check(not (config.input_read_episodes and config.input_read_sample_batches),
          "input_read_episodes", "input_read_episodes and input_read_sample_batches are both "
          "set; choose the one format the data is in")
    check(config.input_nonfinite in NONFINITE_POLICIES, "input_nonfinite",
          f"must be one of {NONFINITE_POLICIES}, got {config.input_nonfinite!r}")
    check(isinstance(config.prelearner_kwargs, dict), "prelearner_kwargs",
          f"must be a dict of keyword arguments, got {config.prelearner_kwargs!r}")
    check(config.input_obs_bounds in OBS_BOUNDS_POLICIES, "input_obs_bounds",
          f"must be one of {OBS_BOUNDS_POLICIES}, got {config.input_obs_bounds!r}")
    check(config.input_action_bounds in ACTION_BOUNDS_POLICIES, "input_action_bounds",
          f"must be one of {ACTION_BOUNDS_POLICIES}, got {config.input_action_bounds!r}")
    check(isinstance(config.input_compress_columns, list | tuple), "input_compress_columns",
          f"must be a list of column names, got {config.input_compress_columns!r}")
    check(isinstance(config.input_read_method, str) or callable(config.input_read_method),
          "input_read_method", "must be a ray.data.read_* name or a callable")
    problems += map_batches_problems(config.map_batches_kwargs)
    check("batch_size" not in config.map_batches_kwargs, "map_batches_kwargs",
          "batch_size is chosen by offline-rl (set input_read_batch_size instead)")
    reserved = [k for k in RESERVED_ITER_KWARGS if k in config.iter_batches_kwargs]
    check(not reserved, "iter_batches_kwargs",
          f"{reserved} are set by offline-rl: train batches hold exactly "
          "train_batch_size_per_learner rows")
    check(config.output is None or isinstance(config.output, str), "output",
          f"must be one path or URI (a str), got {config.output!r}; recordings go to one place")
    check(config.output_write_method in WRITE_METHODS, "output_write_method",
          f"must be one of {sorted(WRITE_METHODS)}, got {config.output_write_method!r}")
    check(not (config.output_write_episodes and config.output_write_method != "write_parquet"),
          "output_write_method", "episodes (output_write_episodes=True) are written as "
          "Parquet; use write_parquet or set output_write_episodes=False")
    check(config.output_max_rows_per_file is None or _positive_int(config.output_max_rows_per_file),
          "output_max_rows_per_file",
          f"must be None or an int >= 1, got {config.output_max_rows_per_file!r}")
    check(_positive_int(config.output_max_file_size), "output_max_file_size",
          f"must be an int >= 1 (bytes), got {config.output_max_file_size!r}")
    check(_positive_int(config.num_env_runners), "num_env_runners",
          f"must be an int >= 1, got {config.num_env_runners!r}")
    check(_positive_int(config.num_envs_per_env_runner), "num_envs_per_env_runner",
          f"must be an int >= 1, got {config.num_envs_per_env_runner!r}")
    check(_non_negative(config.num_cpus_per_env_runner), "num_cpus_per_env_runner",
          f"must be a number >= 0, got {config.num_cpus_per_env_runner!r}")
    check(config.batch_mode == "complete_episodes", "batch_mode",
          f"must be 'complete_episodes' (offline data holds whole episodes), got "
          f"{config.batch_mode!r}")
    check(config.evaluation_interval is None or _positive_int(config.evaluation_interval),
          "evaluation_interval",
          f"must be None or an int >= 1, got {config.evaluation_interval!r}")
    check(_positive_int(config.evaluation_duration), "evaluation_duration",
          f"must be an int >= 1, got {config.evaluation_duration!r}")
    check(config.evaluation_duration_unit == "episodes", "evaluation_duration_unit",
          f"must be 'episodes', got {config.evaluation_duration_unit!r}")
    check(config.evaluation_interval is None or config.env is not None
          or bool(config.off_policy_estimation_methods), "evaluation_interval",
          "evaluation needs an env (config.environment(env=...)) or "
          "off_policy_estimation_methods with held-out data")
    problems.extend(off_policy_estimation_problems(config))
    check(config.offline_evaluation_interval is None
          or _positive_int(config.offline_evaluation_interval), "offline_evaluation_interval",
          f"must be None or an int >= 1, got {config.offline_evaluation_interval!r}")
    check(config.offline_evaluation_interval is None or bool(config.offline_eval_input_),
          "offline_eval_input_", "offline_evaluation_interval reports losses on held-out data: "
          "set offline_eval_input_ to the path(s) of data not trained on")
    check(_non_negative_int(config.evaluation_num_env_runners), "evaluation_num_env_runners",
          f"must be an int >= 0, got {config.evaluation_num_env_runners!r}")
    check(not config.evaluation_parallel_to_training or (
        config.evaluation_num_env_runners and config.evaluation_interval),
          "evaluation_parallel_to_training", "needs evaluation_num_env_runners >= 1 (the "
          "actors that play while this process trains) and an evaluation_interval")
    problems.extend(checkpointing_problems(config.checkpoint_frequency,
                                           config.keep_checkpoints_num))
    check(config.seed is None or _non_negative_int(config.seed), "seed",
          f"must be None or an int >= 0, got {config.seed!r}")
    check(config.env is None or isinstance(config.env, str) or callable(config.env), "env",
          f"must be a gymnasium id or a creator env_config -> env, got {config.env!r}")
    check(isinstance(config.env_config, dict), "env_config",
          f"must be a dict of keyword arguments for the env, got {config.env_config!r}")
    check(config.rl_module_spec is None or isinstance(config.rl_module_spec, RLModuleSpec),
          "rl_module_spec", f"must be None or an RLModuleSpec, got {config.rl_module_spec!r}")
    check(_non_negative(config.num_cpus_for_main_process), "num_cpus_for_main_process",
          f"must be a number >= 0, got {config.num_cpus_for_main_process!r}")
    try:
        DefaultModelConfig.from_dict(config.model_config)
    except (TypeError, ConfigError) as error:
        problems.append(("model_config", str(error)))
    return problems


def input_problems(config: Any) -> list[tuple[str, str]]:
    """``input_`` (a path or a list of them), ``input_read_schema`` (column renames) and
    ``input_read_method_kwargs`` (keywords the read method takes)."""
    problems = []
    paths = config.input_
    if isinstance(paths, dict):
        problems.append(("input_", "weighted mixing of sources ({path: weight}) is not "
                         "supported yet, and its weights would be ignored; give one path or a "
                         "list of paths, whose rows are read alike"))
    elif not paths:
        problems.append(("input_", "set the path(s) of the data to train on"))
    elif not (isinstance(paths, str) or (isinstance(paths, list | tuple) and all(
            isinstance(path, str) and path for path in paths))):
        problems.append(("input_", f"must be a path or URI (str) or a list of them, got "
                         f"{paths!r}"))
    schema = config.input_read_schema
    if not (isinstance(schema, dict) and all(isinstance(key, str) and isinstance(value, str)
                                             for key, value in schema.items())):
        problems.append(("input_read_schema", "must map column names in the data to offline-rl's"
                         f" (e.g. {{'observation': 'obs'}}), got {schema!r}"))
    kwargs = config.input_read_method_kwargs
    if not isinstance(kwargs, dict):
        problems.append(("input_read_method_kwargs", f"must be a dict of keyword arguments, got "
                         f"{kwargs!r}"))
    elif isinstance(config.input_read_method, str):
        problems += _read_kwargs_problems(config.input_read_method, kwargs)
    return problems


def _read_kwargs_problems(method: str, kwargs: dict[str, Any]) -> list[tuple[str, str]]:
    import ray.data

    function = getattr(ray.data, method, None) if method.startswith("read_") else None
    if not callable(function):
        return []  # resolve_read_method names the problem when the data is read
    parameters = inspect.signature(function).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if takes_any and method not in ARROW_READ_KWARGS:
        return []
    known = {name for name, p in parameters.items()
             if p.kind is not inspect.Parameter.VAR_KEYWORD} - {"paths"}
    known |= ARROW_READ_KWARGS.get(method, set())
    unknown = sorted(set(kwargs) - known)
    if not unknown:
        return []
    return [("input_read_method_kwargs", f"ray.data.{method} takes no {unknown}; it takes "
             f"{sorted(known)}")]


def map_batches_problems(kwargs: Any) -> list[tuple[str, str]]:
    """``map_batches_kwargs``: a dict; ``concurrency`` an int >= 1 or a ``(min, max)`` range of
    them; ``num_cpus``/``num_gpus`` numbers >= 0."""
    if not isinstance(kwargs, dict):
        return [("map_batches_kwargs", f"must be a dict of keyword arguments, got {kwargs!r}")]
    problems = []
    concurrency = kwargs.get("concurrency", 1)
    pool = (list(concurrency) if isinstance(concurrency, list | tuple)
            else [concurrency, concurrency])
    if not (len(pool) == 2 and all(_positive_int(size) for size in pool) and pool[0] <= pool[1]):
        problems.append(("map_batches_kwargs", "concurrency must be an int >= 1 (PreLearner "
                         "actors) or a [min, max] range of them, got " f"{concurrency!r}"))
    for resource in ("num_cpus", "num_gpus"):
        if resource in kwargs and not _non_negative(kwargs[resource]):
            problems.append(("map_batches_kwargs", f"{resource} must be a number >= 0, got "
                             f"{kwargs[resource]!r}"))
    return problems


def off_policy_estimation_problems(config: Any) -> list[tuple[str, str]]:
    """The shape of ``off_policy_estimation_methods`` and ``evaluation_config`` (the
    estimator classes and their arguments are checked when the algorithm is built)."""
    methods, overrides = config.off_policy_estimation_methods, config.evaluation_config
    if not isinstance(overrides, dict):
        return [("evaluation_config", f"must be a dict of offline_data settings, got "
                                      f"{overrides!r}")]
    valid = config.section_fields("offline_data")
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


def checkpointing_problems(checkpoint_frequency: Any,
                           keep_checkpoints_num: Any) -> list[tuple[str, str]]:
    """``(field, problem)`` for invalid periodic-checkpoint settings (the config's
    ``checkpointing`` section, or ``PeriodicCheckpoints``' arguments)."""
    problems = []
    if not _non_negative_int(checkpoint_frequency):
        problems.append(("checkpoint_frequency", "must be an int >= 0 (iterations between "
                         f"checkpoints; 0: only the final one), got {checkpoint_frequency!r}"))
    if not (keep_checkpoints_num is None or _positive_int(keep_checkpoints_num)):
        problems.append(("keep_checkpoints_num", "must be None (keep all) or an int >= 1, got "
                         f"{keep_checkpoints_num!r}"))
    return problems


def _positive(value: Any) -> bool:
    return _finite(value) and value > 0


def _non_negative(value: Any) -> bool:
    return _finite(value) and value >= 0


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _non_negative_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def learning_rate_problems(config: Any, fields: Sequence[str]) -> list[tuple[str, str]]:
    """``(field, problem)`` for each of ``fields`` that is not a learning rate (a number > 0
    or a schedule ``[[timestep, lr], ...]``)."""
    return [(field, problem) for field in fields
            if (problem := learning_rate_problem(getattr(config, field))) is not None]


def number_problems(config: Any, wanted: dict[str, tuple[str, Callable[[float], bool]]]
                    ) -> list[tuple[str, str]]:
    """``(field, problem)`` for each field of ``wanted`` (``field: (what, holds)``) whose value
    is not a number for which ``holds`` is true; ``what`` says what it must be."""
    problems = []
    for field, (what, holds) in wanted.items():
        value = getattr(config, field)
        if not _finite(value) or not holds(value):
            problems.append((field, f"must be a finite number {what}, got {value!r}"))
    return problems
