"""RLlib's flat config dicts and old-stack keys: translated with a warning naming the new keys,
refused with the reason where offline-rl has no equivalent; `offline-rl train --run` beside the
YAML form; recorded actions normalized to [-1, 1] unsquashed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pytest
import ray
import yaml

from offline_rl import AlgorithmConfig, BCConfig, OfflinePreLearner
from offline_rl.errors import ConfigError

SAMPLE_BATCH_JSON = Path(__file__).parent / "fixtures" / "rllib_cartpole_sample_batch_json"
JSON_INPUT = {"input_read_method": "read_json", "input_read_sample_batches": True}


@pytest.mark.parametrize("old, section, expected", [
    ({"input": "/tmp/cartpole-out"}, "offline_data", {"input_": "/tmp/cartpole-out", **JSON_INPUT}),
    ({"input": "dataset", "input_config": {"format": "parquet", "path": "/data",
                                            "parallelism": 3, "num_cpus_per_read_task": 0.5}},
     "offline_data", {"input_": "/data", "input_read_method": "read_parquet",
                      "input_read_method_kwargs": {"override_num_blocks": 3,
                                                   "ray_remote_args": {"num_cpus": 0.5}}}),
    ({"output": "dataset", "output_config": {"format": "json", "path": "/out",
                                              "max_num_samples_per_file": 100}},
     "offline_data", {"output": "/out", "output_write_sample_batches": True,
                      "output_write_episodes": False, "output_max_rows_per_file": 100}),
    ({"output": "/tmp/cartpole-out", "output_max_file_size": 5000000}, "offline_data",
     {"output": "/tmp/cartpole-out", "output_write_sample_batches": True,
      "output_write_episodes": False, "output_max_file_size": 5000000}),
    ({"input_evaluation": ["is", "wis", "simulation"]}, "evaluation",
     {"off_policy_estimation_methods": {"is": {"type": "ImportanceSampling"},
                                        "wis": {"type": "WeightedImportanceSampling"}},
      "evaluation_interval": 1}),
    ({"shuffle_buffer_size": 4, "train_batch_size": 64}, "offline_data",
     {"iter_batches_kwargs": {"local_shuffle_buffer_size": 256}}),
    ({"actions_in_input_normalized": True}, "offline_data", {"input_actions_normalized": True}),
    ({"num_workers": 2, "evaluation_num_workers": 1}, "env_runners", {"num_env_runners": 2}),
    ({"evaluation_config": {"input": "/held-out", "explore": False}}, "evaluation",
     {"evaluation_config": {"input_": "/held-out", **JSON_INPUT}}),
])
def test_old_stack_keys_become_the_options_that_do_the_same(old, section, expected):
    with pytest.warns(UserWarning, match=r"old-stack key '\w+' is \w+\("):
        config = AlgorithmConfig.from_dict({"algorithm": "BC", "env": "CartPole-v1", **old})
    saved = config.to_dict()[section]
    assert {name: saved[name] for name in expected} == expected


def test_a_flat_config_with_old_keys_trains_as_its_sections_say(tmp_path):
    # One YAML file, flat as RLlib's old configs were, loads and validates.
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({"algorithm": "BC", "env": "CartPole-v1", "lr": 0.01,
                                    "input": str(SAMPLE_BATCH_JSON), "framework": "torch",
                                    "input_evaluation": ["is"], "explore": False}))
    with pytest.warns(UserWarning) as caught:
        config = AlgorithmConfig.from_yaml(path)
    config.validate()
    messages = [str(warning.message) for warning in caught]
    assert any(m.startswith("explore=False has no effect") for m in messages)
    assert any("estimate on the training input" in m for m in messages)
    assert config.sections.evaluation.evaluation_config["input_"] == str(SAMPLE_BATCH_JSON)
    assert config.sections.training.lr == 0.01


@pytest.mark.parametrize("values, message", [
    ({"postprocess_inputs": True}, r"postprocess_inputs=True is not supported: the learner "
                                   r"connector pipeline computes"),
    ({"framework": "tf2"}, r"framework='tf2': offline-rl's learners are torch only"),
    ({"input": "sampler"}, r"input='sampler' alone is online RL: offline-rl trains from "
                           r"recorded data, with at most a share of online experience"),
    ({"output": "logdir"}, r"output='logdir' writes into the run's folder, which only the "
                           r"command line knows"),
    ({"input": "no_such_input"}, r"input 'no_such_input' is neither a registered input nor an "
                                 r"existing path; registered inputs: "),
    ({"input_config": {"format": "json", "paths": "/x"}}, r"input_config takes a dict of "
                                                          r"\['format', 'path'"),
    ({"num_sgd_iter": 3}, r"unknown config key 'num_sgd_iter': not a section"),
    ({"lr": 0.1, "training": {"lr": 0.2}}, r"\['lr'\] set both in section 'training' and as "
                                           r"flat keys"),
    ({"input": "/a", "input_": "/b"}, r"'input_' sets \['input_'\], which another key of the "
                                      r"config sets too"),
])
def test_old_keys_without_an_equivalent_and_unknown_keys_are_refused(values, message):
    with pytest.raises(ConfigError, match=message):
        BCConfig().update_from_dict(values)


def test_actions_recorded_normalized_are_unsquashed_onto_the_box():
    spaces = (gym.spaces.Box(-1, 1, (1,), np.float32),
              gym.spaces.Box(0.0, 10.0, (1,), np.float32))
    rows = pa.table({"obs": [[0.0], [0.0]], "new_obs": [[0.1], [0.1]], "actions": [[-1.0], [0.5]],
                     "rewards": [1.0, 1.0], "terminateds": [False, True]})
    config = BCConfig().offline_data(input_actions_normalized=True)
    actions = OfflinePreLearner(config, spaces)(rows)["actions"]
    np.testing.assert_allclose(actions.ravel(), [0.0, 7.5])
    with pytest.raises(ConfigError, match=r"unsquashes Box actions, but the action space is "
                                          r"Discrete\(2\)"):
        OfflinePreLearner(config, (spaces[0], gym.spaces.Discrete(2)))


def run_train(*args: str, cwd: Path, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "offline_rl.cli", "train", *args],
                          capture_output=True, text=True, timeout=240, cwd=cwd, env=env)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_train_takes_rllibs_run_env_config_and_stop(ray_session, tmp_path):
    # The seed's `rllib train --run=DQN --env=CartPole-v0 --config='{"input": ...}'` form, BC.
    # It joins the shared Ray instance (RAY_ADDRESS); test_bad_input's CLI test starts its own.
    joined = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    config = {"input": str(SAMPLE_BATCH_JSON), "input_evaluation": [], "explore": False,
              "train_batch_size": 128, "output": "logdir", "dataset_num_iters_per_learner": 1}
    trained = run_train("--run", "BC", "--env", "CartPole-v0", "--config", json.dumps(config),
                        "--stop", '{"timesteps_total": 300}', "--output-dir", "run",
                        cwd=tmp_path, env=joined)
    assert trained.returncode == 0, trained.stderr
    summary = json.loads(trained.stdout.splitlines()[-1])
    assert (summary["iterations"], summary["env_steps_trained"]) == (3, 384)  # 3 x 128 >= 300
    assert "old-stack key 'train_batch_size' is training(train_batch_size_per_learner=128)" in \
        trained.stderr
    saved = yaml.safe_load((tmp_path / "run" / "checkpoint" / "config.yaml").read_text())
    assert saved["offline_data"]["output"] == str(Path("run") / "experiences")
    assert saved["environment"]["env"] == "CartPole-v0"

    unknown = run_train("--run", "BC", "--env", "CartPole-v0", "--config", json.dumps(config),
                        "--stop", '{"episodes_total": 3}', cwd=tmp_path)
    assert unknown.returncode == 2
    assert "--stop episodes_total=3: offline-rl stops on a number for one of" in unknown.stderr
    both = run_train("missing.yaml", "--run", "BC", cwd=tmp_path)
    assert both.returncode == 2 and "does not exist" in both.stderr
    neither = run_train("--env", "CartPole-v0", cwd=tmp_path)
    assert neither.returncode == 2
    assert "give either a YAML config file or --run ALGO" in neither.stderr


def test_the_builders_take_rllibs_framework_and_old_evaluation_keywords():
    # The 001 seed's `.framework("torch")` and `.evaluation(evaluation_num_workers=1,
    # evaluation_config={"input": ...})`.
    with pytest.warns(UserWarning, match="old-stack key 'input' is offline_data"):
        config = BCConfig().framework("torch").evaluation(
            evaluation_num_workers=1, evaluation_config={"input": "/tmp/cartpole-eval"})
    assert config.evaluation_num_env_runners == 1
    assert config.evaluation_config == {"input_": "/tmp/cartpole-eval",
                                        "input_read_method": "read_json",
                                        "input_read_sample_batches": True}
    with pytest.raises(ConfigError, match="framework='tf2': offline-rl's learners are torch only"):
        BCConfig().framework("tf2")
    with pytest.raises(ConfigError, match="evaluation_num_workers is the old stack's name of "
                                          "evaluation_num_env_runners; give one of them"):
        BCConfig().evaluation(evaluation_num_workers=1, evaluation_num_env_runners=2)
    with pytest.raises(ConfigError, match="unknown config key 'bogus'"):
        BCConfig().evaluation(evaluation_config={"bogus": 1})
    problems = dict(BCConfig().evaluation(evaluation_config={"evaluation_duration": 3}).problems())
    assert problems["evaluation_config"].startswith(
        "unknown offline_data setting(s) ['evaluation_duration']")
