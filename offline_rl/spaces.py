"""Gymnasium spaces to and from plain dicts, in RLlib's layout (``gym_space_to_dict``).

Arrays (``Box`` bounds, ``MultiDiscrete.nvec``) are stored as base64 text of the zlib-compressed
``.npy`` bytes and read back with ``allow_pickle=False``: nothing in a space dict is unpickled.
Space dicts come from data files, so reading one is bounded: an array may not decompress beyond
``MAX_ARRAY_BYTES`` nor beyond what the space's own ``shape`` needs (a few KB of zeros must not
become gigabytes), bounds must have the space's shape, and ``Tuple``/``Dict`` nest at most
``MAX_DEPTH`` deep.
A ``MultiDiscrete`` with a nonzero ``start`` also gets a ``start`` array (RLlib drops it).

Examples:
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

#: Most bytes one array of a space dict may decompress to.
MAX_ARRAY_BYTES = 64 * 1024 * 1024
#: Deepest nesting of ``Tuple``/``Dict`` spaces read.
MAX_DEPTH = 32
#: Room for the ``.npy`` header besides the array's data.
_NPY_HEADER_BYTES = 4096


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
    return None if d is None else _from_dict(d, "space", 0)


def shared_space_from_dict(d: dict | None) -> gym.Space | None:
    """``space_from_dict``, decoded once per distinct dict in this process and the space shared
    (as an env's spaces are by the episodes it plays): the episode states of a dataset repeat
    theirs, and decoding a ``Box``'s bounds took a fifth of reading a 500-step episode.

    Examples:
        >>> d = space_to_dict(gym.spaces.Box(-1.0, 1.0, (3,)))
        >>> shared_space_from_dict(d) is shared_space_from_dict(dict(d))
        True
    """
    key = _hashable(d)
    try:
        known = key in _SHARED_SPACES
    except TypeError:  # a value msgpack-numpy decoded (an array): malformed, or read anew
        return space_from_dict(d)
    if not known:
        space = space_from_dict(d)
        if len(_SHARED_SPACES) >= MAX_SHARED_SPACES:
            _SHARED_SPACES.clear()
        _SHARED_SPACES[key] = space
    return _SHARED_SPACES[key]


#: Spaces ``shared_space_from_dict`` decoded, by their dict's ``_hashable`` form.
_SHARED_SPACES: dict[Any, gym.Space | None] = {}
MAX_SHARED_SPACES = 64


def _hashable(value: Any) -> Any:
    """A space dict as nested tuples, tagged so that a list and a map never give one key."""
    if isinstance(value, dict):
        return ("map", *((key, _hashable(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("list", *map(_hashable, value))
    return value


class _SpaceError(ValueError):
    """A malformed space dict; the message starts with the path of the offending field."""


def _from_dict(d: Any, path: str, depth: int) -> gym.Space:
    if not isinstance(d, dict):
        raise _SpaceError(f"{path}: expected a space dict, got {type(d).__name__}")
    if depth > MAX_DEPTH:
        raise _SpaceError(f"{path}: spaces nested more than {MAX_DEPTH} deep; not a space an "
                          "env defines (a damaged or hostile file?)")
    name = _field(d, "space", path)
    build = _BUILDERS.get(name) if isinstance(name, str) else None
    if build is None:
        raise _SpaceError(
            f"{path}.space: unknown space type {name!r}; known: {sorted(_BUILDERS)}"
        )
    try:
        return build(d, path, depth)
    except _SpaceError:
        raise
    except (TypeError, ValueError, AssertionError) as error:
        raise _SpaceError(f"{path}: malformed {name!r} space: {error}") from None


def _box(d: dict, path: str, depth: int) -> gym.spaces.Box:
    shape = _shape(d, "shape", path)
    dtype = _dtype(d, path)
    return gym.spaces.Box(low=_decode_array(d, "low", path, shape, dtype),
                          high=_decode_array(d, "high", path, shape, dtype),
                          shape=shape, dtype=dtype)


def _discrete(d: dict, path: str, depth: int) -> gym.spaces.Discrete:
    return gym.spaces.Discrete(_field(d, "n", path), start=d.get("start", 0))


def _multi_binary(d: dict, path: str, depth: int) -> gym.spaces.MultiBinary:
    return gym.spaces.MultiBinary(_field(d, "n", path))


def _multi_discrete(d: dict, path: str, depth: int) -> gym.spaces.MultiDiscrete:
    nvec = _decode_array(d, "nvec", path)
    start = _decode_array(d, "start", path, nvec.shape) if "start" in d else None
    return gym.spaces.MultiDiscrete(nvec, dtype=_dtype(d, path), start=start)


def _tuple(d: dict, path: str, depth: int) -> gym.spaces.Tuple:
    spaces = _field(d, "spaces", path)
    if not isinstance(spaces, list):
        raise _SpaceError(f"{path}.spaces: expected a list, got {type(spaces).__name__}")
    return gym.spaces.Tuple([_from_dict(s, f"{path}.spaces[{i}]", depth + 1)
                             for i, s in enumerate(spaces)])


def _dict(d: dict, path: str, depth: int) -> gym.spaces.Dict:
    spaces = _field(d, "spaces", path)
    if not isinstance(spaces, dict):
        raise _SpaceError(f"{path}.spaces: expected a dict, got {type(spaces).__name__}")
    return gym.spaces.Dict({k: _from_dict(s, f"{path}.spaces.{k}", depth + 1)
                            for k, s in spaces.items()})


_BUILDERS: dict[str, Callable[[dict, str, int], gym.Space]] = {
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


def _shape(d: dict, key: str, path: str) -> tuple[int, ...]:
    shape = _field(d, key, path)
    if not isinstance(shape, list | tuple) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise _SpaceError(f"{path}.{key}: expected a list of sizes, got {shape!r}")
    return tuple(shape)


def _decode_array(d: dict, key: str, path: str, shape: tuple[int, ...] | None = None,
                  dtype: np.dtype | None = None) -> np.ndarray:
    """The array at ``d[key]``, decompressed to at most ``MAX_ARRAY_BYTES`` and, when the
    space's ``shape`` is known, to what an array of that shape needs; refused unless its shape
    is ``shape``."""
    text = _field(d, key, path)
    limit = MAX_ARRAY_BYTES
    if shape is not None:
        itemsize = max(8, dtype.itemsize if dtype is not None else 8)
        limit = min(limit, int(np.prod(shape, dtype=np.float64)) * itemsize + _NPY_HEADER_BYTES)
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.b64decode(text, validate=True), limit + 1)
        if len(raw) > limit:
            raise _SpaceError(
                f"{path}.{key}: decompresses to more than {limit} bytes, more than "
                + (f"a {shape} array needs" if shape is not None else "any space's bounds need")
                + " (a damaged or hostile file?)")
        array = np.load(io.BytesIO(raw), allow_pickle=False)
    except (TypeError, ValueError, binascii.Error, zlib.error, EOFError) as error:
        if isinstance(error, _SpaceError):
            raise
        raise _SpaceError(f"{path}.{key}: not a base64 zlib .npy array: {error}") from None
    if shape is not None and array.shape != shape:
        raise _SpaceError(f"{path}.{key}: an array of shape {array.shape}, but the space's "
                          f"shape is {shape}")
    return array


def normalized_action_space(space: gym.Space) -> gym.Space:
    """The space a module acts in under RLlib's ``normalize_actions``: a ``Box`` of the same
    shape with bounds [-1, 1] (float32); any other space as it is.

    Examples:
        >>> normalized_action_space(gym.spaces.Box(-2.0, 2.0, (1,), np.float32))
        Box(-1.0, 1.0, (1,), float32)
    """
    if not isinstance(space, gym.spaces.Box):
        return space
    return gym.spaces.Box(-1.0, 1.0, space.shape, np.float32)
