"""``EpisodeWriter``: complete episodes -> Parquet (or JSON) files that offline-rl and RLlib read.

Files go to ``<output>/<env-name>/run-<runner:06d>-<write:05d>/<run id>-part-<n:05d>.<ext>``,
one folder per flush, named as RLlib's ``OfflineSingleAgentEnvRunner`` names them (writes
counted from 1); the run id in the files' names (``output_folder.new_run_id``: start time and a
random suffix) keeps a second recording into the same folder from replacing the first one's
files. After each
flush the writer lists the files it wrote, with their sizes and hashes, in its manifest,
``<output>/.offline-rl/<run id>-<runner>.json`` (see ``offline_rl.recording.manifests``).
Each file is written in the output's hidden staging folder and moved into place when complete
(``offline_rl.recording.staging``), so an interrupted recording never leaves a file that reads
as whole but holds part of the data.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from offline_rl.codec import pack_episode_state, pack_multi_agent_episode_state
from offline_rl.columns import EPISODE_AGENTS, Columns
from offline_rl.compression import pack_rllib
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.multi_agent_episode import MultiAgentEpisode
from offline_rl.episodes.transitions import Transitions
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.filesystems import absolute_path, filesystem_path
from offline_rl.recording.manifests import RunManifest
from offline_rl.recording.output_folder import new_run_id
from offline_rl.recording.staging import StagedFile
from offline_rl.settings.offline_data import WRITE_METHODS


class EpisodeWriter:
    """Buffers complete episodes and writes them out in RLlib's layouts.

    ``write_episodes=True`` writes one row per episode, an msgpack state in the ``item`` column
    (RLlib's ``output_write_episodes=True``; a multi-agent episode's agents are listed in an
    ``agent_ids`` column beside it); ``False`` writes one row per timestep with RLlib's
    columns (``eps_id``, ``t``, ``obs``, ``actions``, ``rewards``, ``new_obs``, ``terminateds``,
    ``truncateds``, extra model outputs such as ``action_logp``; ``infos`` unless all empty),
    with ``compress_columns`` packed as RLlib packs them (``offline_rl.compression.pack_rllib``:
    base64 text of an LZ4-framed pickle of the array, read back without unpickling). Episodes
    are written as RLlib writes them, uncompressed, their columns as lists. A file is cut
    after ``max_rows_per_file`` rows or about ``max_file_size`` bytes.

    Examples:
        >>> import tempfile
        >>> from offline_rl import SingleAgentEpisode
        >>> episode = SingleAgentEpisode(observations=[[0.0], [1.0]], actions=[1],
        ...                              rewards=[1.0], terminated=True, len_lookback_buffer=0)
        >>> writer = EpisodeWriter(tempfile.mkdtemp(), env_name="demo", write_episodes=False,
        ...                        run_id="20261126-064512-a1b2c3")  # default: a new one
        >>> writer.add([episode])
        []
        >>> [path.rsplit("/", 2)[-2:] for path in writer.flush()]
        [['run-000000-00001', '20261126-064512-a1b2c3-part-00000.parquet']]
    """

    def __init__(self, output: str, *, env_name: str, runner_index: int = 0,
                 run_id: str | None = None,
                 write_episodes: bool = True, max_rows_per_file: int | None = None,
                 max_file_size: int = 64 * 1024 * 1024, compress_columns: Sequence[str] = (),
                 write_method: str = "write_parquet",
                 write_method_kwargs: dict[str, Any] | None = None,
                 filesystem: pafs.FileSystem | None = None):
        if write_method not in WRITE_METHODS:
            raise ConfigError(f"output_write_method={write_method!r} is not supported; use one "
                             f"of {sorted(WRITE_METHODS)}")
        if write_episodes and write_method != "write_parquet":
            raise ConfigError("episodes (output_write_episodes=True) are written as Parquet; use "
                             "output_write_method='write_parquet' or output_write_episodes=False")
        self.filesystem, output = output_location(output, filesystem)
        self.output = output.rstrip("/")
        self.folder = f"{self.output}/{_folder_name(env_name)}"
        self.runner_index = runner_index
        self.run_id = run_id or new_run_id()
        self.files_written: list[str] = []
        self.manifest = RunManifest(self.filesystem, self.output,
                                    f"{self.run_id}-{self.runner_index:06d}")
        self.write_episodes = write_episodes
        self.max_rows_per_file = max_rows_per_file
        self.max_file_size = max_file_size
        self.compress_columns = set(compress_columns)
        if Columns.OBS in self.compress_columns:
            self.compress_columns.add(Columns.NEXT_OBS)
        self.format = WRITE_METHODS[write_method]
        self.write_kwargs = dict(write_method_kwargs or {})
        self._episodes: list[SingleAgentEpisode | MultiAgentEpisode] = []
        #: Whether the episodes written are multi-agent ones (``None``: none written yet).
        self._multi_agent: bool | None = None
        self._buffered_rows = 0
        self._buffered_bytes = 0
        #: Flushes written (the next folder is numbered one more).
        self._writes = 0
        self.rows_written = 0

    def add(self, episodes: Iterable[SingleAgentEpisode | MultiAgentEpisode]) -> list[str]:
        """Buffers complete episodes (an unfinished one is an error); writes them out once a
        file's worth (``max_rows_per_file`` rows or ``max_file_size`` bytes) is buffered.
        A ``MultiAgentEpisode`` is written whole in the episodes format (its state in ``item``,
        its agents listed in ``agent_ids``; one writer writes episodes of one kind), else as
        its agents' rows, each naming its agent and module. Returns the paths written, if
        any."""
        for episode in episodes:
            if not episode.is_done:
                raise DataFormatError(f"episode {episode.id_} is not done; only complete "
                                      "episodes are recorded")
            multi_agent = isinstance(episode, MultiAgentEpisode)
            if multi_agent and not self.write_episodes:
                self._buffer(episode.agent_episodes.values())
                continue
            if self.write_episodes and self._multi_agent not in (None, multi_agent):
                raise DataFormatError(
                    f"episode {episode.id_} is {'' if multi_agent else 'not '}a multi-agent "
                    "episode, unlike the episodes this writer wrote before; write each kind "
                    "to an output of its own")
            self._multi_agent = multi_agent
            self._buffer([episode])
        full = self._buffered_bytes >= self.max_file_size or (
            self.max_rows_per_file is not None and self._buffered_rows >= self.max_rows_per_file)
        return self.flush() if full else []

    @property
    def buffered_bytes(self) -> int:
        """About how many bytes the episodes buffered (not written yet) hold."""
        return self._buffered_bytes

    def _buffer(self, episodes: Iterable[SingleAgentEpisode | MultiAgentEpisode]) -> None:
        for episode in episodes:
            self._episodes.append(episode)
            self._buffered_rows += 1 if self.write_episodes else len(episode)
            self._buffered_bytes += _approximate_bytes(episode)

    def flush(self) -> list[str]:
        """Writes every buffered episode into a new ``run-...`` folder; returns the file paths.
        When a write fails (``OSError``: a full disk), the files of this flush are deleted and
        the episodes stay buffered."""
        if not self._episodes:
            return []
        table = (_episodes_table(self._episodes) if self.write_episodes
                 else _tabular_table(self._episodes, self.compress_columns))
        folder = f"{self.folder}/run-{self.runner_index:06d}-{self._writes + 1:05d}"
        paths: list[str] = []
        try:
            for number, part in enumerate(self._parts(table)):
                paths.append(self._write_atomically(
                    part, f"{folder}/{self.run_id}-part-{number:05d}.{self.format}"))
            written = [path[len(self.output) + 1:] for path in paths]
            self.manifest.add(written)
        except OSError:  # a full disk: no file of this flush is left to read as data
            for path in paths:
                with contextlib.suppress(OSError):
                    self.filesystem.delete_file(path)
            raise
        self._writes += 1
        self.rows_written += table.num_rows
        self.files_written += written
        self._episodes, self._buffered_rows, self._buffered_bytes = [], 0, 0
        return paths

    def _parts(self, table: pa.Table) -> list[pa.Table]:
        bytes_per_row = max(1, table.nbytes // max(table.num_rows, 1))
        rows = max(1, self.max_file_size // bytes_per_row)
        if self.max_rows_per_file:
            rows = min(rows, self.max_rows_per_file)
        return [table.slice(start, rows) for start in range(0, table.num_rows, rows)]

    def _write_atomically(self, table: pa.Table, path: str) -> str:
        with StagedFile(self.filesystem, self.output, path) as staged:
            if self.format == "parquet":
                pq.write_table(table, staged.stream, **self.write_kwargs)
            else:
                staged.write(_json_lines(table))
        return path


def output_location(output: str, filesystem: pafs.FileSystem | None
                    ) -> tuple[pafs.FileSystem, str]:
    """The filesystem and folder ``output`` names: a local path or a URI, or a path or URI on
    ``filesystem``. Creates the folder, so that a location that cannot be reached or written
    fails here, naming it, rather than when the first episodes are written."""
    if filesystem is None:
        filesystem, folder = pafs.FileSystem.from_uri(absolute_path(output))
    else:
        folder = filesystem_path(output, filesystem)
    try:
        filesystem.create_dir(folder, recursive=True)
    except OSError as error:
        raise ConfigError(f"cannot write output={output!r} through {type(filesystem).__name__}: "
                          f"{error}. Check the path and output_filesystem_kwargs (endpoint, "
                          "credentials, region)") from None
    return filesystem, folder


def _approximate_bytes(episode: SingleAgentEpisode | MultiAgentEpisode) -> int:
    """Uncompressed bytes of an episode's columns (what sizes a file before compression)."""
    if isinstance(episode, MultiAgentEpisode):
        return sum(map(_approximate_bytes, episode.agent_episodes.values()))
    buffers = (episode.observations, episode.actions, episode.rewards,
               *episode.extra_model_outputs.values())
    return sum(np.asarray(buffer.data).nbytes for buffer in buffers)


def _episodes_table(episodes: list[SingleAgentEpisode | MultiAgentEpisode]) -> pa.Table:
    if not isinstance(episodes[0], MultiAgentEpisode):
        items = [pack_episode_state(episode.get_state()) for episode in episodes]
        return pa.table({"item": pa.array(items, pa.binary())})
    items = [pack_multi_agent_episode_state(episode.get_state()) for episode in episodes]
    agents = [list(map(str, episode.agent_episodes)) for episode in episodes]
    return pa.table({"item": pa.array(items, pa.binary()),
                     EPISODE_AGENTS: pa.array(agents, pa.list_(pa.string()))})


def _tabular_table(episodes: list[SingleAgentEpisode], compress: set[str]) -> pa.Table:
    from ray.data.extensions import ArrowTensorArray

    transitions = Transitions(episodes)
    ids = transitions.step_ids()
    columns = {**ids, **transitions.columns}
    infos = [info for episode in episodes for info in episode.get_infos()[1:]]
    arrays: dict[str, Any] = {Columns.EPS_ID: None,
                              Columns.AGENT_ID: _id_column(episodes, "agent_id"),
                              Columns.MODULE_ID: _id_column(episodes, "module_id")}
    for name, values in columns.items():
        if name in compress:
            arrays[name] = pa.array([pack_rllib(row) for row in values], pa.string())
        elif values.ndim > 1:
            arrays[name] = ArrowTensorArray.from_numpy(values)
        else:
            arrays[name] = pa.array(values.tolist() if values.dtype == object else values)
    if any(infos):
        arrays[Columns.INFOS] = pa.array([info or None for info in infos])
    return pa.table(arrays)


def _id_column(episodes: list[SingleAgentEpisode], attribute: str) -> pa.Array:
    """Each row's ``agent_id`` or ``module_id`` (``attribute``): its episode's, as a string
    (the agents of a multi-agent episode); all null for single-agent episodes, as RLlib
    writes them."""
    values = [getattr(episode, attribute) for episode in episodes]
    if all(value is None for value in values):
        return pa.nulls(sum(len(episode) for episode in episodes))
    ids = np.array([None if value is None else str(value) for value in values], dtype=object)
    return pa.array(np.repeat(ids, [len(episode) for episode in episodes]), pa.string())


def _json_lines(table: pa.Table) -> bytes:
    buffer = io.StringIO()
    for row in table.to_pylist():
        buffer.write(json.dumps(row, default=_json_value) + "\n")
    return buffer.getvalue().encode()


def _json_value(value: Any) -> Any:
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def _folder_name(env_name: str) -> str:
    return env_name.replace("/", "_").lower()
