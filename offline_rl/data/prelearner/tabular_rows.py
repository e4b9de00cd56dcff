"""``RowReader``: a batch of tabular rows (one transition each) read into numpy columns."""

from __future__ import annotations

from collections.abc import Mapping

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from offline_rl.columns import Columns
from offline_rl.compression import decompress_column, looks_compressed
from offline_rl.data.prelearner.data_ledger import LedgerClient
from offline_rl.data.source.data_config import DataConfig
from offline_rl.data.source.input_locator import RowLocator
from offline_rl.errors import DataFormatError
from offline_rl.formats.tabular import (
    MissingValue,
    check_text_ids,
    conform_row_shapes,
    episode_ends,
    table_to_numpy,
    train_column_names,
)
from offline_rl.names import DEFAULT_MODULE_ID

#: Bookkeeping columns episodes are built with (agent and module ids are not: single-agent).
EPISODE_BOOKKEEPING = (Columns.EPS_ID, Columns.T, Columns.INFOS)


class RowReader:
    """Reads the columns of a batch of tabular rows named by ``schema`` as numpy, in the
    ``spaces``' per-row shapes: columns listed in ``input_compress_columns`` (``obs`` with
    ``new_obs``) or that look compressed are decompressed; a missing value is named by its
    file and row (``locator``), other errors by ``source``. The episode ends read are noted
    into ``ledger``, so that it counts the episodes that never end.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl.columns import SCHEMA
        >>> config = DataConfig()
        >>> spaces = (gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(2))
        >>> reader = RowReader(config, SCHEMA, spaces, RowLocator(config, SCHEMA, "rows"),
        ...                    LedgerClient(None))
        >>> rows = pa.table({"obs": [[0.0, 0.1]], "new_obs": [[0.2, 0.3]], "actions": [1],
        ...                  "rewards": [1.0], "terminateds": [True], "t": [0]})
        >>> sorted(reader.read(rows))
        ['actions', 'new_obs', 'obs', 'rewards', 'terminateds']
        >>> sorted(set(reader.read(rows, EPISODE_BOOKKEEPING)) - set(reader.read(rows)))
        ['t']
    """

    def __init__(self, config: DataConfig, schema: Mapping[str, str],
                 spaces: tuple[gym.Space, gym.Space], locator: RowLocator,
                 ledger: LedgerClient) -> None:
        self.schema = schema
        self.spaces = spaces
        self.locator = locator
        self.source = locator.source
        self.ledger = ledger
        compressed = set(config.offline_data.input_compress_columns)
        if Columns.OBS in compressed:
            compressed.add(Columns.NEXT_OBS)
        #: The columns named compressed by the config (others are recognized by their values).
        self.compressed = {schema.get(name, name) for name in compressed}
        #: ``ignore_final_observation``: next observations are zeros, not the data's.
        self.zero_next_observations = config.offline_data.ignore_final_observation
        #: The agents whose rows this reader takes (``None``: single-agent rows).
        self.agent_ids = config.agent_ids

    def read(self, table: pa.Table, bookkeeping: tuple[str, ...] = ()
             ) -> dict[str, np.ndarray]:
        """The train columns of ``table`` and those of the ``bookkeeping`` fields it has."""
        check_text_ids(table, self.schema, self.source)
        if self.agent_ids is None:
            self._check_single_agent(table)
        else:
            self._check_agents(table)
        names = train_column_names(table.column_names, self.schema)
        names += [self.schema[field] for field in bookkeeping
                  if self.schema[field] in table.column_names]
        compressed = self.compressed | {
            self.schema[field] for field in (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS)
            if self.schema[field] in table.column_names
            and looks_compressed(table.column(self.schema[field]))}
        try:
            rows = table_to_numpy(table, [name for name in names if name not in compressed])
        except MissingValue as missing:
            raise self.locator.null_error(table, names) or DataFormatError(
                f"{self.source}: column {missing.column!r} has a missing (null) value inside the "
                f"array of {self.locator.place(table)(missing.row)}; fill it or drop the row"
            ) from None
        except DataFormatError as error:
            raise self._agent_shapes_error(table, names) or DataFormatError(
                f"{self.source}: {error}") from None
        for name in [name for name in names if name in compressed]:
            rows[name] = decompress_column(table.column(name).to_pylist(), name, self.source)
        rows = conform_row_shapes(rows, self.schema, self.spaces, self.source)
        if self.zero_next_observations:
            rows[self.schema[Columns.NEXT_OBS]] = np.zeros_like(rows[self.schema[Columns.OBS]])
        self.ledger.note_episodes(*episode_ends(table, rows, self.schema))
        return rows

    def _check_single_agent(self, table: pa.Table) -> None:
        """Raises ``DataFormatError``, naming the first such row, for rows that name an agent
        (``agent_id``) or a module other than ``DEFAULT_MODULE_ID`` (``module_id``): rows of
        multi-agent data, whose agents training would mix into one module. RLlib's
        single-agent rows leave both empty."""
        for field, allowed in ((Columns.AGENT_ID, None), (Columns.MODULE_ID, DEFAULT_MODULE_ID)):
            name = self.schema[field]
            if name not in table.column_names:
                continue
            column = table.column(name)
            if column.null_count == len(column):
                continue
            named = pc.invert(pc.is_null(column, nan_is_null=True))  # a pandas batch: NaN
            if allowed is not None:
                named = pc.and_kleene(named, pc.not_equal(pc.cast(column, pa.string()), allowed))
            if not pc.any(named).as_py():
                continue
            first = pc.indices_nonzero(pc.fill_null(named, False))[0].as_py()
            ids = sorted(map(str, pc.unique(column.filter(named)).to_pylist()))
            kinds = "agents" if field == Columns.AGENT_ID else "modules"
            raise DataFormatError(
                f"{self.locator.place(table)(first)}: column {name!r} names the {kinds} "
                f"{ids[:5]}: rows of multi-agent data, which one module "
                f"({DEFAULT_MODULE_ID!r}) would train on mixed. Declare the modules and map "
                "the agents to them: config.multi_agent(policies=[...], policy_mapping_fn=...) "
                "(see the guide's 'Multi-agent data'). Single-agent rows leave agent_id and "
                "module_id empty, as RLlib writes them; if yours are single-agent, leave the "
                "column out of the read: config.offline_data(input_read_method_kwargs="
                "{'columns': [...]})")

    def _agent_shapes_error(self, table: pa.Table, names: list[str]) -> DataFormatError | None:
        """For multi-agent rows: the error naming the agents of this module whose rows of a
        list column (``obs``, ...) have different lengths, and each one's; else ``None``."""
        agent_column = self.schema[Columns.AGENT_ID]
        if self.agent_ids is None or agent_column not in table.column_names:
            return None
        agents = table.column(agent_column).to_pylist()
        for name in names:
            column = table.column(name)
            if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
                continue
            lengths: dict[str, set[int]] = {}
            for agent, length in zip(agents, pc.list_value_length(column).to_pylist(),
                                     strict=True):
                lengths.setdefault(str(agent), set()).add(length)
            if len({frozenset(found) for found in lengths.values()}) > 1:
                shapes = ", ".join(f"{agent!r} " + " or ".join(f"({n},)" for n in sorted(found))
                                   for agent, found in sorted(lengths.items()))
                return DataFormatError(
                    f"{self.source}: the agents {sorted(lengths)} of one module have rows of "
                    f"column {name!r} of different shapes: {shapes}; one module acts for "
                    "agents of one kind: map agents of other shapes to a module of their own "
                    "(config.multi_agent(policies=..., policy_mapping_fn=...))")
        return None

    def _check_agents(self, table: pa.Table) -> None:
        """Raises ``DataFormatError``, naming the first such row, for rows of another agent
        than ``agent_ids`` (a read the row filter did not reach, such as a custom
        ``input_read_method``'s) or of none: each row of multi-agent data trains the module
        its agent maps to."""
        name = self.schema[Columns.AGENT_ID]
        column = table.column(name) if name in table.column_names else None
        if column is None:
            raise DataFormatError(f"{self.source}: multi-agent rows need the column {name!r} "
                                  "naming each row's agent; it is missing (map another column "
                                  "to it with config.offline_data(input_read_schema="
                                  f"{{'agent_id': column}}))")
        other = pc.invert(pc.fill_null(pc.is_in(pc.cast(column, pa.string()),
                                                pa.array(self.agent_ids, pa.string())), False))
        if pc.any(other).as_py():
            first = pc.indices_nonzero(other)[0].as_py()
            raise DataFormatError(
                f"{self.locator.place(table)(first)}: column {name!r} names the agent "
                f"{column[first].as_py()!r}, but this module's rows are those of the agents "
                f"{list(self.agent_ids)} (multi_agent's policy_mapping_fn maps each row's "
                "agent to the module it trains; every row must name its agent)")

    def read_all(self, table: pa.Table) -> dict[str, np.ndarray]:
        """Every column of ``table`` as numpy, as it is (for a custom ``_map_to_episodes``)."""
        try:
            return table_to_numpy(table)
        except DataFormatError as error:
            raise DataFormatError(f"{self.source}: {error}") from None
