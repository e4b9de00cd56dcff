"""Assembling one episode from its rows or fragments, checked, into a packed ``item`` row.

Used by the converters (``offline_rl.recording.convert``) as Ray Data group functions: each gets
all rows (tabular) or fragments (legacy JSON) of one episode id, in any order and from any
files, and returns a one-row table: the episode id, its steps, whether it is complete and its
msgpack state in ``item`` (the layout RLlib writes with ``output_write_episodes=True``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from offline_rl.codec import pack_episode_state, unpack_episode_state
from offline_rl.columns import Columns
from offline_rl.compression import decompress_column, looks_compressed
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import DataFormatError
from offline_rl.formats.episode_rows import as_id, done_flags, episode_from_rows, extra_columns
from offline_rl.formats.tabular import check_row_types, missing_columns, table_to_numpy

#: The episodes column, one msgpack episode state per row.
ITEM = "item"
#: Columns the tabular reader adds: source file (for messages), file number and row in the file.
SOURCE, FILE_INDEX, ROW_INDEX = "__path", "__file_index", "__row_index"
#: Columns of the per-episode table built before writing; only ``item`` is written.
EPISODE_ID, STEPS, COMPLETE, KEPT = "eps_id", "steps", "complete", "kept"
#: Columns of a legacy-JSON fragment row: its first step and packed state.
T_STARTED, FRAGMENT = "t_started", "fragment"


def rows_to_item(group: pa.Table, schema: Mapping[str, str], compressed: set[str],
                  incomplete: str) -> pa.Table:
    """One episode's rows (any order, any files) -> its packed state, or a dropped marker."""
    eps_id = as_id(group[schema[Columns.EPS_ID]][0].as_py())
    has_t = schema[Columns.T] in group.column_names
    group = group.sort_by([(schema[Columns.T], "ascending")] if has_t
                          else [(FILE_INDEX, "ascending"), (ROW_INDEX, "ascending")])
    where = _where(eps_id, group[SOURCE])
    missing = missing_columns(group.column_names, schema)
    if missing:
        raise DataFormatError(f"{where}: no column(s) {missing} in its files (columns: "
                              f"{sorted(group.column_names)}); every file needs the same columns")
    rows = _episode_columns(group, schema, compressed, where)
    check_row_types(rows, schema, where)
    steps = len(rows[schema[Columns.ACTIONS]])
    t_started = _check_steps(group[schema[Columns.T]].to_numpy(), where) if has_t else 0
    obs, next_obs = rows[schema[Columns.OBS]], rows[schema[Columns.NEXT_OBS]]
    broken = _first_mismatch(next_obs[:-1], obs[1:])
    if broken is not None:
        order = "by t" if has_t else "in file order, as there is no 't' column"
        raise DataFormatError(
            f"{where}: 'new_obs' of step {t_started + broken} is not the 'obs' of step "
            f"{t_started + broken + 1} (rows taken {order}); rows are missing, duplicated or "
            "out of order")
    terminateds, truncateds = done_flags(rows, schema)
    done = bool(terminateds[-1] or truncateds[-1])
    _check_done(terminateds | truncateds, where, incomplete)
    if not done and incomplete == "drop":
        return _item_row(eps_id, steps, done, None)
    infos = (group[schema[Columns.INFOS]].to_pylist()
             if schema[Columns.INFOS] in group.column_names else None)
    episode = episode_from_rows(rows, schema, eps_id=eps_id, t_started=t_started,
                                extras=extra_columns(rows, schema), infos=infos)
    return _item_row(eps_id, steps, done, episode)


def _episode_columns(group: pa.Table, schema: Mapping[str, str], compressed: set[str],
                     where: str) -> dict[str, np.ndarray]:
    """The group's data columns as numpy arrays, compressed ones decoded."""
    skipped = {schema[field] for field in (Columns.EPS_ID, Columns.AGENT_ID, Columns.MODULE_ID,
                                           Columns.T, Columns.INFOS)}
    skipped |= {SOURCE, FILE_INDEX, ROW_INDEX}
    decoded = compressed | {
        schema[field] for field in (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS)
        if looks_compressed(group[schema[field]])}
    names = [name for name in group.column_names if name not in skipped]
    try:
        rows = table_to_numpy(group, [name for name in names if name not in decoded])
    except DataFormatError as error:
        raise DataFormatError(f"{where}: {error}") from None
    for name in decoded & set(names):
        rows[name] = decompress_column(group[name].to_pylist(), name, where)
    return {name: rows[name] for name in names}


def _check_steps(t: np.ndarray, where: str) -> int:
    """Raises unless ``t`` counts up by one; returns the first step."""
    jumps = np.flatnonzero(np.diff(t) != 1)
    if jumps.size:
        before, after = t[jumps[0]], t[jumps[0] + 1]
        problem = "appears twice" if before == after else f"is followed by t={after}"
        raise DataFormatError(f"{where}: t={before} {problem}; each step of an episode needs "
                              "exactly one row (are rows missing or recorded twice?)")
    return int(t[0])


def _first_mismatch(left: np.ndarray, right: np.ndarray) -> int | None:
    """The first row where the arrays differ (NaN equals NaN), or None."""
    differ = left != right
    if np.issubdtype(left.dtype, np.floating):
        differ &= ~(np.isnan(left) & np.isnan(right))
    rows = np.flatnonzero(differ.reshape(len(left), -1 if left.size else 0).any(axis=1))
    return int(rows[0]) if rows.size else None


def _check_done(done: np.ndarray, where: str, incomplete: str) -> None:
    """Refuses done flags before the last step and, with ``incomplete='error'``, unfinished
    episodes."""
    early = np.flatnonzero(done[:-1])
    if early.size:
        raise DataFormatError(
            f"{where}: step {early[0] + 1} of {len(done)} is terminated or truncated, but more "
            "steps follow; an episode ends at its done step (is its id reused?)")
    if not done[-1] and incomplete == "error":
        raise _unfinished(where, len(done))


def _unfinished(where: str, steps: int) -> DataFormatError:
    return DataFormatError(
        f"{where} is not done: its last step is neither terminated nor truncated after {steps} "
        "steps; pass incomplete='keep' to keep it as an unfinished chunk (RLlib's episodes "
        "can be) or incomplete='drop' to leave it out")


def _where(eps_id: str, sources: pa.ChunkedArray) -> str:
    """How error messages name an episode: its id and (up to 3 of) the files (or file lines)
    it was read from."""
    places = sorted(set(sources.to_pylist()))
    more = f" and {len(places) - 3} more" if len(places) > 3 else ""
    return f"episode {eps_id!r} (in {'; '.join(places[:3])}{more})"


def _item_row(eps_id: str, steps: int, done: bool,
              episode: SingleAgentEpisode | None) -> pa.Table:
    """One episode's output row; ``episode=None``: dropped (unfinished, ``incomplete='drop'``)."""
    return pa.table({
        EPISODE_ID: pa.array([eps_id], pa.string()),
        STEPS: pa.array([steps], pa.int64()),
        COMPLETE: pa.array([done]),
        KEPT: pa.array([episode is not None]),
        ITEM: pa.array([None if episode is None else pack_episode_state(episode.get_state())],
                       pa.binary()),
    })


def fragments_to_item(group: pa.Table, incomplete: str) -> pa.Table:
    """One episode's fragments -> the joined episode's packed state, or a dropped marker."""
    group = group.sort_by(T_STARTED)
    eps_id = group[EPISODE_ID][0].as_py()
    where = _where(eps_id, group[SOURCE])
    fragments = [SingleAgentEpisode.from_state(unpack_episode_state(data, where=where))
                 for data in group[FRAGMENT].to_pylist()]
    episode = fragments[0]
    for fragment in fragments[1:]:
        try:
            episode.concat_episode(fragment)
        except ValueError as error:
            raise DataFormatError(
                f"{where}: its fragment at t={fragment.t_started} does not continue the one "
                f"before ({error}); is the episode id reused, or a fragment missing or recorded "
                "twice?") from None
    if not episode.is_done and incomplete == "error":
        raise _unfinished(where, len(episode))
    dropped = not episode.is_done and incomplete == "drop"
    return _item_row(eps_id, len(episode), episode.is_done, None if dropped else episode)
