"""Compressed column values: RLlib's base64 LZ4 pickles read safely, our pickle-free format."""

from __future__ import annotations

import base64
import builtins
import io
import json
import os
import pickle
import struct
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from offline_rl import compression
from offline_rl.compression import (
    MAGIC,
    CompressedDataError,
    decompress_column,
    decompress_value,
    pack_array,
    unpack_array,
    unpack_rllib,
)
from offline_rl.errors import DataFormatError

FIXTURES = Path(__file__).parent / "fixtures" / "rllib_cartpole_sample_batch_json"
WHERE = "file x.json, column 'obs', row 3"


def lz4_base64(data: bytes) -> str:
    """Wraps bytes the way RLlib's ``pack`` does: an LZ4 frame, then base64 text."""
    frame = pa.compress(data, codec="lz4", asbytes=True)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    return base64.b64encode(frame).decode("ascii")


def rllib_pack(obj: object, protocol: int | None = None) -> str:
    return lz4_base64(pickle.dumps(obj, protocol=protocol))


def as_numpy1(data: bytes) -> bytes:
    """Rewrites a numpy 2 pickle to the module names numpy 1.x writes (``numpy.core``)."""
    if data[2:3] != b"\x95":  # protocol 2: GLOBAL opcodes, newline-terminated text
        return data.replace(b"numpy._core.", b"numpy.core.")
    data = (data.replace(b"\x8c\x13numpy._core.numeric", b"\x8c\x12numpy.core.numeric")
            .replace(b"\x8c\x16numpy._core.multiarray", b"\x8c\x15numpy.core.multiarray"))
    return data[:3] + struct.pack("<Q", len(data) - 11) + data[11:]  # one frame: fix its length


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


ARRAYS = {
    "float32": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
    "float16": np.linspace(-2, 2, 5, dtype=np.float16),
    "float64-big-endian": np.arange(6, dtype=">f8").reshape(2, 3),
    "int64": np.array([-(2**62), 0, 2**62], dtype=np.int64),
    "uint8-3d": np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
    "bool": np.array([[True, False], [False, True]]),
    "complex64": np.array([1 + 2j, -3j], dtype=np.complex64),
    "str": np.array(["ab", "c"]),
    "bytes": np.array([b"xy", b"z"]),
    "0-d": np.array(2.5, dtype=np.float32),
    "empty": np.zeros((0, 4), dtype=np.float32),
    "fortran": np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
    "non-contiguous": np.arange(20, dtype=np.float64).reshape(4, 5)[::2, 1::2],
}


# --- RLlib's compressed values -------------------------------------------------------------


def test_decodes_rllib_sample_batch_json():
    lines = [json.loads(line)
             for path in sorted(FIXTURES.glob("*.json"))
             for line in path.read_text().splitlines() if line.strip()]
    assert lines
    for number, line in enumerate(lines):
        obs = unpack_rllib(line["obs"], f"line {number}, column 'obs'")
        new_obs = decompress_value(line["new_obs"], f"line {number}, column 'new_obs'")
        for array in (obs, new_obs):
            assert array.dtype == np.float32
            assert array.shape == (len(line["t"]), 4)
        if len(set(line["eps_id"])) == 1:
            np.testing.assert_array_equal(obs[1:], new_obs[:-1])


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("name", list(ARRAYS))
def test_rllib_round_trip(name, protocol):
    array = ARRAYS[name]
    assert_same(unpack_rllib(rllib_pack(array, protocol), WHERE), array)


@pytest.mark.parametrize("protocol", [2, 5])
@pytest.mark.parametrize("name", ["float32", "bool", "fortran", "non-contiguous", "0-d"])
def test_rllib_round_trip_numpy1_pickles(name, protocol):
    array = ARRAYS[name]
    data = as_numpy1(pickle.dumps(array, protocol=protocol))
    assert b"numpy.core." in data and b"numpy._core" not in data
    assert_same(unpack_rllib(lz4_base64(data), WHERE), array)


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("scalar", [np.float32(1.5), np.int64(-3), np.bool_(True)])
def test_rllib_numpy_scalars_become_0d_arrays(scalar, protocol):
    assert_same(unpack_rllib(rllib_pack(scalar, protocol), WHERE), np.asarray(scalar))


def test_rllib_value_may_be_bytes():
    array = ARRAYS["float32"]
    assert_same(unpack_rllib(rllib_pack(array).encode("ascii"), WHERE), array)


class Reduces:
    """Pickles as ``function(*args)``: what a malicious file would make the loader call."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def code_running_payloads(marker: Path) -> dict[str, object]:
    return {
        "os.system": Reduces(os.system, f"touch {marker}"),
        "builtins.exec": Reduces(builtins.exec, f"open({str(marker)!r}, 'w').close()"),
        "subprocess.call": Reduces(subprocess.call, ["touch", str(marker)]),
        "inside an array tuple": (np.arange(3), Reduces(os.system, f"touch {marker}")),
    }


@pytest.mark.parametrize("protocol", [2, 5])
@pytest.mark.parametrize("payload", ["os.system", "builtins.exec", "subprocess.call",
                                     "inside an array tuple"])
def test_rllib_refuses_code_running_pickles(tmp_path, payload, protocol):
    marker = tmp_path / "ran"
    value = rllib_pack(code_running_payloads(marker)[payload], protocol)
    with pytest.raises(CompressedDataError, match="refusing to load") as error:
        unpack_rllib(value, WHERE)
    assert WHERE in str(error.value)
    assert "only numpy arrays are accepted" in str(error.value)
    assert not marker.exists()


@pytest.mark.parametrize("obj", [
    np.array([{"a": 1}], dtype=object),
    np.array([1, "two"], dtype=object),
    np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]),
    np.zeros(2, dtype=[("a", "f4"), ("b", "O")]),
    np.zeros(3, dtype="datetime64[ns]"),
], ids=["object-dicts", "object-mixed", "structured", "structured-object", "datetime"])
@pytest.mark.parametrize("protocol", [2, 5])
def test_rllib_refuses_object_and_structured_dtypes(obj, protocol):
    with pytest.raises(CompressedDataError, match=r"refusing to load an array of dtype") as error:
        unpack_rllib(rllib_pack(obj, protocol), WHERE)
    assert WHERE in str(error.value)


@pytest.mark.parametrize("module, name", [
    ("numpy", "load"),
    ("numpy.lib.format", "read_array"),
    ("numpy", "frombuffer"),
    ("numpy.testing", "assert_equal"),
    ("numpy._core.multiarray", "fromstring"),
    ("numpy.core.numeric", "_frombuffer_evil"),
    ("builtins", "eval"),
])
def test_rllib_refuses_globals_outside_the_allowlist(module, name):
    data = f"c{module}\n{name}\n(Vx\ntR.".encode()
    with pytest.raises(CompressedDataError, match=f"refusing to load {module}.{name} from "):
        unpack_rllib(lz4_base64(data), WHERE)


@pytest.mark.parametrize("data, refused", [
    (b"cnumpy\ndtype\n(dVx\nI1\nsb.", "a pickle that modifies a numpy global"),
    (b"cnumpy\nndarray\n((I3\ntVf8\ntR.", r"a direct numpy.ndarray\(...\) call"),
    (b"cnumpy._core.multiarray\n_reconstruct\n(cnumpy\ndtype\n(I0\ntVb\ntR.",
     "an array of a class other than numpy.ndarray"),
    (b"c_codecs\nencode\n(Vabc\nVrot13\ntR.", "_codecs.encode with encoding 'rot13'"),
    (b"cnumpy\ndtype\n((Vf4\nI1\nttR.", "a dtype built from a tuple"),
    (b"c__builtin__\nbytes\n(I1000\ntR.", r"bytes\(...\) with arguments"),
    (b"Pfoo\n.", "persistent id 'foo'"),
])
def test_rllib_refuses_misuse_of_allowed_globals(data, refused):
    with pytest.raises(CompressedDataError, match=f"refusing to load {refused}"):
        unpack_rllib(lz4_base64(data), WHERE)


class DtypeStatePickler(pickle.Pickler):
    """Pickles float64 dtypes with a hand-written ``__setstate__`` state."""

    def __init__(self, file, state):
        super().__init__(file, protocol=5)
        self.state = state

    def reducer_override(self, obj):
        if isinstance(obj, np.dtype) and obj == np.float64:
            return np.dtype, ("f8", False, True), self.state
        return NotImplemented


def pickled_with_dtype_state(array: np.ndarray, state: tuple) -> str:
    buffer = io.BytesIO()
    DtypeStatePickler(buffer, state).dump(array)
    return lz4_base64(buffer.getvalue())


def test_rllib_never_hands_dtype_state_to_numpy():
    # numpy's dtype.__setstate__ would mark this float64 as holding objects (flags 0x3F).
    flagged = (3, "<", None, None, None, -1, -1, 0x3F)
    result = unpack_rllib(pickled_with_dtype_state(np.ones(3), flagged), WHERE)
    assert not result.dtype.hasobject
    assert_same(result, np.ones(3))
    with_fields = (3, "<", None, ("a",), {"a": (np.dtype("f8"), 0)}, 8, 1, 0)
    with pytest.raises(CompressedDataError, match="structured or subarray dtype"):
        unpack_rllib(pickled_with_dtype_state(np.ones(3), with_fields), WHERE)


def test_rllib_refuses_pickles_of_non_arrays():
    with pytest.raises(CompressedDataError, match="holds a list, not a numpy array"):
        unpack_rllib(rllib_pack([1.0, 2.0]), WHERE)


def test_rllib_corrupt_values_name_where():
    valid = base64.b64decode(rllib_pack(ARRAYS["float32"]))
    corrupt_frame = bytearray(valid)
    corrupt_frame[20:40] = b"\xff" * 20
    cases = {
        "BCJNGG!!not base64": "not valid base64",
        "BCJNGGé": "not valid base64",
        base64.b64encode(valid[: len(valid) // 2]).decode(): "corrupt or truncated LZ4 frame",
        base64.b64encode(bytes(corrupt_frame)).decode(): "corrupt or truncated LZ4 frame",
        lz4_base64(pickle.dumps(ARRAYS["float32"])[:-20]): "not a pickled numpy array",
        lz4_base64(b"not a pickle"): "not a pickled numpy array",
    }
    for value, message in cases.items():
        with pytest.raises(CompressedDataError, match=message) as error:
            unpack_rllib(value, WHERE)
        assert str(error.value).startswith(WHERE)


def test_rllib_corrupt_frames_with_content_size_name_where():
    value = json.loads(next(FIXTURES.glob("*.json")).read_text().splitlines()[0])["obs"]
    frame = base64.b64decode(value)
    assert frame[4] & 0x08  # python-lz4 stores the content size in the frame header
    huge = frame[:6] + (2**40).to_bytes(8, "little") + frame[14:]
    for corrupt in (frame[: len(frame) // 2], frame[:-6], huge):
        with pytest.raises(CompressedDataError, match="corrupt or truncated LZ4 frame") as error:
            unpack_rllib(base64.b64encode(corrupt), WHERE)
        assert str(error.value).startswith(WHERE)


def test_errors_are_data_format_errors():
    assert issubclass(CompressedDataError, DataFormatError)
    assert issubclass(CompressedDataError, ValueError)


# --- pack_array / unpack_array -------------------------------------------------------------


@pytest.mark.parametrize("name", list(ARRAYS))
def test_pack_round_trip(name):
    array = ARRAYS[name]
    data = pack_array(array)
    assert data.startswith(MAGIC)
    result = unpack_array(data, WHERE)
    assert_same(result, array)
    assert result.flags.c_contiguous and result.flags.writeable


def test_pack_compresses():
    array = np.zeros((1000, 4), dtype=np.float32)
    assert len(pack_array(array)) < array.nbytes // 10


@pytest.mark.parametrize("array", [
    np.array([{"a": 1}], dtype=object),
    np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]),
], ids=["object", "structured"])
def test_pack_refuses_unsupported_dtypes(array):
    with pytest.raises(CompressedDataError, match="cannot store dtype"):
        pack_array(array)


def with_header(header: dict, body: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return MAGIC + struct.pack("<I", len(raw)) + raw + body


def test_unpack_array_corrupt_data_names_where():
    data = pack_array(np.arange(100, dtype=np.float64))
    body = data[len(MAGIC) + 4 + struct.unpack_from("<I", data, len(MAGIC))[0]:]
    bad_frame = bytearray(data)
    bad_frame[-len(body):-len(body) + 4] = b"\x00" * 4  # the LZ4 frame magic
    cases = [
        b"XXXXX" + data[5:],
        data[:7],
        data[:20],
        data[:-5],
        bytes(bad_frame),
        data[:-len(body)] + body[:7],
        with_header({"dtype": "|O", "shape": [100]}, body),
        with_header({"dtype": "|V8", "shape": [100]}, body),
        with_header({"dtype": "f8", "shape": [100]}, body),
        with_header({"dtype": "<f8", "shape": [-100]}, body),
        with_header({"dtype": "<f8", "shape": [10]}, body),
        with_header({"dtype": "<f8", "shape": [10**12]}, body),
        with_header({"dtype": "<f8"}, body),
        with_header({"dtype": ["<f8"], "shape": [100]}, body),
        MAGIC + struct.pack("<I", 2**31) + b"{}",
    ]
    for number, case in enumerate(cases):
        with pytest.raises(CompressedDataError, match="corrupt offline-rl packed array") as error:
            unpack_array(case, WHERE)
        assert str(error.value).startswith(WHERE), number


def test_unpack_array_never_uses_pickle(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("pickle was used")

    for name in ("loads", "load", "Unpickler"):
        monkeypatch.setattr(pickle, name, forbidden)
    monkeypatch.setattr(compression, "_NumpyUnpickler", forbidden)
    for array in ARRAYS.values():
        assert_same(unpack_array(pack_array(array), WHERE), array)
        assert_same(decompress_value(pack_array(array), WHERE), array)


# --- dispatch and columns ------------------------------------------------------------------


def test_decompress_value_dispatches_on_content():
    array = ARRAYS["float32"]
    assert_same(decompress_value(pack_array(array), WHERE), array)
    assert_same(decompress_value(rllib_pack(array), WHERE), array)
    assert_same(decompress_value(rllib_pack(array).encode("ascii"), WHERE), array)


@pytest.mark.parametrize("value", ["hello", b"raw bytes", "", 1.5, None, [1, 2]])
def test_decompress_value_refuses_uncompressed_values(value):
    with pytest.raises(CompressedDataError, match="input_compress_columns") as error:
        decompress_value(value, WHERE)
    assert "neither" in str(error.value) and str(error.value).startswith(WHERE)


def test_decompress_column_stacks_rows():
    rows = [np.full((2, 3), row, dtype=np.float32) for row in range(4)]
    values = [pack_array(rows[0]), rllib_pack(rows[1]), pack_array(rows[2]), rllib_pack(rows[3])]
    assert_same(decompress_column(values, "obs", "file x"), np.stack(rows))


def test_decompress_column_empty():
    assert decompress_column([], "obs", "file x").shape == (0,)


@pytest.mark.parametrize("second, message", [
    (np.zeros(4, dtype=np.float32), r"row 1 holds a float32 array of shape \(4,\)"),
    (np.zeros(3, dtype=np.float64), r"row 1 holds a float64 array of shape \(3,\)"),
])
def test_decompress_column_refuses_mixed_rows(second, message):
    values = [pack_array(np.zeros(3, dtype=np.float32)), pack_array(second)]
    with pytest.raises(CompressedDataError, match=message) as error:
        decompress_column(values, "obs", "file x")
    assert "file x, column 'obs'" in str(error.value)


def test_decompress_column_names_the_bad_row():
    values = [pack_array(np.zeros(3)), "not compressed"]
    with pytest.raises(CompressedDataError, match="file x, column 'obs', row 1: "):
        decompress_column(values, "obs", "file x")


@pytest.mark.parametrize("size_in_frame", [True, False])
def test_values_that_decompress_beyond_the_cap_are_refused(monkeypatch, size_in_frame):
    """Issue 17: a value's decompressed size is bounded whether or not its LZ4 frame states it
    (RLlib's frames do; a hand-made one need not)."""
    monkeypatch.setattr(compression, "MAX_VALUE_BYTES", 10_000)
    array = np.zeros(100_000)
    if size_in_frame:  # as RLlib's pack writes it (lz4.frame stores the size by default)
        import lz4.frame

        value = base64.b64encode(lz4.frame.compress(pickle.dumps(array, protocol=5))).decode()
        message = r"claims 800139 uncompressed bytes"
    else:
        sink = pa.BufferOutputStream()
        with pa.output_stream(sink, compression="lz4") as stream:
            stream.write(pickle.dumps(array, protocol=5))
        value = base64.b64encode(sink.getvalue().to_pybytes()).decode()
        message = r"decompresses to more than 10000 bytes"
    with pytest.raises(CompressedDataError, match=rf"row 3: refused, it {message}: more than "
                                                   r".*MAX_VALUE_BYTES \(10000\).*bomb"):
        unpack_rllib(value, "row 3")
