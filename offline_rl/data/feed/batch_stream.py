"""``BatchStream``: epochs of a Ray Dataset, cut into train batches of an exact size."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from offline_rl.data.feed.epoch_batches import Batch, EpochBatches
from offline_rl.data.ray.iteration_threads import IterationThreads
from offline_rl.data.ray.ray_shutdown import stop_before_ray_shutdown
from offline_rl.data.ray.stoppable_executions import stop_executions
from offline_rl.errors import DataFormatError

_EPOCH_END = "epoch_end"
_BATCH = "batch"
_ERROR = "error"
_POLL_S = 0.1
#: Seconds ``stop`` waits for the fetch in progress.
STOP_WAIT_S = 2.0
#: Seconds a stream's thread is waited for before ``ray.shutdown()`` (building a dataset may
#: take that long to reach a point where it can stop).
SHUTDOWN_WAIT_S = 60.0


@dataclass(frozen=True)
class StreamPosition:
    """Where a consumer stands in the stream: ``rows`` of epoch ``epoch`` taken (the epochs
    before it complete), and whether it has already seen that epoch's end (``ended``: rows
    of it it had fetched remain). A stream started at a position serves exactly the rows after
    it, provided the epochs come in the same order (a seeded pipeline's: ``preserve_order``).

    Examples:
        >>> import numpy as np
        >>> epochs = lambda data, epoch: [{"x": data[:6]}, {"x": data[6:]}]
        >>> stream = BatchStream(lambda: np.arange(10), epochs).start()
        >>> _ = stream.next_batch(4), stream.next_batch(4)
        >>> position = stream.position()
        >>> position, stream.next_batch(4)["x"].tolist()
        (StreamPosition(epoch=0, rows=8, ended=False), [8, 9, 0, 1])
        >>> stream.stop()
        >>> resumed = BatchStream(lambda: np.arange(10), epochs, start=position).start()
        >>> resumed.next_batch(4)["x"].tolist()
        [8, 9, 0, 1]
        >>> resumed.stop()
    """

    epoch: int = 0
    rows: int = 0
    ended: bool = False


@dataclass
class StreamStats:
    """What the stream did so far, as seen by its consumer."""

    #: Epochs the consumer has read to the end.
    epochs_completed: int = 0
    #: Rows in each completed epoch.
    epoch_rows: list[int] = field(default_factory=list)
    #: Seconds the consumer waited for data in total.
    wait_s: float = 0.0
    #: Seconds from ``start()`` until the first fetched batch arrived.
    first_batch_wait_s: float | None = None
    #: Rows each source gave so far, by name, when the stream mixes sources (``MixedStream``).
    source_rows: dict[str, int] = field(default_factory=dict)


def saved_start(saved: Mapping[str, Any]) -> tuple[StreamPosition, StreamStats]:
    """Where a stream resumes, and the epochs it had read: ``BatchStream.saved_position()``
    taken back."""
    return (StreamPosition(saved["epoch"], saved["rows"], saved["ended"]),
            StreamStats(epochs_completed=saved["epochs_completed"],
                        epoch_rows=list(saved["epoch_rows"])))


class BatchStream:
    """Runs epochs in a background thread and hands out batches of exactly ``n`` rows.

    ``open_dataset()`` runs in the thread (reading and mapping may take seconds); each epoch is
    ``epoch_batches(dataset, epoch)``, an iterable of column dicts of any size. ``next_batch(n)``
    slices them into train batches, straddling fetched batches and epoch boundaries, so every
    row of every epoch is used once. Errors in the thread are raised by ``next_batch``.

    Examples:
        >>> import numpy as np
        >>> stream = BatchStream(lambda: np.arange(10),
        ...                      lambda data, epoch: [{"x": data[:6]}, {"x": data[6:]}]).start()
        >>> [stream.next_batch(4)["x"].tolist() for _ in range(3)]
        [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
        >>> stream.stats.epochs_completed, stream.stats.epoch_rows
        (1, [10])
        >>> [stream.next_batch(4, stop_at_epoch_end=True)["x"].tolist() for _ in range(2)]
        [[2, 3, 4, 5], [6, 7, 8, 9]]
        >>> stream.next_batch(4, stop_at_epoch_end=True) is None  # the second epoch ended
        True
        >>> stream.stop()
    """

    def __init__(self, open_dataset: Callable[[], object],
                 epoch_batches: Callable[[object, int], Iterable[Batch]], *,
                 max_queued_batches: int = 4, start: StreamPosition = StreamPosition(),
                 stats: StreamStats | None = None):
        self._open_dataset = open_dataset
        self._epoch_batches = epoch_batches
        self._queue: queue.Queue = queue.Queue(maxsize=max_queued_batches)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="offline-rl-batch-stream",
                                        daemon=True)
        #: Fetched rows not handed out yet, each batch with the epoch it belongs to.
        self._pending: list[tuple[int, Batch]] = []
        self._pending_rows = 0
        self._start = start
        #: The epoch of the last row taken, and how many of its rows were taken.
        self._taken = (start.epoch, start.rows)
        #: The last epoch whose end came through the queue; the last one counted in ``stats``.
        self._received_end = start.epoch - 1
        self._counted_end = start.epoch if start.ended else start.epoch - 1
        self._epoch_rows = 0
        self._started_at = 0.0
        #: Ray Data's iteration threads that start while this stream fetches, which ``stop``
        #: waits for.
        self._iteration = IterationThreads()
        self._failed: BaseException | None = None
        #: Set once the first fetched batch (or the thread's error) is queued.
        self._first_fetched = threading.Event()
        self.stats = stats or StreamStats()

    def start(self) -> BatchStream:
        """Starts the background thread; returns ``self``."""
        self._started_at = time.perf_counter()
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        self._iteration.watch()
        stop_before_ray_shutdown(stop_running_streams)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            dataset = self._open_dataset()
            epoch, skip = self._start.epoch, self._start.rows
            while not self._stopping.is_set():
                rows = 0
                for batch in self._iteration.fetches(self._epoch_batches(dataset, epoch)):
                    if self.stats.first_batch_wait_s is None:
                        self.stats.first_batch_wait_s = time.perf_counter() - self._started_at
                    size = _num_rows(batch)
                    rows += size
                    if skip >= size:
                        skip -= size
                        continue
                    if skip:
                        batch, skip = {name: column[skip:] for name, column in batch.items()}, 0
                    if not self._put((_BATCH, (epoch, batch))):
                        return
                if rows == 0:
                    raise DataFormatError("the dataset is empty: an epoch produced no rows")
                if skip:
                    raise DataFormatError(f"epoch {epoch} has {rows} rows, fewer than the "
                                          f"{self._start.rows} the resumed run had taken of it: "
                                          "the input changed since the checkpoint")
                if not self._put((_EPOCH_END, (epoch, rows))):
                    return
                epoch += 1
        except Exception as error:
            self._put((_ERROR, error))
        finally:
            if isinstance(self._epoch_batches, EpochBatches):
                self._epoch_batches.close()

    def _put(self, item: tuple) -> bool:
        while not self._stopping.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                if not self._first_fetched.is_set():
                    self._first_fetched.set()
                return True
            except queue.Full:
                continue
        return False

    def _get(self) -> tuple:
        if self._failed is not None:
            raise self._failed
        started = time.perf_counter()
        item = self._queue.get()
        self.stats.wait_s += time.perf_counter() - started
        if item[0] == _ERROR:
            self._failed = item[1]
            raise self._failed
        return item

    def wait_for_data(self) -> None:
        """Returns once the thread has fetched its first batch (the dataset opened, mapped data
        materialized), or has failed (the error is raised by ``next_batch``)."""
        self._first_fetched.wait()

    def next_batch(self, num_rows: int, *, stop_at_epoch_end: bool = False) -> Batch | None:
        """The next ``num_rows`` rows as a dict of numpy columns.

        With ``stop_at_epoch_end``, returns ``None`` instead when the current epoch ends before
        ``num_rows`` rows are gathered; the rows gathered so far open the next batch."""
        while self._pending_rows < num_rows:
            kind, payload = self._get()
            if kind == _EPOCH_END:
                epoch, rows = payload
                self._received_end = epoch
                if epoch <= self._counted_end:  # seen before a resume
                    continue
                self._counted_end = epoch
                self.stats.epochs_completed += 1
                self.stats.epoch_rows.append(rows)
                if stop_at_epoch_end:
                    return None
                continue
            self._pending.append(payload)
            self._pending_rows += _num_rows(payload[1])
        return self._take(num_rows)

    def _take(self, num_rows: int) -> Batch:
        parts, needed = [], num_rows
        while needed:
            epoch, head = self._pending[0]
            rows = min(_num_rows(head), needed)
            parts.append({name: column[:rows] for name, column in head.items()})
            if rows == _num_rows(head):
                self._pending.pop(0)
            else:
                self._pending[0] = epoch, {name: column[rows:] for name, column in head.items()}
            taken = self._taken[1] if self._taken[0] == epoch else 0
            self._taken = (epoch, taken + rows)
            needed -= rows
        self._pending_rows -= num_rows
        if len(parts) == 1:
            return parts[0]
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}

    def position(self) -> StreamPosition:
        """Where the consumer stands: the rows handed out so far, not those fetched ahead."""
        if self._pending:
            epoch = self._pending[0][0]
            rows = self._taken[1] if self._taken[0] == epoch else 0
        elif self._taken[0] <= self._received_end:  # that epoch is used up
            epoch, rows = self._received_end + 1, 0
        else:
            epoch, rows = self._taken
        return StreamPosition(epoch, rows, ended=epoch <= self._counted_end)

    def saved_position(self) -> dict[str, Any]:
        """``position()`` and the epochs read so far, as a checkpoint saves them
        (``saved_start`` takes them back)."""
        return {**dataclasses.asdict(self.position()),
                "epochs_completed": self.stats.epochs_completed,
                "epoch_rows": list(self.stats.epoch_rows)}

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """Stops the background thread and drops queued data. The Ray Data executions the
        thread runs through ``stoppable_executions.materialize`` (building its dataset) end at
        their next step; otherwise the thread ends after the fetch in progress, waited for
        ``wait_s`` at most (default ``STOP_WAIT_S``): a fetch can wait on Ray Data without end (a
        ``streaming_split`` shard waits for the other learners to ask for the next epoch), and
        then the daemon thread ends with the pipeline its owner stops next.

        Then it waits for its ``iteration_threads`` but those another running stream noted too
        (``IterationThreads.release``): a pass's threads end shortly after it, cleaning up
        through Ray as they do, and after ``ray.shutdown()`` that ends the whole process."""
        self._stopping.set()
        stop_executions(self._thread)
        self._thread.join(timeout=wait_s)
        self._pending.clear()
        with _RUNNING_LOCK:
            _RUNNING.discard(self)
        self._iteration.release(wait_s)

    @property
    def iteration_threads(self) -> set[threading.Thread]:
        """Ray Data's iteration threads that started while this stream fetched (those of
        another stream fetching at the same time too)."""
        return self._iteration.threads


#: The streams started and not stopped in this process.
_RUNNING: weakref.WeakSet[BatchStream] = weakref.WeakSet()
_RUNNING_LOCK = threading.Lock()


def stop_running_streams() -> None:
    """Stops every stream started and not stopped (before ``ray.shutdown()``: a stream's
    thread calling Ray as it shuts down ends the process)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for stream in running:
        stream.stop(wait_s=SHUTDOWN_WAIT_S)


def _num_rows(batch: Batch) -> int:
    return len(next(iter(batch.values())))


@dataclass(frozen=True)
class Batching:
    """How a learner's stream cuts its batches: ``batch_size`` rows, fetched with
    ``iter_batches_kwargs``, shuffled with ``seed`` per epoch, and many epochs to one Ray Data
    pass when ``repeated`` (``EpochBatches``). The one place a ``BatchStream`` is assembled.

    Examples:
        >>> import ray.data
        >>> batching = Batching(batch_size=4, iter_batches_kwargs={
        ...     "local_shuffle_buffer_size": None})
        >>> stream = batching.stream(lambda: ray.data.range(10))
        >>> stream.next_batch(4)["id"].tolist()
        [0, 1, 2, 3]
        >>> stream.stop()
    """

    batch_size: int
    iter_batches_kwargs: Mapping[str, Any] = field(default_factory=dict)
    seed: int | None = None
    repeated: bool = False

    @classmethod
    def of(cls, config: Any, *, repeated: bool = False) -> Batching:
        """The batching a config asks for: any config with the ``training``,
        ``offline_data`` and ``debugging`` sections (``DataConfig``, ``LearnerConfig``)."""
        return cls(batch_size=config.training.train_batch_size_per_learner,
                   iter_batches_kwargs=config.offline_data.iter_batches_kwargs,
                   seed=config.debugging.seed, repeated=repeated)

    def stream(self, open_dataset: Callable[[], object], *,
               saved: Mapping[str, Any] | None = None) -> BatchStream:
        """A started ``BatchStream`` of what ``open_dataset()`` returns (in the stream's
        thread): from the start, or from where a stream's ``saved_position()`` stood."""
        epochs = EpochBatches(batch_size=self.batch_size,
                              iter_batches_kwargs=self.iter_batches_kwargs, seed=self.seed,
                              repeated=self.repeated)
        start, stats = (StreamPosition(), None) if saved is None else saved_start(saved)
        return BatchStream(open_dataset, epochs, start=start, stats=stats).start()
