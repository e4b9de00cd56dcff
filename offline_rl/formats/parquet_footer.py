"""Caps on what a Parquet file's footer declares, checked before anything is read or allocated.

A Parquet footer states how many rows the file and each row group hold and how many bytes each
column chunk takes, compressed and uncompressed; readers size their buffers from it. A damaged
or crafted footer (one declaring 2^40 rows over a few bytes of data) makes pyarrow try to
allocate for what it declares, and the process is killed for memory. ``check_footer`` reads
only the footer (``pyarrow.parquet.ParquetFile(...).metadata``) and refuses, with a
``DataFormatError`` naming the file, the value and the cap:

* declarations the file cannot hold: row groups whose rows do not add up to the file's, a row
  group declaring more rows than a column chunk stores values (every row stores at least one),
  a column chunk declaring more compressed bytes than the file has;
* honest but huge files over the caps below (module constants, read at each call, so a user
  with genuinely larger files raises them before building: ``offline_rl.formats.parquet_footer.
  MAX_ROWS_PER_FILE = 10**10``; or pass ``caps=FooterCaps(...)`` to the functions that take it).

Examples:
    >>> import pyarrow as pa, pyarrow.parquet as pq, io
    >>> sink = io.BytesIO()
    >>> pq.write_table(pa.table({"rewards": [1.0, 0.5]}), sink)
    >>> metadata = pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata
    >>> check_footer(metadata, "a.parquet", len(sink.getvalue()))
    >>> try:
    ...     check_footer(metadata, "a.parquet", None, FooterCaps(max_rows_per_file=1))
    ... except DataFormatError as error:
    ...     print(str(error)[:61])
    a.parquet: its footer declares 2 rows, over the cap of 1 rows
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.parquet as pq

from offline_rl.errors import DataFormatError

#: Most rows one Parquet file may declare (about 4.3 billion).
MAX_ROWS_PER_FILE = 2**32
#: Most rows one row group may declare: a reader holds a row group's rows at once.
MAX_ROWS_PER_ROW_GROUP = 2**28
#: Most uncompressed bytes one row group may declare (8 GiB): what reading it allocates.
MAX_ROW_GROUP_BYTES = 2**33


@dataclass(frozen=True)
class FooterCaps:
    """The caps ``check_footer`` applies (``None``: the module constants as they are now)."""

    max_rows_per_file: int | None = None
    max_rows_per_row_group: int | None = None
    max_row_group_bytes: int | None = None

    def resolved(self) -> tuple[int, int, int]:
        """The three caps, the module constants filling in those not given."""
        return (MAX_ROWS_PER_FILE if self.max_rows_per_file is None else self.max_rows_per_file,
                MAX_ROWS_PER_ROW_GROUP if self.max_rows_per_row_group is None
                else self.max_rows_per_row_group,
                MAX_ROW_GROUP_BYTES if self.max_row_group_bytes is None
                else self.max_row_group_bytes)


def check_footer(metadata: pq.FileMetaData, shown: str, file_size: int | None,
                 caps: FooterCaps | None = None) -> None:
    """Raises ``DataFormatError`` naming ``shown`` when the footer ``metadata`` declares what the
    file (``file_size`` bytes; ``None``: unknown) cannot hold, or more than ``caps`` allow."""
    groups = [metadata.row_group(index) for index in range(metadata.num_row_groups)]
    for index, group in enumerate(groups):
        for chunk in (group.column(column) for column in range(group.num_columns)):
            if chunk.num_values < group.num_rows:
                raise _damaged(shown, f"row group {index} declares {group.num_rows} rows, but "
                                      f"its column {chunk.path_in_schema!r} stores "
                                      f"{chunk.num_values} values")
            if file_size is not None and chunk.total_compressed_size > file_size:
                raise _damaged(shown, f"column {chunk.path_in_schema!r} of row group {index} "
                                      f"declares {chunk.total_compressed_size} bytes, but the "
                                      f"file has {file_size}")
    declared = sum(group.num_rows for group in groups)
    if declared != metadata.num_rows:
        raise _damaged(shown, f"it declares {metadata.num_rows} rows, but its row groups "
                              f"{declared}")
    max_rows, max_group_rows, max_group_bytes = (caps or FooterCaps()).resolved()
    _cap(shown, "rows", metadata.num_rows, max_rows, "MAX_ROWS_PER_FILE")
    for index, group in enumerate(groups):
        _cap(shown, f"rows in row group {index}", group.num_rows, max_group_rows,
             "MAX_ROWS_PER_ROW_GROUP")
        _cap(shown, f"uncompressed bytes in row group {index}", group.total_byte_size,
             max_group_bytes, "MAX_ROW_GROUP_BYTES")


def _cap(shown: str, what: str, value: int, cap: int, constant: str) -> None:
    if value > cap:
        raise DataFormatError(
            f"{shown}: its footer declares {value} {what}, over the cap of {cap} {what}; "
            "reading it could exhaust memory. If the file is genuine, raise the cap before "
            f"building (offline_rl.formats.parquet_footer.{constant} = ...), or re-write it in "
            "smaller files or row groups; else the footer is damaged: re-write the file")


def _damaged(shown: str, fault: str) -> DataFormatError:
    return DataFormatError(f"{shown}: its Parquet footer is damaged or crafted ({fault}); "
                           "nothing was read. Re-write the file, or move it out of the input")
