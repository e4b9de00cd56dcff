"""Per-row shapes of the train columns, checked against the spaces: one rule for every format.

Each row of ``obs`` and ``new_obs`` must have the observation space's shape, each row of
``actions`` the action space's (``()`` for ``Discrete``), and each row of ``rewards``,
``terminateds``, ``truncateds`` (and legacy ``dones``), ``action_logp`` and ``action_prob`` must
be one number. **The one
exception:** where one value per row is expected (``Discrete`` actions or observations, a
``Box`` of shape ``()``, rewards, done flags), a row stored as a one-element list (per-row shape
``(1,)``, as a nested list or a tensor-extension column writes it) is read as that value: the
trailing dimension is squeezed. Every other disagreement is a ``DataFormatError`` naming the
place, the column, the shape found and the shape expected; nothing is broadcast.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> spaces = (gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(2))
    >>> columns = conform_columns({"actions": np.array([[0], [1]]), "rewards": np.ones(2)},
    ...                           spaces, "a.parquet")
    >>> columns["actions"].shape
    (2,)
    >>> try:
    ...     conform_columns({"obs": np.zeros((2, 2, 1))}, spaces, "a.parquet")
    ... except DataFormatError as error:
    ...     print(str(error)[:78])
    a.parquet: column 'obs' holds rows of shape (2, 1) (row 0: [[0.0], [0.0]]), bu
"""

from __future__ import annotations

from collections.abc import Mapping

import gymnasium as gym
import numpy as np

from offline_rl.columns import Columns
from offline_rl.errors import DataFormatError

#: Columns holding one number per row.
SCALAR_COLUMNS = (Columns.REWARDS, Columns.TERMINATEDS, Columns.TRUNCATEDS, "dones",
                  Columns.ACTION_LOGP, Columns.ACTION_PROB)
#: Columns whose rows have the observation space's shape.
OBSERVATION_COLUMNS = (Columns.OBS, Columns.NEXT_OBS)


def row_shape(space: gym.Space | None) -> tuple[int, ...] | None:
    """The per-row shape a space's values have (``()`` for ``Discrete``); ``None`` for spaces
    without one fixed shape (``Dict``, ``Tuple``) and no space: not checked."""
    if isinstance(space, gym.spaces.Discrete):
        return ()
    return None if space is None or space.shape is None else tuple(space.shape)


def conforms(found: tuple[int, ...], expected: tuple[int, ...]) -> bool:
    """Whether rows of shape ``found`` are read as rows of shape ``expected``: equal, or the one
    squeezed case (one value per row expected, a one-element list stored)."""
    return found == expected or (expected == () and found == (1,))


def conform_rows(values: np.ndarray, expected: tuple[int, ...] | None, column: str,
                 where: str, kind: str | None = None, space: gym.Space | None = None
                 ) -> np.ndarray:
    """``values`` (one row per timestep) with rows of shape ``expected`` (``None``: unchecked):
    as they are, squeezed by the module's rule, or a ``DataFormatError`` naming ``where``,
    ``column`` and the shapes, and the ``kind`` (``"observation"``, ``"action"``) of ``space``
    that fixes the expected shape (``None``: a column of one number per row)."""
    found = values.shape[1:]
    if expected is None or found == expected:
        return values
    if conforms(found, expected):
        return values[:, 0]
    example = f" (row 0: {values[0].tolist()})" if len(values) and values[0].size <= 8 else ""
    if kind is None:
        expected_by = "a column of one number per row"
        fix = "write it with one number per row (a one-element list is read as its value)"
    else:
        expected_by = f"the {kind} space {space}"
        fix = f"write it with that shape, or set config.environment({kind}_space=...)"
    raise DataFormatError(
        f"{where}: column {column!r} holds rows of shape {found}{example}, but {expected_by} "
        f"expects rows of shape {expected}; nothing is broadcast: {fix}")


def conform_columns(columns: Mapping[str, np.ndarray],
                    spaces: tuple[gym.Space | None, gym.Space | None],
                    where: str) -> dict[str, np.ndarray]:
    """``columns`` (keyed by field: ``obs``, ``new_obs``, ``actions``, ``SCALAR_COLUMNS``;
    others pass unchanged) with their per-row shapes checked against ``spaces``
    (observation, action) and squeezed by the module's rule."""
    observation_space, action_space = spaces
    conformed = dict(columns)
    for column, values in columns.items():
        if column in OBSERVATION_COLUMNS:
            kind, space = "observation", observation_space
        elif column == Columns.ACTIONS:
            kind, space = "action", action_space
        elif column in SCALAR_COLUMNS:
            kind, space = None, None
        else:
            continue
        expected = () if kind is None else row_shape(space)
        conformed[column] = conform_rows(np.asarray(values), expected, column, where, kind,
                                         space)
    return conformed
