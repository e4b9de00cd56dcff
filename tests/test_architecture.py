"""The architecture holds: layers import downward only, data workers stay light, algorithms
come from an open registry, and configs (also subclassed ones) survive checkpoints."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from offline_rl import AlgorithmConfig, BCConfig, OfflineData
from offline_rl.algorithms import get_algorithm_config_class, register_algorithm
from offline_rl.algorithms.checkpoint import read_config, write_checkpoint
from offline_rl.errors import ConfigError, DataNotFoundError

ROOT = Path(__file__).resolve().parents[1]
SPACES = (gym.spaces.Box(-5, 5, (4,), np.float32), gym.spaces.Discrete(2))


class SubclassedBCConfig(BCConfig):
    """A user's config subclass (same algorithm name)."""


def test_layers_import_downward_only():
    result = subprocess.run([str(Path(sys.executable).parent / "lint-imports")], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Layers import downward only KEPT" in result.stdout
    assert "Data stages import downward only KEPT" in result.stdout


def test_prelearner_actors_import_neither_torch_nor_the_algorithms(ray_session, bc_config):
    config = bc_config.offline_data(prelearner_class="tests.prelearners:ReportsImports")
    data = OfflineData(config.data_config(SPACES), SPACES).start()
    try:
        batch = data.sample()
    finally:
        data.stop()
    assert batch["heavy_imports"].size == 512 and not batch["heavy_imports"].any()


def test_env_runner_actors_leave_ray_data_unimported(ray_session):
    # Each evaluation or sampler runner is a process of its own: importing Ray Data (and pandas
    # with it) cost every one 0.45 s of CPU.
    import ray

    from offline_rl.evaluation.evaluation_runners import EvaluationRunners
    from offline_rl.models.rl_module_spec import RLModuleSpec
    from offline_rl.recording.online_sampler import OnlineSampler
    from offline_rl.recording.recorder_config import RecorderConfig
    from offline_rl.settings.environment import EnvironmentConfig
    from offline_rl.settings.resources import EnvRunnersConfig

    spec = RLModuleSpec(observation_space=SPACES[0], action_space=SPACES[1])
    evaluation = EvaluationRunners("CartPole-v1", {}, spec, num_runners=1, num_cpus=0)
    sampler = OnlineSampler(RecorderConfig(EnvironmentConfig(env="CartPole-v1"), EnvRunnersConfig(
        num_env_runners=1, num_cpus_per_env_runner=0)), spec)
    try:
        imported = ray.get([runner.__ray_call__.remote(
            lambda _: sorted(name for name in ("ray.data", "pandas", "torch")
                             if name in sys.modules))
            for runner in evaluation.runners + sampler.runners])
    finally:
        evaluation.stop()
        sampler.stop()
    assert imported == [["torch"], ["torch"]]


@pytest.mark.parametrize("config_name", ["BCConfig", "CQLConfig", "DiscreteCQLConfig",
                                         "DQNConfig", "IQLConfig", "MARWILConfig",
                                         "TD3BCConfig"])
def test_importing_an_algorithm_leaves_torch_for_build_to_import_while_ray_starts(config_name):
    # Issue 16: torch's import (~1 s) overlaps ray.init in build() instead of preceding it.
    script = textwrap.dedent(f"""
        import sys
        from offline_rl import {config_name}
        {config_name}().environment("CartPole-v1")
        print(sorted(name for name in ("torch", "ray.tune") if name in sys.modules))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert result.stdout.strip() == "[]", result.stderr


def test_algorithms_resolve_lazily_through_an_open_registry():
    register_algorithm("SubclassedBC", f"{__name__}:SubclassedBCConfig")
    assert get_algorithm_config_class("SubclassedBC") is SubclassedBCConfig
    config = AlgorithmConfig.from_dict({"algorithm": "SubclassedBC",
                                        "training": {"lr": 0.5}})
    assert type(config) is SubclassedBCConfig and config.lr == 0.5
    with pytest.raises(ConfigError, match=r"unknown algorithm 'NoSuchAlgo'; known: \[.*'BC'"):
        get_algorithm_config_class("NoSuchAlgo")
    with pytest.raises(ConfigError, match="builds no algorithm; use an algorithm config"):
        AlgorithmConfig().environment("CartPole-v1").offline_data(input_="x").build()


def test_a_subclassed_config_comes_back_as_its_own_class(tmp_path):
    config = SubclassedBCConfig().environment("CartPole-v1").offline_data(input_="data")
    saved = config.to_dict()
    assert saved["config_class"] == f"{__name__}:SubclassedBCConfig"
    assert type(AlgorithmConfig.from_dict(saved)) is SubclassedBCConfig
    assert "config_class" not in BCConfig().to_dict()  # the registered class needs no path
    unknown = {**saved, "config_class": "somewhere_else:NotDefinedConfig"}
    with pytest.raises(ConfigError, match="saved from somewhere_else:NotDefinedConfig, which is "
                                          "not defined in this process: import the module"):
        AlgorithmConfig.from_dict(unknown)


class SavesState:
    """A learner's ``save_state``, all ``write_checkpoint`` asks of it."""

    def save_state(self, path: Path) -> None:
        Path(path).write_bytes(b"weights")


def test_a_checkpoint_says_why_its_config_is_missing(tmp_path):
    config = BCConfig().environment(lambda env_config: gym.make("CartPole-v1"))
    with pytest.warns(UserWarning, match="has no config.yaml: .*cannot be written to YAML"):
        path = write_checkpoint(tmp_path / "checkpoint", SavesState(), config, {"iteration": 1})
    with pytest.raises(DataNotFoundError, match="has no config.yaml .*cannot be written to YAML.*"
                                                "pass the config"):
        read_config(path)
    saved = write_checkpoint(tmp_path / "checkpoint", SavesState(),
                             SubclassedBCConfig().environment("CartPole-v1"), {})
    assert type(read_config(saved)) is SubclassedBCConfig


def test_output_filesystem_is_validated_under_its_own_name():
    config = BCConfig().environment("CartPole-v1").offline_data(
        input_="data", output_filesystem="hdfs", output_filesystem_kwargs={"x": 1})
    with pytest.raises(ConfigError, match="output_filesystem: output_filesystem='hdfs' is not "
                                          "supported") as error:
        config.validate()
    assert "input_filesystem" not in str(error.value)


@pytest.mark.slow
def test_a_failed_build_leaves_no_ray_running(cartpole_data):
    """64 learners of one CPU each do not fit: the error comes after Ray started, and the
    algorithm shuts down the Ray instance it started."""
    script = textwrap.dedent(f"""
        import ray
        from offline_rl import BCConfig
        from offline_rl.errors import ResourceError
        config = (BCConfig().environment("CartPole-v1")
                  .offline_data(input_={str(cartpole_data)!r})
                  .learners(num_learners=64, num_cpus_per_learner=1))
        try:
            config.build()
        except ResourceError as error:
            print("ResourceError:", error)
        print("ray running:", ray.is_initialized())
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert "ResourceError: 64 learner(s) x 1 CPU need 64 CPU" in result.stdout, result.stderr
    assert "ray running: False" in result.stdout
