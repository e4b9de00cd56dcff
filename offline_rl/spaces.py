"""Gymnasium spaces to and from plain dicts, in RLlib's layout (``gym_space_to_dict``).

Arrays (``Box`` bounds, ``MultiDiscrete.nvec``) are stored as base64 text of the zlib-compressed
``.npy`` bytes and read back with ``allow_pickle=False``: nothing in a space dict is unpickled.
A ``MultiDiscrete`` with a nonzero ``start`` also gets a ``start`` array (RLlib drops it).

Example:
    >>> import gymnasium as gym
    >>> d = space_to_dict(gym.spaces.Discrete(3))
    >>> d
    {'space': 'discrete', 'n': 3, 'start': 0}
    >>> space_from_dict(d)
    Discrete(3)
"""

from __future__ import annotations

import base64
import binascii
import io
import zlib
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np


def space_to_dict(space: gym.Space | None) -> dict | None:
    """Serializes ``space`` into RLlib's dict layout (``None`` stays ``None``)."""
    if space is None:
        return None
    if isinstance(space, gym.spaces.Box):
        return {"space": "box", "low": _encode_array(space.low),
                "high": _encode_array(space.high), "shape": space.shape,
                "dtype": space.dtype.str}
    if isinstance(space, gym.spaces.Discrete):
        return {"space": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiBinary):
        n = np.asarray(space.n)
        return {"space": "multi-binary", "n": int(n) if n.ndim == 0 else n.tolist(),
                "dtype": space.dtype.str}
    if isinstance(space, gym.spaces.MultiDiscrete):
        d = {"space": "multi-discrete", "nvec": _encode_array(space.nvec),
             "dtype": space.dtype.str}
        if np.any(space.start):
            d["start"] = _encode_array(space.start)
        return d
    if isinstance(space, gym.spaces.Tuple):
        return {"space": "tuple", "spaces": [space_to_dict(s) for s in space.spaces]}
    if isinstance(space, gym.spaces.Dict):
        return {"space": "dict", "spaces": {k: space_to_dict(s) for k, s in space.spaces.items()}}
    raise ValueError(f"cannot serialize a {type(space).__name__} space")


def space_from_dict(d: dict | None) -> gym.Space | None:
    """Rebuilds the space that ``space_to_dict`` (or RLlib) wrote (``None`` stays ``None``).

    Raises ``ValueError`` naming the offending field when ``d`` is malformed.
    """
    return None if d is None else _from_dict(d, "space")


class _SpaceError(ValueError):
    """A malformed space dict; the message starts with the path of the offending field."""


def _from_dict(d: Any, path: str) -> gym.Space:
    if not isinstance(d, dict):
        raise _SpaceError(f"{path}: expected a space dict, got {type(d).__name__}")
    name = _field(d, "space", path)
    build = _BUILDERS.get(name) if isinstance(name, str) else None
    if build is None:
        raise _SpaceError(
            f"{path}.space: unknown space type {name!r}; known: {sorted(_BUILDERS)}"
        )
    try:
        return build(d, path)
    except _SpaceError:
        raise
    except (TypeError, ValueError, AssertionError) as error:
        raise _SpaceError(f"{path}: malformed {name!r} space: {error}") from None


def _box(d: dict, path: str) -> gym.spaces.Box:
    return gym.spaces.Box(
        low=_decode_array(d, "low", path), high=_decode_array(d, "high", path),
        shape=tuple(_field(d, "shape", path)), dtype=_dtype(d, path),
    )


def _discrete(d: dict, path: str) -> gym.spaces.Discrete:
    return gym.spaces.Discrete(_field(d, "n", path), start=d.get("start", 0))


def _multi_binary(d: dict, path: str) -> gym.spaces.MultiBinary:
    return gym.spaces.MultiBinary(_field(d, "n", path))


def _multi_discrete(d: dict, path: str) -> gym.spaces.MultiDiscrete:
    start = _decode_array(d, "start", path) if "start" in d else None
    return gym.spaces.MultiDiscrete(_decode_array(d, "nvec", path), dtype=_dtype(d, path),
                                    start=start)


def _tuple(d: dict, path: str) -> gym.spaces.Tuple:
    spaces = _field(d, "spaces", path)
    if not isinstance(spaces, list):
        raise _SpaceError(f"{path}.spaces: expected a list, got {type(spaces).__name__}")
    return gym.spaces.Tuple([_from_dict(s, f"{path}.spaces[{i}]") for i, s in enumerate(spaces)])


def _dict(d: dict, path: str) -> gym.spaces.Dict:
    spaces = _field(d, "spaces", path)
    if not isinstance(spaces, dict):
        raise _SpaceError(f"{path}.spaces: expected a dict, got {type(spaces).__name__}")
    return gym.spaces.Dict({k: _from_dict(s, f"{path}.spaces.{k}") for k, s in spaces.items()})


_BUILDERS: dict[str, Callable[[dict, str], gym.Space]] = {
    "box": _box,
    "discrete": _discrete,
    "multi-binary": _multi_binary,
    "multi-discrete": _multi_discrete,
    "tuple": _tuple,
    "dict": _dict,
}


def _field(d: dict, key: str, path: str) -> Any:
    if key not in d:
        raise _SpaceError(f"{path}.{key}: missing from the space dict")
    return d[key]


def _dtype(d: dict, path: str) -> np.dtype:
    try:
        return np.dtype(_field(d, "dtype", path))
    except TypeError as error:
        raise _SpaceError(f"{path}.dtype: {error}") from None


def _encode_array(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return base64.b64encode(zlib.compress(buffer.getvalue())).decode("ascii")


def _decode_array(d: dict, key: str, path: str) -> np.ndarray:
    text = _field(d, key, path)
    try:
        raw = zlib.decompress(base64.b64decode(text, validate=True))
        return np.load(io.BytesIO(raw), allow_pickle=False)
    except (TypeError, ValueError, binascii.Error, zlib.error, EOFError) as error:
        raise _SpaceError(f"{path}.{key}: not a base64 zlib .npy array: {error}") from None
