"""Implicit Q-learning (IQL; Kostrikov et al., 2021): learns Q and V from the logged actions
only, with an expectile value loss, then extracts the policy by advantage-weighted regression."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from offline_rl.algorithms.algorithm import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig
from offline_rl.algorithms.td_config import (
    A_POLYAK_COEFFICIENT,
    POSITIVE,
    TwinQHyperparameters,
)
from offline_rl.settings.learning_rates import LearningRate, learning_rate_problem
from offline_rl.settings.options import NotProvided, finite_number, option

#: The module IQL trains: the default policy plus twin Q-networks, targets and a V-network.
ACTOR_CRITIC_MODULE = "offline_rl.models.actor_critic_module:ActorCriticTorchRLModule"


@dataclass
class IQLHyperparameters(TwinQHyperparameters):
    """IQL's hyperparameters (see ``IQLConfig.training``)."""

    actor_lr: LearningRate = option(3e-4, learning_rate_problem)
    critic_lr: LearningRate = option(3e-4, learning_rate_problem)
    value_lr: LearningRate = option(3e-4, learning_rate_problem)
    expectile: float = option(0.7, finite_number("strictly between 0 and 1",
                                                 lambda value: 0 < value < 1))
    beta: float = option(3.0, POSITIVE)
    max_advantage_weight: float = option(100.0, POSITIVE)
    tau: float = option(0.005, A_POLYAK_COEFFICIENT)


class IQLConfig(AlgorithmConfig):
    """Configuration of implicit Q-learning, for ``Discrete`` or ``Box`` actions.

    Where observation features differ in scale (Pendulum's angular velocity spans -8 to 8,
    its cosine and sine -1 to 1), ``rl_module(model_config={"normalize_observations": True})``
    standardizes them with the dataset's statistics. On Pendulum ``mixed`` that keeps the
    policy from wandering between good and poor from one checkpoint to the next
    (``benchmarks/RESULTS.md``).

    Examples:
        >>> config = (IQLConfig().environment("Pendulum-v1")
        ...           .training(beta=3.0, expectile=0.7, actor_lr=3e-4)
        ...           .offline_data(input_="data/pendulum-medium"))
        >>> config.algo_class.__name__, config.to_dict()["training"]["expectile"]
        ('IQL', 0.7)
    """

    algo_name = "IQL"
    hyperparameters_class = IQLHyperparameters
    learner_class_path = "offline_rl.algorithms.iql.iql_learner:IQLTorchLearner"
    module_class_path = ACTOR_CRITIC_MODULE

    def __init__(self) -> None:
        super().__init__()
        self.sections.training.train_batch_size_per_learner = 256
        # A state-independent log std: a state-dependent one collapses under the advantage
        # weights (Pendulum mixed, 10k updates: about -800 against about -200 with it). As in
        # d3rlpy, the mean is squashed into the action bounds and the log std clipped into
        # [-5, 2] (figures in benchmarks/RESULTS.md).
        self.sections.rl_module.model_config = {
            "fcnet_hiddens": [256, 256], "fcnet_activation": "relu", "free_log_std": True,
            "bound_mean": True, "log_std_bounds": [-5.0, 2.0]}

    def training(self, *, actor_lr: LearningRate = NotProvided,
                 critic_lr: LearningRate = NotProvided,
                 value_lr: LearningRate = NotProvided, gamma: float = NotProvided,
                 n_step: int = NotProvided,
                 expectile: float = NotProvided, beta: float = NotProvided,
                 max_advantage_weight: float = NotProvided, tau: float = NotProvided,
                 twin_q: bool = NotProvided,
                 target_network_update_freq: int = NotProvided,
                 **kwargs: Any) -> IQLConfig:
        """``AlgorithmConfig.training``'s settings plus IQL's: the learning rates of the
        policy, the Q-networks and the V-network (``lr`` is unused); the discount ``gamma``;
        ``n_step`` (> 1: n-step TD targets, for inputs of whole episodes); the ``expectile``
        the V-network fits of the target Q-values (0.5: their mean; near 1: their maximum
        over the logged actions); the inverse temperature ``beta`` of the advantage weights
        ``exp(beta * (Q - V))``, capped at ``max_advantage_weight``; and the Polyak
        coefficient ``tau`` of the target Q-networks; RLlib's ``twin_q`` and
        ``target_network_update_freq`` (see ``TwinQHyperparameters``)."""
        super().training(**kwargs)
        return self._set(self.sections.hyperparameters, locals())

    @property
    def algo_class(self) -> type[Algorithm]:
        """``IQL``."""
        return IQL


class IQL(Algorithm):
    """Implicit Q-learning: ``train()`` takes one step of the value, Q and policy losses per
    train batch (see ``IQLTorchLearner``)."""
