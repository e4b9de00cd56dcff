"""``RLModule`` and ``TorchRLModule``: the base classes a custom policy network subclasses, with
RLlib's contract (``setup()`` builds the layers; ``_forward``/``_forward_inference``/
``_forward_exploration``/``_forward_train`` compute the outputs)."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from offline_rl.columns import Columns
from offline_rl.errors import ConfigError
from offline_rl.models.distributions import TorchCategorical, TorchDiagGaussian


class RLModule:
    """A policy network as RLlib defines one: built from its spaces and ``model_config``
    (``RLModuleSpec.build()`` passes them as keywords), then ``setup()``; the public
    ``forward_inference``/``forward_exploration``/``forward_train`` call the ``_forward_*``
    methods a subclass overrides, which default to ``_forward``.

    Subclass ``TorchRLModule`` (a ``torch.nn.Module``), as RLlib's torch modules do."""

    #: The distribution class the ``action_dist_inputs`` parameterize (``None``: chosen from
    #: the action space).
    action_dist_cls: ClassVar[type | None] = None

    def __init__(self, *, observation_space: gym.Space | None = None,
                 action_space: gym.Space | None = None, inference_only: bool | None = None,
                 learner_only: bool = False, model_config: Any = None,
                 catalog_class: type | None = None, **kwargs: Any):
        self.observation_space = observation_space
        self.action_space = action_space
        self.inference_only = inference_only
        self.learner_only = learner_only
        self.model_config = model_config
        self.catalog = None
        self.setup()

    def setup(self) -> None:
        """Builds the module's layers (override it; called by ``__init__``)."""

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The outputs for every phase, unless a phase's own method is overridden."""
        return {}

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._forward(batch, **kwargs)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._forward(batch, **kwargs)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._forward(batch, **kwargs)

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Outputs for acting greedily (``_forward_inference``)."""
        return self._forward_inference(batch, **kwargs)

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Outputs for acting with exploration (``_forward_exploration``)."""
        return self._forward_exploration(batch, **kwargs)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Outputs for the loss (``_forward_train``)."""
        return self._forward_train(batch, **kwargs)

    def get_train_action_dist_cls(self) -> type:
        """``action_dist_cls``, else the action space's: ``TorchCategorical`` for
        ``Discrete``, ``TorchDiagGaussian`` for ``Box``."""
        if self.action_dist_cls is not None:
            return self.action_dist_cls
        if isinstance(self.action_space, gym.spaces.Discrete):
            return TorchCategorical
        if isinstance(self.action_space, gym.spaces.Box):
            return TorchDiagGaussian
        raise ConfigError(f"{type(self).__name__} has no action distribution for the action "
                          f"space {self.action_space}: set its action_dist_cls or override "
                          "get_train_action_dist_cls()")

    def get_inference_action_dist_cls(self) -> type:
        """The distribution greedy actions come from (``get_train_action_dist_cls()``)."""
        return self.get_train_action_dist_cls()

    def get_exploration_action_dist_cls(self) -> type:
        """The distribution sampled actions come from (``get_train_action_dist_cls()``)."""
        return self.get_train_action_dist_cls()

    def is_stateful(self) -> bool:
        """``False``: offline-rl's modules carry no recurrent state."""
        return False


class TorchRLModule(nn.Module, RLModule):
    """An ``RLModule`` that is a ``torch.nn.Module``: ``forward_inference`` and
    ``forward_exploration`` run in eval mode (and, by default, without gradients),
    ``forward_train`` in train mode; ``compute_actions`` turns observations into actions.

    Examples:
        >>> import gymnasium as gym, torch
        >>> class Linear(TorchRLModule):
        ...     def setup(self):
        ...         self.pi = torch.nn.Linear(4, 2)
        ...     def _forward(self, batch, **kwargs):
        ...         return {"action_dist_inputs": self.pi(batch["obs"])}
        >>> module = Linear(observation_space=gym.spaces.Box(-1, 1, (4,)),
        ...                 action_space=gym.spaces.Discrete(2))
        >>> module.compute_actions([[0.0, 0.0, 0.0, 0.0]]).shape
        (1,)
    """

    def __init__(self, *args: Any, **kwargs: Any):
        nn.Module.__init__(self)
        RLModule.__init__(self, *args, **kwargs)

    def forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Outputs for acting greedily, in eval mode."""
        with self._evaluating():
            return self._forward_inference(batch, **kwargs)

    def forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Outputs for acting with exploration, in eval mode."""
        with self._evaluating():
            return self._forward_exploration(batch, **kwargs)

    def forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Outputs for the loss, in train mode."""
        self.train()
        return self._forward_train(batch, **kwargs)

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        with torch.no_grad():
            return self._forward(batch, **kwargs)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        with torch.no_grad():
            return self._forward(batch, **kwargs)

    def forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """``forward_train`` (what calling the module runs, as in RLlib)."""
        return self.forward_train(batch, **kwargs)

    def _evaluating(self) -> _EvalMode:
        return _EvalMode(self)

    def compute_actions(self, obs: Any, explore: bool = False) -> np.ndarray:
        """Actions for a batch of observations, as numpy: the greedy action of
        ``forward_inference``'s distribution, or (``explore``) a sample of
        ``forward_exploration``'s. Float64 observations are given as float32, as torch's
        layers hold float32 weights."""
        parameter = next(self.parameters(), None)
        device = parameter.device if parameter is not None else torch.device("cpu")
        array = np.asarray(obs)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        obs_tensor = torch.as_tensor(array, device=device)
        if explore:
            inputs = self.forward_exploration({Columns.OBS: obs_tensor})
            dist = self.get_exploration_action_dist_cls().from_logits(
                inputs[Columns.ACTION_DIST_INPUTS])
            actions = dist.sample()
        else:
            inputs = self.forward_inference({Columns.OBS: obs_tensor})
            dist = self.get_inference_action_dist_cls().from_logits(
                inputs[Columns.ACTION_DIST_INPUTS])
            actions = dist.deterministic_sample()
        return actions.detach().cpu().numpy()


class _EvalMode:
    """Puts a module in eval mode for a ``with`` block, then back in train mode if it was."""

    def __init__(self, module: nn.Module):
        self.module, self.was_training = module, module.training

    def __enter__(self) -> None:
        self.module.eval()

    def __exit__(self, *exc_info: Any) -> None:
        if self.was_training:
            self.module.train()
