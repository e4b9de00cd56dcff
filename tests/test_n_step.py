"""n-step returns: sampled from whole episodes by the PreLearners, discounted in the TD targets."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from offline_rl import DiscreteCQLConfig, IQLConfig, OfflinePreLearner
from offline_rl.algorithms.td_target import td_target
from offline_rl.data.prelearner.call_output import train_columns
from offline_rl.errors import ConfigError

EPISODES = Path(__file__).parent / "fixtures" / "rllib_cartpole_episodes"
SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))


def test_the_target_discounts_by_the_steps_each_transition_spans():
    batch = {"rewards": torch.tensor([1.0, 2.0, 3.0]), "terminateds": torch.tensor([0, 0, 1]),
             "n_step": torch.tensor([3, 1, 2])}
    next_value = torch.tensor([8.0, 8.0, 8.0])
    assert torch.allclose(td_target(batch, next_value, gamma=0.5),
                          torch.tensor([1.0 + 0.125 * 8, 2.0 + 0.5 * 8, 3.0]))
    del batch["n_step"]
    assert torch.allclose(td_target(batch, next_value, gamma=0.5),
                          torch.tensor([1.0 + 0.5 * 8, 2.0 + 0.5 * 8, 3.0]))


@pytest.mark.parametrize(("n_step", "episodes", "message"), [
    (3, False, "n_step=3 needs whole episodes: read them with offline_data"),
    (0, True, "n_step: must be an int >= 1, got 0"),
])
def test_n_step_settings_are_checked(n_step, episodes, message):
    config = (IQLConfig().environment("CartPole-v1").training(n_step=n_step)
              .offline_data(input_="data", input_read_episodes=episodes))
    with pytest.raises(ConfigError, match=message):
        config.validate()


def test_prelearners_sample_n_step_transitions_of_the_episodes():
    config = (DiscreteCQLConfig().environment("CartPole-v1")
              .training(n_step=3, gamma=0.5, train_batch_size_per_learner=256)
              .offline_data(input_=str(EPISODES), input_read_episodes=True).debugging(seed=0))
    table = pq.read_table(sorted(EPISODES.rglob("*.parquet"))[0])
    batch = train_columns(OfflinePreLearner(config, SPACES)(table))
    steps = batch["n_step"]
    assert set(np.unique(steps)) <= {1, 2, 3} and (steps == 3).mean() > 0.5
    # CartPole pays 1 per step: an n-step reward is the discounted count of the steps.
    np.testing.assert_allclose(batch["rewards"], (1 - 0.5 ** steps) / (1 - 0.5))
    # Only transitions reaching their episode's end may end early, and then they are done.
    short = steps < 3
    assert (batch["terminateds"] | batch["truncateds"])[short].all()


@pytest.mark.timeout(240)
def test_iql_trains_on_n_step_transitions_through_the_pipeline(ray_session):
    config = (IQLConfig().environment("CartPole-v1")
              .training(n_step=3, train_batch_size_per_learner=128)
              .offline_data(input_=str(EPISODES), input_read_episodes=True,
                            dataset_num_iters_per_learner=5)
              .rl_module(model_config={"fcnet_hiddens": [32]}).debugging(seed=0))
    with config.build() as algo:
        learner = algo.train()["learners"]["default_policy"]
    assert np.isfinite(learner["critic_loss"]) and np.isfinite(learner["value_loss"])
