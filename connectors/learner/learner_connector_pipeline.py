"""``LearnerConnectorPipeline``: RLlib's name for the pipeline a learner's batches go through."""

from __future__ import annotations

from connectors.connector_pipeline_v2 import ConnectorPipelineV2


class LearnerConnectorPipeline(ConnectorPipelineV2):
    """A ``ConnectorPipelineV2`` of learner pieces (RLlib's class of that name), with the same
    ``append``/``insert_before``/... methods.

    Examples:
        >>> from connectors import BatchIndividualItems, FrameStackingLearner
        >>> pipeline = LearnerConnectorPipeline(connectors=[FrameStackingLearner(num_frames=4)])
        >>> _ = pipeline.append(BatchIndividualItems(multi_agent=False))
        >>> pipeline
        LearnerConnectorPipeline(FrameStackingLearner -> BatchIndividualItems)
    """
