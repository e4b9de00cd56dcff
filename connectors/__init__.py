"""Connector pipelines that turn episodes into train batches (RLlib's ConnectorV2 API).

``NumpyToTensor`` is imported on first use so that data workers, which never need torch, do not
pay for importing it.
"""

from __future__ import annotations

from typing import Any

from connectors.common import (
    AddObservationsFromEpisodesToBatch,
    AgentToModuleMapping,
    BatchIndividualItems,
    FlattenObservations,
)
from connectors.connector_pipeline_v2 import ConnectorPipelineV2
from connectors.connector_v2 import ConnectorV2
from connectors.learner import (
    DEFAULT_LEARNER_PIECES,
    AddColumnsFromEpisodesToTrainBatch,
    AddNextObservationsFromEpisodesToTrainBatch,
    AddOneTsToEpisodesAndTruncate,
    FrameStackingLearner,
    GeneralAdvantageEstimation,
    LearnerConnectorPipeline,
    default_learner_pipeline,
)

__all__ = [
    "AddColumnsFromEpisodesToTrainBatch",
    "AddNextObservationsFromEpisodesToTrainBatch",
    "AddObservationsFromEpisodesToBatch",
    "AddOneTsToEpisodesAndTruncate",
    "AgentToModuleMapping",
    "BatchIndividualItems",
    "ConnectorPipelineV2",
    "ConnectorV2",
    "DEFAULT_LEARNER_PIECES",
    "FlattenObservations",
    "FrameStackingLearner",
    "GeneralAdvantageEstimation",
    "LearnerConnectorPipeline",
    "NumpyToTensor",
    "default_learner_pipeline",
]


def __getattr__(name: str) -> Any:
    if name == "NumpyToTensor":
        from connectors.common.numpy_to_tensor import NumpyToTensor

        return NumpyToTensor
    raise AttributeError(f"module 'connectors' has no attribute {name!r}")
