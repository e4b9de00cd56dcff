"""``JsonWriter``: SampleBatches -> RLlib's old-stack JSON lines, in whole files only.

``JsonWriter(path).write(batch)`` writes one ``{"type": "SampleBatch", ...}`` line per batch,
``compress_columns`` (default ``obs`` and ``new_obs``) packed as RLlib packs them (base64 of an
LZ4-framed pickle of the array, ``offline_rl.compression.pack_rllib``; read back without
unpickling). RLlib's ``JsonReader`` and offline-rl
(``offline_data(input_read_sample_batches=True, input_read_method="read_json")``) read the files.

Unlike RLlib's, a file is appended to under a hidden staging name
(``offline_rl.recording.staging``) and gets its name, ``output-<run id>_worker-<i>_<n>.json``
directly in ``path``, only when it is complete: when it reaches ``max_file_size`` bytes (or
``max_rows_per_file`` rows), on ``flush()`` or ``close()``, or when the process exits
normally. A crash leaves no partial file that readers would take for data, nor does a write
that fails: a batch JSON cannot hold is refused whole (``DataFormatError`` naming its column
and the file), and after a write into the file that fails (a full disk) the file is dropped, not
completed, and the writer stops (``OutputError`` saying what is kept). Each completed
file is listed in the run's manifest (``offline_rl.recording.output_folder``); a folder holding
files offline-rl did not write is refused unless ``overwrite=True``, and no existing file is
ever replaced.

Examples:
    >>> import os, tempfile
    >>> from offline_rl.recording.sample_batch_builder import SampleBatchBuilder
    >>> folder = tempfile.mkdtemp()
    >>> builder = SampleBatchBuilder()
    >>> builder.add_values(t=0, eps_id=0, obs=[0.0], actions=1, rewards=1.0,
    ...                    terminateds=True, truncateds=False, new_obs=[1.0])
    >>> with JsonWriter(folder) as writer:
    ...     writer.write(builder.build_and_reset())
    >>> [name.endswith("_worker-0_0.json") for name in os.listdir(folder) if name[0] != "."]
    [True]
"""

from __future__ import annotations

import atexit
import contextlib
import json
import threading
from collections.abc import Collection
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from offline_rl.compression import pack_rllib
from offline_rl.errors import ConfigError, DataFormatError, OutputError
from offline_rl.filesystems import resolve_filesystem
from offline_rl.recording.manifests import RunManifest
from offline_rl.recording.output_folder import claim_output_folder, new_run_id, write_failure
from offline_rl.recording.sample_batch_builder import SampleBatch
from offline_rl.recording.staging import StagedFile
from offline_rl.recording.writer import output_location

#: RLlib's default columns to compress.
DEFAULT_COMPRESS_COLUMNS = frozenset({"obs", "new_obs"})


class JsonWriter:
    """Writes SampleBatches as JSON lines into rolling files under ``path`` (a local folder or a
    URI; ``filesystem``: a pyarrow filesystem or a name with ``filesystem_kwargs``, as
    ``output_filesystem``), with RLlib's interface. ``ioctx`` is used only for its
    ``worker_index`` (part of the file names, as in RLlib). ``write`` is thread-safe."""

    def __init__(self, path: str, ioctx: Any = None, max_file_size: int = 64 * 1024 * 1024,
                 compress_columns: Collection[str] = DEFAULT_COMPRESS_COLUMNS, *,
                 max_rows_per_file: int | None = None, overwrite: bool = False,
                 filesystem: str | pafs.FileSystem | None = None,
                 filesystem_kwargs: dict[str, Any] | None = None, run_id: str | None = None):
        if max_file_size < 1 or (max_rows_per_file is not None and max_rows_per_file < 1):
            raise ConfigError(f"JsonWriter: max_file_size={max_file_size} and max_rows_per_file="
                              f"{max_rows_per_file} must be at least 1")
        fs = resolve_filesystem(filesystem, filesystem_kwargs or {}, field="filesystem")
        self.filesystem, self.path = output_location(path, fs)
        self.path = self.path.rstrip("/")
        claim_output_folder(path, self.filesystem, self.path, writer="JsonWriter",
                            overwrite=overwrite, replaces=False)
        self.worker_index = int(getattr(ioctx, "worker_index", 0))
        self.max_file_size = max_file_size
        self.max_rows_per_file = max_rows_per_file
        self.compress_columns = set(compress_columns)
        self.run_id = run_id or new_run_id()
        self.files_written: list[str] = []
        self.manifest = RunManifest(self.filesystem, self.path,
                                    f"{self.run_id}-{self.worker_index:06d}")
        self._file: StagedFile | None = None
        self._rows = self._batches = 0
        self._lock = threading.Lock()
        self._closed = False
        #: What a write that failed left (the writer stops then), else ``None``.
        self._failure: str | None = None
        atexit.register(self.close)

    def write(self, sample_batch: SampleBatch) -> None:
        """Appends ``sample_batch`` as one JSON line; completes the file once it is full. A
        batch JSON cannot hold is refused whole (``DataFormatError``); a write that fails
        drops the file being written and stops the writer (``OutputError``)."""
        with self._lock:
            if self._failure is not None:
                raise OutputError(f"JsonWriter stopped writing: {self._failure}")
            if self._closed:
                raise OutputError(f"JsonWriter({self.path!r}) is closed; make a new one")
            try:
                line = json.dumps(to_json_dict(sample_batch, self.compress_columns),
                                  default=_json_value) + "\n"
            except (TypeError, ValueError) as error:
                raise DataFormatError(self._refusal(sample_batch, error)) from None
            if self._file is None:
                self._file = StagedFile(self.filesystem, self.path, self._file_path())
            try:
                self._file.write(line.encode())
            except OSError as error:
                raise self._failed(error) from error
            self._rows += sample_batch.count
            self._batches += 1
            if self._file.bytes_written >= self.max_file_size or (
                    self.max_rows_per_file is not None and self._rows >= self.max_rows_per_file):
                self._complete()

    def flush(self) -> list[str]:
        """Completes the current file (the next ``write`` starts a new one); returns the paths
        of every file written."""
        with self._lock:
            if self._file is not None:
                self._complete()
            return [f"{self.path}/{name}" for name in self.files_written]

    def close(self) -> list[str]:
        """Completes the current file; returns the paths of every file written. Writing after
        ``close`` is an error."""
        files = self.flush()
        self._closed = True
        atexit.unregister(self.close)
        return files

    def abandon(self) -> None:
        """Drops the file being written (after a write into it failed: it may end mid-line)
        and closes the writer; the files completed before stay."""
        with self._lock:
            if self._file is not None:
                with contextlib.suppress(OSError):  # the folder may no longer be writable
                    self._file.discard()
            self._file, self._rows, self._batches, self._closed = None, 0, 0, True
            atexit.unregister(self.close)

    def _file_path(self) -> str:
        """The path of the file being written (or the next one)."""
        name = f"output-{self.run_id}_worker-{self.worker_index}_{len(self.files_written)}"
        return f"{self.path}/{name}.json"

    def _refusal(self, batch: SampleBatch, error: Exception) -> str:
        """Why ``batch`` was refused: its first column JSON cannot hold, and what is kept."""
        column = next((name for name in batch if not _encodes(batch, name,
                                                              self.compress_columns)), None)
        kept = ("" if self._file is None else f", and {self._file_path()} holds the "
                f"{self._batches} whole batch(es) written before it")
        return (f"JsonWriter: {'the batch' if column is None else f'column {column!r}'} cannot "
                f"be written as JSON ({error}); the batch was not written{kept}")

    def _failed(self, error: OSError) -> OutputError:
        """Drops the file a write into failed (it may end mid-line) and stops the writer."""
        path, batches = self._file_path(), self._batches
        if self._file is not None:
            with contextlib.suppress(OSError):  # the folder may no longer be writable
                self._file.discard()
        self._file, self._rows, self._batches = None, 0, 0
        failure = write_failure(
            "JsonWriter", self.path, error,
            kept=f"the {len(self.files_written)} file(s) it completed before are kept (listed in "
                 f"the folder's manifest); {path}, being written, was dropped with its "
                 f"{batches} batch(es), as it may end mid-line")
        self._failure, self._closed = str(failure), True
        atexit.unregister(self.close)
        return failure

    def _complete(self) -> None:
        assert self._file is not None
        try:
            path = self._file.commit()
        except OutputError:
            raise
        except OSError as error:
            raise self._failed(error) from error
        self._file, self._rows, self._batches = None, 0, 0
        self.files_written.append(path[len(self.path) + 1:])
        self.manifest.add(self.files_written[-1:])

    def __enter__(self) -> JsonWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def to_json_dict(batch: SampleBatch, compress_columns: Collection[str]) -> dict[str, Any]:
    """The JSON object RLlib writes for ``batch``: ``type`` first, then each column, packed
    when it is in ``compress_columns``."""
    out: dict[str, Any] = {"type": "SampleBatch"}
    for name, column in batch.items():
        out[name] = pack_rllib(np.asarray(column)) if name in compress_columns else column
    return out


def _encodes(batch: SampleBatch, name: str, compress_columns: Collection[str]) -> bool:
    """Whether column ``name`` of ``batch`` can be written as JSON."""
    try:
        json.dumps(to_json_dict(SampleBatch({name: batch[name]}), compress_columns),
                   default=_json_value)
    except (TypeError, ValueError):
        return False
    return True


def _json_value(value: Any) -> Any:
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    raise TypeError(f"JsonWriter cannot write a {type(value).__name__} to JSON; log numbers, "
                    "arrays, strings, lists and dicts of them")
