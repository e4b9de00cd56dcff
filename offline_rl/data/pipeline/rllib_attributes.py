"""The members of RLlib's ``OfflineData`` that its tests and examples read, on offline-rl's:
its spaces, the module spec, the input as configured, and the keywords of the PreLearners'
``map_batches``, the learners' ``iter_batches`` and the read.

Examples:
    >>> import gymnasium as gym
    >>> from offline_rl import BCConfig, OfflineData
    >>> config = BCConfig().environment("CartPole-v1").offline_data(
    ...     input_=str(cartpole_data), iter_batches_kwargs={"prefetch_batches": 1})
    >>> data = OfflineData(config)
    >>> data.path == str(cartpole_data), data.iter_batches_kwargs
    (True, {'prefetch_batches': 1})
    >>> sorted(data.spaces)
    ['__env__', 'default_policy']
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from offline_rl.data.pipeline.prelearner_pool import PreLearnerPool
from offline_rl.data.source.data_config import DataConfig
from offline_rl.models.multi_rl_module import MultiRLModuleSpec
from offline_rl.names import DEFAULT_MODULE_ID, INPUT_ENV_SPACES


class RLlibDataAttributes:
    """RLlib's ``OfflineData`` members, read from what ``OfflineData`` sets: ``config``,
    ``input_spaces`` and the PreLearner pool once started (``prelearners``)."""

    config: DataConfig
    input_spaces: tuple[gym.Space | None, gym.Space | None]
    prelearners: PreLearnerPool | None

    @property
    def spaces(self) -> dict[str, tuple[gym.Space | None, gym.Space | None]]:
        """RLlib's ``OfflineData.spaces``: the env's spaces under ``INPUT_ENV_SPACES`` and the
        module's under its id (the same here: the data's)."""
        return {INPUT_ENV_SPACES: self.input_spaces, DEFAULT_MODULE_ID: self.input_spaces}

    @property
    def module_spec(self) -> MultiRLModuleSpec | None:
        """The learners' module spec, as RLlib gives it to PreLearners (a
        ``MultiRLModuleSpec``)."""
        return self.config.module_spec()

    @property
    def path(self) -> str | list[str]:
        """``input_`` as configured (RLlib's ``OfflineData.path``); ``paths`` are its files."""
        return self.config.offline_data.input_

    @property
    def map_batches_kwargs(self) -> dict[str, Any]:
        """The PreLearners' ``map_batches`` keywords: the defaults, updated by
        ``offline_data(map_batches_kwargs=...)`` (as sized for the cluster once started)."""
        if self.prelearners is not None:
            return dict(self.prelearners.kwargs)
        return {
            **self.default_map_batches_kwargs, **self.config.offline_data.map_batches_kwargs}

    @property
    def iter_batches_kwargs(self) -> dict[str, Any]:
        """The learners' ``iter_batches`` keywords: the defaults, updated by
        ``offline_data(iter_batches_kwargs=...)``."""
        return {**self.default_iter_batches_kwargs,
                **self.config.offline_data.iter_batches_kwargs}

    @property
    def default_map_batches_kwargs(self) -> dict[str, Any]:
        """``map_batches`` keywords before ``map_batches_kwargs``: none, as offline-rl sizes the
        pool for the cluster when it starts (``prelearner_pool_kwargs``)."""
        return {}

    @property
    def default_iter_batches_kwargs(self) -> dict[str, Any]:
        """``iter_batches`` keywords before ``iter_batches_kwargs`` (RLlib's default)."""
        return {"prefetch_batches": 2}

    @property
    def default_read_method_kwargs(self) -> dict[str, Any]:
        """The read method's keywords before ``input_read_method_kwargs``."""
        return {}
