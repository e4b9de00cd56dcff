"""``JsonReader``: RLlib's old-stack reader of SampleBatch JSON files, a batch per ``next()``.

The old stack's pages read experience imperatively with it (``batch = reader.next()``), for
instance to train and run off-policy estimators. The files of ``inputs`` (folders, files or
globs, local or URIs, as ``input_`` takes them) are read in random order and each file's lines
in order, again and again, as RLlib's reader does. Each line is decoded without unpickling
(compressed columns as ``offline_rl.compression`` reads them) and checked as the PreLearners
check SampleBatch rows; errors name the file and line. Training reads the same files through
``offline_data(input_=..., input_read_method="read_json", input_read_sample_batches=True)``.

Examples:
    >>> reader = JsonReader("tests/fixtures/rllib_cartpole_sample_batch_json", seed=0)
    >>> batch = reader.next()
    >>> batch["obs"].shape[1:], batch.count == len(batch["actions"]), type(batch["infos"][0])
    ((4,), True, <class 'dict'>)
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator, Sequence

import numpy as np

from offline_rl.data.source.input_api import InputReader
from offline_rl.data.source.input_files import JSON_SUFFIXES, list_data_files
from offline_rl.data.source.io_context import IOContext
from offline_rl.episodes.sample_batch import SampleBatch
from offline_rl.errors import DataFormatError, DataNotFoundError
from offline_rl.formats.episode_input import sample_batch_columns


class JsonReader(InputReader):
    """Endless ``SampleBatch``es from the JSON lines files of ``inputs`` (RLlib's
    ``ray.rllib.offline.JsonReader``); ``seed`` fixes the order of the files (offline-rl's
    addition)."""

    def __init__(self, inputs: str | os.PathLike | Sequence[str | os.PathLike],
                 ioctx: IOContext | None = None, *, seed: int | None = None):
        self.ioctx = ioctx or IOContext()
        self.files = [(found.filesystem, file) for found in
                      list_data_files(inputs, suffixes=JSON_SUFFIXES) for file in found.files]
        if not self.files:
            raise DataNotFoundError(f"JsonReader: no JSON files ({', '.join(JSON_SUFFIXES)}) "
                                    f"under {inputs!r}")
        self._random = random.Random(seed)
        self._lines: Iterator[SampleBatch] = iter(())

    def next(self) -> SampleBatch:
        """The next line's batch (``infos`` as an array of dicts, when the line has them)."""
        batch = next(self._lines, None)
        if batch is None:
            self._lines = self._pass_over_files()
            batch = next(self._lines, None)
            if batch is None:
                raise DataFormatError(f"JsonReader: the files {[file for _, file in self.files]} "
                                      "hold no SampleBatch lines")
        return batch

    def _pass_over_files(self) -> Iterator[SampleBatch]:
        """Every line of every file once, the files in random order."""
        for filesystem, file in self._random.sample(self.files, len(self.files)):
            with filesystem.open_input_stream(file) as stream:
                lines = stream.read().decode().splitlines()
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    yield _decode(line, f"{file}, line {number}")


def _decode(line: str, where: str) -> SampleBatch:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise DataFormatError(f"{where}: not JSON ({error})") from None
    if not isinstance(row, dict) or row.get("type", "SampleBatch") != "SampleBatch":
        kind = row.get("type") if isinstance(row, dict) else type(row).__name__
        raise DataFormatError(f"{where}: a {kind!r} line, not a SampleBatch (single-agent "
                              "SampleBatch JSON lines, as RLlib's JsonWriter writes them)")
    batch = SampleBatch(sample_batch_columns(row, where))
    if row.get("infos") is not None:
        batch["infos"] = np.array(row["infos"], dtype=object)
    return batch
