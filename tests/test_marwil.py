"""MARWIL and its learner pipeline: the artificial timestep, generalized advantages against a
hand-computed episode, the loss (``beta=0`` is BC's), its state, and learning CartPole through
the PreLearners' copy of the module."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from connectors import (
    AddOneTsToEpisodesAndTruncate,
    GeneralAdvantageEstimation,
    default_learner_pipeline,
)
from offline_rl import BCConfig, MARWILConfig, SingleAgentEpisode
from offline_rl.errors import ConfigError

OBS_SPACE = gym.spaces.Box(-10.0, 10.0, (1,), np.float32)


def episode(observations, actions, rewards, *, terminated=False, truncated=False, extra=None):
    return SingleAgentEpisode(observations=[[o] for o in observations], actions=actions,
                              rewards=rewards, terminated=terminated, truncated=truncated,
                              extra_model_outputs=extra or {}, len_lookback_buffer=0).to_numpy()


class ValueIsObservation(torch.nn.Module):
    """``V(s) = s``: a value function whose outputs are known by hand."""

    def compute_values(self, batch):
        return batch["obs"][:, 0].float()


def marwil_batch(episodes, gamma, lambda_):
    pipeline = default_learner_pipeline()
    pipeline.prepend(AddOneTsToEpisodesAndTruncate())
    pipeline.append(GeneralAdvantageEstimation(gamma=gamma, lambda_=lambda_))
    return pipeline(rl_module=ValueIsObservation(), batch={}, episodes=episodes)


def test_the_artificial_timestep_repeats_the_last_step_and_is_masked():
    first = episode([1.0, 2.0], [1], [5.0], terminated=True, extra={"action_logp": [-0.5]})
    second = episode([7.0, 8.0, 9.0], [0, 1], [1.0, 2.0], extra={"action_logp": [-1.0, -2.0]})
    batch = marwil_batch([first, second], gamma=0.9, lambda_=1.0)
    assert batch["obs"][:, 0].tolist() == [1.0, 2.0, 7.0, 8.0, 9.0]
    assert batch["new_obs"][:, 0].tolist() == [2.0, 2.0, 8.0, 9.0, 9.0]
    assert batch["actions"].tolist() == [1, 1, 0, 1, 1]
    assert batch["rewards"].tolist() == [5.0, 0.0, 1.0, 2.0, 0.0]
    assert batch["action_logp"].tolist() == [-0.5, -0.5, -1.0, -2.0, -2.0]
    assert batch["loss_mask"].tolist() == [True, False, True, True, False]
    assert batch["terminateds"].tolist() == [True, True, False, False, True]
    assert batch["truncateds"].tolist() == [False, True, False, False, True]
    assert first.is_terminated and second.is_truncated and len(second) == 3


def test_generalized_advantages_match_a_hand_computed_episode():
    gamma, lambda_ = 0.9, 0.8
    # An unfinished episode: its last real step bootstraps from V(final obs) = 4.
    unfinished = episode([1.0, 2.0, 3.0, 4.0], [0, 1, 0], [1.0, 0.0, 2.0])
    terminated = episode([5.0, 6.0], [1], [3.0], terminated=True)
    batch = marwil_batch([unfinished, terminated], gamma, lambda_)
    deltas = [1.0 + gamma * 2.0 - 1.0, 0.0 + gamma * 3.0 - 2.0, 2.0 + gamma * 4.0 - 3.0]
    a2 = deltas[2]
    a1 = deltas[1] + gamma * lambda_ * a2
    a0 = deltas[0] + gamma * lambda_ * a1
    a_terminal = 3.0 - 5.0  # no bootstrap after a termination
    expected = [a0, a1, a2, 0.0, a_terminal, 0.0]
    np.testing.assert_allclose(batch["advantages"], expected, rtol=1e-6)
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    np.testing.assert_allclose(batch["vf_preds"], values)
    np.testing.assert_allclose(batch["value_targets"], np.array(expected) + values, rtol=1e-6)


def test_advantages_without_the_artificial_timestep_are_refused_with_the_fix():
    pipeline = default_learner_pipeline()
    pipeline.append(GeneralAdvantageEstimation())
    with pytest.raises(ConfigError, match="loss_mask.*AddOneTsToEpisodesAndTruncate"):
        pipeline(rl_module=ValueIsObservation(), batch={},
                 episodes=[episode([1.0, 2.0], [0], [1.0])])


def learner(config_class, **training):
    config = (config_class().training(**training)
              .rl_module(model_config={"fcnet_hiddens": [8]}).debugging(seed=3))
    spec = config.get_rl_module_spec(OBS_SPACE, gym.spaces.Discrete(3))
    return config.get_default_learner_class()(config.learner_config(spec))


def loss_batch(rows: int = 6) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(0)
    return {"obs": torch.as_tensor(rng.normal(size=(rows, 1)).astype(np.float32)),
            "actions": torch.as_tensor(rng.integers(0, 3, rows)),
            "value_targets": torch.as_tensor(rng.normal(size=rows).astype(np.float32)),
            "loss_mask": torch.as_tensor(np.arange(rows) % 3 != 2)}


def loss_of(a_learner, batch):
    fwd_out = a_learner.module.forward_train(batch)
    return a_learner.compute_loss_for_module(module_id="default_policy", batch=batch,
                                             fwd_out=fwd_out)[0]


def test_marwil_with_beta_zero_is_behavior_cloning():
    marwil, bc = learner(MARWILConfig, beta=0.0), learner(BCConfig)
    for network in ("encoder", "pi"):  # the same seed builds the same policy network
        for mine, theirs in zip(getattr(marwil.module, network).parameters(),
                                getattr(bc.module, network).parameters()):
            assert torch.equal(mine, theirs)
    batch = loss_batch()
    kept = {name: value[batch["loss_mask"]] for name, value in batch.items()}
    torch.testing.assert_close(loss_of(marwil, batch), loss_of(bc, kept), rtol=0, atol=0)
    batch["loss_mask"][:] = True
    torch.testing.assert_close(loss_of(marwil, batch), loss_of(bc, batch), rtol=0, atol=0)


def test_marwil_weights_each_action_by_its_normalized_advantage():
    marwil = learner(MARWILConfig, beta=2.0, vf_coeff=0.5,
                     moving_average_sqd_adv_norm_start=4.0,
                     moving_average_sqd_adv_norm_update_rate=0.25)
    batch = loss_batch()
    mask = batch["loss_mask"]
    with torch.no_grad():
        fwd_out = marwil.module.forward_train(batch)
        logp = marwil.module.get_train_action_dist_cls().from_logits(
            fwd_out["action_dist_inputs"]).logp(batch["actions"])
        advantages = batch["value_targets"] - marwil.module.compute_values(batch)
        squared = advantages[mask].pow(2).mean()
        norm = 4.0 + 0.25 * (squared - 4.0)
        weights = torch.exp(2.0 * advantages / norm.sqrt())
        expected = -(weights * logp)[mask].mean() + 0.5 * 0.5 * squared
    torch.testing.assert_close(loss_of(marwil, batch).detach(), expected)
    torch.testing.assert_close(marwil.moving_avg_sqd_adv_norm, norm)
    restored = learner(MARWILConfig)
    restored.set_state(marwil.get_state())
    torch.testing.assert_close(restored.moving_avg_sqd_adv_norm, norm)


def test_marwil_streams_its_mapped_data_and_says_why_when_told_to_materialize(ray_session,
                                                                             cartpole_data):
    config = (MARWILConfig().environment("CartPole-v1")
              .offline_data(input_=str(cartpole_data), materialize_mapped_data=True))
    with pytest.raises(ConfigError, match="materialize_mapped_data=False"):
        config.build()


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_marwil_reaches_450_on_cartpole_expert_data(ray_session, cartpole_data):
    config = (MARWILConfig().environment("CartPole-v1")
              .training(lr=3e-3, train_batch_size_per_learner=512)
              .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=50)
              .evaluation(evaluation_interval=1, evaluation_duration=5).debugging(seed=0))
    returns = []
    with config.build() as algo:
        while len(returns) < 6 and (not returns or returns[-1] < 450):
            result = algo.train()
            returns.append(result["evaluation"]["env_runners"]["episode_return_mean"])
        learner_results = result["learners"]["default_policy"]
    assert returns[-1] >= 450, returns
    assert np.isfinite(learner_results["vf_loss"]) and learner_results["vf_loss"] > 0


def test_the_column_form_of_the_artificial_timestep_equals_the_episode_form():
    one_steps = [episode([1.0, 2.0], [1], [5.0], terminated=True, extra={"action_logp": [-0.5]}),
                 episode([7.0, 8.0], [0], [1.0], extra={"action_logp": [-1.0]}),
                 episode([3.0, 4.0], [2], [0.5], truncated=True, extra={"action_logp": [-2.0]})]
    defaults = default_learner_pipeline()(rl_module=None, batch={},
                                          episodes=[e.slice(slice(0, 1)) for e in one_steps])
    elongated = default_learner_pipeline()
    elongated.prepend(AddOneTsToEpisodesAndTruncate())
    expected = elongated(rl_module=None, batch={}, episodes=one_steps)
    columns = AddOneTsToEpisodesAndTruncate.on_single_steps(defaults)
    assert sorted(columns) == sorted(expected)
    for name, values in expected.items():
        np.testing.assert_array_equal(columns[name], values, err_msg=name)

