"""Learning-rate schedules: RLlib's [[timestep, lr], ...] format, per optimizer, in the learner."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from offline_rl import AlgorithmConfig, BCConfig, IQLConfig
from offline_rl.core.schedules import cosine_schedule, learning_rate_at
from offline_rl.errors import ConfigError
from offline_rl.settings.learning_rates import learning_rate_problem

OBS = gym.spaces.Box(-1, 1, (2,), np.float32)
BATCH = {"obs": np.array([[0.1, 0.2], [0.3, -0.4], [-0.5, 0.6], [0.7, 0.8]], np.float32),
         "actions": np.array([0, 1, 0, 1]), "rewards": np.ones(4, np.float32),
         "new_obs": np.zeros((4, 2), np.float32), "terminateds": np.zeros(4, bool)}


def learner_of(config: AlgorithmConfig):
    config = config.rl_module(model_config={"fcnet_hiddens": [8]})
    spec = config.get_rl_module_spec(OBS, gym.spaces.Discrete(2))
    return config.get_default_learner_class()(config.learner_config(spec))


def test_piecewise_linear_values_and_the_constant_tail():
    schedule = [[0, 1e-2], [400, 2e-3], [1200, 0.0]]
    assert [learning_rate_at(schedule, t) for t in (0, 200, 400, 800, 1200, 10**9)] == \
        pytest.approx([1e-2, 6e-3, 2e-3, 1e-3, 0.0, 0.0])


@pytest.mark.parametrize(("value", "message"), [
    (0.0, "must be a finite number > 0, got 0.0"),
    ([[10, 1e-3]], "must start at timestep 0"),
    ([[0, 1e-3], [5, 1e-4], [5, 1e-5]], "timesteps must ascend"),
    ([[0, 1e-3], [5, -1e-4]], "must be >= 0 and start > 0"),
    ([[0, 1e-3, 7]], "list of \\[timestep, learning_rate\\] pairs"),
    ([[0, "fast"]], "are finite numbers"),
    (float("nan"), "must be a finite number > 0, got nan"),
    (float("inf"), "must be a finite number > 0, got inf"),
    ([[0, 1e-3], [100, float("nan")]], "are finite numbers"),
])
def test_bad_schedules_are_named(value, message):
    assert learning_rate_problem(value) is not None
    with pytest.raises(ConfigError, match=f"lr: .*{message}"):
        BCConfig().environment("CartPole-v1").offline_data(input_="data").training(
            lr=value).validate()


def test_the_learner_follows_the_schedule_in_rows_trained_and_stops_at_zero():
    learner = learner_of(BCConfig().training(lr=[[0, 1e-2], [8, 0.0]],
                                             train_batch_size_per_learner=4))
    used, reported = [], []
    for _ in range(3):
        # As RLlib, each update reports the rate for the next step, at the rows trained so far.
        reported.append(learner.update(BATCH)["default_optimizer_learning_rate"])
        used.append(learner.optimizers["default"].param_groups[0]["lr"])
    assert used == pytest.approx([1e-2, 5e-3, 0.0])
    assert reported == pytest.approx([5e-3, 0.0, 0.0])
    before = [p.detach().clone() for p in learner.module.parameters()]
    learner.update(BATCH)
    assert all(torch.equal(a, b) for a, b in zip(before, learner.module.parameters()))
    # A restored learner (num_updates set from the checkpoint) picks the schedule up there.
    resumed = learner_of(BCConfig().training(lr=[[0, 1e-2], [8, 0.0]],
                                             train_batch_size_per_learner=4))
    resumed.num_updates = 1
    assert resumed.update(BATCH)["default_optimizer_learning_rate"] == 0.0
    assert resumed.optimizers["default"].param_groups[0]["lr"] == pytest.approx(5e-3)


def test_each_optimizer_has_its_own_schedule():
    config = IQLConfig().training(actor_lr=[[0, 3e-4], [40, 0.0]], critic_lr=1e-3,
                                  train_batch_size_per_learner=4)
    learner = learner_of(config)
    metrics = [learner.update(BATCH) for _ in range(2)]
    assert [m["policy_learning_rate"] for m in metrics] == pytest.approx([2.7e-4, 2.4e-4])
    assert [m["critic_learning_rate"] for m in metrics] == pytest.approx([1e-3, 1e-3])
    assert learner.optimizers["critic"].param_groups[0]["lr"] == 1e-3
    assert learner.optimizers["policy"].param_groups[0]["lr"] == pytest.approx(2.7e-4)


def test_a_schedule_survives_the_config_round_trip():
    config = IQLConfig().training(actor_lr=[[0, 3e-4], [10_000, 1e-5]])
    assert IQLConfig.from_dict(config.to_dict()).actor_lr == [[0, 3e-4], [10_000, 1e-5]]


def test_the_cosine_schedule_follows_torchs_cosine_annealing_to_zero():
    updates, batch_size = 100, 4
    learner = learner_of(IQLConfig().training(
        actor_lr=cosine_schedule(3e-4, updates * batch_size),
        train_batch_size_per_learner=batch_size))
    ours = [learner.update(BATCH)["policy_learning_rate"] for _ in range(updates + 1)]
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=3e-4)
    annealing = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=updates)
    torchs = []
    for _ in range(updates + 2):
        torchs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        annealing.step()
    assert ours == pytest.approx(torchs[1:], abs=1e-3 * 3e-4)  # each the next step's rate
    assert ours[-1] == 0.0
