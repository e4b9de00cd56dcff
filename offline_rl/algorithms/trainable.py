"""Ray Tune support: each registered algorithm is a Tune trainable under its name.

``tune.Tuner("BC", param_space=config)`` works as with RLlib once ``offline_rl`` and
``ray.tune`` are both imported (in either order: ``offline_rl`` registers its algorithms
when ``ray.tune`` is first imported, so that a process that never uses Tune never pays for
importing it). Needs ``pip install "offline-rl[tune]"``.

Each trial builds the algorithm from the trial's config in its own Ray actor. It reserves, as
one placement group, everything it starts: ``num_cpus_for_main_process`` for itself (its local
learner and its evaluation), then one bundle for the read task, the PreLearner pool, remote
learners and env runner actors (``offline_rl.placement`` keeps them there). So trials of a
``tune.grid_search`` share a cluster without taking each other's CPUs: Tune starts a trial once
all of its resources are free. CPU options left at ``"auto"`` are fitted to the cluster
(``fit_trial``), so that a trial at default resources runs on a small machine. Tune's
checkpoints are the algorithm's own (``Algorithm.from_checkpoint(result.checkpoint.path)``),
and a trial reports the latest evaluation in every result, so that a stop criterion on
``evaluation/env_runners/episode_return_mean`` is seen in every iteration.

Examples:
    >>> from ray import tune
    >>> from offline_rl import BCConfig
    >>> trainable = tune.registry.get_trainable_cls("BC")
    >>> trainable.__name__, issubclass(trainable, tune.Trainable)
    ('BC', True)
    >>> trial_bundles(BCConfig().offline_data(map_batches_kwargs={"concurrency": 2}))
    [{'CPU': 1.0}, {'CPU': 3.0}]
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, ClassVar

import ray
from ray import tune
from ray.tune.registry import register_trainable

from offline_rl.algorithms.ray_start import after_each_ray_init
from offline_rl.algorithms.registry import (
    get_algorithm_config_class,
    register_config_classes_with_tune,
    registered_algorithms,
)
from offline_rl.errors import ResourceError, warn_at_caller
from offline_rl.names import EVALUATION_RESULTS
from offline_rl.placement import current_placement_group
from offline_rl.settings.resource_plan import AUTO, ResourcePlan, pool_range

if TYPE_CHECKING:
    # Registering runs whenever offline_rl and ray.tune are both imported, possibly while a
    # lower layer (connectors) is still importing: it must not import the algorithm stack.
    from offline_rl.algorithms.algorithm import Algorithm
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig


class AlgorithmTrainable(tune.Trainable):
    """A Tune trainable that builds ``algorithm_name``'s algorithm from the trial's config
    (``AlgorithmConfig.to_dict``'s layout, which is what Tune makes of a config object)."""

    algorithm_name: ClassVar[str] = ""

    @classmethod
    def algorithm_config(cls, config: dict[str, Any]) -> AlgorithmConfig:
        """The trial's config as this algorithm's config object."""
        return get_algorithm_config_class(cls.algorithm_name).from_dict(config)

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> tune.PlacementGroupFactory:
        """The trial's placement group (see the module docstring); raises ``ResourceError``
        when the cluster could never hold it, where Tune would wait forever."""
        trial = cls.algorithm_config(config)
        if not ray.is_initialized():
            return tune.PlacementGroupFactory(trial_bundles(trial))
        cluster = ray.cluster_resources()
        bundles = trial_bundles(fit_trial(trial, cluster.get("CPU", 0.0)))
        for name in ("CPU", "GPU"):
            needed = sum(bundle.get(name, 0) for bundle in bundles)
            if needed > cluster.get(name, 0):
                raise ResourceError(
                    f"a {cls.algorithm_name} trial needs {needed:g} {name} "
                    f"({' + '.join(map(str, bundles))}), but the Ray cluster has "
                    f"{cluster.get(name, 0):g}; no trial could ever start. Lower "
                    "map_batches_kwargs['concurrency'] or ['num_cpus'], the env runners "
                    "or num_cpus_for_main_process (config.resources(...)), or add CPUs.")
        return tune.PlacementGroupFactory(bundles)

    def setup(self, config: dict[str, Any]) -> None:
        # Tune runs each trial in its own folder; relative input_/output paths mean what they
        # mean where Tune was started (the folder Tune left, which it records here).
        os.chdir(os.environ.get("TUNE_ORIG_WORKING_DIR", os.getcwd()))
        # The CPUs left at "auto", as default_resource_request fitted them: the group holds
        # what it fitted to the cluster, so fitting to the group gives the same numbers.
        group = current_placement_group()
        trial = self.algorithm_config(config)
        if group is not None:
            trial = fit_trial(trial, sum(bundle.get("CPU", 0.0) for bundle in group.bundle_specs),
                              warn=False)
        self.algorithm: Algorithm = trial.build()
        self.last_evaluation: dict[str, Any] | None = None

    def step(self) -> dict[str, Any]:
        result = self.algorithm.train()
        self.last_evaluation = result.get(EVALUATION_RESULTS, self.last_evaluation)
        if self.last_evaluation is not None:
            result[EVALUATION_RESULTS] = self.last_evaluation
        return result

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        self.algorithm.save_to_path(checkpoint_dir)

    def load_checkpoint(self, checkpoint_dir: str) -> None:
        self.algorithm.restore_from_path(checkpoint_dir)

    def cleanup(self) -> None:
        self.algorithm.stop()


def trial_bundles(config: AlgorithmConfig) -> list[dict[str, float]]:
    """A trial's placement group (``ResourcePlan.requested(...).bundles()``):
    ``num_cpus_for_main_process`` (and the local learner's GPU), then the read task, the
    PreLearner pool at its largest, the remote learners and the runner actors (evaluation's or
    the recorder's env runners, the offline evaluation runners with their pipeline, the
    sampler's). CPU options left at ``"auto"`` count 1 CPU (``fit_trial`` shrinks them)."""
    return ResourcePlan.requested(config.sections).bundles()


def fit_trial(config: AlgorithmConfig, cpus: float, *, warn: bool = True) -> AlgorithmConfig:
    """A copy of ``config`` whose CPU options left at ``"auto"`` (``num_cpus_for_main_process``,
    ``num_cpus_per_env_runner``, the PreLearners' ``map_batches_kwargs['num_cpus']``) are
    numbers: 1 each where the trial fits in ``cpus``, else the env runners 0 (sharing the
    CPUs), then the trial's process and its PreLearners equal shares of what is left (with a
    warning saying so). Numbers the user gave are kept.

    Examples:
        >>> from offline_rl import BCConfig
        >>> config = BCConfig().evaluation(evaluation_num_env_runners=1)
        >>> trial_bundles(config), trial_bundles(fit_trial(config, 2, warn=False))
        ([{'CPU': 1.0}, {'CPU': 3.0}], [{'CPU': 0.5}, {'CPU': 1.5}])
    """
    sections = config.sections
    pool = dict(sections.offline_data.map_batches_kwargs)
    _, actors = pool_range(pool.get("concurrency", 1))
    requested = {"main": sections.resources.num_cpus_for_main_process,
                 "runner": sections.env_runners.num_cpus_per_env_runner,
                 "actor": pool.get("num_cpus", AUTO)}
    auto = {part for part, value in requested.items() if value == AUTO}
    part_cpus = {part: 1.0 if part in auto else value for part, value in requested.items()}
    fitted = config.copy()

    def fit(**shrunk: float) -> float:
        """Gives the parts left at "auto" the ``shrunk`` CPUs; the CPUs the trial needs."""
        part_cpus.update({part: cpus for part, cpus in shrunk.items() if part in auto})
        fitted.resources(num_cpus_for_main_process=part_cpus["main"]).env_runners(
            num_cpus_per_env_runner=part_cpus["runner"]).offline_data(
            map_batches_kwargs={**pool, "num_cpus": part_cpus["actor"]})
        return sum(bundle.get("CPU", 0.0) for bundle in trial_bundles(fitted))

    if fit() > cpus and fit(runner=0.0) > cpus:
        sharing = ("main" in auto) + actors * ("actor" in auto)
        share = math.floor((cpus - fit(main=0.0, actor=0.0)) / max(sharing, 1) * 1e4) / 1e4
        if share <= 0 or fit(main=min(1.0, share), actor=min(1.0, share)) > cpus + 1e-9:
            return config  # refused by default_resource_request, with the numbers asked for
    if warn and any(part_cpus[part] != 1.0 for part in auto):
        warn_at_caller(
            f"a {config.algo_name} trial sized to the cluster's {cpus:g} CPUs (options left at "
            f"'auto'): num_cpus_for_main_process={part_cpus['main']:g}, "
            f"num_cpus_per_env_runner={part_cpus['runner']:g}, "
            f"map_batches_kwargs['num_cpus']={part_cpus['actor']:g}. Set them to choose.")
    return fitted


def trainable_class(algorithm_name: str) -> type[AlgorithmTrainable]:
    """The Tune trainable of a registered algorithm (its config class is looked up when a
    trial needs it)."""
    return type(algorithm_name, (AlgorithmTrainable,), {
        "algorithm_name": algorithm_name, "__module__": __name__,
        "__doc__": f"The Tune trainable of offline-rl's {algorithm_name}."})


def register_with_tune() -> None:
    """Registers every registered algorithm as a Tune trainable under its name, and lets
    ``param_space`` take a config object. Runs when this module is imported (by
    ``offline_rl``, once ``ray.tune`` is) and after every later ``ray.init()``: Tune keeps its
    registrations in the Ray instance, so one started after ``ray.shutdown()`` would otherwise
    know "BC" as RLlib's. Call it again after ``register_algorithm`` to add algorithms
    registered later."""
    register_config_classes_with_tune()
    for name in registered_algorithms():
        register_trainable(name, trainable_class(name))


register_with_tune()
after_each_ray_init(register_with_tune)
