"""``InfiniteLookbackBuffer``: one per-timestep column of an episode, with a lookback prefix."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.spaces import shared_space_from_dict, space_to_dict

Indices = int | list[int] | slice | None


class InfiniteLookbackBuffer:
    """A list (or, once finalized, a numpy array) of per-timestep items whose first ``lookback``
    items are history from before the episode chunk started (RLlib semantics).

    Indices are relative to the first item after the lookback. Negative indices count from the
    end (``-1`` is the last item), or, with ``neg_index_as_lookback=True``, back into the lookback
    (``-1`` is the item just before index 0). Out-of-range positions raise ``IndexError`` unless
    a ``fill`` value is given; ranges (slices) are silently clipped without one.

    Examples:
        >>> buffer = InfiniteLookbackBuffer([10, 11, 12, 13, 14], lookback=2)
        >>> len(buffer), buffer.get(), buffer.get(-1), buffer.get(-1, neg_index_as_lookback=True)
        (3, [12, 13, 14], 14, 11)
        >>> buffer.get(slice(-4, 1), neg_index_as_lookback=True, fill=0)
        [np.int64(0), np.int64(0), 10, 11, 12]
        >>> buffer.finalize()
        >>> buffer.get(slice(1, 5), fill=-1)
        array([13, 14, -1, -1])
    """

    __slots__ = ("data", "finalized", "lookback", "space")

    def __init__(self, data: list | np.ndarray | None = None, lookback: int = 0,
                 space: gym.Space | None = None):
        self.data = [] if data is None else data
        self.lookback = min(lookback, len(self.data))
        self.finalized = not isinstance(self.data, list)
        self.space = space

    def __eq__(self, other: object) -> bool:
        """Whether ``other`` is a buffer with equal data (the same types, shapes and dtypes),
        lookback, finalized state and space, as RLlib compares buffers.

        Examples:
            >>> InfiniteLookbackBuffer([1, 2, 3], lookback=1) == InfiniteLookbackBuffer(
            ...     [1, 2, 3], lookback=1)
            True
            >>> finalized = InfiniteLookbackBuffer([1, 2, 3], lookback=1)
            >>> finalized.finalize()
            >>> finalized == InfiniteLookbackBuffer([1, 2, 3], lookback=1)
            False
        """
        if not isinstance(other, InfiniteLookbackBuffer):
            return NotImplemented
        return (self.lookback == other.lookback and self.finalized == other.finalized
                and self.space == other.space and same_data(self.data, other.data))

    __hash__ = None  # mutable

    def __len__(self) -> int:
        """Number of items after the lookback."""
        return max(len(self.data) - self.lookback, 0)

    def append(self, item: Any) -> None:
        """Adds ``item`` at the end."""
        if isinstance(self.data, np.ndarray):
            self.data = np.concatenate([self.data, np.asarray(item)[None]])
        else:
            self.data.append(item)

    def extend(self, items: Iterable[Any]) -> None:
        """Adds all ``items`` at the end."""
        if not isinstance(self.data, np.ndarray):
            self.data.extend(items)
            return
        items = np.asarray(items)
        if len(items):
            self.data = np.concatenate([self.data, items])

    def concat(self, other: InfiniteLookbackBuffer) -> None:
        """Adds ``other``'s items (not its lookback) at the end."""
        self.extend(other.get())

    def pop(self, index: int = -1) -> None:
        """Removes the item at position ``index`` of the stored data (lookback included)."""
        if isinstance(self.data, np.ndarray):
            self.data = np.delete(self.data, index, axis=0)
        else:
            self.data.pop(index)

    def finalize(self) -> None:
        """Turns the data list into one numpy array if its items are numbers or same-shaped
        numeric arrays; lists of other objects (e.g. info dicts) stay lists."""
        if self.finalized:
            return
        self.finalized = True
        if not isinstance(self.data, list) or not self.data or isinstance(self.data[0], dict):
            return  # a list holding a dict (infos) can only be an object array
        try:
            array = np.asarray(self.data)
        except ValueError:
            return
        if not array.dtype.hasobject:
            self.data = array

    def get(self, indices: Indices = None, *, neg_index_as_lookback: bool = False,
            fill: Any = None, one_hot_discrete: bool = False) -> Any:
        """Returns the item at an int index, or a batch for a list of indices or a slice.

        Batches are lists while the data is a list, numpy arrays once finalized. With ``fill``,
        out-of-range positions get items of the stored items' shape and dtype, filled with
        ``fill`` (the raw ``fill`` for non-numeric items). ``one_hot_discrete`` turns items of a
        ``Discrete`` space into float32 one-hot vectors (fill vectors are all ``fill``).
        """
        if one_hot_discrete and self.space is None:
            raise ValueError("one_hot_discrete needs the buffer's space, but it has none")
        if indices is None:
            if not one_hot_discrete:  # every item after the lookback: the common call
                return self.data[self.lookback:]
            indices = slice(None)
        if isinstance(indices, slice):
            return self._get_range(indices, neg_index_as_lookback, fill, one_hot_discrete)
        if isinstance(indices, list):
            if not indices:
                return self._get_range(slice(0, 0), False, None, one_hot_discrete)
            items = [self._get_item(int(i), neg_index_as_lookback, fill, one_hot_discrete)
                     for i in indices]
            return np.stack(items) if isinstance(self.data, np.ndarray) else items
        return self._get_item(int(indices), neg_index_as_lookback, fill, one_hot_discrete)

    def set(self, new_data: Any, at_indices: Indices = None, *,
            neg_index_as_lookback: bool = False) -> None:
        """Overwrites the item at an int index, the items at a list of indices (``new_data`` is
        then a batch), a slice of items, or (``None``) all items after the lookback.

        The number of items never changes; a mismatch raises ``IndexError``.
        """
        if at_indices is None:
            at_indices = slice(None)
        if isinstance(at_indices, list):
            if len(at_indices) != len(new_data):
                raise IndexError(f"{len(new_data)} items given for {len(at_indices)} indices")
            for index, item in zip(at_indices, new_data):
                self.set(item, int(index), neg_index_as_lookback=neg_index_as_lookback)
        elif isinstance(at_indices, slice):
            positions = self._in_range(self._positions(at_indices, neg_index_as_lookback))
            if len(positions) != len(new_data):
                raise IndexError(
                    f"cannot set {len(new_data)} items into a range of {len(positions)} items"
                )
            target = slice(positions.start, positions.stop, positions.step)
            if isinstance(self.data, np.ndarray):
                self.data[target] = new_data
            else:
                self.data[target] = list(new_data)
        else:
            self.data[self._position(int(at_indices), neg_index_as_lookback)] = new_data

    def get_state(self) -> dict[str, Any]:
        """The buffer as RLlib stores it: ``data``, ``lookback``, ``finalized`` and ``space``."""
        return {"data": self.data, "lookback": self.lookback, "finalized": self.finalized,
                "space": space_to_dict(self.space)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> InfiniteLookbackBuffer:
        """Rebuilds a buffer from ``get_state()`` (or RLlib's) output."""
        missing = [key for key in ("data", "lookback", "finalized", "space") if key not in state]
        if missing:
            raise ValueError(f"buffer state is missing {missing}")
        data, lookback = state["data"], state["lookback"]
        if not isinstance(data, (list, np.ndarray)):
            raise ValueError(f"buffer data must be a list or array, got {type(data).__name__}")
        if isinstance(lookback, bool) or not isinstance(lookback, int | np.integer) or lookback < 0:
            raise ValueError(f"buffer lookback must be an int >= 0, got {lookback!r:.80}")
        if lookback > len(data):
            raise ValueError(f"buffer lookback {lookback} is more than the buffer's {len(data)} "
                             "items (the lookback counts items at the start of 'data')")
        buffer = cls(data, lookback=int(lookback), space=shared_space_from_dict(state["space"]))
        buffer.finalized = bool(state["finalized"])
        return buffer

    def __repr__(self) -> str:
        return (f"InfiniteLookbackBuffer({self.data[:self.lookback]!r} <- "
                f"lookback({self.lookback}) | {self.data[self.lookback:]!r})")

    def _position(self, index: int, neg_index_as_lookback: bool) -> int:
        """Position in ``self.data`` of a relative index; raises ``IndexError`` out of range."""
        position = self._unchecked_position(index, neg_index_as_lookback)
        if not 0 <= position < len(self.data):
            raise IndexError(
                f"index {index} (neg_index_as_lookback={neg_index_as_lookback}) is out of range "
                f"for a buffer of {len(self)} items after a lookback of {self.lookback}"
            )
        return position

    def _unchecked_position(self, index: int, neg_index_as_lookback: bool) -> int:
        if index >= 0 or neg_index_as_lookback:
            return self.lookback + index
        return len(self.data) + index

    def _positions(self, slice_: slice, neg_index_as_lookback: bool) -> range:
        """Positions in ``self.data`` a slice asks for, unclipped."""
        step = 1 if slice_.step is None else slice_.step
        if step < 1:
            raise ValueError(f"slice step must be positive, got {step}")
        start = (self.lookback if slice_.start is None
                 else self._unchecked_position(slice_.start, neg_index_as_lookback))
        stop = (len(self.data) if slice_.stop is None
                else self._unchecked_position(slice_.stop, neg_index_as_lookback))
        return range(start, stop, step)

    def _in_range(self, positions: range) -> range:
        """The part of ``positions`` that lies inside ``self.data``."""
        first = len(range(positions.start, min(positions.stop, 0), positions.step))
        start = positions.start + first * positions.step
        return range(start, max(start, min(positions.stop, len(self.data))), positions.step)

    def _get_item(self, index: int, neg_index_as_lookback: bool, fill: Any,
                  one_hot: bool) -> Any:
        position = self._unchecked_position(index, neg_index_as_lookback)
        if fill is not None and not 0 <= position < len(self.data):
            return self._fill_block(fill, 1, one_hot)[0]
        item = self.data[self._position(index, neg_index_as_lookback)]
        return self._one_hot(item) if one_hot else item

    def _get_range(self, slice_: slice, neg_index_as_lookback: bool, fill: Any,
                   one_hot: bool) -> Any:
        positions = self._positions(slice_, neg_index_as_lookback)
        inside = self._in_range(positions)
        chunk = self.data[inside.start:inside.stop:inside.step]
        if one_hot:
            chunk = self._one_hot(chunk)
        if fill is None or len(inside) == len(positions):
            return chunk
        left = len(range(positions.start, min(positions.stop, 0), positions.step))
        right = len(positions) - left - len(inside)
        before = self._fill_block(fill, left, one_hot)
        after = self._fill_block(fill, right, one_hot)
        if isinstance(chunk, np.ndarray):
            return np.concatenate([before, chunk, after])
        return list(before) + chunk + list(after)

    def _fill_block(self, fill: Any, count: int, one_hot: bool) -> np.ndarray | list:
        """``count`` fill items shaped like this buffer's items."""
        if one_hot and isinstance(self.space, gym.spaces.Discrete):
            return np.full((count, int(self.space.n)), fill, dtype=np.float32)
        if isinstance(self.data, np.ndarray):
            return np.full((count, *self.data.shape[1:]), fill, dtype=self.data.dtype)
        if self.data:
            reference = np.asarray(self.data[0])
            if reference.dtype.hasobject:
                return [fill] * count
            return np.full((count, *reference.shape), fill, dtype=reference.dtype)
        if self.space is not None and self.space.shape is not None:
            return np.full((count, *self.space.shape), fill, dtype=self.space.dtype)
        return [fill] * count

    def _one_hot(self, values: Any) -> Any:
        """Float32 one-hot vectors for the values of a ``Discrete`` space (others unchanged)."""
        if not isinstance(self.space, gym.spaces.Discrete):
            return values
        codes = np.asarray(values, dtype=np.int64) - int(self.space.start)
        n = int(self.space.n)
        if codes.size and (codes.min() < 0 or codes.max() >= n):
            raise ValueError(f"values {values!r} are outside the space {self.space}")
        hot = np.eye(n, dtype=np.float32)[codes]
        return list(hot) if isinstance(values, list) else hot


def same_data(first: Any, second: Any) -> bool:
    """Whether two items or batches are equal: arrays of one shape and dtype holding the same
    values, and dicts, lists and tuples of such items, item by item.

    Examples:
        >>> same_data({"a": np.zeros(2)}, {"a": np.zeros(2)}), same_data(np.zeros(2), [0, 0])
        (True, False)
    """
    if isinstance(first, np.ndarray) or isinstance(second, np.ndarray):
        return (type(first) is type(second) and first.shape == second.shape
                and first.dtype == second.dtype and bool(np.array_equal(first, second)))
    if isinstance(first, dict):
        return (isinstance(second, dict) and first.keys() == second.keys()
                and all(same_data(first[key], second[key]) for key in first))
    if isinstance(first, list | tuple):
        return (type(first) is type(second) and len(first) == len(second)
                and all(same_data(a, b) for a, b in zip(first, second)))
    return bool(first == second)


def as_lookback_buffer(data: Any, lookback: int, space: gym.Space | None = None
                       ) -> InfiniteLookbackBuffer:
    """``data`` itself when it is a buffer, else a buffer of it whose first ``lookback`` items
    are the lookback."""
    if isinstance(data, InfiniteLookbackBuffer):
        return data
    return InfiniteLookbackBuffer(data, lookback=lookback, space=space)
