"""What RLlib 2.60's ``rllib/examples/offline_rl`` scripts use beyond the offline API, with
their imports changed (``docs/rllib.md``, "RLlib's offline examples"): ``overrides()``,
``get_default_config()``, custom ``TorchRLModule``s built of ``MLPEncoderConfig`` and
``MLPHeadConfig``, checkpoint components loaded by RLlib's paths, and ``environment(
normalize_actions=, clip_actions=)``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from offline_rl import (
    BC,
    COMPONENT_LEARNER,
    COMPONENT_LEARNER_GROUP,
    COMPONENT_RL_MODULE,
    CQL,
    Algorithm,
    AlgorithmConfig,
    BCConfig,
    Columns,
    CQLConfig,
    MLPEncoderConfig,
    MLPHeadConfig,
    RLModule,
    RLModuleSpec,
)
from offline_rl.algorithms.checkpoint import ALGORITHM_STATE_FILE, COMPONENT_PATH, component_of
from offline_rl.errors import ConfigError
from offline_rl.evaluation.action_wrappers import ActionsFromModule, ModuleActionsEnv
from tests.custom_modules import MyBCModel

SPACES = {"observation_space": gym.spaces.Box(-5, 5, (4,), np.float32),
          "action_space": gym.spaces.Discrete(2)}
MODULE_PATH = f"{COMPONENT_LEARNER_GROUP}/{COMPONENT_LEARNER}/{COMPONENT_RL_MODULE}"


def test_overrides_returns_the_options_and_names_unknown_ones():
    assert BCConfig.overrides(explore=False, input_="data/held-out") == {
        "explore": False, "input_": "data/held-out"}
    with pytest.raises(ConfigError, match=r"BCConfig.overrides\(\): \['evaluation_lr'\] are "
                                          r"not options of BCConfig"):
        BCConfig.overrides(explore=False, evaluation_lr=1e-3)


def test_an_evaluation_config_of_overrides_is_taken():
    with pytest.warns(UserWarning, match="explore=False has no effect"):
        config = BCConfig().evaluation(evaluation_config=BCConfig.overrides(explore=False))
    assert config.sections.evaluation.evaluation_config == {}


def test_get_default_config_is_the_algorithms_config():
    assert type(BC.get_default_config()) is BCConfig
    assert type(CQL.get_default_config()) is CQLConfig
    assert type(Algorithm.get_default_config()) is AlgorithmConfig
    assert type(BCConfig().algo_class.get_default_config()) is BCConfig


def test_a_torch_rl_module_subclass_acts_from_its_forward_methods():
    module = RLModuleSpec(module_class=MyBCModel, **SPACES).build()
    assert isinstance(module, RLModule) and isinstance(module, torch.nn.Module)
    assert module.observation_space == SPACES["observation_space"]
    obs = np.zeros((3, 4))  # float64, as numpy makes them
    assert module.compute_actions(obs).shape == (3,)
    assert module.compute_actions(obs, explore=True).shape == (3,)
    module.train()
    module.forward_inference({Columns.OBS: torch.zeros(1, 4)})
    assert module.training  # eval mode only while acting
    assert module.forward_train({Columns.OBS: torch.zeros(2, 4)})[
        Columns.ACTION_DIST_INPUTS].requires_grad


def test_an_rl_module_without_a_distribution_for_its_actions_says_so():
    module = RLModuleSpec(module_class=MyBCModel, observation_space=SPACES["observation_space"],
                          action_space=gym.spaces.MultiBinary(3)).build()
    with pytest.raises(ConfigError, match="MyBCModel has no action distribution for the "
                                          "action space MultiBinary"):
        module.get_train_action_dist_cls()


def test_mlp_configs_build_rllibs_layers():
    head = MLPHeadConfig(input_dims=[3], hidden_layer_dims=[8], hidden_layer_use_layernorm=True,
                         output_layer_dim=4, output_layer_weights_initializer=torch.nn.init.zeros_,
                         output_layer_bias_initializer="ones_").build(framework="torch")
    assert head(torch.randn(5, 3)).tolist() == [[1.0] * 4] * 5
    assert any(isinstance(layer, torch.nn.LayerNorm) for layer in head.modules())
    clipped = MLPHeadConfig(input_dims=[2], hidden_layer_dims=[], output_layer_dim=2,
                            output_layer_bias_initializer="constant_",
                            output_layer_bias_initializer_config={"val": 50.0},
                            clip_log_std=True, log_std_clip_param=3.0).build()
    assert clipped(torch.zeros(1, 2)).tolist() == [[50.0, 3.0]]
    assert MLPEncoderConfig(input_dims=[4], hidden_layer_dims=[16, 6]).output_dims == (6,)


@pytest.mark.parametrize(("config", "match"), [
    (MLPHeadConfig(input_dims=[4]), r"build\(framework='tf2'\): offline-rl builds torch"),
    (MLPHeadConfig(input_dims=None), r"input_dims=None: give the input's size"),
    (MLPHeadConfig(input_dims=[4], hidden_layer_dims=[]), "give output_layer_dim or at least"),
    (MLPHeadConfig(input_dims=[4], hidden_layer_activation="gelu2"),
     "hidden_layer_activation='gelu2': use one of"),
    (MLPHeadConfig(input_dims=[4], hidden_layer_weights_initializer="glorot"),
     "'glorot' is not an in-place torch.nn.init function"),
])
def test_mlp_configs_name_what_they_cannot_build(config, match):
    with pytest.raises(ConfigError, match=match):
        config.build(framework="tf2" if "tf2" in match else "torch")


@pytest.fixture(scope="module")
def trained_checkpoint(ray_session, cartpole_data, tmp_path_factory):
    """A checkpoint of BC with ``MyBCModel``, after a few updates; its module's weights."""
    config = (BCConfig().environment("CartPole-v1")
              .training(lr=1e-2, train_batch_size_per_learner=256)
              .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=5)
              .rl_module(rl_module_spec=RLModuleSpec(module_class=MyBCModel))
              .debugging(seed=0))
    path = tmp_path_factory.mktemp("checkpoints") / "bc"
    with pytest.warns(UserWarning, match="has no config.yaml"), config.build() as algo:
        algo.train()
        algo.save_to_path(path)
        weights = {name: value.clone() for name, value in algo.module.state_dict().items()}
    return config, path, weights


def same_weights(module, weights) -> bool:
    return all(torch.equal(value, weights[name]) for name, value in module.state_dict().items())


def test_restore_from_path_loads_a_component_by_rllibs_path(trained_checkpoint):
    config, path, weights = trained_checkpoint
    with config.copy().debugging(seed=1).build() as algo:
        assert not same_weights(algo.module, weights)
        algo.restore_from_path(path / MODULE_PATH, component=MODULE_PATH)
        assert same_weights(algo.module, weights) and algo.iteration == 0
        with pytest.raises(ConfigError, match=rf"{path / MODULE_PATH} is the checkpoint's "
                                              rf"{MODULE_PATH}, not its learner_group"):
            algo.restore_from_path(path / MODULE_PATH, component=COMPONENT_LEARNER_GROUP)


def test_a_module_spec_starts_from_the_state_at_load_state_path(trained_checkpoint):
    config, path, weights = trained_checkpoint
    spec = RLModuleSpec(module_class=MyBCModel, load_state_path=path / MODULE_PATH)
    with config.copy().debugging(seed=1).rl_module(rl_module_spec=spec).build() as algo:
        assert same_weights(algo.module, weights)
        assert algo.evaluate()["env_runners"]["num_episodes"] >= 1


def test_rllibs_component_paths_name_the_checkpoint_they_are_in(tmp_path):
    (tmp_path / ALGORITHM_STATE_FILE).write_text("{}")
    assert component_of(tmp_path) == (tmp_path, None)
    for depth in (1, 2, 3, 4):
        named = "/".join(COMPONENT_PATH[:depth])
        assert component_of(tmp_path / named) == (tmp_path, named)
    assert component_of(tmp_path / "rl_module") == (tmp_path / "rl_module", None)


def test_a_load_state_path_of_another_component_is_refused(trained_checkpoint):
    config, path, _ = trained_checkpoint
    spec = RLModuleSpec(module_class=MyBCModel, load_state_path=path / COMPONENT_LEARNER_GROUP)
    with pytest.raises(ConfigError, match=r"is the checkpoint's learner_group; give the "
                                          r"checkpoint folder or its learner_group/learner/"
                                          r"rl_module"):
        config.copy().rl_module(rl_module_spec=spec).build()


def test_normalized_actions_are_unsquashed_and_clipped_in_the_env():
    env = ModuleActionsEnv("Pendulum-v1", normalize_actions=True, clip_actions=True)({})
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    env.reset(seed=0)
    for action, torque in ((0.5, 1.0), (-3.0, -2.0), (1.0, 2.0)):
        env.step(np.array([action], np.float32))
        assert float(env.unwrapped.last_u) == torque
    clipped = ModuleActionsEnv("Pendulum-v1", normalize_actions=False, clip_actions=True)({})
    assert clipped.action_space == gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    clipped.reset(seed=0)
    clipped.step(np.array([5.0], np.float32))
    assert float(clipped.unwrapped.last_u) == 2.0
    assert not isinstance(ModuleActionsEnv("CartPole-v1", True, True)({}), ActionsFromModule)


def test_normalize_actions_gives_the_module_a_normalized_box():
    given = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    config = BCConfig().environment("Pendulum-v1", normalize_actions=True)
    assert config.input_spaces()[1] == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    config.environment(observation_space=SPACES["observation_space"], action_space=given)
    assert config.given_module_spaces()[1] == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert BCConfig().environment("Pendulum-v1").input_spaces()[1] == given
    with pytest.raises(ConfigError, match="normalize_actions: must be True or False, got 1"):
        BCConfig().environment("Pendulum-v1", normalize_actions=1).validate()


@pytest.fixture(scope="module")
def rllib_pendulum_data(ray_session, tmp_path_factory):
    """Two Pendulum episodes RLlib recorded: its actions normalized to [-1, 1]."""
    from tests.rllib_experts import record_expert

    return record_expert("Pendulum-v1", tmp_path_factory.mktemp("rllib") / "pendulum", 2)


def test_rllibs_normalized_actions_train_a_module_that_acts_in_the_env(rllib_pendulum_data):
    config = (BCConfig().environment("Pendulum-v1", normalize_actions=True)
              .training(train_batch_size_per_learner=200)
              .offline_data(input_=str(rllib_pendulum_data), dataset_num_iters_per_learner=2,
                            input_action_bounds="raise")
              .evaluation(evaluation_duration=1)
              .rl_module(model_config={"fcnet_hiddens": [16]}))
    with config.build() as algo:
        assert algo.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        result = algo.train()
        evaluation = algo.evaluate()["env_runners"]
    assert result["data"]["actions_out_of_bounds"] == 0
    assert evaluation["num_episodes"] == 1 and evaluation["episode_len_mean"] == 200


def test_is_multi_agent_says_whether_the_config_trains_several_modules():
    assert not BCConfig().is_multi_agent
    assert BCConfig().multi_agent(policies={"a", "b"}).is_multi_agent
