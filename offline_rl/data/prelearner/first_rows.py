"""The driver's first check of the data: the first rows of the first file mapped through a
PreLearner in this process, so that common data errors (types, shapes, spaces, NaN) fail in a
second, before any Ray work, naming the file."""

from __future__ import annotations

import gymnasium as gym
import pyarrow as pa

from offline_rl.columns import PATH_COLUMN
from offline_rl.data.prelearner.prelearner import map_in_process
from offline_rl.data.source.data_config import DataConfig
from offline_rl.data.source.input_checks import first_rows

#: Rows (tabular) or episodes of the first file checked in the driver before the pipeline.
SAMPLE_ROWS = 256
SAMPLE_EPISODES = 8


def check_first_rows(config: DataConfig, spaces: tuple[gym.Space, gym.Space],
                     prelearner_class: type) -> None:
    """Maps the first rows of the input's first file (``DataConfig.input_listing``) through a
    ``prelearner_class`` built here for the data's ``spaces``, read as the pipeline reads them
    (``columns`` and ``filter`` of ``input_read_method_kwargs``); raises what the PreLearner
    raises. Nothing is checked when the files hold no rows."""
    kwargs = config.offline_data.input_read_method_kwargs
    reads_episodes = config.reads_episodes
    sample = first_rows(config.input_listing, SAMPLE_EPISODES if reads_episodes else SAMPLE_ROWS,
                        columns=kwargs.get("columns"), row_filter=kwargs.get("filter"))
    if sample is None:
        return
    file, table = sample
    if reads_episodes:
        table = table.append_column(PATH_COLUMN, pa.array([file] * table.num_rows))
    prelearner = prelearner_class(
        config=config, spaces=spaces, source=f"the first rows of {file}",
        module_spec=config.module_spec(), **config.offline_data.prelearner_kwargs)
    map_in_process(prelearner, table)
