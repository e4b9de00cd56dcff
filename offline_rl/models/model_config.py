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

    Examples:
        >>> DefaultModelConfig.from_dict({"fcnet_hiddens": [64, 64]}).fcnet_activation
        'tanh'
    """

    #: A convolutional encoder before the MLP, for image-like ``(height, width, channels)``
    #: observations: one ``[out_channels, kernel, stride]`` per layer, ``"same"`` padding
    #: (RLlib's ``conv_filters``); ``None``: the MLP reads the flattened observation. Only the
    #: policy module of BC builds one (``DefaultTorchRLModule``); the others refuse it.
    conv_filters: list[list[int]] | None = None
    conv_activation: str = "relu"
    fcnet_hiddens: list[int] = field(default_factory=lambda: [256, 256])
    fcnet_activation: str = "tanh"
    head_fcnet_hiddens: list[int] = field(default_factory=list)
    head_fcnet_activation: str = "relu"
    free_log_std: bool = False
    log_std_clip_param: float = 20.0
    #: ``[low, high]`` to clip the log std into, in place of ``±log_std_clip_param``.
    log_std_bounds: list[float] | None = None
    #: ``Box`` actions: squash the Gaussian's mean into the action bounds with ``tanh``.
    bound_mean: bool = False
    vf_share_layers: bool = True
    #: Standardize observations with the dataset's per-feature mean and std (``Box`` only).
    normalize_observations: bool = False
    #: The statistics; computed from the offline data at ``build()`` when left ``None``.
    observation_mean: list[float] | None = None
    observation_std: list[float] | None = None

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> DefaultModelConfig:
        """Builds a config from a dict, rejecting unknown keys by name."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown model_config key(s) {unknown}; known keys: {sorted(known)}")
        config = cls(**values)
        for name in ("fcnet_hiddens", "head_fcnet_hiddens"):
            sizes = getattr(config, name)
            if not isinstance(sizes, list | tuple) or not all(
                    isinstance(units, int) and not isinstance(units, bool) and units >= 1
                    for units in sizes):
                raise ConfigError(f"model_config {name}={sizes!r}: give a list of layer sizes, "
                                  "each an int >= 1 (units), e.g. [256, 256]")
        filters = config.conv_filters
        if filters is not None and not (isinstance(filters, list | tuple) and filters and all(
                isinstance(layer, list | tuple) and len(layer) == 3
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in layer)
                for layer in filters)):
            raise ConfigError(f"model_config conv_filters={filters!r}: give a list of "
                              "[out_channels, kernel, stride] per layer, each an int >= 1, "
                              "e.g. [[16, 4, 2], [32, 4, 2]]")
        for name in ("fcnet_activation", "head_fcnet_activation", "conv_activation"):
            if getattr(config, name) not in ACTIVATIONS:
                raise ConfigError(
                    f"model_config {name}={getattr(config, name)!r}: use one of {list(ACTIVATIONS)}"
                )
        given = [config.observation_mean is not None, config.observation_std is not None]
        if any(given) and not (all(given) and config.normalize_observations):
            raise ConfigError("model_config observation_mean and observation_std go together, "
                              "with normalize_observations=True")
        bounds = config.log_std_bounds
        if bounds is not None and not (len(bounds) == 2 and bounds[0] < bounds[1]):
            raise ConfigError(f"model_config log_std_bounds={bounds!r}: give [low, high] with "
                              "low < high, e.g. [-5.0, 2.0]")
        return config

    def log_std_range(self) -> tuple[float, float]:
        """The ``(low, high)`` the log std is clipped into."""
        if self.log_std_bounds is not None:
            return tuple(self.log_std_bounds)
        return -self.log_std_clip_param, self.log_std_clip_param

    def to_dict(self) -> dict[str, Any]:
        """The config as a plain dict."""
        return asdict(self)

    def changed(self) -> dict[str, Any]:
        """The fields whose values differ from the class's defaults.

        Examples:
            >>> DefaultModelConfig(fcnet_hiddens=[64], fcnet_activation="tanh").changed()
            {'fcnet_hiddens': [64]}
        """
        defaults = asdict(type(self)())
        return {name: value for name, value in asdict(self).items() if value != defaults[name]}


@dataclass
class DQNModelConfig(DefaultModelConfig):
    """``DefaultModelConfig`` plus what DQN's module reads from ``DQNConfig.training`` (as
    RLlib's DQN adds its ``dueling`` and exploration settings to the model config): the
    network's head, and the policy it acts with.

    Examples:
        >>> config = DQNModelConfig(fcnet_hiddens=[64], dueling=True, softq_temperature=0.5)
        >>> config.dueling, config.softq_temperature, config.epsilon, config.explore
        (True, 0.5, 0.0, True)
    """

    #: Separate value and advantage heads, combined as ``V + A - mean(A)``.
    dueling: bool = False
    #: Act by sampling ``softmax(Q / softq_temperature)`` (``None``: epsilon-greedily).
    softq_temperature: float | None = None
    #: Without a temperature: the greedy action with probability ``1 - epsilon``, else a
    #: uniformly random one (0: greedy).
    epsilon: float = 0.0
    #: Whether ``compute_actions`` samples that policy by default (else acts greedily).
    explore: bool = True
