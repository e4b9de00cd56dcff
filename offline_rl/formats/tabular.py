"""Tabular rows (one row per timestep, RLlib's column layout) -> episodes or train columns.

Two equivalent paths: ``rows_to_episodes`` builds one single-step ``SingleAgentEpisode`` per
row exactly as RLlib's ``OfflinePreLearner._map_to_episodes`` does (needed by custom PreLearners
and connectors), and ``rows_to_train_columns`` produces the same train batch the default learner
pipeline would produce from those episodes, with whole-column numpy operations (the hot path).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offline_rl.columns import LEGACY_DONE, SCHEMA, Columns
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import DataFormatError
from offline_rl.formats.checks import check_column_types, observations_as_space_dtype
from offline_rl.formats.episode_rows import (
    DONES,
    as_id,
    done_flags,
    episode_from_rows,
    extra_columns,
)
from offline_rl.formats.shapes import conform_columns

#: Episode fields every tabular row must provide (``terminateds`` may come from ``dones``).
REQUIRED_FIELDS = (Columns.OBS, Columns.ACTIONS, Columns.REWARDS, Columns.NEXT_OBS)
#: Episode fields that are bookkeeping, not train columns.
_BOOKKEEPING = (Columns.EPS_ID, Columns.AGENT_ID, Columns.MODULE_ID, Columns.T, Columns.INFOS)


def resolve_schema(overrides: Mapping[str, str] | None) -> dict[str, str]:
    """The default ``SCHEMA`` with the user's ``input_read_schema`` entries applied. The legacy
    done flag may be named ``"done"`` (as RLlib's docs write it) or ``"dones"``; either is read
    as ``terminateds``, with ``truncateds=False``.

    Examples:
        >>> resolve_schema({"obs": "o_t", "done": "d_t"})["dones"]
        'd_t'
    """
    schema = dict(SCHEMA)
    for field, column in (overrides or {}).items():
        schema[DONES if field == LEGACY_DONE else field] = column
    return schema


def missing_columns(column_names: Iterable[str], schema: Mapping[str, str]) -> list[str]:
    """Data columns the schema needs but the data lacks (``terminateds`` or ``dones``)."""
    present = set(column_names)
    missing = [schema[field] for field in REQUIRED_FIELDS if schema[field] not in present]
    if schema[Columns.TERMINATEDS] not in present and schema[DONES] not in present:
        missing.append(schema[Columns.TERMINATEDS])
    return missing


def _check_columns(column_names: Iterable[str], schema: Mapping[str, str], where: str) -> None:
    missing = missing_columns(column_names, schema)
    if missing:
        raise DataFormatError(
            f"{where} has no column(s) {missing} (columns: {sorted(column_names)}). Rename the "
            "columns or map them with config.offline_data(input_read_schema={field: column})."
        )


def _check_rows(rows: Mapping[str, np.ndarray], schema: Mapping[str, str],
                spaces: tuple[gym.Space | None, gym.Space | None],
                where: str) -> dict[str, np.ndarray]:
    """The rows, their columns checked (present, typed) and their per-row shapes conformed."""
    _check_columns(rows, schema, where)
    check_row_types(rows, schema, where)
    return conform_row_shapes(rows, schema, spaces, where)


def conform_row_shapes(rows: Mapping[str, np.ndarray], schema: Mapping[str, str],
                       spaces: tuple[gym.Space | None, gym.Space | None],
                       where: str) -> dict[str, np.ndarray]:
    """The rows with the per-row shapes of their fields (the columns ``schema`` maps, and the
    unmapped ones by their own names) checked against the (observation, action) ``spaces`` and
    squeezed by ``offline_rl.formats.shapes``' rule."""
    fields = {field: column for field, column in schema.items() if column in rows}
    fields.update({name: name for name in extra_columns(rows, schema) if name not in fields})
    conformed = conform_columns({field: rows[column] for field, column in fields.items()},
                                spaces, where)
    return {**rows, **{fields[field]: values for field, values in conformed.items()}}


def check_row_types(rows: Mapping[str, np.ndarray], schema: Mapping[str, str],
                    where: str) -> None:
    """Raises on columns of the wrong type (known by their field's name, or their own for
    unmapped columns): numbers for data, booleans for done flags, never strings."""
    fields = {field: rows[column] for field, column in schema.items() if column in rows}
    check_column_types({**fields, **{name: rows[name] for name in extra_columns(rows, schema)}},
                       where)


def train_column_names(column_names: Iterable[str], schema: Mapping[str, str]) -> list[str]:
    """The data columns a train batch is built from: mapped fields plus unmapped extras."""
    names = list(column_names)
    _check_columns(names, schema, "the data")
    bookkeeping = {schema[field] for field in _BOOKKEEPING}
    return [name for name in names if name not in bookkeeping]


class MissingValue(DataFormatError):
    """A column holds a null: as a row's value, or inside a row's array (``inside``)."""

    def __init__(self, name: str, row: int, inside: bool = False) -> None:
        super().__init__(f"column {name!r} has a missing (null) value "
                         f"{'inside the array of' if inside else 'in'} row {row}")
        self.column, self.row, self.inside = name, row, inside


def column_to_numpy(column: pa.Array | pa.ChunkedArray, name: str) -> np.ndarray:
    """One Arrow column as a numpy array: tensor extension types, fixed-size lists and lists of
    equal length become ``(rows, *shape)`` arrays; ragged rows are errors, and nulls are a
    ``MissingValue`` naming the row they are in.

    Examples:
        >>> column_to_numpy(pa.array([[1.0, 2.0], [3.0, None]], pa.list_(pa.float32(), 2)), "obs")
        Traceback (most recent call last):
        ...
        offline_rl.formats.tabular.MissingValue: column 'obs' has a missing (null) value inside ...
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise MissingValue(name, row)
    if isinstance(column.type, pa.ExtensionType):
        return column.to_numpy()
    if pa.types.is_fixed_size_list(column.type):
        values = _values_to_numpy(column, name)
        return values.reshape(len(column), column.type.list_size, *values.shape[1:])
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        lengths = column.value_lengths().to_numpy(zero_copy_only=False)
        if len(lengths) and (lengths != lengths[0]).any():
            row = int(np.flatnonzero(lengths != lengths[0])[0])
            raise DataFormatError(
                f"column {name!r} is ragged: row 0 has {lengths[0]} values but row {row} has "
                f"{lengths[row]}; every row must hold an array of the same shape"
            )
        values = _values_to_numpy(column, name)
        width = int(lengths[0]) if len(lengths) else 0
        return values.reshape(len(column), width, *values.shape[1:])
    return column.to_numpy(zero_copy_only=False)


def _values_to_numpy(column: pa.Array, name: str) -> np.ndarray:
    """A list column's values as one array; a null among them names the row it is in."""
    try:
        return column_to_numpy(column.flatten(), name)
    except MissingValue as missing:
        if pa.types.is_fixed_size_list(column.type):
            row = missing.row // column.type.list_size
        else:
            offsets = column.offsets.to_numpy()
            row = int(np.searchsorted(offsets - offsets[0], missing.row, side="right")) - 1
        raise MissingValue(name, row, inside=True) from None


def check_text_ids(table: pa.Table, schema: Mapping[str, str], where: str) -> None:
    """Raises ``DataFormatError`` naming the column and row where a text id column (``eps_id``,
    ``agent_id``, ``module_id``) holds bytes that are not UTF-8: Parquet stores text as bytes,
    and not every writer checks them.

    Examples:
        >>> ids = pa.array([b"a", b"\\xff"], pa.binary()).view(pa.string())
        >>> check_text_ids(pa.table({"eps_id": ids}), SCHEMA, "part.parquet")
        Traceback (most recent call last):
        ...
        offline_rl.errors.DataFormatError: part.parquet: column 'eps_id' holds b'\\xff' in row 1...
    """
    for field in (Columns.EPS_ID, Columns.AGENT_ID, Columns.MODULE_ID):
        name = schema.get(field, field)
        if name not in table.column_names:
            continue
        column = table.column(name)
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        try:
            column.validate(full=True)
        except pa.ArrowInvalid:
            values = column.cast(pa.large_binary()).to_pylist()
            row = next(row for row, value in enumerate(values) if not _is_utf8(value))
            raise DataFormatError(
                f"{where}: column {name!r} holds {values[row]!r:.60} in row {row}, bytes that are "
                "not UTF-8 text; ids are text or integers: re-write the column with valid text "
                "(or integer ids)") from None


def _is_utf8(value: bytes | None) -> bool:
    try:
        if value is not None:
            value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def table_to_numpy(table: pa.Table, columns: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The table's columns (all, or the named ones) as numpy arrays."""
    names = table.column_names if columns is None else list(columns)
    return {name: column_to_numpy(table.column(name), name) for name in names}


def _observations(rows: Mapping[str, np.ndarray], column: str, space: gym.Space | None,
                  where: str) -> np.ndarray:
    return observations_as_space_dtype(rows[column], space, f"{where}, column {column!r}")


def rows_to_train_columns(rows: Mapping[str, np.ndarray], schema: Mapping[str, str],
                          observation_space: gym.Space | None = None,
                          where: str = "the data",
                          action_space: gym.Space | None = None) -> dict[str, np.ndarray]:
    """Tabular rows -> the default learner pipeline's train batch, column by column.

    Equal (values and dtypes) to running ``rows_to_episodes`` through the default pipeline.
    """
    rows = _check_rows(rows, schema, (observation_space, action_space), where)
    terminateds, truncateds = done_flags(rows, schema)
    columns = {
        Columns.OBS: _observations(rows, schema[Columns.OBS], observation_space, where),
        Columns.ACTIONS: rows[schema[Columns.ACTIONS]],
        Columns.REWARDS: rows[schema[Columns.REWARDS]],
        Columns.TERMINATEDS: terminateds,
        Columns.TRUNCATEDS: truncateds,
    }
    columns.update({name: rows[name] for name in extra_columns(rows, schema)})
    columns[Columns.NEXT_OBS] = _observations(rows, schema[Columns.NEXT_OBS], observation_space,
                                              where)
    return columns


def episode_ends(table: pa.Table, rows: Mapping[str, np.ndarray],
                 schema: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """What the stream must learn of these rows to count the episodes that never end: the ids
    of the episodes without an end among them (open), and of those that end here but may have
    begun in other rows (ended: all rows from ``t=0`` to the end are not here). Episodes
    entirely within these rows are in neither list; without an ``eps_id`` column, both are
    empty.

    Examples:
        >>> table = pa.table({"eps_id": ["a", "a", "b", "c"], "t": [0, 1, 7, 0]})
        >>> flags = {"terminateds": np.array([False, True, True, False])}
        >>> episode_ends(table, flags, SCHEMA)
        (['c'], ['b'])
    """
    if schema[Columns.EPS_ID] not in table.column_names:
        return [], []
    terminateds, truncateds = done_flags(rows, schema)
    steps = {"id": table.column(schema[Columns.EPS_ID]), "done": terminateds | truncateds}
    if schema[Columns.T] in table.column_names:
        steps["t"] = table.column(schema[Columns.T])
    aggregates = [("done", "any"), ("id", "count")] + ([("t", "min"), ("t", "max")]
                                                      if "t" in steps else [])
    episodes = (_episodes_of_stretches(steps)
                or pa.table(steps).group_by("id").aggregate(aggregates).to_pydict())
    whole = ([first == 0 and last + 1 == count for first, last, count in
              zip(episodes["t_min"], episodes["t_max"], episodes["id_count"])]
             if "t" in steps else [False] * len(episodes["id"]))
    open_ids = [as_id(id_) for id_, done in zip(episodes["id"], episodes["done_any"]) if not done]
    ended_ids = [as_id(id_) for id_, done, inside in zip(episodes["id"], episodes["done_any"],
                                                         whole) if done and not inside]
    return open_ids, ended_ids


def _episodes_of_stretches(steps: dict[str, Any]) -> dict[str, list] | None:
    """``episode_ends``'s aggregates where each episode's rows lie together, as recorded: one
    ``reduceat`` per column over the stretches of equal ids (a third of the cost of Arrow's
    ``group_by`` on a PreLearner call's rows). ``None`` where an id comes back after another's
    rows, an id or ``t`` is null, or ids are neither integers nor strings (``t``: not
    integers): ``group_by`` then.

    Examples:
        >>> steps = {"id": pa.chunked_array([["a", "a", "b"]]), "done": np.array([0, 1, 0], bool)}
        >>> _episodes_of_stretches(steps)
        {'id': ['a', 'b'], 'done_any': [True, False], 'id_count': [2, 1]}
        >>> _episodes_of_stretches({**steps, "id": pa.chunked_array([["a", "b", "a"]])}) is None
        True
    """
    ids, steps_t = steps["id"], steps.get("t")
    plain_ids = (pa.types.is_integer(ids.type) or pa.types.is_string(ids.type)
                 or pa.types.is_large_string(ids.type))
    plain_t = steps_t is None or (pa.types.is_integer(steps_t.type) and not steps_t.null_count)
    if len(ids) == 0 or ids.null_count or not (plain_ids and plain_t):
        return None
    changed = pc.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1)).to_numpy()
    starts = np.flatnonzero(np.concatenate([[True], changed]))
    stretch_ids = ids.take(starts).to_pylist()
    if len(set(stretch_ids)) < len(stretch_ids):
        return None
    episodes = {"id": stretch_ids,
                "done_any": np.logical_or.reduceat(steps["done"], starts).tolist(),
                "id_count": np.diff(starts, append=len(ids)).tolist()}
    if steps_t is not None:
        t = steps_t.to_numpy()
        episodes["t_min"] = np.minimum.reduceat(t, starts).tolist()
        episodes["t_max"] = np.maximum.reduceat(t, starts).tolist()
    return episodes


def rows_to_episodes(rows: Mapping[str, np.ndarray], schema: Mapping[str, str],
                     observation_space: gym.Space | None = None,
                     action_space: gym.Space | None = None,
                     where: str = "the data") -> list[SingleAgentEpisode]:
    """One single-step ``SingleAgentEpisode`` per row (RLlib's tabular mapping): observations
    ``[obs, new_obs]``, the row's action and reward, its done flags, and every unmapped column as
    an extra model output."""
    rows = _check_rows(rows, schema, (observation_space, action_space), where)
    rows = {**rows,
            schema[Columns.OBS]: _observations(rows, schema[Columns.OBS], observation_space,
                                               where),
            schema[Columns.NEXT_OBS]: _observations(rows, schema[Columns.NEXT_OBS],
                                                    observation_space, where)}
    ids, starts = rows.get(schema[Columns.EPS_ID]), rows.get(schema[Columns.T])
    infos = rows.get(schema[Columns.INFOS])
    extras = extra_columns(rows, schema)
    return [episode_from_rows({name: values[i:i + 1] for name, values in rows.items()}, schema,
                              eps_id=None if ids is None else as_id(ids[i]),
                              t_started=None if starts is None else int(starts[i]),
                              extras=extras, infos=None if infos is None else infos[i:i + 1],
                              observation_space=observation_space, action_space=action_space)
            for i in range(len(rows[schema[Columns.ACTIONS]]))]
