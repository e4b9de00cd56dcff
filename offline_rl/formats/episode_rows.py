"""One episode's rows -> a ``SingleAgentEpisode``: the one place where a run of transitions
(tabular rows, a SampleBatch's steps, a converter's groups) becomes an episode.

Examples:
    >>> import numpy as np
    >>> from offline_rl.columns import SCHEMA
    >>> rows = {"obs": np.array([[0.0], [1.0]]), "new_obs": np.array([[1.0], [2.0]]),
    ...         "actions": np.array([1, 0]), "rewards": np.array([1.0, 0.5]),
    ...         "terminateds": np.array([False, True]), "action_logp": np.array([-0.1, -0.2])}
    >>> episode = episode_from_rows(rows, SCHEMA, eps_id="7", t_started=0,
    ...                             extras=extra_columns(rows, SCHEMA))
    >>> episode.get_observations().tolist(), episode.is_terminated
    ([[0.0], [1.0], [2.0]], True)
    >>> list(episode.extra_model_outputs)
    ['action_logp']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.columns import Columns
from offline_rl.episodes.episode import SingleAgentEpisode

#: The legacy done flag of RLlib's old stack: read as ``terminateds``, never truncated.
DONES = "dones"


def episode_from_rows(rows: Mapping[str, np.ndarray], schema: Mapping[str, str], *,
                      eps_id: str | None, t_started: int | None, extras: Iterable[str] = (),
                      infos: Sequence[Any] | None = None,
                      observation_space: gym.Space | None = None,
                      action_space: gym.Space | None = None) -> SingleAgentEpisode:
    """The episode of ``rows`` (one per step, in step order; fields read through ``schema``):
    the observations are each row's ``obs`` and the last row's ``new_obs``; done flags come from
    the last row (``terminateds``/``truncateds``, or legacy ``dones``); the ``extras`` columns
    become extra model outputs; ``infos`` (one per row, non-dicts read as ``{}``) follow the
    reset's empty info."""
    terminateds, truncateds = done_flags(rows, schema)
    observations = rows[schema[Columns.OBS]]
    return SingleAgentEpisode(
        eps_id,
        observations=np.concatenate([observations, rows[schema[Columns.NEXT_OBS]][-1:]]),
        observation_space=observation_space,
        infos=None if infos is None else [{}, *(i if isinstance(i, dict) else {} for i in infos)],
        actions=rows[schema[Columns.ACTIONS]],
        action_space=action_space,
        rewards=rows[schema[Columns.REWARDS]],
        terminated=bool(terminateds[-1]),
        truncated=bool(truncateds[-1]),
        extra_model_outputs={name: rows[name] for name in extras},
        t_started=t_started,
        len_lookback_buffer=0,
    ).to_numpy()


def done_flags(rows: Mapping[str, np.ndarray],
               schema: Mapping[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``terminateds`` and ``truncateds`` (legacy ``dones``: terminated)."""
    if schema[Columns.TERMINATEDS] in rows:
        terminateds = rows[schema[Columns.TERMINATEDS]].astype(bool, copy=False)
        truncated_column = rows.get(schema[Columns.TRUNCATEDS])
        truncateds = (np.zeros(len(terminateds), dtype=bool) if truncated_column is None
                      else truncated_column.astype(bool, copy=False))
    else:
        terminateds = rows[schema[DONES]].astype(bool, copy=False)
        truncateds = np.zeros(len(terminateds), dtype=bool)
    return terminateds, truncateds


def extra_columns(rows: Iterable[str], schema: Mapping[str, str]) -> list[str]:
    """The columns the schema does not map: each episode's extra model outputs."""
    mapped = set(schema.values())
    return [name for name in rows if name not in mapped]


def as_id(value: Any) -> str:
    """An episode id value (bytes, str or number) as the str episodes use."""
    return value.decode() if isinstance(value, bytes) else str(value)
