"""RLlib 2.60's offline API as its own tests and examples use it: ``OfflineData(config)`` without
spaces, ``api_stack()``, RLlib's ``OfflinePreLearner`` constructor, both forms of its map
functions, its flattened output, the learners' state in RLlib's form, and every keyword of
RLlib's ``offline_data()`` (the real RLlib is read for the list)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import ray.data

from offline_rl import (
    COMPONENT_RL_MODULE,
    DEFAULT_POLICY_ID,
    INPUT_ENV_SPACES,
    SCHEMA,
    AlgorithmConfig,
    BCConfig,
    Columns,
    OfflineData,
    OfflinePreLearner,
    SingleAgentEpisode,
    unflatten_dict,
)
from offline_rl.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures"
TABULAR = "local://" + str(FIXTURES / "rllib_cartpole_tabular" / "cartpoleenv")
SAMPLE_BATCHES = "local://" + str(FIXTURES / "rllib_cartpole_sample_batch_json")
ENV = gym.make("CartPole-v1")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "rllib.md"


def spaces_config(**offline_data) -> BCConfig:
    """RLlib's tests' config: BC with the env's spaces and no env."""
    return (BCConfig()
            .environment(observation_space=ENV.observation_space, action_space=ENV.action_space)
            .api_stack(enable_rl_module_and_learner=True,
                       enable_env_runner_and_connector_v2=True)
            .training(train_batch_size_per_learner=64)
            .offline_data(dataset_num_iters_per_learner=1, **offline_data))


@pytest.fixture(scope="module")
def rows(ray_session) -> dict[str, np.ndarray]:
    """Ten rows of RLlib's tabular recording, as RLlib's tests take them."""
    return ray.data.read_parquet(TABULAR).take_batch(batch_size=10)


@pytest.mark.slow
def test_offline_data_takes_the_config_alone(ray_session):
    bare = OfflineData(AlgorithmConfig().offline_data(input_=[TABULAR]))
    assert "obs" in bare.data.take_batch(batch_size=1)
    assert bare.spaces[INPUT_ENV_SPACES] == (None, None) and bare.path == [TABULAR]
    with pytest.raises(ConfigError, match=r"without the data's spaces: set "
                                          r"config.environment\(env=\.\.\.\)"):
        bare.sample()
    from_env = OfflineData(BCConfig().environment("CartPole-v1").offline_data(input_=TABULAR))
    assert from_env.spaces[INPUT_ENV_SPACES] == (ENV.observation_space, ENV.action_space)
    assert from_env.iter_batches_kwargs["prefetch_batches"] == 2
    assert from_env.module_spec.rl_module_specs[DEFAULT_POLICY_ID].action_space == ENV.action_space


def test_api_stack_keeps_the_new_stack_and_refuses_the_old():
    config = BCConfig()
    assert config.api_stack(enable_rl_module_and_learner=True,
                            enable_env_runner_and_connector_v2=True) is config
    with pytest.raises(ConfigError, match=r"api_stack\(enable_env_runner_and_connector_v2=False\)"
                                          r": offline-rl has RLlib's new API stack only"):
        config.api_stack(enable_env_runner_and_connector_v2=False)


def test_map_functions_in_both_of_rllibs_forms(rows):
    static = OfflinePreLearner._map_to_episodes(False, rows)["episodes"]
    keywords = OfflinePreLearner._map_to_episodes(is_multi_agent=False, batch=rows,
                                                  schema=SCHEMA)["episodes"]
    prelearner = OfflinePreLearner(config=spaces_config(input_=[TABULAR]))
    method = prelearner._map_to_episodes(rows)["episodes"]
    for episodes in (static, keywords, method):
        assert len(episodes) == 10 and isinstance(episodes[0], SingleAgentEpisode)
    np.testing.assert_array_equal(method[3].get_observations()[-1], rows["new_obs"][3])
    ignoring = OfflinePreLearner(config=spaces_config(input_=[TABULAR],
                                                      ignore_final_observation=True))
    assert all(not episode.get_observations()[-1].any()
               for episode in ignoring._map_to_episodes(rows)["episodes"])
    assert not ignoring(rows)["default_policy/new_obs"].any()
    lines = ray.data.read_json(SAMPLE_BATCHES).take_batch(batch_size=2)
    assert len(prelearner._map_sample_batch_to_episode(lines)["episodes"]) == len(
        OfflinePreLearner._map_sample_batch_to_episode(False, lines)["episodes"]) > 0
    with pytest.raises(ConfigError, match="single-agent data; got is_multi_agent=True"):
        prelearner._map_to_episodes(rows, is_multi_agent=True)


class BatchFirstPreLearner(OfflinePreLearner):
    """Ray 2.60's form of the override: a method taking the batch, reading ``self.config``."""

    def _map_to_episodes(self, batch, to_numpy=False, **kwargs):
        doubled = {**batch, Columns.REWARDS: np.full(len(batch[Columns.REWARDS]), 2.0)}
        return super()._map_to_episodes(doubled, **kwargs)


def test_an_override_in_ray_260s_form_maps_the_rows(rows):
    batch = unflatten_dict(BatchFirstPreLearner(config=spaces_config(input_=[TABULAR]))(rows))
    assert batch[DEFAULT_POLICY_ID][Columns.REWARDS].tolist() == [2.0] * 10


@pytest.mark.slow
def test_prelearner_built_as_rllibs_tests_build_it(ray_session):
    config = spaces_config(input_=[SAMPLE_BATCHES], input_read_method="read_json",
                           input_read_sample_batches=True, input_read_batch_size=50)
    algo = config.build(env="CartPole-v1")  # RLlib's argument: on a copy of the config
    assert config.env is None and algo.config.env == "CartPole-v1"
    try:
        state = algo.offline_data.learner_handles[0].get_state(
            component=COMPONENT_RL_MODULE)[COMPONENT_RL_MODULE]
        assert set(state) == {DEFAULT_POLICY_ID}
        prelearner = OfflinePreLearner(config=config, module_spec=algo.offline_data.module_spec,
                                       module_state=state,
                                       spaces=algo.offline_data.spaces[INPUT_ENV_SPACES])
        batch = unflatten_dict(prelearner(algo.offline_data.data.take_batch(10)))
        columns = batch[DEFAULT_POLICY_ID]
        assert len(columns[Columns.REWARDS]) % 64 == 0 and len(columns[Columns.REWARDS]) >= 64
        for key in (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.TERMINATEDS,
                    Columns.TRUNCATEDS, "n_step"):
            assert len(columns[key]) == len(columns[Columns.REWARDS])
        assert algo.train()["training_iteration"] == 1
        with pytest.raises(ConfigError, match=r"unknown component\(s\) \['optimizer'\]"):
            algo.offline_data.learner_handles[0].get_state(components=["optimizer"])
    finally:
        algo.stop()


def test_every_keyword_of_rllibs_offline_data_is_one_here_and_documented():
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig as RLlibConfig

    theirs = set(inspect.signature(RLlibConfig.offline_data).parameters) - {"self"}
    ours = set(inspect.signature(AlgorithmConfig.offline_data).parameters)
    assert theirs <= ours, sorted(theirs - ours)
    docs = DOCS.read_text()
    assert not [name for name in theirs if f"`{name}`" not in docs]


def test_rllibs_other_offline_data_keywords():
    config = BCConfig().offline_data(actions_in_input_normalized=True, shuffle_buffer_size=2,
                                     offline_sampling=True, output_write_remaining_data=True)
    options = config.sections.offline_data
    assert options.input_actions_normalized
    assert options.iter_batches_kwargs["local_shuffle_buffer_size"] == (
        2 * config.train_batch_size_per_learner)
    with pytest.raises(ConfigError, match="postprocess_inputs=True is not supported"):
        BCConfig().offline_data(postprocess_inputs=True)
    with pytest.raises(ConfigError, match="old-stack key actions_in_input_normalized .* must be "
                                          "True or False, got 'yes'"):
        BCConfig().offline_data(actions_in_input_normalized="yes")
    problems = dict(BCConfig().offline_data(prelearner_use_recorded_module_states=True)
                    .sections.offline_data.problems())
    assert "offline-rl's modules are stateless" in problems[
        "prelearner_use_recorded_module_states"]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_ray_shutdown_without_stopping_the_algorithm_leaves_the_process_alive(tmp_path):
    # RLlib's tests end with ray.shutdown() and never stop the algorithm, whose data stream is
    # still building its dataset: Ray calls from that thread during the shutdown ended the
    # process ("The core worker has already been shutdown").
    script = tmp_path / "no_stop.py"
    script.write_text(textwrap.dedent(f"""
        import time, ray, gymnasium as gym
        from offline_rl import BCConfig
        ray.init(num_cpus=2, include_dashboard=False)
        env = gym.make("CartPole-v1")
        algo = (BCConfig()
                .environment(observation_space=env.observation_space,
                             action_space=env.action_space)
                .training(train_batch_size_per_learner=64)
                .offline_data(input_=[{TABULAR!r}], dataset_num_iters_per_learner=1)).build()
        ray.shutdown()
        time.sleep(5)
        print("alive after shutdown:", not ray.is_initialized())
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=150, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "alive after shutdown: True" in result.stdout
    assert "core worker has already been shutdown" not in result.stderr


@pytest.mark.parametrize("config_class", ["BCConfig", "MARWILConfig", "CQLConfig", "IQLConfig"])
def test_every_learner_gives_its_module_state_in_rllibs_form(config_class):
    import offline_rl

    box = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    spaces = (ENV.observation_space, box if config_class in ("CQLConfig", "IQLConfig")
              else ENV.action_space)
    config = getattr(offline_rl, config_class)()
    learner_config = config.learner_config(config.get_rl_module_spec(*spaces))
    learner = learner_config.learner_class(learner_config, learner_config.module_spec)
    state = learner.get_state(component=COMPONENT_RL_MODULE)[COMPONENT_RL_MODULE]
    assert set(state) == {DEFAULT_POLICY_ID}
    assert set(state[DEFAULT_POLICY_ID]) == set(learner.module.state_dict())
    assert {"module", "optimizers"} <= set(learner.get_state())


def test_rllibs_result_names_and_the_learners_loss_keys():
    from ray.rllib.core import ALL_MODULES as RLLIB_ALL_MODULES
    from ray.rllib.core.learner.learner import POLICY_LOSS_KEY as RLLIB_POLICY_LOSS_KEY
    from ray.rllib.core.learner.learner import VF_LOSS_KEY as RLLIB_VF_LOSS_KEY
    from ray.rllib.utils.metrics import LEARNER_RESULTS as RLLIB_LEARNER_RESULTS

    from offline_rl import ALL_MODULES, LEARNER_RESULTS, POLICY_LOSS_KEY, VF_LOSS_KEY, MARWILConfig

    assert (LEARNER_RESULTS, ALL_MODULES, POLICY_LOSS_KEY, VF_LOSS_KEY) == (
        RLLIB_LEARNER_RESULTS, RLLIB_ALL_MODULES, RLLIB_POLICY_LOSS_KEY, RLLIB_VF_LOSS_KEY)
    config = MARWILConfig().training(lr=2e-3).rl_module(model_config={"fcnet_hiddens": [8]})
    learner_config = config.learner_config(config.get_rl_module_spec(
        ENV.observation_space, ENV.action_space))
    learner = learner_config.learner_class(learner_config, learner_config.module_spec)
    batch = {"obs": np.zeros((4, 4), np.float32), "actions": np.array([0, 1, 0, 1]),
             "value_targets": np.ones(4, np.float32)}
    metrics = learner.update(batch)
    assert {POLICY_LOSS_KEY, VF_LOSS_KEY} <= set(metrics)
    # RLlib reports each optimizer's current rate, the one default optimizer's by this name.
    assert metrics["default_optimizer_learning_rate"] == 2e-3


def test_rllibs_total_train_batch_size_and_framework_forms():
    config = BCConfig().learners(num_learners=4).training(train_batch_size=2000)
    assert config.train_batch_size_per_learner == 500  # divided among the learners
    assert BCConfig().training(train_batch_size=32).train_batch_size_per_learner == 32
    both = BCConfig().training(train_batch_size=2000, train_batch_size_per_learner=64)
    assert both.train_batch_size_per_learner == 64  # the per-learner form wins, as in RLlib
    with pytest.raises(ConfigError, match=r"train_batch_size=2\): must be an int >= 4, the "
                                          r"rows of one update over the 4 learner\(s\)"):
        BCConfig().learners(num_learners=4).training(train_batch_size=2)
    with pytest.raises(ConfigError, match=r"train_batch_size='64'\): must be an int"):
        BCConfig().training(train_batch_size="64")
    assert BCConfig().framework(None).framework("torch").to_dict() == BCConfig().to_dict()


def test_cqls_sac_options_are_accepted_and_checked():
    from offline_rl import CQLConfig

    config = CQLConfig().training(train_batch_size=256, clip_actions=True, twin_q=True,
                                  num_steps_sampled_before_learning_starts=0, bc_iters=0)
    assert (config.clip_actions, config.num_steps_sampled_before_learning_starts) == (True, 0)
    assert config.sections.environment.clip_actions is True  # one setting, as in RLlib
    problems = dict(CQLConfig().training(clip_actions="no",
                                         num_steps_sampled_before_learning_starts=-1).problems())
    assert problems["clip_actions"] == "must be True or False, got 'no'"
    assert problems["num_steps_sampled_before_learning_starts"].startswith("must be an int >= 0")


def test_the_default_module_spec_is_built_once_given_the_spaces():
    import torch

    from offline_rl import DefaultModelConfig, MARWILConfig

    config = MARWILConfig().environment("CartPole-v1").rl_module(
        model_config=DefaultModelConfig(fcnet_hiddens=[16], fcnet_activation="tanh"))
    spec = config.get_default_rl_module_spec()
    assert spec.observation_space is None and spec.model_config.fcnet_hiddens == [16]
    spec.observation_space, spec.action_space = ENV.observation_space, ENV.action_space
    module = spec.build()
    assert module.compute_values({Columns.OBS: torch.zeros(3, 4)}).shape == (3,)


def test_a_prelearner_runs_its_modules_pieces_with_the_module_state_given(rows):
    # MARWIL's pipeline runs the module (values for the advantages): RLlib's tests build its
    # PreLearner alone with the learner's module state.
    from offline_rl import MARWILConfig

    config = (MARWILConfig()
              .environment(observation_space=ENV.observation_space, action_space=ENV.action_space)
              .training(train_batch_size_per_learner=64)
              .offline_data(input_=[TABULAR], dataset_num_iters_per_learner=1))
    learner_config = config.learner_config(config.get_rl_module_spec(
        ENV.observation_space, ENV.action_space))
    learner = learner_config.learner_class(learner_config, learner_config.module_spec)
    state = learner.get_state(component=COMPONENT_RL_MODULE)[COMPONENT_RL_MODULE]
    batch = unflatten_dict(OfflinePreLearner(config=config, module_state=state)(rows))
    columns = batch[DEFAULT_POLICY_ID]
    assert len(columns[Columns.VALUE_TARGETS]) == len(columns[Columns.OBS]) > 0
    with pytest.raises(ConfigError, match="nor module_state"):
        OfflinePreLearner(config=config)
    with pytest.raises(ConfigError, match="module_state does not fit the module"):
        OfflinePreLearner(config=config, module_state={DEFAULT_POLICY_ID: {"w": np.zeros(2)}})
