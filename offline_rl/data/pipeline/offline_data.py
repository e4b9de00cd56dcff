"""``OfflineData``: the Ray Dataset of train batches one learner consumes."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import ray.data

from offline_rl.data.feed.batch_stream import Batching, BatchStream, StreamStats
from offline_rl.data.feed.learner_feed import LearnerFeed, PipelineFeed
from offline_rl.data.pipeline.execution_plan import ExecutionPlan
from offline_rl.data.pipeline.observation_statistics import (
    ObservationStatistics,
    observation_statistics,
)
from offline_rl.data.pipeline.pipeline_checks import check_pipeline
from offline_rl.data.pipeline.pipeline_stats import ExecutionFigures
from offline_rl.data.pipeline.prelearner_pool import PreLearnerPool
from offline_rl.data.pipeline.repeated_epochs import EpochsPreLearner, InputParts, plan_epochs
from offline_rl.data.pipeline.rllib_attributes import RLlibDataAttributes
from offline_rl.data.pipeline.sample_calls import sample_feeds
from offline_rl.data.prelearner.prelearner import (
    OfflinePreLearner,
    rows_per_call,
)
from offline_rl.data.ray.actors import kill_split_coordinators
from offline_rl.data.ray.stoppable_executions import materialize, stoppable
from offline_rl.data.source.data_config import DataConfig, as_data_config, input_spaces
from offline_rl.data.source.input_checks import check_input
from offline_rl.data.source.input_locator import naming_damaged_files
from offline_rl.data.source.input_reader import read_config, read_input
from offline_rl.errors import ConfigError, surface_errors
from offline_rl.settings.resource_plan import ResourcePlan


class OfflineData(RLlibDataAttributes):
    """Reads the input with Ray Data, maps it through an actor pool of PreLearners, and streams
    train batches of exactly ``train_batch_size_per_learner`` rows, epoch after epoch.

    Construction checks local Parquet input (paths, columns, observation shape) without starting
    any Ray work, and chooses the ``ExecutionPlan`` (``plan``). ``start()`` opens the PreLearner
    pool for one local learner, whose feed builds the pipeline in its stream's thread;
    ``build()`` instead returns the dataset, for remote learners to split. ``feeds(n)`` gives
    each learner its ``LearnerFeed``, which the learner opens (and resumes) where it runs. When
    the learner connector ``needs_module``, the learners ``publish_weights`` for the PreLearners.

    ``sample()`` reads a stream of this object's own: a subclass selected with
    ``offline_data(offline_data_class=...)`` may override ``__init__`` (e.g. to read and decode
    its own files) and ``sample`` (RLlib's signature: ``num_samples``, ``return_iterator``,
    ``num_shards``); Ray is running by the time a subclass is built.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl import BCConfig
        >>> config = (BCConfig().training(train_batch_size_per_learner=256)
        ...           .offline_data(input_=str(cartpole_data)))
        >>> data = OfflineData(config, (gym.spaces.Box(-5, 5, (4,), np.float32),
        ...                             gym.spaces.Discrete(2))).start()
        >>> data.sample()["obs"].shape
        (256, 4)
        >>> data.stop()
    """

    def __init__(self, config: DataConfig | Any,
                 spaces: tuple[gym.Space | None, gym.Space | None] | None = None):
        spaces = input_spaces(config, spaces)
        self.config = config = as_data_config(config, spaces)
        #: The data's observation and action spaces (``(None, None)`` when neither the config
        #: nor its env gives them: the input is then read, but not mapped).
        self.input_spaces = spaces
        #: The columns every input file holds, when some hold more (``None``: all the same).
        self.input_columns = check_input(config, spaces[0])
        listing = None if config.input_creator is not None else config.input_listing
        self.filesystem = None if listing is None else listing.filesystem
        self.paths = [] if listing is None else listing.paths
        #: The input files skipped (broken symlinks, ...), each with why; counted as dropped.
        self.skipped_files = [] if listing is None else listing.skipped
        self.reads_episodes = config.reads_episodes
        self.prelearner_class = config.prelearner_class or OfflinePreLearner
        self.batch_size = config.training.train_batch_size_per_learner
        #: How the pipeline runs its epochs, chosen now for the config's learners.
        self.plan = ExecutionPlan.of(config)
        self.needs_module = check_pipeline(config, spaces, self.prelearner_class)
        #: The dataset a subclass's ``__init__`` set as ``data`` (``None``: the input is read
        #: with ``input_read_method``).
        self._given_data: ray.data.Dataset | None = None
        self._read_data: ray.data.Dataset | None = None
        #: What RLlib's ``Algorithm`` gives its ``OfflineData``: the learners (the local
        #: ``Learner``, or the remote learners' actor handles) and the remote learners' nodes.
        self.learner_handles: list[Any] | None = None
        self.locality_hints: list[str] | None = None
        #: The PreLearner pool's parts in Ray, from ``start()`` or ``build()`` to ``stop()``.
        self.prelearners: PreLearnerPool | None = None
        self.dataset: ray.data.Dataset | None = None  # the mapped dataset, once built
        #: The stream ``sample()`` reads (a learner opens a feed of its own).
        self.stream: BatchStream | None = None
        #: Held while the mapped dataset is built: a learner's stream thread and
        #: ``sample(return_iterator=True)`` build it once between them.
        self._building = threading.Lock()
        #: The ``streaming_split`` shards read: one per remote learner, or this process's
        #: learner's one when the plan repeats epochs.
        self.shards: list[ray.data.DataIterator] = []
        self._figures = ExecutionFigures()
        #: The materialized input, when the plan repeats epochs (read at the first build).
        self._parts: InputParts | None = None
        #: The seed of the plan's orders: the run's, else a fresh random one.
        seed = config.debugging.seed
        self._plan_seed = seed if seed is not None else secrets.randbits(63)

    @property
    def data(self) -> ray.data.Dataset:
        """The input as read, before the PreLearners (RLlib's ``OfflineData.data``): read with
        ``input_read_method`` on first use (lazily, as Ray Data reads), unless a subclass's
        ``__init__`` set its own dataset here."""
        if self._read_data is None:
            self._read_data = self._source()
        return self._read_data

    @data.setter
    def data(self, dataset: ray.data.Dataset | None) -> None:
        self._given_data = dataset

    @property
    def has_spaces(self) -> bool:
        """Whether the data's spaces are known (needed to map it)."""
        return None not in self.input_spaces

    def start(self, *, resources: ResourcePlan | None = None) -> OfflineData:
        """Sizes the PreLearner pool for the cluster beside the rest of the run (the
        ``resources`` plan's ``beside_pipeline``; none without a plan) and starts it, for the
        learner in this process (``feeds(0)``); returns ``self``."""
        if self.prelearners is None or not self.prelearners.running:  # else build() opened it
            self._open_pool(resources)
        return self

    def _stream_source(self) -> ray.data.Dataset | Callable[[int], ray.data.DataIterator]:
        """What this process's streams read (in their thread): the mapped dataset, built if not
        yet; when the plan repeats epochs, the function planning a pass from a given epoch on
        (``_shard_from``), so that a resumed stream gets the orders it would have had."""
        if self.plan.repeats_epochs:
            return self._shard_from
        return self._mapped_dataset()

    def _mapped_dataset(self) -> ray.data.Dataset:
        """The mapped dataset, built now (the pool started) unless it was."""
        with self._building:
            if self.dataset is None:
                self.start()
                self.build_mapped_dataset()
            return self.dataset

    def _shard_from(self, first_epoch: int) -> ray.data.DataIterator:
        """The plan from ``first_epoch`` on as one ``streaming_split`` shard: Ray Data's
        executor, busy for the whole plan, then runs in its split coordinator actor instead of
        contending with this process's learner for the GIL."""
        self.shards = self.build_mapped_dataset(first_epoch).streaming_split(1)
        return self.shards[0]

    def batching(self) -> Batching:
        """How this learner's stream cuts its batches."""
        return Batching.of(self.config, repeated=self.plan.repeats_epochs)

    def build(self, *, resources: ResourcePlan | None = None) -> ray.data.Dataset:
        """Builds the pipeline for remote learners, its pool sized beside them and the rest of
        the run (as ``start`` does); each learner reads one ``streaming_split`` shard of it
        (``feeds``)."""
        self._open_pool(resources)
        return self.build_mapped_dataset()

    def _open_pool(self, resources: ResourcePlan | None) -> None:
        if not self.has_spaces:
            raise ConfigError(
                "OfflineData cannot map the input without the data's spaces: set "
                "config.environment(env=...) or both observation_space= and action_space=")
        self.prelearners = PreLearnerPool(self.config, self.input_spaces,
                                          needs_module=self.needs_module, resources=resources)

    @property
    def module_weights(self) -> ray.actor.ActorHandle | None:
        """The actor the PreLearners read the learners' weights from (when the learner
        connector ``needs_module`` and the pool has started)."""
        return None if self.prelearners is None else self.prelearners.module_weights

    def build_mapped_dataset(self, first_epoch: int = 0) -> ray.data.Dataset:
        """read (or ``self.data``) -> ``map_batches(PreLearner)`` (-> ``materialize`` if
        configured), kept as ``self.dataset`` (its ``stats()`` show what Ray Data ran). When the
        plan repeats epochs, instead the plan of many epochs from ``first_epoch`` on
        (``plan_epochs``), the input read and materialized in parts the first time."""
        config = self.config
        if self.plan.repeats_epochs:
            if self._parts is None:
                self._parts = InputParts.of(self._source(materialize_data=False),
                                            rows_per_call(config), config.offline_data.input_)
            self.dataset = plan_epochs(
                self._parts, first_epoch=first_epoch, plan_seed=self._plan_seed,
                prelearner_class=self.prelearner_class,
                prelearner_kwargs=self.prelearners.prelearner_kwargs(),
                map_batches_kwargs=self.prelearners.kwargs)
            return self.dataset
        dataset = self.prelearners.mapped(self._source(), self.prelearner_class)
        self.dataset = (materialize(dataset) if config.offline_data.materialize_mapped_data
                        else stoppable(dataset))
        return self.dataset

    def observation_statistics(self) -> ObservationStatistics:
        """The mean and std of the observations the learners train on, computed from the
        input in one Ray Data pass through the PreLearners (for ``normalize_observations``)."""
        with self.naming_damaged_files():
            source = self._source()
            return observation_statistics(source, self.config, self.input_spaces,
                                          self.prelearner_class, rows_per_call(self.config))

    def _source(self, **changes: Any) -> ray.data.Dataset:
        """The input as read: the dataset a subclass set as ``data``, else the files listed and
        checked at the start (``read_input``), with ``changes`` to the data options."""
        if self._given_data is not None:
            return self._given_data
        return read_input(read_config(self.config, self.input_columns).with_data_options(**changes))

    @property
    def overrides_sample(self) -> bool:
        """Whether this class overrides ``sample`` (then with RLlib's signature)."""
        return type(self).sample is not OfflineData.sample

    @surface_errors
    def sample(self, num_samples: int | None = None, return_iterator: bool = False,
               num_shards: int = 1, *, stop_at_epoch_end: bool = False,
               locality_hints: list[str] | None = None
               ) -> dict[str, np.ndarray] | list[ray.data.DataIterator] | None:
        """The next train batch: ``num_samples`` rows (default ``train_batch_size_per_learner``)
        as a dict of numpy columns, from a stream of this object's own (opened at the first
        call; a learner reads its own feed's instead).
        With ``stop_at_epoch_end``, ``None`` when the epoch ends first (see ``BatchStream``).
        With ``return_iterator``, instead ``num_shards`` ``streaming_split`` shards of the
        mapped dataset (built now if not yet; the one this process's streams read), one per
        remote learner; ``num_shards=0``: one plain iterator of it, as
        RLlib's for a local runner."""
        with self.naming_damaged_files():
            if return_iterator:
                dataset = self._mapped_dataset()
                if num_shards < 1:
                    return [dataset.iterator()]
                self.shards = dataset.streaming_split(num_shards, equal=True,
                                                      locality_hints=locality_hints)
                return self.shards
            if self.stream is None:
                self.stream = self.start()._pipeline_feed().open()
            return self.stream.next_batch(num_samples or self.batch_size,
                                          stop_at_epoch_end=stop_at_epoch_end)

    def feeds(self, num_learners: int, *, locality_hints: list[str] | None = None
              ) -> list[LearnerFeed]:
        """One ``LearnerFeed`` per learner. ``0``: the learner in this process, reading the
        pipeline (``PipelineFeed``), or an override's ``sample()``. Else ``num_learners``
        ``streaming_split`` shards of the pipeline ``build()`` made, from
        ``sample(return_iterator=True)`` (RLlib's keywords only, to an override), placed by
        ``locality_hints``."""
        if num_learners == 0 and not self.overrides_sample:
            return [self._pipeline_feed()]
        return sample_feeds(self, num_learners, locality_hints)

    def _pipeline_feed(self) -> PipelineFeed:
        return PipelineFeed(self._stream_source, self.batching())

    def naming_damaged_files(self) -> AbstractContextManager[None]:
        """``input_locator.naming_damaged_files`` over the input files (not for a dataset a
        subclass gave, or a custom read method: their errors are left as they are)."""
        method = self.config.offline_data.input_read_method
        if (self._given_data is not None or not isinstance(method, str)
                or self.config.input_creator is not None):
            return nullcontext()
        return naming_damaged_files(self.config.input_listing, method)

    @property
    def stats(self) -> StreamStats:
        """What the stream ``sample()`` reads did so far (epochs, rows, waits)."""
        return self.stream.stats if self.stream is not None else StreamStats()

    def pipeline_stats(self) -> dict[str, Any]:
        """What Ray Data reports of the pipeline's execution (``ExecutionFigures``)."""
        mapper = EpochsPreLearner if self.plan.repeats_epochs else self.prelearner_class
        return self._figures.of(self.dataset, self.shards, mapper.__name__)

    def counts(self, *, wait: bool = False) -> dict[str, int]:
        """What the PreLearners counted so far, by reason: data dropped (``DROP_REASONS``:
        ``duplicate_episodes``, ``nonfinite_rows``, ..., and the input files skipped when
        listed, ``skipped_files``) and data kept but noted
        (``actions_out_of_bounds``). Never blocks, unless ``wait``: the latest totals that have
        arrived (``LedgerTotals``)."""
        counts = {} if self.prelearners is None else self.prelearners.counts(wait=wait)
        skipped = {"skipped_files": len(self.skipped_files)} if self.skipped_files else {}
        return {**counts, **skipped}

    def pool(self) -> dict[str, Any]:
        """The PreLearner actor pool as sized for the cluster (``PreLearnerPool.describe``)."""
        return self.prelearners.describe()

    def publish_weights(self, weights: dict[str, np.ndarray], version: int) -> None:
        """Hands the learners' module weights (after ``version`` updates) to the PreLearners;
        a no-op unless the learner connector ``needs_module``."""
        if self.prelearners is not None:
            self.prelearners.publish_weights(weights, version)

    def stop(self) -> None:
        """Stops streaming and releases the pipeline's Ray resources: the ``streaming_split``
        shards and the PreLearner pool (``PreLearnerPool.stop``)."""
        kill_split_coordinators(self.shards)  # first: the stream may wait on one
        self.shards = []
        if self.stream is not None:
            self.stream.stop()
            self.stream = None
        if self.prelearners is not None:
            self.prelearners.stop()

