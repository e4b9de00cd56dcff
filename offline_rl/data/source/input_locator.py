"""Where in the input files a problem lies, for messages: the file and row of a bad row, the
files that lack a column, and the file (and row group or line) that a read failed on.

Ray Data reports none of these: a PreLearner sees a batch of rows from any file, and a failed
read names neither file nor line. These functions run only on the way to an error message, so
they may read what they need (footers, two columns, or whole files within a time budget).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from offline_rl.columns import Columns
from offline_rl.compression import looks_compressed
from offline_rl.data.source.input_listing import InputListing
from offline_rl.errors import DataFormatError, error_chain, find_error
from offline_rl.formats.tabular import column_to_numpy

if TYPE_CHECKING:
    from offline_rl.data.source.data_config import DataConfig

#: Seconds ``find_damaged_file`` reads files for before it gives up.
SEARCH_BUDGET_S = 60.0


def locate_row(listing: InputListing, identity: Mapping[str, Any]) -> str | None:
    """``"<file>, row <n>"`` (counted from 0 in that file) of the first row whose columns hold
    ``identity``'s values (``{"eps_id": "e3", "t": 17}``, or arrays: ``{"obs": [...]}``, NaN
    equal to NaN), reading only those columns; ``None`` when no file has it."""
    for shown, fs, path in listing.data_files(with_uris=True):
        try:
            table = pq.read_table(path, filesystem=fs, columns=list(identity))
            match = np.ones(table.num_rows, dtype=bool)
            for name, value in identity.items():
                match &= _holds(column_to_numpy(table.column(name), name), value)
        except (OSError, pa.ArrowException, KeyError, DataFormatError, ValueError):
            continue  # a file without these columns, or with other shapes: not this one
        if match.any():
            return f"{shown}, row {int(np.flatnonzero(match)[0])}"
    return None


def _holds(values: np.ndarray, value: Any) -> np.ndarray:
    """Which rows of ``values`` equal ``value`` (a scalar or an array; NaN equals NaN)."""
    target = np.asarray(value)
    same = values == target
    if values.dtype.kind == "f":
        same |= np.isnan(values) & np.isnan(target)
    return same.reshape(len(values), -1).all(axis=1)


def files_without(listing: InputListing, column: str) -> list[str]:
    """The Parquet input files whose footer has no ``column``."""
    return [shown for shown, fs, path in listing.data_files(with_uris=True)
            if column not in pq.read_schema(path, filesystem=fs).names]


class RowLocator:
    """Names the rows of a PreLearner's batch in messages: by their file and row there, found
    in the Parquet input by their ``eps_id`` and ``t`` (without those columns: by their
    observations, actions and rewards). Ray Data's batches carry neither file nor row.

    Examples:
        >>> import pyarrow as pa
        >>> from offline_rl.columns import SCHEMA
        >>> from offline_rl.data.source.data_config import DataConfig
        >>> locator = RowLocator(DataConfig(), SCHEMA, "rows read")
        >>> locator.place(pa.table({"eps_id": ["e3"], "t": [17]}))(0)
        "the row with eps_id='e3', t=17"
    """

    def __init__(self, config: DataConfig, schema: Mapping[str, str], source: str) -> None:
        self.config = config
        self.identity_columns = [schema[field] for field in (Columns.EPS_ID, Columns.T)]
        self.value_columns = [schema[field] for field in (Columns.OBS, Columns.NEXT_OBS,
                                                          Columns.ACTIONS, Columns.REWARDS)]
        self.source = source

    def place(self, table: pa.Table) -> Callable[[int], str]:
        """``place(row)``: row ``row`` of ``table`` as ``"<file>, row <n> (eps_id=..., t=...)"``
        (else by its ``eps_id`` and ``t``, else by its place in the batch)."""

        def place(row: int) -> str:
            names = [name for name in self.identity_columns if name in table.column_names]
            if names:
                identity = {name: table.column(name)[row].as_py() for name in names}
            else:
                identity = self._row_values(table, row)
            found = (locate_row(self.config.input_listing, identity)
                     if self._reads_parquet() and identity else None)
            shown = ", ".join(f"{name}={identity[name]!r}" for name in names)
            if found:
                return f"{found} ({shown})" if shown else found
            if shown:
                return f"the row with {shown}"
            return f"row {row} of a batch of {table.num_rows} rows (not found in the input files)"
        return place

    def _row_values(self, table: pa.Table, row: int) -> dict[str, Any]:
        """The row's observations, actions and rewards, those that are plain numbers."""
        values = {}
        for name in self.value_columns:
            column = table.column(name) if name in table.column_names else None
            if column is None or looks_compressed(column):
                continue
            try:
                values[name] = column_to_numpy(column.slice(row, 1), name)[0]
            except DataFormatError:  # a missing value: the other columns may still tell
                continue
        return values

    def null_error(self, table: pa.Table, names: list[str]) -> DataFormatError | None:
        """The error for the first missing (null) value among ``names``: the files without
        that column, when Ray Data read it as nulls for them, else the value's file and row."""
        column = next((name for name in names if table.column(name).null_count), None)
        if column is None:
            return None
        lacking = (files_without(self.config.input_listing, column)
                   if self._reads_parquet() else [])
        if lacking:
            return DataFormatError(
                f"{', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no column "
                f"{column!r}, which other input files have (Ray Data reads it as missing values "
                "there); write the column to every file, or leave such files out of input_")
        row = int(np.flatnonzero(table.column(column).is_null().to_numpy(
            zero_copy_only=False))[0])
        return DataFormatError(f"{self.source}: column {column!r} has a missing (null) value in "
                               f"{self.place(table)(row)}; fill it or drop the row")

    def _reads_parquet(self) -> bool:
        options = self.config.offline_data
        return (options.input_read_method == "read_parquet" and options.input_ is not None
                and self.config.input_creator is None)


def read_failure(error: BaseException) -> BaseException | None:
    """The error of a file's contents behind Ray's wrappers: pyarrow's (a corrupt page, a
    truncated file) or JSON's; ``None`` for any other error."""
    return next((wrapped for wrapped in error_chain(error)
                 if isinstance(wrapped, pa.ArrowException | json.JSONDecodeError
                               | FileNotFoundError)
                 or type(wrapped) is OSError), None)


@contextmanager
def naming_damaged_files(listing: InputListing, read_method: str) -> Iterator[None]:
    """Turns a failed read of the input files that names no file (a corrupt Parquet page, a
    malformed JSON line, as Ray Data reports them) into a ``DataFormatError`` naming the file
    and its row group or line, found by reading the files again one at a time. Errors of
    offline-rl's own (which name their place already) pass unchanged."""
    try:
        yield
    except Exception as error:
        failure = None if find_error(error) is not None else read_failure(error)
        if failure is None:
            raise
        if isinstance(failure, FileNotFoundError):
            gone, failure = gone_file(error)
            raise DataFormatError(
                f"{gone} is gone: it was deleted or moved while the input was read ({failure}). "
                "The rows read before it were trained on; the rest of this pass over the data "
                "was not. Put the file back or leave it out of input_, then resume from the last "
                "checkpoint") from None
        damage = find_damaged_file(listing, read_method)
        if damage is None:
            raise
        raise DataFormatError(f"{damage}. The file is corrupt or truncated: re-write it, or "
                              "move it out of the input") from None


def gone_file(error: BaseException) -> tuple[str, BaseException]:
    """The file that the ``FileNotFoundError`` in ``error``'s chain names (else "an input
    file"), and that error, without Ray's traceback where the chain holds it so."""
    chain = error_chain(error)
    failure = next((wrapped for wrapped in chain if type(wrapped) is FileNotFoundError),
                   next((wrapped for wrapped in chain if isinstance(wrapped, FileNotFoundError)),
                        error))
    text = str(failure)
    found = getattr(failure, "filename", None) or re.search(r"'([^']+)'", text)
    if isinstance(found, re.Match):
        found = found.group(1)
    return found or (text if text and " " not in text else "an input file"), failure


def find_damaged_file(listing: InputListing, read_method: str,
                      budget_s: float = SEARCH_BUDGET_S) -> str | None:
    """Reads the input files one at a time, as ``read_method`` does, until one fails: returns
    ``"<file>, <row group or line>: <what failed>"``, or ``None`` when none fails (or only
    ``read_parquet`` and ``read_json`` files, within ``budget_s`` seconds)."""
    reader = {"read_parquet": _parquet_damage, "read_json": _json_damage}.get(read_method)
    if reader is None:
        return None
    deadline = time.monotonic() + budget_s
    for shown, fs, path in listing.data_files(with_uris=True):
        if time.monotonic() > deadline:
            return None
        damage = reader(fs, path)
        if damage is not None:
            return f"{shown}, {damage}"
    return None


def _parquet_damage(fs: pafs.FileSystem, path: str) -> str | None:
    try:
        file = pq.ParquetFile(fs.open_input_file(path))
    except (OSError, pa.ArrowException) as error:
        return f"footer: {error}"
    first_row = 0
    for group in range(file.num_row_groups):
        try:
            file.read_row_group(group)
        except (OSError, pa.ArrowException) as error:
            rows = file.metadata.row_group(group).num_rows
            return (f"rows {first_row}-{first_row + rows - 1} (row group {group}): "
                    f"{str(error).rstrip('.')}")
        first_row += file.metadata.row_group(group).num_rows
    return None


def _json_damage(fs: pafs.FileSystem, path: str) -> str | None:
    with fs.open_input_stream(path) as stream:
        text = stream.read().decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            if _is_one_document(text):  # one JSON document over several lines, not JSON lines
                return None
            return f"line {number}: not valid JSON ({error.msg} at column {error.colno})"
        if not isinstance(value, dict) and not _is_one_document(text):
            return (f"line {number}: a JSON {_JSON_KINDS.get(type(value), 'value')} "
                    f"({line.strip()[:40]}) where a record belongs: each line holds one JSON "
                    "object")
    return None


_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}


def _is_one_document(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True
