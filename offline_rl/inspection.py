"""Summaries of recorded datasets: format, schema, episode count and return statistics.

Runs in-process with pyarrow (no Ray): tabular Parquet is reduced with one Arrow group-by over
its ``eps_id``, ``rewards`` and done columns, episodes Parquet decodes each ``item``, and legacy
SampleBatch JSON lines are split by ``eps_id`` (fragments of one episode on several lines are
summed into one episode).

Examples:
    >>> import tempfile
    >>> from offline_rl.episodes.episode import SingleAgentEpisode
    >>> from offline_rl.recording.writer import EpisodeWriter
    >>> folder = tempfile.mkdtemp()
    >>> writer = EpisodeWriter(folder, env_name="demo", write_episodes=False)
    >>> episodes = [SingleAgentEpisode(observations=[[0.0]] * (n + 1), actions=[0] * n,
    ...                                rewards=[1.0] * n, terminated=True,
    ...                                len_lookback_buffer=0) for n in (2, 4)]
    >>> _ = writer.add(episodes); _ = writer.flush()
    >>> summary = inspect_dataset(folder)
    >>> summary["format"], summary["episodes"], summary["steps"], summary["episode_return_mean"]
    ('tabular', 2, 6, 3.0)
"""

from __future__ import annotations

import io
import json
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from offline_rl.columns import Columns
from offline_rl.compression import decompress_value
from offline_rl.data.source.input_files import (
    JSON_SUFFIXES,
    PARQUET_SUFFIXES,
    READ_METHOD_SUFFIXES,
    list_data_files,
)
from offline_rl.episodes.multi_agent_episode import MultiAgentEpisode
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.filesystems import resolve_filesystem
from offline_rl.formats.checks import check_actions, observations_outside
from offline_rl.formats.episode_input import decode_item
from offline_rl.formats.episode_rows import DONES
from offline_rl.formats.json_nesting import MAX_JSON_DEPTH, deeper_than
from offline_rl.formats.tabular import column_to_numpy
from offline_rl.statistics import episode_statistics


def dataset_files(input_: str | Sequence[str], filesystem: pafs.FileSystem | None,
                  suffixes: Sequence[str]) -> tuple[pafs.FileSystem, list[pafs.FileInfo]]:
    """The filesystem and the data files (path and size of each) of every path of ``input_``
    (globs expanded) on ``filesystem``, as ``list_data_files`` lists them; broken symlinks are
    skipped with a warning naming them. Paths on different filesystems are a ``ConfigError``.

    Examples:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> for name in ("b.parquet", "a.json", "dataset.json", ".a.parquet.tmp"):
        ...     open(os.path.join(folder, name), "w").close()
        >>> fs, files = dataset_files(folder, None, (".parquet", ".json"))
        >>> [os.path.basename(f.path) for f in files]
        ['a.json', 'b.parquet']
    """
    listing = list_data_files(input_, filesystem, suffixes)
    kinds = {type(found.filesystem).__name__ for found in listing}
    if len(kinds) > 1:
        raise ConfigError(f"the input paths are on different filesystems ({sorted(kinds)}); "
                         "inspect or convert them separately")
    skipped = [entry for found in listing for entry in found.skipped]
    if skipped:
        warnings.warn(f"skipped {len(skipped)} file(s) under {input_!r} that cannot be read: "
                      f"{'; '.join(skipped)}. Fix or remove them", stacklevel=2)
    fs = listing[0].filesystem if listing else pafs.LocalFileSystem()
    return fs, fs.get_file_info([file for found in listing for file in found.files])


def inspect_dataset(path: str, *, input_read_method: str | None = None,
                    filesystem: str | pafs.FileSystem | None = None,
                    action_space: gym.Space | None = None,
                    observation_space: gym.Space | None = None) -> dict[str, Any]:
    """Format, schema, episode count and return statistics of the dataset at ``path``.

    The format is ``"episodes"`` (Parquet with a binary ``item`` column), ``"tabular"`` (other
    Parquet: one row per timestep) or ``"sample_batch_json"`` (legacy JSON lines);
    ``input_read_method`` (``"read_parquet"`` or ``"read_json"``) picks the files to read when a
    folder holds both kinds. Returns ``path``, ``format``, ``files`` (how many data files),
    ``schema`` (column -> type), ``episodes``, ``steps``, ``incomplete_episodes`` (neither
    terminated nor truncated), ``episode_return_mean``/``_std``/``_min``/``_max`` and
    ``episode_len_mean`` (``None`` without episodes), and ``returns`` (one per episode; an
    incomplete episode counts with the return so far).
    ``actions_out_of_bounds`` counts the actions outside a ``Box`` action space (``action_space``,
    or each episode's own in the episodes format; ``None`` when there is no ``Box`` space);
    ``observations_out_of_bounds`` the timesteps whose observation lies outside a ``Box``
    observation space (the same way; compressed observations are not decoded: ``None``).
    Tabular data without an ``eps_id`` column cannot be split into episodes: its episode
    fields are ``None`` and ``returns`` is empty. Each agent's episode of a multi-agent episode
    counts as an episode.

    Examples:
        >>> summary = inspect_dataset("tests/fixtures/rllib_cartpole_sample_batch_json")
        >>> summary["format"], summary["episodes"], summary["incomplete_episodes"]
        ('sample_batch_json', 30, 0)
    """
    if input_read_method is not None and input_read_method not in READ_METHOD_SUFFIXES:
        raise ConfigError(f"input_read_method={input_read_method!r} cannot be inspected; use one "
                         f"of {sorted(READ_METHOD_SUFFIXES)} or None to tell the format from the "
                         "files")
    suffixes = READ_METHOD_SUFFIXES.get(input_read_method, PARQUET_SUFFIXES + JSON_SUFFIXES)
    fs, infos = dataset_files(path, resolve_filesystem(filesystem), suffixes)
    files = [info.path for info in infos]
    if not files:
        raise DataFormatError(f"no data files ({', '.join('*' + s for s in suffixes)}) under "
                              f"{path!r}; point the path at a recorded dataset")
    parquet = [file for file in files if not file.endswith(JSON_SUFFIXES)]
    if parquet and len(parquet) < len(files):
        raise DataFormatError(
            f"{path!r} holds {len(parquet)} Parquet and {len(files) - len(parquet)} JSON files; "
            "pass input_read_method='read_parquet' or 'read_json' to say which to inspect")
    if not parquet:
        summary = _inspect_json(files, fs, action_space, observation_space)
    else:
        schema = pq.read_schema(files[0], filesystem=fs)
        item = schema.field("item").type if "item" in schema.names else None
        if item is not None and (pa.types.is_binary(item) or pa.types.is_large_binary(item)):
            summary = _inspect_episodes(files, fs, schema, action_space, observation_space)
        else:
            summary = _inspect_tabular(files, fs, schema, action_space, observation_space)
    return {"path": path, "format": summary["format"], "files": len(files),
            "schema": summary["schema"], "episodes": summary["episodes"],
            "steps": summary["steps"], "incomplete_episodes": summary["incomplete_episodes"],
            "actions_out_of_bounds": summary["actions_out_of_bounds"],
            "observations_out_of_bounds": summary["observations_out_of_bounds"],
            **_statistics(summary), "returns": summary["returns"]}


def _out_of_bounds(actions: np.ndarray, space: gym.Space | None, where: str) -> int | None:
    """How many actions lie outside a ``Box`` action space (``None`` for other spaces)."""
    if not isinstance(space, gym.spaces.Box):
        return None
    return int(check_actions(actions.reshape(len(actions), *space.shape), space, where).sum())


def _obs_out_of_bounds(observations: np.ndarray, space: gym.Space | None) -> int | None:
    """How many observations lie outside a ``Box`` space (``None`` for other spaces)."""
    if not isinstance(space, gym.spaces.Box) or observations.dtype.kind not in "biuf":
        return None
    return int(observations_outside({Columns.OBS: observations}, space).sum())


def _add(total: int | None, count: int | None) -> int | None:
    return total if count is None else (total or 0) + count


def _inspect_tabular(files: list[str], fs: pafs.FileSystem, schema: pa.Schema,
                     action_space: gym.Space | None,
                     observation_space: gym.Space | None) -> dict[str, Any]:
    if Columns.REWARDS not in schema.names:
        raise DataFormatError(f"{files[0]} has no column 'rewards' (columns: {schema.names}); "
                              "tabular data needs one row per timestep with a 'rewards' column")
    dataset = pads.dataset(files, filesystem=fs, format="parquet", schema=schema)
    observed = isinstance(observation_space, gym.spaces.Box) and Columns.OBS in schema.names
    wanted = [name for name in (Columns.EPS_ID, Columns.ACTIONS, Columns.REWARDS,
                                Columns.TERMINATEDS, Columns.TRUNCATEDS, DONES)
              if name in schema.names] + ([Columns.OBS] if observed else [])
    table = dataset.to_table(columns=wanted)
    outside = obs_outside = None
    if Columns.ACTIONS in table.column_names:
        actions = column_to_numpy(table.column(Columns.ACTIONS), Columns.ACTIONS)
        outside = _out_of_bounds(actions, action_space, files[0])
    obs_type = schema.field(Columns.OBS).type if observed else None
    if observed and not (pa.types.is_binary(obs_type) or pa.types.is_string(obs_type)):
        observations = column_to_numpy(table.column(Columns.OBS), Columns.OBS)
        obs_outside = _obs_out_of_bounds(observations, observation_space)
    summary = {"format": "tabular", "schema": _schema_types(schema), "steps": table.num_rows,
               "actions_out_of_bounds": outside,
               "observations_out_of_bounds": obs_outside}
    if Columns.EPS_ID not in schema.names:
        return {**summary, "episodes": None, "incomplete_episodes": None, "returns": [],
                "lengths": []}
    done = pa.array(np.zeros(table.num_rows, dtype=bool))
    for name in (Columns.TERMINATEDS, Columns.TRUNCATEDS, DONES):
        if name in table.column_names:
            done = pc.or_(done, pc.fill_null(pc.cast(table.column(name), pa.bool_()), False))
    per_episode = _per_episode(table.column(Columns.EPS_ID), table.column(Columns.REWARDS), done)
    return {**summary, **per_episode}


def _per_episode(eps_ids: pa.Array | pa.ChunkedArray, rewards: pa.Array | pa.ChunkedArray,
                 done: pa.Array | pa.ChunkedArray) -> dict[str, Any]:
    """Episode count, returns, lengths and unfinished episodes of per-timestep rows, by
    eps_id."""
    table = pa.table({"eps_id": eps_ids, "rewards": pc.cast(rewards, pa.float64()),
                      "done": done})
    grouped = table.group_by("eps_id", use_threads=False).aggregate(
        [("rewards", "sum"), ("done", "any"), ("done", "count")])
    finished = pc.sum(pc.cast(grouped["done_any"], pa.int64())).as_py() or 0
    return {"episodes": grouped.num_rows, "incomplete_episodes": grouped.num_rows - finished,
            "returns": grouped["rewards_sum"].to_pylist(),
            "lengths": grouped["done_count"].to_pylist()}


def _inspect_episodes(files: list[str], fs: pafs.FileSystem, schema: pa.Schema,
                      action_space: gym.Space | None,
                      observation_space: gym.Space | None) -> dict[str, Any]:
    returns, lengths, incomplete, outside, obs_outside = [], [], 0, None, None
    for file in files:
        with fs.open_input_file(file) as stream:
            for batch in pq.ParquetFile(stream).iter_batches(columns=["item"]):
                for item in batch.column(0).to_pylist():
                    decoded = decode_item(item, f"{file} (column 'item')")
                    for episode in (decoded.agent_episodes.values()
                                    if isinstance(decoded, MultiAgentEpisode) else [decoded]):
                        returns.append(episode.get_return())
                        lengths.append(len(episode))
                        incomplete += not episode.is_done
                        outside = _add(outside, _out_of_bounds(
                            np.asarray(episode.get_actions()),
                            action_space or episode.action_space, file))
                        obs_outside = _add(obs_outside, _obs_out_of_bounds(
                            np.asarray(episode.get_observations())[:-1],
                            observation_space or episode.observation_space))
    return {"format": "episodes", "schema": _schema_types(schema), "steps": sum(lengths),
            "episodes": len(returns), "incomplete_episodes": incomplete, "returns": returns,
            "lengths": lengths, "actions_out_of_bounds": outside,
            "observations_out_of_bounds": obs_outside}


def _inspect_json(files: list[str], fs: pafs.FileSystem, action_space: gym.Space | None,
                  observation_space: gym.Space | None) -> dict[str, Any]:
    ids, rewards, done, schema, outside, obs_outside = [], [], [], {}, None, None
    for file in files:
        for line_number, row in json_lines(file, fs):
            where = f"{file}, line {line_number}"
            schema = schema or {name: _json_type(value) for name, value in row.items()}
            row_rewards = _json_field(row, Columns.REWARDS, where)
            size = len(row_rewards)
            flags = np.zeros(size, dtype=bool)
            for name in (Columns.TERMINATEDS, Columns.TRUNCATEDS, DONES):
                if row.get(name) is not None:
                    flags |= _json_field(row, name, where).astype(bool)
            row_ids = (_json_field(row, Columns.EPS_ID, where) if Columns.EPS_ID in row
                       else np.full(size, where))  # no ids: the line is one episode
            if len(row_ids) != size or len(flags) != size:
                raise DataFormatError(f"{where}: fields eps_id, rewards and the done flags have "
                                      "different lengths; each needs one value per timestep")
            if Columns.ACTIONS in row:
                outside = _add(outside, _out_of_bounds(_json_field(row, Columns.ACTIONS, where),
                                                       action_space, where))
            if Columns.OBS in row and isinstance(observation_space, gym.spaces.Box):
                obs_outside = _add(obs_outside, _obs_out_of_bounds(
                    _json_field(row, Columns.OBS, where), observation_space))
            ids.extend(str(value) for value in row_ids)
            rewards.append(row_rewards.astype(np.float64))
            done.append(flags)
    steps = sum(len(values) for values in rewards)
    per_episode = _per_episode(pa.array(ids, pa.string()),
                               pa.array(np.concatenate(rewards) if rewards else [], pa.float64()),
                               pa.array(np.concatenate(done) if done else [], pa.bool_()))
    return {"format": "sample_batch_json", "schema": schema, "steps": steps,
            "actions_out_of_bounds": outside, "observations_out_of_bounds": obs_outside,
            **per_episode}


def json_lines(file: str, filesystem: pafs.FileSystem) -> Iterator[tuple[int, dict]]:
    """The SampleBatches of a legacy JSON-lines file with their line numbers (blank lines
    skipped); a line that is not a JSON object with ``rewards`` raises ``DataFormatError``.

    Examples:
        >>> import os, tempfile
        >>> file = os.path.join(tempfile.mkdtemp(), "batches.json")
        >>> with open(file, "w") as out:
        ...     for line in ('{"type": "SampleBatch", "rewards": [1, 0.5]}', "", '{"rewards": []}'):
        ...         print(line, file=out)
        >>> lines = json_lines(file, pafs.LocalFileSystem())
        >>> [(number, len(row["rewards"])) for number, row in lines]
        [(1, 2), (3, 0)]
    """
    with filesystem.open_input_stream(file) as stream:
        for number, line in enumerate(io.TextIOWrapper(stream, encoding="utf-8"), start=1):
            if not line.strip():
                continue
            if deeper_than(line.encode("utf-8")) is not None:
                raise DataFormatError(f"{file}, line {number}: JSON nested deeper than "
                                      f"{MAX_JSON_DEPTH} levels, which no SampleBatch holds; "
                                      "the file is damaged or not data: re-write it")
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataFormatError(f"{file}, line {number}: not valid JSON ({error}); legacy "
                                      "data holds one SampleBatch JSON object per line") from None
            if not isinstance(row, dict) or Columns.REWARDS not in row:
                raise DataFormatError(
                    f"{file}, line {number}: not a SampleBatch (a JSON object with a 'rewards' "
                    "list); legacy data holds one SampleBatch per line")
            yield number, row


def _json_field(row: dict, name: str, where: str) -> np.ndarray:
    value = row[name]
    if isinstance(value, str):
        return decompress_value(value, f"{where}, field {name!r}")
    return np.asarray(value)


def _json_type(value: Any) -> str:
    try:
        return str(pa.array([value]).type)
    except (pa.ArrowException, TypeError, ValueError):
        return type(value).__name__


def _schema_types(schema: pa.Schema) -> dict[str, str]:
    return {field.name: str(field.type) for field in schema}


def _statistics(summary: dict[str, Any]) -> dict[str, float | None]:
    """The ``episode_*`` statistics (the counts are the summary's ``episodes`` and ``steps``)."""
    statistics = episode_statistics(summary["returns"], summary["lengths"])
    return {key: value for key, value in statistics.items() if key.startswith("episode_")}


def plot_returns(returns: Sequence[float], path: str, title: str) -> None:
    """Saves a histogram of the episode ``returns`` as a PNG at ``path``.

    Needs matplotlib (``pip install 'offline-rl[plot]'``).

    Examples:
        >>> import tempfile
        >>> path = f"{tempfile.mkdtemp()}/returns.png"
        >>> plot_returns([10.0, 12.5, 30.0], path, "CartPole expert")
        >>> open(path, "rb").read(4)
        b'\x89PNG'
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError("plotting returns needs matplotlib: pip install 'offline-rl[plot]'"
                          ) from error
    if not len(returns):
        raise DataFormatError(f"no episode returns to plot for {title!r}; the dataset has no "
                              "episodes")
    figure = Figure(figsize=(6, 4))
    axes = figure.subplots()
    axes.hist(returns, bins=min(50, max(10, len(returns) // 5)))
    axes.set_title(title)
    axes.set_xlabel("episode return")
    axes.set_ylabel("episodes")
    axes.yaxis.get_major_locator().set_params(integer=True)
    figure.tight_layout()
    figure.savefig(path, format="png")
