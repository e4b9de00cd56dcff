"""Shared test fixtures (the session-wide ones, Ray and the dataset, are in session_fixtures.py)."""

from __future__ import annotations

import pytest


@pytest.fixture()
def bc_config(cartpole_data):
    """A small BC config on the CartPole dataset."""
    from offline_rl import BCConfig

    return (
        BCConfig()
        .environment("CartPole-v1")
        .training(lr=3e-3, train_batch_size_per_learner=512)
        .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=1)
        .rl_module(model_config={"fcnet_hiddens": [64, 64], "fcnet_activation": "relu"})
        .debugging(seed=0)
    )

