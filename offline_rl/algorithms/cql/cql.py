"""Conservative Q-learning for continuous actions (Kumar et al., 2020): soft actor-critic whose
critic loss also pushes down the values of actions the data does not take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offline_rl.algorithms.algorithm import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from offline_rl.algorithms.config_checks import learning_rate_problems, number_problems
from offline_rl.algorithms.td_config import TDLearnerConfig, td_problems
from offline_rl.core.schedules import LearningRate

#: The module continuous CQL trains: a tanh-squashed Gaussian policy plus twin Q-networks.
SQUASHED_ACTOR_CRITIC_MODULE = (
    "offline_rl.models.actor_critic_module:SquashedActorCriticTorchRLModule")


@dataclass
class CQLLearnerConfig(TDLearnerConfig):
    """``LearnerConfig`` plus CQL's hyperparameters (see ``CQLConfig.training``)."""

    actor_lr: LearningRate = 1e-4
    critic_lr: LearningRate = 3e-4
    alpha_lr: LearningRate = 1e-4
    tau: float = 0.005
    initial_alpha: float = 1.0
    target_entropy: float | None = None
    soft_q_backup: bool = False
    min_q_weight: float = 5.0
    num_actions: int = 10
    temperature: float = 1.0
    bc_iters: int = 0
    lagrangian: bool = False
    lagrangian_thresh: float = 5.0


class CQLConfig(AlgorithmConfig):
    """Configuration of conservative Q-learning for ``Box`` actions (RLlib's ``CQLConfig``
    names, on SAC; for ``Discrete`` actions use ``DiscreteCQLConfig``).

    Example:
        >>> config = (CQLConfig().environment("Pendulum-v1")
        ...           .training(min_q_weight=5.0, num_actions=10, lagrangian=True)
        ...           .offline_data(input_="data/pendulum-mixed"))
        >>> config.algo_class.__name__, config.to_dict()["training"]["lagrangian"]
        ('CQL', True)
    """

    algo_name = "CQL"
    learner_config_class = CQLLearnerConfig
    learner_class_path = "offline_rl.algorithms.cql.cql_learner:CQLTorchLearner"
    module_class_path = SQUASHED_ACTOR_CRITIC_MODULE
    action_space_class = gym.spaces.Box
    other_actions_hint = "for discrete actions use DiscreteCQLConfig"

    def __init__(self) -> None:
        super().__init__()
        self.train_batch_size_per_learner = 256
        self.model_config = {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu",
                             "log_std_clip_param": 10.0}

    def training(self, *, actor_lr: LearningRate = NotProvided,
                 critic_lr: LearningRate = NotProvided,
                 alpha_lr: LearningRate = NotProvided, gamma: float = NotProvided,
                 n_step: int = NotProvided,
                 tau: float = NotProvided, initial_alpha: float = NotProvided,
                 target_entropy: float | None = NotProvided, soft_q_backup: bool = NotProvided,
                 min_q_weight: float = NotProvided, num_actions: int = NotProvided,
                 temperature: float = NotProvided, bc_iters: int = NotProvided,
                 lagrangian: bool = NotProvided, lagrangian_thresh: float = NotProvided,
                 **kwargs: Any) -> CQLConfig:
        """``AlgorithmConfig.training``'s settings plus CQL's. SAC's part: the learning rates
        of the policy, the twin Q-networks and the entropy temperature (``lr`` is unused);
        ``gamma``; ``n_step`` (> 1: n-step TD targets, for inputs of whole episodes); the
        Polyak coefficient ``tau`` of the target Q-networks; the temperature starts at
        ``initial_alpha`` and is tuned towards ``target_entropy`` (``None``: minus the action
        dimension). The TD target values ``s'`` at the policy's mean action there (as d3rlpy
        does: on Pendulum ``mixed``, 3000 updates, 3 seeds, normalized 90 against 78 with a
        sampled action); ``soft_q_backup`` makes it SAC's, at a sampled action less the
        entropy term.
        CQL's part: ``min_q_weight`` times ``temperature * logsumexp(Q / temperature)`` over
        ``num_actions`` uniform actions and as many policy actions at ``s`` and ``s'`` (each
        less its log-density), minus ``Q(s, a_data)``; with ``lagrangian`` that weight is
        also scaled by a multiplier (learning rate ``alpha_lr``) tuned so the penalty stays
        near ``lagrangian_thresh``;
        for the first ``bc_iters`` updates the policy is trained by behavior cloning."""
        super().training(**kwargs)
        return self._set(locals())

    @property
    def algo_class(self) -> type[Algorithm]:
        """``CQL``."""
        return CQL

    def problems(self) -> list[tuple[str, str]]:
        """The base checks plus CQL's ranges."""
        problems = super().problems() + td_problems(self) + number_problems(self, {
                        "tau": ("in (0, 1]", lambda value: 0 < value <= 1),
            "min_q_weight": (">= 0", lambda value: value >= 0),
            **{field: ("> 0", lambda value: value > 0)
               for field in ("initial_alpha", "temperature")}})
        problems += learning_rate_problems(self, ["actor_lr", "critic_lr", "alpha_lr"])
        for field, minimum in (("num_actions", 1), ("bc_iters", 0)):
            value = getattr(self, field)
            if isinstance(value, bool) or not (isinstance(value, int) and value >= minimum):
                problems.append((field, f"must be an int >= {minimum}, got {value!r}"))
        if self.target_entropy is not None:
            problems += number_problems(self, {"target_entropy": ("or None", lambda _: True)})
        return problems


class CQL(Algorithm):
    """Conservative Q-learning for continuous actions: ``train()`` takes one step of the
    critic (TD plus conservative penalty), policy and temperature losses per train batch (see
    ``CQLTorchLearner``)."""
