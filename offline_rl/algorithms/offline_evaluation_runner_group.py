"""``OfflineEvaluationRunnerGroup``: RLlib 2.60's runners of the learner's loss on offline data,
each on its own ``streaming_split`` shard of a pipeline of their own (or one local runner on
the whole of it), as ``Algorithm.offline_eval_runner_group`` evaluates the training input every
``offline_evaluation_interval`` iterations."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import ray

from offline_rl.algorithms.offline_evaluation_runner import OfflineEvaluationRunner
from offline_rl.algorithms.offline_policy_evaluation_runner import OfflinePolicyEvaluationRunner
from offline_rl.data.pipeline.offline_data import OfflineData
from offline_rl.data.pipeline.resources import side_by_side_options
from offline_rl.errors import ConfigError, TrainingError
from offline_rl.names import ALL_MODULES, COMPONENT_RL_MODULE, DEFAULT_MODULE_ID
from offline_rl.settings.resource_plan import OFFLINE_EVAL_PIPELINE_SHARE, offline_eval_runner_cpus

#: Counts that add up across runners; the other figures are row-weighted means.
SUMMED = ("num_env_steps_sampled", "num_env_steps_sampled_lifetime", "num_module_steps_sampled",
          "num_module_steps_sampled_lifetime", "dataset_num_iters_evaluated",
          "dataset_num_iters_evaluated_lifetime")


class OfflineEvaluationRunnerGroup:
    """``num_offline_eval_runners`` Ray actors of ``offline_eval_runner_class`` (default
    ``OfflineEvaluationRunner``), or with ``local_runner=True`` (and no remote runners) one in
    this process. Their data is an ``OfflineData`` of ``config`` of its own, built with a
    quarter of a pipeline's CPUs: ``num_offline_eval_runners`` ``streaming_split`` shards of
    it, or one plain iterator for the local runner (``_offline_data_iterators``).
    ``module_state`` (``{module_id: weights}``) starts the runners' modules;
    ``sync_weights`` loads a learner group's trained weights into them; ``foreach_runner``
    calls a method (or ``fn(runner)``) on each and returns the results.

    RLlib's ``logdir``, ``tune_trial_id``, ``pg_offset`` and ``_setup`` are accepted and have no
    effect. Examples: ``tests/test_offline_eval_runner.py``.
    """

    def __init__(self, config: Any, local_runner: bool = False, *,
                 module_state: Mapping[str, Any] | None = None, module_spec: Any = None,
                 spaces: Mapping[str, Any] | None = None, runner_cpus: float | None = None,
                 **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - {"logdir", "tune_trial_id", "pg_offset", "_setup"})
        if unknown:
            raise ConfigError(f"OfflineEvaluationRunnerGroup: unknown keyword(s) {unknown}")
        evaluation = config.sections.evaluation
        num_runners = evaluation.num_offline_eval_runners
        if num_runners and local_runner:
            raise ConfigError(f"OfflineEvaluationRunnerGroup: num_offline_eval_runners="
                              f"{num_runners} and local_runner=True: use remote runners only "
                              f"(each on a shard) or, with num_offline_eval_runners=0, one local "
                              f"runner")
        self.config = config
        estimates = evaluation.offline_evaluation_type != "eval_loss"
        self._runner_cls = evaluation.offline_eval_runner_class or (
            OfflinePolicyEvaluationRunner if estimates else OfflineEvaluationRunner)
        data = config.sections.offline_data
        own = config.copy().offline_data(**side_by_side_options(
            data.map_batches_kwargs, data.input_read_method_kwargs,
            OFFLINE_EVAL_PIPELINE_SHARE))
        self._offline_data = OfflineData(own)
        if spaces is not None:
            self._offline_data.spaces = dict(spaces)
        self._offline_data_iterators: list[ray.data.DataIterator] = (
            _read_rows_iterators(self._offline_data.data, num_runners) if estimates
            else self._offline_data.sample(
                num_samples=evaluation.offline_eval_batch_size_per_runner,
                return_iterator=True, num_shards=num_runners))
        self.local_runner: OfflineEvaluationRunner | None = None
        self._actors: list[Any] = []
        if local_runner or not num_runners:
            self.local_runner = self._runner_cls(config=config, module_spec=module_spec)
            self.local_runner.set_dataset_iterator(iterator=self._offline_data_iterators[0])
        else:
            cpus = (offline_eval_runner_cpus(evaluation, beside=0) if runner_cpus is None
                    else runner_cpus)
            actor_class = ray.remote(num_cpus=cpus, max_restarts=0,
                                     resources=evaluation.custom_resources_per_offline_eval_runner
                                     )(self._runner_cls)
            self._actors = [actor_class.remote(config=config, module_spec=module_spec)
                            for _ in range(num_runners)]
            self._get([actor.set_dataset_iterator.remote(iterator=iterator)
                       for actor, iterator in zip(self._actors, self._offline_data_iterators)])
        self._healthy = list(range(len(self._actors)))
        if module_state is not None:
            self.foreach_runner("set_state", local_runner=True,
                                kwargs={"state": {COMPONENT_RL_MODULE: dict(module_state)}})

    @property
    def runner_cls(self) -> type:
        """The runners' class."""
        return self._runner_cls

    @property
    def num_runners(self) -> int:
        """``num_offline_eval_runners``."""
        return self.config.sections.evaluation.num_offline_eval_runners

    @property
    def num_remote_runners(self) -> int:
        """The remote runners started."""
        return len(self._actors)

    @property
    def num_healthy_remote_runners(self) -> int:
        """The remote runners whose calls have not failed."""
        return len(self._healthy)

    @property
    def offline_data(self) -> OfflineData:
        """The runners' ``OfflineData``."""
        return self._offline_data

    def foreach_runner(self, func: str | Callable[[Any], Any], *, local_runner: bool = True,
                       kwargs: Mapping[str, Any] | list[Mapping[str, Any]] | None = None,
                       remote_worker_ids: list[int] | None = None,
                       timeout_seconds: float | None = None) -> list[Any]:
        """``func`` (a method's name, called with ``kwargs``, or ``fn(runner)``) on the local
        runner (first, with ``local_runner``) and on each healthy remote runner (or those of
        ``remote_worker_ids``); their results. ``kwargs`` may be a list, one dict per runner.
        A runner that fails or exceeds ``offline_evaluation_timeout_s`` is a
        ``TrainingError``, or with ``ignore_offline_eval_runner_failures`` leaves the group."""
        runners = ([self.local_runner] if local_runner and self.local_runner is not None else [])
        remote = [index for index in (remote_worker_ids or self._healthy)
                  if index in self._healthy]
        per_runner = (list(kwargs) if isinstance(kwargs, list)
                      else [dict(kwargs or {})] * (len(runners) + len(remote)))
        results = [_call(runner, func, arguments)
                   for runner, arguments in zip(runners, per_runner)]
        refs = [_call_remote(self._actors[index], func, arguments)
                for index, arguments in zip(remote, per_runner[len(runners):])]
        return results + self._get(refs, remote, timeout_seconds)

    def run(self) -> dict[str, dict[str, Any]]:
        """Each runner's ``run()``, merged: counts summed, the loss and its stats averaged
        over the rows each runner evaluated."""
        return merge_runs(self.foreach_runner("run"))

    def sync_weights(self, from_worker_or_learner_group: Any, inference_only: bool = False,
                     **kwargs: Any) -> None:
        """Loads the trained weights of ``from_worker_or_learner_group`` (a ``LearnerGroup``,
        or anything with a torch ``module``) into every runner."""
        if inference_only:
            raise ConfigError("sync_weights(inference_only=True): the loss needs the whole "
                              "module (offline-rl's modules have no inference-only form)")
        weights = {key: value.detach().cpu()
                   for key, value in from_worker_or_learner_group.module.state_dict().items()}
        self.foreach_runner("set_state", kwargs={
            "state": {COMPONENT_RL_MODULE: {DEFAULT_MODULE_ID: weights}}})

    def stop(self) -> None:
        """Ends the runners' passes and actors and the group's pipeline."""
        if self.local_runner is not None:
            self.local_runner.stop()
        for actor in self._actors:
            ray.kill(actor)
        self._actors, self._healthy = [], []
        self._offline_data.stop()

    def _get(self, refs: list[ray.ObjectRef], indices: list[int] | None = None,
             timeout_seconds: float | None = None) -> list[Any]:
        """The remote calls' results; a failed runner raises or leaves the group."""
        evaluation = self.config.sections.evaluation
        timeout = timeout_seconds or evaluation.offline_evaluation_timeout_s
        indices = list(range(len(refs))) if indices is None else indices
        results = []
        for index, ref in zip(indices, refs):
            try:
                results.append(ray.get(ref, timeout=timeout))
            except (ray.exceptions.RayError, TimeoutError) as error:
                if not evaluation.ignore_offline_eval_runner_failures:
                    cause = getattr(error, "cause", None) or error  # a task's own exception
                    raise TrainingError(f"offline evaluation runner {index} failed: "
                                        f"{type(cause).__name__}: {cause}; set config.evaluation("
                                        "ignore_offline_eval_runner_failures=True) to go on "
                                        "without it") from error
                self._healthy.remove(index)
        return results


def _read_rows_iterators(data: ray.data.Dataset, num_runners: int
                         ) -> list[ray.data.DataIterator]:
    """The input as read, for the policy evaluation runners: one ``streaming_split`` shard
    per remote runner, or one plain iterator for the local runner."""
    return data.streaming_split(num_runners) if num_runners else [data.iterator()]


def _call(runner: Any, func: str | Callable[[Any], Any], kwargs: Mapping[str, Any]) -> Any:
    return getattr(runner, func)(**kwargs) if isinstance(func, str) else func(runner, **kwargs)


def _call_remote(actor: Any, func: str | Callable[[Any], Any],
                 kwargs: Mapping[str, Any]) -> ray.ObjectRef:
    if isinstance(func, str):
        return getattr(actor, func).remote(**kwargs)
    return actor.__ray_call__.remote(func, **kwargs)


def merge_runs(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Runners' ``run()`` results as one: the counts summed, every other figure the mean over
    the rows (``num_module_steps_sampled``) each runner evaluated.

    Examples:
        >>> runs = [{"default_policy": {"total_eval_loss": 1.0, "num_module_steps_sampled": 1},
        ...          "__all_modules__": {"num_env_steps_sampled": 1}},
        ...         {"default_policy": {"total_eval_loss": 4.0, "num_module_steps_sampled": 3},
        ...          "__all_modules__": {"num_env_steps_sampled": 3}}]
        >>> merged = merge_runs(runs)
        >>> merged["default_policy"]["total_eval_loss"], merged["__all_modules__"]
        (3.25, {'num_env_steps_sampled': 4})
    """
    if not runs:
        return {}
    rows = np.array([run[DEFAULT_MODULE_ID]["num_module_steps_sampled"] for run in runs], float)
    weights = rows / rows.sum() if rows.sum() else np.full(len(runs), 1 / len(runs))
    merged: dict[str, Any] = {}
    for key in (DEFAULT_MODULE_ID, ALL_MODULES):
        merged[key] = {
            name: (sum(run[key][name] for run in runs) if name in SUMMED
                   else float(sum(weight * run[key][name] for weight, run in zip(weights, runs))))
            for name in runs[0][key]}
    merged.update(_merged_episode_figures(runs))
    return merged


def _merged_episode_figures(runs: list[dict[str, Any]]) -> dict[str, float]:
    """The policy evaluation runners' episode figures as one: counts summed, ``_min`` and
    ``_max`` over the runners, the means weighted by the episodes each runner valued."""
    episodes = np.array([run.get("num_episodes", 0) for run in runs], float)
    names = [name for name in dict.fromkeys(name for run in runs for name in run)
             if name not in (DEFAULT_MODULE_ID, ALL_MODULES)]
    merged: dict[str, float] = {}
    for name in names:
        values = [(run[name], count) for run, count in zip(runs, episodes) if name in run]
        if name.startswith("num_"):
            merged[name] = sum(value for value, _ in values)
        elif name.endswith("_min"):
            merged[name] = min(value for value, _ in values)
        elif name.endswith("_max"):
            merged[name] = max(value for value, _ in values)
        else:
            merged[name] = float(sum(value * count for value, count in values)
                                 / sum(count for _, count in values))
    return merged
