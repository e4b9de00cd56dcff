"""The observation statistics ``normalize_observations`` puts in the module's config."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from offline_rl.data.pipeline.offline_data import OfflineData
from offline_rl.models.rl_module_spec import RLModuleSpec

if TYPE_CHECKING:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig


def with_observation_statistics(config: AlgorithmConfig, spec: RLModuleSpec,
                                offline_data: OfflineData) -> RLModuleSpec:
    """With ``normalize_observations`` and no statistics given, computes them from the
    offline data and puts them in the module's config (and so in checkpoints, which then
    restore without computing them again)."""
    model_config = spec.model_config
    if not model_config.normalize_observations or model_config.observation_mean is not None:
        return spec
    statistics = offline_data.observation_statistics()
    given = {"observation_mean": statistics.mean.tolist(),
             "observation_std": statistics.std.tolist()}
    spec.model_config = dataclasses.replace(model_config, **given)
    rl_module = config.sections.rl_module
    if rl_module.rl_module_spec is None:
        rl_module.model_config = {**rl_module.model_config, **given}
    else:
        rl_module.rl_module_spec = spec
    return spec
