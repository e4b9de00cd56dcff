"""End to end on a local Ray instance: BC learns CartPole; checkpoints restore; the CLI works."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import ray

from offline_rl import COMPONENT_RL_MODULE, Algorithm, MARWILConfig
from offline_rl.algorithms.checkpoint import read_algorithm_state
from offline_rl.algorithms.checkpoint_schedule import PeriodicCheckpoints
from offline_rl.errors import ConfigError
from tests.session_fixtures import cpus_held_after

MAX_ITERATIONS = 300


def test_bc_reaches_return_450_within_bounded_updates(ray_session, bc_config):
    config = bc_config.evaluation(evaluation_interval=10, evaluation_duration=10)
    with config.build() as algo:
        best, result = 0.0, {}
        first_loss = algo.train()["learners"]["default_policy"]["policy_loss"]
        for _ in range(MAX_ITERATIONS):
            result = algo.train()
            if "evaluation" in result:
                best = max(best, result["evaluation"]["env_runners"]["episode_return_mean"])
                if best >= 450:
                    break
        learners = result["learners"]
        assert best >= 450, f"best evaluation return {best} after {result['training_iteration']}"
        assert learners["default_policy"]["policy_loss"] < 0.8 * first_loss
        assert learners["__all_modules__"]["num_env_steps_trained"] == 512
        assert learners["__all_modules__"]["num_env_steps_trained_lifetime"] == (
            512 * result["training_iteration"])


def test_iteration_runs_the_configured_number_of_updates(ray_session, bc_config):
    with bc_config.offline_data(dataset_num_iters_per_learner=3).build() as algo:
        result = algo.train()
    assert result["learners"]["__all_modules__"]["num_updates"] == 3
    assert result["learners"]["__all_modules__"]["num_env_steps_trained"] == 3 * 512


@pytest.mark.slow
def test_checkpoint_restores_weights_and_counters(ray_session, bc_config, tmp_path):
    with bc_config.build() as algo:
        for _ in range(3):
            algo.train()
        path = algo.save_to_path(tmp_path / "checkpoint")
        obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
        expected = algo.module.compute_actions(obs)
    with Algorithm.from_checkpoint(path) as restored:
        assert restored.iteration == 3
        np.testing.assert_array_equal(restored.module.compute_actions(obs), expected)
        assert restored.train()["training_iteration"] == 4
    with bc_config.build() as fresh:  # RLlib's way to load only the module (e.g. an expert's)
        fresh.restore_from_path(path, component=COMPONENT_RL_MODULE)
        assert fresh.iteration == 0 and fresh.num_updates_lifetime == 0
        np.testing.assert_array_equal(fresh.module.compute_actions(obs), expected)
        with pytest.raises(ConfigError, match="component='optimizer' is not a part of"):
            fresh.restore_from_path(path, component="optimizer")
    other_module = bc_config.copy().rl_module(model_config={"fcnet_hiddens": [8]})
    with pytest.raises(ConfigError, match="the saved module does not fit the module this config "
                                          "builds .*Algorithm.from_checkpoint"):
        Algorithm.from_checkpoint(path, config=other_module)
    marwil = (MARWILConfig().environment("CartPole-v1")
              .offline_data(input_=bc_config.sections.offline_data.input_).rl_module(
                  model_config={"fcnet_hiddens": [64, 64], "fcnet_activation": "relu"}))
    with pytest.raises(ConfigError, match=r"checkpoint is a checkpoint of BC, and this algorithm "
                                          r"is MARWIL: restore it with Algorithm.from_checkpoint"
                                          r"\(path\), which builds BC"):
        Algorithm.from_checkpoint(path, config=marwil)
    assert cpus_held_after(timeout_s=5) == 0  # the failed build was stopped: nothing stays held


def run_cli(*args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offline_rl.cli", *args], capture_output=True,
                          text=True, timeout=240, cwd=cwd, env=env)


def test_cli_help_explains_each_command():
    top = run_cli("--help")
    assert top.returncode == 0 and "train" in top.stdout and "RAY_ADDRESS" in top.stdout
    train_help = run_cli("train", "--help").stdout
    assert all(flag in train_help for flag in ("--stop-return", "--checkpoint-frequency",
                                               "--keep-checkpoints"))
    assert "mixed" in run_cli("datasets", "make", "--help").stdout
    assert all(command in top.stdout for command in ("record", "convert", "inspect"))


def test_cli_lists_the_datasets_and_algorithms_without_importing_them():
    from offline_rl.algorithms.registry import BUILT_IN_ALGORITHMS
    from offline_rl.datasets import EXPERTS, TIERS

    script = """
import contextlib, io, os, sys
os.environ["COLUMNS"] = "1000"  # one line per option: env ids unbroken
from offline_rl.cli import main
with contextlib.redirect_stdout(io.StringIO()) as text:
    main(["datasets", "make", "--help"]), main(["train", "--help"])
print(text.getvalue(), [name for name in ("gymnasium", "numpy", "ray", "torch")
                        if name in sys.modules])
"""
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=60).stdout
    assert all(name in shown for name in [*EXPERTS, *TIERS, *BUILT_IN_ALGORITHMS]), shown
    assert shown.rstrip().endswith(" []"), shown


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_cli_records_trains_and_evaluates(ray_session, tmp_path, capsys):
    # train runs in a process of its own and joins the shared Ray instance, as it joins a
    # cluster (RAY_ADDRESS); test_bad_input's CLI test starts Ray of its own. The other
    # commands run in this process.
    from offline_rl.cli import main

    joined = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    data = tmp_path / "data"
    assert main(["datasets", "make", "CartPole-v1", "expert", "--out", str(data),
                 "--episodes", "20"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["num_env_steps"] == 10_000
    config = tmp_path / "bc.yaml"
    config.write_text(
        "algorithm: BC\nenvironment: {env: CartPole-v1}\n"
        "training: {lr: 0.003, train_batch_size_per_learner: 512}\n"
        f"offline_data: {{input_: {data}}}\nevaluation: {{evaluation_interval: 5}}\n"
        "rl_module: {model_config: {fcnet_hiddens: [64, 64], fcnet_activation: relu}}\n"
        "learners: {num_learners: 2}\ndebugging: {seed: 0}\n")
    trained = run_cli("train", str(config), "--max-iterations", "10",
                      "--output-dir", str(tmp_path / "run"), env=joined)
    assert trained.returncode == 0, trained.stderr
    # Ray Data's lines from the remote learners' SplitCoordinator stay in Ray's log files
    assert "execution finished" not in trained.stderr and "SplitCoordinator" not in trained.stderr
    summary = json.loads(trained.stdout.splitlines()[-1])
    assert summary["iterations"] == 10
    header = (tmp_path / "run" / "progress.csv").read_text().splitlines()[0]
    assert "learners/default_policy/total_loss" in header
    assert len((tmp_path / "run" / "result.json").read_text().splitlines()) == 10
    assert main(["evaluate", summary["checkpoint"], "--episodes", "3"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["num_episodes"] == 3
    held_out = tmp_path / "held-out"
    assert main(["datasets", "make", "CartPole-v1", "medium", "--out", str(held_out),
                 "--episodes", "3"]) == 0
    capsys.readouterr()
    assert main(["evaluate", summary["checkpoint"], "--ope", str(held_out)]) == 0
    estimated = capsys.readouterr().out
    estimates = json.loads(estimated.splitlines()[-1])
    assert sorted(estimates) == ["DirectMethod", "DoublyRobust", "ImportanceSampling",
                                 "TrajectoryImportanceSampling", "WeightedImportanceSampling"]
    assert "ImportanceSampling: v_target" in estimated


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_cli_train_keeps_the_newest_periodic_checkpoint_to_resume_from(ray_session, bc_config,
                                                                       tmp_path, capsys):
    from offline_rl.cli import main

    config_file = tmp_path / "bc.yaml"
    bc_config.to_yaml(config_file)
    run = tmp_path / "run"
    assert main(["train", str(config_file), "--max-iterations", "5", "--checkpoint-frequency",
                 "2", "--keep-checkpoints", "1", "--output-dir", str(run)]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert sorted(path.name for path in run.iterdir()
                  if not path.name.startswith("events.out.tfevents")) == [
        "checkpoint", "checkpoint_000004", "progress.csv", "result.json"]
    assert summary["checkpoints"] == [str(run / "checkpoint_000004")]
    assert read_algorithm_state(summary["checkpoint"])["training_iteration"] == 5
    with Algorithm.from_checkpoint(run / "checkpoint_000004") as resumed:
        assert resumed.iteration == 4
        assert resumed.train()["training_iteration"] == 5
    # A run killed after iteration 5, before its final checkpoint, resumes from iteration 4:
    # its 5th result is replaced, and the files go on to the 7th.
    shutil.rmtree(run / "checkpoint")
    assert main(["train", str(config_file), "--resume", str(run), "--max-iterations", "7"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["iterations"] == 7
    lines = (run / "result.json").read_text().splitlines()
    assert [json.loads(line)["training_iteration"] for line in lines] == [1, 2, 3, 4, 5, 6, 7]
    assert len((run / "progress.csv").read_text().splitlines()) == 1 + 7


class FolderPerSave:
    """Saves like an algorithm, an empty folder each, noting the folders there at each save."""

    def __init__(self) -> None:
        self.folders_at_save: list[list[str]] = []

    def save_to_path(self, path: Path) -> str:
        self.folders_at_save.append(sorted(folder.name for folder in path.parent.iterdir()))
        path.mkdir()
        return str(path)


def test_periodic_checkpoints_delete_the_oldest_only_once_the_newest_is_written(tmp_path):
    algo = FolderPerSave()
    checkpoints = PeriodicCheckpoints(tmp_path, frequency=2, keep=2)
    written = [checkpoints.after_iteration(algo, iteration) for iteration in range(1, 8)]
    names = [f"checkpoint_{iteration:06d}" for iteration in (2, 4, 6)]
    assert written == [None, str(tmp_path / names[0]), None, str(tmp_path / names[1]), None,
                       str(tmp_path / names[2]), None]
    assert algo.folders_at_save[-1] == names[:2]
    assert sorted(folder.name for folder in tmp_path.iterdir()) == names[1:]
    assert checkpoints.kept == [str(tmp_path / name) for name in names[1:]]
    assert PeriodicCheckpoints(tmp_path, frequency=0).after_iteration(algo, 8) is None


@pytest.mark.timeout(240)
@pytest.mark.slow
def test_algorithms_in_a_row_give_back_every_resource(ray_session, bc_config):
    """What notebooks, test suites and Tune trials do: build, train and stop again and again in
    one Ray session. Each stop gives back every CPU its actors held."""
    total = ray.cluster_resources()["CPU"]
    for _ in range(5):
        with bc_config.build() as algo:
            algo.train()
        assert ray.available_resources().get("CPU") == total


@pytest.mark.slow
def test_a_checkpoint_that_does_not_fit_on_disk_says_so_and_keeps_the_older_one(tmp_path):
    """Issue 17: a full disk surfaced as torch's "unexpected pos ..." and left a staging folder.
    A file-size limit (RLIMIT_FSIZE) stands in for the full disk, in a child process."""
    script = f"""
import resource, signal
import gymnasium as gym, numpy as np
from offline_rl import BCConfig
from offline_rl.algorithms.bc.bc_learner import BCTorchLearner
from offline_rl.algorithms.checkpoint import write_checkpoint
from offline_rl.errors import CheckpointWriteError

config = BCConfig().rl_module(model_config={{"fcnet_hiddens": [256, 256]}})
spec = config.get_rl_module_spec(gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2))
learner = BCTorchLearner(config.learner_config(spec))
write_checkpoint({str(tmp_path / "ckpt")!r}, learner, config, {{"iteration": 1}})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))
try:
    write_checkpoint({str(tmp_path / "ckpt")!r}, learner, config, {{"iteration": 2}})
except CheckpointWriteError as error:
    print(error)
"""
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert re.match(rf"could not write the checkpoint {re.escape(str(tmp_path / 'ckpt'))} "
                    r"\(.*\); [\d.]+ MiB are free on its disk\. Free space or save elsewhere; "
                    "an older checkpoint there is intact", finished.stdout)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ckpt"]  # no staging left
    assert json.loads((tmp_path / "ckpt" / "algorithm_state.json").read_text()) == {
        "iteration": 1}
