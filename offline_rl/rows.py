"""Taking rows from a batch of columns, the one way every hot path does it."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def take_rows(columns: Mapping[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    """Each column's ``rows`` (integer positions, in their order), by ``np.take`` along the
    first axis, which numpy 2 does about ten times faster than indexing (``column[rows]``) for
    columns of more than one dimension, such as observations (15 us against 186 for 7,693 rows
    of 4 floats).

    Examples:
        >>> batch = take_rows({"obs": np.arange(6).reshape(3, 2), "t": np.arange(3)},
        ...                   np.array([2, 0]))
        >>> batch["obs"].tolist(), batch["t"].tolist()
        ([[4, 5], [0, 1]], [2, 0])
    """
    return {name: np.take(column, rows, axis=0) for name, column in columns.items()}
