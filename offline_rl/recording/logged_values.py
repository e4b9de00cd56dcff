"""``ValueLayout``: each value an application logs, checked when it is logged.

``ExperienceLogger`` and ``SampleBatchBuilder`` take one step (a row) at a time and build arrays
from them only when an episode (a batch) ends, where a value of another shape or type would fail
in numpy (``setting an array element with a sequence``) after part of the data was taken. Each
value is checked as it is logged instead: numbers (``rewards``, propensities) must be real
numbers, done flags bools, and arrays (observations, actions, model outputs, columns) must keep
one shape and kind (numbers or text) under each key: the shape the space fixes (a ``Box`` or
``Discrete`` space; others are not checked), or else the first value's. ``check`` refuses a step
with a ``DataFormatError`` naming the key and the step (or row), before anything is kept; ``keep``
records the layout of a step that was taken.

Examples:
    >>> layout = ValueLayout()
    >>> layout.keep(layout.check({"obs": ARRAY}, {"obs": [0.0, 1.0]}, "row 0"))
    >>> try:
    ...     layout.check({"obs": ARRAY}, {"obs": [0.0, 1.0, 2.0]}, "row 1")
    ... except DataFormatError as error:
    ...     print(error)
    row 1: obs [0.0, 1.0, 2.0] has shape (3,), but the values logged before it have shape \
(2,); refused, nothing of it was kept
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.errors import DataFormatError
from offline_rl.formats.shapes import row_shape

#: What a key holds: one real number, one bool, a dict (or ``None``: infos), or an array of
#: numbers or text (the kind of keys ``check`` is not told of).
NUMBER, FLAG, INFO, ARRAY = "a real number", "True or False", "a dict or None", "array"
#: The layout of a key: the values' shape and kind (``"numbers"``/``"text"``).
Layout = tuple[tuple[int, ...], str]
#: numpy's kinds of numbers (bools, ints, unsigned ints, floats) and of text.
_KINDS = {"b": "numbers", "i": "numbers", "u": "numbers", "f": "numbers", "U": "text",
          "S": "text"}


class ValueLayout:
    """The layout of each key logged so far; ``spaces`` fixes a key's shape from its space
    (``Box``, ``Discrete``) and leaves keys of other spaces unchecked; ``shared`` maps a key
    to the key whose layout it shares (``{"next_obs": "obs"}``)."""

    def __init__(self, spaces: Mapping[str, gym.Space] | None = None,
                 shared: Mapping[str, str] | None = None) -> None:
        self.spaces = dict(spaces or {})
        self.shared = dict(shared or {})
        self._layouts: dict[str, Layout | None] = {}

    def check(self, kinds: Mapping[str, str], values: Mapping[str, Any],
              where: str) -> dict[str, Layout | None]:
        """The layouts of ``values`` (each key's kind in ``kinds``: ``NUMBER``, ``FLAG`` or
        ``INFO`` or ``ARRAY``, the default), or a ``DataFormatError`` naming ``where`` and the
        first key that does not fit; nothing is recorded (``keep`` does)."""
        layouts: dict[str, Layout | None] = {}
        for key, value in values.items():
            kind = kinds.get(key, ARRAY)
            if kind == NUMBER and not _is_real(value):
                raise _refused(where, key, value, "is not a real number (an int or float)")
            if kind == FLAG and not isinstance(value, bool | np.bool_):
                raise _refused(where, key, value, "is not True or False")
            if kind == INFO and not (value is None or isinstance(value, Mapping)):
                raise _refused(where, key, value, "is not a dict (or None)")
            if kind == ARRAY:
                layouts[self.shared.get(key, key)] = self._array_layout(key, value, where)
        return layouts

    def keep(self, layouts: Mapping[str, Layout | None]) -> None:
        """Records the layouts ``check`` returned for a step that was taken."""
        for key, layout in layouts.items():
            self._layouts.setdefault(key, layout)

    def _array_layout(self, name: str, value: Any, where: str) -> Layout | None:
        key = self.shared.get(name, name)
        space = self.spaces.get(key)
        if key in self.spaces and row_shape(space) is None:
            return None  # Dict, Tuple, ... spaces: their values are nested, not checked here
        if key not in self.spaces and self._layouts.get(key, ()) is None:
            return None  # not checked: its first value was no array
        try:
            array = np.asarray(value)
        except ValueError:
            raise _refused(where, name, value,
                           "is ragged (its rows have different lengths)") from None
        kind = _KINDS.get(array.dtype.kind)
        if kind is None:
            if key not in self.spaces and key not in self._layouts:
                return None  # a first value of its own kind (dicts, ...): not checked
            raise _refused(where, name, value, f"holds {array.dtype} values, not numbers or "
                           "text")
        expected = self._layouts.get(key) or (
            (row_shape(space), "numbers") if key in self.spaces else None)
        if expected is None:
            return array.shape, kind
        if array.shape != expected[0]:
            by = (f"the {type(space).__name__} space {space} needs {expected[0]}"
                  if key in self.spaces
                  else f"the values logged before it have shape {expected[0]}")
            raise _refused(where, name, value, f"has shape {array.shape}, but {by}")
        if kind != expected[1]:
            raise _refused(where, name, value, f"holds {kind}, but the values logged before it "
                           f"hold {expected[1]}")
        return expected


def _is_real(value: Any) -> bool:
    return not isinstance(value, bool | np.bool_) and np.ndim(value) == 0 and \
        np.asarray(value).dtype.kind in "iuf"


def _refused(where: str, key: str, value: Any, problem: str) -> DataFormatError:
    text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
    shown = text if len(text) <= 60 else text[:57] + "..."
    return DataFormatError(f"{where}: {key} {shown} {problem}; refused, nothing of it was kept")
