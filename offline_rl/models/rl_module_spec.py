"""``RLModuleSpec``: what to build as the policy network (no torch until ``build()``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from offline_rl.errors import ConfigError
from offline_rl.import_path import import_object
from offline_rl.models.model_config import DefaultModelConfig


@dataclass
class RLModuleSpec:
    """Everything needed to build an RLModule: its class, spaces and model config.

    ``module_class`` may be a class or a ``"package.module:ClassName"`` string; by default the MLP
    ``DefaultTorchRLModule``.

    Example:
        >>> import gymnasium as gym
        >>> spec = RLModuleSpec(observation_space=gym.spaces.Box(-1, 1, (4,)),
        ...                     action_space=gym.spaces.Discrete(2))
        >>> spec.build().compute_actions([[0.0, 0.0, 0.0, 0.0]]).shape
        (1,)
    """

    module_class: type | str | None = None
    observation_space: gym.Space | None = None
    action_space: gym.Space | None = None
    model_config: DefaultModelConfig | dict[str, Any] | None = None

    def build(self) -> Any:
        """Builds the module (imports torch)."""
        module_class = self.module_class
        if module_class is None:
            from offline_rl.models.torch_rl_module import DefaultTorchRLModule

            module_class = DefaultTorchRLModule
        elif isinstance(module_class, str):
            module_class = import_object(module_class)
        model_config = self.model_config
        if not isinstance(model_config, DefaultModelConfig):
            model_config = DefaultModelConfig.from_dict(model_config or {})
        if self.observation_space is None or self.action_space is None:
            raise ConfigError("RLModuleSpec needs observation_space and action_space to build")
        return module_class(
            observation_space=self.observation_space,
            action_space=self.action_space,
            model_config=model_config,
        )
