"""Losses on held-out data: what update() would report, without a step, through the config."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from offline_rl import BCConfig, MARWILConfig
from offline_rl.datasets import make_dataset
from offline_rl.errors import ConfigError
from tests.test_marwil import learner, loss_batch


def test_loss_metrics_are_the_update_losses_without_a_step_or_a_trace():
    marwil = learner(MARWILConfig, beta=2.0, moving_average_sqd_adv_norm_start=4.0,
                     moving_average_sqd_adv_norm_update_rate=0.25)
    batch = {name: value.numpy() for name, value in loss_batch().items()}
    before = copy.deepcopy(marwil.get_state())
    evaluated = marwil.loss_metrics([batch])
    after = marwil.get_state()
    for name, value in before["module"].items():
        assert torch.equal(value, after["module"][name]), name
    assert torch.equal(before["moving_avg_sqd_adv_norm"], after["moving_avg_sqd_adv_norm"])
    stepped = marwil.update(batch)
    assert evaluated["total_loss"] == pytest.approx(stepped["total_loss"], rel=1e-6)
    assert evaluated["moving_avg_sqd_adv_norm"] == pytest.approx(
        stepped["moving_avg_sqd_adv_norm"], rel=1e-6)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_held_out_losses_show_over_fitting_to_a_small_random_dataset(ray_session, tmp_path):
    make_dataset("CartPole-v1", tmp_path / "train", tier="random", episodes=2, seed=1,
                 progress=False)
    make_dataset("CartPole-v1", tmp_path / "held-out", tier="random", episodes=8, seed=2,
                 progress=False)
    config = (BCConfig().environment("CartPole-v1")
              .training(lr=1e-2, train_batch_size_per_learner=128)
              .rl_module(model_config={"fcnet_hiddens": [256, 256]})
              .offline_data(input_=str(tmp_path / "train"), dataset_num_iters_per_learner=20)
              .evaluation(offline_evaluation_interval=2,
                          offline_eval_input_=str(tmp_path / "held-out"))
              .debugging(seed=0))
    train_losses, held_out_losses = [], []
    with config.build() as algo:
        for _ in range(20):
            result = algo.train()
            if "evaluation" in result:
                held_out = result["evaluation"]["offline_eval_runners"]
                held_out_losses.append(held_out["default_policy"]["total_loss"])
                train_losses.append(result["learners"]["default_policy"]["total_loss"])
        assert held_out["num_env_steps"] == algo.evaluate_offline()["offline_eval_runners"][
            "num_env_steps"] > 0
    assert len(held_out_losses) == 10
    assert train_losses[-1] < 0.8 * train_losses[0], train_losses
    best = int(np.argmin(held_out_losses))
    assert best < 9 and held_out_losses[-1] > 1.2 * held_out_losses[best], held_out_losses


def test_offline_evaluation_interval_is_checked():
    config = (BCConfig().environment("CartPole-v1").offline_data(input_="data")
              .evaluation(offline_evaluation_interval=0))
    with pytest.raises(ConfigError, match=r"offline_evaluation_interval: must be None or an "
                                          r"int >= 1, got 0"):
        config.validate()
