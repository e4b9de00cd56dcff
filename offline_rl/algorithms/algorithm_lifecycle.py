"""``AlgorithmLifecycle``: what every algorithm shares from build to stop, single-agent
(``Algorithm``) or not (``MultiAgentAlgorithm``).

- **Build**: the config is validated and copied, then ``_build()`` runs; when it fails,
  ``stop()`` releases what was built before the error is raised.
- **Counters**: ``iteration``, ``num_env_steps_trained_lifetime``, the training time so far and
  ``build_time_s``.
- **Stop**: ``stop()`` (also ``cleanup()``, RLlib's name, and leaving a ``with`` block) ends
  with Ray's shutdown when this algorithm started Ray.
- **Checkpoints**: ``from_checkpoint`` builds the algorithm a checkpoint's config names and
  restores it.
"""

from __future__ import annotations

import abc
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from offline_rl.algorithms import checkpoint
from offline_rl.errors import surface_errors

if TYPE_CHECKING:
    from offline_rl.algorithms.algorithm_config import AlgorithmConfig


class AlgorithmLifecycle(abc.ABC):
    """The build, counters and stop of an algorithm; subclasses give ``_build``,
    ``restore_from_path`` and a ``stop`` that releases their parts, then calls this one."""

    @surface_errors
    def __init__(self, config: AlgorithmConfig):
        started = time.perf_counter()
        config.validate()
        self.config = config.copy()
        #: Whether this algorithm started Ray (then ``stop()`` shuts it down).
        self._started_ray = False
        try:
            self._build()
        except BaseException:
            self.stop()
            raise
        self.iteration = 0
        self.num_env_steps_trained_lifetime = 0
        self._train_time_s = 0.0
        self.build_time_s = time.perf_counter() - started

    @abc.abstractmethod
    def _build(self) -> None:
        """Builds the algorithm's parts from ``self.config``."""

    @abc.abstractmethod
    def restore_from_path(self, path: str | Path) -> None:
        """Loads a checkpoint folder ``save_to_path`` wrote."""

    @classmethod
    def from_checkpoint(cls, path: str | Path, config: AlgorithmConfig | None = None) -> Any:
        """Builds the algorithm of a checkpoint (with its saved config unless one is given)."""
        algorithm = (config or checkpoint.read_config(path)).build()
        try:
            algorithm.restore_from_path(path)
        except BaseException:
            algorithm.stop()
            raise
        return algorithm

    def stop(self) -> None:
        """Shuts Ray down if this algorithm started it."""
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    def cleanup(self) -> None:
        """``stop()``, by the name RLlib's ``Algorithm`` (a Tune ``Trainable``) gives it."""
        self.stop()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()
