"""BC on msgpack episodes of every kind of space: shaped Box and MultiDiscrete observations and
actions in the default module, Dict/Tuple observations through ``FlattenObservations``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from connectors import FlattenObservations
from offline_rl import BCConfig, CQLConfig, SingleAgentEpisode
from offline_rl.codec import pack_episode_state
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.formats.composite import conform_structures, pack_values, unpack_value
from offline_rl.models.distributions import (
    TorchDiagGaussian,
    TorchMultiCategorical,
    TorchMultiDistribution,
)
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.torch_rl_module import DefaultTorchRLModule

MATRIX = gym.spaces.Box(0.0, 1.0, (2, 2), np.float32)
DICT = gym.spaces.Dict(a=gym.spaces.Discrete(4), b=MATRIX)
TUPLE = gym.spaces.Tuple([gym.spaces.Discrete(4), MATRIX])
NESTED_DICT = gym.spaces.Dict(a=gym.spaces.Discrete(4),
                              b=gym.spaces.Dict(c=MATRIX, d=gym.spaces.MultiDiscrete([2, 3])))
NESTED_TUPLE = gym.spaces.Tuple([gym.spaces.Discrete(4), gym.spaces.Tuple([MATRIX, DICT])])


def write_episodes(folder, observation_space, action_space, count=6, steps=3, seed=0):
    """Random episodes of the spaces, as one Parquet file of msgpack episode states."""
    observation_space.seed(seed)
    action_space.seed(seed + 1)
    packed = []
    for _ in range(count):
        episode = SingleAgentEpisode(observation_space=observation_space,
                                     action_space=action_space)
        episode.add_env_reset(observation_space.sample(), {})
        for t in range(steps):
            episode.add_env_step(observation_space.sample(), action_space.sample(), 1.0, {},
                                 terminated=t == steps - 1, truncated=False)
        packed.append(pack_episode_state(episode.get_state()))
    folder.mkdir()
    pq.write_table(pa.table({"item": pa.array(packed, pa.binary())}), folder / "part.parquet")
    return str(folder)


#: (observation space, action space, whether the observations need FlattenObservations).
CASES = {
    "discrete": (gym.spaces.Discrete(5), gym.spaces.Discrete(5), False),
    "box-scalar": (gym.spaces.Box(0.0, 1.0, ()), gym.spaces.Box(0.0, 1.0, ()), False),
    "box-matrix": (MATRIX, MATRIX, False),
    "box-matrix-flattened": (MATRIX, MATRIX, True),
    "multi-discrete": (gym.spaces.MultiDiscrete([2, 3]), gym.spaces.MultiDiscrete([2, 3]),
                       False),
    "dict": (DICT, MATRIX, True),
    "nested-dict": (NESTED_DICT, gym.spaces.Discrete(3), True),
    "tuple": (TUPLE, gym.spaces.MultiDiscrete([2, 3]), True),
    "nested-tuple": (NESTED_TUPLE, MATRIX, True),
    "dict-actions": (DICT, DICT, True),
    "nested-dict-actions": (NESTED_DICT, NESTED_DICT, True),
    "tuple-actions": (TUPLE, TUPLE, True),
    "nested-tuple-actions": (NESTED_TUPLE, NESTED_TUPLE, True),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_bc_trains_on_episodes_of_the_space(ray_session, tmp_path, case):
    observation_space, action_space, flatten = CASES[case]
    path = write_episodes(tmp_path / "episodes", observation_space, action_space)
    config = (BCConfig().environment(observation_space=observation_space,
                                     action_space=action_space)
              .offline_data(input_=[path], dataset_num_iters_per_learner=1,
                            input_read_episodes=True, input_read_batch_size=1)
              .learners(num_learners=0)
              .rl_module(model_config={"fcnet_hiddens": [8]}))
    if flatten:
        config.training(learner_connector=FlattenObservations)
    algo = config.build()
    try:
        loss = algo.train()["learners"]["default_policy"]["policy_loss"]
        module = algo.get_module()
    finally:
        algo.stop()
    assert np.isfinite(loss)
    flat = gym.spaces.Box(-np.inf, np.inf, (gym.spaces.flatdim(observation_space),), np.float32)
    assert module.observation_space == (flat if flatten else observation_space)


def test_module_spec_reads_the_flattened_observations():
    config = BCConfig().training(learner_connector=FlattenObservations)
    spec = config.get_rl_module_spec(NESTED_DICT, gym.spaces.Discrete(2))
    assert spec.observation_space == gym.spaces.Box(-np.inf, np.inf, (4 + 4 + 5,), np.float32)
    module = spec.build()
    assert module.forward_train({"obs": torch.zeros(3, 13)})["action_dist_inputs"].shape == (3, 2)


def test_flatten_observations_one_hot_and_keys_to_remove():
    episode = SingleAgentEpisode(
        observations=[{"a": 1, "b": np.full((2, 2), 0.5)}, {"a": 3, "b": np.zeros((2, 2))}],
        actions=[0], rewards=[0.0], len_lookback_buffer=0)
    batch = FlattenObservations(DICT)(rl_module=None, batch={}, episodes=[episode])
    assert batch["obs"][0].tolist() == [[0, 1, 0, 0, 0.5, 0.5, 0.5, 0.5]]
    assert batch["new_obs"][0].tolist() == [[0, 0, 0, 1, 0, 0, 0, 0]]
    kept = FlattenObservations(DICT, keys_to_remove=["b"])
    assert kept.observation_space.shape == (4,)
    assert kept(rl_module=None, batch={}, episodes=[episode])["obs"][0].tolist() == [[0, 1, 0, 0]]


def test_flatten_observations_refuses_what_it_cannot_do():
    with pytest.raises(ConfigError, match="keys_to_remove=\\['a'\\] needs a Dict"):
        FlattenObservations(TUPLE, keys_to_remove=["a"])
    with pytest.raises(ConfigError, match="as_learner_connector=False"):
        FlattenObservations(DICT, as_learner_connector=False)


@pytest.mark.parametrize(("value", "message"), [
    ({"a": 1}, r"keys \['a'\] differ from the space's \['a', 'b'\]"),
    ({"a": 4, "b": np.zeros((2, 2))}, r"part \['a'\]: value 4 is outside Discrete\(4\)"),
    ({"a": 1, "b": np.zeros(3)}, r"part \['b'\]: has shape \(3,\), but Box"),
    ({"a": "x", "b": np.zeros((2, 2))}, r"part \['a'\]: holds <U1 values"),
    ([1, np.zeros((2, 2))], "expected a dict of"),
])
def test_composite_values_are_checked_against_the_space(value, message):
    with pytest.raises(DataFormatError, match=message):
        conform_structures([value], DICT, "obs", "ep.parquet")


def test_tuple_read_back_as_a_list_is_a_tuple_again():
    [value] = conform_structures([[2, [[0.5, 0.5], [0.0, 1.0]]]], TUPLE, "obs", "ep")
    assert isinstance(value, tuple) and value[1].dtype == np.float32
    with pytest.raises(DataFormatError, match=r"timestep 0: 1 parts, but the space"):
        conform_structures([[2]], TUPLE, "obs", "ep")


def test_multi_categorical_sums_its_components_log_probabilities():
    space = gym.spaces.MultiDiscrete([2, 3], start=[1, 0])
    dist = TorchMultiCategorical.for_space(space).from_logits(torch.randn(4, 5))
    actions = torch.tensor([[1, 0], [2, 2], [1, 1], [2, 0]])
    first, second = (torch.distributions.Categorical(logits=logits)
                     for logits in dist.logits.split([2, 3], dim=-1))
    expected = first.log_prob(actions[:, 0] - 1) + second.log_prob(actions[:, 1])
    assert torch.allclose(dist.logp(actions), expected)
    assert all(space.contains(a.numpy()) for a in dist.sample())


@pytest.mark.parametrize("shape", [(), (2, 2)])
def test_gaussian_acts_in_the_box_shape(shape):
    space = gym.spaces.Box(-1.0, 1.0, shape, np.float32)
    module = DefaultTorchRLModule(space, space, DefaultModelConfig(fcnet_hiddens=[8]))
    obs = np.stack([space.sample() for _ in range(3)])
    assert module.compute_actions(obs).shape == (3, *shape)
    assert module.compute_actions(obs, explore=True).shape == (3, *shape)
    dist = module.get_train_action_dist_cls().from_logits(
        module.forward_train({"obs": torch.as_tensor(obs)})["action_dist_inputs"])
    assert isinstance(dist, TorchDiagGaussian)
    assert dist.logp(torch.as_tensor(obs)).shape == (3,)


def test_critics_refuse_actions_only_the_policy_reads():
    config = CQLConfig().rl_module(model_config={"fcnet_hiddens": [8]})
    spec = config.get_rl_module_spec(MATRIX, MATRIX)
    with pytest.raises(ConfigError, match="Box actions of shape \\(n,\\), got Box"):
        spec.build()


def test_composite_actions_pack_and_unpack():
    NESTED_TUPLE.seed(3)
    values = conform_structures([NESTED_TUPLE.sample() for _ in range(4)], NESTED_TUPLE,
                                "actions", "ep")
    packed = pack_values(values, NESTED_TUPLE)
    assert packed.shape == (4, 1 + 4 + 1 + 4)
    for value, row in zip(values, packed, strict=True):
        back = unpack_value(row, NESTED_TUPLE)
        assert NESTED_TUPLE.contains(back)
        assert np.array_equal(gym.spaces.flatten(NESTED_TUPLE, back),
                              gym.spaces.flatten(NESTED_TUPLE, value))


def test_composite_distribution_sums_its_parts_and_samples_in_the_space():
    module = DefaultTorchRLModule(MATRIX, NESTED_DICT, DefaultModelConfig(fcnet_hiddens=[8]))
    obs = torch.rand(5, 2, 2)
    inputs = module.forward_train({"obs": obs})["action_dist_inputs"]
    assert inputs.shape == (5, 4 + 2 * 4 + 5)
    dist = module.get_train_action_dist_cls().from_logits(inputs)
    assert isinstance(dist, TorchMultiDistribution)
    actions = dist.sample()
    assert actions.shape == (5, 1 + 4 + 2)
    assert dist.logp(actions).shape == dist.entropy().shape == (5,)
    expected = sum(part.logp(action) for part, action in zip(
        dist.parts, (actions[:, 0], actions[:, 1:5], actions[:, 5:]), strict=True))
    assert torch.allclose(dist.logp(actions), expected)
    greedy = module.compute_actions(obs.numpy())
    assert all(NESTED_DICT["a"].contains(int(row[0])) for row in greedy)


class StructuredEnv(gym.Env):
    """Three steps of Dict observations and nested-Dict actions; reward 1 when the action's
    ``a`` equals the observation's ``a``."""

    observation_space = DICT
    action_space = NESTED_DICT

    def __init__(self, config=None):
        self.t, self.target = 0, 0

    def _observation(self):
        return {"a": self.target, "b": np.full((2, 2), 0.5, np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.target = 0, int(self.np_random.integers(4))
        return self._observation(), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        reward = float(action["a"] == self.target)
        self.t += 1
        return self._observation(), reward, self.t == 3, False, {}


@pytest.mark.slow
def test_evaluation_flattens_the_envs_observations_and_unpacks_its_actions(ray_session,
                                                                          tmp_path):
    path = write_episodes(tmp_path / "episodes", DICT, NESTED_DICT)
    config = (BCConfig().environment(StructuredEnv)
              .offline_data(input_=[path], input_read_episodes=True, input_read_batch_size=1,
                            dataset_num_iters_per_learner=1)
              .training(learner_connector=FlattenObservations)
              .evaluation(evaluation_interval=1, evaluation_duration=4)
              .rl_module(model_config={"fcnet_hiddens": [8]}))
    algo = config.build()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["evaluation"]["env_runners"]["num_episodes"] == 4
    assert 0 <= result["evaluation"]["env_runners"]["episode_return_mean"] <= 3


def test_composite_observations_without_flattening_are_a_config_error():
    from connectors import AddObservationsFromEpisodesToBatch

    episode = SingleAgentEpisode(observations=[(1, np.zeros((2, 2))), (2, np.zeros((2, 2)))],
                                 actions=[0], rewards=[0.0], len_lookback_buffer=0)
    piece = AddObservationsFromEpisodesToBatch(TUPLE, as_learner_connector=True)
    with pytest.raises(ConfigError, match="add the FlattenObservations connector"):
        piece(rl_module=None, batch={}, episodes=[episode])
