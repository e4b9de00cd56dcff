"""``MixedData``: the train batches of several offline sources mixed by weight.

``offline_data(input_={path: weight, ...})`` (or the per-source list form, see
``offline_rl.settings.sources``) makes the algorithm read a ``MixedData`` instead of an
``OfflineData``. The design:

- **One ``OfflineData`` per source**, built from the section with the source's path and its own
  read options (``DataConfig.with_data_options``): each source is read, checked
  (``check_input``, the first rows mapped in the driver) and mapped by PreLearners exactly as a
  single input would be, in its own format. A check that fails names the source.
- **Mixing at the iterator side** (``MixedStream``): each source streams epoch after epoch on
  its own (a small source repeats while a large one streams on), and each train batch takes
  rows from each source by largest remainder with carried error: source ``i``'s rows so far
  stay within one row of ``w_i`` times all rows trained on (a batch of ``n`` rows holds
  ``w_i * n`` give or take less than two). Memory is bounded by each source's stream buffer
  (a few fetches of ``ROWS_PER_FETCH`` train batches), whatever the sizes of the sources.
- **CPUs**: with ``materialize_mapped_data=True`` the sources are mapped one after the other,
  each with the whole PreLearner pool, then read from the object store (no actors left). When
  streamed, the sources' pipelines run side by side, each with ``1/N`` of the CPUs a single
  pipeline holds (its PreLearner actor's and its read task's), so ``N`` sources fit where one
  does.
- **N learners**: each source's pipeline is ``streaming_split`` into ``num_learners`` shards,
  and each learner mixes its shard of every source (``MixedFeed``).
- **Resume**: the mix's position (each source's ``StreamPosition``, the rows each gave, the
  batches composed) is saved with the checkpoint; a resumed seeded run composes the same
  batches.
- A ``"sampler"`` entry takes its share of the weights; the offline sources share the rest in
  their proportions (online experience is the sampler's to add).

``MixedStream`` and ``mix_counts`` show the mixing itself; tests/test_mixing.py the whole.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import gymnasium as gym
import numpy as np
import ray.data

from offline_rl.data.feed.batch_stream import StreamStats
from offline_rl.data.feed.learner_feed import LearnerFeed, MixedFeed
from offline_rl.data.feed.mixed_stream import MixedStream
from offline_rl.data.pipeline.observation_statistics import ObservationStatistics
from offline_rl.data.pipeline.offline_data import OfflineData
from offline_rl.data.pipeline.resources import side_by_side_options
from offline_rl.data.pipeline.rllib_attributes import RLlibDataAttributes
from offline_rl.data.pipeline.training_data import TrainingData
from offline_rl.data.source.data_config import DataConfig, as_data_config
from offline_rl.errors import OfflineRLError, surface_errors, warn_at_caller
from offline_rl.settings.resource_plan import ResourcePlan
from offline_rl.settings.sources import InputSpec, Source


def open_offline_data(config: DataConfig | Any, spaces: tuple[gym.Space, gym.Space]
                      ) -> TrainingData:
    """The data the algorithm trains on: a ``MixedData`` for a mixing ``input_``, else an
    ``OfflineData``."""
    config = as_data_config(config, spaces)
    mixed = config.offline_data.input_spec.mixed
    return MixedData(config, spaces) if mixed else OfflineData(config, spaces)


class MixedData(RLlibDataAttributes):
    """The ``TrainingData`` of several sources (``sources``, one ``OfflineData`` each), mixed by
    weight: what a mixing ``input_`` trains on.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl import BCConfig
        >>> path = str(cartpole_data)
        >>> config = BCConfig().environment("CartPole-v1").offline_data(
        ...     input_=[{"input_": path, "weight": 0.75}, {"input_": path, "weight": 0.25}])
        >>> spaces = (gym.spaces.Box(-5, 5, (4,), np.float32), gym.spaces.Discrete(2))
        >>> data = MixedData(config.data_config(spaces), spaces)
        >>> data.weights, data.sample(64)["obs"].shape
        ([0.75, 0.25], (64, 4))
        >>> data.stop()
    """

    def __init__(self, config: DataConfig | Any, spaces: tuple[gym.Space, gym.Space]):
        self.config = config = as_data_config(config, spaces)
        self.input_spaces = spaces
        spec = config.offline_data.input_spec
        sources = spec.sources
        offline = sum(source.weight for source in sources)
        #: Each offline source's share of a train batch (the sampler's share left out).
        self.weights = [source.weight / offline for source in sources]
        self.names = [source.name for source in sources]
        _warn_unless_normalized(spec)
        self.sources = [self._open(source, len(sources)) for source in sources]
        first = self.sources[0]
        self.reads_episodes, self.needs_module = first.reads_episodes, first.needs_module
        self.batch_size = first.batch_size
        self.skipped_files = [skipped for source in self.sources
                              for skipped in source.skipped_files]
        self.stream: MixedStream | None = None
        #: Set by ``LearnerGroup``, as on ``OfflineData``.
        self.learner_handles: list[Any] | None = None
        self.locality_hints: list[str] | None = None
        #: ``None``: each source hands the weights to its own PreLearners (``publish_weights``).
        self.module_weights = None
        #: ``None``: each source has its own pool (``OfflineData.prelearners``).
        self.prelearners = None
        self._started = self._built = False

    def _open(self, source: Source, count: int) -> OfflineData:
        """The source's own ``OfflineData`` (its checks' errors name it)."""
        options = self.config.offline_data
        changes: dict[str, Any] = {"input_": source.input_, **source.options}
        if count > 1 and not options.materialize_mapped_data:  # pipelines side by side
            changes.update(side_by_side_options(
                options.map_batches_kwargs,
                changes.get("input_read_method_kwargs", options.input_read_method_kwargs), count))
        try:
            return OfflineData(self.config.with_data_options(**changes), self.input_spaces)
        except OfflineRLError as error:
            raise type(error)(f"source {source.name!r}: {error}") from None

    def start(self, *, resources: ResourcePlan | None = None) -> MixedData:
        """Starts every source's PreLearner pool for the learner in this process (materializing
        the sources one after the other, when ``materialize_mapped_data``); returns ``self``."""
        with self.naming_damaged_files():
            for source in self.sources:
                if self.config.offline_data.materialize_mapped_data:
                    source.build(resources=resources)
                source.start(resources=resources)
        self._started = True
        return self

    def build(self, *, resources: ResourcePlan | None = None) -> list[ray.data.Dataset]:
        """Builds every source's pipeline (one after the other) for remote learners; returns
        their mapped datasets."""
        with self.naming_damaged_files():
            datasets = [source.build(resources=resources) for source in self.sources]
        self._built = True
        return datasets

    @surface_errors
    def sample(self, num_samples: int | None = None, *, stop_at_epoch_end: bool = False
               ) -> dict[str, np.ndarray] | None:
        """The next mixed train batch, as ``OfflineData.sample`` (started now if not yet)."""
        with self.naming_damaged_files():
            if self.stream is None:
                self.stream = self.feeds(0)[0].open()
            return self.stream.next_batch(num_samples or self.batch_size,
                                          stop_at_epoch_end=stop_at_epoch_end)

    def feeds(self, num_learners: int, *, locality_hints: list[str] | None = None
              ) -> list[LearnerFeed]:
        """As ``OfflineData.feeds``: each a ``MixedFeed`` of one feed of every source (each
        source's own plan decides how it streams)."""
        if num_learners == 0 and not self._started:
            self.start()
        if num_learners and not self._built:
            self.build()
        per_source = [source.feeds(num_learners, locality_hints=locality_hints)
                      for source in self.sources]
        return [MixedFeed(list(feeds), self.weights, self.names, self.config.debugging.seed)
                for feeds in zip(*per_source)]

    @property
    def stats(self) -> StreamStats:
        """What the mix's stream did so far (with the rows each source gave)."""
        return self.stream.stats if self.stream is not None else StreamStats()

    @contextmanager
    def naming_damaged_files(self) -> Iterator[None]:
        """Each source's ``naming_damaged_files``."""
        with ExitStack() as stack:
            for source in self.sources:
                stack.enter_context(source.naming_damaged_files())
            yield

    def observation_statistics(self) -> ObservationStatistics:
        """The mean and std of the observations of the mix: each source's, weighted."""
        stats = [source.observation_statistics() for source in self.sources]
        mean = sum(weight * item.mean for weight, item in zip(self.weights, stats))
        square = sum(weight * (item.std ** 2 + item.mean ** 2)
                     for weight, item in zip(self.weights, stats))
        return ObservationStatistics(count=sum(item.count for item in stats), mean=mean,
                                     std=np.sqrt(np.maximum(square - mean ** 2, 0.0)))

    def pipeline_stats(self) -> dict[str, Any]:
        """Each source's ``pipeline_stats``, by name."""
        return {"source_pipelines": {name: source.pipeline_stats()
                                     for name, source in zip(self.names, self.sources)}}

    def counts(self, *, wait: bool = False) -> dict[str, int]:
        """The sources' counts, summed."""
        totals: dict[str, int] = {}
        for source in self.sources:
            for reason, count in source.counts(wait=wait).items():
                totals[reason] = totals.get(reason, 0) + count
        return totals

    def pool(self) -> dict[str, Any]:
        """Each source's PreLearner pool (``OfflineData.pool``), by name."""
        return {name: source.pool() for name, source in zip(self.names, self.sources)}

    def publish_weights(self, weights: dict[str, np.ndarray], version: int) -> None:
        """Hands the weights to every source's PreLearners."""
        for source in self.sources:
            source.publish_weights(weights, version)

    def stop(self) -> None:
        """Stops every source (their split coordinators first, on which the mix's streams
        may wait), then the mix."""
        for source in self.sources:
            source.stop()
        if self.stream is not None:
            self.stream.stop()
            self.stream = None


def _warn_unless_normalized(spec: InputSpec) -> None:
    """One ``UserWarning``, at the first caller outside offline-rl, when the weights do not
    sum to 1: it names the shares they were divided into."""
    sources, sampler, total = spec.sources, spec.sampler_share, spec.weight_sum
    weights = [source.weight for source in sources] + ([sampler] if sampler else [])
    if math.isclose(total, 1.0, rel_tol=1e-9):
        return
    names = [source.name for source in sources] + (["sampler"] if sampler else [])
    shares = ", ".join(f"{name!r}: {weight:.4g}" for name, weight in zip(names, weights))
    shown = f"{total:g}" if math.isfinite(total) else "more than the largest float"
    warn_at_caller(f"the input_ weights sum to {shown}, not 1: they were divided by "
                   f"their sum, each source's share of a train batch is now {{{shares}}}")
