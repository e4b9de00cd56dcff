"""Behavior cloning: fit the policy to the logged actions by maximum likelihood."""

from __future__ import annotations

from offline_rl.algorithms.algorithm import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig


class BCConfig(AlgorithmConfig):
    """Configuration of behavior cloning (BC).

    Example:
        >>> from offline_rl import BCConfig
        >>> config = (BCConfig().environment("CartPole-v1")
        ...           .offline_data(input_="data/cartpole-expert"))
        >>> config.algo_class.__name__
        'BC'
    """

    algo_name = "BC"

    @property
    def algo_class(self) -> type[Algorithm]:
        """``BC``."""
        return BC

    def get_default_learner_class(self) -> type:
        """``BCTorchLearner`` (imported here: torch loads only where learners run)."""
        from offline_rl.algorithms.bc.bc_learner import BCTorchLearner

        return BCTorchLearner


class BC(Algorithm):
    """Behavior cloning: ``train()`` minimizes the negative log-likelihood of logged actions.

    Example:
        >>> algo = BCConfig().environment("CartPole-v1").offline_data(  # doctest: +SKIP
        ...     input_="data/cartpole-expert").build()
        >>> algo.train()["learners"]["default_policy"]["policy_loss"]    # doctest: +SKIP
        0.69...
    """
