"""``BatchStream``: epochs of a Ray Dataset, cut into train batches of an exact size."""

from __future__ import annotations

import queue
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from offline_rl.data.ray_shutdown import stop_before_ray_shutdown
from offline_rl.data.stoppable_executions import stop_executions
from offline_rl.errors import DataFormatError

Batch = dict[str, np.ndarray]

#: Rows fetched from Ray Data at a time, in train batches (then sliced into train batches).
ROWS_PER_FETCH = 8
#: Default prefetch depth of ``iter_batches``.
DEFAULT_PREFETCH_BATCHES = 2
#: The column that tags each row with its epoch when one Ray Data pass holds many epochs.
EPOCH_COLUMN = "__epoch"

_EPOCH_END = "epoch_end"
_BATCH = "batch"
_ERROR = "error"
_POLL_S = 0.1
#: Seconds ``stop`` waits for the fetch in progress.
STOP_WAIT_S = 2.0
#: Seconds a stream's thread is waited for before ``ray.shutdown()`` (building a dataset may
#: take that long to reach a point where it can stop).
SHUTDOWN_WAIT_S = 60.0
#: The name Ray Data gives the threads that run an ``iter_batches`` pass.
RAY_DATA_ITERATION_THREAD = "iter_threaded"


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
        #: Ray Data's iteration threads that started while this stream fetched (those of
        #: another stream fetching at the same time too), which ``stop`` waits for.
        self.iteration_threads: set[threading.Thread] = set()
        self._failed: BaseException | None = None
        #: Set once the first fetched batch (or the thread's error) is queued.
        self._first_fetched = threading.Event()
        self.stats = stats or StreamStats()

    def start(self) -> BatchStream:
        """Starts the background thread; returns ``self``."""
        self._started_at = time.perf_counter()
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        stop_before_ray_shutdown(stop_running_streams)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            dataset = self._open_dataset()
            epoch, skip = self._start.epoch, self._start.rows
            while not self._stopping.is_set():
                rows = 0
                for batch in self._fetches(self._epoch_batches(dataset, epoch)):
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

    def _fetches(self, batches: Iterable[Batch]) -> Iterator[Batch]:
        """``batches``, noting in ``iteration_threads`` the Ray Data iteration threads that
        start during each fetch (an ``iter_batches`` pass starts them in its first one)."""
        iterator = iter(batches)
        while True:
            before = set(threading.enumerate())
            try:
                batch = next(iterator, None)
            finally:
                started = {thread for thread in threading.enumerate()  # alive: joinable
                           if thread.name == RAY_DATA_ITERATION_THREAD and thread not in before
                           and thread.is_alive()}
                if started:
                    self.iteration_threads = {thread for thread in self.iteration_threads
                                              if thread.is_alive()} | started
            if batch is None:
                return
            yield batch

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

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """Stops the background thread and drops queued data. The Ray Data executions the
        thread runs through ``stoppable_executions.materialize`` (building its dataset) end at
        their next step; otherwise the thread ends after the fetch in progress, waited for
        ``wait_s`` at most (default ``STOP_WAIT_S``): a fetch can wait on Ray Data without end (a
        ``streaming_split`` shard waits for the other learners to ask for the next epoch), and
        then the daemon thread ends with the pipeline its owner stops next.

        Then it waits (``join_threads``) for its ``iteration_threads`` but those another
        running stream noted too (the streams of a mix, or of a multi-agent run's modules,
        start theirs at the same time): a pass's threads end shortly after it, cleaning up
        through Ray as they do, and after ``ray.shutdown()`` that ends the whole process ("The
        core worker has already been shutdown"). The last of those streams to stop waits for
        them all."""
        self._stopping.set()
        stop_executions(self._thread)
        self._thread.join(timeout=wait_s)
        self._pending.clear()
        with _RUNNING_LOCK:
            _RUNNING.discard(self)
            running = set().union(*(stream.iteration_threads for stream in _RUNNING))
        join_threads(self.iteration_threads - running, wait_s)


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


def join_threads(threads: Collection[threading.Thread], timeout_s: float = STOP_WAIT_S
                 ) -> None:
    """Waits until ``threads`` have ended, at most ``timeout_s`` in all.

    Examples:
        >>> done = threading.Thread(target=time.sleep, args=(0.01,))
        >>> done.start()
        >>> join_threads([done])
        >>> done.is_alive()
        False
    """
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


def _num_rows(batch: Batch) -> int:
    return len(next(iter(batch.values())))


class EpochBatches:
    """Epoch after epoch of ``source`` (the dataset, or one learner's shard), in fetches of
    ``ROWS_PER_FETCH`` train batches of ``batch_size`` rows; ``BatchStream``'s
    ``epoch_batches``.

    By default each epoch is one ``iter_batches`` pass (one Ray Data execution), locally
    shuffled with a per-epoch seed, with the user's ``iter_batches_kwargs`` on top. With
    ``repeated``, one pass holds many epochs, each row tagged with its epoch in
    ``EPOCH_COLUMN`` (``offline_rl.data.repeated_epochs``): an epoch ends where the tag
    changes or the pass ends, and the next epoch goes on with the same pass. ``source`` may
    then also be a function of the first epoch a new pass is to start at.

    Examples:
        >>> import numpy as np, ray.data
        >>> tagged = ray.data.from_items([{"x": x, EPOCH_COLUMN: x // 3} for x in range(6)])
        >>> epochs = EpochBatches(batch_size=2, repeated=True)
        >>> [[batch["x"].tolist() for batch in epochs(tagged, epoch)] for epoch in range(3)]
        [[[0, 1, 2]], [[3, 4, 5]], [[0, 1, 2]]]
    """

    def __init__(self, *, batch_size: int, iter_batches_kwargs: Mapping[str, Any] | None = None,
                 seed: int | None = None, repeated: bool = False):
        self.fetch_rows = ROWS_PER_FETCH * batch_size
        self.iter_batches_kwargs = dict(iter_batches_kwargs or {})
        self.seed = seed
        self.repeated = repeated
        self._pass: Iterator[Batch] | None = None
        #: Rows fetched from the pass that belong to the next epoch.
        self._next_epoch_rows: Batch | None = None

    def __call__(self, source: Any, epoch: int) -> Iterable[Batch]:
        if self.repeated:
            return self._tagged_epoch(source, epoch)
        kwargs: dict[str, Any] = {
            "prefetch_batches": DEFAULT_PREFETCH_BATCHES,
            "local_shuffle_buffer_size": 2 * self.fetch_rows,
            **self.iter_batches_kwargs,
        }
        if kwargs["local_shuffle_buffer_size"] and "local_shuffle_seed" not in kwargs:
            kwargs["local_shuffle_seed"] = None if self.seed is None else self.seed + epoch
        return source.iter_batches(batch_size=self.fetch_rows, batch_format="numpy", **kwargs)

    def _tagged_epoch(self, source: Any, epoch: int) -> Iterator[Batch]:
        """The rows of one epoch of a tagged pass, starting a new pass if none is open."""
        if self._pass is None:
            dataset = source(epoch) if callable(source) else source
            self._pass = iter(dataset.iter_batches(
                batch_size=self.fetch_rows, batch_format="numpy",
                **{"prefetch_batches": DEFAULT_PREFETCH_BATCHES, **self.iter_batches_kwargs}))
        tag = None
        try:
            while True:
                batch, self._next_epoch_rows = self._next_epoch_rows, None
                if batch is None:
                    batch = next(self._pass, None)
                if batch is None:  # the pass ended, and the epoch with it
                    self._pass = None
                    return
                tags = batch.pop(EPOCH_COLUMN)
                tag = tags[0] if tag is None else tag
                later = np.flatnonzero(tags != tag)
                if not len(later):
                    yield batch
                    continue
                cut = later[0]
                if cut:
                    yield {name: column[:cut] for name, column in batch.items()}
                self._next_epoch_rows = {name: column[cut:] for name, column in batch.items()}
                self._next_epoch_rows[EPOCH_COLUMN] = tags[cut:]
                return
        except GeneratorExit:  # the consumer left mid-epoch (it stops): so does the pass,
            self.close()  # now, while Ray is up (Ray Data's cleanup calls Ray)
            raise

    def close(self) -> None:
        """Ends the pass that is open, if any (a consumer that stops between two epochs
        leaves it open)."""
        if self._pass is not None:
            self._pass.close()
            self._pass = self._next_epoch_rows = None
