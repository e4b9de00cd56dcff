"""``SampleBatch`` and ``SampleBatchBuilder``: RLlib's old-stack batches, built row by row.

An application that is not a simulator (a web service, say) logs its own experience: one
``add_values(...)`` per step with RLlib's column names, then ``build_and_reset()`` per episode,
handed to ``offline_rl.recording.json_writer.JsonWriter``. As in RLlib, columns become numpy
arrays (float64 stored as float32) and each built batch gets an ``unroll_id`` column.
``episode_to_sample_batch`` gives the same layout for a ``SingleAgentEpisode``.

RLlib's ``MultiAgentSampleBatchBuilder`` is not offered here: multi-agent data is a separate
issue.

Examples:
    >>> builder = SampleBatchBuilder()
    >>> for t in range(2):
    ...     builder.add_values(t=t, eps_id=7, obs=[0.5 * t], actions=1, action_prob=1.0,
    ...                        rewards=1.0, terminateds=t == 1, truncateds=False, infos={},
    ...                        new_obs=[0.5 * t + 0.5])
    >>> batch = builder.build_and_reset()
    >>> batch.count, batch["obs"].dtype, batch["terminateds"].tolist(), builder.count
    (2, dtype('float32'), [False, True], 0)
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

import numpy as np

from offline_rl.columns import Columns
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.sample_batch import SampleBatch
from offline_rl.errors import DataFormatError
from offline_rl.recording.logged_values import ValueLayout

#: The column RLlib numbers each built batch with.
UNROLL_ID = "unroll_id"
_unroll_ids = itertools.count()


class SampleBatchBuilder:
    """Collects rows (``add_values``) and whole batches (``add_batch``) into one ``SampleBatch``
    (``build_and_reset``), with RLlib's interface."""

    def __init__(self) -> None:
        self.buffers: dict[str, list[Any]] = defaultdict(list)
        self.count = 0
        self._layout = ValueLayout()

    def add_values(self, **values: Any) -> None:
        """Adds one row: a value per column. Every row must name the same columns, each column
        keep one shape and kind (numbers or text; ``offline_rl.recording.logged_values``): a
        row that does not is refused with a ``DataFormatError`` naming the column and the row,
        and nothing of it is added."""
        if self.count and set(values) != set(self.buffers):
            raise DataFormatError(
                f"add_values: row {self.count} has columns {sorted(values)}, the rows before "
                f"it {sorted(self.buffers)}; every row of a batch needs the same columns")
        self._layout.keep(self._layout.check({}, values, f"add_values: row {self.count}"))
        for name, value in values.items():
            self.buffers[name].append(value)
        self.count += 1

    def add_batch(self, batch: SampleBatch) -> None:
        """Adds every row of ``batch``."""
        for name, column in batch.items():
            self.buffers[name].extend(column)
        self.count += batch.count

    def build_and_reset(self) -> SampleBatch:
        """The rows added so far as a ``SampleBatch`` (with an ``unroll_id`` column unless one
        was added); the builder is empty afterwards."""
        batch = SampleBatch({name: _as_array(values) for name, values in self.buffers.items()})
        if UNROLL_ID not in batch:
            batch[UNROLL_ID] = np.full(batch.count, next(_unroll_ids))
        self.buffers.clear()
        self.count = 0
        self._layout = ValueLayout()
        return batch


def episode_to_sample_batch(episode: SingleAgentEpisode) -> SampleBatch:
    """A finished episode's steps as the columns the seed's ``add_values`` calls give: ``t``,
    ``eps_id``, ``agent_index``, ``obs``, ``actions``, ``rewards``, ``new_obs``,
    ``terminateds``, ``truncateds``, each extra model output (``action_logp``...; with
    ``action_prob`` beside a recorded ``action_logp``, as RLlib's old-stack batches hold both)
    and ``infos`` unless all are empty (as the tabular writer does; RLlib 2.60's new-stack
    reader of SampleBatch JSON fails on an ``infos`` column).

    Examples:
        >>> episode = SingleAgentEpisode("e1", observations=[[0.0], [1.0], [2.0]], actions=[0, 1],
        ...                              rewards=[1.0, 0.5], terminated=True,
        ...                              extra_model_outputs={"action_prob": [0.5, 0.5]},
        ...                              len_lookback_buffer=0)
        >>> batch = episode_to_sample_batch(episode)
        >>> batch["t"].tolist(), batch["new_obs"].tolist(), batch["terminateds"].tolist()
        ([0, 1], [[1.0], [2.0]], [False, True])
    """
    builder = SampleBatchBuilder()
    steps = len(episode)
    observations = episode.get_observations()
    infos = episode.get_infos()
    extras = {name: episode.get_extra_model_outputs(name) for name in episode.extra_model_outputs}
    if Columns.ACTION_LOGP in extras and Columns.ACTION_PROB not in extras:
        extras[Columns.ACTION_PROB] = np.exp(np.asarray(extras[Columns.ACTION_LOGP]))
    for step in range(steps):
        last = step == steps - 1
        builder.add_values(**{
            Columns.T: episode.t_started + step, Columns.EPS_ID: episode.id_, "agent_index": 0,
            Columns.OBS: observations[step], Columns.ACTIONS: episode.get_actions(step),
            Columns.REWARDS: episode.get_rewards(step),
            Columns.TERMINATEDS: last and episode.is_terminated,
            Columns.TRUNCATEDS: last and episode.is_truncated,
            Columns.NEXT_OBS: observations[step + 1],
            **({Columns.INFOS: infos[step + 1]} if any(infos[1:]) else {}),
            **{name: values[step] for name, values in extras.items()},
        })
    return builder.build_and_reset()


def _as_array(values: list[Any]) -> np.ndarray:
    if values and isinstance(values[0], dict):  # infos: one dict per row, kept as objects
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array
    array = np.asarray(values)
    return array.astype(np.float32) if array.dtype == np.float64 else array
