"""Policies to record with: anything ``as_batch_policy`` accepts, as a ``BatchPolicy``.

A policy is a trained ``Algorithm`` or torch module (sampled, with ``action_logp`` and
``action_dist_inputs`` recorded; a checkpoint's module comes from
``offline_rl.algorithms.checkpoint.load_module``), or a callable ``obs_batch -> actions`` that
may also return ``(actions, {"action_logp": ..., "action_dist_inputs": ...})``.

Examples:
    >>> import numpy as np
    >>> policy = as_batch_policy(lambda obs: np.zeros(len(obs), dtype=np.int64))
    >>> policy(np.zeros((3, 4)))
    (array([0, 0, 0]), {})
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.columns import Columns
from offline_rl.evaluation.rollout import BatchPolicy


def as_batch_policy(policy: Any) -> BatchPolicy:
    """Any supported policy -> ``obs_batch -> (actions, extra model outputs)``."""
    module = getattr(policy, "module", policy)
    if hasattr(module, "forward_exploration"):
        return _ModulePolicy(module)
    if not callable(policy):
        raise TypeError(f"cannot record with a {type(policy).__name__}: give an Algorithm, a "
                        "module (a checkpoint's: offline_rl.algorithms.checkpoint.load_module) "
                        "or a callable obs_batch -> actions")
    return _CallablePolicy(policy)


class _CallablePolicy:
    def __init__(self, function: Callable[[np.ndarray], Any]):
        self.function = function

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        output = self.function(obs)
        actions, extras = output if isinstance(output, tuple) else (output, {})
        return np.asarray(actions), {key: np.asarray(value) for key, value in extras.items()}


class _ModulePolicy:
    """Samples a torch module's action distribution, recording its inputs and log-probs."""

    def __init__(self, module: Any):
        self.module = module

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        import torch

        with torch.no_grad():
            obs_tensor = torch.as_tensor(obs, dtype=torch.float32)
            inputs = self.module.forward_exploration({Columns.OBS: obs_tensor})[
                Columns.ACTION_DIST_INPUTS]
            dist = self.module.get_train_action_dist_cls().from_logits(inputs)
            actions = dist.sample()
            return actions.numpy(), {Columns.ACTION_LOGP: dist.logp(actions).numpy(),
                                     Columns.ACTION_DIST_INPUTS: inputs.numpy()}


def random_policy(space: gym.Space, seed: int | None = None) -> BatchPolicy:
    """Samples ``space`` (seeded with ``seed``) for each observation: RLlib's
    ``random_actions=True``.

    Examples:
        >>> random_policy(gym.spaces.Discrete(2), seed=0)(np.zeros((3, 4)))[0].shape
        (3,)
    """
    space.seed(seed)
    return lambda obs: (np.stack([space.sample() for _ in range(len(obs))]), {})
