"""Offline RL algorithms: each is an ``AlgorithmConfig`` subclass plus a ``Learner`` loss."""

from __future__ import annotations

from offline_rl.algorithms.algorithm_config import AlgorithmConfig
from offline_rl.algorithms.bc import BCConfig
from offline_rl.errors import ConfigError

#: Algorithm names usable as ``algorithm:`` in YAML configs.
ALGORITHMS: dict[str, type[AlgorithmConfig]] = {"BC": BCConfig}


def get_algorithm_config_class(name: str) -> type[AlgorithmConfig]:
    """The config class registered under ``name`` (e.g. ``"BC"``)."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ConfigError(f"unknown algorithm {name!r}; known: {sorted(ALGORITHMS)}") from None
