"""Deep Q-networks (Mnih et al., 2015) trained from logged data, with RLlib's DQN options:
double Q-learning, a dueling head, n-step targets and periodic target-network updates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offline_rl.algorithms.algorithm import Algorithm
from offline_rl.algorithms.algorithm_config import AlgorithmConfig
from offline_rl.algorithms.dqn.exploration import acting_model_config, exploration_problem
from offline_rl.algorithms.td_config import A_POLYAK_COEFFICIENT, TDHyperparameters
from offline_rl.models.rl_module_spec import RLModuleSpec
from offline_rl.settings.options import A_BOOL, AN_INT_AT_LEAST_1, NotProvided, one_of, option


@dataclass
class DQNHyperparameters(TDHyperparameters):
    """DQN's hyperparameters (see ``DQNConfig.training``).

    Examples:
        >>> DQNHyperparameters(td_error_loss_fn="l1").problems()
        [('td_error_loss_fn', "must be one of ('huber', 'mse'), got 'l1'")]
    """

    double_q: bool = option(True, A_BOOL)
    dueling: bool = option(True, A_BOOL)
    target_network_update_freq: int = option(32000, AN_INT_AT_LEAST_1)
    tau: float = option(1.0, A_POLYAK_COEFFICIENT)
    td_error_loss_fn: str = option("huber", one_of("huber", "mse"))
    exploration_config: dict[str, Any] = option({}, exploration_problem)
    explore: bool = option(True, A_BOOL)


class DQNConfig(AlgorithmConfig):
    """Configuration of DQN for ``Discrete`` actions, learned from logged transitions alone
    (no exploration of an env: nothing keeps the Q-values of actions the data never takes in
    check, which ``DiscreteCQLConfig`` adds).

    Options of RLlib's DQN for a learned return distribution or a prioritized buffer
    (``num_atoms``, ``noisy``, ``v_min``/``v_max``, prioritized ``replay_buffer_config``) are
    not options here: giving one is an error as for any unknown key. ``training_intensity`` is
    a shared ``training`` option, for the ``"sampler"``'s share of ``input_``.

    Examples:
        >>> config = (DQNConfig().environment("CartPole-v1")
        ...           .training(n_step=3, exploration_config={"type": "SoftQ",
        ...                                                   "temperature": 0.5})
        ...           .offline_data(input_="data/cartpole-mixed", input_read_episodes=True))
        >>> config.algo_class.__name__, config.to_dict()["training"]["double_q"]
        ('DQN', True)
    """

    algo_name = "DQN"
    hyperparameters_class = DQNHyperparameters
    learner_class_path = "offline_rl.algorithms.dqn.dqn_learner:DQNTorchLearner"
    module_class_path = "offline_rl.models.dqn_module:DQNTorchRLModule"
    action_space_class = gym.spaces.Discrete
    other_actions_hint = "for continuous actions use CQLConfig, TD3BCConfig or IQLConfig"

    def __init__(self) -> None:
        super().__init__()
        training = self.sections.training
        training.lr = 5e-4
        training.train_batch_size_per_learner = 256
        training.grad_clip = 40.0
        self.sections.rl_module.model_config = {"fcnet_hiddens": [256, 256],
                                                "fcnet_activation": "relu"}

    def training(self, *, gamma: float = NotProvided, n_step: int = NotProvided,
                 double_q: bool = NotProvided, dueling: bool = NotProvided,
                 target_network_update_freq: int = NotProvided, tau: float = NotProvided,
                 td_error_loss_fn: str = NotProvided,
                 exploration_config: dict[str, Any] = NotProvided,
                 explore: bool = NotProvided, **kwargs: Any) -> DQNConfig:
        """``AlgorithmConfig.training``'s settings (``lr`` trains the Q-network; DQN's
        defaults: ``lr=5e-4``, ``grad_clip=40``, batches of 256 rows) plus:

        - ``gamma``, ``n_step`` (> 1: n-step TD targets, for inputs of whole episodes);
        - ``double_q``: the Q-network picks the next action, the target network values it
          (else the target network's max);
        - ``dueling``: value and advantage heads, ``Q = V + A - mean(A)``;
        - ``target_network_update_freq`` and ``tau``: each time the rows trained on (over all
          learners) pass a multiple of ``target_network_update_freq``, the target network
          moves ``tau`` of the way to the Q-network (RLlib's semantics, counting trained rows
          as offline training samples none; ``tau=1``: a copy). The default 32000 copies every
          125 updates of 256 rows, as RLlib's default of 500 env steps does online at one
          update per 4 steps sampled (copies every 31 updates made the Q-values diverge on
          CartPole data);
        - ``td_error_loss_fn``: ``"huber"`` (delta 1) or ``"mse"`` of the TD error;
        - ``exploration_config``: the policy acted with: ``{}`` greedy, ``{"type": "SoftQ",
          "temperature": T}`` Boltzmann over ``Q / T``, ``{"type": "EpsilonGreedy",
          "final_epsilon": e}``. Recording samples it and off-policy estimators judge it,
          whatever ``explore`` says (SoftQ gives every action a probability);
        - ``explore``: whether ``compute_actions`` (and so env evaluation) samples that
          policy by default, else acts greedily on Q."""
        super().training(**kwargs)
        return self._set(self.sections.hyperparameters, locals())

    def get_rl_module_spec(self, observation_space: gym.Space,
                           action_space: gym.Space) -> RLModuleSpec:
        """``AlgorithmConfig``'s spec, its model config a ``DQNModelConfig`` carrying
        ``dueling``, ``explore`` and the ``exploration_config``'s policy."""
        spec = super().get_rl_module_spec(observation_space, action_space)
        hyperparameters = self.sections.hyperparameters
        spec.model_config = acting_model_config(
            spec.model_config, hyperparameters.exploration_config,
            dueling=hyperparameters.dueling, explore=hyperparameters.explore)
        return spec

    @property
    def algo_class(self) -> type[Algorithm]:
        """``DQN``."""
        return DQN


class DQN(Algorithm):
    """DQN from logged data: ``train()`` takes one TD step per train batch (see
    ``DQNTorchLearner``)."""
