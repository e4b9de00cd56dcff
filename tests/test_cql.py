"""Continuous (SAC-based) CQL: the squashed policy's density against torch's transformed
distribution, the conservative penalty, behavior cloning for ``bc_iters``, the Lagrange
multiplier's direction, the learner's state, and learning Pendulum from mixed data."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from offline_rl import CQLConfig
from offline_rl.algorithms.cql.conservative_penalty import conservative_penalty
from offline_rl.errors import ConfigError
from offline_rl.models.distributions import TorchSquashedGaussian

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTIONS = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)


def test_squashed_gaussian_density_matches_torchs_transformed_distribution():
    dist_cls = TorchSquashedGaussian.bounded([-2.0, 0.0], [2.0, 1.0])
    logits = torch.tensor([[0.3, -0.2, -0.5, 0.1], [1.0, 0.4, 0.2, -1.0]])
    dist = dist_cls.from_logits(logits)
    loc, log_std = logits.chunk(2, dim=-1)
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(loc, log_std.exp()),
        [torch.distributions.TanhTransform(),
         torch.distributions.AffineTransform(torch.tensor([0.0, 0.5]),
                                             torch.tensor([2.0, 0.5]))])
    actions = torch.tensor([[1.5, 0.9], [-0.3, 0.2]])
    torch.testing.assert_close(dist.logp(actions), reference.log_prob(actions).sum(-1),
                               rtol=1e-4, atol=1e-4)
    sampled, logp = dist.rsample_with_logp()
    assert bool(((sampled >= torch.tensor([-2.0, 0.0])) & (sampled <= torch.tensor([2.0, 1.0])))
                .all())
    torch.testing.assert_close(logp, reference.log_prob(sampled).sum(-1), rtol=1e-3, atol=1e-3)


def test_conservative_penalty_is_a_soft_maximum_at_the_temperature_less_the_data_value():
    candidates = torch.tensor([[1.0, 3.0, 2.0]])
    data_q = torch.tensor([2.0])
    expected = 0.5 * np.log(np.exp(2.0) + np.exp(6.0) + np.exp(4.0)) - 2.0
    assert conservative_penalty(candidates, data_q, temperature=0.5).item() == pytest.approx(
        expected, rel=1e-6)


def cql_learner(**training):
    config = (CQLConfig().training(**training).rl_module(model_config={"fcnet_hiddens": [16]})
              .debugging(seed=0))
    spec = config.get_rl_module_spec(OBS, ACTIONS)
    return config.get_default_learner_class()(config.learner_config(spec))


def batch(rows: int = 16) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {"obs": rng.uniform(-1, 1, (rows, 3)).astype(np.float32),
            "actions": rng.uniform(-2, 2, (rows, 1)).astype(np.float32),
            "rewards": rng.normal(size=rows).astype(np.float32),
            "new_obs": rng.uniform(-1, 1, (rows, 3)).astype(np.float32),
            "terminateds": np.zeros(rows, bool)}


def losses(learner, data, seed=0):
    tensors = {name: torch.as_tensor(value) for name, value in data.items()}
    torch.manual_seed(seed)
    fwd_out = learner.module.forward_train(tensors)
    return learner.compute_losses(batch=tensors, fwd_out=fwd_out)


def test_critic_loss_is_td_loss_plus_the_weighted_penalty():
    for weight in (0.0, 3.0):
        _, stats = losses(cql_learner(min_q_weight=weight), batch())
        torch.testing.assert_close(stats["critic_loss"],
                                   stats["td_loss"] + weight * 2 * stats["cql_loss"])
        assert stats["cql_loss"].item() > 0  # random Q-networks value other actions too


def test_policy_imitates_the_data_for_bc_iters_then_maximizes_q():
    def policy_loss(bc_iters, critic_scale):
        learner = cql_learner(bc_iters=bc_iters)
        with torch.no_grad():
            for parameter in learner.module.critic_parameters():
                parameter.mul_(critic_scale)
        return losses(learner, batch())[0]["policy"].item()

    assert policy_loss(10, 1.0) == policy_loss(10, 3.0)  # behavior cloning ignores Q
    assert policy_loss(0, 1.0) != policy_loss(0, 3.0)


@pytest.mark.parametrize("threshold, direction", [(-100.0, 1), (100.0, -1)])
def test_lagrange_multiplier_grows_while_the_penalty_exceeds_its_threshold(threshold,
                                                                           direction):
    learner = cql_learner(lagrangian=True, lagrangian_thresh=threshold, alpha_lr=0.1)
    metrics = learner.update(batch())
    assert np.sign(learner.log_lagrange.item()) == direction
    assert metrics["lagrange_multiplier"] == pytest.approx(1.0)  # before its first step


def test_temperature_and_multiplier_are_in_the_state():
    learner = cql_learner(lagrangian=True)
    for _ in range(3):
        learner.update(batch())
    restored = cql_learner(lagrangian=True)
    restored.set_state(learner.get_state())
    for name in ("log_alpha", "log_lagrange"):
        assert torch.equal(getattr(restored, name), getattr(learner, name))
        assert getattr(restored, name).item() != 0.0


def test_discrete_actions_are_refused_with_the_discrete_config_named():
    with pytest.raises(ConfigError, match="DiscreteCQLConfig"):
        CQLConfig().get_rl_module_spec(OBS, gym.spaces.Discrete(2))


@pytest.mark.parametrize("soft_q_backup", [False, True])
def test_td_target_values_the_next_state_at_the_mean_action_or_a_soft_sampled_one(
        soft_q_backup):
    learner = cql_learner(soft_q_backup=soft_q_backup, min_q_weight=0.0, gamma=0.9)
    data = batch(rows=4)
    _, stats = losses(learner, data)
    module, tensors = learner.module, {name: torch.as_tensor(value) for name, value in data.items()}
    with torch.no_grad():
        next_inputs = module.forward_train({"obs": tensors["new_obs"]})["action_dist_inputs"]
        if soft_q_backup:  # replay the learner's draws: policy actions at s, then at s'
            torch.manual_seed(0)
            module.sample_actions(module.forward_train(tensors)["action_dist_inputs"], 11)
            actions, logp = module.sample_actions(next_inputs, 11)
            next_value = (torch.minimum(*module.q_values(tensors["new_obs"], actions[:, 0],
                                                         target=True))
                          - learner.log_alpha.exp() * logp[:, 0])
        else:
            mean = torch.tanh(next_inputs[:, :1]) * 2.0  # the squashed mean in [-2, 2]
            next_value = torch.minimum(*module.q_values(tensors["new_obs"], mean, target=True))
        target = tensors["rewards"] + 0.9 * next_value
        expected = sum(torch.nn.functional.mse_loss(q, target)
                       for q in module.q_values(tensors["obs"], tensors["actions"]))
    torch.testing.assert_close(stats["td_loss"], expected)
