"""``DefaultBCTorchRLModule``: RLlib's name for BC's default torch module."""

from __future__ import annotations

from offline_rl.algorithms.bc.bc_catalog import BCCatalog
from offline_rl.models.torch_rl_module import DefaultTorchRLModule


class DefaultBCTorchRLModule(DefaultTorchRLModule):
    """BC's policy network: ``DefaultTorchRLModule`` (an MLP, after a ``ConvEncoder`` when
    ``model_config.conv_filters`` are given), built by ``RLModuleSpec(module_class=
    DefaultBCTorchRLModule, catalog_class=BCCatalog)``.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl import DefaultModelConfig, RLModuleSpec
        >>> module = RLModuleSpec(
        ...     module_class=DefaultBCTorchRLModule, catalog_class=BCCatalog,
        ...     model_config=DefaultModelConfig(conv_filters=[[4, 2, 2]], fcnet_hiddens=[8]),
        ...     observation_space=gym.spaces.Box(0, 1, (6, 1, 1), np.float32),
        ...     action_space=gym.spaces.Discrete(6)).build()
        >>> module.compute_actions(np.zeros((2, 6, 1, 1), np.float32)).shape
        (2,)
    """

    catalog_class = BCCatalog
