"""TD3+BC (Fujimoto and Gu, 2021): TD3's twin-critic actor-critic with a behavior-cloning term
in the actor's loss, for ``Box`` actions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offline_rl.algorithms.algorithm import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig
from offline_rl.algorithms.td_config import (
    A_POLYAK_COEFFICIENT,
    NON_NEGATIVE,
    POSITIVE,
    TDHyperparameters,
)
from offline_rl.settings.learning_rates import LearningRate, learning_rate_problem
from offline_rl.settings.options import AN_INT_AT_LEAST_1, NotProvided, option

#: The module TD3+BC trains: the actor-critic module plus a target copy of the policy.
TD3BC_MODULE = "offline_rl.models.actor_critic_module:TargetPolicyActorCriticTorchRLModule"


@dataclass
class TD3BCHyperparameters(TDHyperparameters):
    """TD3+BC's hyperparameters (see ``TD3BCConfig.training``)."""

    actor_lr: LearningRate = option(3e-4, learning_rate_problem)
    critic_lr: LearningRate = option(3e-4, learning_rate_problem)
    alpha: float = option(2.5, POSITIVE)
    policy_noise: float = option(0.2, NON_NEGATIVE)
    noise_clip: float = option(0.5, NON_NEGATIVE)
    policy_delay: int = option(2, AN_INT_AT_LEAST_1)
    tau: float = option(0.005, A_POLYAK_COEFFICIENT)


class TD3BCConfig(AlgorithmConfig):
    """Configuration of TD3+BC (``Box`` actions only).

    Examples:
        >>> config = (TD3BCConfig().environment("Pendulum-v1")
        ...           .training(alpha=2.5, policy_delay=2)
        ...           .offline_data(input_="data/pendulum-medium"))
        >>> config.algo_class.__name__, config.to_dict()["training"]["alpha"]
        ('TD3BC', 2.5)
    """

    algo_name = "TD3BC"
    hyperparameters_class = TD3BCHyperparameters
    learner_class_path = "offline_rl.algorithms.td3bc.td3bc_learner:TD3BCTorchLearner"
    module_class_path = TD3BC_MODULE
    action_space_class = gym.spaces.Box
    other_actions_hint = "for discrete actions use IQLConfig or BCConfig"

    def __init__(self) -> None:
        super().__init__()
        self.sections.training.train_batch_size_per_learner = 256
        self.sections.rl_module.model_config = {
            "fcnet_hiddens": [256, 256], "fcnet_activation": "relu", "bound_mean": True}

    def training(self, *, actor_lr: LearningRate = NotProvided,
                 critic_lr: LearningRate = NotProvided,
                 gamma: float = NotProvided, n_step: int = NotProvided,
                 alpha: float = NotProvided,
                 policy_noise: float = NotProvided, noise_clip: float = NotProvided,
                 policy_delay: int = NotProvided, tau: float = NotProvided,
                 **kwargs: Any) -> TD3BCConfig:
        """``AlgorithmConfig.training``'s settings plus TD3+BC's: the learning rates of the
        policy and of the twin Q-networks (``lr`` is unused); the discount ``gamma``;
        ``n_step`` (> 1: n-step TD targets, for inputs of whole episodes); ``alpha``,
        the weight of the Q term against the behavior-cloning term (the Q term is normalized
        by the batch's mean ``|Q|``); target-policy smoothing noise ``policy_noise`` clipped at
        ``noise_clip`` (both as fractions of the action range's half-width); a policy (and
        target) update every ``policy_delay`` critic updates; the Polyak coefficient
        ``tau`` of the targets."""
        super().training(**kwargs)
        return self._set(self.sections.hyperparameters, locals())

    @property
    def algo_class(self) -> type[Algorithm]:
        """``TD3BC``."""
        return TD3BC


class TD3BC(Algorithm):
    """TD3+BC: ``train()`` takes one critic step per train batch and a policy step every
    ``policy_delay`` batches (see ``TD3BCTorchLearner``)."""
