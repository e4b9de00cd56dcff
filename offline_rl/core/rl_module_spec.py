"""What to build as the policy network: ``DefaultModelConfig`` and ``RLModuleSpec`` (no torch)."""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import gymnasium as gym

from offline_rl.errors import ConfigError

ACTIVATIONS = ("tanh", "relu", "silu", "swish", "elu", "linear")


@dataclass
class DefaultModelConfig:
    """Layer sizes and activations of the default MLP module (RLlib's ``model_config`` keys).

    Example:
        >>> DefaultModelConfig.from_dict({"fcnet_hiddens": [64, 64]}).fcnet_activation
        'tanh'
    """

    fcnet_hiddens: list[int] = field(default_factory=lambda: [256, 256])
    fcnet_activation: str = "tanh"
    head_fcnet_hiddens: list[int] = field(default_factory=list)
    head_fcnet_activation: str = "relu"
    free_log_std: bool = False
    log_std_clip_param: float = 20.0
    vf_share_layers: bool = True

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> DefaultModelConfig:
        """Builds a config from a dict, rejecting unknown keys by name."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown model_config key(s) {unknown}; known keys: {sorted(known)}")
        config = cls(**values)
        for name in ("fcnet_activation", "head_fcnet_activation"):
            if getattr(config, name) not in ACTIVATIONS:
                raise ConfigError(
                    f"model_config {name}={getattr(config, name)!r}: use one of {ACTIVATIONS}"
                )
        return config

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain dict."""
        return asdict(self)


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
            from offline_rl.core.torch_rl_module import DefaultTorchRLModule

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


def import_object(path: str) -> Any:
    """``"package.module:attribute"`` -> the attribute."""
    module_name, _, attribute = path.partition(":")
    if not attribute:
        raise ConfigError(f"{path!r} is not an import path of the form 'package.module:Name'")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target
