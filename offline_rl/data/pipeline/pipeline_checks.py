"""The checks ``OfflineData`` makes before any Ray work, beside the input files' own
(``check_input``): the first rows mapped through a PreLearner in this process, and the options
a learner connector that needs the module excludes."""

from __future__ import annotations

import gymnasium as gym

from offline_rl.data.feed.online_rows import check_online_rows_can_be_built
from offline_rl.data.prelearner.first_rows import check_first_rows
from offline_rl.data.source.data_config import DataConfig
from offline_rl.errors import ConfigError


def check_pipeline(config: DataConfig, spaces: tuple[gym.Space | None, gym.Space | None],
                   prelearner_class: type) -> bool:
    """Checks what ``config``'s pipeline would map, for the data's ``spaces`` (``None``: not
    known, nothing mapped), through ``prelearner_class``; returns whether its learner connector
    needs the module (``needs_module``)."""
    options = config.offline_data
    needs_module = config.build_learner_connector(*spaces).needs_module
    if (config.input_creator is None and options.input_read_method == "read_parquet"
            and not options.input_read_sample_batches and None not in spaces
            and not needs_module):
        check_first_rows(config, spaces, prelearner_class)
    if needs_module and options.materialize_mapped_data:
        raise ConfigError(
            "the learner connector needs the current module (a piece with needs_module=True), "
            "but materialize_mapped_data=True would map the data once with the first weights "
            "and train on those stale batches forever. Set "
            "config.offline_data(materialize_mapped_data=False)")
    if config.sampler_weight:
        check_online_rows_can_be_built(needs_module, prelearner_class)
    return needs_module
