"""InfiniteLookbackBuffer: RLlib's indexing, lookback, fill and one-hot semantics."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from offline_rl.codec import pack_episode_state, unpack_episode_state
from offline_rl.episodes.lookback import InfiniteLookbackBuffer


def buffers(data, lookback, space=None):
    """The same data as a list buffer and as a finalized (numpy) buffer."""
    as_list = InfiniteLookbackBuffer(list(data), lookback=lookback, space=space)
    finalized = InfiniteLookbackBuffer(list(data), lookback=lookback, space=space)
    finalized.finalize()
    return as_list, finalized


def test_construction_and_length():
    buffer = InfiniteLookbackBuffer([1, 2, 3, 4], lookback=1)
    assert len(buffer) == 3 and buffer.lookback == 1 and not buffer.finalized
    assert InfiniteLookbackBuffer([1], lookback=5).lookback == 1
    empty = InfiniteLookbackBuffer()
    assert empty.data == [] and len(empty) == 0
    assert InfiniteLookbackBuffer(np.zeros(3)).finalized


@pytest.mark.parametrize("finalized", [False, True])
def test_int_list_and_slice_indices(finalized):
    buffer = buffers([10, 11, 12, 13, 14, 15], lookback=2)[finalized]
    assert buffer.get(0) == 12
    assert buffer.get(3) == 15
    assert buffer.get(-1) == 15
    assert buffer.get(-5) == 11  # counting from the end reaches into the lookback
    assert list(buffer.get()) == [12, 13, 14, 15]
    assert list(buffer.get([0, -1, 2])) == [12, 15, 14]
    assert list(buffer.get(slice(1, 3))) == [13, 14]
    assert list(buffer.get(slice(-2, None))) == [14, 15]
    assert list(buffer.get(slice(None, 2))) == [12, 13]
    assert list(buffer.get(slice(0, None, 2))) == [12, 14]
    assert list(buffer.get(slice(2, 100))) == [14, 15]  # ranges clip without fill
    assert isinstance(buffer.get(slice(0, 2)), np.ndarray if finalized else list)
    assert isinstance(buffer.get([0, 1]), np.ndarray if finalized else list)


@pytest.mark.parametrize("finalized", [False, True])
def test_neg_index_as_lookback(finalized):
    buffer = buffers([10, 11, 12, 13, 14], lookback=3)[finalized]
    assert buffer.get(-1, neg_index_as_lookback=True) == 12
    assert buffer.get(-3, neg_index_as_lookback=True) == 10
    assert list(buffer.get(slice(-2, 1), neg_index_as_lookback=True)) == [11, 12, 13]
    assert list(buffer.get([-1, 0], neg_index_as_lookback=True)) == [12, 13]
    with pytest.raises(IndexError, match="out of range"):
        buffer.get(-4, neg_index_as_lookback=True)


@pytest.mark.parametrize("finalized", [False, True])
def test_out_of_range_without_fill_raises(finalized):
    buffer = buffers([1, 2, 3], lookback=1)[finalized]
    for index in (2, 5, -4):
        with pytest.raises(IndexError, match=f"index {index} "):
            buffer.get(index)
    with pytest.raises(IndexError):
        buffer.get([0, 9])


@pytest.mark.parametrize("finalized", [False, True])
def test_fill_pads_scalars(finalized):
    buffer = buffers([10, 11, 12, 13, 14], lookback=2)[finalized]
    assert list(buffer.get(slice(-7, -2), fill=0)) == [0, 0, 10, 11, 12]
    assert list(buffer.get(slice(1, 6), fill=-1)) == [13, 14, -1, -1, -1]
    assert list(buffer.get(slice(-4, 0), neg_index_as_lookback=True, fill=0)) == [0, 0, 10, 11]
    assert list(buffer.get(slice(5, 7), fill=9)) == [9, 9]
    assert list(buffer.get(slice(-9, -7), fill=9)) == [9, 9]
    assert buffer.get(7, fill=-5) == -5
    assert buffer.get(-3, neg_index_as_lookback=True, fill=-5) == -5
    assert list(buffer.get([0, 9], fill=0)) == [12, 0]


@pytest.mark.parametrize("finalized", [False, True])
def test_fill_uses_the_items_shape_and_dtype(finalized):
    items = [np.full(3, i, dtype=np.float32) for i in range(4)]
    buffer = buffers(items, lookback=1)[finalized]
    padded = np.asarray(buffer.get(slice(-3, 2), neg_index_as_lookback=True, fill=0.0))
    assert padded.shape == (5, 3) and padded.dtype == np.float32
    np.testing.assert_array_equal(padded[:, 0], [0, 0, 0, 1, 2])
    single = buffer.get(10, fill=7.0)
    assert single.shape == (3,) and single.dtype == np.float32 and (single == 7).all()


def test_fill_of_an_empty_buffer_uses_its_space():
    buffer = InfiniteLookbackBuffer(space=gym.spaces.Box(0, 1, (2,), np.float32))
    block = np.asarray(buffer.get(slice(0, 3), fill=0.5))
    assert block.shape == (3, 2) and (block == 0.5).all()


def test_fill_of_object_items_is_the_raw_value():
    infos = InfiniteLookbackBuffer([{"a": 1}, {"b": 2}])
    assert infos.get(slice(1, 3), fill={}) == [{"b": 2}, {}]
    assert infos.get(5, fill={"pad": True}) == {"pad": True}


@pytest.mark.parametrize("finalized", [False, True])
def test_one_hot_discrete(finalized):
    buffer = buffers([0, 2, 1, 3], lookback=1, space=gym.spaces.Discrete(4))[finalized]
    hot = buffer.get(0, one_hot_discrete=True)
    assert hot.dtype == np.float32
    np.testing.assert_array_equal(hot, [0, 0, 1, 0])
    batch = np.asarray(buffer.get(slice(-2, 1), neg_index_as_lookback=True, fill=0.0,
                                  one_hot_discrete=True))
    np.testing.assert_array_equal(batch, [[0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]])
    np.testing.assert_array_equal(buffer.get([2, 1], one_hot_discrete=True),
                                  [[0, 0, 0, 1], [0, 1, 0, 0]])
    assert np.asarray(buffer.get(slice(0, 0), one_hot_discrete=True)).size == 0


def test_one_hot_respects_start_and_checks_range():
    buffer = InfiniteLookbackBuffer([-1, 1], space=gym.spaces.Discrete(3, start=-1))
    np.testing.assert_array_equal(buffer.get(slice(None), one_hot_discrete=True),
                                  [[1, 0, 0], [0, 0, 1]])
    with pytest.raises(ValueError, match="outside the space"):
        InfiniteLookbackBuffer([5], space=gym.spaces.Discrete(3)).get(0, one_hot_discrete=True)
    with pytest.raises(ValueError, match="needs the buffer's space"):
        InfiniteLookbackBuffer([0]).get(0, one_hot_discrete=True)
    box = InfiniteLookbackBuffer([0.5], space=gym.spaces.Box(0, 1, ()))
    assert box.get(0, one_hot_discrete=True) == 0.5


def test_finalize_converts_numeric_items_only():
    observations = InfiniteLookbackBuffer([np.zeros(2), np.ones(2)])
    observations.finalize()
    assert observations.finalized and observations.data.shape == (2, 2)
    infos = InfiniteLookbackBuffer([{}, {"a": 1}])
    infos.finalize()
    assert infos.finalized and infos.data == [{}, {"a": 1}]
    ragged = InfiniteLookbackBuffer([np.zeros(2), np.zeros(3)])
    ragged.finalize()
    assert isinstance(ragged.data, list)
    empty = InfiniteLookbackBuffer()
    empty.finalize()
    assert empty.finalized and empty.data == []


@pytest.mark.parametrize("finalized", [False, True])
def test_append_extend_pop_concat(finalized):
    buffer = buffers([1, 2, 3], lookback=1)[finalized]
    buffer.append(4)
    buffer.extend([5, 6])
    buffer.extend([])
    assert list(buffer.get()) == [2, 3, 4, 5, 6]
    buffer.pop()
    buffer.pop(1)
    assert list(buffer.data) == [1, 3, 4, 5]
    other = InfiniteLookbackBuffer([99, 7, 8], lookback=1)
    buffer.concat(other)
    assert list(buffer.get()) == [3, 4, 5, 7, 8]
    assert isinstance(buffer.data, np.ndarray) == finalized


@pytest.mark.parametrize("finalized", [False, True])
def test_set(finalized):
    buffer = buffers([10, 11, 12, 13, 14], lookback=2)[finalized]
    buffer.set(99, 0)
    buffer.set(98, -1)
    buffer.set(97, -1, neg_index_as_lookback=True)
    buffer.set([1, 2], [1, -5])
    assert list(buffer.data) == [2, 97, 99, 1, 98]
    buffer.set([5, 6], slice(-2, 0), neg_index_as_lookback=True)
    assert list(buffer.data) == [5, 6, 99, 1, 98]
    buffer.set([7, 8, 9])
    assert list(buffer.data) == [5, 6, 7, 8, 9]
    with pytest.raises(IndexError, match="cannot set 2 items into a range of 3"):
        buffer.set([1, 2])
    with pytest.raises(IndexError, match="out of range"):
        buffer.set(0, 3)


@pytest.mark.parametrize("finalized", [False, True])
def test_state_round_trip_through_msgpack(finalized):
    space = gym.spaces.Box(-1, 1, (2,), np.float32)
    items = [np.full(2, i, np.float32) for i in range(3)]
    buffer = buffers(items, lookback=1, space=space)[finalized]
    state = buffer.get_state()
    assert sorted(state) == ["data", "finalized", "lookback", "space"]
    restored = InfiniteLookbackBuffer.from_state(unpack_episode_state(pack_episode_state(state)))
    assert restored.lookback == 1 and restored.finalized == finalized
    assert restored.space == space
    np.testing.assert_array_equal(np.asarray(restored.get()), np.asarray(buffer.get()))
    assert isinstance(restored.data, np.ndarray) == finalized


def test_from_state_rejects_malformed_states():
    with pytest.raises(ValueError, match=r"missing \['finalized', 'space'\]"):
        InfiniteLookbackBuffer.from_state({"data": [], "lookback": 0})
    with pytest.raises(ValueError, match="must be a list or array, got dict"):
        InfiniteLookbackBuffer.from_state({"data": {}, "lookback": 0, "finalized": False,
                                           "space": None})
    for lookback in (-2, 1.5, "1", True):
        with pytest.raises(ValueError, match=f"lookback must be an int >= 0, got {lookback!r}"):
            InfiniteLookbackBuffer.from_state({"data": [1, 2, 3], "lookback": lookback,
                                               "finalized": False, "space": None})


def test_non_positive_slice_step_is_rejected():
    with pytest.raises(ValueError, match="step must be positive"):
        InfiniteLookbackBuffer([1, 2]).get(slice(None, None, -1))


@pytest.mark.parametrize("finalized", [False, True])
def test_buffers_compare_equal_as_rllibs_do(finalized):
    # RLlib's tests compare buffers (and so episodes' columns) with ==: data, lookback,
    # finalized state and space all count; the data's dtypes and shapes too.
    space = gym.spaces.Box(-1, 1, (2,), np.float32)
    items = [{"a": np.full(2, i, np.float32), "b": [i]} for i in range(3)]
    first, second = (buffers(items, lookback=1, space=space)[finalized] for _ in range(2))
    assert first == second and first != buffers(items, lookback=2, space=space)[finalized]
    assert first != buffers(items, lookback=1, space=None)[finalized]
    assert first != buffers(items, lookback=1, space=space)[not finalized]
    numbers = InfiniteLookbackBuffer(np.arange(3, dtype=np.float32))
    assert numbers == InfiniteLookbackBuffer(np.arange(3, dtype=np.float32))
    assert numbers != InfiniteLookbackBuffer(np.arange(3, dtype=np.float64))
    assert numbers != InfiniteLookbackBuffer(np.arange(4, dtype=np.float32))
    assert numbers != [0.0, 1.0, 2.0]  # only a buffer equals a buffer
    with pytest.raises(TypeError, match="unhashable"):
        hash(numbers)
