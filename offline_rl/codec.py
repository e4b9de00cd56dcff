"""Episode states to and from the msgpack bytes RLlib stores in the episodes ``item`` column.

Packing is exactly RLlib's (``msgpack`` with ``msgpack_numpy.encode``), in the layout RLlib's
recordings have: every column buffer un-finalized, its data a list of per-step items (RLlib packs
episodes before ``to_numpy``, and its ``from_state`` cannot measure a finalized list of infos).
Unpacking decodes msgpack-numpy's array, numpy-scalar and complex maps with our own hook, which
builds arrays from raw bytes and refuses object arrays: msgpack-numpy would unpickle those,
running whatever code the file carries.

Examples:
    >>> import numpy as np
    >>> buffer = {"data": np.arange(3, dtype=np.float32), "lookback": 0, "finalized": True,
    ...           "space": None}
    >>> state = unpack_episode_state(pack_episode_state({"rewards": buffer, "t": 3}))
    >>> state["rewards"]["data"], state["rewards"]["finalized"], state["t"]
    ([np.float32(0.0), np.float32(1.0), np.float32(2.0)], False, 3)
"""

from __future__ import annotations

import functools
from typing import Any

import msgpack
import msgpack_numpy
import numpy as np

#: The episode state's column buffers (besides ``extra_model_outputs``, a dict of them).
BUFFER_FIELDS = ("observations", "actions", "rewards", "infos")


def pack_episode_state(state: dict) -> bytes:
    """Packs an episode state dict the way RLlib writes it, buffers as lists (the caller's
    state is not changed)."""
    state = dict(state)
    for field in BUFFER_FIELDS:
        if isinstance(state.get(field), dict):
            state[field] = _as_list_buffer(state[field])
    if state.get("extra_model_outputs"):
        state["extra_model_outputs"] = {key: _as_list_buffer(buffer) for key, buffer
                                        in state["extra_model_outputs"].items()}
    return msgpack.packb(state, default=msgpack_numpy.encode)


def _as_list_buffer(buffer: dict) -> dict:
    return {**buffer, "data": list(buffer["data"]), "finalized": False}


def unpack_episode_state(data: bytes, *, where: str = "") -> dict:
    """Unpacks bytes written by ``pack_episode_state`` (or RLlib) into the state dict.

    Raises ``ValueError``, prefixed with ``where`` (e.g. the file name), when the bytes are not
    a msgpack map or hold a pickled object array, which is refused and never unpickled.
    """
    prefix = f"{where}: " if where else ""
    try:
        state = msgpack.unpackb(data, object_hook=_decode_numpy, raw=False,
                                strict_map_key=False)
    except _RefusedPayload as error:
        raise ValueError(f"{prefix}{error}") from None
    except msgpack.exceptions.StackError:
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


def _decode_numpy(obj: dict) -> Any:
    """msgpack ``object_hook``: msgpack-numpy maps to numpy values, other maps unchanged."""
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
    if b"complex" in obj:
        return complex(_text(obj[b"data"]))
    return obj


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
