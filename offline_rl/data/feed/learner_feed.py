"""``LearnerFeed``: what one learner trains on, described where the pipeline is built and
opened where the learner runs.

``OfflineData.feeds(n)`` (a mix's too) gives one feed per learner; the learner, in the driver
or in a Ray actor, calls ``open()`` and reads the ``FeedStream`` it returns. A feed is one of:

- ``ShardFeed``: one ``streaming_split`` shard of the pipeline, cut into exact batches
  (``Batching``). Picklable: it is sent to a remote learner.
- ``MixedFeed``: a ``ShardFeed`` of each source of a mix, mixed by weight (``MixedStream``).
- ``SampleFeed``: a data object's ``sample()``, in this process: the stream ``OfflineData.start()``
  opened, or a subclass's override of RLlib's ``sample``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from offline_rl.data.feed.batch_stream import Batching, BatchStream, StreamStats
from offline_rl.data.feed.epoch_batches import Batch
from offline_rl.data.feed.mixed_stream import MixedStream


class FeedStream(Protocol):
    """An opened feed: batches of an exact size, what the stream did so far, and a stop."""

    @property
    def stats(self) -> StreamStats: ...

    def next_batch(self, num_rows: int, *, stop_at_epoch_end: bool = False
                   ) -> Batch | None: ...

    def stop(self) -> None: ...


class LearnerFeed(Protocol):
    """One learner's batches, to ``open`` where the learner runs."""

    def open(self) -> FeedStream: ...


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

    def open(self) -> BatchStream:
        """The started stream of the shard's batches, epoch after epoch."""
        return self.batching.stream(lambda: self.shard)


@dataclass(frozen=True)
class MixedFeed:
    """One learner's part of a mix: a feed of each source, mixed at ``weights``."""

    feeds: list[ShardFeed]
    weights: list[float]
    names: list[str]
    seed: int | None = None

    def open(self) -> MixedStream:
        """The started stream of mixed batches."""
        return MixedStream([feed.open() for feed in self.feeds], self.weights, self.names,
                           seed=self.seed)


class SampleFeed:
    """Reads ``data.sample()`` in this process (``data``'s owner starts and stops it). RLlib's
    ``sample`` signature lacks ``stop_at_epoch_end``: the keyword is passed only when asked.

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

    def open(self) -> SampleFeed:
        """Itself: ``data`` already streams."""
        return self

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
