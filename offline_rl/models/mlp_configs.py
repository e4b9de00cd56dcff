"""``MLPEncoderConfig`` and ``MLPHeadConfig``: RLlib's configs of the MLP pieces a custom
``TorchRLModule`` builds in ``setup()`` (``config.build(framework="torch")``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from offline_rl.columns import Columns
from offline_rl.errors import ConfigError
from offline_rl.models.model_config import ACTIVATIONS

#: The key of an encoder's output (RLlib's ``ray.rllib.core.models.base.ENCODER_OUT``).
ENCODER_OUT = "encoder_out"
Initializer = str | Callable[..., Any] | None


@dataclass
class _MLPConfig:
    """An MLP: ``hidden_layer_dims`` layers, each followed by ``hidden_layer_activation``
    (after a ``LayerNorm`` with ``hidden_layer_use_layernorm``), then, with
    ``output_layer_dim``, one output layer with its own activation. Initializers are
    ``torch.nn.init`` functions (in-place, ending in ``_``) or their names; their
    ``*_config`` dicts are their keywords. ``clip_log_std`` clips the second half of the
    outputs (a Gaussian's log std) to ``±log_std_clip_param``."""

    input_dims: list[int] | tuple[int, ...] | None = None
    hidden_layer_dims: list[int] | tuple[int, ...] = (256, 256)
    hidden_layer_use_bias: bool = True
    hidden_layer_activation: str | None = "relu"
    hidden_layer_use_layernorm: bool = False
    hidden_layer_weights_initializer: Initializer = None
    hidden_layer_weights_initializer_config: dict[str, Any] | None = None
    hidden_layer_bias_initializer: Initializer = None
    hidden_layer_bias_initializer_config: dict[str, Any] | None = None
    output_layer_dim: int | None = None
    output_layer_use_layernorm: bool = False
    output_layer_use_bias: bool = True
    output_layer_activation: str | None = "linear"
    output_layer_weights_initializer: Initializer = None
    output_layer_weights_initializer_config: dict[str, Any] | None = None
    output_layer_bias_initializer: Initializer = None
    output_layer_bias_initializer_config: dict[str, Any] | None = None
    clip_log_std: bool = False
    log_std_clip_param: float = 20.0
    always_check_shapes: bool = False

    @property
    def output_dims(self) -> tuple[int]:
        """``(output_layer_dim,)``, else the last hidden layer's size."""
        self._check_layers()
        return (int(self.output_layer_dim or self.hidden_layer_dims[-1]),)

    def _check_layers(self) -> None:
        if self.output_layer_dim is None and not self.hidden_layer_dims:
            raise ConfigError(f"{type(self).__name__}: give output_layer_dim or at least one "
                              "hidden layer (hidden_layer_dims=[32], say)")

    def _network(self, framework: str) -> nn.Sequential:
        """The layers; ``ConfigError`` for another framework than torch or bad sizes."""
        name = type(self).__name__
        if framework != "torch":
            raise ConfigError(f"{name}.build(framework={framework!r}): offline-rl builds "
                              "torch models only; use framework='torch'")
        if not self.input_dims or len(self.input_dims) != 1:
            raise ConfigError(f"{name} input_dims={self.input_dims!r}: give the input's size "
                              "as a one-entry list, e.g. [4]")
        self._check_layers()
        layers: list[nn.Module] = []
        size = int(self.input_dims[0])
        for units in self.hidden_layer_dims:
            layers += self._layer(size, int(units), "hidden_layer")
            size = int(units)
        if self.output_layer_dim is not None:
            layers += self._layer(size, int(self.output_layer_dim), "output_layer")
        return nn.Sequential(*layers)

    def _layer(self, size_in: int, size_out: int, kind: str) -> list[nn.Module]:
        """One linear layer of ``kind`` (``hidden_layer`` or ``output_layer``) with its
        initializers, optional ``LayerNorm`` and activation."""
        linear = nn.Linear(size_in, size_out, bias=getattr(self, f"{kind}_use_bias"))
        _initialize(linear.weight, getattr(self, f"{kind}_weights_initializer"),
                    getattr(self, f"{kind}_weights_initializer_config"), f"{kind}_weights")
        if linear.bias is not None:
            _initialize(linear.bias, getattr(self, f"{kind}_bias_initializer"),
                        getattr(self, f"{kind}_bias_initializer_config"), f"{kind}_bias")
        layers: list[nn.Module] = [linear]
        if getattr(self, f"{kind}_use_layernorm"):
            layers.append(nn.LayerNorm(size_out))
        activation = getattr(self, f"{kind}_activation") or "linear"
        if activation not in ACTIVATIONS:
            raise ConfigError(f"{type(self).__name__} {kind}_activation={activation!r}: use "
                              f"one of {sorted(ACTIVATIONS)}")
        layers.append(getattr(nn, ACTIVATIONS[activation])())
        return layers


def _initialize(tensor: torch.Tensor, initializer: Initializer,
                keywords: dict[str, Any] | None, what: str) -> None:
    """Runs ``initializer`` (a ``torch.nn.init`` function or its name) on ``tensor``."""
    if initializer is None:
        return
    if isinstance(initializer, str):
        function = getattr(nn.init, initializer, None)
        if not (callable(function) and initializer.endswith("_")):
            raise ConfigError(f"{what}_initializer={initializer!r} is not an in-place "
                              "torch.nn.init function (e.g. 'xavier_uniform_', 'zeros_')")
        initializer = function
    if tensor.dim() < 2 and getattr(initializer, "__name__", "").startswith(
            ("xavier", "kaiming", "orthogonal")):
        raise ConfigError(f"{what}_initializer={initializer.__name__} needs a matrix; a bias "
                          "is a vector (use e.g. zeros_ or constant_)")
    with torch.no_grad():
        initializer(tensor, **(keywords or {}))


class _MLP(nn.Module):
    """The built MLP; with ``clip_log_std``, its outputs' second half clipped."""

    def __init__(self, network: nn.Sequential, clip: float | None):
        super().__init__()
        self.net, self.clip = network, clip

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        outputs = self.net(inputs)
        if self.clip is None:
            return outputs
        mean, log_std = outputs.chunk(2, dim=-1)
        return torch.cat([mean, log_std.clamp(-self.clip, self.clip)], dim=-1)


class _MLPEncoder(nn.Module):
    """An encoder: ``batch["obs"]`` in, ``{ENCODER_OUT: features}`` out."""

    def __init__(self, mlp: _MLP):
        super().__init__()
        self.mlp = mlp

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        obs = batch[Columns.OBS]
        return {ENCODER_OUT: self.mlp(obs.reshape(obs.shape[0], -1).float())}


@dataclass
class MLPHeadConfig(_MLPConfig):
    """An MLP head: a tensor of features in, a tensor out.

    Examples:
        >>> import torch
        >>> head = MLPHeadConfig(input_dims=[8], hidden_layer_dims=[16], output_layer_dim=2
        ...                      ).build(framework="torch")
        >>> head(torch.zeros(3, 8)).shape
        torch.Size([3, 2])
    """

    def build(self, framework: str = "torch") -> nn.Module:
        """The torch module."""
        return _MLP(self._network(framework),
                    self.log_std_clip_param if self.clip_log_std else None)


@dataclass
class MLPEncoderConfig(_MLPConfig):
    """An MLP encoder: a batch's ``obs`` in (flattened), ``{ENCODER_OUT: features}`` out.

    Examples:
        >>> import torch
        >>> encoder = MLPEncoderConfig(input_dims=[4], hidden_layer_dims=[32]
        ...                            ).build(framework="torch")
        >>> encoder({"obs": torch.zeros(3, 4)})[ENCODER_OUT].shape
        torch.Size([3, 32])
    """

    def build(self, framework: str = "torch") -> nn.Module:
        """The torch module."""
        return _MLPEncoder(_MLP(self._network(framework),
                                self.log_std_clip_param if self.clip_log_std else None))
