"""The per-feature mean and std of the observations a learner trains on, from one Ray Data pass."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import ray.data

from offline_rl.columns import Columns
from offline_rl.data.prelearner.call_output import train_columns
from offline_rl.data.prelearner.prelearner import overrides_call
from offline_rl.data.source.data_config import DataConfig
from offline_rl.errors import DataFormatError


@dataclass(frozen=True)
class ObservationStatistics:
    """``count`` flat observations with per-feature ``mean`` and (population) ``std``."""

    count: int
    mean: np.ndarray
    std: np.ndarray


def observation_moments(batch: pa.Table | dict[str, np.ndarray], *, config: DataConfig,
                        spaces: tuple[gym.Space, gym.Space], prelearner_class: type,
                        module_spec: Any = None) -> dict[str, np.ndarray]:
    """One batch of input rows -> one row: the count, mean and sum of squared deviations
    (``m2``) of the observations the PreLearner makes of them (with episode formats, of
    every timestep of the episodes it admits, rather than of a sample)."""
    prelearner = prelearner_class(config, spaces, module_spec=module_spec,
                                  **config.offline_data.prelearner_kwargs)
    if config.reads_episodes:
        columns = prelearner.stages.from_episodes(prelearner.admitted_episodes(batch))
    else:
        columns = train_columns(prelearner(batch))
    features = int(np.prod(spaces[0].shape))
    obs = np.asarray(columns.get(Columns.OBS, []), dtype=np.float64).reshape(-1, features)
    mean = obs.mean(axis=0) if len(obs) else np.zeros(features)
    return {"count": np.array([len(obs)]), "mean": mean[None],
            "m2": ((obs - mean) ** 2).sum(axis=0)[None]}


def combine_moments(count: np.ndarray, mean: np.ndarray, m2: np.ndarray
                    ) -> ObservationStatistics:
    """Chan et al.'s pairwise combination of per-batch moments (rows of ``mean`` and ``m2``),
    exact up to float64 rounding.

    Examples:
        >>> x = np.array([[1.0], [2.0], [4.0], [7.0]])
        >>> parts = [x[:1], x[1:]]
        >>> stats = combine_moments(np.array([len(p) for p in parts]),
        ...                         np.stack([p.mean(0) for p in parts]),
        ...                         np.stack([((p - p.mean(0)) ** 2).sum(0) for p in parts]))
        >>> stats.count, stats.mean.item(), bool(np.isclose(stats.std.item(), x.std()))
        (4, 3.5, True)
    """
    total = int(count.sum())
    weights = count[:, None].astype(np.float64)
    overall = (weights * mean).sum(axis=0) / total
    m2_total = m2.sum(axis=0) + (weights * (mean - overall) ** 2).sum(axis=0)
    return ObservationStatistics(total, overall, np.sqrt(m2_total / total))


def observation_statistics(source: ray.data.Dataset, config: DataConfig,
                           spaces: tuple[gym.Space, gym.Space], prelearner_class: type,
                           batch_size: int) -> ObservationStatistics:
    """Maps ``source`` (the input rows) through ``prelearner_class`` and the learner
    pipeline, less the pieces that need the module (the module's statistics are what is being
    computed), and reduces the observations to their mean and std."""
    pipeline = config.build_learner_connector(*spaces)
    for piece in [piece for piece in pipeline if piece.needs_module]:
        pipeline.remove(type(piece))
    module_spec = config.module_spec()  # for a PreLearner that builds its own module
    config = dataclasses.replace(config, learner_pipeline=pipeline, rl_module_spec=None)
    rows = source.map_batches(
        observation_moments,
        batch_size=batch_size,
        batch_format="numpy" if overrides_call(prelearner_class) else "pyarrow",
        fn_kwargs={"config": config, "spaces": spaces, "prelearner_class": prelearner_class,
                   "module_spec": module_spec},
    ).take_all()
    count = np.array([row["count"] for row in rows], dtype=np.int64)
    if not count.sum():
        raise DataFormatError(f"{config.offline_data.input_}: no observations to compute the "
                              "normalize_observations statistics from")
    return combine_moments(count, np.stack([row["mean"] for row in rows]),
                           np.stack([row["m2"] for row in rows]))
