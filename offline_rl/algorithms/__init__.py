"""Offline RL algorithms: each is an ``AlgorithmConfig`` subclass plus a ``Learner`` loss,
registered by name (``register_algorithm``) and imported only when used."""

from offline_rl.algorithms.registry import (
    get_algorithm_config_class,
    register_algorithm,
    registered_algorithms,
)

__all__ = ["get_algorithm_config_class", "register_algorithm", "registered_algorithms"]
