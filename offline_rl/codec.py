"""Episode states to and from the msgpack bytes RLlib stores in the episodes ``item`` column.

Packing is exactly RLlib's (``msgpack`` with ``msgpack_numpy.encode``), in the layout RLlib's
recordings have: every column buffer un-finalized, its data a list of per-step items (RLlib packs
episodes before ``to_numpy``, and its ``from_state`` cannot measure a finalized list of infos).
Unpacking decodes msgpack-numpy's array, numpy-scalar and complex maps ourselves, building
arrays from raw bytes and refusing object arrays: msgpack-numpy would unpickle those, running
whatever code the file carries. msgpack's C unpacker reads the bytes, value by value down to
the column buffers. RLlib's layout stores one msgpack-numpy map per step: a buffer whose
per-step items are numpy values of one dtype and shape (observations, actions, rewards, model
outputs) is read as one array straight from the items' bytes, once they are checked to differ
only in their data, not unpacked item by item (which took nine tenths of an episode's
decoding). A multi-agent episode state (``MultiAgentEpisode.get_state()``) is packed and
unpacked the same way, each agent's episode state in its ``agent_episodes`` as a single-agent
one.

Examples:
    >>> import numpy as np
    >>> buffer = {"data": np.arange(3, dtype=np.float32), "lookback": 0, "finalized": True,
    ...           "space": None}
    >>> state = unpack_episode_state(pack_episode_state({"rewards": buffer, "t": 3}))
    >>> state["rewards"]["data"], state["rewards"]["finalized"], state["t"]
    (array([0., 1., 2.], dtype=float32), False, 3)
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import msgpack
import msgpack_numpy
import numpy as np

#: The episode state's column buffers (besides ``extra_model_outputs``, a dict of them).
BUFFER_FIELDS = ("observations", "actions", "rewards", "infos")


def pack_episode_state(state: dict) -> bytes:
    """Packs an episode state dict the way RLlib writes it, buffers as lists (the caller's
    state is not changed)."""
    return msgpack.packb(_with_list_buffers(state), default=msgpack_numpy.encode)


def pack_multi_agent_episode_state(state: dict) -> bytes:
    """Packs a multi-agent episode state dict (``MultiAgentEpisode.get_state()``), each agent's
    episode state as ``pack_episode_state`` packs it (the caller's state is not changed)."""
    state = dict(state)
    if isinstance(state.get("agent_episodes"), list | tuple):
        state["agent_episodes"] = [(agent_id, _with_list_buffers(agent_state))
                                   for agent_id, agent_state in state["agent_episodes"]]
    return msgpack.packb(state, default=msgpack_numpy.encode)


def _with_list_buffers(state: dict) -> dict:
    """A copy of an episode state whose column buffers hold lists (RLlib's layout)."""
    state = dict(state)
    for field in BUFFER_FIELDS:
        if isinstance(state.get(field), dict):
            state[field] = _as_list_buffer(state[field])
    if state.get("extra_model_outputs"):
        state["extra_model_outputs"] = {key: _as_list_buffer(buffer) for key, buffer
                                        in state["extra_model_outputs"].items()}
    return state


def _as_list_buffer(buffer: dict) -> dict:
    return {**buffer, "data": list(buffer["data"]), "finalized": False}


def unpack_episode_state(data: bytes, *, where: str = "", floats_as_arrays: bool = False
                         ) -> dict:
    """Unpacks bytes written by ``pack_episode_state`` or ``pack_multi_agent_episode_state``
    (or RLlib) into the state dict. A column buffer's per-step numpy items of one dtype and
    shape come back as one array stacking them (its ``finalized`` flag as written), other items
    as a list; a multi-agent state's ``agent_episodes`` pairs hold such single-agent states.
    With ``floats_as_arrays``, items that are all Python floats (rewards as envs give them)
    come back as one float64 array too, as ``finalize`` makes them: for episodes finalized at
    once (a list is what appending steps and packing again expect).

    Raises ``ValueError``, prefixed with ``where`` (e.g. the file name), when the bytes are not
    a msgpack map or hold a pickled object array, which is refused and never unpickled.

    Examples:
        >>> rewards = {"data": np.float32([1, 2]), "lookback": 0, "finalized": True}
        >>> state = {"id_": "e", "agent_episodes": [("a", {"rewards": rewards})]}
        >>> unpacked = unpack_episode_state(pack_multi_agent_episode_state(state))
        >>> (agent_id, agent_state), = unpacked["agent_episodes"]
        >>> agent_id, agent_state["rewards"]["data"], agent_state["rewards"]["finalized"]
        ('a', array([1., 2.], dtype=float32), False)
    """
    prefix = f"{where}: " if where else ""
    try:
        reader = _Reader(data, floats_as_arrays)
        state = _read_state(reader)
        if (extra := len(data) - reader.tell()) > 0:
            raise ValueError(f"{extra} byte(s) after the episode state")
    except _RefusedPayload as error:
        raise ValueError(f"{prefix}{error}") from None
    except (msgpack.exceptions.StackError, RecursionError):
        raise ValueError(f"{prefix}corrupt episode payload: nested deeper than msgpack reads "
                         "(an episode state is a few levels deep; a damaged or hostile "
                         "payload?)") from None
    except (ValueError, TypeError, KeyError, IndexError, msgpack.UnpackException) as error:
        raise ValueError(f"{prefix}corrupt episode payload: "
                         f"{error or type(error).__name__}") from None
    if not isinstance(state, dict):
        raise ValueError(f"{prefix}episode payload is a {type(state).__name__}, not a map")
    return state


class _RefusedPayload(ValueError):
    """The payload asks for unpickling, which is refused."""


class _Reader:
    """msgpack bytes read value by value with msgpack's own ``Unpacker``, peeking at the next
    value's first byte to tell maps and arrays from other values; ``unpack`` reads the next
    value as msgpack gives it, ``value`` with its msgpack-numpy maps decoded (``_decoded``);
    ``floats_as_arrays`` as ``unpack_episode_state`` takes it."""

    def __init__(self, data: bytes, floats_as_arrays: bool = False):
        self.data = data
        self.floats_as_arrays = floats_as_arrays
        self.unpacker = msgpack.Unpacker(raw=False, strict_map_key=False,
                                         max_buffer_size=max(len(data), 1))
        self.unpacker.feed(data)
        self.unpack, self.tell = self.unpacker.unpack, self.unpacker.tell

    def value(self) -> Any:
        return _decoded(self.unpack())

    def at(self, pattern: re.Pattern) -> bool:
        return pattern.match(self.data, self.tell()) is not None


_MAP = re.compile(rb"[\x80-\x8f\xde\xdf]")
_ARRAY = re.compile(rb"[\x90-\x9f\xdc\xdd]")
_PAIR = re.compile(rb"\x92")
#: An array whose first item is a msgpack-numpy map (its first key ``b"nd"``, as packed).
_NUMPY_ITEMS = re.compile(rb"(?:[\x90-\x9f]|\xdc..|\xdd....)(?:[\x81-\x8f]|\xde..|\xdf....)"
                          rb"\xc4\x02nd", re.DOTALL)
#: An array whose first item is a float64 (msgpack's packing of a Python float).
_FLOAT_ITEMS = re.compile(rb"(?:[\x90-\x9f]|\xdc..|\xdd....)\xcb", re.DOTALL)


def _read_map(reader: _Reader, field_readers: Mapping[Any, Callable[[_Reader], Any]],
              read_other: Callable[[_Reader], Any] = _Reader.value) -> Any:
    """A map, each value read by its key's reader in ``field_readers`` (else ``read_other``)
    and the map decoded if it is a msgpack-numpy one; a value that is not a map as
    ``_Reader.value`` reads it."""
    if not reader.at(_MAP):
        return reader.value()
    mapping = {}
    for _ in range(reader.unpacker.read_map_header()):
        key = reader.unpack()
        mapping[key] = field_readers.get(key, read_other)(reader)
    return _numpy_value(mapping) if b"nd" in mapping or b"complex" in mapping else mapping


def _read_state(reader: _Reader) -> Any:
    """An episode state: its column buffers' items read by ``_read_items``, its
    ``agent_episodes`` pairs' states by this."""
    return _read_map(reader, _STATE_FIELDS)


def _read_buffer(reader: _Reader) -> Any:
    return _read_map(reader, {"data": _read_items})


def _read_buffers(reader: _Reader) -> Any:
    return _read_map(reader, {}, read_other=_read_buffer)


def _read_agent_pairs(reader: _Reader) -> Any:
    """A multi-agent state's ``(agent id, episode state)`` pairs, each as a list."""
    if not reader.at(_ARRAY):
        return reader.value()
    pairs = []
    for _ in range(reader.unpacker.read_array_header()):
        if reader.at(_PAIR):
            reader.unpacker.read_array_header()
            agent_id = reader.unpack()
            pairs.append([agent_id, _read_state(reader)])
        else:
            pairs.append(reader.value())
    return pairs


def _read_items(reader: _Reader) -> Any:
    """A buffer's data: a list of numpy items of one dtype and shape as one array stacking
    them, read from their bytes (``_stacked``) where their layout allows, else from the
    decoded items (``_one_array``); with ``floats_as_arrays``, Python floats as one float64
    array (``_stacked_floats``); anything else as ``_Reader.value`` reads it."""
    if reader.floats_as_arrays and reader.at(_FLOAT_ITEMS):
        count = reader.unpacker.read_array_header()
        floats = _stacked_floats(reader.data, reader.tell(), count)
        if floats is None:
            return _one_array(_decoded([reader.unpack() for _ in range(count)]))
        reader.unpacker.read_bytes(FLOAT_BYTES * count)
        return floats
    if not reader.at(_NUMPY_ITEMS):
        value = reader.value()
        return _one_array(value) if isinstance(value, list) else value
    count = reader.unpacker.read_array_header()
    start = reader.tell()
    first = reader.unpack()
    stride = reader.tell() - start
    stacked = _stacked(reader.data, start, stride, count, first)
    if stacked is None:
        return _one_array(_decoded([first, *(reader.unpack() for _ in range(count - 1))]))
    reader.unpacker.read_bytes(stride * (count - 1))
    return stacked


def _one_array(items: list) -> np.ndarray | list:
    """Decoded items as one array stacking them when they are numpy values of one dtype and
    shape, else as they are."""
    if (all(isinstance(item, np.ndarray | np.generic) for item in items)
            and len({(item.dtype, item.shape) for item in items}) == 1):
        return np.stack(items)
    return items


_STATE_FIELDS = {**dict.fromkeys(BUFFER_FIELDS, _read_buffer),
                 "extra_model_outputs": _read_buffers, "agent_episodes": _read_agent_pairs}


def _stacked(data: bytes, start: int, stride: int, count: int, first: Any) -> np.ndarray | None:
    """The ``count`` items at ``start`` in ``data`` as one array stacking them, read straight
    from their bytes: when ``first`` (the first item, unpacked) is a msgpack-numpy value whose
    ``stride`` bytes are msgpack's own packing of it, its data last, and every other item's
    bytes but its data's equal the first's. Each is then that value with other data of the same
    size, so the array equals decoding each. ``None`` for anything else, which is decoded item
    by item (and its errors raised there), then stacked if they allow."""
    layout = _numpy_layout(first)
    if layout is None or list(first)[-1] != b"data" or start + count * stride > len(data):
        return None
    if msgpack.packb(first) != data[start:start + stride]:
        return None
    head = stride - len(first[b"data"])
    rows = np.frombuffer(data, np.uint8, count * stride, start).reshape(count, stride)
    if rows[:, :head].tobytes() != data[start:start + head] * count:
        return None
    dtype, shape = layout
    return rows[:, head:].copy().view(dtype).reshape(count, *shape)


#: A msgpack float64: its type byte (0xcb), then the number, big-endian.
_MSGPACK_FLOAT = np.dtype([("type", np.uint8), ("value", ">f8")])
FLOAT_BYTES = _MSGPACK_FLOAT.itemsize


def _stacked_floats(data: bytes, start: int, count: int) -> np.ndarray | None:
    """The ``count`` values at ``start`` in ``data`` as one float64 array, when each is a
    msgpack float64; ``None`` for anything else (decoded item by item)."""
    if start + count * FLOAT_BYTES > len(data):
        return None
    items = np.frombuffer(data, _MSGPACK_FLOAT, count, start)
    if not (items["type"] == 0xCB).all():
        return None
    return items["value"].astype(np.float64)


def _numpy_layout(item: Any) -> tuple[np.dtype, tuple[int, ...]] | None:
    """The dtype and shape of a msgpack-numpy array or numpy-scalar map, with exactly the keys
    msgpack-numpy writes, whose data fits them (a plain dtype: neither structured nor holding
    objects); ``None`` for anything else."""
    if not isinstance(item, dict) or type(array := item.get(b"nd")) is not bool:
        return None
    if set(item) != _NUMPY_KEYS[array]:
        return None
    descr, data = item[b"type"], item[b"data"]
    shape = item[b"shape"] if array else []
    if (not isinstance(descr, str | bytes) or not isinstance(data, bytes)
            or not isinstance(shape, list) or not all(type(size) is int for size in shape)
            or item.get(b"kind", b"") != b""):
        return None
    try:
        dtype = _dtype(descr)
    except ValueError:
        return None
    if dtype.hasobject or len(data) != dtype.itemsize * math.prod(shape):
        return None
    return dtype, tuple(shape)


#: The keys of msgpack-numpy's array (``nd`` True) and numpy-scalar (False) maps.
_NUMPY_KEYS = {True: {b"nd", b"type", b"kind", b"shape", b"data"},
               False: {b"nd", b"type", b"data"}}


#: Scalar types msgpack unpacks to: lists of only these need no decoding.
_PLAIN = frozenset({int, float, bool, str, bytes, type(None)})


def _decoded(value: Any) -> Any:
    """``value`` with every msgpack-numpy map in it decoded into its numpy value."""
    if isinstance(value, dict):
        if b"nd" in value or b"complex" in value:
            return _numpy_value(value)
        return {key: _decoded(item) for key, item in value.items()}
    if isinstance(value, list) and any(value) and not _PLAIN.issuperset(map(type, value)):
        return [_decoded(item) for item in value]
    return value  # a scalar, or a list of plain scalars or empty items (infos: [{}, ...])


def _numpy_value(obj: dict) -> Any:
    """A msgpack-numpy array, numpy-scalar or complex map, decoded."""
    if b"nd" in obj:
        if obj.get(b"kind") == b"O":
            raise _RefusedPayload(
                "payload holds a pickled object array (msgpack-numpy kind 'O'); refused to "
                "unpickle it"
            )
        dtype = _dtype(obj[b"type"])
        if dtype.hasobject:
            raise _RefusedPayload(
                f"payload holds an object dtype {dtype} array; refused to decode it"
            )
        values = np.frombuffer(obj[b"data"], dtype=dtype)
        if obj[b"nd"] is True:
            return values.reshape(obj[b"shape"]).copy()
        return values[0]
    return complex(_text(obj[b"data"]))


def _dtype(descr: Any) -> np.dtype:
    """The dtype msgpack-numpy stored: a type string, or a structured descr list; raises
    ``ValueError`` for anything numpy does not read as a dtype."""
    try:
        if isinstance(descr, list):
            return np.dtype([_field(field) for field in descr])
        return _named_dtype(descr)
    except (TypeError, ValueError, SyntaxError):  # numpy reads '<f,4' as a Python literal
        raise ValueError(f"type {descr!r:.80} is not a numpy dtype") from None


@functools.lru_cache(maxsize=1024)
def _named_dtype(descr: str | bytes) -> np.dtype:
    """The dtype of a type string (cached: an episode stores one per step and column)."""
    return np.dtype(_text(descr))


def _field(field: list) -> tuple:
    name, descr, *shape = field
    subtype = _dtype(descr) if isinstance(descr, list) else _text(descr)
    return (_text(name), subtype, *(tuple(s) for s in shape))


def _text(value: str | bytes) -> str:
    return value.decode("ascii") if isinstance(value, bytes) else value
