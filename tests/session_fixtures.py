"""Session fixtures shared by the tests and the docstring examples (loaded with ``-p`` in
pyproject.toml, so that doctests under offline_rl/ and connectors/ see them too): one local Ray
instance and a small recorded CartPole dataset, which examples know as ``cartpole_data``."""

from __future__ import annotations

from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem


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


@pytest.fixture(autouse=True)
def _doctest_environment(request, doctest_namespace):
    """Docstring examples run against the shared Ray instance and dataset."""
    if isinstance(request.node, DoctestItem):
        request.getfixturevalue("ray_session")
        doctest_namespace["cartpole_data"] = request.getfixturevalue("cartpole_data")
