"""Every example of RLlib's old-stack "Working with offline data" pages (the seeds 000, 001 and
002 in ``../shared/seeds``), run with offline-rl's imports and command (``offline-rl train``,
called in this process through ``offline_rl.cli.main``) in place of RLlib's.

Examples that another test file runs as the seed writes them are named, not run twice:
- converting external experiences (``SampleBatchBuilder``, ``JsonWriter``, ``get_preprocessor``;
  000, 001): ``tests/cartpole_app_logging_example.py``, run by ``tests/test_app_logging.py``;
- the estimators' Python API on Parquet rows, and the ``DQNConfig`` OPE config of 001 with a
  clone of the expert, whose estimates can be checked: ``tests/test_ope_seed_examples.py``;
- the custom input and output API in full: ``tests/test_custom_io.py``.

Deviations, each said where it happens: RLlib trains PG online to write ``/tmp/cartpole-out``
and ``/tmp/cartpole-eval``; offline-rl trains from recorded data, so BC on the scripted expert's
recorded data stands in, and ``output`` receives its evaluation episodes (played by sampling
the policy, with their action probabilities), in the seed's SampleBatch JSON. Commands get a
``--stop`` where the seed lets them run until interrupted. The paths are a temporary folder's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from offline_rl import (
    DQN,
    BCConfig,
    DQNConfig,
    JsonReader,
)
from offline_rl.cli import main as offline_rl
from offline_rl.errors import ConfigError, ResourceError
from offline_rl.evaluation.off_policy import (
    DirectMethod,
    DoublyRobust,
    FQETorchModel,
    ImportanceSampling,
    WeightedImportanceSampling,
)
from offline_rl.evaluation.off_policy import (
    WeightedImportanceSampling as WeightedImportanceSamplingEstimator,
)


def train(*args: str, capsys, cwd: Path, monkeypatch) -> dict:
    """``offline-rl train ARGS`` in ``cwd``; the run's summary line."""
    monkeypatch.chdir(cwd)
    assert offline_rl(["train", *args]) == 0
    return json.loads(capsys.readouterr().out.splitlines()[-1])


def results(cwd: Path) -> list[dict]:
    """The results of each iteration of the one run ``offline-rl train`` made in ``cwd``."""
    (run,) = (cwd / "runs").iterdir()
    return [json.loads(line) for line in (run / "result.json").read_text().splitlines()]


@pytest.fixture(scope="module")
def seed_tmp(tmp_path_factory) -> Path:
    """The seeds' ``/tmp``."""
    return tmp_path_factory.mktemp("tmp")


def record_like_pg(output: Path, timesteps: int, cartpole_data: Path, seed_tmp: Path) -> None:
    """``rllib train --run=PG --env=CartPole-v1 --config='{"output": ...,
    "output_max_file_size": 5000000}' --stop='{"timesteps_total': ...}'``. PG trains online;
    offline-rl trains from recorded data, so BC on the expert's data (``input_``) stands in and
    ``output`` receives its evaluation episodes (``evaluation_interval``)."""
    config = {"output": str(output), "output_max_file_size": 5000000,
              "input_": str(cartpole_data), "evaluation_interval": 1, "evaluation_duration": 8}
    assert offline_rl(["train", "--run=BC", "--env=CartPole-v1", f"--config={json.dumps(config)}",
                       f'--stop={{"timesteps_total": {timesteps}}}',
                       f"--output-dir={seed_tmp / ('run-' + output.name)}"]) == 0


@pytest.fixture(scope="module")
def cartpole_out(seed_tmp, cartpole_data, ray_session) -> Path:
    output = seed_tmp / "cartpole-out"
    record_like_pg(output, 4000, cartpole_data, seed_tmp)
    return output


@pytest.fixture(scope="module")
def cartpole_eval(seed_tmp, cartpole_data, ray_session) -> Path:
    output = seed_tmp / "cartpole-eval"
    record_like_pg(output, 2000, cartpole_data, seed_tmp)
    return output


def test_the_saved_experiences_are_sample_batch_json_files(cartpole_out):
    # $ ls -l /tmp/cartpole-out
    # output-2019-01-01_15-58-57_worker-0_0.json ...
    files = sorted(path.name for path in cartpole_out.iterdir() if not path.name.startswith("."))
    json_files = [name for name in files if name.endswith(".json")]
    assert json_files and all(name.startswith("output-") and "_worker-" in name
                              for name in json_files), files
    first = json.loads((cartpole_out / json_files[0]).read_text().splitlines()[0])
    assert first["type"] == "SampleBatch" and "action_prob" in first


def test_dqn_trains_on_the_saved_experiences(cartpole_out, tmp_path, capsys, monkeypatch):
    # $ rllib train --run=DQN --env=CartPole-v0 --config='{"input": "/tmp/cartpole-out",
    #     "input_evaluation": [], "explore": false}'
    summary = train("--run=DQN", "--env=CartPole-v0", "--config=" + json.dumps(
        {"input": str(cartpole_out), "input_evaluation": [], "explore": False}),
        '--stop={"training_iteration": 2}', capsys=capsys, cwd=tmp_path, monkeypatch=monkeypatch)
    assert summary["iterations"] == 2 and summary["env_steps_trained"] > 0
    losses = [result["learners"]["default_policy"]["total_loss"] for result in results(tmp_path)]
    assert all(math.isfinite(loss) for loss in losses)


def test_dqn_with_soft_q_estimates_its_gain_by_importance_sampling(
        cartpole_out, tmp_path, capsys, monkeypatch):
    # $ rllib train --run=DQN --env=CartPole-v0 --config='{"input": "/tmp/cartpole-out",
    #     "input_evaluation": ["is", "wis"],
    #     "exploration_config": {"type": "SoftQ", "temperature": 1.0}}'
    train("--run=DQN", "--env=CartPole-v0", "--config=" + json.dumps(
        {"input": str(cartpole_out), "input_evaluation": ["is", "wis"],
         "exploration_config": {"type": "SoftQ", "temperature": 1.0}}),
        '--stop={"training_iteration": 1}', capsys=capsys, cwd=tmp_path, monkeypatch=monkeypatch)
    estimates = results(tmp_path)[-1]["evaluation"]["off_policy_estimation"]
    assert sorted(estimates) == ["is", "wis"]
    for estimate in estimates.values():
        assert estimate["v_behavior"] > 0 and math.isfinite(estimate["v_gain"]), estimate


def test_dqn_without_exploration_as_the_experimental_page_writes_it(
        cartpole_out, tmp_path, capsys, monkeypatch):
    # 002: $ rllib train --run=DQN --env=CartPole-v0 --config='{"input": "/tmp/cartpole-out",
    #     "exploration_final_eps": 0, "exploration_fraction": 0}'
    with pytest.warns(UserWarning, match="exploration_final_eps=0 has no effect"):
        summary = train("--run=DQN", "--env=CartPole-v0", "--config=" + json.dumps(
            {"input": str(cartpole_out), "exploration_final_eps": 0,
             "exploration_fraction": 0}), '--stop={"training_iteration": 1}',
            capsys=capsys, cwd=tmp_path, monkeypatch=monkeypatch)
    assert summary["iterations"] == 1


@pytest.mark.slow
def test_the_001_dqn_config_estimates_off_policy_on_the_eval_data(
        cartpole_out, cartpole_eval, ray_session):
    config = (
        DQNConfig()
        .environment(env="CartPole-v1")
        .framework("torch")
        .offline_data(input_=str(cartpole_out))
        .evaluation(
            evaluation_interval=1,
            evaluation_duration=10,
            evaluation_num_workers=1,
            evaluation_duration_unit="episodes",
            evaluation_config={"input": str(cartpole_eval)},
            off_policy_estimation_methods={
                "is": {"type": ImportanceSampling},
                "wis": {"type": WeightedImportanceSampling},
                "dm_fqe": {
                    "type": DirectMethod,
                    "q_model_config": {"type": FQETorchModel, "polyak_coef": 0.05},
                },
                "dr_fqe": {
                    "type": DoublyRobust,
                    "q_model_config": {"type": FQETorchModel, "polyak_coef": 0.05},
                },
            },
        )
    )
    # The seed's input_ is its old-stack JSON: the new stack's option reads Parquet, so the
    # same data is named with the old key here.
    config.update_from_dict({"input": str(cartpole_out), "dataset_num_iters_per_learner": 20})
    # On 2 CPUs, one for reading and one for the PreLearner leave none for the evaluation
    # worker: asked for, its CPU fails at once, saying so (rather than waiting for a CPU
    # forever); left at "auto", as the seed leaves it, the worker shares the CPUs, saying so.
    with pytest.raises(ResourceError, match=r"1 CPU for learners and env runners = 3 CPUs, "
                                            r"but the Ray cluster has 2"):
        config.copy().env_runners(num_cpus_per_env_runner=1).build()
    with pytest.warns(UserWarning, match=r"env runners share the CPUs"):
        algo = config.build()
    with algo:
        result = algo.train()  # the seed trains 100 iterations
    evaluation = result["evaluation"]
    assert sorted(evaluation["off_policy_estimation"]) == ["dm_fqe", "dr_fqe", "is", "wis"]
    assert evaluation["env_runners"]["num_episodes"] == 10


@pytest.mark.slow
def test_the_dataset_output_and_input_configs(cartpole_data, seed_tmp, ray_session):
    # To write sample data to JSON or Parquet files using Dataset, ... with the infos
    # (store_infos); here the evaluation episodes of BC, which the seed's rollouts stand for.
    samples = seed_tmp / "test_samples"
    config = {
        "output": "dataset",
        "output_config": {
            "format": "json",  # json or parquet
            # Directory to write data files.
            "path": str(samples),
            # Break samples into multiple files, each containing about this many records.
            "max_num_samples_per_file": 100000,
            # Write the infos dict data
            "store_infos": True,
        },
    }
    writing = (BCConfig().environment("CartPole-v1")
               .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=1)
               .evaluation(evaluation_duration=3).update_from_dict(config))
    with writing.build() as algo:
        recorded = algo.evaluate()["env_runners"]["num_env_steps"]
    # To load sample data using Dataset, specify input and input_config keys like the following:
    config = {
        "input": "dataset",
        "input_config": {
            "format": "json",  # json or parquet
            # Path to data file or directory.
            "path": str(samples),
            # Num of tasks reading dataset in parallel, default is num_workers.
            "parallelism": 3,
            # Dataset allocates 0.5 CPU for each reader by default.
            # Adjust this value based on the size of your offline dataset.
            "num_cpus_per_read_task": 0.5,
        },
    }
    written = [json.loads(line) for file in samples.glob("*.json")
               for line in file.read_text().splitlines()]
    assert all(batch["type"] == "SampleBatch" for batch in written)
    assert sum(len(batch["actions"]) for batch in written) == recorded
    reading = DQNConfig().environment("CartPole-v1").update_from_dict(config)
    with reading.build() as algo:
        trained = algo.train()["learners"]["__all_modules__"]["num_env_steps_trained"]
    assert trained > 0


def test_the_input_and_output_api_blocks_are_accepted_as_documented(cartpole_out):
    # The Input API's options with their documented values, "input" aside: "sampler", the
    # default, is online RL; offline-rl mixes a share of it into recorded data at most.
    with pytest.warns(UserWarning, match="old-stack key 'input' is offline_data"):
        config = DQNConfig().update_from_dict({
            "input": str(cartpole_out),
            "input_config": {},
            "actions_in_input_normalized": False,
            "input_evaluation": ["is", "wis"],
            "postprocess_inputs": False,
            "shuffle_buffer_size": 0,
        })
    assert sorted(config.off_policy_estimation_methods) == ["is", "wis"]
    with pytest.raises(ConfigError, match="input='sampler' alone is online RL"):
        DQNConfig().update_from_dict({"input": "sampler"})
    # The Output API's options.
    config = DQNConfig().update_from_dict({
        "output": None,
        "output_config": {},
        "output_compress_columns": ["obs", "new_obs"],
        "output_max_file_size": 64 * 1024 * 1024,
    })
    assert (config.output, config.output_max_file_size) == (None, 64 * 1024 * 1024)


def test_input_pipeline_for_supervised_losses_reads_imperatively(cartpole_out):
    # def custom_loss(self, policy_loss):
    input_reader = JsonReader(str(cartpole_out))
    batch = input_reader.next()  # if you want to access imperatively
    assert batch["obs"].shape[1:] == (4,) and batch["actions"].shape == (batch.count,)
    # TensorFlow input ops: offline-rl is torch only; a loss takes next()'s arrays instead.
    with pytest.raises(ConfigError, match=r"tf_input_ops\(\): offline-rl is torch only"):
        input_reader.tf_input_ops()


@pytest.mark.slow
def test_mixing_simulation_and_offline_data(cartpole_out, cartpole_eval, tmp_path, capsys,
                                            monkeypatch):
    # $ rllib train --run=DQN --env=CartPole-v0 --config='{"input": {"/tmp/cartpole-out": 0.4,
    #     "hdfs:/archive/cartpole": 0.3, "sampler": 0.3}, "explore": false}'
    # There is no HDFS here: the second source is the other local folder the seeds record. The
    # sampler's env runner takes no CPU of its own: on 2 CPUs, reading and mapping hold both.
    config = {"input": {str(cartpole_out): 0.4, str(cartpole_eval): 0.3, "sampler": 0.3},
              "explore": False, "num_cpus_per_env_runner": 0}
    train("--run=DQN", "--env=CartPole-v0", "--config=" + json.dumps(config),
          '--stop={"training_iteration": 1}', capsys=capsys, cwd=tmp_path,
          monkeypatch=monkeypatch)
    (result,) = results(tmp_path)
    online = sum(learner["num_online_rows_trained"]
                 for learner in result["learners"]["per_learner"])
    offline = result["data"]["sources"]
    trained = online + sum(offline.values())
    assert online == pytest.approx(0.3 * trained, abs=1)
    assert offline[str(cartpole_out)] == pytest.approx(0.4 * trained, abs=2)
    assert result["env_runners"]["num_env_steps_sampled"] > 0


@pytest.fixture(scope="module")
def trainer(cartpole_out, ray_session):
    """``trainer = DQNTrainer(...)  # train policy offline``, with the seed's soft Q-learning
    (``exploration_config``), whose policy gives every action a probability."""
    config = DQNConfig().environment("CartPole-v1").update_from_dict(
        {"input": str(cartpole_out), "exploration_config": {"type": "SoftQ", "temperature": 1.0},
         "dataset_num_iters_per_learner": 50})
    with DQN(config) as trainer:
        trainer.train()
        yield trainer


def test_the_000_estimator_api_estimates_each_episode_of_a_json_reader(trainer, cartpole_out):
    estimator = WeightedImportanceSamplingEstimator(trainer.get_policy(), gamma=0.99)
    reader = JsonReader(str(cartpole_out))
    for _ in range(3):
        batch = reader.next()
        for episode in batch.split_by_episode():
            estimate = estimator.estimate(episode)
            assert estimate["v_behavior"] > 0 and math.isfinite(estimate["v_target"])


def test_the_001_estimator_api_trains_on_one_reader_and_estimates_on_another(
        trainer, cartpole_out, cartpole_eval):
    estimator = DoublyRobust(
        policy=trainer.get_policy(),
        gamma=0.99,
        q_model_config={"type": FQETorchModel, "n_iters": 160},
    )
    # Train estimator's Q-model; only required for DM and DR estimators
    reader = JsonReader(str(cartpole_out))
    for _ in range(2):
        batch = reader.next()
        trained = estimator.train(batch)
        assert list(trained) == ["loss"] and math.isfinite(trained["loss"])
    reader = JsonReader(str(cartpole_eval))
    # Compute off-policy estimates
    for _ in range(2):
        batch = reader.next()
        estimate = estimator.estimate(batch)
        assert {"v_behavior", "v_target", "v_gain", "v_behavior_std", "v_target_std",
                "v_delta"} <= set(estimate)
