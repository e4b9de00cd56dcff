"""Logged episodes as off-policy estimators read them: per step the observation, action,
reward, next observation and the behaviour policy's probability of the action."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from offline_rl.columns import Columns
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import DataFormatError

#: How to fix data without the behaviour policy's action probabilities.
NO_PROBABILITIES_FIX = (
    "off-policy estimation weighs each logged action by the target policy's probability over "
    "the behaviour policy's, so record the data with the policy's action_logp (offline-rl "
    "record and RLlib's output do) or add an action_prob column")

#: The columns of logged steps that must be there, and all those read.
REQUIRED_COLUMNS = (Columns.EPS_ID, Columns.OBS, Columns.ACTIONS, Columns.REWARDS,
                    Columns.NEXT_OBS, Columns.TERMINATEDS)
STEP_COLUMNS = (*REQUIRED_COLUMNS, Columns.T, Columns.ACTION_LOGP, Columns.ACTION_PROB)


@dataclass(frozen=True)
class LoggedEpisode:
    """One episode's steps: ``obs``, ``actions``, ``rewards``, ``next_obs``,
    ``behaviour_prob`` (the logging policy's probability, or density, of each action) and
    ``terminated`` (whether the episode ended in a terminal state; if not, values bootstrap
    from its last ``next_obs``)."""

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    behaviour_prob: np.ndarray
    terminated: bool

    def __len__(self) -> int:
        return len(self.rewards)

    def discounted_return(self, gamma: float) -> float:
        """The sum of ``gamma ** t * reward_t``."""
        return float(np.sum(self.rewards * gamma ** np.arange(len(self))))


def logged_episodes(data: Sequence[SingleAgentEpisode | LoggedEpisode] | SingleAgentEpisode
                    | Mapping[str, Any]) -> list[LoggedEpisode]:
    """``data`` as ``LoggedEpisode``s (which pass as they are): one or a sequence of
    ``SingleAgentEpisode`` (with
    ``action_logp`` or ``action_prob`` among their extra model outputs), or columns of steps
    (``obs``, ``actions``, ``rewards``, ``new_obs``, ``terminateds``, ``eps_id`` and
    ``action_logp`` or ``action_prob``; episodes in the order their first rows come, the steps
    of each in order of ``t`` when given).
    Raises ``DataFormatError`` naming what is missing.

    Examples:
        >>> steps = {"eps_id": ["a", "a", "b"], "obs": [[0.0], [1.0], [0.0]],
        ...          "actions": [0, 1, 1], "rewards": [1.0, 2.0, 3.0],
        ...          "new_obs": [[1.0], [2.0], [1.0]], "terminateds": [False, True, True],
        ...          "action_prob": [0.5, 0.5, 0.5]}
        >>> [(len(e), e.discounted_return(0.5), e.terminated) for e in logged_episodes(steps)]
        [(2, 2.0, True), (1, 3.0, True)]
    """
    if isinstance(data, Mapping):
        return _episodes_of_steps(data)
    if isinstance(data, SingleAgentEpisode):
        data = [data]
    return [episode if isinstance(episode, LoggedEpisode) else _episode_of(episode, i)
            for i, episode in enumerate(data)]


def _behaviour_prob(values: Mapping[str, Any], where: str) -> np.ndarray:
    if Columns.ACTION_PROB in values:
        return np.asarray(values[Columns.ACTION_PROB], dtype=np.float64).reshape(-1)
    if Columns.ACTION_LOGP in values:
        return np.exp(np.asarray(values[Columns.ACTION_LOGP], dtype=np.float64).reshape(-1))
    raise DataFormatError(f"{where} has neither {Columns.ACTION_LOGP!r} nor "
                          f"{Columns.ACTION_PROB!r}; {NO_PROBABILITIES_FIX}")


def _episode_of(episode: SingleAgentEpisode, index: int) -> LoggedEpisode:
    where = f"episode {index} (id {episode.id_!r})"
    outputs = {key: episode.get_extra_model_outputs(key)
               for key in (Columns.ACTION_PROB, Columns.ACTION_LOGP)
               if key in episode.extra_model_outputs}
    observations = np.asarray(episode.get_observations(), dtype=np.float64)
    return _checked(LoggedEpisode(
        obs=observations[:-1], actions=np.asarray(episode.get_actions()),
        rewards=np.asarray(episode.get_rewards(), dtype=np.float64),
        next_obs=observations[1:], behaviour_prob=_behaviour_prob(outputs, where),
        terminated=bool(episode.is_terminated)), where)


def _episodes_of_steps(columns: Mapping[str, Any]) -> list[LoggedEpisode]:
    required = list(REQUIRED_COLUMNS)
    missing = [name for name in required if name not in columns]
    if missing:
        raise DataFormatError(f"the logged steps lack the columns {missing}; off-policy "
                              f"estimation reads {required} and {Columns.ACTION_LOGP!r} or "
                              f"{Columns.ACTION_PROB!r}")
    behaviour_prob = _behaviour_prob(columns, "the logged steps")
    eps_ids = np.asarray(columns[Columns.EPS_ID])
    order = (np.lexsort((np.asarray(columns[Columns.T]), eps_ids)) if Columns.T in columns
             else np.argsort(eps_ids, kind="stable"))
    first_seen = {eps_id: i for i, eps_id in reversed(list(enumerate(eps_ids.tolist())))}
    arrays = {name: np.asarray(columns[name])[order] for name in required[1:]}
    behaviour_prob, eps_ids = behaviour_prob[order], eps_ids[order]
    starts = np.flatnonzero(np.r_[True, eps_ids[1:] != eps_ids[:-1]])
    ids = eps_ids.tolist()
    # In the order the rows came, as an episode input gives them (a fitted model sees the same).
    bounds = sorted(zip(starts, [*starts[1:], len(ids)], strict=True),
                    key=lambda bound: first_seen[ids[bound[0]]])
    return [_checked(LoggedEpisode(
        obs=arrays[Columns.OBS][start:end].astype(np.float64),
        actions=arrays[Columns.ACTIONS][start:end],
        rewards=arrays[Columns.REWARDS][start:end].astype(np.float64),
        next_obs=arrays[Columns.NEXT_OBS][start:end].astype(np.float64),
        behaviour_prob=behaviour_prob[start:end],
        terminated=bool(arrays[Columns.TERMINATEDS][end - 1])),
        f"episode {ids[start]!r}") for start, end in bounds]


def _checked(episode: LoggedEpisode, where: str) -> LoggedEpisode:
    if not len(episode):
        raise DataFormatError(f"{where} has no steps; off-policy estimation values episodes "
                              "from their first step")
    bad = np.flatnonzero(~(episode.behaviour_prob > 0) | ~np.isfinite(episode.behaviour_prob))
    if len(bad):
        raise DataFormatError(f"{where}: step {bad[0]} has behaviour probability "
                              f"{episode.behaviour_prob[bad[0]]}; importance weights need the "
                              f"logging policy's probability of each action to be > 0")
    return episode
