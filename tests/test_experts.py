"""Behaviour policies of the reference datasets: return bands, determinism, exact log-probs."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

from offline_rl.datasets.experts import (
    ACTION_SPACES,
    EXPECTED_RETURNS,
    EXPERTS,
    FLAWS,
    TIERS,
    EpsilonGreedy,
    Flaw,
    GaussianNoise,
    behaviour_policy,
    cartpole_expert,
)
from offline_rl.errors import ConfigError

DISCRETE = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0")


def rollout(env_id: str, tier: str, seed: int, episodes: int, max_steps: int | None = None
            ) -> tuple[list[float], list[tuple], list[str | None]]:
    """Episode returns, per-step (obs, action, logp, dist_inputs), and the mixture's choices."""
    env = gym.make(env_id, max_episode_steps=max_steps)
    policy = behaviour_policy(env_id, tier, seed)
    returns, steps, choices = [], [], []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        policy.start_episode()
        choices.append(getattr(policy, "current", None))
        done, episode_return = False, 0.0
        while not done:
            action, logp, dist_inputs = policy(obs)
            steps.append((obs, action, logp, dist_inputs))
            obs, reward, terminated, truncated, _ = env.step(action)
            episode_return += float(reward)
            done = terminated or truncated
        returns.append(episode_return)
    env.close()
    return returns, steps, choices


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("env_id", sorted(EXPERTS))
def test_mean_return_in_expected_band(env_id, tier):
    returns, _, _ = rollout(env_id, tier, seed=0, episodes=20)
    low, high = EXPECTED_RETURNS[env_id][tier]
    assert low <= np.mean(returns) <= high


def test_bands_order_the_tiers():
    for env_id, bands in EXPECTED_RETURNS.items():
        assert set(bands) == set(TIERS), env_id
        assert bands["random"][1] < bands["medium"][0], env_id
        assert bands["medium"][1] < bands["expert"][0], env_id
    assert EXPECTED_RETURNS["CartPole-v1"]["expert"][0] >= 475


@pytest.mark.parametrize("env_id", sorted(EXPERTS))
def test_action_spaces_match_the_envs(env_id):
    assert ACTION_SPACES[env_id] == gym.make(env_id).action_space


@pytest.mark.parametrize("env_id", sorted(EXPERTS))
def test_same_seed_same_actions_and_logps(env_id):
    def record(seed):
        _, steps, choices = rollout(env_id, "mixed", seed, episodes=4, max_steps=50)
        return choices, [(np.asarray(a), logp, d) for _, a, logp, d in steps]

    choices, first = record(3)
    again_choices, again = record(3)
    assert choices == again_choices
    for (a, logp, d), (a2, logp2, d2) in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, a2)
        assert logp == logp2
        np.testing.assert_array_equal(d, d2)
    _, other = record(4)
    assert any(not np.array_equal(a, a2) for (a, _, _), (a2, _, _) in zip(first, other))


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("env_id", DISCRETE)
def test_discrete_logps_are_a_distribution_and_match_the_action(env_id, tier):
    _, steps, _ = rollout(env_id, tier, seed=1, episodes=3, max_steps=100)
    n = ACTION_SPACES[env_id].n
    for _, action, logp, dist_inputs in steps:
        assert isinstance(action, int) and 0 <= action < n
        assert dist_inputs.dtype == np.float32 and dist_inputs.shape == (n,)
        assert math.isclose(float(np.exp(dist_inputs.astype(np.float64)).sum()), 1.0,
                            rel_tol=1e-6)
        assert logp == float(dist_inputs[action])


def test_epsilon_greedy_frequencies_match_its_probabilities():
    policy = EpsilonGreedy(lambda obs: 2, num_actions=3, epsilon=0.3, seed=0)
    actions = [policy(np.zeros(1)) for _ in range(6000)]
    counts = np.bincount([a for a, _, _ in actions], minlength=3) / len(actions)
    np.testing.assert_allclose(counts, [0.1, 0.1, 0.8], atol=0.02)
    np.testing.assert_allclose(np.exp(actions[0][2]), [0.1, 0.1, 0.8], rtol=1e-6)


def test_epsilon_zero_is_exact_and_silent():
    policy = EpsilonGreedy(cartpole_expert, num_actions=2, epsilon=0.0, seed=0)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        action, logp, dist_inputs = policy(np.array([0.0, 0.0, 0.1, 0.0]))
    assert (action, logp) == (1, 0.0)
    assert dist_inputs.tolist() == [-math.inf, 0.0]


@pytest.mark.parametrize("tier", ("random", "medium", "expert"))
def test_gaussian_logp_is_the_density_of_the_unclipped_sample(tier):
    _, steps, _ = rollout("Pendulum-v1", tier, seed=2, episodes=2, max_steps=100)
    overshoots = []  # how far beyond the bound the unclipped samples lay
    for _, action, logp, dist_inputs in steps:
        assert action.dtype == np.float32 and action.shape == (1,)
        assert dist_inputs.dtype == np.float32 and dist_inputs.shape == (2,)
        assert -2.0 <= action[0] <= 2.0
        mean, log_std = (float(x) for x in dist_inputs)
        normal = torch.distributions.Normal(mean, math.exp(log_std))
        if abs(action[0]) < 2.0:
            expected = normal.log_prob(torch.tensor(float(action[0]), dtype=torch.float64))
            assert logp == pytest.approx(float(expected), abs=1e-4)
        else:  # the sample, as far from the mean as its density says, lay beyond the bound
            distance = math.exp(log_std) * math.sqrt(max(
                -2.0 * (logp + log_std + 0.5 * math.log(2 * math.pi)), 0.0))
            overshoots.append(abs(mean + math.copysign(distance, action[0])) - 2.0)
            assert overshoots[-1] >= -1e-4
    if overshoots:  # not the density of the clipped action, which would put them on the bound
        assert np.mean(overshoots) > 0.1 * math.exp(log_std)
    if tier == "random":
        assert len(overshoots) > 10
        assert {tuple(d) for *_, d in steps} == {(0.0, np.float32(math.log(2.0)))}


def test_mixed_tier_mixes_per_episode():
    returns, steps, choices = rollout("CartPole-v1", "mixed", seed=0, episodes=30)
    assert set(choices) == {"random", "medium", "expert"}
    starts = np.cumsum([0, *np.array(returns, dtype=int)])
    for choice, start, end in zip(choices, starts, starts[1:]):
        probs = np.exp(np.stack([d for *_, d in steps[start:end]]))
        if choice == "random":
            np.testing.assert_allclose(probs, 0.5, rtol=1e-6)
            continue
        np.testing.assert_allclose(probs.max(axis=1), 0.975, rtol=1e-6)
        experts = np.array([cartpole_expert(obs) for obs, *_ in steps[start:end]])
        assert (probs.argmax(axis=1) != experts).any() == (choice == "medium")


@pytest.mark.parametrize("env_id", DISCRETE)
def test_discrete_medium_tiers_make_their_flaw_the_most_likely_action(env_id):
    _, steps, _ = rollout(env_id, "medium", seed=0, episodes=3)
    flaw, expert = FLAWS[env_id], EXPERTS[env_id]
    flawed = 0
    for obs, _, _, dist_inputs in steps:
        greedy = expert(obs)
        applies = flaw.applies(greedy, obs)
        flawed += applies
        assert int(np.argmax(dist_inputs)) == (flaw.replacement if applies else greedy)
    assert flawed > 10


def test_a_flaw_moves_its_share_to_the_replacement_where_it_applies():
    flaw = Flaw(action=2, replacement=0, probability=0.5, where=lambda obs: obs[0] > 0)
    policy = EpsilonGreedy(lambda obs: 2, num_actions=3, epsilon=0.3, seed=0, flaw=flaw)
    actions = [policy(np.ones(1)) for _ in range(6000)]
    counts = np.bincount([a for a, _, _ in actions], minlength=3) / len(actions)
    np.testing.assert_allclose(counts, [0.45, 0.1, 0.45], atol=0.02)
    np.testing.assert_allclose(np.exp(actions[0][2]), [0.45, 0.1, 0.45], rtol=1e-6)
    np.testing.assert_allclose(np.exp(policy(-np.ones(1))[2]), [0.1, 0.1, 0.8], rtol=1e-6)


def test_a_flaw_without_an_action_replaces_whichever_the_expert_takes():
    flaw = Flaw(action=None, replacement=1, probability=1.0)
    policy = EpsilonGreedy(lambda obs: int(obs[0]), num_actions=3, epsilon=0.0, seed=0, flaw=flaw)
    assert [policy(np.array([greedy]))[0] for greedy in (0, 1, 2)] == [1, 1, 1]


def test_mixed_tier_must_start_an_episode_first():
    policy = behaviour_policy("Pendulum-v1", "mixed", seed=0)
    with pytest.raises(RuntimeError, match="start_episode"):
        policy(np.zeros(3))


def test_unknown_env_or_tier_lists_the_available_ones():
    with pytest.raises(ConfigError, match="Pendulum-v1"):
        behaviour_policy("Humanoid-v5", "expert", seed=0)
    with pytest.raises(ConfigError, match="medium"):
        behaviour_policy("CartPole-v1", "superhuman", seed=0)


def test_invalid_noise_is_rejected():
    with pytest.raises(ConfigError, match="epsilon"):
        EpsilonGreedy(cartpole_expert, num_actions=2, epsilon=1.5, seed=0)
    with pytest.raises(ConfigError, match=r"a flaw's probability must be in \[0, 1\], got 2"):
        EpsilonGreedy(cartpole_expert, num_actions=2, epsilon=0.1, seed=0, flaw=Flaw(0, 1, 2))
    with pytest.raises(ConfigError, match="std"):
        GaussianNoise(None, std=0.0, low=-1.0, high=1.0, seed=0)
