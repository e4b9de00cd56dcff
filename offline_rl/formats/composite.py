"""Values of ``Dict`` and ``Tuple`` spaces (nested or not) in episodes, checked against the
space: one structure per timestep, each leaf a number array of its space's shape and dtype.

Msgpack reads a tuple back as a list, and a ``Dict`` value may come as any mapping: each value
is rebuilt as the space's own structure (``dict`` in the space's key order, ``tuple``), with
every leaf an array of the leaf space's dtype. A leaf stored as a one-element list where one
value is expected is read as that value (the rule of ``offline_rl.formats.shapes``). A missing
or extra key, a wrong length, a wrong leaf shape, a leaf that is not numbers or a ``Discrete``
leaf outside its range is a ``DataFormatError`` naming the place, column, timestep and the path
inside the value.

Examples:
    >>> import gymnasium as gym
    >>> space = gym.spaces.Tuple([gym.spaces.Discrete(3), gym.spaces.Box(0, 1, (2,))])
    >>> [value] = conform_structures([[2, [0.5, 0.5]]], space, "obs", "a.parquet")
    >>> value
    (array(2), array([0.5, 0.5], dtype=float32))
    >>> try:
    ...     conform_structures([[3, [0.5, 0.5]]], space, "obs", "a.parquet")
    ... except DataFormatError as error:
    ...     print(error)
    a.parquet: column 'obs' at timestep 0, part [0]: value 3 is outside Discrete(3)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.errors import DataFormatError
from offline_rl.formats.shapes import conforms

#: The spaces whose values are structures rather than one array.
COMPOSITE_SPACES = (gym.spaces.Dict, gym.spaces.Tuple)


def is_composite(space: gym.Space | None) -> bool:
    """Whether ``space``'s values are ``Dict``/``Tuple`` structures."""
    return isinstance(space, COMPOSITE_SPACES)


def conform_structures(values: Sequence[Any], space: gym.Space, column: str,
                       where: str) -> list[Any]:
    """``values`` (one per timestep) rebuilt as ``space``'s structures, or a
    ``DataFormatError``."""
    return [_conform(value, space, _Place(where, column, t, "")) for t, value in
            enumerate(values)]


def flat_values(values: Sequence[Any], space: gym.Space) -> np.ndarray:
    """Conformed ``values`` as one float row each (gymnasium's ``flatten``), for the checks
    that read numbers (NaN and inf)."""
    return np.stack([np.asarray(gym.spaces.flatten(space, value), np.float64)
                     for value in values]) if len(values) else np.zeros((0, 0))


def leaf_spaces(space: gym.Space) -> list[gym.Space]:
    """The leaves of a ``Dict``/``Tuple`` space, in order (``Dict`` keys in the space's
    order); a leaf space alone for any other space."""
    if isinstance(space, gym.spaces.Dict):
        return [leaf for part in space.spaces.values() for leaf in leaf_spaces(part)]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for part in space.spaces for leaf in leaf_spaces(part)]
    return [space]


def leaf_width(space: gym.Space) -> int:
    """The numbers one value of the leaf ``space`` packs into (``1`` for ``Discrete``)."""
    return 1 if isinstance(space, gym.spaces.Discrete) else int(np.prod(space.shape))


def _leaves(value: Any, space: gym.Space) -> list[Any]:
    if isinstance(space, gym.spaces.Dict):
        return [leaf for key, part in space.spaces.items() for leaf in _leaves(value[key], part)]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for item, part in zip(value, space.spaces, strict=True)
                for leaf in _leaves(item, part)]
    return [value]


def pack_values(values: Sequence[Any], space: gym.Space) -> np.ndarray:
    """Conformed values of a ``Dict``/``Tuple`` space as one float32 row each: every leaf's
    numbers as they are (a ``Discrete`` leaf its index, not one-hot), in ``leaf_spaces``
    order; ``unpack_value`` reverses it. Train batches carry composite actions so.

    Examples:
        >>> space = gym.spaces.Dict(a=gym.spaces.Discrete(3), b=gym.spaces.Box(0, 1, (2,)))
        >>> row = pack_values([{"a": 2, "b": [0.5, 0.25]}], space)[0]
        >>> row.tolist(), unpack_value(row, space)
        ([2.0, 0.5, 0.25], {'a': np.int64(2), 'b': array([0.5 , 0.25], dtype=float32)})
    """
    width = sum(leaf_width(leaf) for leaf in leaf_spaces(space))
    if not len(values):
        return np.zeros((0, width), np.float32)
    return np.stack([np.concatenate([np.asarray(leaf, np.float32).reshape(-1)
                                     for leaf in _leaves(value, space)]) for value in values])


def unpack_value(row: np.ndarray, space: gym.Space) -> Any:
    """The structure of ``space`` one ``pack_values`` row holds."""
    leaves = iter(leaf_spaces(space))
    offset = 0

    def rebuild(part: gym.Space) -> Any:
        nonlocal offset
        if isinstance(part, gym.spaces.Dict):
            return {key: rebuild(child) for key, child in part.spaces.items()}
        if isinstance(part, gym.spaces.Tuple):
            return tuple(rebuild(child) for child in part.spaces)
        leaf = next(leaves)
        width = leaf_width(leaf)
        numbers = np.asarray(row[offset:offset + width])
        offset += width
        shape = () if isinstance(leaf, gym.spaces.Discrete) else leaf.shape
        value = numbers.reshape(shape)
        if leaf.dtype.kind in "iub":
            value = np.round(value)
        return value.astype(leaf.dtype)[()] if shape == () else value.astype(leaf.dtype)

    return rebuild(space)


class _Place:
    """Where a leaf is, for messages."""

    def __init__(self, where: str, column: str, timestep: int, path: str):
        self.where, self.column, self.timestep, self.path = where, column, timestep, path

    def inside(self, part: str) -> _Place:
        return _Place(self.where, self.column, self.timestep, f"{self.path}{part}")

    def error(self, problem: str) -> DataFormatError:
        part = f", part {self.path}" if self.path else ""
        return DataFormatError(f"{self.where}: column {self.column!r} at timestep "
                               f"{self.timestep}{part}: {problem}")


def _conform(value: Any, space: gym.Space, place: _Place) -> Any:
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(value, Mapping):
            raise place.error(f"expected a dict of {list(space.spaces)}, got "
                              f"{type(value).__name__}")
        if set(value) != set(space.spaces):
            raise place.error(f"keys {sorted(map(str, value))} differ from the space's "
                              f"{sorted(space.spaces)}; set config.environment("
                              "observation_space=..., action_space=...) to the data's spaces")
        return {key: _conform(value[key], part, place.inside(f"[{key!r}]"))
                for key, part in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
            raise place.error(f"expected a tuple of {len(space.spaces)} parts, got "
                              f"{type(value).__name__}")
        if len(value) != len(space.spaces):
            raise place.error(f"{len(value)} parts, but the space {space} has "
                              f"{len(space.spaces)}")
        return tuple(_conform(item, part, place.inside(f"[{i}]"))
                     for i, (item, part) in enumerate(zip(value, space.spaces, strict=True)))
    return _leaf(value, space, place)


def _leaf(value: Any, space: gym.Space, place: _Place) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise place.error(f"holds {array.dtype} values, but {space} expects numbers")
    expected = () if isinstance(space, gym.spaces.Discrete) else tuple(space.shape)
    if not conforms(array.shape, expected):
        raise place.error(f"has shape {array.shape}, but {space} expects {expected}; nothing "
                          "is broadcast")
    array = array.reshape(expected)
    if isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete):
        low = np.asarray(space.start)
        high = low + (space.n if isinstance(space, gym.spaces.Discrete) else space.nvec)
        if array.dtype.kind == "f" and not np.array_equal(array, np.round(array)):
            raise place.error(f"value {array.tolist()} is not whole, but {space} holds integers")
        if ((array < low) | (array >= high)).any():
            raise place.error(f"value {array.tolist()} is outside {space}")
    return array.astype(space.dtype, copy=False)
