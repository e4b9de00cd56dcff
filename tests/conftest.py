"""Shared test fixtures: one local Ray instance per session and small recorded datasets."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """A real local Ray instance (2 CPUs, like CI), shared by every test that needs one."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def cartpole_data(tmp_path_factory) -> Path:
    """40 episodes of the CartPole expert tier (5% random actions, ~20k steps), tabular."""
    from offline_rl.datasets import make_dataset

    path = tmp_path_factory.mktemp("datasets") / "cartpole-expert"
    make_dataset("CartPole-v1", path, tier="expert", episodes=40, seed=0, progress=False)
    return path


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

