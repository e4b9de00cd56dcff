"""RLlib's ``Policy`` surface over a trained module: what ``algo.get_policy()`` returns, and
what off-policy estimators take as their ``policy``."""

from __future__ import annotations

from typing import Any

import numpy as np

from offline_rl.evaluation.off_policy.target_policy import TargetPolicy


class Policy:
    """The policy of ``model`` (an RLModule), with RLlib's methods: ``compute_actions`` and
    ``compute_single_action`` (greedy unless ``explore``), ``compute_log_likelihoods`` of
    logged actions (their log-probability, or log-density for ``Box`` actions), and
    ``observation_space``, ``action_space`` and ``model``.

    Examples:
        >>> import gymnasium as gym
        >>> from offline_rl.models.model_config import DefaultModelConfig
        >>> from offline_rl.models.torch_rl_module import DefaultTorchRLModule
        >>> policy = Policy(DefaultTorchRLModule(gym.spaces.Box(-1, 1, (1,)),
        ...                                      gym.spaces.Discrete(2),
        ...                                      DefaultModelConfig(fcnet_hiddens=[8])))
        >>> actions, state_outs, extra = policy.compute_actions(np.zeros((3, 1)))
        >>> actions.shape, state_outs, extra
        ((3,), [], {})
        >>> logp = policy.compute_log_likelihoods(np.array([0, 1]), np.zeros((2, 1)))
        >>> bool(np.isclose(np.exp(logp).sum(), 1.0))
        True
    """

    def __init__(self, model: Any):
        self.model = model
        self.observation_space = model.observation_space
        self.action_space = model.action_space

    def compute_actions(self, obs_batch: Any, *, explore: bool = False
                        ) -> tuple[np.ndarray, list, dict[str, np.ndarray]]:
        """``(actions, state_outs, extra_fetches)`` for a batch of observations, as RLlib
        returns them (the module keeps no recurrent state, and fetches nothing more)."""
        return self.model.compute_actions(np.asarray(obs_batch, dtype=np.float32),
                                          explore=explore), [], {}

    def compute_single_action(self, obs: Any, *, explore: bool = False
                              ) -> tuple[Any, list, dict[str, Any]]:
        """``(action, state_outs, extra_fetches)`` for one observation."""
        actions, state_outs, extra = self.compute_actions(np.asarray(obs)[None],
                                                          explore=explore)
        return actions[0], state_outs, extra

    def compute_log_likelihoods(self, actions: Any, obs_batch: Any) -> np.ndarray:
        """The log-probability (log-density for ``Box`` actions) of each ``actions[i]`` at
        ``obs_batch[i]`` under the module's action distribution."""
        return np.log(TargetPolicy(self.model).probabilities(np.asarray(obs_batch),
                                                             np.asarray(actions)))
