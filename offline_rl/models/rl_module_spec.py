"""``RLModuleSpec``: what to build as the policy network (no torch until ``build()``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from offline_rl.errors import ConfigError
from offline_rl.import_path import import_object
from offline_rl.models.model_config import DefaultModelConfig


@dataclass
class RLModuleSpec:
    """Everything needed to build an RLModule: its class, spaces and model config.

    ``module_class`` may be a class or a ``"package.module:ClassName"`` string; by default the MLP
    ``DefaultTorchRLModule``. RLlib's ``catalog_class`` (the class that builds a module's
    networks there) names the module family: offline-rl's modules build their own networks
    from ``model_config``, so a catalog is accepted when it is the module class's own
    (``module_class.catalog_class``, e.g. ``BCCatalog`` for ``DefaultBCTorchRLModule``) and
    refused otherwise. ``inference_only=True`` (RLlib's module without its training-only
    parts) is refused: offline-rl builds modules for learners.

    Examples:
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
    catalog_class: type | None = None
    inference_only: bool = False
    load_state_path: str | Path | None = None

    def build(self) -> Any:
        """Builds the module (imports torch)."""
        module_class = self.module_class
        if module_class is None:
            from offline_rl.models.torch_rl_module import DefaultTorchRLModule

            module_class = DefaultTorchRLModule
        elif isinstance(module_class, str):
            module_class = import_object(module_class)
        self._check_catalog(module_class)
        model_config = self.model_config
        if not isinstance(model_config, DefaultModelConfig):
            model_config = DefaultModelConfig.from_dict(model_config or {})
        if self.observation_space is None or self.action_space is None:
            raise ConfigError("RLModuleSpec needs observation_space and action_space to build")
        try:
            return module_class(observation_space=self.observation_space,
                                action_space=self.action_space, model_config=model_config)
        except (MemoryError, RuntimeError) as error:  # torch: "can't allocate memory: ..."
            if isinstance(error, RuntimeError) and "allocate" not in str(error):
                raise
            sizes = {key: value for key, value in model_config.to_dict().items()
                     if value and key.endswith(("hiddens", "filters", "cell_size", "dim"))}
            raise ConfigError(
                f"{getattr(module_class, '__name__', module_class)}'s weights do not fit in "
                f"memory with model_config {sizes} ({str(error).strip().splitlines()[0]:.200}); "
                "choose smaller layers (model_config fcnet_hiddens=[256, 256], say)") from None

    def _check_catalog(self, module_class: type) -> None:
        """Refuses ``inference_only`` and a ``catalog_class`` that is not the module's own."""
        if self.inference_only:
            raise ConfigError("RLModuleSpec(inference_only=True): offline-rl builds learner "
                              "modules only; leave inference_only=False")
        own = getattr(module_class, "catalog_class", None)
        if self.catalog_class is not None and self.catalog_class is not own:
            raise ConfigError(
                f"RLModuleSpec catalog_class={self.catalog_class.__name__}: offline-rl's "
                f"modules build their own networks, and {module_class.__name__}'s catalog is "
                f"{getattr(own, '__name__', None)}; leave catalog_class out or give that one")
