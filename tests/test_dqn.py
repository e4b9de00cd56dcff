"""DQN from logged data: its target and loss on hand-made tensors, its options, its policies
(greedy, SoftQ, epsilon-greedy), learning CartPole from random play, off-policy estimation
and checkpoints."""

from __future__ import annotations

import re
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from offline_rl import DQNConfig
from offline_rl.algorithms.checkpoint import load_module
from offline_rl.algorithms.dqn.dqn_learner import next_state_values
from offline_rl.datasets import make_dataset
from offline_rl.errors import ConfigError
from offline_rl.evaluation.off_policy.target_policy import TargetPolicy
from offline_rl.models.dqn_module import DQNTorchRLModule, dueling_q_values

pytestmark = pytest.mark.timeout(240)

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
CARTPOLE_SPACES = {"observation_space": gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
                   "action_space": gym.spaces.Discrete(2)}
SOFTQ = {"type": "SoftQ", "temperature": 0.5}


def dqn_learner(**training):
    """A learner of a small DQN (one hidden layer of 16) for 3-feature observations and 3
    actions."""
    config = (DQNConfig().training(**training).rl_module(model_config={"fcnet_hiddens": [16]})
              .debugging(seed=0))
    spec = config.get_rl_module_spec(BOX, gym.spaces.Discrete(3))
    return config.get_default_learner_class()(config.learner_config(spec))


def small_batch() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"obs": rng.uniform(-1, 1, (4, 3)).astype(np.float32),
            "new_obs": rng.uniform(-1, 1, (4, 3)).astype(np.float32),
            "actions": np.array([0, 2, 1, 2]), "rewards": np.array([1.0, 0.5, 0, 2], np.float32),
            "terminateds": np.array([False, True, False, False])}


def test_double_q_values_the_online_networks_choice_with_the_target_network():
    target_q = torch.tensor([[1.0, 5.0, 3.0], [2.0, 0.0, 4.0]])
    online_q = torch.tensor([[9.0, 0.0, 0.0], [0.0, 7.0, 1.0]])
    assert next_state_values(target_q, online_q).tolist() == [1.0, 0.0]
    assert next_state_values(target_q).tolist() == [5.0, 4.0]  # without double Q: the max


def test_dueling_q_values_are_the_value_plus_the_advantages_less_their_mean():
    q = dueling_q_values(torch.tensor([[10.0], [0.0]]), torch.tensor([[1.0, 2.0, 6.0],
                                                                       [-1.0, 1.0, 0.0]]))
    assert q.tolist() == [[8.0, 9.0, 13.0], [-1.0, 1.0, 0.0]]


def test_the_dueling_module_combines_its_heads_and_the_plain_one_has_none():
    module = dqn_learner().module
    obs = torch.as_tensor(small_batch()["obs"])
    with torch.no_grad():
        features = module.encoder(obs)
        advantages = module.pi(features)
        expected = module.value(features) + advantages - advantages.mean(1, keepdim=True)
        torch.testing.assert_close(module.q_values(obs), expected)
    assert dqn_learner(dueling=False).module.value is None


@pytest.mark.parametrize("double_q, loss, n_step", [(True, "huber", None), (False, "mse", None),
                                                    (True, "mse", [1, 3, 2, 1])])
def test_td_loss_is_the_error_against_the_double_q_or_max_target(double_q, loss, n_step):
    learner = dqn_learner(double_q=double_q, td_error_loss_fn=loss, gamma=0.9)
    batch = small_batch()
    discount = 0.9
    if n_step:  # n-step transitions discount the next value by gamma ** n
        batch["n_step"] = np.array(n_step)
        discount = 0.9 ** torch.tensor(n_step, dtype=torch.float32)
    module, t = learner.module, {name: torch.as_tensor(value) for name, value in batch.items()}
    with torch.no_grad():
        taken = module.q_values(t["obs"])[torch.arange(4), t["actions"]]
        target_q = module.q_values(t["new_obs"], target=True)
        chooser = module.q_values(t["new_obs"]) if double_q else target_q
        next_q = target_q[torch.arange(4), chooser.argmax(1)]
        target = t["rewards"] + discount * (1 - t["terminateds"].float()) * next_q
        errors = taken - target
        expected = (errors.pow(2) if loss == "mse" else torch.where(
            errors.abs() <= 1, 0.5 * errors.pow(2), errors.abs() - 0.5)).mean()
    metrics = learner.update(batch)
    assert metrics["td_loss"] == pytest.approx(expected.item(), rel=1e-5)
    assert metrics["mean_td_error"] == pytest.approx(errors.abs().mean().item(), rel=1e-5)


def test_the_target_network_moves_tau_each_time_the_trained_rows_pass_the_frequency():
    # 4 rows per update, every 10 rows: after updates 3 (12 rows), 5 (20) and 8 (32).
    learner = dqn_learner(train_batch_size_per_learner=4, target_network_update_freq=10,
                          tau=0.5)
    module, batch = learner.module, small_batch()
    moved = []
    for _ in range(8):
        before = module.pi_target[0].weight.clone(), module.value_target[0].weight.clone()
        learner.update(batch)
        if not torch.equal(before[0], module.pi_target[0].weight):
            moved.append(learner.num_updates)
            for target, online, old in ((module.pi_target, module.pi, before[0]),
                                        (module.value_target, module.value, before[1])):
                torch.testing.assert_close(target[0].weight, (old + online[0].weight) / 2)
        else:
            assert torch.equal(before[1], module.value_target[0].weight)
    assert moved == [3, 5, 8]


@pytest.mark.parametrize("training, message", [
    ({"td_error_loss_fn": "l1"}, "td_error_loss_fn: must be one of ('huber', 'mse'), got 'l1'"),
    ({"tau": 0.0}, "tau: must be a finite number in (0, 1], got 0.0"),
    ({"target_network_update_freq": 0},
     "target_network_update_freq: must be an int >= 1, got 0"),
    ({"double_q": "yes"}, "double_q: must be True or False, got 'yes'"),
    ({"explore": 1}, "explore: must be True or False, got 1"),
    ({"exploration_config": {"type": "Random"}},
     "exploration_config: must be {} (greedy), {'type': 'SoftQ', 'temperature': T > 0} or "
     "{'type': 'EpsilonGreedy', 'final_epsilon': epsilon in [0, 1)}, got {'type': 'Random'}"),
    ({"exploration_config": {"type": "SoftQ", "temperature": 0}},
     "exploration_config: SoftQ temperature must be a finite number > 0, got 0"),
    ({"exploration_config": {"type": "SoftQ", "epsilon": 0.1}},
     "exploration_config: SoftQ takes ['temperature'], not ['epsilon']"),
    ({"exploration_config": {"type": "EpsilonGreedy", "final_epsilon": 1.0}},
     "exploration_config: EpsilonGreedy final_epsilon must be a finite number in [0, 1), "
     "got 1.0"),
    ({"exploration_config": {"type": "EpsilonGreedy", "initial_epsilon": 1.0,
                             "epsilon_timesteps": 10000}},
     "exploration_config: has RLlib's epsilon schedule ['initial_epsilon', "
     "'epsilon_timesteps'], which advances with the env steps sampled; offline-rl's policies "
     "act with one epsilon: give only final_epsilon"),
])
def test_bad_options_are_named_with_what_they_must_be(training, message):
    with pytest.raises(ConfigError, match=f"invalid DQNConfig:\n  {re.escape(message)}"):
        (DQNConfig().environment(**CARTPOLE_SPACES).training(**training)
         .offline_data(input_="data").validate())


def test_options_it_cannot_honour_offline_are_unknown_and_continuous_actions_refused():
    with pytest.raises(TypeError, match="num_atoms"):
        DQNConfig().training(num_atoms=51)
    with pytest.raises(ConfigError, match="unknown key"):
        DQNConfig.from_dict({"algorithm": "DQN", "training": {"noisy": True}})
    with pytest.raises(ConfigError, match=r"DQN needs Discrete actions.*use CQLConfig"):
        DQNConfig().get_rl_module_spec(BOX, BOX)


def test_softq_logp_is_the_log_softmax_of_q_over_the_temperature_and_greedy_is_argmax():
    module = dqn_learner(exploration_config=SOFTQ).module
    obs = torch.as_tensor(small_batch()["obs"])
    logits = module.forward_inference({"obs": obs})["action_dist_inputs"]
    dist = module.get_inference_action_dist_cls().from_logits(logits)
    with torch.no_grad():
        q = module.q_values(obs)
    for action in range(3):
        torch.testing.assert_close(dist.logp(torch.full((4,), action)),
                                   torch.log_softmax(q / 0.5, dim=1)[:, action])
    np.testing.assert_array_equal(module.compute_actions(obs.numpy(), explore=False),
                                  q.argmax(1).numpy())
    torch.manual_seed(0)
    sampled = module.compute_actions(np.repeat(obs[:1].numpy(), 2000, axis=0))  # explores
    frequencies = np.bincount(sampled, minlength=3) / 2000
    np.testing.assert_allclose(frequencies, torch.softmax(q[0] / 0.5, 0).numpy(), atol=0.04)


def test_epsilon_greedy_and_greedy_policies_give_their_probabilities_to_estimators():
    obs = small_batch()["obs"]
    epsilon = dqn_learner(exploration_config={"type": "EpsilonGreedy", "final_epsilon": 0.3})
    greedy = dqn_learner()
    for learner, chosen, other in ((epsilon, 0.8, 0.1), (greedy, 1.0, 0.0)):
        with torch.no_grad():
            best = learner.module.q_values(torch.as_tensor(obs)).argmax(1).numpy()
        probabilities = TargetPolicy(learner.module).all_probabilities(obs)
        expected = np.full((4, 3), other)
        expected[np.arange(4), best] = chosen
        np.testing.assert_allclose(probabilities, expected, atol=1e-6)
        np.testing.assert_array_equal(learner.module.compute_actions(obs, explore=False), best)
    assert isinstance(greedy.module, DQNTorchRLModule)


@pytest.fixture(scope="module")
def cartpole_random(tmp_path_factory) -> Path:
    """300 episodes of uniformly random CartPole play (~6.6k steps, mean return ~22): every
    action is tried in the states visited, and episodes end by falling, which is what DQN
    learns from. (The session's expert data never falls: its rewards are all 1 and its
    episodes all truncated, so they cannot tell one action's value from the other's.)"""
    path = tmp_path_factory.mktemp("datasets") / "cartpole-random"
    make_dataset("CartPole-v1", path, tier="random", episodes=300, seed=0, progress=False)
    return path


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_dqn_learns_cartpole_from_random_play_and_checkpoints_its_policy(
        ray_session, tmp_path, cartpole_random):
    config = (DQNConfig().environment("CartPole-v1")
              .offline_data(input_=str(cartpole_random), dataset_num_iters_per_learner=250)
              .rl_module(model_config={"fcnet_hiddens": [64, 64], "fcnet_activation": "relu"})
              .evaluation(evaluation_duration=10).debugging(seed=0))
    started = time.perf_counter()
    with config.build() as algo:
        for _ in range(6):  # 1500 updates of 256 rows (seeds 0-4 of the bare learner: 205 to 332)
            algo.train()
        returned = algo.evaluate()["env_runners"]["episode_return_mean"]
        seconds = time.perf_counter() - started
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
        obs = np.random.default_rng(0).normal(scale=0.1, size=(32, 4)).astype(np.float32)
        actions = algo.module.compute_actions(obs)
    print(f"DQN on random CartPole play: return {returned} after 1500 updates, {seconds:.1f} s")
    assert returned > 150, returned  # the data's own policy returns about 22
    np.testing.assert_array_equal(load_module(checkpoint).compute_actions(obs), actions)


@pytest.mark.timeout(300)
def test_off_policy_estimators_judge_a_softq_dqn_and_its_checkpoint_keeps_the_policy(
        ray_session, tmp_path, cartpole_data):
    methods = {"is": {"type": "ImportanceSampling"},
               "wis": {"type": "WeightedImportanceSampling"}}
    config = (DQNConfig().environment(**CARTPOLE_SPACES)
              .training(exploration_config=SOFTQ)
              .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=5)
              .rl_module(model_config={"fcnet_hiddens": [32]})
              .evaluation(evaluation_interval=1, off_policy_estimation_methods=methods,
                          evaluation_config={"input_": str(cartpole_data)})
              .debugging(seed=0))
    obs = np.random.default_rng(0).normal(scale=0.1, size=(8, 4)).astype(np.float32)
    with config.build() as algo:
        estimates = algo.train()["evaluation"]["off_policy_estimation"]
        probabilities = TargetPolicy(algo.module).all_probabilities(obs)
        with torch.no_grad():
            q = algo.module.q_values(torch.as_tensor(obs))
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
    np.testing.assert_allclose(probabilities, torch.softmax(q / 0.5, 1).numpy(), rtol=1e-5)
    restored = load_module(checkpoint)  # the same dueling network and SoftQ policy
    np.testing.assert_allclose(TargetPolicy(restored).all_probabilities(obs), probabilities)
    for name in methods:
        assert np.isfinite(estimates[name]["v_target"]) and estimates[name]["v_target"] > 0
        assert estimates[name]["v_behavior"] == pytest.approx(estimates["is"]["v_behavior"])
