"""``LearnerFeed``: what one learner trains on, described where the pipeline is built and
opened where the learner runs.

``OfflineData.feeds(n)`` (a mix's too) gives one feed per learner; the learner, in the driver
or in a Ray actor, calls ``open()`` and reads the ``FeedStream`` it returns; a checkpoint saves
the stream's ``saved_position()``, and ``open(saved)`` resumes there. A feed is one of:

- ``ShardFeed``: one ``streaming_split`` shard of the pipeline, cut into exact batches
  (``Batching``). Picklable: it is sent to a remote learner.
- ``PipelineFeed``: the pipeline of this process's learner, opened in the stream's thread
  (``OfflineData``'s, built on first use), cut the same way.
- ``MixedFeed``: a feed of each source of a mix, mixed by weight (``MixedStream``).
- ``SampleFeed``: a data object's ``sample()``, in this process: a subclass's override of
  RLlib's ``sample``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from offline_rl.data.feed.batch_stream import Batching, BatchStream, StreamStats
from offline_rl.data.feed.epoch_batches import Batch
from offline_rl.data.feed.mixed_stream import MixedStream
from offline_rl.errors import DataFormatError, warn_at_caller


class FeedStream(Protocol):
    """An opened feed: batches of an exact size, what the stream did so far, where it stands
    (for a checkpoint; ``None``: it cannot resume), and a stop."""

    @property
    def stats(self) -> StreamStats: ...

    def next_batch(self, num_rows: int, *, stop_at_epoch_end: bool = False
                   ) -> Batch | None: ...

    def saved_position(self) -> dict[str, Any] | None: ...

    def wait_for_data(self) -> None: ...

    def stop(self) -> None: ...


class LearnerFeed(Protocol):
    """One learner's batches, to ``open`` where the learner runs: from the start, or from where
    an opened stream's ``saved_position()`` stood."""

    def open(self, saved: Mapping[str, Any] | None = None) -> FeedStream: ...


@dataclass(frozen=True)
class ShardFeed:
    """A ``streaming_split`` shard (any Ray ``DataIterator``) cut into batches by ``batching``.

    Examples:
        >>> import ray.data
        >>> shard = ray.data.range(10).iterator()
        >>> stream = ShardFeed(shard, Batching(4, {"local_shuffle_buffer_size": None})).open()
        >>> stream.next_batch(4)["id"].tolist()
        [0, 1, 2, 3]
        >>> stream.stop()
    """

    shard: Any
    batching: Batching

    def open(self, saved: Mapping[str, Any] | None = None) -> BatchStream:
        """The started stream of the shard's batches, epoch after epoch."""
        return self.batching.stream(lambda: self.shard, saved=saved)


@dataclass(frozen=True)
class PipelineFeed:
    """The batches of what ``open_dataset()`` returns in the stream's thread (building a
    pipeline may take seconds), cut by ``batching``; for a learner in this process.

    Examples:
        >>> import ray.data
        >>> feed = PipelineFeed(lambda: ray.data.range(10),
        ...                     Batching(4, {"local_shuffle_buffer_size": None}))
        >>> stream = feed.open()
        >>> _ = stream.next_batch(4); saved = stream.saved_position(); stream.stop()
        >>> resumed = feed.open(saved)
        >>> resumed.next_batch(4)["id"].tolist()
        [4, 5, 6, 7]
        >>> resumed.stop()
    """

    open_dataset: Callable[[], Any]
    batching: Batching

    def open(self, saved: Mapping[str, Any] | None = None) -> BatchStream:
        """The started stream of the pipeline's batches, epoch after epoch."""
        return self.batching.stream(self.open_dataset, saved=saved)


@dataclass(frozen=True)
class MixedFeed:
    """One learner's part of a mix: a feed of each source, mixed at ``weights``."""

    feeds: list[LearnerFeed]
    weights: list[float]
    names: list[str]
    seed: int | None = None

    def open(self, saved: Mapping[str, Any] | None = None) -> MixedStream:
        """The started stream of mixed batches; resumed, each source's stream and the mix's
        counts where ``MixedStream.saved_position()`` left them."""
        if saved is None:
            return MixedStream([feed.open() for feed in self.feeds], self.weights, self.names,
                               seed=self.seed)
        mix = saved["mix"]
        if len(mix["sources"]) != len(self.feeds):
            raise DataFormatError(f"the checkpoint's data position mixes {len(mix['sources'])} "
                                  f"sources, this run {len(self.feeds)}: {self.names}")
        return MixedStream([feed.open(position) for feed, position in
                            zip(self.feeds, mix["sources"])], self.weights, self.names,
                           seed=self.seed, position=mix)


class SampleFeed:
    """Reads ``data.sample()`` in this process (``data``'s owner starts and stops it): a
    subclass's override of RLlib's ``sample``, whose signature lacks ``stop_at_epoch_end`` (the
    keyword is passed only when asked) and which cannot say where it stands.

    Examples:
        >>> from offline_rl import BCConfig, OfflineData
        >>> data = OfflineData(BCConfig().environment("CartPole-v1")
        ...                    .offline_data(input_=str(cartpole_data))).start()
        >>> stream = SampleFeed(data).open()
        >>> stream.next_batch(64)["obs"].shape, stream.stats is data.stats
        ((64, 4), True)
        >>> stream.stop(); data.stop()
    """

    def __init__(self, data: Any):
        self.data = data

    def open(self, saved: Mapping[str, Any] | None = None) -> SampleFeed:
        """Itself: ``data`` already streams. A ``saved`` position is not resumed (with one
        warning saying so): ``data.sample()`` reads on from where it stands."""
        if saved is not None:
            warn_at_caller(f"the checkpoint's data position is not resumed: "
                           f"{type(self.data).__name__} overrides sample(), which reads on "
                           "from where it stands")
        return self

    def saved_position(self) -> None:
        """``None``: an overridden ``sample()`` cannot say where it stands."""

    def wait_for_data(self) -> None:
        """At once: ``data.sample()`` waits itself."""

    @property
    def stats(self) -> StreamStats:
        """``data.stats``."""
        return self.data.stats

    def next_batch(self, num_rows: int, *, stop_at_epoch_end: bool = False) -> Batch | None:
        """``data.sample(num_rows)`` (with ``stop_at_epoch_end`` when true)."""
        if stop_at_epoch_end:
            return self.data.sample(num_rows, stop_at_epoch_end=True)
        return self.data.sample(num_rows)

    def stop(self) -> None:
        """Nothing: ``data`` is its owner's to stop."""
