"""Checks of data values against the spaces: column types, observation shapes and ranges,
actions, finiteness. One set of checks for every format (tabular, episodes, SampleBatch JSON).

Every check works on whole columns (numpy arrays, one row per timestep) and raises
``DataFormatError`` naming where the bad value is (``where``: a file, column or episode) and how to
fix it. Two findings follow a configured policy instead of always raising:

* NaN/inf in observations, actions or rewards: ``offline_data(input_nonfinite="raise" | "drop")``;
  ``nonfinite_rows`` returns the mask, so callers can drop and count such rows.
* Observations outside a ``Box`` observation space's bounds (a scaled or foreign recording):
  ``offline_data(input_obs_bounds="raise" | "drop")``, with ``observations_outside``.
* ``Box`` actions outside the space's bounds: ``offline_data(input_action_bounds="keep" | "clip"
  | "raise")``. RLlib records the *sampled* action of a Gaussian policy and clips only what the
  env sees, so its recordings of continuous-action envs hold such actions: the default keeps
  them (and counts them). ``Discrete`` actions outside the space are always an error.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> try:
    ...     check_actions(np.array([0, 1, 2]), gym.spaces.Discrete(2), "file a.parquet")
    ... except DataFormatError as error:
    ...     print(str(error)[:70])
    file a.parquet: action 2 in row 2 is outside the action space Discrete
    >>> box = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    >>> check_actions(np.array([[1.0], [2.5]]), box, "file a.parquet").tolist()
    [False, True]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import gymnasium as gym
import numpy as np

from offline_rl.columns import Columns
from offline_rl.errors import DataFormatError

#: Values of ``offline_data(input_nonfinite=...)``.
NONFINITE_POLICIES = ("raise", "drop")
#: Values of ``offline_data(input_obs_bounds=...)``.
OBS_BOUNDS_POLICIES = ("raise", "drop")
#: Values of ``offline_data(input_action_bounds=...)``.
ACTION_BOUNDS_POLICIES = ("keep", "clip", "raise")
#: Columns an algorithm may train on: each must hold numbers (or booleans).
NUMERIC_COLUMNS = (
    Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS, Columns.ACTION_LOGP,
    Columns.ACTION_PROB, Columns.ACTION_DIST_INPUTS, Columns.VF_PREDS, Columns.ADVANTAGES,
    Columns.VALUE_TARGETS, Columns.LOSS_MASK,
)
#: Done-flag columns: booleans, or integers 0 and 1.
FLAG_COLUMNS = (Columns.TERMINATEDS, Columns.TRUNCATEDS, "dones")


def check_column_types(columns: Mapping[str, np.ndarray], where: str) -> None:
    """Raises unless every known numeric column holds numbers and every done flag booleans
    (or 0/1 integers); strings are never parsed into numbers or flags."""
    for name, values in columns.items():
        if name in NUMERIC_COLUMNS and values.dtype.kind not in "biuf":
            raise _type_error(name, values, "numbers", where)
        if name in FLAG_COLUMNS:
            if values.dtype.kind not in "biu":
                raise _type_error(name, values, "booleans", where)
            if values.dtype.kind in "iu" and ((values != 0) & (values != 1)).any():
                row = int(np.flatnonzero((values != 0) & (values != 1))[0])
                raise DataFormatError(f"{where}: column {name!r} holds {values[row]!r} in row "
                                      f"{row}; done flags must be booleans (or 0 and 1)")


def _type_error(name: str, values: np.ndarray, expected: str, where: str) -> DataFormatError:
    example = f" ({values.reshape(len(values), -1)[0, 0]!r} in row 0)" if values.size else ""
    kind = f"{values.dtype} values"
    if values.dtype.kind in "US":
        kind = "strings"
    elif values.dtype.kind == "O":  # e.g. Decimal, str or dicts: name what they are
        kinds = sorted({type(value).__name__ for value in values.reshape(-1)[:1000]
                        if value is not None})
        kind = "strings" if kinds == ["str"] else f"{' and '.join(kinds) or 'null'} values"
    return DataFormatError(f"{where}: column {name!r} holds {kind}{example}, but offline-rl "
                           f"expects {expected}; convert the column when writing the data")


def observations_as_space_dtype(observations: np.ndarray, space: gym.Space | None,
                                where: str) -> np.ndarray:
    """The observations (their per-row shape already conformed to the space by
    ``offline_rl.formats.shapes``) cast to a ``Box`` space's dtype, after checking that they
    are numbers and that finite values fit the dtype (no silent overflow to inf)."""
    if not isinstance(space, gym.spaces.Box):
        return observations
    if observations.dtype.kind not in "biuf":
        raise DataFormatError(f"{where}: observations have dtype {observations.dtype}, but the "
                              f"observation space expects numbers ({space.dtype})")
    if observations.dtype == space.dtype:
        return observations
    with np.errstate(over="ignore", invalid="ignore"):
        cast = observations.astype(space.dtype)
    if space.dtype.kind == "f" and observations.dtype.kind == "f":
        overflow = np.isfinite(observations) & ~np.isfinite(cast)
        if overflow.any():
            row = int(np.flatnonzero(overflow.reshape(len(overflow), -1).any(axis=1))[0])
            value = observations[row][overflow[row]].reshape(-1)[0]
            raise DataFormatError(
                f"{where}: observation value {value:g} in row {row} is too large for the "
                f"observation space's dtype {space.dtype}; check the data (is it scaled?) or "
                "config.environment(observation_space=...)")
    return cast


def check_actions(actions: np.ndarray, space: gym.Space | None, where: str) -> np.ndarray:
    """Raises unless the actions fit the action space (``Discrete`` range and integer type,
    ``Box`` shape and numeric type); returns the mask of ``Box`` actions outside its bounds."""
    outside = np.zeros(len(actions), dtype=bool)
    if isinstance(space, gym.spaces.Discrete):
        if actions.dtype.kind not in "iub":
            raise DataFormatError(f"{where}: actions have dtype {actions.dtype}, but the action "
                                  f"space {space} expects integers")
        outside = (actions < space.start) | (actions >= space.start + space.n)
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise DataFormatError(
                f"{where}: action {actions[row]} in row {row} is outside the action space "
                f"{space}; check the data or config.environment(action_space=...)")
    elif isinstance(space, gym.spaces.Box):
        if actions.shape[1:] != space.shape:
            raise DataFormatError(f"{where}: actions have per-row shape {actions.shape[1:]}, but "
                                  f"the action space expects {space.shape}")
        if actions.dtype.kind not in "biuf":
            raise DataFormatError(f"{where}: actions have dtype {actions.dtype}, but the action "
                                  f"space {space} expects numbers")
        flat = actions.reshape(len(actions), -1)
        if flat.dtype.kind == "f" and space.dtype.kind == "f":
            with np.errstate(over="ignore", invalid="ignore"):
                overflow = np.isfinite(flat) & ~np.isfinite(flat.astype(space.dtype))
            if overflow.any():
                row = int(np.flatnonzero(overflow.any(axis=1))[0])
                raise DataFormatError(
                    f"{where}: action value {flat[row][overflow[row]][0]:g} in row {row} is too "
                    f"large for the action space's dtype {space.dtype}; check the data (is it "
                    "scaled?) or config.environment(action_space=...)")
        outside = ((flat < space.low.reshape(-1)) | (flat > space.high.reshape(-1))).any(axis=1)
    return outside


def row_number(row: int) -> str:
    """How messages name a row by its index alone: ``"row 3"``."""
    return f"row {row}"


def bound_actions(actions: np.ndarray, outside: np.ndarray, space: gym.Space, policy: str,
                  where: str, place: Callable[[int], str] = row_number) -> np.ndarray:
    """Applies ``input_action_bounds`` to the ``Box`` actions flagged ``outside``: keeps them,
    clips them to the bounds, or raises naming the first (``place(row)`` names its row)."""
    if not outside.any() or policy == "keep":
        return actions
    if policy == "clip":
        return clip_actions(actions, space)
    row = int(np.flatnonzero(outside)[0])
    raise DataFormatError(
        f"{where}: action {actions[row]} in {place(row)} is outside the action space {space} "
        f"({int(outside.sum())} row(s) in all); keep such actions (RLlib records sampled "
        "actions unclipped) with config.offline_data(input_action_bounds='keep'), or clip them "
        "with input_action_bounds='clip'")


def clip_actions(actions: np.ndarray, space: gym.spaces.Box) -> np.ndarray:
    """``Box`` actions clipped into the space's bounds (RLlib's ``clip_actions``), in their
    own dtype.

    Examples:
        >>> space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        >>> clip_actions(np.array([[-3.0], [0.5]], np.float32), space).ravel()
        array([-1. ,  0.5], dtype=float32)
    """
    return np.clip(actions, space.low, space.high).astype(actions.dtype, copy=False)


def unsquash_actions(actions: np.ndarray, space: gym.spaces.Box) -> np.ndarray:
    """``Box`` actions recorded normalized to [-1, 1] (RLlib's ``normalize_actions``), mapped
    linearly onto the space's bounds (RLlib's ``unsquash_action``, without its clipping: the
    bounds policy sees what lies outside).

    Examples:
        >>> space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
        >>> unsquash_actions(np.array([[-1.0], [0.0], [1.0]], np.float32), space).ravel()
        array([ 0.,  5., 10.], dtype=float32)
    """
    unsquashed = space.low + (actions + 1.0) * (space.high - space.low) / 2.0
    return unsquashed.astype(actions.dtype, copy=False)


def nonfinite_rows(columns: Mapping[str, np.ndarray]) -> np.ndarray:
    """A boolean mask of the rows where any of the float ``columns`` holds NaN or inf."""
    mask = np.zeros(len(next(iter(columns.values()))), dtype=bool)
    for values in columns.values():
        if values.dtype.kind == "f":
            finite = np.isfinite(values)
            if not finite.all():
                mask |= ~finite.reshape(len(values), -1).all(axis=1)
    return mask


def nonfinite_error(columns: Mapping[str, np.ndarray], mask: np.ndarray, where: str,
                    place: Callable[[int], str] = row_number) -> DataFormatError:
    """The error for the first non-finite row, naming its column, row (``place(row)``) and
    the two remedies."""
    row = int(np.flatnonzero(mask)[0])
    column = next(name for name, values in columns.items() if values.dtype.kind == "f"
                  and not np.isfinite(values[row]).all())
    return DataFormatError(
        f"{where}: column {column!r} holds NaN or inf in {place(row)} ({int(mask.sum())} row(s) in "
        "all); clean the data, or drop and count such rows with "
        "config.offline_data(input_nonfinite='drop')"
    )


def observations_outside(columns: Mapping[str, np.ndarray], space: gym.Space | None
                         ) -> np.ndarray:
    """A boolean mask of the rows where any observation column holds a value outside a ``Box``
    space's bounds (NaN is left to ``nonfinite_rows``; other spaces, and columns a connector
    reshaped, e.g. stacked frames: none).

    Examples:
        >>> box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        >>> observations_outside({"obs": np.array([[0.0, 0.5], [0.0, 3e30]])}, box).tolist()
        [False, True]
    """
    mask = np.zeros(len(next(iter(columns.values()))), dtype=bool)
    if not isinstance(space, gym.spaces.Box):
        return mask
    for values in columns.values():
        if values.shape[1:] != space.shape:
            continue
        outside = (values < space.low) | (values > space.high)
        if outside.any():
            mask |= outside.reshape(len(values), -1).any(axis=1)
    return mask


def obs_bounds_error(columns: Mapping[str, np.ndarray], mask: np.ndarray, space: gym.Space,
                     where: str, place: Callable[[int], str] = row_number
                     ) -> DataFormatError:
    """The error for the first row outside the observation space, naming column, row
    (``place(row)``) and value, and the remedies."""
    row = int(np.flatnonzero(mask)[0])
    column = next(name for name, values in columns.items()
                  if observations_outside({name: values[row:row + 1]}, space)[0])
    return DataFormatError(
        f"{where}: column {column!r} in {place(row)} holds {np.asarray(columns[column][row])!r}, "
        f"outside the observation space {space} ({int(mask.sum())} row(s) in all); a model "
        "trained on it learns nothing useful. Check the data (scaled? recorded in another env?) "
        "or config.environment(observation_space=...), or drop and count such rows with "
        "config.offline_data(input_obs_bounds='drop')")


def same_kind(stored: gym.Space, expected: gym.Space) -> bool:
    """Whether a recording's space is the configured one as far as training cares: the same
    type and shape, and for ``Discrete`` the same actions (``n`` and ``start``); ``Box`` bounds
    may differ (checked on the values instead)."""
    if type(stored) is not type(expected) or stored.shape != expected.shape:
        return False
    if isinstance(stored, gym.spaces.Discrete):
        return (stored.n, stored.start) == (expected.n, expected.start)
    return True


def check_recorded_spaces(recorded: tuple[gym.Space | None, gym.Space | None],
                          configured: tuple[gym.Space | None, gym.Space | None],
                          where: str) -> None:
    """Raises unless the (observation, action) spaces stored with an episode have the
    configured spaces' type and shape, and for ``Discrete`` spaces the same ``n`` and
    ``start`` (``None`` on either side: not checked).

    Examples:
        >>> box = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        >>> try:
        ...     check_recorded_spaces((box, gym.spaces.Discrete(7)), (box, gym.spaces.Discrete(2)),
        ...                           "a.parquet: episode 3")
        ... except DataFormatError as error:
        ...     print(str(error)[:80])
        a.parquet: episode 3 was recorded with the action space Discrete(7), but the con
    """
    for kind, stored, expected in zip(("observation", "action"), recorded, configured):
        if stored is not None and expected is not None and not same_kind(stored, expected):
            raise DataFormatError(
                f"{where} was recorded with the {kind} space {stored}, but the config's is "
                f"{expected}; was it recorded in another env? Set "
                f"config.environment({kind}_space=...) to the recording's space")
