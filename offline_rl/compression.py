"""Compressed array column values: RLlib's base64 LZ4 pickles, read without running code, and
our own pickle-free format.

RLlib's ``pack`` stores an array as ``base64(lz4.frame(pickle(array)))``. Unpickling runs code,
so ``unpack_rllib`` admits only the handful of numpy globals such a pickle names, each replaced
by a stand-in that rebuilds the array from its dtype string, byte order, shape and raw bytes;
numpy's own ``__setstate__`` never sees the data, and object and structured dtypes are refused.
``pack_rllib`` writes RLlib's format (recordings write it, so that RLlib reads them).
``pack_array``, for data only offline-rl reads, needs no pickle at all: a magic prefix, a JSON
header (dtype, shape) and the LZ4-framed raw bytes; the header is JSON, not msgpack, so no msgpack
hook (``msgpack_numpy.patch()``) ever sees it.
"""

from __future__ import annotations

import base64
import functools
import io
import json
import math
import pickle
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from offline_rl.errors import DataFormatError

#: Prefix of values written by ``pack_array``.
MAGIC = b"ORLZ1"
#: Prefix of RLlib's values: base64 of the LZ4 frame magic ``04 22 4D 18``.
RLLIB_PREFIX = "BCJNGG"
#: How base64 text of ``pack_array``'s bytes begins (JSON output stores them so).
MAGIC_BASE64 = base64.b64encode(MAGIC)[:6].decode()
_HEADER_SIZE = struct.Struct("<I")
_LZ4 = pa.Codec("lz4")  # the LZ4 frame format, as RLlib writes
#: LZ4 expands at most ~255-fold, so a larger claimed size is corrupt (or a decompression bomb).
_MAX_RATIO = 256
#: Most bytes one compressed value (one observation, say) may decompress to.
MAX_VALUE_BYTES = 256 * 1024 * 1024
#: dtype kinds a compressed value may have: bool, integers, floats, complex, bytes, str.
_KINDS = "biufcSU"
_REWRITE = ("Re-write the column with plain numpy arrays, e.g. with "
            "offline_rl.compression.pack_array.")


class CompressedDataError(DataFormatError):
    """A compressed column value cannot be decoded; the message says where and how to fix it."""


class _Refused(Exception):
    """The pickle asks for something outside the allowlist; the message names it."""


class _Admitted:
    """An allowlisted pickle global; pickle's BUILD cannot modify it."""

    __slots__ = ("_call",)

    def __init__(self, call: Callable[..., Any]) -> None:
        self._call = call

    def __call__(self, *args: Any) -> Any:
        return self._call(*args)

    def __setstate__(self, state: Any) -> None:
        raise _Refused("a pickle that modifies a numpy global")


class _Dtype:
    """``numpy.dtype(spec, align, copy)`` plus its BUILD state, reduced to spec and byte order."""

    __slots__ = ("dtype",)

    def __init__(self, spec: Any, *_flags: Any) -> None:
        if not isinstance(spec, str):
            raise _Refused(f"a dtype built from a {type(spec).__name__}")
        self.dtype = np.dtype(spec)
        if self.dtype.kind not in _KINDS:
            raise _Refused(f"an array of dtype {self.dtype} (kind {self.dtype.kind!r})")

    def __setstate__(self, state: Any) -> None:
        _version, byteorder, subarray, names, fields = state[:5]
        if subarray is not None or names is not None or fields is not None:
            raise _Refused("a structured or subarray dtype")
        if byteorder in ("<", ">"):
            self.dtype = self.dtype.newbyteorder(byteorder)


def _array(data: Any, dtype: Any, shape: Any, order: str) -> np.ndarray:
    if not isinstance(dtype, _Dtype):
        raise _Refused(f"an array whose dtype is a {type(dtype).__name__}")
    if not isinstance(data, (bytes, bytearray)):
        raise _Refused(f"array data held in a {type(data).__name__}")
    return np.frombuffer(data, dtype=dtype.dtype).reshape(shape, order=order)


class _Array:
    """``_reconstruct(ndarray, ...)`` plus ndarray's BUILD state, rebuilt from raw bytes."""

    __slots__ = ("array",)

    def __init__(self, subtype: Any, *_unused: Any) -> None:
        if subtype is not _NDARRAY:
            raise _Refused("an array of a class other than numpy.ndarray")
        self.array: np.ndarray | None = None

    def __setstate__(self, state: Any) -> None:
        _version, shape, dtype, fortran, data = state
        self.array = _array(data, dtype, shape, "F" if fortran else "C")


def _frombuffer(data: Any, dtype: Any, shape: Any, order: str, axis_order: Any = None) -> Any:
    if order == "K" and axis_order is not None:
        return _array(data, dtype, shape, "C").transpose(axis_order)
    return _array(data, dtype, shape, order)


def _latin1(text: Any, encoding: Any) -> bytes:
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Refused(f"_codecs.encode with encoding {encoding!r}")
    return text.encode("latin-1")


def _empty_bytes(*args: Any) -> bytes:
    if args:
        raise _Refused("bytes(...) with arguments")
    return b""


def _direct_ndarray(*_args: Any) -> None:
    raise _Refused("a direct numpy.ndarray(...) call")


_NDARRAY = _Admitted(_direct_ndarray)
#: The only (module, name) pairs a pickle may load: what numpy 1.x and 2.x write for arrays,
#: dtypes and scalars (``numpy.core`` became ``numpy._core`` in 2.0), plus Python's bytes.
_ALLOWED = {
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _Admitted(_Dtype),
    ("_codecs", "encode"): _Admitted(_latin1),
    ("builtins", "bytes"): _Admitted(_empty_bytes),
    ("__builtin__", "bytes"): _Admitted(_empty_bytes),
}
for _core in ("numpy.core", "numpy._core"):
    _ALLOWED[f"{_core}.multiarray", "_reconstruct"] = _Admitted(_Array)
    _ALLOWED[f"{_core}.multiarray", "scalar"] = _Admitted(lambda d, data: _array(data, d, (), "C"))
    _ALLOWED[f"{_core}.numeric", "_frombuffer"] = _Admitted(_frombuffer)


class _NumpyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise _Refused(f"{module}.{name}")
        return _ALLOWED[module, name]

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused(f"persistent id {pid!r}")


class _TooLarge(ValueError):
    """A value that would decompress beyond ``MAX_VALUE_BYTES``."""


def _decompress(frame: bytes | memoryview, size: int) -> pa.Buffer:
    if size > _MAX_RATIO * len(frame):
        raise ValueError(f"{len(frame)} bytes cannot hold {size} uncompressed bytes")
    if size > MAX_VALUE_BYTES:
        raise _TooLarge(f"it claims {size} uncompressed bytes")
    raw = _LZ4.decompress(frame, decompressed_size=size)
    if raw.size != size:
        raise ValueError(f"{raw.size} bytes decompressed, {size} expected")
    return raw


def unpack_rllib(value: str | bytes, where: str) -> np.ndarray:
    """Decodes one value written by RLlib's ``pack`` (base64 LZ4 pickle) into a numpy array.

    Only plain numpy arrays and scalars (bool, int, float, complex, bytes or str dtypes) are
    rebuilt; any other pickle content raises ``CompressedDataError`` naming ``where``. The
    array may be read-only: it can share the pickle's buffer instead of copying it.
    """
    try:
        framed = base64.b64decode(value, validate=True)
    except (ValueError, TypeError) as error:
        raise CompressedDataError(
            f"{where}: not valid base64 ({error}); expected RLlib's compressed text (base64 of "
            f"an LZ4 frame, starting with {RLLIB_PREFIX!r})") from None
    try:
        if len(framed) >= 14 and framed[4] & 0x08:  # the frame stores its content size
            pickled = _decompress(framed, int.from_bytes(framed[6:14], "little"))
        else:
            limit = min(_MAX_RATIO * len(framed), MAX_VALUE_BYTES)
            pickled = pa.input_stream(pa.BufferReader(framed), compression="lz4").read(limit + 1)
            if len(pickled) > limit:
                raise _TooLarge(f"it decompresses to more than {limit} bytes")
    except _TooLarge as error:
        raise CompressedDataError(
            f"{where}: refused, {error}: more than offline_rl.compression.MAX_VALUE_BYTES "
            f"({MAX_VALUE_BYTES}) or than LZ4 can expand it to (a damaged file or a "
            "decompression bomb). Raise MAX_VALUE_BYTES if single values are that large"
        ) from None
    except (ValueError, pa.ArrowException, OSError) as error:
        raise CompressedDataError(
            f"{where}: corrupt or truncated LZ4 frame ({error}); the value was damaged or cut "
            "short after RLlib wrote it") from None
    try:
        result = _NumpyUnpickler(io.BytesIO(pickled)).load()
    except _Refused as error:
        raise CompressedDataError(
            f"refusing to load {error} from {where}: only numpy arrays are accepted in "
            f"compressed columns, since unpickling anything else can run code. {_REWRITE}"
        ) from None
    except Exception as error:
        raise CompressedDataError(
            f"{where}: the decompressed value is not a pickled numpy array "
            f"({type(error).__name__}: {error})") from None
    if isinstance(result, _Array):
        result = result.array
    if not isinstance(result, np.ndarray):
        raise CompressedDataError(
            f"{where}: the pickle holds a {type(result).__name__}, not a numpy array. {_REWRITE}")
    return result


def pack_rllib(array: np.ndarray) -> str:
    """Packs an array the way RLlib's ``pack`` does (``base64(lz4.frame(pickle(array)))``), so
    that RLlib reads the column; the pickle holds nothing but the array, and ``unpack_rllib``
    reads it back without running code.

    Examples:
        >>> import numpy as np
        >>> text = pack_rllib(np.arange(3, dtype=np.float32))
        >>> text.startswith(RLLIB_PREFIX), unpack_rllib(text, where="example")
        (True, array([0., 1., 2.], dtype=float32))
    """
    array = np.asarray(array)
    if array.dtype.kind not in _KINDS:
        raise CompressedDataError(
            f"pack_rllib cannot store dtype {array.dtype}: only bool, int, float, complex, bytes "
            "and str arrays are supported; convert the data to one of these first")
    frame = _LZ4.compress(pickle.dumps(array, protocol=5), asbytes=True)
    return base64.b64encode(frame).decode("ascii")


def pack_array(array: np.ndarray) -> bytes:
    """Packs an array (bool, int, float, complex, bytes or str dtype) without pickle.

    Examples:
        >>> import numpy as np
        >>> data = pack_array(np.arange(6, dtype=np.float32).reshape(2, 3))
        >>> unpack_array(data, where="example")
        array([[0., 1., 2.],
               [3., 4., 5.]], dtype=float32)
    """
    array = np.asarray(array, order="C")
    if array.dtype.kind not in _KINDS:
        raise CompressedDataError(
            f"pack_array cannot store dtype {array.dtype}: only bool, int, float, complex, bytes "
            "and str arrays are supported; convert the data to one of these first")
    header = json.dumps({"dtype": array.dtype.str, "shape": list(array.shape)}).encode()
    body = _LZ4.compress(pa.py_buffer(array), asbytes=True)
    return b"".join((MAGIC, _HEADER_SIZE.pack(len(header)), header, body))


def unpack_array(data: bytes, where: str) -> np.ndarray:
    """Unpacks bytes written by ``pack_array``; corrupt data raises ``CompressedDataError``."""
    try:
        if not data.startswith(MAGIC):
            raise ValueError(f"it does not start with {MAGIC!r}")
        start = len(MAGIC) + _HEADER_SIZE.size
        end = start + _HEADER_SIZE.unpack_from(data, len(MAGIC))[0]
        dtype, shape = _header(data[start:end])
        raw = _decompress(memoryview(data)[end:], dtype.itemsize * math.prod(shape))
    except (ValueError, TypeError, KeyError, OverflowError, RecursionError, struct.error,
            pa.ArrowException, OSError) as error:
        raise CompressedDataError(
            f"{where}: corrupt offline-rl packed array ({error}); the value was damaged or cut "
            "short after pack_array wrote it") from None
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


@functools.lru_cache(maxsize=256)
def _header(text: bytes) -> tuple[np.dtype, tuple[int, ...]]:
    """A column's rows share one header, so it is parsed and validated once."""
    header = json.loads(text)
    if not isinstance(header, dict) or not isinstance(header.get("dtype"), str):
        raise ValueError(f"invalid header {text!r:.80}")
    dtype, shape = np.dtype(header["dtype"]), tuple(header["shape"])
    if dtype.str != header["dtype"] or dtype.kind not in _KINDS:
        raise ValueError(f"unsupported dtype {header['dtype']!r}")
    if not all(type(length) is int and length >= 0 for length in shape):
        raise ValueError(f"invalid shape {header['shape']!r}")
    return dtype, shape


def looks_compressed(column: pa.Array | pa.ChunkedArray) -> bool:
    """Whether a column holds compressed arrays (RLlib's text or ``pack_array``'s bytes), told
    by its type (binary or string) and its first value's prefix.

    Examples:
        >>> import numpy as np, pyarrow as pa
        >>> looks_compressed(pa.array([pack_rllib(np.zeros(2))])), looks_compressed(pa.array(["1"]))
        (True, False)
    """
    kind = column.type
    if not (pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_string(kind)
            or pa.types.is_large_string(kind)) or len(column) == 0:
        return False
    first = column[0].as_py()
    if isinstance(first, str):
        return first.startswith((RLLIB_PREFIX, MAGIC_BASE64))
    return isinstance(first, bytes) and first.startswith((MAGIC, RLLIB_PREFIX.encode()))


def decompress_value(value: str | bytes, where: str) -> np.ndarray:
    """Decodes one compressed value: ``pack_array``'s bytes (or their base64 text, as JSON
    output stores them) or RLlib's base64 text."""
    if isinstance(value, (bytes, bytearray)):
        if value.startswith(MAGIC):
            return unpack_array(value, where)
        if value.startswith(RLLIB_PREFIX.encode()):
            return unpack_rllib(value, where)
    elif isinstance(value, str) and value.startswith(RLLIB_PREFIX):
        return unpack_rllib(value, where)
    elif isinstance(value, str) and value.startswith(MAGIC_BASE64):
        return unpack_array(base64.b64decode(value), where)
    raise CompressedDataError(
        f"{where}: the value ({type(value).__name__} {value!r:.40}) is neither an offline-rl "
        f"packed array (bytes starting with {MAGIC!r}) nor RLlib's compressed text (base64 "
        f"starting with {RLLIB_PREFIX!r}). If this column is not compressed, remove it from "
        "config.offline_data(input_compress_columns=[...]).")


def decompress_column(values: Sequence[str | bytes], column: str, where: str) -> np.ndarray:
    """Decodes one compressed value per row and stacks them into a ``(rows, *shape)`` array.

    Every row must decode to the same shape and dtype; an empty column gives shape ``(0,)``.
    """
    if not len(values):
        return np.empty((0,))
    out: np.ndarray | None = None
    for row, value in enumerate(values):
        array = decompress_value(value, f"{where}, column {column!r}, row {row}")
        if out is None:
            out = np.empty((len(values), *array.shape), dtype=array.dtype)
        elif array.shape != out.shape[1:] or array.dtype != out.dtype:
            raise CompressedDataError(
                f"{where}, column {column!r}: row {row} holds a {array.dtype} array of shape "
                f"{array.shape} but row 0 a {out.dtype} array of shape {out.shape[1:]}; every "
                "row of a compressed column must have the same shape and dtype")
        out[row] = array
    return out
