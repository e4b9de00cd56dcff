"""Conservative Q-learning for discrete actions (Kumar et al., 2020): double Q-learning whose
loss also pushes down the values of actions the data does not take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offline_rl.algorithms.algorithm import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from offline_rl.algorithms.config_checks import number_problems
from offline_rl.algorithms.td_config import TDLearnerConfig, td_problems

#: The module discrete CQL trains: a Q-network acting greedily, with a target copy.
Q_MODULE = "offline_rl.models.q_module:QTorchRLModule"


@dataclass
class DiscreteCQLLearnerConfig(TDLearnerConfig):
    """``LearnerConfig`` plus discrete CQL's hyperparameters (see
    ``DiscreteCQLConfig.training``)."""

    min_q_weight: float = 1.0
    tau: float = 0.005


class DiscreteCQLConfig(AlgorithmConfig):
    """Configuration of conservative Q-learning for ``Discrete`` actions; the policy acts
    greedily on the learned Q-values.

    Example:
        >>> config = (DiscreteCQLConfig().environment("CartPole-v1")
        ...           .training(min_q_weight=1.0, lr=3e-4)
        ...           .offline_data(input_="data/cartpole-mixed"))
        >>> config.algo_class.__name__, config.to_dict()["training"]["min_q_weight"]
        ('DiscreteCQL', 1.0)
    """

    algo_name = "DiscreteCQL"
    learner_config_class = DiscreteCQLLearnerConfig
    learner_class_path = "offline_rl.algorithms.cql.discrete_cql_learner:DiscreteCQLTorchLearner"
    module_class_path = Q_MODULE
    action_space_class = gym.spaces.Discrete
    other_actions_hint = "for continuous actions use CQLConfig, TD3BCConfig or IQLConfig"

    def __init__(self) -> None:
        super().__init__()
        self.lr = 3e-4
        self.train_batch_size_per_learner = 256
        self.model_config = {"fcnet_hiddens": [256, 256], "fcnet_activation": "relu"}

    def training(self, *, gamma: float = NotProvided, n_step: int = NotProvided,
                 min_q_weight: float = NotProvided,
                 tau: float = NotProvided, **kwargs: Any) -> DiscreteCQLConfig:
        """``AlgorithmConfig.training``'s settings (``lr`` trains the Q-network) plus the
        discount ``gamma``, ``n_step`` (> 1: n-step TD targets, for inputs of whole
        episodes), the weight ``min_q_weight`` of the conservative term
        ``logsumexp_a Q(s, a) - Q(s, a_data)``, and the Polyak coefficient ``tau`` of the
        target network."""
        super().training(**kwargs)
        return self._set(locals())

    @property
    def algo_class(self) -> type[Algorithm]:
        """``DiscreteCQL``."""
        return DiscreteCQL

    def problems(self) -> list[tuple[str, str]]:
        """The base checks plus discrete CQL's ranges."""
        return super().problems() + td_problems(self) + number_problems(self, {
                        "tau": ("in (0, 1]", lambda value: 0 < value <= 1),
            "min_q_weight": (">= 0", lambda value: value >= 0)})


class DiscreteCQL(Algorithm):
    """Conservative Q-learning for discrete actions: ``train()`` takes one step of the TD and
    conservative losses per train batch (see ``DiscreteCQLTorchLearner``)."""
