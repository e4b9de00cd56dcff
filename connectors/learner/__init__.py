"""Learner connector pieces and the default learner pipeline."""

from __future__ import annotations

from connectors.common import AddObservationsFromEpisodesToBatch, BatchIndividualItems
from connectors.connector_pipeline_v2 import ConnectorPipelineV2
from connectors.learner.add_columns_from_episodes_to_train_batch import (
    AddColumnsFromEpisodesToTrainBatch,
)
from connectors.learner.add_next_observations_from_episodes_to_train_batch import (
    AddNextObservationsFromEpisodesToTrainBatch,
)
from connectors.learner.add_one_ts_to_episodes_and_truncate import AddOneTsToEpisodesAndTruncate
from connectors.learner.frame_stacking import FrameStackingLearner
from connectors.learner.general_advantage_estimation import GeneralAdvantageEstimation
from connectors.learner.learner_connector_pipeline import LearnerConnectorPipeline

#: The pieces ``default_learner_pipeline`` builds, in order.
DEFAULT_LEARNER_PIECES = (
    AddObservationsFromEpisodesToBatch,
    AddColumnsFromEpisodesToTrainBatch,
    AddNextObservationsFromEpisodesToTrainBatch,
    BatchIndividualItems,
)


def default_learner_pipeline(observation_space=None, action_space=None) -> ConnectorPipelineV2:
    """Episodes -> flat dict of numpy columns (``obs``, ``actions``, ``rewards``, ``new_obs``,
    ``terminateds``, ``truncateds`` and the extra model outputs)."""
    pieces = [
        AddObservationsFromEpisodesToBatch(observation_space, action_space,
                                           as_learner_connector=True),
        AddColumnsFromEpisodesToTrainBatch(observation_space, action_space),
        AddNextObservationsFromEpisodesToTrainBatch(observation_space, action_space),
        BatchIndividualItems(observation_space, action_space),
    ]
    return ConnectorPipelineV2(observation_space, action_space, connectors=pieces)


__all__ = [
    "AddColumnsFromEpisodesToTrainBatch",
    "AddNextObservationsFromEpisodesToTrainBatch",
    "AddOneTsToEpisodesAndTruncate",
    "DEFAULT_LEARNER_PIECES",
    "FrameStackingLearner",
    "GeneralAdvantageEstimation",
    "LearnerConnectorPipeline",
    "default_learner_pipeline",
]
