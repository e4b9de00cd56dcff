"""Custom input readers as a Ray Dataset: one read task per reader.

``input_`` may be a callable ``(IOContext) -> InputReader`` or a name ``register_input``
registered (``offline_rl.data.source.input_api``). Read task ``i`` of ``N`` builds its reader with
``creator(IOContext(worker_index=i, config=<the offline_data options as a dict>))`` and calls
``next()`` until its reader has returned ``input_reader_max_rows`` rows (timesteps; an endless
reader is bounded so) or raises ``StopIteration``. Each call is bounded by
``input_reader_timeout_s``, and one that raises or hangs fails the read naming the reader
(``offline_rl.data.source.reader_calls``). ``N`` is
``input_read_method_kwargs["override_num_blocks"]`` (default 1), as for the file readers.

Each batch becomes one row of the legacy SampleBatch format (each column a list of its values,
``infos`` left out), with a ``path`` column naming the reader and the batch, so the
PreLearners decode, check and sample it as they do SampleBatch JSON
(``input_read_sample_batches``), and their errors name the reader.

Examples:
    >>> rows = batch_row({"obs": np.zeros((2, 1)), "actions": np.array([0, 1])}, "reader 0")
    >>> rows["obs"], rows["actions"], rows["path"]
    ([[0.0], [0.0]], [0, 1], 'reader 0')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import ray.data
from ray.data.block import BlockMetadata

from offline_rl.columns import PATH_COLUMN, Columns
from offline_rl.data.source.data_config import DataConfig
from offline_rl.data.source.input_api import InputCreator
from offline_rl.data.source.io_context import IOContext
from offline_rl.data.source.reader_calls import END, ReaderCalls
from offline_rl.errors import DataFormatError

#: Batches gathered into one block of a read task.
BATCHES_PER_BLOCK = 64
#: The read method keyword that sets the number of readers.
NUM_READERS_KWARG = "override_num_blocks"


class CustomInputDatasource(ray.data.Datasource):
    """``num_readers`` read tasks, task ``i`` reading the reader ``creator`` builds for
    ``IOContext(worker_index=i, config=config)``, at most ``max_rows`` rows."""

    def __init__(self, creator: InputCreator, config: dict[str, Any], *, num_readers: int,
                 max_rows: int, timeout_s: float) -> None:
        self.creator = creator
        self.config = config
        self.num_readers = num_readers
        self.max_rows = max_rows
        self.timeout_s = timeout_s

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(self, parallelism: int, **_: Any) -> list[ray.data.ReadTask]:
        """One task per reader, whatever ``parallelism`` Ray Data asks for."""
        metadata = BlockMetadata(num_rows=None, size_bytes=None, exec_stats=None,
                                 input_files=None)
        return [ray.data.ReadTask(lambda index=index: self._read(index), metadata)
                for index in range(self.num_readers)]

    def _read(self, worker_index: int) -> Iterator[pa.Table]:
        calls = ReaderCalls(worker_index=worker_index, timeout_s=self.timeout_s)
        context = IOContext(config=self.config, worker_index=worker_index)
        creator = getattr(self.creator, "__qualname__", type(self.creator).__qualname__)
        try:
            reader = calls.call(lambda: self.creator(context), f"its creator {creator}(ioctx)")
            calls.named(reader)
            yield from self._batches(reader, calls)
        finally:
            calls.close()

    def _batches(self, reader: Any, calls: ReaderCalls) -> Iterator[pa.Table]:
        """Blocks of the reader's batches, as ``SampleBatch``-format rows."""
        block: list[dict[str, Any]] = []
        batches = rows = 0
        while rows < self.max_rows:
            batch = calls.call(lambda: reader.next(), f"next() call {batches}")
            if batch is END:
                break
            row = batch_row(batch, f"{calls.name}, batch {batches}")
            batches += 1
            rows += len(row[next(iter(set(row) - {PATH_COLUMN}))])
            block.append(row)
            if len(block) == BATCHES_PER_BLOCK:
                yield pa.Table.from_pylist(block)
                block = []
        if block:
            yield pa.Table.from_pylist(block)


def batch_row(batch: Any, where: str) -> dict[str, Any]:
    """A reader's batch as one SampleBatch-format row (each column a list), named ``where``;
    ``DataFormatError`` when it is no dict of array columns."""
    if not isinstance(batch, Mapping) or not batch:
        raise DataFormatError(
            f"{where}: next() returned {type(batch).__name__} {_shown(batch)}, but an input "
            "reader's next() must return a SampleBatch (a dict of equal-length columns: obs, "
            "new_obs, actions, rewards, terminateds) or raise StopIteration")
    row: dict[str, Any] = {PATH_COLUMN: where}
    for name, values in batch.items():
        if name == Columns.INFOS or name == PATH_COLUMN:
            continue
        array = np.asarray(values)
        if array.dtype == object or array.ndim == 0:
            raise DataFormatError(
                f"{where}: column {name!r} of the SampleBatch next() returned is "
                f"{_shown(values)}, not an array of one value (or array) per step")
        row[name] = array.tolist()
    sizes = {len(values) for name, values in row.items() if name != PATH_COLUMN}
    if sizes == {0} or not sizes:
        raise DataFormatError(f"{where}: next() returned a SampleBatch without rows; return "
                              "at least one step, or raise StopIteration at the end")
    return row


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read_custom_input(config: DataConfig, creator: InputCreator, *,
                      max_retries: int) -> ray.data.Dataset:
    """The custom input as a Dataset of SampleBatch-format rows (see the module); a read
    task whose process crashed is tried again at most ``max_retries`` times."""
    options = config.offline_data
    kwargs = dict(options.input_read_method_kwargs)
    num_readers = int(kwargs.pop(NUM_READERS_KWARG, 1))
    kwargs.pop("include_paths", None)  # OfflineData's, for files: each row names its reader
    context = {field.name: getattr(options, field.name)
               for field in dataclasses.fields(options)}
    source = CustomInputDatasource(creator, context, num_readers=num_readers,
                                   max_rows=options.input_reader_max_rows,
                                   timeout_s=options.input_reader_timeout_s)
    kwargs["ray_remote_args"] = {"max_retries": max_retries, **kwargs.get("ray_remote_args", {})}
    return ray.data.read_datasource(source, override_num_blocks=num_readers, **kwargs)
