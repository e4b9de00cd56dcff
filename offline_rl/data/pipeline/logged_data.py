"""A whole (held-out) dataset brought into this process through Ray Data: its blocks, and
those as off-policy estimation reads them (episodes, or the steps of tabular rows)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pyarrow as pa

from offline_rl.columns import Columns
from offline_rl.data.prelearner.prelearner import OfflinePreLearner
from offline_rl.data.source.data_config import DataConfig
from offline_rl.data.source.input_reader import read_input
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import DataFormatError
from offline_rl.formats.episode_rows import DONES
from offline_rl.formats.shapes import conform_columns
from offline_rl.formats.tabular import resolve_schema, table_to_numpy

#: The step fields read from tabular rows (through ``input_read_schema``), and the behaviour
#: policy's probabilities (read under their own names).
STEP_FIELDS = (Columns.EPS_ID, Columns.T, Columns.OBS, Columns.ACTIONS, Columns.REWARDS,
               Columns.NEXT_OBS, Columns.TERMINATEDS, Columns.TRUNCATEDS)
PROBABILITY_COLUMNS = (Columns.ACTION_LOGP, Columns.ACTION_PROB)


def read_tables(config: DataConfig) -> list[pa.Table]:
    """Every row of ``config``'s input, read with ``config``'s read method, as Arrow tables (one
    per block); ``DataFormatError`` when there are none."""
    tables = [table for table in read_input(config).iter_batches(batch_format="pyarrow",
                                                                  batch_size=None)
              if table.num_rows]
    if not tables:
        raise DataFormatError("no rows to evaluate on")
    return tables


def read_logged_data(config: DataConfig, spaces: tuple[gym.Space, gym.Space]
                     ) -> list[SingleAgentEpisode] | dict[str, np.ndarray]:
    """Every row of ``config``'s input, read with ``config``'s read method: the episodes the
    PreLearner decodes from episode or SampleBatch inputs (checked and deduplicated as for
    training), or, from tabular rows, the step columns named by their fields (the legacy
    ``dones`` read as ``terminateds``)."""
    tables = read_tables(config)
    if config.reads_episodes:
        prelearner = (config.prelearner_class or OfflinePreLearner)(
            config, spaces, **config.offline_data.prelearner_kwargs)
        return [episode for table in tables for episode in prelearner.admitted_episodes(table)]
    return step_columns(pa.concat_tables(tables, promote_options="default"), config, spaces)


def step_columns(table: pa.Table, config: DataConfig, spaces: tuple[gym.Space, gym.Space]
                 ) -> dict[str, np.ndarray]:
    """The step columns of tabular rows, keyed by their fields (read through
    ``input_read_schema``, the legacy ``dones`` as ``terminateds``) and the behaviour policy's
    probabilities, their shapes checked against ``spaces``."""
    schema = resolve_schema(config.offline_data.input_read_schema)
    if schema[Columns.TERMINATEDS] not in table.column_names:
        schema[Columns.TERMINATEDS] = schema[DONES]
    present = {field: schema[field] for field in STEP_FIELDS
               if schema[field] in table.column_names}
    present.update({name: name for name in PROBABILITY_COLUMNS if name in table.column_names})
    columns = table_to_numpy(table, present.values())
    return conform_columns({field: columns[column] for field, column in present.items()},
                           spaces, f"the rows read from {config.offline_data.input_}")
