"""The agents of multi-agent input: each tabular row's ``agent_id``, or each multi-agent
episode's agents, read from the Parquet files' one column before any Ray work; and the policy
ids of old-stack ``MultiAgentBatch`` lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from offline_rl.columns import EPISODE_AGENTS, Columns
from offline_rl.data.source.data_config import DataConfig
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.formats.episode_input import agent_names, decode_multi_agent_episode
from offline_rl.formats.tabular import resolve_schema


def input_agents(config: DataConfig) -> list[str]:
    """The distinct agent ids of the input, sorted: each tabular row's ``agent_id``, or the
    agents of each multi-agent episode (``input_read_episodes``: the ``agent_ids`` column the
    writer adds beside ``item``, else each episode decoded). Read in this process, one column
    of each Parquet file. Raises ``DataFormatError`` naming the file when a file lacks the
    column or a row names no agent, ``ConfigError`` for input other than Parquet files.

    Examples:
        >>> import tempfile, pyarrow.parquet as pq
        >>> from offline_rl.settings.offline_data import OfflineDataConfig
        >>> folder = tempfile.mkdtemp()
        >>> pq.write_table(pa.table({"agent_id": ["b", "a", "b"]}), f"{folder}/part.parquet")
        >>> input_agents(DataConfig(OfflineDataConfig(input_=folder)))
        ['a', 'b']
    """
    agents: set[str] = set()
    seen: dict[str, tuple[Any, str]] = {}  # the episodes' agent ids by their text, and where
    episodes, column = config.offline_data.input_read_episodes, _agent_column(config)
    for dataset, shown in _parquet_files(config):
        agents.update(_episode_agents(dataset, shown, seen) if episodes
                      else _row_agents(dataset, column, shown))
    return sorted(agents)


def input_agent_modules(config: DataConfig) -> dict[str, str]:
    """Each agent of tabular multi-agent rows, by its id, and the module its rows name in
    ``module_id`` (how rows are routed without a ``policy_mapping_fn``). Raises
    ``DataFormatError`` naming the file for rows without an agent or a module, and for an
    agent whose rows name two modules.

    Examples:
        >>> import tempfile, pyarrow.parquet as pq
        >>> from offline_rl.settings.offline_data import OfflineDataConfig
        >>> folder = tempfile.mkdtemp()
        >>> pq.write_table(pa.table({"agent_id": ["b", "a"], "module_id": ["mb", "ma"]}),
        ...                f"{folder}/part.parquet")
        >>> input_agent_modules(DataConfig(OfflineDataConfig(input_=folder)))
        {'a': 'ma', 'b': 'mb'}
    """
    agent_column = _agent_column(config)
    module_column = resolve_schema(config.offline_data.input_read_schema)[Columns.MODULE_ID]
    modules: dict[str, tuple[str, str]] = {}  # agent -> (module, the file that says so)
    for dataset, shown in _parquet_files(config):
        _row_agents(dataset, agent_column, shown)
        if module_column not in dataset.schema.names:
            raise DataFormatError(
                f"{shown}: without a policy_mapping_fn, each row goes to the module its column "
                f"{module_column!r} names, and the file has no such column: set "
                "config.multi_agent(policy_mapping_fn=...) to map each agent id to a module id, "
                f"or add the column (or map another to it with "
                f"input_read_schema={{'module_id': column}})")
        table = dataset.to_table(columns=[agent_column, module_column])
        found = table.column(1)
        if found.null_count:
            row = pc.indices_nonzero(pc.is_null(found)).to_pylist()[0]
            raise DataFormatError(f"{shown}, row {row}: column {module_column!r} is empty; "
                                  "without a policy_mapping_fn every row names its module "
                                  "there (or set config.multi_agent(policy_mapping_fn=...))")
        pairs = table.group_by([agent_column, module_column]).aggregate([])
        for agent, module in zip(*(pc.cast(pairs.column(name), pa.string()).to_pylist()
                                   for name in (agent_column, module_column))):
            earlier, where = modules.setdefault(agent, (module, shown))
            if earlier != module:
                raise DataFormatError(
                    f"the rows of agent {agent!r} name the modules {sorted({earlier, module})} "
                    f"in column {module_column!r} ({where}, {shown}); an agent's rows train "
                    "one module: give each agent one module id, or set "
                    "config.multi_agent(policy_mapping_fn=...)")
    return {agent: module for agent, (module, _) in sorted(modules.items())}


def _agent_column(config: DataConfig) -> str:
    """The column naming each row's agent, once the input is known to be one that multi-agent
    training reads (else ``ConfigError``)."""
    options = config.offline_data
    if (options.input_read_method != "read_parquet" or config.input_creator is not None
            or (config.reads_episodes and not options.input_read_episodes)):
        raise ConfigError(
            "multi-agent training reads tabular Parquet rows (each naming its agent in "
            "agent_id), multi-agent episodes and old-stack MultiAgentBatch JSON lines; this "
            f"config reads {options.input_read_method}. Convert the data to one of them, or "
            "train one module on single-agent data")
    return resolve_schema(options.input_read_schema)[Columns.AGENT_ID]


def _parquet_files(config: DataConfig) -> Iterator[tuple[pads.Dataset, str]]:
    """Each Parquet file of the input (``DataConfig.input_listing``), as a dataset and the name
    errors show."""
    for shown, filesystem, file in config.input_listing.data_files(with_uris=True):
        yield pads.dataset(file, filesystem=filesystem, format="parquet"), shown


def _row_agents(dataset: pads.Dataset, column: str, shown: str) -> list[str]:
    """The agents tabular rows name in ``column``."""
    if column not in dataset.schema.names:
        raise DataFormatError(
            f"{shown}: multi-agent rows need the column {column!r} naming each row's agent; it "
            "is missing (map another column to it with "
            "config.offline_data(input_read_schema={'agent_id': column}))")
    values = dataset.to_table(columns=[column]).column(0)
    if values.null_count:
        row = pc.indices_nonzero(pc.is_null(values)).to_pylist()[0]
        raise DataFormatError(f"{shown}, row {row}: column {column!r} is empty; every row of "
                              "multi-agent data names its agent")
    return pc.unique(pc.cast(values, pa.string())).to_pylist()


def _episode_agents(dataset: pads.Dataset, shown: str, seen: dict[str, Any]) -> list[str]:
    """The agents of the multi-agent episodes in a file: its ``agent_ids`` column (which the
    PreLearners check against each episode), else each ``item`` decoded; agent ids that read
    as one (``0`` and ``'0'``, in ``seen`` across files) are refused."""
    if EPISODE_AGENTS in dataset.schema.names:
        lists = dataset.to_table(columns=[EPISODE_AGENTS]).column(0)
        if lists.null_count:
            row = pc.indices_nonzero(pc.is_null(lists)).to_pylist()[0]
            raise DataFormatError(f"{shown}, row {row}: column {EPISODE_AGENTS!r} is empty; it "
                                  "lists the agents of the row's episode")
        repeated = [row for row, listed in enumerate(lists.to_pylist())
                    if len(set(listed)) < len(listed)]
        if repeated:
            raise DataFormatError(
                f"{shown}, row {repeated[0]}: column {EPISODE_AGENTS!r} lists "
                f"{lists[repeated[0]].as_py()}: two "
                "agents of the episode have ids that read as one (0 and '0', say), which would "
                "be trained on as one agent; give each agent an id of its own")
        return pc.unique(pc.cast(pc.list_flatten(lists), pa.string())).to_pylist()
    if "item" not in dataset.schema.names:
        raise DataFormatError(f"{shown} has no column 'item' (columns: {dataset.schema.names}); "
                              "input_read_episodes=True reads episodes written with "
                              "output_write_episodes=True")
    agents: set[str] = set()
    for batch in dataset.to_batches(columns=["item"]):
        for item in batch.column(0).to_pylist():
            episode = decode_multi_agent_episode(item, f"{shown} (column 'item')")
            agents.update(agent_names(episode.agent_episodes,
                                      f"{shown} (column 'item'), episode {episode.id_}", seen))
    return sorted(agents)


def input_policy_ids(config: DataConfig) -> list[str]:
    """The policy ids of the old-stack ``MultiAgentBatch`` lines of the JSON input files (each
    line's ``policy_batches`` keys), sorted; read in this process. Lines that are no
    ``MultiAgentBatch``, or no JSON, are left to the PreLearners, which name them.

    Examples:
        >>> import tempfile
        >>> from offline_rl.settings.offline_data import OfflineDataConfig
        >>> folder = tempfile.mkdtemp()
        >>> with open(f"{folder}/ma.json", "w") as file:
        ...     _ = file.write('{"type": "MultiAgentBatch", "policy_batches": {"b": {}, "a": {}}}')
        >>> input_policy_ids(DataConfig(OfflineDataConfig(
        ...     input_=folder, input_read_method="read_json", input_read_sample_batches=True)))
        ['a', 'b']
    """
    policies: set[str] = set()
    for _, filesystem, file in config.input_listing.data_files(with_uris=True):
        with filesystem.open_input_stream(file) as stream:
            lines = stream.read().splitlines()
        for line in lines:
            try:
                batches = json.loads(line).get("policy_batches")
            except (ValueError, RecursionError, AttributeError):
                continue
            if isinstance(batches, dict):
                policies.update(map(str, batches))
    return sorted(policies)
