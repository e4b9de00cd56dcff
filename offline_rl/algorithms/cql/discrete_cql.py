"""Conservative Q-learning for discrete actions (Kumar et al., 2020): double Q-learning whose
loss also pushes down the values of actions the data does not take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offline_rl.algorithms.algorithm import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig
from offline_rl.algorithms.dqn.exploration import acting_model_config, exploration_problem
from offline_rl.algorithms.td_config import A_POLYAK_COEFFICIENT, NON_NEGATIVE, TDHyperparameters
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.settings.options import NotProvided, option

#: The module discrete CQL trains: a Q-network (DQN's, with no dueling head) and its target copy.
Q_MODULE = "offline_rl.models.dqn_module:DQNTorchRLModule"


@dataclass
class DiscreteCQLHyperparameters(TDHyperparameters):
    """Discrete CQL's hyperparameters (see ``DiscreteCQLConfig.training``).

    Examples:
        >>> DiscreteCQLHyperparameters(exploration_config={"type": "Greedy"}).problems()[0][0]
        'exploration_config'
    """

    min_q_weight: float = option(1.0, NON_NEGATIVE)
    tau: float = option(0.005, A_POLYAK_COEFFICIENT)
    exploration_config: dict[str, Any] = option({"type": "SoftQ", "temperature": 1.0},
                                                exploration_problem)


class DiscreteCQLConfig(AlgorithmConfig):
    """Configuration of conservative Q-learning for ``Discrete`` actions; the policy acts
    greedily on the learned Q-values, and samples its ``exploration_config`` where it explores
    (recording, the sampler).

    Examples:
        >>> config = (DiscreteCQLConfig().environment("CartPole-v1")
        ...           .training(min_q_weight=1.0, lr=3e-4)
        ...           .offline_data(input_="data/cartpole-mixed"))
        >>> config.algo_class.__name__, config.to_dict()["training"]["min_q_weight"]
        ('DiscreteCQL', 1.0)
    """

    algo_name = "DiscreteCQL"
    hyperparameters_class = DiscreteCQLHyperparameters
    learner_class_path = "offline_rl.algorithms.cql.discrete_cql_learner:DiscreteCQLTorchLearner"
    module_class_path = Q_MODULE
    action_space_class = gym.spaces.Discrete
    other_actions_hint = "for continuous actions use CQLConfig, TD3BCConfig or IQLConfig"

    def __init__(self) -> None:
        super().__init__()
        self.sections.training.lr = 3e-4
        self.sections.training.train_batch_size_per_learner = 256
        self.sections.rl_module.model_config = {"fcnet_hiddens": [256, 256],
                                                "fcnet_activation": "relu"}

    def training(self, *, gamma: float = NotProvided, n_step: int = NotProvided,
                 min_q_weight: float = NotProvided, tau: float = NotProvided,
                 exploration_config: dict[str, Any] = NotProvided,
                 **kwargs: Any) -> DiscreteCQLConfig:
        """``AlgorithmConfig.training``'s settings (``lr`` trains the Q-network) plus the
        discount ``gamma``, ``n_step`` (> 1: n-step TD targets, for inputs of whole
        episodes), the weight ``min_q_weight`` of the conservative term
        ``logsumexp_a Q(s, a) - Q(s, a_data)``, the Polyak coefficient ``tau`` of the
        target network, and the ``exploration_config`` that recording and the sampler
        sample and off-policy estimators judge, as DQN's (default ``{"type": "SoftQ",
        "temperature": 1.0}``: ``softmax(Q)``; evaluation acts greedily whatever it is)."""
        super().training(**kwargs)
        return self._set(self.sections.hyperparameters, locals())

    def get_rl_module_spec(self, observation_space: gym.Space,
                           action_space: gym.Space) -> RLModuleSpec:
        """``AlgorithmConfig``'s spec, its model config a ``DQNModelConfig`` with no dueling
        head, acting greedily unless asked to explore, with the ``exploration_config``'s
        policy."""
        spec = super().get_rl_module_spec(observation_space, action_space)
        spec.model_config = acting_model_config(
            spec.model_config, self.sections.hyperparameters.exploration_config,
            dueling=False, explore=False)
        return spec

    @property
    def algo_class(self) -> type[Algorithm]:
        """``DiscreteCQL``."""
        return DiscreteCQL


class DiscreteCQL(Algorithm):
    """Conservative Q-learning for discrete actions: ``train()`` takes one step of the TD and
    conservative losses per train batch (see ``DiscreteCQLTorchLearner``)."""
