"""Off-policy estimators against values computed by hand and in closed form."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from offline_rl import AlgorithmConfig, BCConfig
from offline_rl.algorithms.checkpoint import CONFIG_FILE, _write_config, read_config
from offline_rl.algorithms.off_policy_evaluation import estimator_class
from offline_rl.datasets import make_dataset
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.evaluation.off_policy import (
    ESTIMATE_KEYS,
    DirectMethod,
    DoublyRobust,
    ImportanceSampling,
    WeightedImportanceSampling,
)
from offline_rl.models.model_config import DefaultModelConfig
from offline_rl.models.torch_rl_module import DefaultTorchRLModule

#: The target policy of the two-state tests: ``TARGET[s][a]`` = pi(a | s).
TARGET = np.array([[0.2, 0.8], [0.6, 0.4]])
S0, S1 = [1.0, 0.0], [0.0, 1.0]


def tabular_policy(probabilities: np.ndarray) -> DefaultTorchRLModule:
    """A linear module over one-hot states whose action probabilities are ``probabilities``."""
    states, actions = probabilities.shape
    module = DefaultTorchRLModule(gym.spaces.Box(0, 1, (states,), np.float32),
                                  gym.spaces.Discrete(actions),
                                  DefaultModelConfig(fcnet_hiddens=[]))
    with torch.no_grad():
        module.pi[0].weight.copy_(torch.as_tensor(np.log(probabilities).T))
        module.pi[0].bias.zero_()
    return module


def two_episodes() -> dict[str, list]:
    """A: (s0, a=1, r=1), (s1, a=0, r=2), terminated; B: (s0, a=0, r=0), terminated; both
    logged by a uniform policy."""
    return {"eps_id": ["A", "A", "B"], "t": [0, 1, 0], "obs": [S0, S1, S0],
            "actions": [1, 0, 0], "rewards": [1.0, 2.0, 0.0], "new_obs": [S1, S0, S1],
            "terminateds": [False, True, True], "action_logp": [np.log(0.5)] * 3}


def test_importance_sampling_and_its_weighted_form_match_hand_computed_values():
    # Ratios: A 0.8/0.5 = 1.6 then 0.6/0.5 = 1.2 (cumulative 1.92); B 0.2/0.5 = 0.4.
    # IS: A = 1.6 * 1 + 0.9 * 1.92 * 2 = 5.056, B = 0; returns A = 1 + 0.9 * 2 = 2.8, B = 0.
    estimate = ImportanceSampling(tabular_policy(TARGET), gamma=0.9).estimate(two_episodes())
    assert estimate == pytest.approx({"v_behavior": 1.4, "v_behavior_std": 1.4,
                                      "v_target": 2.528, "v_target_std": 2.528,
                                      "v_gain": 2.528 / 1.4, "v_delta": 1.128})
    # WIS: mean cumulative ratio at t=0 (1.6 + 0.4) / 2 = 1.0, at t=1 (1.92 + 0.4) / 2 = 1.16
    # (B, ended, keeps its weight): A = 1.6 / 1.0 * 1 + 0.9 * 1.92 / 1.16 * 2, B = 0.
    weighted = WeightedImportanceSampling(tabular_policy(TARGET), gamma=0.9)
    assert weighted.estimate(two_episodes())["v_target"] == pytest.approx(
        (1.6 + 0.9 * 1.92 / 1.16 * 2) / 2)


def test_episodes_and_their_steps_give_the_same_estimate():
    episode = SingleAgentEpisode(observations=[S0, S1, S0], actions=[1, 0], rewards=[1.0, 2.0],
                                 terminated=True, len_lookback_buffer=0,
                                 extra_model_outputs={"action_prob": [0.5, 0.5]})
    steps = {name: values[:2] for name, values in two_episodes().items()}
    estimator = ImportanceSampling(tabular_policy(TARGET), gamma=0.9)
    assert estimator.estimate([episode]) == pytest.approx(estimator.estimate(steps))


def test_data_without_behaviour_probabilities_says_how_to_record_them():
    steps = two_episodes()
    del steps["action_logp"]
    with pytest.raises(DataFormatError, match=r"the logged steps has neither 'action_logp' "
                                              r"nor 'action_prob'.*record the data with"):
        ImportanceSampling(tabular_policy(TARGET)).estimate(steps)
    steps["action_prob"] = [0.5, 0.0, 0.5]
    with pytest.raises(DataFormatError, match=r"episode 'A': step 1 has behaviour probability "
                                              r"0.0"):
        ImportanceSampling(tabular_policy(TARGET)).estimate(steps)


def chain_episodes(count: int, seed: int) -> dict[str, np.ndarray]:
    """s0 -(a)-> s1 -(a)-> end, rewards r0 = [0, 1] and r1 = [2, 0], uniform behaviour."""
    rng = np.random.default_rng(seed)
    first, second = rng.integers(2, size=count), rng.integers(2, size=count)
    return {"eps_id": np.repeat(np.arange(count), 2), "t": np.tile([0, 1], count),
            "obs": np.tile([S0, S1], (count, 1)),
            "actions": np.stack([first, second], 1).reshape(-1),
            "rewards": np.stack([first * 1.0, (second == 0) * 2.0], 1).reshape(-1),
            "new_obs": np.tile([S1, S0], (count, 1)),
            "terminateds": np.tile([False, True], count),
            "action_prob": np.full(2 * count, 0.5)}


def test_direct_method_and_doubly_robust_find_the_closed_form_value_of_a_chain():
    # V(s1) = 0.6 * 2 + 0.4 * 0 = 1.2; V(s0) = 0.2 * 0 + 0.8 * 1 + 0.9 * V(s1) = 1.88.
    data = chain_episodes(200, seed=0)
    config = {"n_iters": 200, "fcnet_hiddens": [16], "lr": 1e-2, "polyak_coef": 0.5}
    for kind in (DirectMethod, DoublyRobust):
        estimator = kind(tabular_policy(TARGET), gamma=0.9, q_model_config=config)
        assert estimator.train(data)["loss"] < 1e-3
        estimate = estimator.estimate(data)
        assert estimate["v_target"] == pytest.approx(1.88, abs=0.02), kind
        assert estimate["v_behavior"] == pytest.approx(np.mean(
            data["rewards"][0::2] + 0.9 * data["rewards"][1::2]))
    # With an exact model every doubly robust episode value is V(s0): no variance left.
    assert estimate["v_target_std"] < 0.05


def test_on_bandit_data_the_q_model_is_a_reward_model():
    rng = np.random.default_rng(1)
    contexts, actions = rng.integers(2, size=400), rng.integers(2, size=400)
    rewards = np.array([[0.0, 1.0], [3.0, 0.0]])[contexts, actions]
    obs = np.eye(2)[contexts]
    bandit = {"eps_id": np.arange(400), "obs": obs, "actions": actions, "rewards": rewards,
              "new_obs": obs, "terminateds": np.ones(400, bool),
              "action_prob": np.full(400, 0.5)}
    estimator = DirectMethod(tabular_policy(TARGET), q_model_config={
        "n_iters": 100, "fcnet_hiddens": [16], "lr": 1e-2})
    estimator.train(bandit)
    q = estimator.model.q_values(np.eye(2)[[0, 0, 1, 1]], np.array([0, 1, 0, 1]))
    np.testing.assert_allclose(q, [0.0, 1.0, 3.0, 0.0], atol=0.02)
    # pi(1|s0) * 1 + pi(0|s1) * 3, averaged over the logged contexts.
    truth = np.mean(np.where(contexts == 0, 0.8 * 1.0, 0.6 * 3.0))
    assert estimator.estimate(bandit)["v_target"] == pytest.approx(truth, abs=0.02)


def test_settings_the_estimators_cannot_use_are_refused():
    pendulum_like = DefaultTorchRLModule(gym.spaces.Box(-1, 1, (3,), np.float32),
                                         gym.spaces.Box(-2, 2, (1,), np.float32),
                                         DefaultModelConfig(fcnet_hiddens=[8]))
    with pytest.raises(ConfigError, match=r"epsilon_greedy=0.1 needs Discrete actions"):
        ImportanceSampling(pendulum_like, epsilon_greedy=0.1)
    with pytest.raises(ConfigError, match=r"q_model_config has unknown keys \['hidden'\]; "
                                          r"known: \['fcnet_hiddens'"):
        DoublyRobust(pendulum_like, q_model_config={"hidden": [8]})
    with pytest.raises(ConfigError, match=r"call estimator.train\(data\) before"):
        DirectMethod(tabular_policy(TARGET)).estimate(two_episodes())


#: CartPole policies of the accuracy test: P(push right) = sigmoid(beta * obs @ CARTPOLE_W).
CARTPOLE_W = np.array([0.0, 0.3, 1.0, 0.5])


def cartpole_runs(beta: float, episodes: int, seed: int, gamma: float, max_steps: int = 500
                  ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Discounted returns of ``episodes`` CartPole episodes of the sigmoid policy ``beta``, and
    their steps with the policy's ``action_logp``."""
    env, rng = gym.make("CartPole-v1"), np.random.default_rng(seed)
    returns, steps = [], []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed * episodes + episode)
        discounted, done, t = 0.0, False, 0
        while not done and t < max_steps:
            right = 1 / (1 + np.exp(-beta * obs @ CARTPOLE_W))
            action = int(rng.random() < right)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            steps.append((episode, t, obs, action, reward, next_obs, terminated,
                          np.log(right if action else 1 - right)))
            discounted += gamma ** t * reward
            obs, done, t = next_obs, terminated or truncated, t + 1
        returns.append(discounted)
    env.close()
    names = ["eps_id", "t", "obs", "actions", "rewards", "new_obs", "terminateds",
             "action_logp"]
    return np.array(returns), {name: np.array(column)
                               for name, column in zip(names, zip(*steps), strict=True)}


def sigmoid_policy(beta: float) -> DefaultTorchRLModule:
    """``cartpole_runs``' policy ``beta`` as a linear module."""
    module = DefaultTorchRLModule(gym.spaces.Box(-5, 5, (4,), np.float32), gym.spaces.Discrete(2),
                                  DefaultModelConfig(fcnet_hiddens=[]))
    with torch.no_grad():
        module.pi[0].weight.copy_(torch.as_tensor(np.stack([np.zeros(4), beta * CARTPOLE_W])))
        module.pi[0].bias.zero_()
    return module


@pytest.mark.slow
def test_doubly_robust_and_weighted_importance_sampling_come_within_10_percent_on_cartpole():
    gamma = 0.95
    _, logged = cartpole_runs(beta=1.0, episodes=200, seed=1, gamma=gamma)
    # The truth: Monte-Carlo returns of the target policy (gamma ** 200 < 1e-4 of a step).
    truth = cartpole_runs(beta=3.0, episodes=500, seed=2, gamma=gamma, max_steps=200)[0].mean()
    target = sigmoid_policy(3.0)
    errors = {}
    for estimator in (ImportanceSampling(target, gamma=gamma),
                      WeightedImportanceSampling(target, gamma=gamma),
                      DirectMethod(target, gamma=gamma), DoublyRobust(target, gamma=gamma)):
        estimator.train(logged)
        estimate = estimator.estimate(logged)
        errors[type(estimator).__name__] = abs(estimate["v_target"] - truth) / truth
    # The logging policy is worth over 15 % less: the estimators must see the difference.
    assert abs(estimate["v_behavior"] - truth) / truth > 0.15, (estimate, truth)
    assert errors["DoublyRobust"] < 0.1 and errors["WeightedImportanceSampling"] < 0.1, errors


CARTPOLE_SPACES = {"observation_space": gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
                   "action_space": gym.spaces.Discrete(2)}
METHODS = {"is": {"type": ImportanceSampling},
           "wis": {"type": "WeightedImportanceSampling", "gamma": 0.95},
           "dr": {"type": DoublyRobust, "q_model_config": {"n_iters": 2}}}


def held_out_config(train_data, held_out: dict) -> BCConfig:
    """BC without an env, estimating on ``held_out`` (``evaluation_config``) every iteration."""
    return (BCConfig().environment(**CARTPOLE_SPACES)
            .offline_data(input_=str(train_data), dataset_num_iters_per_learner=2)
            .evaluation(evaluation_interval=1, off_policy_estimation_methods=METHODS,
                        evaluation_config=held_out).debugging(seed=0))


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_a_config_estimates_on_held_out_tabular_or_episode_data_without_an_env(
        ray_session, tmp_path, cartpole_data):
    for name, write_episodes in (("rows", False), ("episodes", True)):
        make_dataset("CartPole-v1", tmp_path / name, tier="medium", episodes=12, seed=7,
                     write_episodes=write_episodes, progress=False)
    steps = pq.read_table(next((tmp_path / "rows").rglob("*.parquet"))).to_pandas()
    returns = [(0.99 ** episode["t"] * episode["rewards"]).sum()
               for _, episode in steps.groupby("eps_id")]
    with held_out_config(cartpole_data, {"input_": str(tmp_path / "rows")}).build() as algo:
        untrained = algo.evaluate()["off_policy_estimation"]
        trained = algo.train()["evaluation"]["off_policy_estimation"]
    assert sorted(trained) == ["dr", "is", "wis"]
    assert set(ESTIMATE_KEYS) <= set(trained["dr"]) and trained["dr"]["loss"] >= 0
    assert trained["is"]["v_behavior"] == pytest.approx(np.mean(returns))
    assert trained["is"]["v_target"] != untrained["is"]["v_target"]  # the current module
    episodes_config = held_out_config(cartpole_data, {"input_": str(tmp_path / "episodes"),
                                                      "input_read_episodes": True})
    with episodes_config.build() as algo:
        from_episodes = algo.evaluate()["off_policy_estimation"]
    for name, estimate in untrained.items():
        assert from_episodes[name] == pytest.approx(estimate), name


@pytest.mark.timeout(300)
def test_held_out_data_without_probabilities_fails_the_build_naming_it(ray_session, tmp_path,
                                                                       cartpole_data):
    make_dataset("CartPole-v1", tmp_path / "logged", tier="medium", episodes=3, seed=7,
                 progress=False)
    (tmp_path / "bare").mkdir()
    for file in (tmp_path / "logged").rglob("*.parquet"):
        pq.write_table(pq.read_table(file).drop_columns(["action_logp"]),
                       tmp_path / "bare" / file.name)
    bare = str(tmp_path / "bare")
    with pytest.raises(DataFormatError, match=rf"evaluation_config input_ '{bare}': the logged "
                                              r"steps has neither 'action_logp' nor "
                                              r"'action_prob'"):
        held_out_config(cartpole_data, {"input_": bare}).build()


def test_estimation_settings_are_checked_and_survive_yaml(tmp_path, cartpole_data):
    config = held_out_config(cartpole_data, {})
    with pytest.raises(ConfigError, match=r"evaluation_config: off_policy_estimation_methods "
                                          r"estimate on held-out data: set evaluation_config="):
        config.validate()
    with pytest.raises(ConfigError, match=r"unknown config key 'inputs'"):
        config.evaluation(evaluation_config={"inputs": "x"})
    with pytest.raises(ConfigError, match=r"type 'Magic' is no estimator; use one of "
                                          r"\['DirectMethod'"):
        estimator_class("m", "Magic")
    config.evaluation(evaluation_config={"input_": "held-out"}).to_yaml(tmp_path / "c.yaml")
    methods = AlgorithmConfig.from_yaml(tmp_path / "c.yaml").off_policy_estimation_methods
    assert {name: estimator_class(name, spec["type"]) for name, spec in methods.items()} == {
        "is": ImportanceSampling, "wis": WeightedImportanceSampling, "dr": DoublyRobust}


def test_held_out_data_credentials_stay_out_of_checkpoints(tmp_path, cartpole_data):
    config = held_out_config(cartpole_data, {
        "input_": "s3://bucket/held-out", "input_filesystem": "s3",
        "input_filesystem_kwargs": {"secret_key": "S3CRET", "endpoint_override": "http://x"}})
    _write_config(config, tmp_path / CONFIG_FILE)
    saved = (tmp_path / CONFIG_FILE).read_text()
    assert "S3CRET" not in saved
    assert saved.startswith("# Credentials are never saved: evaluation_config"
                            "['input_filesystem_kwargs']['secret_key']")
    with pytest.warns(UserWarning, match=r"holds no evaluation_config\['input_filesystem_kwargs'"
                                         r"\] \['secret_key'\]"):
        restored = read_config(tmp_path)
    assert restored.evaluation_config["input_filesystem_kwargs"] == {
        "endpoint_override": "http://x"}
