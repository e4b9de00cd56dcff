"""MARWIL (Wang et al., 2018): behavior cloning weighted by the exponentiated advantage of
each logged action, with advantages from a value function learned alongside the policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from connectors import (
    AddNextObservationsFromEpisodesToTrainBatch,
    AddObservationsFromEpisodesToBatch,
    AddOneTsToEpisodesAndTruncate,
    ConnectorPipelineV2,
    GeneralAdvantageEstimation,
)
from offline_rl.algorithms.algorithm import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig
from offline_rl.algorithms.td_config import A_DISCOUNT, NON_NEGATIVE, POSITIVE
from offline_rl.settings.hyperparameters import Hyperparameters
from offline_rl.settings.options import NotProvided, option

#: The module MARWIL trains: the default policy plus a state-value network.
POLICY_VALUE_MODULE = "offline_rl.models.value_module:PolicyValueTorchRLModule"


@dataclass
class MARWILHyperparameters(Hyperparameters):
    """MARWIL's hyperparameters (see ``MARWILConfig.training``)."""

    beta: float = option(1.0, NON_NEGATIVE)
    vf_coeff: float = option(1.0, NON_NEGATIVE)
    gamma: float = option(0.99, A_DISCOUNT)
    lambda_: float = option(1.0, A_DISCOUNT)
    moving_average_sqd_adv_norm_start: float = option(100.0, POSITIVE)
    moving_average_sqd_adv_norm_update_rate: float = option(1e-8, A_DISCOUNT)


class MARWILConfig(AlgorithmConfig):
    """Configuration of MARWIL (RLlib's field names and defaults). ``beta=0`` is behavior
    cloning. Its learner pipeline runs the value function in the PreLearners (see
    ``build_learner_connector``), so the mapped data is streamed, not materialized.

    Examples:
        >>> config = (MARWILConfig().environment("CartPole-v1")
        ...           .training(beta=1.0, vf_coeff=1.0, lambda_=0.95)
        ...           .offline_data(input_="data/cartpole-mixed"))
        >>> config.algo_class.__name__, config.materialize_mapped_data
        ('MARWIL', False)
        >>> import gymnasium as gym
        >>> pipeline = config.build_learner_connector(gym.spaces.Box(-1, 1, (4,)),
        ...                                           gym.spaces.Discrete(2))
        >>> [piece.name for piece in pipeline]  # doctest: +NORMALIZE_WHITESPACE
        ['AddOneTsToEpisodesAndTruncate', 'AddObservationsFromEpisodesToBatch',
         'AddNextObservationsFromEpisodesToTrainBatch', 'AddColumnsFromEpisodesToTrainBatch',
         'AddNextObservationsFromEpisodesToTrainBatch', 'BatchIndividualItems',
         'GeneralAdvantageEstimation']
    """

    algo_name = "MARWIL"
    hyperparameters_class = MARWILHyperparameters
    learner_class_path = "offline_rl.algorithms.marwil.marwil_learner:MARWILTorchLearner"
    module_class_path = POLICY_VALUE_MODULE

    def __init__(self) -> None:
        super().__init__()
        self.sections.training.lr = 1e-4
        self.sections.offline_data.materialize_mapped_data = False

    def training(self, *, beta: float = NotProvided, vf_coeff: float = NotProvided,
                 gamma: float = NotProvided, lambda_: float = NotProvided,
                 moving_average_sqd_adv_norm_start: float = NotProvided,
                 moving_average_sqd_adv_norm_update_rate: float = NotProvided,
                 **kwargs: Any) -> MARWILConfig:
        """``AlgorithmConfig.training``'s settings plus MARWIL's: ``beta``, the inverse
        temperature of the advantage weights ``exp(beta * A / c)`` (0: behavior cloning);
        ``vf_coeff``, the value loss's weight; ``gamma`` and ``lambda_`` of the generalized
        advantage estimates; ``c``, the square root of a moving average of the squared
        advantages, starts at ``sqrt(moving_average_sqd_adv_norm_start)`` and moves by
        ``moving_average_sqd_adv_norm_update_rate`` per update."""
        super().training(**kwargs)
        return self._set(self.sections.hyperparameters, locals())

    @property
    def algo_class(self) -> type[Algorithm]:
        """``MARWIL``."""
        return MARWIL

    def build_learner_connector(self, input_observation_space: gym.Space | None,
                                input_action_space: gym.Space | None,
                                device: Any = None) -> ConnectorPipelineV2:
        """The default pipeline with one artificial timestep added to each episode first, the
        next observations right after the observations, and the advantages last (RLlib's
        MARWIL pipeline, as the seeds show it)."""
        pipeline = super().build_learner_connector(input_observation_space, input_action_space,
                                                   device)
        pipeline.prepend(AddOneTsToEpisodesAndTruncate())
        pipeline.insert_after(AddObservationsFromEpisodesToBatch,
                              AddNextObservationsFromEpisodesToTrainBatch())
        hyperparameters = self.sections.hyperparameters
        pipeline.append(GeneralAdvantageEstimation(gamma=hyperparameters.gamma,
                                                   lambda_=hyperparameters.lambda_))
        return pipeline


class MARWIL(Algorithm):
    """MARWIL: ``train()`` takes one step of the advantage-weighted policy loss and the value
    loss per train batch (see ``MARWILTorchLearner``)."""
