"""Ray Tune registration in fresh processes: either import order works, and offline-rl works
without Ray Tune's extra dependencies; trials' resources, and reads in a trial's placement
group (the Tune runs are in test_seed_examples.py, and a grid search in docs/guide/tune.md,
whose code tests/test_docs.py runs)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pyarrow.parquet as pq
import pytest

from offline_rl import BCConfig
from offline_rl.algorithms.trainable import fit_trial, trial_bundles
from offline_rl.errors import ConfigError

RESOLVE_BC = ("from ray.tune.registry import get_trainable_cls\n"
              "from ray.tune.tune import _Config\n"
              "import offline_rl\n"
              "assert get_trainable_cls('BC').__module__ == 'offline_rl.algorithms.trainable'\n"
              "assert isinstance(offline_rl.BCConfig(), _Config)\n")


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("first", ["import offline_rl", "import ray.tune"])
def test_bc_is_a_tune_trainable_in_either_import_order(first):
    finished = run_python(f"{first}\n{RESOLVE_BC}")
    assert finished.returncode == 0, finished.stderr


@pytest.mark.slow
def test_bc_stays_ours_in_a_ray_instance_started_after_shutdown():
    """Tune keeps registrations in the Ray instance; a new one gets ours again (RLlib,
    installed for the interop tests, would otherwise answer to "BC"). In a process of its own:
    restarting the suite's shared instance raced with its shutdown on a loaded machine (the
    new driver's GCS client went away and Ray ended the test process)."""
    finished = run_python(
        "import ray\n"
        "from ray.tune.registry import get_trainable_cls\n"
        "import offline_rl\n"
        "ray.init(num_cpus=1, include_dashboard=False)\n"
        "ray.shutdown()\n"
        "ray.init(num_cpus=1, include_dashboard=False)\n"
        "print(get_trainable_cls('BC').__module__)\n")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["offline_rl.algorithms.trainable"]


def test_connectors_import_after_ray_tune_without_a_cycle():
    """Importing a lower layer (connectors imports offline_rl.episodes) while Tune is loaded
    registers the algorithms without importing the algorithm stack, which imports
    connectors."""
    finished = run_python(
        "import sys\n"
        "from ray import tune\n"
        "from connectors import AddObservationsFromEpisodesToBatch\n"
        "assert 'offline_rl.algorithms.algorithm_config' not in sys.modules\n"
        f"{RESOLVE_BC}")
    assert finished.returncode == 0, finished.stderr


def test_offline_rl_works_without_ray_tune_and_never_imports_it():
    """``pydantic`` is one of ray[tune]'s dependencies that ray[data] lacks."""
    finished = run_python(
        "import sys, importlib.abc\n"
        "class Missing(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'pydantic':\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Missing())\n"
        "from offline_rl import BCConfig\n"
        "config = BCConfig().environment('CartPole-v1').offline_data(input_='x')\n"
        "config.validate()\n"
        "import offline_rl.algorithms.bc\n"
        "assert 'ray.tune' not in sys.modules\n"
        "try:\n"
        "    import ray.tune\n"
        "except ImportError:\n"
        "    print('no tune')\n")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "no tune"


def test_a_trial_reserves_what_it_starts():
    config = (BCConfig().offline_data(map_batches_kwargs={"concurrency": (1, 3), "num_cpus": 2})
              .learners(num_learners=2)
              .evaluation(evaluation_num_env_runners=2))
    # itself | read + 3 PreLearners x 2 + 2 learners x 1 + 2 runners x 1
    assert trial_bundles(config) == [{"CPU": 1.0}, {"CPU": 11.0}]
    config.learners(num_learners=0, num_gpus_per_learner=1).resources(num_cpus_for_main_process=2)
    assert trial_bundles(config) == [{"CPU": 2.0, "GPU": 1.0}, {"CPU": 9.0}]


def test_a_trial_reserves_the_samplers_and_the_offline_evaluation_runners():
    # Issue 70: the trial's bundles are the run's ResourcePlan, every runner included.
    config = (BCConfig().environment("CartPole-v1")
              .offline_data(input_={"data": 0.8, "sampler": 0.2})
              .env_runners(num_env_runners=2, num_cpus_per_env_runner=0.5)
              .evaluation(num_offline_eval_runners=3, num_cpus_per_offline_eval_runner=0.25))
    # itself | read + 1 PreLearner + 2 sampler runners x 0.5 + 3 x 0.25 + 0.5 for their pipeline
    assert trial_bundles(config) == [{"CPU": 1.0}, {"CPU": 4.25}]


def test_a_trial_left_at_auto_fits_the_cluster_and_numbers_given_are_kept():
    config = (BCConfig().offline_data(map_batches_kwargs={"concurrency": 2})
              .evaluation(evaluation_num_env_runners=1))
    assert trial_bundles(config) == [{"CPU": 1.0}, {"CPU": 4.0}]
    # 4 CPUs: the runner shares them; 3: the process and the 2 PreLearners share what is left
    with pytest.warns(UserWarning, match=r"num_cpus_for_main_process=1, num_cpus_per_env_runner"
                                         r"=0, map_batches_kwargs\['num_cpus'\]=1\."):
        assert trial_bundles(fit_trial(config, 4)) == [{"CPU": 1.0}, {"CPU": 3.0}]
    with pytest.warns(UserWarning, match=r"a BC trial sized to the cluster's 3 CPUs \(options "
                                         r"left at 'auto'\): num_cpus_for_main_process=0.6666"):
        assert trial_bundles(fit_trial(config, 3)) == [{"CPU": 0.6666}, {"CPU": 2.3332}]
    given = config.copy().resources(num_cpus_for_main_process=1)
    assert trial_bundles(fit_trial(given, 3, warn=False)) == [{"CPU": 1.0}, {"CPU": 2.0}]
    # Numbers that cannot fit are left for default_resource_request to refuse
    pinned = config.copy().offline_data(map_batches_kwargs={"concurrency": 4, "num_cpus": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert trial_bundles(fit_trial(pinned, 3)) == trial_bundles(pinned)


def test_parallel_evaluation_needs_evaluation_runners():
    config = (BCConfig().environment("CartPole-v1").offline_data(input_="x")
              .evaluation(evaluation_interval=1, evaluation_parallel_to_training=True))
    with pytest.raises(ConfigError, match=r"evaluation_parallel_to_training: needs "
                                          r"evaluation_num_env_runners >= 1"):
        config.validate()


@pytest.mark.slow
def test_a_read_in_a_trials_placement_group_lists_footers_with_one_actor(ray_session,
                                                                         cartpole_data):
    """In a trial's placement group the input is read with Ray Data's V2 Parquet datasource,
    whose footer listing starts 32 actors by default, however few the files: ours start
    ``FOOTER_READERS``."""
    import gymnasium as gym
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from offline_rl.data.source.input_reader import FOOTER_READERS, FOOTER_READERS_ENV, read_input
    from offline_rl.placement import keep_ray_data_in_placement_group

    def footer_readers_started() -> int:  # GCS's table holds every actor ever created
        return sum(actor["ActorClassName"] == "FooterReader"
                   for actor in ray._private.state.state.actor_table(None).values())

    @ray.remote(num_cpus=0)
    def read_rows(data_config) -> tuple[int, bool]:
        keep_ray_data_in_placement_group()  # as OfflineData does
        setting = os.environ.get(FOOTER_READERS_ENV)
        rows = sum(len(batch["rewards"]) for batch in read_input(data_config).iter_batches())
        return rows, os.environ.get(FOOTER_READERS_ENV) == setting

    env = gym.make("CartPole-v1")
    data_config = (BCConfig().environment("CartPole-v1").offline_data(input_=str(cartpole_data))
                   .data_config((env.observation_space, env.action_space)))
    group = placement_group([{"CPU": 2}])  # the listing task and its footer reader
    before = footer_readers_started()
    try:
        rows, setting_kept = ray.get(read_rows.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                group, placement_group_capture_child_tasks=True)).remote(data_config))
    finally:
        remove_placement_group(group)
    files = sorted(cartpole_data.rglob("*.parquet"))
    assert rows == sum(pq.read_metadata(file).num_rows for file in files)
    assert setting_kept
    assert footer_readers_started() - before == FOOTER_READERS
