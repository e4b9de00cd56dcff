"""The learner's loss on data it does not train on: how an operator without an environment
spots over-fitting (RLlib's ``evaluate_offline`` idea)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from offline_rl.columns import Columns
from offline_rl.core.learner_group import LearnerGroup
from offline_rl.data.pipeline.logged_data import read_tables
from offline_rl.data.pipeline.offline_data import OfflineData
from offline_rl.data.prelearner.module_weights import WEIGHTS_VERSION
from offline_rl.data.prelearner.prelearner import OfflinePreLearner, map_in_process
from offline_rl.errors import DataFormatError
from offline_rl.names import DEFAULT_MODULE_ID


class HeldOutLosses:
    """Reads ``config.offline_eval_input_`` (with the config's other ``offline_data``
    settings) once, through Ray Data; ``evaluate`` maps it with the config's PreLearner and
    learner pipeline in this process (a pipeline that needs the module gets the weights the
    training PreLearners get) and reports learner 0's loss metrics on it, without a step."""

    def __init__(self, config: Any, spaces: tuple[gym.Space, gym.Space],
                 offline_data: OfflineData):
        held_out = config.copy().offline_data(
            input_=config.sections.evaluation.offline_eval_input_)
        self.data_config = held_out.data_config(spaces)
        self.spaces = spaces
        self.offline_data = offline_data
        try:
            self.tables = read_tables(self.data_config)
        except DataFormatError as error:
            raise DataFormatError(f"offline_eval_input_ "
                                  f"{held_out.sections.offline_data.input_!r}: {error}") from None

    def evaluate(self, learner_group: LearnerGroup) -> dict[str, Any]:
        """``{"default_policy": loss metrics, "num_env_steps": rows they cover}``."""
        prelearner_class = self.data_config.prelearner_class or OfflinePreLearner
        data_options = self.data_config.offline_data
        prelearner = prelearner_class(self.data_config, self.spaces,
                                      module_weights=self.offline_data.module_weights,
                                      module_spec=self.data_config.module_spec(),
                                      source=f"offline_eval_input_ {data_options.input_}",
                                      **data_options.prelearner_kwargs)
        batches = [map_in_process(prelearner, table) for table in self.tables]
        batches = [{key: value for key, value in batch.items() if key != WEIGHTS_VERSION}
                   for batch in batches if len(batch.get(Columns.ACTIONS, ()))]
        return {DEFAULT_MODULE_ID: learner_group.loss_metrics(batches),
                "num_env_steps": sum(len(batch[Columns.ACTIONS]) for batch in batches)}
