"""Tabular Parquet and legacy SampleBatch JSON recordings -> episodes Parquet.

The output holds one row per episode, its msgpack state in a binary ``item`` column: the layout
RLlib writes with ``output_write_episodes=True`` and both RLlib and offline-rl read with
``input_read_episodes=True``. Conversion runs on Ray Data: rows (or JSON fragments) are grouped
by episode id, so an episode may span files, and each group is ordered, checked and built into a
``SingleAgentEpisode``. Only complete episodes (terminated or truncated) are written; an
unfinished one is an error unless ``incomplete="drop"`` leaves it out (the last episode of a
recording stopped mid-episode, say).

Files are first written to a hidden staging folder inside ``output`` (Ray Data and pyarrow skip
names starting with ``.``) and moved to ``output/episodes-<n>.parquet`` once all are complete.

Example:
    >>> import tempfile
    >>> from offline_rl.data.episode_input import decode_episode
    >>> from offline_rl.episode import SingleAgentEpisode
    >>> from offline_rl.recording.writer import EpisodeWriter
    >>> folder = tempfile.mkdtemp()
    >>> episode = SingleAgentEpisode("a", observations=[[0.0], [1.0], [2.0]], actions=[1, 0],
    ...                              rewards=[1.0, 0.5], terminated=True, len_lookback_buffer=0)
    >>> writer = EpisodeWriter(f"{folder}/tabular", env_name="demo", write_episodes=False)
    >>> _ = writer.add([episode]); _ = writer.flush()
    >>> summary = tabular_to_episodes(f"{folder}/tabular", f"{folder}/episodes")
    >>> summary["episodes"], summary["steps"], len(summary["files"])
    (1, 2, 1)
    >>> import pyarrow.parquet as pq
    >>> item = pq.read_table(summary["files"][0]).column("item")[0].as_py()
    >>> decode_episode(item, "example")
    SingleAgentEpisode(id_='a', t_started=0, len=2, terminated=True, truncated=False, return=1.5)
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
import ray.data

from offline_rl.codec import pack_episode_state, unpack_episode_state
from offline_rl.columns import Columns
from offline_rl.compression import decompress_column
from offline_rl.data.episode_input import sample_batch_to_episodes
from offline_rl.data.input_reader import input_paths, is_uri, resolve_filesystem
from offline_rl.data.tabular import (
    DataFormatError,
    missing_columns,
    resolve_schema,
    table_to_numpy,
)
from offline_rl.episode import SingleAgentEpisode
from offline_rl.inspection import (
    JSON_SUFFIXES,
    PARQUET_SUFFIXES,
    find_data_files,
    json_lines,
    locate,
)

#: The episodes column, one msgpack episode state per row.
ITEM = "item"
#: What to do with episodes that are neither terminated nor truncated.
INCOMPLETE = ("error", "drop")
#: Parquet bytes one read call takes in: small files are read several at a time.
READ_BYTES = 64 * 1024 * 1024
#: Input bytes per partition of the group-by shuffle (at most ``DataContext.min_parallelism``
#: partitions): small inputs need few, and each costs time to set up.
PARTITION_BYTES = 128 * 1024 * 1024
#: Without ``max_rows_per_file``, small blocks are combined into files of at least this many
#: in-memory bytes (Parquet's compression makes the files smaller).
MIN_FILE_BYTES = 64 * 1024 * 1024
# Columns the tabular reader adds: source file (for messages), file number and row in the file.
_PATH, _FILE_INDEX, _ROW_INDEX = "__path", "__file_index", "__row_index"
# Columns of the per-episode table built before writing; only ``item`` is written.
_EPS_ID, _STEPS, _COMPLETE = "eps_id", "steps", "complete"
_TIME_STEP, _FRAGMENT = "t_started", "fragment"
_DONES = "dones"
_BUFFERS = ("observations", "actions", "rewards", "infos")


def tabular_to_episodes(input_: str | list[str], output: str, *,
                        schema: Mapping[str, str] | None = None,
                        compress_columns: Sequence[str] = (),
                        filesystem: str | pafs.FileSystem | None = None,
                        max_rows_per_file: int | None = None,
                        incomplete: Literal["error", "drop"] = "error") -> dict[str, Any]:
    """Converts tabular Parquet (one row per timestep, RLlib's columns) into episodes Parquet.

    Rows are grouped by ``eps_id`` across all files and ordered by ``t``; without a ``t``
    column they keep file order (files sorted by path, rows in file order), which is how RLlib
    writes them. Each episode's observations are its ``obs`` rows plus the last row's
    ``new_obs``, its done flags come from the last row (legacy ``dones`` -> terminated), and
    every column ``schema`` does not map becomes an extra model output (e.g. ``action_logp``).
    ``schema`` maps episode fields to columns like ``input_read_schema``; ``compress_columns``
    (like ``input_compress_columns``) and binary/string ``obs``/``new_obs``/``actions`` columns
    are decompressed. Gaps or duplicates in ``t``, rows whose ``new_obs`` is not the next row's
    ``obs`` and done flags before the last row are errors naming the episode and its files.

    ``output`` must be a new or empty folder, on ``filesystem`` (a pyarrow filesystem or
    ``"s3"``, ``"gcs"``, ``"abs"``) like the input. ``max_rows_per_file`` caps the episodes per
    file. Returns ``{"output", "episodes", "steps", "dropped_incomplete", "files"}``.

    Example: see the module docstring.
    """
    _check_incomplete(incomplete)
    fs, files = _input_files(input_, filesystem, PARQUET_SUFFIXES, "Parquet (*.parquet)")
    columns = resolve_schema(schema)
    _check_tabular_columns(files[0].path, fs, columns)
    target = _prepare_output(output, filesystem)
    compressed = {columns.get(name, name) for name in compress_columns}
    if columns[Columns.OBS] in compressed:
        compressed.add(columns[Columns.NEXT_OBS])
    total = sum(info.size or 0 for info in files)
    rows = ray.data.from_items(
        [{_FILE_INDEX: index, _PATH: info.path} for index, info in enumerate(files)]
    ).map_batches(_read_files, batch_size=max(1, READ_BYTES * len(files) // max(total, 1)),
                  batch_format="pyarrow", fn_kwargs={"filesystem": fs})
    episodes = rows.groupby(columns[Columns.EPS_ID], _partitions(total)).map_groups(
        _rows_to_item, batch_format="pyarrow",
        fn_kwargs={"schema": columns, "compressed": compressed, "incomplete": incomplete})
    return _write(episodes, output, target, max_rows_per_file)


def sample_batches_to_episodes(input_: str | list[str], output: str, *,
                               filesystem: str | pafs.FileSystem | None = None,
                               max_rows_per_file: int | None = None,
                               incomplete: Literal["error", "drop"] = "error") -> dict[str, Any]:
    """Converts legacy SampleBatch JSON lines (RLlib's old-stack ``JsonWriter`` output) into
    episodes Parquet.

    Each line is split into episodes by ``eps_id`` (ordered by ``t``; compressed fields are
    decoded without unpickling); fragments of one episode on several lines or files are joined
    in ``t`` order, each continuing from the last observation of the one before. Output,
    ``incomplete`` and the returned summary are as for ``tabular_to_episodes``.

    Example:
        >>> import tempfile
        >>> output = tempfile.mkdtemp()
        >>> summary = sample_batches_to_episodes(
        ...     "tests/fixtures/rllib_cartpole_sample_batch_json", output)
        >>> summary["episodes"], summary["steps"], summary["dropped_incomplete"]
        (30, 625, 0)
    """
    _check_incomplete(incomplete)
    fs, files = _input_files(input_, filesystem, JSON_SUFFIXES, "JSON (*.json, *.jsonl)")
    target = _prepare_output(output, filesystem)
    total = sum(info.size or 0 for info in files)
    fragments = ray.data.from_items([{_PATH: info.path} for info in files]).map_batches(
        _read_json_files, batch_size=max(1, READ_BYTES * len(files) // max(total, 1)),
        batch_format="pyarrow", fn_kwargs={"filesystem": fs})
    episodes = fragments.groupby(_EPS_ID, _partitions(total)).map_groups(
        _fragments_to_item, batch_format="pyarrow", fn_kwargs={"incomplete": incomplete})
    return _write(episodes, output, target, max_rows_per_file)


def minari_to_episodes(dataset_id: str, output: str, *,
                       max_rows_per_file: int | None = None) -> dict[str, Any]:
    """Converts a local Minari dataset (``minari.load_dataset(dataset_id)``) into episodes
    Parquet, written by ``EpisodeWriter`` under ``output/<dataset id>/run-000000-<n>/`` ("/" in
    the id becomes "_"), with its observation and action spaces. Needs
    ``pip install minari``; only array observations are supported. Returns the same summary as
    ``tabular_to_episodes``.

    Example (skipped by doctest: minari is optional and the dataset must be downloaded):
        >>> minari_to_episodes("D4RL/door/human-v2", "data/door-human")  # doctest: +SKIP
    """
    try:
        import minari
    except ImportError as error:
        raise ImportError("converting Minari datasets needs minari: pip install minari"
                          ) from error
    from offline_rl.recording.writer import EpisodeWriter

    target = _prepare_output(output, None)
    dataset = minari.load_dataset(dataset_id)
    writer = EpisodeWriter(output, env_name=dataset_id, max_rows_per_file=max_rows_per_file)
    files, episodes, steps = [], 0, 0
    for data in dataset.iterate_episodes():
        if not isinstance(data.observations, np.ndarray):
            raise DataFormatError(
                f"Minari dataset {dataset_id!r}, episode {data.id}: observations are a "
                f"{type(data.observations).__name__}; only array observations can be converted")
        episode = SingleAgentEpisode(
            f"{dataset_id}/{data.id}",
            observations=list(data.observations), observation_space=dataset.observation_space,
            actions=list(data.actions), action_space=dataset.action_space,
            rewards=list(data.rewards), terminated=bool(data.terminations[-1]),
            truncated=bool(data.truncations[-1]), len_lookback_buffer=0)
        files += writer.add([episode])
        episodes, steps = episodes + 1, steps + len(episode)
    files += writer.flush()
    return {"output": output, "episodes": episodes, "steps": steps, "dropped_incomplete": 0,
            "files": [_shown(target, file, output) for file in files]}


# ------------------------------------------------------------------------------- inputs, output
def _check_incomplete(incomplete: str) -> None:
    if incomplete not in INCOMPLETE:
        raise ValueError(f"incomplete={incomplete!r} is not supported; use 'error' (refuse "
                         "unfinished episodes) or 'drop' (leave them out)")


def _input_files(input_: str | list[str], filesystem: str | pafs.FileSystem | None,
                 suffixes: Sequence[str], kind: str
                 ) -> tuple[pafs.FileSystem, list[pafs.FileInfo]]:
    """The filesystem and the sorted data files of every input path (globs expanded)."""
    resolved = resolve_filesystem(filesystem)
    located = [locate(path, resolved) for path in input_paths(input_, resolved)]
    kinds = {type(fs).__name__ for fs, _ in located}
    if len(kinds) > 1:
        raise ValueError(f"the input paths are on different filesystems ({sorted(kinds)}); "
                         "convert them separately")
    files = [file for fs, path in located for file in find_data_files(path, fs, suffixes)]
    if not files:
        raise DataFormatError(f"no {kind} files under {input_!r}; point input_ at the recorded "
                              "data")
    return located[0][0], files


def _check_tabular_columns(file: str, fs: pafs.FileSystem, schema: Mapping[str, str]) -> None:
    """Fails before any Ray work when the first file lacks a column conversion needs."""
    names = pq.read_schema(file, filesystem=fs).names
    if ITEM in names and schema[Columns.OBS] not in names:
        raise DataFormatError(f"{file} already holds episodes (column 'item'); it needs no "
                              "conversion: read it with input_read_episodes=True")
    missing = missing_columns(names, schema)
    if schema[Columns.EPS_ID] not in names:
        missing.insert(0, schema[Columns.EPS_ID])
    if missing:
        raise DataFormatError(
            f"{file} has no column(s) {missing} (columns: {sorted(names)}). Rename the columns "
            "or map them with schema={field: column}; the episode id column tells the episodes "
            "apart")


def _partitions(input_bytes: int) -> int:
    limit = ray.data.DataContext.get_current().min_parallelism
    return max(1, min(limit, -(-input_bytes // PARTITION_BYTES)))


def _prepare_output(output: str, filesystem: str | pafs.FileSystem | None
                    ) -> tuple[pafs.FileSystem, str]:
    """Creates ``output`` unless it exists; refuses one that already holds data files."""
    fs, path = locate(output, filesystem)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        raise FileExistsError(f"output {output!r} is a file; name a folder to write into")
    if info.type == pafs.FileType.Directory and find_data_files(path, fs):
        raise FileExistsError(f"output {output!r} already holds data files; converting into it "
                              "would mix datasets: choose a new or empty folder")
    fs.create_dir(path, recursive=True)
    return fs, path


def _write(episodes: ray.data.Dataset, output: str, target: tuple[pafs.FileSystem, str],
           max_rows_per_file: int | None) -> dict[str, Any]:
    """Writes the complete episodes' items; returns the conversion summary."""
    fs, path = target
    try:
        episodes = episodes.materialize()
    except DataFormatError as error:  # Ray wraps it with the worker's traceback; show the cause
        cause = getattr(error, "cause", None)
        if isinstance(cause, DataFormatError):
            raise cause from None
        raise
    parts = ray.get(episodes.select_columns([_STEPS, _COMPLETE]).to_arrow_refs())
    steps = np.concatenate([np.empty(0, np.int64), *(part[_STEPS].to_numpy() for part in parts)])
    complete = np.concatenate([np.empty(0, bool), *(
        part[_COMPLETE].to_numpy(zero_copy_only=False) for part in parts)])
    staging = f"{path}/.staging-{uuid.uuid4().hex}"
    sizes = ({"min_rows_per_file": max_rows_per_file, "max_rows_per_file": max_rows_per_file}
             if max_rows_per_file else {"min_bytes_per_file": MIN_FILE_BYTES})
    files = []
    try:
        if complete.any():
            episodes.map_batches(_complete_items, batch_format="pyarrow").write_parquet(
                staging, filesystem=fs, **sizes)
            for number, info in enumerate(find_data_files(staging, fs, PARQUET_SUFFIXES)):
                files.append(f"{path}/episodes-{number:05d}.parquet")
                fs.move(info.path, files[-1])
    finally:
        if fs.get_file_info(staging).type == pafs.FileType.Directory:
            fs.delete_dir(staging)
    return {"output": output, "episodes": int(complete.sum()),
            "steps": int(steps[complete].sum()), "dropped_incomplete": int((~complete).sum()),
            "files": [_shown(target, file, output) for file in files]}


def _shown(target: tuple[pafs.FileSystem, str], file: str, output: str) -> str:
    """A written file's path, with the output's scheme when it was given as a URI."""
    return output.rstrip("/") + file[len(target[1].rstrip("/")):] if is_uri(output) else file


def _complete_items(table: pa.Table) -> pa.Table:
    return table.filter(table[_COMPLETE]).select([ITEM])


# ----------------------------------------------------------------------------------- tabular
def _read_files(batch: pa.Table, filesystem: pafs.FileSystem) -> pa.Table:
    """Reads the listed files, adding each row's file path, file number and row number."""
    tables = []
    for index, path in zip(batch[_FILE_INDEX].to_pylist(), batch[_PATH].to_pylist()):
        try:
            table = pq.read_table(path, filesystem=filesystem)
        except (OSError, pa.ArrowException) as error:
            raise DataFormatError(f"{path} is not a readable Parquet file ({error}); re-write "
                                  "it or move it out of the input") from None
        rows = table.num_rows
        tables.append(table.append_column(
            _PATH, pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), [path])
        ).append_column(_FILE_INDEX, pa.array(np.full(rows, index, np.int64))
        ).append_column(_ROW_INDEX, pa.array(np.arange(rows, dtype=np.int64))))
    return pa.concat_tables(tables, promote_options="permissive")


def _rows_to_item(group: pa.Table, schema: Mapping[str, str], compressed: set[str],
                  incomplete: str) -> pa.Table:
    """One episode's rows (any order, any files) -> its packed state, or a dropped marker."""
    eps_id = _as_id(group[schema[Columns.EPS_ID]][0].as_py())
    has_t = schema[Columns.T] in group.column_names
    group = group.sort_by([(schema[Columns.T], "ascending")] if has_t
                          else [(_FILE_INDEX, "ascending"), (_ROW_INDEX, "ascending")])
    where = _where(eps_id, group[_PATH])
    missing = missing_columns(group.column_names, schema)
    if missing:
        raise DataFormatError(f"{where}: no column(s) {missing} in its files (columns: "
                              f"{sorted(group.column_names)}); every file needs the same columns")
    rows = _episode_columns(group, schema, compressed, where)
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
    terminateds, truncateds = _done_flags(rows, schema)
    _check_done(terminateds | truncateds, where, incomplete)
    if not (terminateds[-1] or truncateds[-1]):
        return _item_row(eps_id, steps, None)
    infos = None
    if schema[Columns.INFOS] in group.column_names:
        infos = [{}, *(info if isinstance(info, dict) else {}
                       for info in group[schema[Columns.INFOS]].to_pylist())]
    mapped = set(schema.values())
    episode = SingleAgentEpisode(
        eps_id,
        observations=np.concatenate([obs, next_obs[-1:]]),
        infos=infos,
        actions=rows[schema[Columns.ACTIONS]],
        rewards=rows[schema[Columns.REWARDS]],
        terminated=bool(terminateds[-1]),
        truncated=bool(truncateds[-1]),
        extra_model_outputs={name: values for name, values in rows.items()
                             if name not in mapped},
        t_started=t_started,
        len_lookback_buffer=0,
    )
    return _item_row(eps_id, steps, episode)


def _episode_columns(group: pa.Table, schema: Mapping[str, str], compressed: set[str],
                     where: str) -> dict[str, np.ndarray]:
    """The group's data columns as numpy arrays, compressed ones decoded."""
    skipped = {schema[field] for field in (Columns.EPS_ID, Columns.AGENT_ID, Columns.MODULE_ID,
                                           Columns.T, Columns.INFOS)}
    skipped |= {_PATH, _FILE_INDEX, _ROW_INDEX}
    decoded = compressed | {
        schema[field] for field in (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS)
        if _is_bytes(group.schema.field(schema[field]).type)}
    names = [name for name in group.column_names if name not in skipped]
    try:
        rows = table_to_numpy(group, [name for name in names if name not in decoded])
    except DataFormatError as error:
        raise DataFormatError(f"{where}: {error}") from None
    for name in decoded & set(names):
        rows[name] = decompress_column(group[name].to_pylist(), name, where)
    return {name: rows[name] for name in names}


def _is_bytes(arrow_type: pa.DataType) -> bool:
    return (pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)
            or pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))


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


def _done_flags(rows: Mapping[str, np.ndarray],
                schema: Mapping[str, str]) -> tuple[np.ndarray, np.ndarray]:
    if schema[Columns.TERMINATEDS] in rows:
        terminateds = rows[schema[Columns.TERMINATEDS]].astype(bool)
        truncateds = rows.get(schema[Columns.TRUNCATEDS], np.zeros(len(terminateds)))
        return terminateds, truncateds.astype(bool)
    terminateds = rows[schema[_DONES]].astype(bool)
    return terminateds, np.zeros(len(terminateds), dtype=bool)


def _check_done(done: np.ndarray, where: str, incomplete: str) -> None:
    """Refuses done flags before the last step and, unless dropped, unfinished episodes."""
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
        "steps. offline-rl trains on complete episodes; pass incomplete='drop' to leave "
        "unfinished ones out")


def _where(eps_id: str, sources: pa.ChunkedArray) -> str:
    """How error messages name an episode: its id and (up to 3 of) the files (or file lines)
    it was read from."""
    places = sorted(set(sources.to_pylist()))
    more = f" and {len(places) - 3} more" if len(places) > 3 else ""
    return f"episode {eps_id!r} (in {'; '.join(places[:3])}{more})"


def _item_row(eps_id: str, steps: int, episode: SingleAgentEpisode | None) -> pa.Table:
    return pa.table({
        _EPS_ID: pa.array([eps_id], pa.string()),
        _STEPS: pa.array([steps], pa.int64()),
        _COMPLETE: pa.array([episode is not None]),
        ITEM: pa.array([None if episode is None else _pack(episode)], pa.binary()),
    })


def _pack(episode: SingleAgentEpisode) -> bytes:
    """The episode's msgpack state with its columns as lists, the layout RLlib itself writes
    (RLlib packs episodes before ``to_numpy``)."""
    state = episode.get_state()
    buffers = [state[key] for key in _BUFFERS] + list((state["extra_model_outputs"] or {})
                                                      .values())
    for buffer in buffers:
        buffer["data"], buffer["finalized"] = list(buffer["data"]), False
    return pack_episode_state(state)


def _as_id(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -------------------------------------------------------------------------------------- JSON
def _read_json_files(batch: pa.Table, filesystem: pafs.FileSystem) -> pa.Table:
    """The listed JSON-lines files -> one row per episode fragment: its id, first step, where
    it was read (file and line) and packed state.

    Lines are parsed one by one: Arrow's JSON reader needs each field to keep one type
    throughout a block (compressed text on one line, a list on the next fails).
    """
    fragments = []
    for path in batch[_PATH].to_pylist():
        for number, row in json_lines(path, filesystem):
            where = f"{path}, line {number}"
            fragments += [(episode, where) for episode in sample_batch_to_episodes(row, where)]
    return pa.table({
        _EPS_ID: pa.array([episode.id_ for episode, _ in fragments], pa.string()),
        _TIME_STEP: pa.array([episode.t_started for episode, _ in fragments], pa.int64()),
        _PATH: pa.array([where for _, where in fragments], pa.string()),
        _FRAGMENT: pa.array([pack_episode_state(episode.get_state()) for episode, _ in fragments],
                            pa.binary()),
    })


def _fragments_to_item(group: pa.Table, incomplete: str) -> pa.Table:
    """One episode's fragments -> the joined episode's packed state, or a dropped marker."""
    group = group.sort_by(_TIME_STEP)
    eps_id = group[_EPS_ID][0].as_py()
    where = _where(eps_id, group[_PATH])
    fragments = [SingleAgentEpisode.from_state(unpack_episode_state(data, where=where))
                 for data in group[_FRAGMENT].to_pylist()]
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
    return _item_row(eps_id, len(episode), episode if episode.is_done else None)
