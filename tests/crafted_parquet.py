"""Parquet files whose footer declares what their pages do not hold, crafted cheaply: a tiny
file is written, its footer (Thrift compact protocol) decoded, fields replaced, and re-encoded.

Example:
    >>> import io, pyarrow as pa, pyarrow.parquet as pq
    >>> sink = io.BytesIO()
    >>> pq.write_table(pa.table({"x": [1, 2]}), sink)
    >>> crafted = with_declared_rows(sink.getvalue(), 2**40)
    >>> pq.ParquetFile(io.BytesIO(crafted)).metadata.num_rows
    1099511627776
"""

from __future__ import annotations

import struct
from typing import Any

_STRUCT, _LIST, _SET, _MAP, _BINARY, _DOUBLE = 12, 9, 10, 11, 8, 7
#: FileMetaData.num_rows, FileMetaData.row_groups, RowGroup.num_rows, RowGroup.columns,
#: ColumnChunk.meta_data, ColumnMetaData.num_values (parquet.thrift's field ids).
_NUM_ROWS, _ROW_GROUPS, _GROUP_ROWS, _COLUMNS, _META_DATA, _NUM_VALUES = 3, 4, 3, 1, 3, 5


def with_declared_rows(data: bytes, rows: int, *, values_too: bool = False) -> bytes:
    """``data`` (a Parquet file of one row group) with its footer declaring ``rows`` rows, in
    the file and its row group (and, with ``values_too``, as every column chunk's values)."""
    length = struct.unpack("<I", data[-8:-4])[0]
    footer = _Reader(data[-8 - length:-8]).struct()
    _set(footer, _NUM_ROWS, rows)
    for group in _get(footer, _ROW_GROUPS)[1]:
        _set(group, _GROUP_ROWS, rows)
        for chunk in _get(group, _COLUMNS)[1] if values_too else []:
            _set(_get(chunk, _META_DATA), _NUM_VALUES, rows)
    encoded = _write_struct(footer)
    return data[:-8 - length] + encoded + struct.pack("<I", len(encoded)) + b"PAR1"


def _get(fields: list[list[Any]], field_id: int) -> Any:
    return next(field[2] for field in fields if field[0] == field_id)


def _set(fields: list[list[Any]], field_id: int, value: int) -> None:
    next(field for field in fields if field[0] == field_id)[2] = value


class _Reader:
    """Decodes Thrift compact structs into ``[[field_id, type, value], ...]``."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def byte(self) -> int:
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        shift = value = 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def struct(self) -> list[list[Any]]:
        fields, last = [], 0
        while (header := self.byte()) != 0:
            kind, delta = header & 0x0F, header >> 4
            last = last + delta if delta else self.zigzag()
            value = kind == 1 if kind in (1, 2) else self.value(kind)
            fields.append([last, kind, value])
        return fields

    def value(self, kind: int) -> Any:
        if kind in (3,):
            return self.byte()
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == _DOUBLE:
            self.pos += 8
            return self.data[self.pos - 8:self.pos]
        if kind == _BINARY:
            size = self.varint()
            self.pos += size
            return self.data[self.pos - size:self.pos]
        if kind in (_LIST, _SET):
            header = self.byte()
            size = header >> 4 if header >> 4 != 15 else self.varint()
            return (header & 0x0F, [self.value(header & 0x0F) for _ in range(size)])
        if kind == _STRUCT:
            return self.struct()
        if kind in (1, 2):  # a bool inside a list: one byte
            return self.byte()
        raise ValueError(f"unsupported Thrift compact type {kind}")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _zigzag(value: int) -> bytes:
    return _varint((value << 1) ^ (value >> 63))


def _write_value(kind: int, value: Any) -> bytes:
    if kind in (1, 2, 3):
        return bytes([value])
    if kind in (4, 5, 6):
        return _zigzag(value)
    if kind == _DOUBLE:
        return value
    if kind == _BINARY:
        return _varint(len(value)) + value
    if kind in (_LIST, _SET):
        element, items = value
        header = (bytes([(len(items) << 4) | element]) if len(items) < 15
                  else bytes([0xF0 | element]) + _varint(len(items)))
        return header + b"".join(_write_value(element, item) for item in items)
    return _write_struct(value)


def _write_struct(fields: list[list[Any]]) -> bytes:
    out, last = bytearray(), 0
    for field_id, kind, value in fields:
        if kind in (1, 2):
            kind = 1 if value else 2
        delta = field_id - last
        short = 0 < delta <= 15
        out += bytes([(delta << 4) | kind]) if short else bytes([kind]) + _zigzag(field_id)
        if kind not in (1, 2):
            out += _write_value(kind, value)
        last = field_id
    return bytes(out + b"\x00")
