"""``MixedStream``: train batches whose rows come from several sources in fixed proportions.

Each source has a stream of its own (a ``BatchStream``: its epochs one after the other, so a
small source repeats while a large one streams on); a train batch of ``n`` rows takes ``k_i``
rows from source ``i``, counted by largest remainder with the error carried over
(``mix_counts``): after any number of batches holding ``T`` rows in all, source ``i`` has given
``w_i * T`` rows give or take less than one (so one batch holds ``w_i * n`` rows give or take
less than two). The rows of a batch are then shuffled together (seeded by the batch's index,
so a resumed run composes the same batches).

An epoch of the mix ends when every source has been read to its end at least once more (its
slowest source sets the pace; the others repeat meanwhile).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from offline_rl.data.feed.batch_stream import BatchStream, StreamStats
from offline_rl.data.feed.epoch_batches import Batch
from offline_rl.errors import DataFormatError, OfflineRLError, warn_at_caller
from offline_rl.rows import take_rows


def mix_counts(weights: Sequence[float], taken: Sequence[int], num_rows: int) -> list[int]:
    """The rows each source gives to the next batch of ``num_rows``, when they gave ``taken``
    so far: largest remainder of what each owes at the end of the batch, so that each total
    stays within one row of its weight times all rows given.

    Examples:
        >>> taken = [0, 0]
        >>> for _ in range(4):
        ...     counts = mix_counts([0.8, 0.2], taken, 7)
        ...     taken = [t + c for t, c in zip(taken, counts)]
        ...     print(counts, taken)
        [6, 1] [6, 1]
        [5, 2] [11, 3]
        [6, 1] [17, 4]
        [5, 2] [22, 6]
    """
    total = sum(taken) + num_rows
    owed = [weight * total - given for weight, given in zip(weights, taken)]
    counts = [max(0, int(np.floor(amount))) for amount in owed]
    left = num_rows - sum(counts)
    by_remainder = sorted(range(len(weights)), key=lambda i: (counts[i] - owed[i], i))
    for index in by_remainder[:left]:
        counts[index] += 1
    return counts


class MixedStream:
    """Composes batches from ``streams`` (one per source, named ``names``) at ``weights``
    (which sum to 1), as ``BatchStream.next_batch`` would for one source.

    Examples:
        >>> import numpy as np
        >>> big = BatchStream(lambda: np.arange(100), lambda data, epoch: [{"x": data}]).start()
        >>> small = BatchStream(lambda: -np.arange(1, 4), lambda data, epoch: [{"x": data}]).start()
        >>> mixed = MixedStream([big, small], [0.75, 0.25], ["big", "small"], seed=0)
        >>> batches = [mixed.next_batch(8)["x"] for _ in range(3)]
        >>> [int((batch < 0).sum()) for batch in batches], mixed.source_rows
        ([2, 2, 2], {'big': 18, 'small': 6})
        >>> sorted(np.concatenate(batches)[np.concatenate(batches) < 0].tolist())  # repeats
        [-3, -3, -2, -2, -1, -1]
        >>> mixed.stop()
    """

    def __init__(self, streams: list[BatchStream], weights: Sequence[float], names: list[str], *,
                 seed: int | None = None, position: dict[str, Any] | None = None):
        self.streams = streams
        self.weights = list(weights)
        self.names = names
        self.seed = seed
        position = position or {}
        #: Rows each source has given so far (the mix's position, with ``batches``).
        self.taken: list[int] = list(position.get("taken", [0] * len(streams)))
        self.batches: int = position.get("batches", 0)
        #: Columns only some sources give, left out of every batch (``_leave_out_unshared``).
        self.left_out: set[str] = set()
        #: The mix's epochs whose end ``next_batch(stop_at_epoch_end=True)`` has reported.
        self._reported_epochs: int = position.get("reported_epochs", 0)
        self.stats = StreamStats(epochs_completed=position.get("epochs_completed", 0),
                                 epoch_rows=list(position.get("epoch_rows", [])))
        self.stats.source_rows = self.source_rows
        self._epoch_start_rows = sum(self.taken)

    @property
    def source_rows(self) -> dict[str, int]:
        """Rows each source has given so far, by name."""
        return dict(zip(self.names, self.taken))

    def next_batch(self, num_rows: int, *, stop_at_epoch_end: bool = False) -> Batch | None:
        """The next ``num_rows`` rows, mixed. With ``stop_at_epoch_end``, ``None`` instead once
        after each end of an epoch of the mix (the batch that reached it was handed out)."""
        self._count_epochs()
        if stop_at_epoch_end and self.stats.epochs_completed > self._reported_epochs:
            self._reported_epochs = self.stats.epochs_completed
            return None
        counts = mix_counts(self.weights, self.taken, num_rows)
        parts = {index: self._take(index, stream, count)
                 for index, (stream, count) in enumerate(zip(self.streams, counts)) if count}
        self._check_alike(parts)
        self._leave_out_unshared(parts)
        for index, count in enumerate(counts):
            self.taken[index] += count
        batch = {name: np.concatenate([part[name] for part in parts.values()])
                 for name in next(iter(parts.values())) if name not in self.left_out}
        order = np.random.default_rng(
            None if self.seed is None else (self.seed, self.batches)).permutation(num_rows)
        self.batches += 1
        self.stats.source_rows = self.source_rows
        self._count_epochs()
        if not stop_at_epoch_end:
            self._reported_epochs = self.stats.epochs_completed
        return take_rows(batch, order)

    def _take(self, index: int, stream: BatchStream, count: int) -> Batch:
        try:
            return stream.next_batch(count)
        except OfflineRLError as error:  # name the source, keep the type
            raise type(error)(f"source {self.names[index]!r}: {error}") from None

    def _leave_out_unshared(self, parts: dict[int, Batch]) -> None:
        """Columns that only some sources give (a recorded extra, as ``action_logp``) are left
        out of every batch from the first one that meets them on (the first batch, unless a
        batch holds fewer rows than ``1 / weight`` of a source), with one warning naming them
        and the sources without them (a learner that needs such a column says so)."""
        shared = set.intersection(*(set(part) for part in parts.values()))
        unshared = {name for part in parts.values() for name in part} - shared - self.left_out
        if not unshared:
            return
        self.left_out |= unshared
        lacking = [self.names[index] for index, part in parts.items()
                   if not unshared <= part.keys()]
        warn_at_caller(f"mixed sources: {sorted(unshared)} left out of the train batches, as "
                       f"source(s) {lacking} do not give them; give every source the same "
                       "columns to train on them")

    def _check_alike(self, parts: dict[int, Batch]) -> None:
        """Refuses sources whose batches differ in the per-row shape of a column they share,
        naming them."""
        (first, reference), *others = parts.items()
        for index, part in others:
            for name in part.keys() & reference.keys():
                if part[name].shape[1:] != reference[name].shape[1:]:
                    raise DataFormatError(
                        f"source {self.names[index]!r} gives {name!r} of per-row shape "
                        f"{part[name].shape[1:]}, but source {self.names[first]!r} of "
                        f"{reference[name].shape[1:]}: mixed sources must map to the same "
                        "spaces")

    def _count_epochs(self) -> None:
        epochs = min(stream.stats.epochs_completed for stream in self.streams)
        while self.stats.epochs_completed < epochs:
            self.stats.epochs_completed += 1
            self.stats.epoch_rows.append(sum(self.taken) - self._epoch_start_rows)
            self._epoch_start_rows = sum(self.taken)
        self.stats.wait_s = sum(stream.stats.wait_s for stream in self.streams)
        waits = [stream.stats.first_batch_wait_s for stream in self.streams]
        self.stats.first_batch_wait_s = None if None in waits else max(waits)

    def position(self) -> dict[str, Any]:
        """Where the mix stands: each source's ``StreamPosition`` and epochs, and the mix's
        counts (what ``MixedStream(position=...)`` takes back, with each source's stream)."""
        return {"sources": [stream.saved_position() for stream in self.streams],
                "taken": list(self.taken), "batches": self.batches,
                "reported_epochs": self._reported_epochs,
                "epochs_completed": self.stats.epochs_completed,
                "epoch_rows": list(self.stats.epoch_rows)}

    def saved_position(self) -> dict[str, Any]:
        """``position()`` as a checkpoint saves it (``MixedFeed.open`` takes it back)."""
        return {"mix": self.position()}

    def wait_for_data(self) -> None:
        """Returns once every source's stream has fetched its first batch (or failed)."""
        for stream in self.streams:
            stream.wait_for_data()

    def stop(self) -> None:
        """Stops every source's stream."""
        for stream in self.streams:
            stream.stop()

