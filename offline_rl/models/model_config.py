"""``DefaultModelConfig``: layer sizes and activations of the default policy network (no torch)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from offline_rl.errors import ConfigError

#: ``model_config`` activation names and the ``torch.nn`` layer class each stands for.
ACTIVATIONS = {"tanh": "Tanh", "relu": "ReLU", "silu": "SiLU", "swish": "SiLU", "elu": "ELU",
               "linear": "Identity"}


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
                    f"model_config {name}={getattr(config, name)!r}: use one of {list(ACTIVATIONS)}"
                )
        return config

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain dict."""
        return asdict(self)
