"""Episode state bytes: RLlib-identical packing, safe unpacking."""

from __future__ import annotations

import pickle
from pathlib import Path

import msgpack
import msgpack_numpy
import numpy as np
import pyarrow.parquet as pq
import pytest

from offline_rl.codec import pack_episode_state, unpack_episode_state

FIXTURES = Path(__file__).parent / "fixtures" / "rllib_cartpole_episodes"


def fixture_payloads() -> list[tuple[str, bytes]]:
    """(file name, item bytes) of every episode RLlib recorded in the fixture."""
    return [(path.name, item)
            for path in sorted(FIXTURES.rglob("*.parquet"))
            for item in pq.read_table(path).column("item").to_pylist()]


class Touch:
    """Unpickling this creates ``path``: a stand-in for code a malicious file would run."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (self.path,)


def test_round_trip_of_numpy_values():
    state = {
        "obs": np.arange(6, dtype=np.float32).reshape(2, 3),
        "actions": np.array([1, 0, 1], dtype=np.int64),
        "flags": np.array([True, False]),
        "zero_d": np.array(7, dtype=np.int16),
        "empty": np.zeros((0, 4), dtype=np.float64),
        "scalars": [np.float32(0.5), np.int32(-3), np.bool_(True), np.complex64(1 - 2j)],
        "complex": 3 + 4j,
        "structured": np.array([(1, [2.0, 3.0])], dtype=[("a", "<i4"), ("b", "<f8", (2,))]),
        "plain": {"nested": [1, "two", None, 3.5], 7: b"bytes"},
    }
    restored = unpack_episode_state(pack_episode_state(state))
    assert list(restored) == list(state)
    for key in ("obs", "actions", "flags", "zero_d", "empty", "structured"):
        assert restored[key].dtype == state[key].dtype and restored[key].shape == state[key].shape
        np.testing.assert_array_equal(restored[key], state[key])
    assert [type(v) for v in restored["scalars"]] == [type(v) for v in state["scalars"]]
    assert restored["scalars"] == state["scalars"]
    assert restored["complex"] == 3 + 4j
    assert restored["plain"] == {"nested": [1, "two", None, 3.5], 7: b"bytes"}


def test_decoded_arrays_are_writable():
    restored = unpack_episode_state(pack_episode_state({"obs": np.zeros(3)}))
    restored["obs"][0] = 1.0
    assert restored["obs"][0] == 1.0


def test_packing_is_msgpack_numpys():
    state = {"obs": [np.ones(2, np.float32)], "done": np.bool_(True), "r": [1.0]}
    assert pack_episode_state(state) == msgpack.packb(state, default=msgpack_numpy.encode)


def test_fixture_rows_decode_like_msgpack_numpy_and_repack_byte_identical():
    payloads = fixture_payloads()
    assert len(payloads) == 20
    for name, item in payloads:
        state = unpack_episode_state(item, where=name)
        reference = msgpack.unpackb(item, object_hook=msgpack_numpy.decode, raw=False,
                                    strict_map_key=False)
        np.testing.assert_equal(state, reference)
        assert pack_episode_state(state) == item
        np.testing.assert_equal(unpack_episode_state(item, floats_as_arrays=True), reference)


def test_python_floats_come_back_as_one_float64_array_when_asked():
    rewards = [1.0, -0.5, float("nan"), 2.25]
    item = pack_episode_state({"rewards": {"data": rewards, "lookback": 0}, "mixed": [1.0, 2]})
    assert unpack_episode_state(item)["rewards"]["data"][:2] == [1.0, -0.5]
    state = unpack_episode_state(item, floats_as_arrays=True)
    assert state["rewards"]["data"].dtype == np.float64
    np.testing.assert_array_equal(state["rewards"]["data"], rewards)
    assert state["mixed"] == [1.0, 2]
    for not_all_floats in ([1.0, 2, 3.0], [1.0, "a"], [1.0, np.float32(2)]):
        item = pack_episode_state({"rewards": {"data": not_all_floats, "lookback": 0}})
        np.testing.assert_equal(
            unpack_episode_state(item, floats_as_arrays=True)["rewards"]["data"],
            unpack_episode_state(item)["rewards"]["data"])


def _object_array_payload(marker: Path) -> bytes:
    """What msgpack-numpy writes for an object array: a pickle under kind b"O"."""
    evil = {b"nd": True, b"type": [["", "|O"]], b"kind": b"O", b"shape": [1],
            b"data": pickle.dumps(np.array([Touch(marker)], dtype=object))}
    return msgpack.packb({"id_": "x", "observations": {"data": evil}})


def test_object_array_is_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    payload = _object_array_payload(marker)
    with pytest.raises(ValueError, match=r"^episodes\.parquet: payload holds a pickled object "
                                         r"array .*refused"):
        unpack_episode_state(payload, where="episodes.parquet")
    assert not marker.exists()
    # The payload is live: msgpack-numpy's own decoder runs it.
    msgpack.unpackb(payload, object_hook=msgpack_numpy.decode, raw=False)
    assert marker.exists()


def test_object_dtype_without_kind_is_refused(tmp_path):
    disguised = {b"nd": True, b"type": "|O", b"kind": b"", b"shape": [1], b"data": b"\0" * 8}
    with pytest.raises(ValueError, match="object dtype"):
        unpack_episode_state(msgpack.packb({"x": disguised}), where="f")


@pytest.mark.parametrize("data", [b"\xc1", b"", b"\x82\xa1a"], ids=["reserved", "empty", "cut"])
def test_corrupt_bytes_name_where(data):
    with pytest.raises(ValueError, match=r"^run-1/part\.parquet: corrupt episode payload: "):
        unpack_episode_state(data, where="run-1/part.parquet")


def test_a_payload_nested_too_deep_says_so():
    """Issue 17: msgpack's nesting error used to leave the message empty."""
    with pytest.raises(ValueError, match=r"^f\.parquet: corrupt episode payload: nested deeper "
                                         r"than msgpack reads"):
        unpack_episode_state(b"\x91" * 2000 + b"\xc0", where="f.parquet")


def test_truncated_fixture_row_and_bad_array_bytes():
    name, item = fixture_payloads()[0]
    with pytest.raises(ValueError, match=f"^{name}: corrupt episode payload"):
        unpack_episode_state(item[: len(item) // 2], where=name)
    short = {b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [4], b"data": b"\0" * 5}
    with pytest.raises(ValueError, match="corrupt episode payload"):
        unpack_episode_state(msgpack.packb({"obs": short}))


def test_non_map_payload_is_rejected():
    with pytest.raises(ValueError, match="^f: episode payload is a list, not a map"):
        unpack_episode_state(msgpack.packb([1, 2]), where="f")
    with pytest.raises(ValueError, match="^episode payload is a int"):
        unpack_episode_state(msgpack.packb(3))


def test_an_episode_id_of_the_wrong_type_is_named():
    """Issue 17: an ``id_`` that is a list used to pass decoding and fail later, unhashable."""
    from offline_rl.episodes.episode import SingleAgentEpisode
    from offline_rl.errors import DataFormatError
    from offline_rl.formats.episode_input import decode_episode

    state = SingleAgentEpisode("a", observations=np.zeros((3, 2), np.float32), actions=[0, 1],
                               rewards=[1.0, 1.0], terminated=True,
                               len_lookback_buffer=0).to_numpy().get_state()
    state["id_"] = [1, 2]
    with pytest.raises(DataFormatError, match=r"f\.parquet \(column 'item'\): episode state "
                                              r"field 'id_' must be a str \(or an int\), got "
                                              r"list \[1, 2\]"):
        decode_episode(pack_episode_state(state), "f.parquet (column 'item')")


def _buffer(items: list) -> dict:
    return {"data": items, "lookback": 0, "finalized": False, "space": None}


def test_a_buffers_items_of_one_dtype_and_shape_come_back_as_one_array():
    """RLlib stores a column as one msgpack-numpy map per step; they are decoded as one array,
    equal to decoding each, and the buffer keeps its flags as written."""
    observations = [np.arange(4, dtype=np.float32) + step for step in range(3)]
    actions = [np.int64(1), np.int64(0)]
    state = unpack_episode_state(pack_episode_state(
        {"observations": _buffer(observations), "actions": _buffer(actions),
         "extra_model_outputs": {"action_logp": _buffer([np.float32(-0.5)] * 2)}}))
    obs = state["observations"]
    assert isinstance(obs["data"], np.ndarray) and obs["data"].dtype == np.float32
    np.testing.assert_array_equal(obs["data"], np.stack(observations))
    assert obs["finalized"] is False and obs["data"].flags.writeable
    assert state["actions"]["data"].dtype == np.int64
    np.testing.assert_array_equal(state["actions"]["data"], [1, 0])
    np.testing.assert_array_equal(state["extra_model_outputs"]["action_logp"]["data"], [-0.5] * 2)


def test_a_buffer_of_mixed_items_is_decoded_item_by_item():
    mixed_shapes = [np.zeros(2, np.float32), np.zeros(3, np.float32)]
    mixed_types = [np.float32(1.0), np.int32(2)]
    state = unpack_episode_state(pack_episode_state(
        {"observations": _buffer(mixed_shapes), "rewards": _buffer(mixed_types),
         "infos": _buffer([{}, {"x": np.ones(2)}])}))
    assert [item.shape for item in state["observations"]["data"]] == [(2,), (3,)]
    assert [type(item) for item in state["rewards"]["data"]] == [np.float32, np.int32]
    assert state["infos"]["data"][0] == {}
    np.testing.assert_array_equal(state["infos"]["data"][1]["x"], np.ones(2))


def test_one_bad_item_in_a_buffer_is_refused_like_a_lone_one(tmp_path):
    """Stacking never hides an item: one short of bytes, or pickled, among good ones is
    refused as it would be alone."""
    good = {b"nd": True, b"type": "<f4", b"kind": b"", b"shape": [4], b"data": b"\0" * 16}
    short = {**good, b"data": b"\0" * 12}
    payload = msgpack.packb({"observations": _buffer([good, short, good])})
    with pytest.raises(ValueError, match=r"^f: corrupt episode payload"):
        unpack_episode_state(payload, where="f")
    marker = tmp_path / "pwned"
    evil = {b"nd": True, b"type": [["", "|O"]], b"kind": b"O", b"shape": [1],
            b"data": pickle.dumps(np.array([Touch(marker)], dtype=object))}
    payload = msgpack.packb({"observations": _buffer([good, evil])})
    with pytest.raises(ValueError, match=r"^f: payload holds a pickled object array"):
        unpack_episode_state(payload, where="f")
    assert not marker.exists()


def _items_like_decoding_each(decoded, reference: list) -> None:
    """A buffer's decoded data is one array exactly when decoding each item gives values of one
    dtype and shape, and equals them either way."""
    same = len({(np.asarray(item).dtype, np.shape(item)) for item in reference}) == 1
    assert isinstance(decoded, np.ndarray) == same
    if same:
        np.testing.assert_array_equal(decoded, np.stack(reference))
        assert decoded.dtype == np.asarray(reference[0]).dtype
    else:
        assert [type(item) for item in decoded] == [type(item) for item in reference]
        for ours, theirs in zip(decoded, reference, strict=True):
            np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("seed", range(20))
def test_items_read_as_one_array_from_their_bytes_equal_decoding_each(seed):
    """Items are read as one array straight from their bytes only when every item's bytes but
    its data equal the first's; either way the buffer's data is one array exactly when its items
    share a dtype and shape (a writer's longer length headers or another key order included),
    and items of one byte size but another shape or dtype, or scalars among arrays, stay items,
    each as decoding it gives."""
    rng = np.random.default_rng(seed)
    kinds = [np.zeros(4, np.float32), np.zeros((2, 2), np.float32), np.zeros(4, np.int32),
             np.float32(0), np.zeros(2, np.float64)]
    items = []
    for _ in range(int(rng.integers(1, 6))):
        item = kinds[int(rng.integers(len(kinds)))] if rng.random() < 0.3 else kinds[0]
        items.append((item + rng.normal(size=np.shape(item))).astype(item.dtype))
    packed = [msgpack_numpy.encode(item) for item in items]
    if rng.random() < 0.3:  # a writer's own layout for one item: data first
        index = int(rng.integers(len(packed)))
        packed[index] = {b"data": packed[index][b"data"],
                         **{k: v for k, v in packed[index].items() if k != b"data"}}
    payload = msgpack.packb({"observations": _buffer(packed)})
    if rng.random() < 0.3:  # a 16-byte data's bin8 header (c4 10) written as bin16 (c5 00 10)
        payload = payload.replace(b"\xc4\x10", b"\xc5\x00\x10", 1)
    reference = msgpack.unpackb(payload, object_hook=msgpack_numpy.decode, raw=False)
    decoded = unpack_episode_state(payload)["observations"]["data"]
    _items_like_decoding_each(decoded, reference["observations"]["data"])


def test_extra_bytes_after_the_state_are_named():
    payload = pack_episode_state({"observations": _buffer([np.zeros(2, np.float32)] * 3)})
    with pytest.raises(ValueError, match=r"^f: corrupt episode payload: 2 byte\(s\) after the "
                                         r"episode state"):
        unpack_episode_state(payload + b"\xc0\xc0", where="f")


@pytest.mark.parametrize("items", [[np.ones(3, np.float32)], [np.zeros((0, 4), np.float32)] * 3,
                                   [np.arange(3, dtype=">i4")] * 2, [np.float32(2.0)] * 2],
                         ids=["one item", "empty items", "big-endian", "numpy scalars"])
def test_items_read_from_their_bytes_are_a_writable_array_of_their_dtype(items):
    data = unpack_episode_state(pack_episode_state({"actions": _buffer(items)}))["actions"]["data"]
    assert data.dtype == items[0].dtype and data.shape == (len(items), *np.shape(items[0]))
    np.testing.assert_array_equal(data, np.stack(items))
    data[...] = 0  # writable: the episode's own array, not a view of the payload


def test_items_whose_nd_flag_is_an_int_decode_as_msgpack_numpy_reads_them():
    """msgpack-numpy tells arrays from numpy scalars by ``nd is True``: an item whose flag is
    the int 1 is a scalar of its first value, never an array read from its bytes."""
    item = {b"nd": 1, b"type": "<f4", b"kind": b"", b"shape": [2], b"data": b"\0" * 8}
    state = unpack_episode_state(msgpack.packb({"actions": _buffer([item, item])}))
    assert state["actions"]["data"].tolist() == [0.0, 0.0]
    assert state["actions"]["data"].shape == (2,)


@pytest.mark.parametrize("descr", ["<f,4", [["a", "<f,4"]], 7], ids=str)
def test_a_type_numpy_cannot_read_is_a_corrupt_payload(descr):
    """numpy parses some type strings as Python literals and raised SyntaxError through the
    decoder, not an error naming the file."""
    item = {b"nd": True, b"type": descr, b"kind": b"", b"shape": [1], b"data": b"\0" * 4}
    payload = msgpack.packb({"observations": _buffer([item, item]), "x": item})
    with pytest.raises(ValueError, match=r"^f: corrupt episode payload: type .* is not a numpy "
                                         r"dtype"):
        unpack_episode_state(payload, where="f")
