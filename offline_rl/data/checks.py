"""Checks of data values against the spaces: action ranges, observation shapes, finiteness.

Every check works on whole columns (numpy arrays, one row per timestep) and raises
``DataFormatError`` naming where the bad value is (``where``: a file, column or episode) and how to
fix it. ``nonfinite_rows`` instead returns a mask, so callers can drop and count such rows when
configured with ``offline_data(input_nonfinite="drop")``.

Example:
    >>> import gymnasium as gym, numpy as np
    >>> try:
    ...     check_actions(np.array([0, 1, 2]), gym.spaces.Discrete(2), "file a.parquet")
    ... except DataFormatError as error:
    ...     print(str(error)[:70])
    file a.parquet: action 2 in row 2 is outside the action space Discrete

"""

from __future__ import annotations

from collections.abc import Mapping

import gymnasium as gym
import numpy as np

from offline_rl.data.tabular import DataFormatError

#: Values of ``offline_data(input_nonfinite=...)``.
NONFINITE_POLICIES = ("raise", "drop")


def check_actions(actions: np.ndarray, space: gym.Space | None, where: str) -> None:
    """Raises unless every action lies in the action space (Discrete range, Box shape/bounds)."""
    if isinstance(space, gym.spaces.Discrete):
        if actions.dtype.kind not in "iub":
            raise DataFormatError(f"{where}: actions have dtype {actions.dtype}, but the action "
                                  f"space {space} expects integers")
        outside = (actions < space.start) | (actions >= space.start + space.n)
    elif isinstance(space, gym.spaces.Box):
        if actions.shape[1:] != space.shape:
            raise DataFormatError(f"{where}: actions have per-row shape {actions.shape[1:]}, but "
                                  f"the action space expects {space.shape}")
        flat = actions.reshape(len(actions), -1)
        outside = ((flat < space.low.reshape(-1)) | (flat > space.high.reshape(-1))).any(axis=1)
    else:
        return
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise DataFormatError(
            f"{where}: action {actions[row]} in row {row} is outside the action space {space}; "
            "check the data or config.environment(action_space=...)"
        )


def check_observations(observations: np.ndarray, space: gym.Space | None, where: str) -> None:
    """Raises unless the per-row shape matches a Box space and the values are numeric."""
    if not isinstance(space, gym.spaces.Box):
        return
    if observations.shape[1:] != space.shape:
        raise DataFormatError(
            f"{where}: observations have per-row shape {observations.shape[1:]} but the "
            f"observation space expects {space.shape}; check the data or "
            "config.environment(observation_space=...)"
        )
    if observations.dtype.kind not in "biuf":
        raise DataFormatError(f"{where}: observations have dtype {observations.dtype}, but the "
                              f"observation space expects numbers ({space.dtype})")


def nonfinite_rows(columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """A boolean mask of the rows where any of the float ``columns`` holds NaN or inf."""
    mask = np.zeros(len(next(iter(columns.values()))), dtype=bool)
    for values in columns.values():
        if values.dtype.kind == "f":
            mask |= ~np.isfinite(values.reshape(len(values), -1)).all(axis=1)
    return mask


def nonfinite_error(columns: Mapping[str, np.ndarray], mask: np.ndarray,
                    where: str) -> DataFormatError:
    """The error for the first non-finite row, naming its column, row and the two remedies."""
    row = int(np.flatnonzero(mask)[0])
    column = next(name for name, values in columns.items() if values.dtype.kind == "f"
                  and not np.isfinite(values[row]).all())
    return DataFormatError(
        f"{where}: column {column!r} holds NaN or inf in row {row} ({int(mask.sum())} row(s) in "
        "all); clean the data, or drop and count such rows with "
        "config.offline_data(input_nonfinite='drop')"
    )
