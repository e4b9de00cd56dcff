"""RLlib's ``normalize_actions`` and ``clip_actions`` on the env side: the env an algorithm
evaluates, records and samples in takes the module's actions, normalized to [-1, 1]
(unsquashed onto the env's ``Box``) and/or clipped into its bounds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.evaluation.rollout import EnvSpec, make_env
from offline_rl.formats.checks import clip_actions, unsquash_actions
from offline_rl.settings.environment import EnvironmentConfig
from offline_rl.spaces import normalized_action_space


class ActionsFromModule(gym.ActionWrapper):
    """An env with ``Box`` actions taking the module's: with ``normalize``, actions in
    [-1, 1] (its ``action_space``), unsquashed onto the env's bounds; with ``clip``, clipped
    into the bounds of the space acted in first."""

    def __init__(self, env: gym.Env, *, normalize: bool, clip: bool):
        super().__init__(env)
        self.normalize, self.clip = normalize, clip
        if normalize:
            self.action_space = normalized_action_space(env.action_space)

    def action(self, action: Any) -> np.ndarray:
        array = np.asarray(action, dtype=self.env.action_space.dtype)
        if self.clip:
            array = clip_actions(array, self.action_space)
        return unsquash_actions(array, self.env.action_space) if self.normalize else array


@dataclass(frozen=True)
class ModuleActionsEnv:
    """An env creator ``env_config -> env``: ``env`` (a gymnasium id or creator) made, its
    ``Box`` actions wrapped in ``ActionsFromModule``."""

    env: EnvSpec
    normalize_actions: bool
    clip_actions: bool

    def __call__(self, env_config: dict[str, Any]) -> gym.Env:
        made = make_env(self.env, env_config)
        if not isinstance(made.action_space, gym.spaces.Box):
            return made
        return ActionsFromModule(made, normalize=self.normalize_actions,
                                 clip=self.clip_actions)


def env_to_make(environment: EnvironmentConfig) -> EnvSpec | None:
    """What to make the env of ``environment`` with: its ``env``, or with
    ``normalize_actions``/``clip_actions`` a ``ModuleActionsEnv`` of it.

    Examples:
        >>> from offline_rl.settings.environment import EnvironmentConfig
        >>> env = make_env(env_to_make(EnvironmentConfig(env="Pendulum-v1",
        ...                                              normalize_actions=True)))
        >>> env.action_space
        Box(-1.0, 1.0, (1,), float32)
        >>> _ = env.reset(seed=0)
        >>> _ = env.step(np.array([0.5], np.float32))
        >>> float(env.unwrapped.last_u)   # half of Pendulum's torque bound, 2
        1.0
    """
    if environment.env is None or not (environment.normalize_actions
                                       or environment.clip_actions):
        return environment.env
    return ModuleActionsEnv(environment.env, environment.normalize_actions,
                            environment.clip_actions)
