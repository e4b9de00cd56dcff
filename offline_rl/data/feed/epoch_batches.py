"""``EpochBatches``: the batches of one epoch of a Ray Dataset (or of a pass holding many),
in fetches of several train batches, as a ``BatchStream`` reads them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

Batch = dict[str, np.ndarray]

#: Rows fetched from Ray Data at a time, in train batches (then sliced into train batches).
ROWS_PER_FETCH = 8
#: Default prefetch depth of ``iter_batches``.
DEFAULT_PREFETCH_BATCHES = 2
#: The column that tags each row with its epoch when one Ray Data pass holds many epochs.
EPOCH_COLUMN = "__epoch"


class EpochBatches:
    """Epoch after epoch of ``source`` (the dataset, or one learner's shard), in fetches of
    ``ROWS_PER_FETCH`` train batches of ``batch_size`` rows; ``BatchStream``'s
    ``epoch_batches``.

    By default each epoch is one ``iter_batches`` pass (one Ray Data execution), locally
    shuffled with a per-epoch seed, with the user's ``iter_batches_kwargs`` on top. With
    ``repeated``, one pass holds many epochs, each row tagged with its epoch in
    ``EPOCH_COLUMN`` (``offline_rl.data.pipeline.repeated_epochs``): an epoch ends where the tag
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
