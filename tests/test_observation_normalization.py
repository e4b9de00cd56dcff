"""normalize_observations: statistics from the data, applied in the module everywhere it runs."""

from __future__ import annotations

import glob
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from offline_rl import BCConfig, DefaultModelConfig, OfflineData, RLModuleSpec
from offline_rl.algorithms.checkpoint import load_module, read_config
from offline_rl.data.pipeline.observation_statistics import combine_moments
from offline_rl.data.prelearner.module_weights import numpy_state
from offline_rl.errors import ConfigError
from offline_rl.formats.episode_input import decode_episode
from offline_rl.models.observation_normalizer import ObservationNormalizer

EPISODES = Path(__file__).parent / "fixtures" / "rllib_cartpole_episodes"
BOX = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)


def dataset_observations(path: Path) -> np.ndarray:
    return np.concatenate([np.stack(pq.read_table(file).column("obs").to_numpy(
        zero_copy_only=False)) for file in sorted(glob.glob(f"{path}/**/*.parquet",
                                                            recursive=True))])


def test_normalizer_standardizes_and_only_centres_constant_features():
    normalizer = ObservationNormalizer([1.0, 2.0, -1.0], [2.0, 0.5, 0.0])
    obs = torch.tensor([[3.0, 2.5, 4.0]])
    assert torch.equal(normalizer(obs), torch.tensor([[1.0, 1.0, 5.0]]))
    assert set(normalizer.state_dict()) == {"mean", "std"}


def test_combined_batch_moments_equal_the_whole_arrays():
    values = np.random.default_rng(0).normal(5.0, 3.0, (101, 3))
    parts = np.array_split(values, [7, 50, 51])
    statistics = combine_moments(np.array([len(part) for part in parts]),
                                 np.stack([part.mean(0) for part in parts]),
                                 np.stack([((part - part.mean(0)) ** 2).sum(0) for part in parts]))
    assert statistics.count == 101
    np.testing.assert_allclose(statistics.mean, values.mean(0), rtol=1e-12)
    np.testing.assert_allclose(statistics.std, values.std(0), rtol=1e-12)


def test_the_module_applies_the_statistics_to_raw_observations():
    mean, std = [0.5, -1.0, 0.0, 2.0], [2.0, 0.5, 1.0, 4.0]
    model_config = {"fcnet_hiddens": [8], "normalize_observations": True,
                    "observation_mean": mean, "observation_std": std}
    torch.manual_seed(0)
    normalized = RLModuleSpec(observation_space=BOX, action_space=gym.spaces.Discrete(2),
                              model_config=model_config).build()
    torch.manual_seed(0)
    plain = RLModuleSpec(observation_space=BOX, action_space=gym.spaces.Discrete(2),
                         model_config={"fcnet_hiddens": [8]}).build()
    obs = torch.tensor([[1.0, 2.0, 3.0, 4.0], [-1.0, 0.0, 1.0, 2.0]])
    expected = plain.forward_inference({"obs": (obs - torch.tensor(mean)) / torch.tensor(std)})
    assert torch.allclose(normalized.forward_inference({"obs": obs})["action_dist_inputs"],
                          expected["action_dist_inputs"])
    # The statistics travel with the weights the PreLearners and evaluation runners load.
    assert set(numpy_state(normalized)) - set(numpy_state(plain)) == {
        "obs_normalizer.mean", "obs_normalizer.std"}


@pytest.mark.parametrize(("model_config", "space", "message"), [
    ({"normalize_observations": True, "observation_mean": [0.0] * 4}, BOX,
     "observation_mean and observation_std go together"),
    ({"observation_mean": [0.0] * 4, "observation_std": [1.0] * 4}, BOX,
     "with normalize_observations=True"),
    ({"normalize_observations": True, "observation_mean": [0.0] * 3,
      "observation_std": [1.0] * 3}, BOX, "have 3/3 values; the observations have 4 features"),
    ({"normalize_observations": True}, gym.spaces.Discrete(5), "needs Box observations"),
])
def test_bad_normalization_settings_are_config_errors(model_config, space, message):
    with pytest.raises(ConfigError, match=message):
        RLModuleSpec(observation_space=space, action_space=gym.spaces.Discrete(2),
                     model_config=DefaultModelConfig.from_dict(model_config)).build()


def test_statistics_from_the_data_train_evaluate_and_restore(ray_session, bc_config,
                                                              cartpole_data, tmp_path):
    observations = dataset_observations(cartpole_data)
    config = bc_config.rl_module(model_config={"fcnet_hiddens": [32],
                                               "normalize_observations": True})
    with config.build() as algo:
        normalizer = algo.module.obs_normalizer
        np.testing.assert_allclose(normalizer.mean.numpy(), observations.mean(0), rtol=1e-5)
        np.testing.assert_allclose(normalizer.std.numpy(), observations.std(0), rtol=1e-5)
        algo.train()
        assert algo.evaluate()["env_runners"]["num_episodes"] == config.evaluation_duration
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
        trained = algo.module.state_dict()
    # What ``offline-rl evaluate`` plays: the statistics and weights the run trained with.
    module = load_module(checkpoint)
    assert all(torch.equal(module.state_dict()[name], value) for name, value in trained.items())
    # The run's config holds the statistics (the user's is left as given), so a restored
    # run reads them instead of computing them again.
    assert "observation_mean" not in config.model_config
    np.testing.assert_allclose(read_config(checkpoint).model_config["observation_mean"],
                               observations.mean(0), rtol=1e-5)


def test_episode_inputs_give_the_statistics_of_every_timestep(ray_session):
    observations = np.concatenate([
        decode_episode(item, "fixture").get_observations()[:-1]
        for file in sorted(EPISODES.rglob("*.parquet"))
        for item in pq.read_table(file).column("item").to_pylist()])
    config = (BCConfig().environment("CartPole-v1")
              .training(train_batch_size_per_learner=64)
              .offline_data(input_=str(EPISODES), input_read_episodes=True).debugging(seed=0))
    statistics = OfflineData(config.data_config((BOX, gym.spaces.Discrete(2))),
                             (BOX, gym.spaces.Discrete(2))).observation_statistics()
    assert statistics.count == len(observations)
    np.testing.assert_allclose(statistics.mean, observations.mean(0), rtol=1e-5)
    np.testing.assert_allclose(statistics.std, observations.std(0), rtol=1e-5)
