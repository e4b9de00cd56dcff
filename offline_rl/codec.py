"""Episode states to and from the msgpack bytes RLlib stores in the episodes ``item`` column.

Packing is exactly RLlib's (``msgpack`` with ``msgpack_numpy.encode``), in the layout RLlib's
recordings have: every column buffer un-finalized, its data a list of per-step items (RLlib packs
episodes before ``to_numpy``, and its ``from_state`` cannot measure a finalized list of infos).
Unpacking decodes msgpack-numpy's array, numpy-scalar and complex maps ourselves, building
arrays from raw bytes and refusing object arrays: msgpack-numpy would unpickle those, running
whatever code the file carries. msgpack's C unpacker reads the bytes; a column buffer whose
per-step items are numpy values of one dtype and shape (observations, actions, rewards, model
outputs) is then decoded as one array stacking them, not item by item: RLlib's layout stores one
msgpack-numpy map per step, and decoding each through a Python hook took 6x msgpack's own work.
A multi-agent episode state (``MultiAgentEpisode.get_state()``) is packed and unpacked the same
way, each agent's episode state in its ``agent_episodes`` as a single-agent one.

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
from collections.abc import Callable
from operator import itemgetter, methodcaller
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


def unpack_episode_state(data: bytes, *, where: str = "") -> dict:
    """Unpacks bytes written by ``pack_episode_state`` (or RLlib) into the state dict; a column
    buffer's per-step numpy items of one dtype and shape come back as one array stacking them
    (its ``finalized`` flag as written), other items as a list. A multi-agent episode's state
    (``pack_multi_agent_episode_state``) comes back as ``unpack_multi_agent_episode_state``
    gives it, so that a reader of either kind tells them apart by ``agent_episodes``.

    Raises ``ValueError``, prefixed with ``where`` (e.g. the file name), when the bytes are not
    a msgpack map or hold a pickled object array, which is refused and never unpickled.
    """
    return _unpacked(data, where, _with_stacked_buffers_of_either)


def unpack_multi_agent_episode_state(data: bytes, *, where: str = "") -> dict:
    """Unpacks bytes written by ``pack_multi_agent_episode_state`` (or packed from a
    multi-agent state as RLlib packs episodes) into the state dict, each agent's episode state
    as ``unpack_episode_state`` unpacks it; raises ``ValueError`` as that does.

    Examples:
        >>> rewards = {"data": np.float32([1, 2]), "lookback": 0, "finalized": True}
        >>> state = {"id_": "e", "agent_episodes": [("a", {"rewards": rewards})]}
        >>> unpacked = unpack_multi_agent_episode_state(pack_multi_agent_episode_state(state))
        >>> (agent_id, agent_state), = unpacked["agent_episodes"]
        >>> agent_id, agent_state["rewards"]["data"], agent_state["rewards"]["finalized"]
        ('a', array([1., 2.], dtype=float32), False)
    """
    return _unpacked(data, where, _with_stacked_agent_buffers)


def _unpacked(data: bytes, where: str, stack: Callable[[dict], dict]) -> dict:
    """The msgpack map in ``data`` with ``stack`` applied, then its msgpack-numpy maps
    decoded; raises ``ValueError`` prefixed with ``where``."""
    prefix = f"{where}: " if where else ""
    try:
        state = msgpack.unpackb(data, raw=False, strict_map_key=False)
        if isinstance(state, dict):
            state = _decoded(stack(state))
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


#: Scalar types msgpack unpacks to: lists of only these need no decoding.
_PLAIN = frozenset({int, float, bool, str, bytes, type(None)})
_ND, _TYPE, _SHAPE, _DATA = (itemgetter(key) for key in (b"nd", b"type", b"shape", b"data"))
_KIND = methodcaller("get", b"kind", b"")


def _decoded(value: Any) -> Any:
    """``value`` with every msgpack-numpy map in it decoded into its numpy value."""
    if isinstance(value, dict):
        if b"nd" in value or b"complex" in value:
            return _numpy_value(value)
        return {key: _decoded(item) for key, item in value.items()}
    if isinstance(value, list) and any(value) and not _PLAIN.issuperset(map(type, value)):
        return [_decoded(item) for item in value]
    return value  # a scalar, or a list of plain scalars or empty items (infos: [{}, ...])


def _with_stacked_buffers(state: dict) -> dict:
    """``state`` with the data of each column buffer stacked into one array where
    ``_stacked`` can (changed in place: it is msgpack's fresh output)."""
    extras = state.get("extra_model_outputs")
    buffers = [state.get(field) for field in BUFFER_FIELDS]
    buffers += list(extras.values()) if isinstance(extras, dict) else []
    for buffer in buffers:
        if isinstance(buffer, dict) and isinstance(buffer.get("data"), list):
            stacked = _stacked(buffer["data"])
            if stacked is not None:
                buffer["data"] = stacked
    return state


def _with_stacked_buffers_of_either(state: dict) -> dict:
    """``_with_stacked_agent_buffers`` for a multi-agent episode's state, else
    ``_with_stacked_buffers``."""
    if "agent_episodes" in state:
        return _with_stacked_agent_buffers(state)
    return _with_stacked_buffers(state)


def _with_stacked_agent_buffers(state: dict) -> dict:
    """``state`` (a multi-agent episode's) with ``_with_stacked_buffers`` applied to each of its
    ``(agent id, episode state)`` pairs (changed in place)."""
    pairs = state.get("agent_episodes")
    for pair in pairs if isinstance(pairs, list) else ():
        if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], dict):
            _with_stacked_buffers(pair[1])
    return state


def _stacked(items: list) -> np.ndarray | None:
    """Items that are all msgpack-numpy values of one dtype and shape, as one array stacking
    them (what decoding each and ``np.asarray`` give, in one pass over their bytes); ``None``
    for anything else, which is decoded item by item (and its errors raised there)."""
    if not items or set(map(type, items)) != {dict}:
        return None
    try:
        (array,) = set(map(_ND, items))
        (descr,) = set(map(_TYPE, items))
        (shape,) = set(map(tuple, map(_SHAPE, items))) if array is True else {()}
        (kind,) = set(map(_KIND, items)) if array is True else {b""}
        (size,) = set(map(len, map(_DATA, items)))
    except (KeyError, TypeError, ValueError):  # a key missing, a structured descr, a mix
        return None
    if array not in (True, False) or kind == b"O":
        return None
    dtype = _dtype(descr)
    if dtype.hasobject or size != dtype.itemsize * math.prod(shape):
        return None
    data = bytearray().join(map(_DATA, items))
    return np.frombuffer(data, dtype=dtype).reshape(len(items), *shape)


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
    """The dtype msgpack-numpy stored: a type string, or a structured descr list."""
    if isinstance(descr, list):
        return np.dtype([_field(field) for field in descr])
    return _named_dtype(descr)


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
