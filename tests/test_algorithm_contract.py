"""Every registered algorithm keeps the shared contract (``tests/algorithm_contract.py``): one
line each, on CartPole data for discrete actions and Pendulum data for continuous ones."""

from __future__ import annotations

import gymnasium as gym
import pytest

from offline_rl.algorithms import get_algorithm_config_class
from offline_rl.algorithms.registry import BUILT_IN_ALGORITHMS
from tests.algorithm_contract import check_algorithm


@pytest.fixture(scope="module")
def pendulum_data(tmp_path_factory):
    from offline_rl.datasets import make_dataset

    data = tmp_path_factory.mktemp("datasets") / "pendulum-medium"
    make_dataset("Pendulum-v1", data, tier="medium", episodes=4, seed=0, progress=False)
    return data


@pytest.mark.parametrize("name", sorted(BUILT_IN_ALGORITHMS))
def test_each_built_in_algorithm_keeps_the_contract(ray_session, name, cartpole_data,
                                                   pendulum_data, tmp_path):
    config_class = get_algorithm_config_class(name)
    continuous = config_class.action_space_class is gym.spaces.Box
    env, data = ("Pendulum-v1", pendulum_data) if continuous else ("CartPole-v1", cartpole_data)
    check_algorithm(config_class().environment(env).offline_data(input_=str(data)),
                    tmp_path / "checkpoint")
