"""``ConnectorV2``: one step of a pipeline that turns episodes into a train batch."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

import numpy as np

from offline_rl.episodes.episode import SingleAgentEpisode


class ConnectorV2(ABC):
    """Base class of connector pieces, with RLlib's call contract.

    A piece receives the batch built so far (a dict ``column -> list of per-episode chunks`` or
    ``column -> np.ndarray``) and the episodes it is built from, and returns the batch with its
    own columns added. Pieces hold no state unless they override ``get_state``/``set_state``.
    A piece that reads the current module (``rl_module``) sets ``needs_module = True``: the
    PreLearners then keep a copy of the learners' module, refreshed every
    ``prelearner_module_synch_period`` calls. A piece gets the ``episodes`` unless it declares
    ``needs_episodes = False`` (it reads only the flat batch). PreLearners run a pipeline in two
    stages, each in pipeline order: the episode stage (the pieces that need episodes, the
    default pieces among them) builds the flat train batch, then the batch stage (the pieces
    that declared they need none) gets that batch with ``episodes=[]``. When the episode stage
    is just the default pieces (maybe after one piece with ``on_single_steps``), the PreLearner
    computes its batch column by column, much faster than one episode object per row: declare
    ``needs_episodes = False`` on a piece that reads only the batch to keep that path.

    Examples:
        >>> import numpy as np
        >>> class ScaleRewards(ConnectorV2):
        ...     needs_episodes = False  # reads only the flat batch
        ...     def __call__(self, *, rl_module, batch, episodes, **kwargs):
        ...         batch["rewards"] = batch["rewards"] * 0.1
        ...         return batch
        >>> ScaleRewards()(rl_module=None, batch={"rewards": np.ones(2)}, episodes=[])["rewards"]
        array([0.1, 0.1])
    """

    #: Whether ``__call__`` needs the current module as ``rl_module``.
    needs_module: ClassVar[bool] = False
    #: Whether ``__call__`` reads ``episodes``; ``False``: it gets the flat train batch, with
    #: ``episodes=[]``. ``True`` by default, so that a piece written for RLlib gets episodes.
    needs_episodes: ClassVar[bool] = True
    #: For a piece placed before the default pieces: the same transform as a function of the
    #: default pieces' columns, when every episode is one step long (a tabular row, a
    #: replay-buffer sample). It lets PreLearners keep their column-by-column path.
    on_single_steps: ClassVar[Callable[[dict], dict] | None] = None

    def __init__(self, input_observation_space=None, input_action_space=None, **kwargs: Any):
        self.input_observation_space = input_observation_space
        self.input_action_space = input_action_space

    def recompute_output_observation_space(self, input_observation_space: Any,
                                           input_action_space: Any) -> Any:
        """The observation space of what this piece outputs, given its inputs' spaces: the
        input's unless the piece changes observations (RLlib's method)."""
        return input_observation_space

    @property
    def observation_space(self) -> Any:
        """The observation space of this piece's output (what a module after it reads)."""
        return self.recompute_output_observation_space(self.input_observation_space,
                                                       self.input_action_space)

    @property
    def name(self) -> str:
        """The piece's name, used by pipelines to find it (its class name)."""
        return type(self).__name__

    @abstractmethod
    def __call__(
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any],
        episodes: list[SingleAgentEpisode],
        explore: bool | None = None,
        shared_data: dict | None = None,
        metrics: dict | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Returns ``batch`` with this piece's contribution."""

    def get_state(self) -> dict[str, Any]:
        """Returns the piece's state (empty for stateless pieces)."""
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores the state returned by ``get_state``."""

    @staticmethod
    def single_agent_episode_iterator(
        episodes: Iterable[SingleAgentEpisode],
    ) -> Iterator[SingleAgentEpisode]:
        """Yields the episodes one by one (single-agent data only)."""
        for episode in episodes:
            if not isinstance(episode, SingleAgentEpisode):
                raise TypeError(f"expected SingleAgentEpisode, got {type(episode).__name__}")
            yield episode

    @staticmethod
    def add_n_batch_items(
        batch: dict[str, Any],
        column: str,
        items_to_add: Any,
        num_items: int,
        single_agent_episode: SingleAgentEpisode | None = None,
    ) -> None:
        """Appends ``num_items`` rows for ``column`` as one chunk; ``BatchIndividualItems`` joins
        the chunks into one array."""
        chunk = np.asarray(items_to_add)
        if len(chunk) != num_items:
            episode = f" of episode {single_agent_episode.id_}" if single_agent_episode else ""
            raise ValueError(
                f"column {column!r}{episode}: got {len(chunk)} items, expected {num_items}"
            )
        batch.setdefault(column, []).append(chunk)

    def __repr__(self) -> str:
        return f"{self.name}()"
