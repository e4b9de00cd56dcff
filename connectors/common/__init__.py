"""Connector pieces used both for acting and for learning."""

from connectors.common.add_observations_from_episodes_to_batch import (
    AddObservationsFromEpisodesToBatch,
)
from connectors.common.agent_to_module_mapping import AgentToModuleMapping
from connectors.common.batch_individual_items import BatchIndividualItems
from connectors.common.flatten_observations import FlattenObservations

__all__ = ["AddObservationsFromEpisodesToBatch", "AgentToModuleMapping", "BatchIndividualItems",
           "FlattenObservations"]
