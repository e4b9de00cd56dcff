"""``TrainingData``: what the algorithm and its learners use of the data they train on, one
``OfflineData`` or a mix of them (``MixedData``, which composes one per source)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from offline_rl.data.feed.batch_stream import StreamStats
from offline_rl.data.feed.learner_feed import LearnerFeed
from offline_rl.data.pipeline.observation_statistics import ObservationStatistics
from offline_rl.data.source.data_config import DataConfig
from offline_rl.settings.resource_plan import ResourcePlan


class TrainingData(Protocol):
    """The data's side of training: build or start the pipeline, hand each learner its feed,
    save and resume its position, report it, stop it."""

    config: DataConfig
    reads_episodes: bool
    #: Whether the learner connector needs the module: the learners then ``publish_weights``.
    needs_module: bool
    skipped_files: list[Any]
    #: The learners and their nodes, set by ``LearnerGroup``.
    learner_handles: list[Any] | None
    locality_hints: list[str] | None
    #: The actor the PreLearners read the learners' weights from (``None`` when none needs
    #: them, and for a mix, whose sources each have their own).
    module_weights: Any

    def start(self, *, resources: ResourcePlan | None = None) -> TrainingData: ...

    def build(self, *, resources: ResourcePlan | None = None) -> Any: ...

    def feeds(self, num_learners: int, *, locality_hints: list[str] | None = None
              ) -> list[LearnerFeed]: ...

    def sample(self, num_samples: int | None = None, *, stop_at_epoch_end: bool = False
               ) -> Any: ...

    @property
    def stats(self) -> StreamStats: ...

    def observation_statistics(self) -> ObservationStatistics: ...

    def pipeline_stats(self) -> dict[str, Any]: ...

    def counts(self, *, wait: bool = False) -> dict[str, int]: ...

    def pool(self) -> dict[str, Any]: ...

    def publish_weights(self, weights: dict[str, np.ndarray], version: int) -> None: ...

    def naming_damaged_files(self) -> AbstractContextManager[None]: ...

    def stop(self) -> None: ...
