"""Learners with several networks (one optimizer per loss, target networks), and IQL, TD3+BC
and discrete CQL on them: the optimizers' separation, Polyak targets, the losses on
hand-checkable batches, two learners in lockstep, checkpoints, learning."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import ray
import torch

from offline_rl import (
    Algorithm,
    BCConfig,
    CQLConfig,
    DiscreteCQLConfig,
    IQLConfig,
    MARWILConfig,
    TD3BCConfig,
)
from offline_rl.algorithms.algorithm_config import AlgorithmConfig
from offline_rl.algorithms.checkpoint import load_module, read_config
from offline_rl.columns import Columns
from offline_rl.core.learner import Learner
from offline_rl.core.optimizer_spec import OptimizerSpec
from offline_rl.errors import ConfigError
from offline_rl.evaluation.off_policy.target_policy import TargetPolicy
from offline_rl.models.actor_critic_module import (
    ActorCriticTorchRLModule,
    SquashedActorCriticTorchRLModule,
)
from offline_rl.models.model_config import DefaultModelConfig

pytestmark = pytest.mark.timeout(240)

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
PENDULUM_ACTIONS = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
ADAM_BETA1 = 0.9  # torch's default: the first moment after one step is 0.1 * gradient


class CoupledLearner(Learner):
    """An actor loss computed through the critic (as TD3+BC's and CQL's are)."""

    def configure_optimizers(self) -> dict[str, OptimizerSpec]:
        return {"policy": OptimizerSpec(self.module.policy_parameters(), 1e-3),
                "critic": OptimizerSpec(self.module.critic_parameters(), 1e-3)}

    def compute_losses(self, *, batch, fwd_out):
        q_value, _ = self.module.q_values(batch[Columns.OBS], batch[Columns.ACTIONS])
        policy_action = fwd_out[Columns.ACTION_DIST_INPUTS][:, :1]
        through_critic, _ = self.module.q_values(batch[Columns.OBS], policy_action)
        losses = {"policy": -through_critic.mean(),
                  "critic": (q_value - batch[Columns.REWARDS]).pow(2).mean()}
        return losses, {}


class CriticFirstLearner(CoupledLearner):
    """The critic steps first; the policy's loss then goes through the stepped critic."""

    def update_stages(self) -> list[tuple[str, ...]]:
        return [("critic",), ("policy",)]


def small_batch(rows: int = 8) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"obs": rng.uniform(-1, 1, (rows, 3)).astype(np.float32),
            "actions": rng.uniform(-1, 1, (rows, 1)).astype(np.float32),
            "rewards": rng.normal(size=rows).astype(np.float32),
            "new_obs": rng.uniform(-1, 1, (rows, 3)).astype(np.float32),
            "terminateds": np.zeros(rows, bool)}


def box_spec(config_class=IQLConfig):
    config = config_class().rl_module(model_config={"fcnet_hiddens": [16]}).debugging(seed=0)
    return config, config.get_rl_module_spec(BOX, gym.spaces.Box(-1.0, 1.0, (1,), np.float32))


def test_each_optimizer_steps_on_the_gradient_of_its_own_loss_only():
    config, spec = box_spec()
    learner = CoupledLearner(config.learner_config(spec))
    batch = small_batch()
    tensors = {name: torch.as_tensor(value) for name, value in batch.items()}
    critic_loss = (learner.module.q_values(tensors["obs"], tensors["actions"])[0]
                   - tensors["rewards"]).pow(2).mean()
    expected = torch.autograd.grad(critic_loss, learner.module.critic_parameters(),
                                   allow_unused=True)
    learner.update(batch)
    critic = learner.optimizers["critic"]
    for parameter, grad in zip(learner.module.critic_parameters(), expected):
        if grad is None:  # qf_twin: no part in either loss here, so Adam left it alone
            assert "exp_avg" not in critic.state[parameter]
            continue
        # The policy loss's gradient reached qf too, but left no trace in the critic's step.
        torch.testing.assert_close(critic.state[parameter]["exp_avg"], (1 - ADAM_BETA1) * grad)
    assert any(grad is None for grad in expected) and not all(grad is None for grad in expected)


def policy_loss_and_gradient(config, spec, module, tensors):
    """CoupledLearner's policy loss for ``module``'s networks, and its gradient."""
    probe = CoupledLearner(config.learner_config(spec))
    probe.module = module
    losses, _ = probe.compute_losses(batch=tensors, fwd_out=module.forward_train(tensors))
    return losses["policy"].item(), torch.autograd.grad(
        losses["policy"], module.policy_parameters(), allow_unused=True)


def test_a_later_stage_steps_on_losses_computed_after_the_earlier_stages_step():
    config, spec = box_spec()
    learner = CriticFirstLearner(config.learner_config(spec))
    batch = small_batch()
    tensors = {name: torch.as_tensor(value) for name, value in batch.items()}
    initial = copy.deepcopy(learner.module)
    with torch.no_grad():
        first_pass, _ = learner.compute_losses(batch=tensors,
                                               fwd_out=initial.forward_train(tensors))
    _, before_critic_step = policy_loss_and_gradient(config, spec, initial, tensors)
    metrics = learner.update(batch)
    for own, stepped in zip(initial.critic_parameters(), learner.module.critic_parameters()):
        own.data.copy_(stepped.data)
    policy_loss, after_critic_step = policy_loss_and_gradient(config, spec, initial, tensors)
    # total_loss sums the losses stepped on: the critic's first, the policy's after it.
    assert metrics["total_loss"] == pytest.approx(first_pass["critic"].item() + policy_loss,
                                                  rel=1e-6)
    policy = learner.optimizers["policy"]
    compared = 0
    for parameter, after, before in zip(learner.module.policy_parameters(), after_critic_step,
                                        before_critic_step):
        if after is None:
            continue
        torch.testing.assert_close(policy.state[parameter]["exp_avg"], (1 - ADAM_BETA1) * after)
        compared += not torch.allclose(after, before)
    assert compared  # the critic's step changed the policy's gradient, and it was used


def test_a_stage_without_its_loss_names_the_optimizer_and_the_fix():
    class ForgetfulLearner(CoupledLearner):
        def compute_losses(self, *, batch, fwd_out):
            losses, stats = super().compute_losses(batch=batch, fwd_out=fwd_out)
            return {"critic": losses["critic"]}, stats

    config, spec = box_spec()
    learner = ForgetfulLearner(config.learner_config(spec))
    with pytest.raises(ConfigError, match=r"ForgetfulLearner.compute_losses gave no loss for "
                                          r"the optimizers \['policy'\].*leave them out"):
        learner.update(small_batch())


def test_target_networks_move_tau_of_the_way_by_polyak_averaging():
    config, spec = box_spec()
    learner = config.get_default_learner_class()(config.learner_config(spec))
    module = learner.module
    before = [p.clone() for p in module.qf_target.parameters()]
    learner.update(small_batch())
    tau = config.tau
    for old, target, source in zip(before, module.qf_target.parameters(),
                                   module.qf.parameters()):
        torch.testing.assert_close(target, (1 - tau) * old + tau * source)
        assert not target.requires_grad


@pytest.mark.parametrize("config_class", [IQLConfig, CQLConfig], ids=["IQL", "CQL"])
def test_without_twin_q_the_twin_network_is_neither_run_nor_trained(config_class):
    config, spec = box_spec(config_class)
    config.training(twin_q=False)
    learner = config.get_default_learner_class()(config.learner_config(spec))
    module = learner.module
    calls = []
    module.qf_twin.register_forward_hook(lambda *_: calls.append("qf_twin"))
    module.qf_twin_target.register_forward_hook(lambda *_: calls.append("qf_twin_target"))
    twin_before = [p.clone() for p in module.qf_twin.parameters()]
    q_before = [p.clone() for p in module.qf.parameters()]
    learner.update(small_batch())
    assert calls == []
    assert all(torch.equal(old, new) for old, new in zip(twin_before, module.qf_twin.parameters()))
    assert not all(torch.equal(old, new) for old, new in zip(q_before, module.qf.parameters()))


def test_a_learner_without_a_loss_says_what_to_implement():
    config, spec = box_spec(BCConfig)
    with pytest.raises(ConfigError, match="Learner defines no loss: implement "
                                          "compute_loss_for_module .* or compute_losses"):
        Learner(config.learner_config(spec)).update(small_batch())


@pytest.mark.parametrize(("bounds", "log_std", "clipped"), [
    ({"log_std_clip_param": 5.0}, -50.0, -5.0),
    ({"log_std_bounds": [-5.0, 2.0]}, 50.0, 2.0)], ids=["symmetric", "bounds"])
def test_a_bounded_mean_stays_inside_the_action_bounds_and_the_free_log_std_is_clipped(
        bounds, log_std, clipped):
    config = DefaultModelConfig(fcnet_hiddens=[8], free_log_std=True, bound_mean=True, **bounds)
    module = ActorCriticTorchRLModule(BOX, PENDULUM_ACTIONS, config)
    with torch.no_grad():
        module.pi[-1].bias.fill_(100.0)
        module.log_std.fill_(log_std)
    inputs = module.forward_inference({"obs": torch.zeros(2, 3)})["action_dist_inputs"]
    torch.testing.assert_close(inputs, torch.tensor([[2.0, clipped], [2.0, clipped]]))


def test_action_bounds_from_read_only_arrays_are_copied_without_a_warning():
    """A space sent to a Ray actor (the sampler's runners) holds read-only arrays."""
    actions = copy.deepcopy(PENDULUM_ACTIONS)
    actions.low.flags.writeable = actions.high.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = ActorCriticTorchRLModule(BOX, actions, DefaultModelConfig(fcnet_hiddens=[8]))
    torch.testing.assert_close(module.action_high, torch.tensor([2.0]))


def test_log_std_bounds_must_be_low_then_high():
    with pytest.raises(ConfigError, match=r"log_std_bounds=\[2\.0, -5\.0\]: give \[low, high\] "
                                          r"with low < high"):
        DefaultModelConfig.from_dict({"log_std_bounds": [2.0, -5.0]})


def test_the_squashed_policy_refuses_a_bounded_mean():
    with pytest.raises(ConfigError, match="bound_mean=True squashes a Gaussian's mean"):
        SquashedActorCriticTorchRLModule(BOX, PENDULUM_ACTIONS,
                                         DefaultModelConfig(bound_mean=True))


def test_iql_config_round_trips_and_checks_its_ranges(tmp_path):
    config = IQLConfig().training(expectile=0.8, beta=2.0, lr=1e-3)
    config.to_yaml(tmp_path / "iql.yaml")
    again = IQLConfig.from_yaml(tmp_path / "iql.yaml")
    assert type(again) is IQLConfig and again.to_dict() == config.to_dict()
    assert again.expectile == 0.8 and again.beta == 2.0 and again.lr == 1e-3
    with pytest.raises(ConfigError, match=r"expectile: must be a finite number strictly between "
                                          r"0 and 1, got 1\.0(.|\n)*tau: must be a finite "
                                          r"number in \(0, 1\], got 0"):
        IQLConfig().training(expectile=1.0, tau=0).validate()


@pytest.mark.parametrize(("config_class", "networks", "optimizers"), [
    (IQLConfig, {"qf_target.0.weight", "vf.0.weight", "qf_twin.0.weight"},
     ["critic", "policy", "value"]),
    # MARWIL: advantages computed in the PreLearners with the learners' published weights
    # (several learners stream epoch by epoch, the raw input in memory or not).
    (MARWILConfig, {"vf.0.weight", "pi.0.weight"}, ["default"]),
], ids=["IQL", "MARWIL"])
@pytest.mark.slow
def test_two_learners_stay_identical_networks_targets_and_optimizers(
        ray_session, cartpole_data, config_class, networks, optimizers):
    config = (config_class().environment("CartPole-v1")
              .training(train_batch_size_per_learner=128)
              .learners(num_learners=2, num_cpus_per_learner=0.25)
              .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=5,
                            map_batches_kwargs={"num_cpus": 0.5})
              .rl_module(model_config={"fcnet_hiddens": [16]}).debugging(seed=0))
    with config.build() as algo:
        result = algo.train()
        states = ray.get([actor.get_state.remote() for actor in algo.learner_group._actors])
    # Ray Data's figures: of the materialized pass (IQL), or of the streaming execution in the
    # split coordinator actor (MARWIL).
    prelearners = result["data"]["operators"]["MapBatches(OfflinePreLearner)"]
    assert prelearners["rows"] >= 2 * 5 * 128
    assert result["data"]["prelearner_s"] == prelearners["udf_s"] > 0
    first, second = states
    assert set(first["module"]) >= networks
    for name, tensor in first["module"].items():
        assert torch.equal(tensor, second["module"][name]), name
    assert sorted(first["optimizers"]) == optimizers
    for name, optimizer in first["optimizers"].items():
        for key, moments in optimizer["state"].items():
            assert torch.equal(moments["exp_avg"], second["optimizers"][name]["state"][key]
                               ["exp_avg"]), name


@pytest.fixture(scope="module")
def cartpole_mixed(tmp_path_factory):
    from offline_rl.datasets import make_dataset

    data = tmp_path_factory.mktemp("datasets") / "cartpole-mixed"
    make_dataset("CartPole-v1", data, tier="mixed", episodes=60, seed=0, progress=False)
    return data


#: Iterations of 250 updates that BC, IQL and DiscreteCQL each train on ``cartpole_mixed``
#: (with seed 0, after 8: BC 465, IQL 500, DiscreteCQL 470; after 6 IQL only ties BC).
CARTPOLE_MIXED_ITERATIONS = 8


def cartpole_mixed_config(config_class: type, data: Path) -> AlgorithmConfig:
    """``config_class``'s defaults on ``data``: 250 updates per iteration, seed 0."""
    return (config_class().environment("CartPole-v1")
            .offline_data(input_=str(data), dataset_num_iters_per_learner=250)
            .evaluation(evaluation_duration=10).debugging(seed=0))


def return_after_budget(algo: Algorithm) -> float:
    """Trains ``algo`` for ``CARTPOLE_MIXED_ITERATIONS``, then evaluates it."""
    for _ in range(CARTPOLE_MIXED_ITERATIONS):
        algo.train()
    return algo.evaluate()["env_runners"]["episode_return_mean"]


@pytest.fixture(scope="module")
def bc_return_on_cartpole_mixed(ray_session, cartpole_mixed) -> float:
    """BC's return on ``cartpole_mixed`` after the budget: about 465, as BC copies the medium
    episodes' flaw in some states; the discrete offline RL tests below must beat it."""
    with cartpole_mixed_config(BCConfig, cartpole_mixed).build() as algo:
        return return_after_budget(algo)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_iql_beats_bc_on_cartpole_mixed_and_checkpoints_every_network(
        ray_session, tmp_path, cartpole_mixed, bc_return_on_cartpole_mixed):
    config = cartpole_mixed_config(IQLConfig, cartpole_mixed)
    with config.build() as algo:
        returned = return_after_budget(algo)
        checkpoint = algo.save_to_path(tmp_path / "checkpoint")
        greedy = algo.module.compute_actions(np.zeros((1, 4), np.float32))
    assert returned > max(bc_return_on_cartpole_mixed, 450), (returned,
                                                              bc_return_on_cartpole_mixed)
    saved = read_config(checkpoint)
    assert type(saved) is IQLConfig
    assert saved.model_config == {**DefaultModelConfig().to_dict(), **config.model_config}
    module = load_module(checkpoint)
    assert isinstance(module, ActorCriticTorchRLModule)
    np.testing.assert_array_equal(module.compute_actions(np.zeros((1, 4), np.float32)), greedy)
    with Algorithm.from_checkpoint(checkpoint) as restored:
        assert restored.iteration == CARTPOLE_MIXED_ITERATIONS
        learner = restored.learner_group._local.learner
        assert sorted(learner.optimizers) == ["critic", "policy", "value"]
        # what delayed updates are timed by
        assert learner.num_updates == 250 * CARTPOLE_MIXED_ITERATIONS


def test_td3bc_policy_loss_is_the_normalized_q_term_plus_behavior_cloning_in_half_widths():
    config = (TD3BCConfig().training(policy_delay=1, alpha=2.5)
              .rl_module(model_config={"fcnet_hiddens": [16]}).debugging(seed=0))
    spec = config.get_rl_module_spec(BOX, PENDULUM_ACTIONS)
    learner = config.get_default_learner_class()(config.learner_config(spec))
    batch = small_batch()
    batch["actions"] *= 2.0  # logged actions across Pendulum's [-2, 2]
    obs, actions = torch.as_tensor(batch["obs"]), torch.as_tensor(batch["actions"])
    with torch.no_grad():
        raw_mean = learner.module.pi(learner.module.encoder(obs))[:, :1]
        policy_actions = 2.0 * torch.tanh(raw_mean)  # bound_mean: tanh into [-2, 2]
        torch.testing.assert_close(learner.module.mean_actions(obs), policy_actions)
    metrics = learner.update(batch)
    with torch.no_grad():  # through the critic as it is after its step, which came first
        q_value = learner.module.qf(torch.cat([obs, policy_actions], dim=-1)).squeeze(-1)
        bc_loss = ((policy_actions - actions) / 2.0).pow(2).mean()
        expected = -2.5 * q_value.mean() / q_value.abs().mean() + bc_loss
    assert metrics["policy_loss"] == pytest.approx(expected.item(), rel=1e-5)
    assert metrics["bc_loss"] == pytest.approx(bc_loss.item(), rel=1e-5)


def test_td3bc_policy_stays_put_between_its_delayed_steps_when_gradients_are_all_reduced(
        tmp_path):
    """In a process group (as remote learners are) only the stepping networks' gradients are
    all-reduced: the policy is not handed zeros between its steps, which Adam's momentum would
    turn into a step."""
    config = (TD3BCConfig().rl_module(model_config={"fcnet_hiddens": [16]})
              .debugging(seed=0))
    learner = config.get_default_learner_class()(
        config.learner_config(config.get_rl_module_spec(BOX, PENDULUM_ACTIONS)))
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'group'}",
                                         rank=0, world_size=1)
    try:
        learner.update(small_batch())  # the critic only
        learner.update(small_batch())  # the critic, then the policy
        after_policy_step = [p.clone() for p in learner.module.policy_parameters()]
        learner.update(small_batch())  # the critic only
    finally:
        torch.distributed.destroy_process_group()
    for before, now in zip(after_policy_step, learner.module.policy_parameters()):
        assert torch.equal(before, now)


def test_model_config_keys_given_later_keep_the_algorithms_other_defaults():
    config = TD3BCConfig().rl_module(model_config={"fcnet_hiddens": [16]})
    assert config.model_config == {"fcnet_hiddens": [16], "fcnet_activation": "relu",
                                   "bound_mean": True}
    config.rl_module(model_config={"bound_mean": False})
    assert config.model_config["bound_mean"] is False
    assert config.model_config["fcnet_hiddens"] == [16]


def test_td3bc_refuses_discrete_actions_naming_the_alternatives():
    with pytest.raises(ConfigError, match=r"TD3BC needs Box \(continuous\) actions, but the "
                                          r"action space is Discrete\(2\); for discrete actions "
                                          r"use IQLConfig"):
        TD3BCConfig().get_rl_module_spec(BOX, gym.spaces.Discrete(2))


def test_discrete_cql_loss_is_double_q_td_error_plus_the_conservative_penalty():
    config = (DiscreteCQLConfig().training(min_q_weight=0.5, gamma=0.9)
              .rl_module(model_config={"fcnet_hiddens": [16]}).debugging(seed=0))
    spec = config.get_rl_module_spec(BOX, gym.spaces.Discrete(3))
    learner = config.get_default_learner_class()(config.learner_config(spec))
    batch = {**small_batch(4), "actions": np.array([0, 2, 1, 2]),
             "terminateds": np.array([False, True, False, False])}
    module = learner.module
    t = {name: torch.as_tensor(value) for name, value in batch.items()}
    with torch.no_grad():
        q = module.q_values(t["obs"])
        taken = q[torch.arange(4), t["actions"]]
        greedy_next = module.q_values(t["new_obs"]).argmax(dim=1)
        next_q = module.q_values(t["new_obs"], target=True)[torch.arange(4), greedy_next]
        target = t["rewards"] + 0.9 * (1 - t["terminateds"].float()) * next_q
        td = (taken - target).pow(2).mean()
        penalty = (torch.logsumexp(q, dim=1) - taken).mean()
    metrics = learner.update(batch)
    assert metrics["td_loss"] == pytest.approx(td.item(), rel=1e-5)
    assert metrics["cql_loss"] == pytest.approx(penalty.item(), rel=1e-5)
    assert metrics["total_loss"] == pytest.approx((td + 0.5 * penalty).item(), rel=1e-5)


@pytest.mark.parametrize(("exploration_config", "probabilities"), [
    (None, lambda q: torch.softmax(q, dim=1)),  # the default: SoftQ at temperature 1
    ({"type": "EpsilonGreedy", "final_epsilon": 0.3},
     lambda q: 0.1 + 0.7 * torch.nn.functional.one_hot(q.argmax(1), 3)),
], ids=["default-softq", "epsilon-greedy"])
def test_discrete_cql_explores_with_its_exploration_config_and_evaluates_greedily(
        exploration_config, probabilities):
    config = DiscreteCQLConfig().rl_module(model_config={"fcnet_hiddens": [16]})
    if exploration_config is not None:
        config.training(exploration_config=exploration_config)
    module = config.get_rl_module_spec(BOX, gym.spaces.Discrete(3)).build()
    obs = small_batch(4)["obs"]
    with torch.no_grad():
        q = module.q_values(torch.as_tensor(obs))
    # What the sampler and recording sample, and off-policy estimators judge ...
    np.testing.assert_allclose(TargetPolicy(module).all_probabilities(obs),
                               probabilities(q).numpy(), atol=1e-6)
    # ... while evaluation acts greedily.
    np.testing.assert_array_equal(module.compute_actions(obs), q.argmax(1).numpy())


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_discrete_cql_beats_bc_on_cartpole_mixed_acting_greedily_on_q(
        ray_session, cartpole_mixed, bc_return_on_cartpole_mixed):
    with cartpole_mixed_config(DiscreteCQLConfig, cartpole_mixed).build() as algo:
        returned = return_after_budget(algo)
        obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
        with torch.no_grad():
            q = algo.module.q_values(torch.as_tensor(obs))
        np.testing.assert_array_equal(algo.module.compute_actions(obs), q.argmax(1).numpy())
    assert returned > max(bc_return_on_cartpole_mixed, 450), (returned,
                                                              bc_return_on_cartpole_mixed)
