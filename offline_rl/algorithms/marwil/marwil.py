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
from offline_rl.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from offline_rl.algorithms.config_checks import number_problems
from offline_rl.core.learner_config import LearnerConfig

#: The module MARWIL trains: the default policy plus a state-value network.
POLICY_VALUE_MODULE = "offline_rl.models.value_module:PolicyValueTorchRLModule"


@dataclass
class MARWILLearnerConfig(LearnerConfig):
    """``LearnerConfig`` plus MARWIL's hyperparameters (see ``MARWILConfig.training``)."""

    beta: float = 1.0
    vf_coeff: float = 1.0
    gamma: float = 0.99
    lambda_: float = 1.0
    moving_average_sqd_adv_norm_start: float = 100.0
    moving_average_sqd_adv_norm_update_rate: float = 1e-8


class MARWILConfig(AlgorithmConfig):
    """Configuration of MARWIL (RLlib's field names and defaults). ``beta=0`` is behavior
    cloning. Its learner pipeline runs the value function in the PreLearners (see
    ``build_learner_connector``), so the mapped data is streamed, not materialized.

    Example:
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
    learner_config_class = MARWILLearnerConfig
    learner_class_path = "offline_rl.algorithms.marwil.marwil_learner:MARWILTorchLearner"
    module_class_path = POLICY_VALUE_MODULE

    def __init__(self) -> None:
        super().__init__()
        self.lr = 1e-4
        self.materialize_mapped_data = False

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
        return self._set(locals())

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
        pipeline.append(GeneralAdvantageEstimation(gamma=self.gamma, lambda_=self.lambda_))
        return pipeline

    def problems(self) -> list[tuple[str, str]]:
        """The base checks plus MARWIL's ranges."""
        return super().problems() + number_problems(self, {
            "beta": (">= 0", lambda value: value >= 0),
            "vf_coeff": (">= 0", lambda value: value >= 0),
            "gamma": ("in [0, 1]", lambda value: 0 <= value <= 1),
            "lambda_": ("in [0, 1]", lambda value: 0 <= value <= 1),
            "moving_average_sqd_adv_norm_start": ("> 0", lambda value: value > 0),
            "moving_average_sqd_adv_norm_update_rate": ("in [0, 1]",
                                                        lambda value: 0 <= value <= 1)})


class MARWIL(Algorithm):
    """MARWIL: ``train()`` takes one step of the advantage-weighted policy loss and the value
    loss per train batch (see ``MARWILTorchLearner``)."""
