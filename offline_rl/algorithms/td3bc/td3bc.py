"""TD3+BC (Fujimoto and Gu, 2021): TD3's twin-critic actor-critic with a behavior-cloning term
in the actor's loss, for ``Box`` actions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offline_rl.algorithms.algorithm import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from offline_rl.algorithms.config_checks import learning_rate_problems, number_problems
from offline_rl.algorithms.td_config import TDLearnerConfig, td_problems
from offline_rl.core.schedules import LearningRate

#: The module TD3+BC trains: the actor-critic module plus a target copy of the policy.
TD3BC_MODULE = "offline_rl.models.actor_critic_module:TargetPolicyActorCriticTorchRLModule"


@dataclass
class TD3BCLearnerConfig(TDLearnerConfig):
    """``LearnerConfig`` plus TD3+BC's hyperparameters (see ``TD3BCConfig.training``)."""

    actor_lr: LearningRate = 3e-4
    critic_lr: LearningRate = 3e-4
    alpha: float = 2.5
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    policy_delay: int = 2
    tau: float = 0.005


class TD3BCConfig(AlgorithmConfig):
    """Configuration of TD3+BC (``Box`` actions only).

    Example:
        >>> config = (TD3BCConfig().environment("Pendulum-v1")
        ...           .training(alpha=2.5, policy_delay=2)
        ...           .offline_data(input_="data/pendulum-medium"))
        >>> config.algo_class.__name__, config.to_dict()["training"]["alpha"]
        ('TD3BC', 2.5)
    """

    algo_name = "TD3BC"
    learner_config_class = TD3BCLearnerConfig
    learner_class_path = "offline_rl.algorithms.td3bc.td3bc_learner:TD3BCTorchLearner"
    module_class_path = TD3BC_MODULE
    action_space_class = gym.spaces.Box
    other_actions_hint = "for discrete actions use IQLConfig or BCConfig"

    def __init__(self) -> None:
        super().__init__()
        self.train_batch_size_per_learner = 256
        self.model_config = {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu",
                             "bound_mean": True}

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
        return self._set(locals())

    @property
    def algo_class(self) -> type[Algorithm]:
        """``TD3BC``."""
        return TD3BC

    def problems(self) -> list[tuple[str, str]]:
        """The base checks plus TD3+BC's ranges."""
        wanted = {"tau": ("in (0, 1]", lambda value: 0 < value <= 1),
                  "policy_noise": (">= 0", lambda value: value >= 0),
                  "noise_clip": (">= 0", lambda value: value >= 0),
                  "alpha": ("> 0", lambda value: value > 0)}
        problems = (super().problems() + td_problems(self) + number_problems(self, wanted)
                    + learning_rate_problems(self, ["actor_lr", "critic_lr"]))
        if isinstance(self.policy_delay, bool) or not (isinstance(self.policy_delay, int)
                                                       and self.policy_delay >= 1):
            problems.append(("policy_delay", f"must be an int >= 1, got {self.policy_delay!r}"))
        return problems


class TD3BC(Algorithm):
    """TD3+BC: ``train()`` takes one critic step per train batch and a policy step every
    ``policy_delay`` batches (see ``TD3BCTorchLearner``)."""
