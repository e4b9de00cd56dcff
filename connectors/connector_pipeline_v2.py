"""``ConnectorPipelineV2``: an ordered list of connector pieces that is itself a connector."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from connectors.connector_v2 import ConnectorV2

Anchor = str | type


class ConnectorPipelineV2(ConnectorV2):
    """Runs its pieces in order, each one receiving the batch the previous one returned.

    Pieces are found by class name (a string) or class (also matching subclasses).

    Examples:
        >>> from connectors import (AddObservationsFromEpisodesToBatch, BatchIndividualItems,
        ...                         ConnectorPipelineV2)
        >>> pipeline = ConnectorPipelineV2(connectors=[BatchIndividualItems()])
        >>> piece = AddObservationsFromEpisodesToBatch(as_learner_connector=True)
        >>> _ = pipeline.insert_before(BatchIndividualItems, piece)
        >>> [piece.name for piece in pipeline]
        ['AddObservationsFromEpisodesToBatch', 'BatchIndividualItems']
    """

    def __init__(
        self,
        input_observation_space=None,
        input_action_space=None,
        *,
        connectors: Iterable[ConnectorV2] = (),
        **kwargs: Any,
    ):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.connectors: list[ConnectorV2] = list(connectors)

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], episodes, **kwargs: Any):
        """Passes the batch through every piece in order."""
        for connector in self.connectors:
            batch = connector(rl_module=rl_module, batch=batch, episodes=episodes, **kwargs)
            if not isinstance(batch, dict):
                raise TypeError(
                    f"connector {connector.name} returned {type(batch).__name__}; "
                    "every piece must return the batch dict"
                )
        return batch

    def recompute_output_observation_space(self, input_observation_space: Any,
                                           input_action_space: Any) -> Any:
        """The observation space after every piece, in order."""
        for connector in self.connectors:
            input_observation_space = connector.recompute_output_observation_space(
                input_observation_space, input_action_space)
        return input_observation_space

    @property
    def needs_module(self) -> bool:
        """Whether any piece needs the current module."""
        return any(connector.needs_module for connector in self.connectors)

    def __len__(self) -> int:
        return len(self.connectors)

    def __iter__(self):
        return iter(self.connectors)

    def append(self, connector: ConnectorV2) -> ConnectorV2:
        """Adds ``connector`` at the end."""
        self.connectors.append(connector)
        return connector

    def prepend(self, connector: ConnectorV2) -> ConnectorV2:
        """Adds ``connector`` at the start."""
        self.connectors.insert(0, connector)
        return connector

    def insert_before(self, anchor: Anchor, connector: ConnectorV2) -> ConnectorV2:
        """Inserts ``connector`` right before the first piece matching ``anchor``."""
        self.connectors.insert(self._index_of(anchor), connector)
        return connector

    def insert_after(self, anchor: Anchor, connector: ConnectorV2) -> ConnectorV2:
        """Inserts ``connector`` right after the first piece matching ``anchor``."""
        self.connectors.insert(self._index_of(anchor) + 1, connector)
        return connector

    def remove(self, anchor: Anchor) -> ConnectorV2:
        """Removes and returns the first piece matching ``anchor``."""
        return self.connectors.pop(self._index_of(anchor))

    def get_state(self) -> dict[str, Any]:
        """Returns each piece's state, keyed by position and name."""
        return {f"{i:03d}_{c.name}": c.get_state() for i, c in enumerate(self.connectors)}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores states saved by ``get_state`` on a pipeline with the same pieces."""
        expected = set(self.get_state())
        if set(state) != expected:
            raise ValueError(
                f"pipeline state has pieces {sorted(state)}, but this pipeline has "
                f"{sorted(expected)}"
            )
        for i, connector in enumerate(self.connectors):
            connector.set_state(state[f"{i:03d}_{connector.name}"])

    def _index_of(self, anchor: Anchor) -> int:
        for i, connector in enumerate(self.connectors):
            if isinstance(anchor, str) and connector.name == anchor:
                return i
            if isinstance(anchor, type) and isinstance(connector, anchor):
                return i
        wanted = anchor if isinstance(anchor, str) else anchor.__name__
        raise ValueError(
            f"no connector piece {wanted!r} in this pipeline; its pieces are "
            f"{[c.name for c in self.connectors]}"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({' -> '.join(c.name for c in self.connectors)})"
