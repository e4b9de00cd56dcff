"""Tabular Parquet and legacy SampleBatch JSON recordings -> episodes Parquet.

The output holds one row per episode, its msgpack state in a binary ``item`` column: the layout
RLlib writes with ``output_write_episodes=True`` and both RLlib and offline-rl read with
``input_read_episodes=True``. Conversion runs on Ray Data: rows (or JSON fragments) are grouped
by episode id, so an episode may span files, and each group is ordered, checked and built into a
``SingleAgentEpisode``. An unfinished episode (neither terminated nor truncated: the last one of
a recording stopped mid-episode, say) is kept by default as an unfinished chunk, as RLlib's
episodes can be, and counted; ``incomplete="drop"`` leaves it out, ``"error"`` refuses it.

Files are first written to a hidden staging folder inside ``output`` (Ray Data and pyarrow skip
names starting with ``.``) and moved to ``output/episodes-<run id>-<n>.parquet`` once all are
complete, then listed in the run's manifest (``offline_rl.recording.output_folder``). An output
folder holding other files, or an earlier conversion, is refused unless ``overwrite=True``,
which replaces only the earlier conversion's files.

Examples:
    >>> import tempfile
    >>> from offline_rl.formats.episode_input import decode_episode
    >>> from offline_rl.episodes.episode import SingleAgentEpisode
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

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import ray
import ray.data
from ray.data.context import ShuffleStrategy
from ray.data.grouped_data import GroupedData

from offline_rl.codec import pack_episode_state
from offline_rl.columns import Columns
from offline_rl.data.source.input_files import (
    JSON_SUFFIXES,
    PARQUET_SUFFIXES,
    list_data_files,
    locate,
)
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import ConfigError, DataFormatError, surface_errors
from offline_rl.filesystems import is_uri, resolve_filesystem
from offline_rl.formats.episode_input import sample_batch_to_episodes
from offline_rl.formats.tabular import check_text_ids, missing_columns, resolve_schema
from offline_rl.inspection import dataset_files, json_lines
from offline_rl.recording.episode_assembly import (
    COMPLETE,
    EPISODE_ID,
    FILE_INDEX,
    FRAGMENT,
    ITEM,
    KEPT,
    ROW_INDEX,
    SOURCE,
    STEPS,
    T_STARTED,
    fragments_to_item,
    rows_to_item,
)
from offline_rl.recording.manifests import MANIFEST_FOLDER, RunManifest
from offline_rl.recording.output_folder import (
    claim_output_folder,
    new_run_id,
    remove_earlier_output,
)

#: What to do with episodes that are neither terminated nor truncated.
INCOMPLETE = ("keep", "drop", "error")
#: Parquet bytes one read call takes in: small files are read several at a time.
READ_BYTES = 64 * 1024 * 1024
#: Input bytes per partition of the group-by shuffle (at most ``DataContext.min_parallelism``
#: partitions): small inputs need few, and each costs time to set up.
PARTITION_BYTES = 128 * 1024 * 1024
#: Without ``max_rows_per_file``, small blocks are combined into files of at least this many
#: in-memory bytes (Parquet's compression makes the files smaller).
MIN_FILE_BYTES = 64 * 1024 * 1024


@surface_errors
def tabular_to_episodes(input_: str | list[str], output: str, *,
                        schema: Mapping[str, str] | None = None,
                        compress_columns: Sequence[str] = (),
                        filesystem: str | pafs.FileSystem | None = None,
                        max_rows_per_file: int | None = None,
                        incomplete: Literal["keep", "drop", "error"] = "keep",
                        overwrite: bool = False) -> dict[str, Any]:
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

    ``output`` must be a new or empty folder (``overwrite=True``: one whose other files are
    kept, and whose earlier conversion is replaced), on ``filesystem`` (a pyarrow filesystem or
    ``"s3"``, ``"gcs"``, ``"abs"``) like the input. ``max_rows_per_file`` caps the episodes per
    file. Returns ``{"output", "episodes", "steps", "unfinished_episodes",
    "dropped_incomplete", "files"}`` (``episodes`` and ``steps`` count what was written,
    unfinished episodes included).

    Example: see the module docstring.
    """
    _check_incomplete(incomplete)
    fs, files = _input_files(input_, filesystem, PARQUET_SUFFIXES, "Parquet (*.parquet)")
    columns = resolve_schema(schema)
    _check_tabular_columns(files[0].path, fs, columns)
    target = _prepare_output(output, filesystem, overwrite)
    compressed = {columns.get(name, name) for name in compress_columns}
    if columns[Columns.OBS] in compressed:
        compressed.add(columns[Columns.NEXT_OBS])
    total = sum(info.size or 0 for info in files)
    rows = _listing(
        [{FILE_INDEX: index, SOURCE: info.path} for index, info in enumerate(files)]
    ).map_batches(_read_files, batch_size=max(1, READ_BYTES * len(files) // max(total, 1)),
                  batch_format="pyarrow", fn_kwargs={"filesystem": fs, "schema": columns})
    episodes = _group_by(rows, columns[Columns.EPS_ID], total).map_groups(
        rows_to_item, batch_format="pyarrow",
        fn_kwargs={"schema": columns, "compressed": compressed, "incomplete": incomplete})
    return _write(episodes, output, target, max_rows_per_file)


@surface_errors
def sample_batches_to_episodes(input_: str | list[str], output: str, *,
                               filesystem: str | pafs.FileSystem | None = None,
                               max_rows_per_file: int | None = None,
                               incomplete: Literal["keep", "drop", "error"] = "keep",
                               overwrite: bool = False) -> dict[str, Any]:
    """Converts legacy SampleBatch JSON lines (RLlib's old-stack ``JsonWriter`` output) into
    episodes Parquet.

    Each line is split into episodes by ``eps_id`` (ordered by ``t``; compressed fields are
    decoded without unpickling); fragments of one episode on several lines or files are joined
    in ``t`` order, each continuing from the last observation of the one before. Output,
    ``incomplete``, ``overwrite`` and the returned summary are as for ``tabular_to_episodes``.

    Examples:
        >>> import tempfile
        >>> output = tempfile.mkdtemp()
        >>> summary = sample_batches_to_episodes(
        ...     "tests/fixtures/rllib_cartpole_sample_batch_json", output)
        >>> summary["episodes"], summary["steps"], summary["dropped_incomplete"]
        (30, 625, 0)
    """
    _check_incomplete(incomplete)
    fs, files = _input_files(input_, filesystem, JSON_SUFFIXES, "JSON (*.json, *.jsonl)")
    target = _prepare_output(output, filesystem, overwrite)
    total = sum(info.size or 0 for info in files)
    fragments = _listing([{SOURCE: info.path} for info in files]).map_batches(
        _read_json_files, batch_size=max(1, READ_BYTES * len(files) // max(total, 1)),
        batch_format="pyarrow", fn_kwargs={"filesystem": fs})
    episodes = _group_by(fragments, EPISODE_ID, total).map_groups(
        fragments_to_item, batch_format="pyarrow", fn_kwargs={"incomplete": incomplete})
    return _write(episodes, output, target, max_rows_per_file)


@surface_errors
def minari_to_episodes(dataset_id: str, output: str, *, max_rows_per_file: int | None = None,
                       overwrite: bool = False) -> dict[str, Any]:
    """Converts a local Minari dataset (``minari.load_dataset(dataset_id)``) into episodes
    Parquet, written by ``EpisodeWriter`` under ``output/<dataset id>/run-000000-<n>/``
    ("/" in the id becomes "_"), with its observation and action spaces. Needs
    ``pip install minari``; only array observations are supported. ``overwrite`` and the
    returned summary are as for ``tabular_to_episodes``.

    Example (skipped by doctest: minari is optional and the dataset must be downloaded):
        >>> minari_to_episodes("D4RL/door/human-v2", "data/door-human")  # doctest: +SKIP
    """
    try:
        import minari
    except ImportError as error:
        raise ImportError("converting Minari datasets needs minari: pip install minari"
                          ) from error
    from offline_rl.recording.writer import EpisodeWriter

    target = _prepare_output(output, None, overwrite)
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
    remove_earlier_output(target[0], target[1], keep_run=f"{writer.run_id}-000000",
                          writer="convert")
    return {"output": output, "episodes": episodes, "steps": steps, "unfinished_episodes": 0,
            "dropped_incomplete": 0,
            "files": [_shown(target, file, output) for file in files]}


# ------------------------------------------------------------------------------- inputs, output
def _check_incomplete(incomplete: str) -> None:
    if incomplete not in INCOMPLETE:
        raise ConfigError(f"incomplete={incomplete!r} is not supported; use 'keep' (write "
                         "unfinished episodes as unfinished chunks), 'drop' (leave them out) or "
                         "'error' (refuse them)")


def _input_files(input_: str | list[str], filesystem: str | pafs.FileSystem | None,
                 suffixes: Sequence[str], kind: str
                 ) -> tuple[pafs.FileSystem, list[pafs.FileInfo]]:
    """The filesystem and the sorted data files of every input path, which must hold some."""
    fs, files = dataset_files(input_, resolve_filesystem(filesystem), suffixes)
    if not files:
        raise DataFormatError(f"no {kind} files under {input_!r}; point input_ at the recorded "
                              "data")
    return fs, files


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


def _listing(files: list[dict[str, Any]]) -> ray.data.Dataset:
    """The input files as a dataset to read them from, whose map functions' errors (ours,
    naming the file and row) reach the caller as they are, not in Ray Data's
    ``UserCodeException``, which keeps only their text."""
    listing = ray.data.from_items(files)
    listing.context.raise_original_map_exception = True  # the datasets made from it share it
    return listing


def _group_by(rows: ray.data.Dataset, key: str, input_bytes: int) -> GroupedData:
    """``rows`` grouped by ``key``, for ``map_groups``: in one partition per
    ``PARTITION_BYTES`` of input (at most ``DataContext.min_parallelism``) by Ray Data's
    shuffle, or, for an input that fits one partition, by a sort in Ray tasks
    (``SORT_SHUFFLE_PULL_BASED``), much the quicker on small inputs: RLlib's CartPole recording
    (200 small files) took 10.3-10.9 s to convert on 2 CPUs with Ray 2.60's default shuffle,
    and 2.1-2.6 s sorted."""
    limit = ray.data.DataContext.get_current().min_parallelism
    partitions = max(1, min(limit, -(-input_bytes // PARTITION_BYTES)))
    if partitions == 1:  # the dataset's own context, which the datasets made from it share
        rows.context.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    return rows.groupby(key, partitions)


def _prepare_output(output: str, filesystem: str | pafs.FileSystem | None, overwrite: bool
                    ) -> tuple[pafs.FileSystem, str]:
    """Creates ``output`` unless it exists; refuses (``OutputError``) a file, or a folder that
    holds files, unless ``overwrite`` (see ``output_folder.claim_output_folder``)."""
    fs, path = locate(output, resolve_filesystem(filesystem))
    claim_output_folder(output, fs, path, writer="convert", overwrite=overwrite)
    return fs, path


def _write(episodes: ray.data.Dataset, output: str, target: tuple[pafs.FileSystem, str],
           max_rows_per_file: int | None) -> dict[str, Any]:
    """Writes the complete episodes' items; returns the conversion summary."""
    fs, path = target
    episodes = episodes.materialize()
    parts = ray.get(episodes.select_columns([STEPS, COMPLETE, KEPT]).to_arrow_refs())
    steps, complete, kept = (np.concatenate([np.empty(0, dtype), *(
        part[name].to_numpy(zero_copy_only=False) for part in parts)])
        for name, dtype in ((STEPS, np.int64), (COMPLETE, bool), (KEPT, bool)))
    run_id = new_run_id()
    staging = f"{path}/{MANIFEST_FOLDER}/staging-{run_id}"
    sizes = ({"min_rows_per_file": max_rows_per_file, "max_rows_per_file": max_rows_per_file}
             if max_rows_per_file else {"min_bytes_per_file": MIN_FILE_BYTES})
    files = []
    try:
        if kept.any():
            episodes.map_batches(_kept_items, batch_format="pyarrow").write_parquet(
                staging, filesystem=fs, **sizes)
            (written,) = list_data_files(staging, fs, PARQUET_SUFFIXES)
            for number, file in enumerate(written.files):
                files.append(f"{path}/episodes-{run_id}-{number:05d}.parquet")
                fs.move(file, files[-1])
    finally:
        if fs.get_file_info(staging).type == pafs.FileType.Directory:
            fs.delete_dir(staging)
    RunManifest(fs, path, run_id).add(file[len(path.rstrip("/")) + 1:] for file in files)
    remove_earlier_output(fs, path, keep_run=run_id, writer="convert")
    return {"output": output, "episodes": int(kept.sum()), "steps": int(steps[kept].sum()),
            "unfinished_episodes": int((kept & ~complete).sum()),
            "dropped_incomplete": int((~kept).sum()),
            "files": [_shown(target, file, output) for file in files]}


def _shown(target: tuple[pafs.FileSystem, str], file: str, output: str) -> str:
    """A written file's path, with the output's scheme when it was given as a URI."""
    return output.rstrip("/") + file[len(target[1].rstrip("/")):] if is_uri(output) else file


def _kept_items(table: pa.Table) -> pa.Table:
    return table.filter(table[KEPT]).select([ITEM])


# ----------------------------------------------------------------------------------- tabular
def _read_files(batch: pa.Table, filesystem: pafs.FileSystem, schema: dict[str, str]
                ) -> pa.Table:
    """Reads the listed files, adding each row's file path, file number and row number."""
    tables = []
    for index, path in zip(batch[FILE_INDEX].to_pylist(), batch[SOURCE].to_pylist()):
        try:
            table = pq.read_table(path, filesystem=filesystem)
        except (OSError, pa.ArrowException) as error:
            raise DataFormatError(f"{path} is not a readable Parquet file ({error}); re-write "
                                  "it or move it out of the input") from None
        check_text_ids(table, schema, path)
        rows = table.num_rows
        tables.append(table.append_column(
            SOURCE, pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), [path])
        ).append_column(FILE_INDEX, pa.array(np.full(rows, index, np.int64))
        ).append_column(ROW_INDEX, pa.array(np.arange(rows, dtype=np.int64))))
    return pa.concat_tables(tables, promote_options="permissive")


# -------------------------------------------------------------------------------------- JSON
def _read_json_files(batch: pa.Table, filesystem: pafs.FileSystem) -> pa.Table:
    """The listed JSON-lines files -> one row per episode fragment: its id, first step, where
    it was read (file and line) and packed state.

    Lines are parsed one by one: Arrow's JSON reader needs each field to keep one type
    throughout a block (compressed text on one line, a list on the next fails).
    """
    fragments = []
    for path in batch[SOURCE].to_pylist():
        for number, row in json_lines(path, filesystem):
            where = f"{path}, line {number}"
            fragments += [(episode, where) for episode in sample_batch_to_episodes(row, where)]
    return pa.table({
        EPISODE_ID: pa.array([episode.id_ for episode, _ in fragments], pa.string()),
        T_STARTED: pa.array([episode.t_started for episode, _ in fragments], pa.int64()),
        SOURCE: pa.array([where for _, where in fragments], pa.string()),
        FRAGMENT: pa.array([pack_episode_state(episode.get_state()) for episode, _ in fragments],
                            pa.binary()),
    })
