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
from offline_rl.algorithms import get_algorithm_config_class, registered_algorithms
from offline_rl.algorithms.flat_config import OLD_STACK_KEYS
from offline_rl.cli import main
from offline_rl.data.prelearner.call_output import train_columns
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


def test_the_old_input_key_on_parquet_says_to_use_input_before_any_read():
    parquet = SAMPLE_BATCH_JSON.parent / "rllib_cartpole_tabular"
    with pytest.raises(ConfigError, match=r"the old stack's input reads SampleBatch JSON lines, "
                                          r"but .*rllib_cartpole_tabular holds Parquet files: "
                                          r"give it as input_"):
        BCConfig().update_from_dict({"input": str(parquet)})
    assert BCConfig().update_from_dict({"input": str(SAMPLE_BATCH_JSON)}).sections.offline_data \
        .input_read_method == "read_json"


@pytest.mark.parametrize("values, message", [
    ({"actions_in_input_normalized": "false"},
     r"^old-stack key actions_in_input_normalized \(offline_data\(input_actions_normalized="
     r"\.\.\.\) here\) must be True or False, got 'false'$"),
    ({"shuffle_buffer_size": -3}, r"^old-stack key shuffle_buffer_size must be an int >= 0 "
                                  r"\(train batches shuffled across\), got -3$"),
    ({"shuffle_buffer_size": 2.5}, r"shuffle_buffer_size must be an int >= 0 .*got 2\.5$"),
    ({"num_workers": "2"}, r"^old-stack key num_workers must be an int >= 0, got '2'$"),
    ({"evaluation_num_workers": -1}, r"evaluation_num_workers \(evaluation\("
                                     r"evaluation_num_env_runners=\.\.\.\) here\) must be an int "
                                     r">= 0, got -1"),
    ({"train_batch_size": "64"}, r"train_batch_size \(training\(train_batch_size_per_learner="
                                 r"\.\.\.\) here\) must be an int from 1 to"),
    ({"input": 5}, r"old-stack key input \(offline_data\(input_=\.\.\.\) here\) must be a path"),
    ({"input": {"/a": "1e308"}}, r"old-stack key input \(offline_data\(input_=\.\.\.\) here\): "
                                 r"source '/a': the weight must be a finite number above 0, got "
                                 r"'1e308'"),
    ({"input_config": {"format": "csv", "path": "/x"}},
     r"old-stack key input_config\['format'\] must be one of \('json', 'parquet'\), got 'csv'"),
    ({"input_config": {"parallelism": 0}}, r"input_config\['parallelism'\] must be an int >= 1"),
    ({"input_config": {"num_cpus_per_read_task": -1}},
     r"input_config\['num_cpus_per_read_task'\] must be a number >= 0, got -1"),
    ({"input_config": {"path": 7}}, r"input_config\['path'\] \(offline_data\(input_=\.\.\.\) "
                                    r"here\) must be a path"),
    ({"output": 5}, r"old-stack key output \(offline_data\(output=\.\.\.\) here\) must be one "
                    r"path"),
    ({"output_config": {"max_num_samples_per_file": 0}},
     r"output_config\['max_num_samples_per_file'\] \(offline_data\(output_max_rows_per_file="
     r"\.\.\.\) here\) must be None or an int >= 1, got 0"),
    ({"output_config": {"store_infos": "yes"}},
     r"output_config\['store_infos'\] must be True or False, got 'yes'"),
    ({"output_config": {"format": "csv"}}, r"output_config\['format'\] must be one of"),
    ({"input_evaluation": 5}, r"input_evaluation must be an estimator name or a list of them"),
    ({"postprocess_inputs": "false"}, r"postprocess_inputs must be True or False, got 'false'"),
    ({"framework": 5}, r"framework must be one of \('torch', 'tf', 'tf2', 'jax'\), got 5"),
    ({"explore": "no"}, r"old-stack key explore must be True or False, got 'no'"),
    ({"exploration_config": 5}, r"exploration_config must be a dict of keyword arguments"),
    ({"exploration_fraction": 2}, r"exploration_fraction must be a finite number from 0 to 1"),
    ({"exploration_final_eps": float("nan")}, r"exploration_final_eps must be a finite number"),
    ({"evaluation_config": {"actions_in_input_normalized": 1}},
     r"^evaluation_config: old-stack key actions_in_input_normalized .* got 1$"),
])
def test_an_old_keys_value_is_checked_before_it_is_translated(values, message):
    with pytest.raises(ConfigError, match=message):
        AlgorithmConfig.from_dict({"algorithm": "BC", "env": "CartPole-v1", **values})


@pytest.mark.parametrize("algorithm", registered_algorithms())
def test_every_old_key_is_checked_by_its_option_or_a_check_of_its_own(algorithm):
    config = get_algorithm_config_class(algorithm)()
    options = {name: part for part in config.sections for name in part.option_names()}
    checks = [old.check for old in OLD_STACK_KEYS.values()]
    checks += [check for nested in checks if isinstance(nested, dict) for check in nested.values()]
    for check in checks:
        assert check is not None
        if isinstance(check, str):  # the option's own check, which it must have
            assert options[check].option_check(check) is not None, check


def test_a_yaml_config_with_nonsense_old_keys_fails_before_training(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.json").write_bytes(b'{"obs": [0.0]}\n')
    for key, value, last in [
            ("actions_in_input_normalized", "false",
             "old-stack key actions_in_input_normalized (offline_data(input_actions_normalized="
             "...) here) must be True or False, got 'false'"),
            ("shuffle_buffer_size", -3, "old-stack key shuffle_buffer_size must be an int >= 0 "
                                        "(train batches shuffled across), got -3")]:
        path = tmp_path / f"{key}.yaml"
        path.write_text(yaml.safe_dump({"algorithm": "BC", "env": "Pendulum-v1",
                                        "input": str(data), key: value}))
        files = {file: file.read_bytes() for file in (path, data / "rows.json")}
        assert main(["train", str(path), "--output-dir", str(tmp_path / "run")]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"offline-rl: error: {path}: {last}")
        assert main(["train", "--run", "BC", "--env", "Pendulum-v1", "--config", json.dumps(
            {"input": str(data), key: value}), "--output-dir", str(tmp_path / "run")]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == f"offline-rl: error: {last}"
        assert {file: file.read_bytes() for file in files} == files
        assert sorted(tmp_path.iterdir()) == sorted([data, *tmp_path.glob("*.yaml")])


def test_a_bool_option_takes_only_a_bool():
    with pytest.raises(ConfigError, match=r"input_actions_normalized: must be True or False, "
                                          r"got 'false'"):
        BCConfig().environment("Pendulum-v1").offline_data(
            input_="/data", input_actions_normalized="false").validate()


def test_actions_recorded_normalized_are_unsquashed_onto_the_box():
    spaces = (gym.spaces.Box(-1, 1, (1,), np.float32),
              gym.spaces.Box(0.0, 10.0, (1,), np.float32))
    rows = pa.table({"obs": [[0.0], [0.0]], "new_obs": [[0.1], [0.1]], "actions": [[-1.0], [0.5]],
                     "rewards": [1.0, 1.0], "terminateds": [False, True]})
    config = BCConfig().offline_data(input_actions_normalized=True)
    actions = train_columns(OfflinePreLearner(config, spaces)(rows))["actions"]
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
