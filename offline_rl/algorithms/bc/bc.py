"""Behavior cloning: fit the policy to the logged actions by maximum likelihood."""

from __future__ import annotations

from offline_rl.algorithms.algorithm import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig


class BCConfig(AlgorithmConfig):
    """Configuration of behavior cloning (BC).

    Examples:
        >>> from offline_rl import BCConfig
        >>> config = (BCConfig().environment("CartPole-v1")
        ...           .offline_data(input_="data/cartpole-expert"))
        >>> config.algo_class.__name__
        'BC'
    """

    algo_name = "BC"
    learner_class_path = "offline_rl.algorithms.bc.bc_learner:BCTorchLearner"

    @property
    def algo_class(self) -> type[Algorithm]:
        """``BC``."""
        return BC


class BC(Algorithm):
    """Behavior cloning: ``train()`` minimizes the negative log-likelihood of logged actions.

    Examples:
        >>> config = (BCConfig().environment("CartPole-v1")
        ...           .training(lr=3e-3, train_batch_size_per_learner=512)
        ...           .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=20)
        ...           .debugging(seed=0))
        >>> with config.build() as algo:
        ...     losses = [algo.train()["learners"]["default_policy"]["policy_loss"]
        ...               for _ in range(3)]
        >>> losses[-1] < losses[0] < 0.75   # from about log(2): the expert's actions are learned
        True
    """
