"""``LearnerStages``: the learner connector pipeline as a PreLearner runs it, in two stages."""

from __future__ import annotations

from typing import Any

import numpy as np

from connectors import DEFAULT_LEARNER_PIECES, ConnectorPipelineV2, ConnectorV2
from offline_rl.columns import Columns
from offline_rl.data.prelearner.module_weights import WEIGHTS_VERSION, SyncedModule
from offline_rl.episodes.episode import SingleAgentEpisode


class LearnerStages:
    """Runs ``pipeline`` as its episode stage (the pieces that read episodes,
    ``needs_episodes``: the default pieces and such custom ones) and then its batch stage (the
    others, on the flat train batch), each in pipeline order, with ``synced_module``'s module
    when a piece needs one; batches built with the module get its weights' version (column
    ``module_weights_version``).

    When the episode stage is the default pieces, after at most one piece with
    ``on_single_steps``, it can run column by column (``columnar``): ``from_columns`` takes
    train columns computed in its place, as from single-step episodes.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from connectors import default_learner_pipeline
        >>> from offline_rl import SingleAgentEpisode
        >>> stages = LearnerStages(default_learner_pipeline(gym.spaces.Box(-1, 1, (1,)),
        ...                                                 gym.spaces.Discrete(2)))
        >>> episode = SingleAgentEpisode(observations=[[0.0], [0.5]], actions=[1],
        ...                              rewards=[1.0], terminated=True,
        ...                              len_lookback_buffer=0).to_numpy()
        >>> stages.columnar, stages.from_episodes([episode])["new_obs"].tolist()
        (True, [[0.5]])
    """

    def __init__(self, pipeline: ConnectorPipelineV2,
                 synced_module: SyncedModule | None = None) -> None:
        spaces = (pipeline.input_observation_space, pipeline.input_action_space)
        self.episode_stage = ConnectorPipelineV2(
            *spaces, connectors=[piece for piece in pipeline if piece.needs_episodes])
        self.batch_stage = ConnectorPipelineV2(
            *spaces, connectors=[piece for piece in pipeline if not piece.needs_episodes])
        self.synced_module = synced_module
        #: The episode stage's first piece when it has ``on_single_steps`` (else ``None``),
        #: and whether the episode stage can run column by column (``from_columns``).
        self.column_prefix, self.columnar = _column_path(self.episode_stage)

    def from_episodes(self, episodes: list[SingleAgentEpisode]) -> dict[str, Any]:
        """The train batch of ``episodes``: both stages."""
        module = self._module()
        shared_data: dict[str, Any] = {}
        columns = self.episode_stage(rl_module=module, batch={}, episodes=episodes,
                                     shared_data=shared_data, metrics={})
        return self._finish(columns, module, shared_data)

    def from_columns(self, columns: dict[str, np.ndarray]) -> dict[str, Any]:
        """The train batch of train columns computed in place of the episode stage (when
        ``columnar``): the ``on_single_steps`` piece, if any, then the batch stage."""
        module = self._module()
        if self.column_prefix is not None:
            columns = self.column_prefix.on_single_steps(columns)
        return self._finish(columns, module, {})

    def _module(self) -> Any:
        """The synced module (after a sync when one is due), or ``None`` without one."""
        return None if self.synced_module is None else self.synced_module.get()

    def _finish(self, columns: dict[str, Any], module: Any,
                shared_data: dict[str, Any]) -> dict[str, Any]:
        """The batch stage on ``columns``, and the weights' version when built with a module."""
        columns = self.batch_stage(rl_module=module, batch=columns, episodes=[],
                                   shared_data=shared_data, metrics={})
        if module is not None:
            rows = len(np.asarray(columns[Columns.ACTIONS]))
            columns[WEIGHTS_VERSION] = np.full(rows, self.synced_module.version, np.int64)
        return columns


def _column_path(episode_stage: ConnectorPipelineV2) -> tuple[ConnectorV2 | None, bool]:
    """The episode stage's first piece when it has ``on_single_steps`` (else ``None``), and
    whether the pieces after it are the default pieces, so the stage can run column by
    column. Each default piece adds its own columns only where missing, so their order
    (before ``BatchIndividualItems``) and repeats do not change the batch."""
    pieces = list(episode_stage)
    prefix = pieces[0] if pieces and pieces[0].on_single_steps is not None else None
    kinds = [type(piece) for piece in pieces[prefix is not None:]]
    return prefix, (set(kinds) == set(DEFAULT_LEARNER_PIECES)
                    and kinds[-1] is DEFAULT_LEARNER_PIECES[-1]
                    and kinds.count(DEFAULT_LEARNER_PIECES[-1]) == 1)
