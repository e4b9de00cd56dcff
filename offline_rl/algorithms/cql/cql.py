"""Conservative Q-learning for continuous actions (Kumar et al., 2020): soft actor-critic whose
critic loss also pushes down the values of actions the data does not take."""

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
    TwinQHyperparameters,
)
from offline_rl.settings.learning_rates import LearningRate, learning_rate_problem
from offline_rl.settings.options import (
    A_BOOL,
    AN_INT_AT_LEAST_0,
    AN_INT_AT_LEAST_1,
    NotProvided,
    Rule,
    is_finite_number,
    option,
)

#: The module continuous CQL trains: a tanh-squashed Gaussian policy plus twin Q-networks.
SQUASHED_ACTOR_CRITIC_MODULE = (
    "offline_rl.models.actor_critic_module:SquashedActorCriticTorchRLModule")


@dataclass
class CQLHyperparameters(TwinQHyperparameters):
    """CQL's hyperparameters (see ``CQLConfig.training``)."""

    actor_lr: LearningRate = option(1e-4, learning_rate_problem)
    critic_lr: LearningRate = option(3e-4, learning_rate_problem)
    alpha_lr: LearningRate = option(1e-4, learning_rate_problem)
    tau: float = option(0.005, A_POLYAK_COEFFICIENT)
    initial_alpha: float = option(1.0, POSITIVE)
    target_entropy: float | None = option(None, Rule(
        "a finite number or None", lambda value: value is None or is_finite_number(value)))
    soft_q_backup: bool = option(False, A_BOOL)
    min_q_weight: float = option(5.0, NON_NEGATIVE)
    num_actions: int = option(10, AN_INT_AT_LEAST_1)
    temperature: float = option(1.0, POSITIVE)
    bc_iters: int = option(0, AN_INT_AT_LEAST_0)
    lagrangian: bool = option(False, A_BOOL)
    lagrangian_thresh: float = option(5.0)
    #: RLlib's SAC option, accepted and checked; offline it changes nothing (see
    #: ``CQLConfig.training``).
    num_steps_sampled_before_learning_starts: int = option(1500, AN_INT_AT_LEAST_0)


class CQLConfig(AlgorithmConfig):
    """Configuration of conservative Q-learning for ``Box`` actions (RLlib's ``CQLConfig``
    names, on SAC; for ``Discrete`` actions use ``DiscreteCQLConfig``).

    Examples:
        >>> config = (CQLConfig().environment("Pendulum-v1")
        ...           .training(min_q_weight=5.0, num_actions=10, lagrangian=True)
        ...           .offline_data(input_="data/pendulum-mixed"))
        >>> config.algo_class.__name__, config.to_dict()["training"]["lagrangian"]
        ('CQL', True)
    """

    algo_name = "CQL"
    hyperparameters_class = CQLHyperparameters
    learner_class_path = "offline_rl.algorithms.cql.cql_learner:CQLTorchLearner"
    module_class_path = SQUASHED_ACTOR_CRITIC_MODULE
    action_space_class = gym.spaces.Box
    other_actions_hint = "for discrete actions use DiscreteCQLConfig"

    def __init__(self) -> None:
        super().__init__()
        self.sections.training.train_batch_size_per_learner = 256
        self.sections.rl_module.model_config = {
            "fcnet_hiddens": [256, 256], "fcnet_activation": "relu", "log_std_clip_param": 10.0}

    def training(self, *, actor_lr: LearningRate = NotProvided,
                 critic_lr: LearningRate = NotProvided,
                 alpha_lr: LearningRate = NotProvided, gamma: float = NotProvided,
                 n_step: int = NotProvided,
                 tau: float = NotProvided, initial_alpha: float = NotProvided,
                 target_entropy: float | None = NotProvided, soft_q_backup: bool = NotProvided,
                 min_q_weight: float = NotProvided, num_actions: int = NotProvided,
                 temperature: float = NotProvided, bc_iters: int = NotProvided,
                 lagrangian: bool = NotProvided, lagrangian_thresh: float = NotProvided,
                 twin_q: bool = NotProvided,
                 target_network_update_freq: int = NotProvided,
                 clip_actions: bool = NotProvided,
                 num_steps_sampled_before_learning_starts: int = NotProvided,
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
        for the first ``bc_iters`` updates the policy is trained by behavior cloning.
        RLlib's ``twin_q`` and ``target_network_update_freq``: see ``TwinQHyperparameters``.
        RLlib's SAC option ``clip_actions`` is ``environment(clip_actions=...)``, one setting
        in RLlib as here (the squashed policy's actions lie within the action space already);
        ``num_steps_sampled_before_learning_starts`` is accepted and changes nothing, as in
        RLlib's CQL on offline data: the data is all there before the first update (RLlib's
        CQL does not read the count either)."""
        super().training(**kwargs)
        if clip_actions is not NotProvided:
            self.environment(clip_actions=clip_actions)
        return self._set(self.sections.hyperparameters, locals())

    @property
    def algo_class(self) -> type[Algorithm]:
        """``CQL``."""
        return CQL


class CQL(Algorithm):
    """Conservative Q-learning for continuous actions: ``train()`` takes one step of the
    critic (TD plus conservative penalty), policy and temperature losses per train batch (see
    ``CQLTorchLearner``)."""
