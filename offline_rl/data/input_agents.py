"""The agents that multi-agent tabular rows name: each row's ``agent_id``, read from the
Parquet files' one column before any Ray work."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from offline_rl.columns import Columns
from offline_rl.data.data_config import DataConfig
from offline_rl.data.input_files import PARQUET_SUFFIXES, input_paths, list_data_files
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.filesystems import resolve_filesystem
from offline_rl.formats.tabular import resolve_schema


def input_agents(config: DataConfig) -> list[str]:
    """The distinct agent ids of the input's rows, sorted (read in this process, only the
    agent column of each Parquet file). Raises ``DataFormatError`` naming the file when a file
    lacks the column or a row names no agent, ``ConfigError`` for input other than tabular
    Parquet files (the multi-agent input read so far).

    Examples:
        >>> import tempfile, pyarrow.parquet as pq
        >>> from offline_rl.settings.offline_data import OfflineDataConfig
        >>> folder = tempfile.mkdtemp()
        >>> pq.write_table(pa.table({"agent_id": ["b", "a", "b"]}), f"{folder}/part.parquet")
        >>> input_agents(DataConfig(OfflineDataConfig(input_=folder)))
        ['a', 'b']
    """
    options = config.offline_data
    if (options.input_read_method != "read_parquet" or config.reads_episodes
            or config.input_creator is not None):
        raise ConfigError(
            "multi-agent training reads tabular Parquet rows (each naming its agent in "
            "agent_id) and old-stack MultiAgentBatch JSON lines so far; this config reads "
            f"{'episodes' if config.reads_episodes else options.input_read_method}. Convert "
            "the data to tabular rows, or train one module on single-agent data")
    column = resolve_schema(options.input_read_schema)[Columns.AGENT_ID]
    filesystem = resolve_filesystem(options.input_filesystem, options.input_filesystem_kwargs)
    agents: set[str] = set()
    for found in list_data_files(input_paths(options.input_, filesystem), filesystem,
                                 PARQUET_SUFFIXES):
        for file in found.files:
            dataset = pads.dataset(file, filesystem=found.filesystem, format="parquet")
            if column not in dataset.schema.names:
                raise DataFormatError(
                    f"{found.shown(file)}: multi-agent rows need the column {column!r} naming "
                    "each row's agent; it is missing (map another column to it with "
                    "config.offline_data(input_read_schema={'agent_id': column}))")
            values = dataset.to_table(columns=[column]).column(0)
            if values.null_count:
                row = pc.indices_nonzero(pc.is_null(values)).to_pylist()[0]
                raise DataFormatError(f"{found.shown(file)}, row {row}: column {column!r} is "
                                      "empty; every row of multi-agent data names its agent")
            agents.update(pc.unique(pc.cast(values, pa.string())).to_pylist())
    return sorted(agents)
