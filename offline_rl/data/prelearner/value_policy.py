"""``ValuePolicy``: the value checks a PreLearner applies to tabular transitions and episodes
alike, under the configured policies."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.columns import Columns
from offline_rl.data.prelearner.data_ledger import LedgerClient
from offline_rl.data.source.data_config import DataConfig
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.errors import ConfigError
from offline_rl.formats.checks import (
    bound_actions,
    check_actions,
    check_column_types,
    nonfinite_error,
    nonfinite_rows,
    obs_bounds_error,
    observations_as_space_dtype,
    observations_outside,
    row_number,
    unsquash_actions,
)
from offline_rl.formats.composite import conform_structures, flat_values, is_composite
from offline_rl.formats.shapes import conform_columns


class ValuePolicy:
    """The checks of ``offline_rl.formats.checks`` on the values a PreLearner reads, with the
    config's policies: NaN or inf in observations, actions or rewards (``input_nonfinite``),
    observations outside a ``Box`` observation space (``input_obs_bounds``), ``Box`` actions
    outside the action space (``input_action_bounds``). Each finding raises or is dropped
    (rows of transitions, whole episodes) and counted into ``ledger``, as the policy says;
    values of the wrong type or shape always raise. Messages name ``where`` the values were
    read and ``place(row)`` the row.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from offline_rl import BCConfig
        >>> from offline_rl.errors import DataFormatError
        >>> spaces = (gym.spaces.Box(-1, 1, (1,), np.float32), gym.spaces.Discrete(2))
        >>> config = BCConfig().offline_data(input_nonfinite="drop").data_config(spaces)
        >>> policy = ValuePolicy(config, spaces, LedgerClient(None))
        >>> columns = {"obs": np.array([[0.0], [np.nan]], np.float32),
        ...            "new_obs": np.array([[0.5], [0.5]], np.float32),
        ...            "actions": np.array([0, 1]), "rewards": np.array([1.0, 1.0])}
        >>> policy.transitions(columns, "rows read")["actions"]
        array([0])
        >>> strict = ValuePolicy(BCConfig().data_config(spaces), spaces, LedgerClient(None))
        >>> try:
        ...     strict.transitions(columns, "rows read")
        ... except DataFormatError as error:
        ...     print(str(error)[:50])
        rows read: column 'obs' holds NaN or inf in row 1
    """

    def __init__(self, config: DataConfig, spaces: tuple[gym.Space, gym.Space],
                 ledger: LedgerClient) -> None:
        self.config = config
        self.spaces = spaces
        self.observation_space, self.action_space = spaces
        self.ledger = ledger
        self.unsquash = config.offline_data.input_actions_normalized
        if self.unsquash and not isinstance(self.action_space, gym.spaces.Box):
            raise ConfigError(f"input_actions_normalized=True unsquashes Box actions, but the "
                              f"action space is {self.action_space}; unset it")

    def transitions(self, columns: dict[str, Any], where: str,
                    place: Callable[[int], str] = row_number) -> dict[str, Any]:
        """Train columns of single transitions (``obs``, ``new_obs``, ``actions``,
        ``rewards`` and others, one row each), checked: actions and rewards conformed to the
        spaces (observations keep the connectors' shapes, stacked frames say), and the rows
        the policies drop left out and counted (``nonfinite_rows``, ``out_of_bounds_rows``)."""
        columns.update(conform_columns({name: columns[name] for name in (Columns.ACTIONS,
                                                                          Columns.REWARDS)},
                                       self.spaces, where))
        values = {name: np.asarray(columns[name])
                  for name in (Columns.OBS, Columns.NEXT_OBS, Columns.ACTIONS, Columns.REWARDS)}
        check_column_types(values, where)
        bad = self._nonfinite(values, where, place)
        columns[Columns.ACTIONS] = self._bound_actions(values.pop(Columns.ACTIONS), where, place)
        outside = self._outside({name: values[name] for name in (Columns.OBS, Columns.NEXT_OBS)},
                                where, place, exempt=bad)
        if not (bad.any() or outside.any()):
            return columns
        self.ledger.count({"nonfinite_rows": int(bad.sum()),
                           "out_of_bounds_rows": int(outside.sum())})
        keep = ~(bad | outside)
        return {name: np.asarray(value)[keep] for name, value in columns.items()}

    def conform_episode(self, episode: SingleAgentEpisode, where: str) -> None:
        """Conforms the episode's observations, actions and rewards to the spaces, in place
        (shapes, and the observation space's dtype; ``Dict``/``Tuple`` values rebuilt as
        their space's structures), raising on values of the wrong type, and applies
        ``input_action_bounds`` to its actions."""
        columns = {Columns.OBS: episode.observations.data,
                   Columns.ACTIONS: episode.actions.data, Columns.REWARDS: episode.rewards.data}
        spaces = {Columns.OBS: self.observation_space, Columns.ACTIONS: self.action_space}
        structured = {name: conform_structures(columns.pop(name), space, name, where)
                      for name, space in spaces.items() if is_composite(space)}
        shaped = conform_columns(columns, self.spaces, where)
        if Columns.OBS in shaped:
            shaped[Columns.OBS] = observations_as_space_dtype(
                shaped[Columns.OBS], self.observation_space, where)
        check_column_types(shaped, where)
        shaped.update(structured)
        episode.observations.data = shaped[Columns.OBS]
        episode.rewards.data = shaped[Columns.REWARDS]
        actions = shaped[Columns.ACTIONS]
        episode.actions.data = (actions if Columns.ACTIONS in structured
                                else self._bound_actions(actions, where))

    def episode_drop_reason(self, episode: SingleAgentEpisode, where: str) -> str | None:
        """Why the policies drop a (conformed) episode: ``"nonfinite_episodes"`` (its
        observations, else its rewards, hold NaN or inf) or ``"out_of_bounds_episodes"``;
        ``None`` to keep it. Raises instead where a policy is ``"raise"``."""
        observations = {Columns.OBS: self._numbers(episode.observations.data,
                                                   self.observation_space)}
        for values in (observations,
                       {Columns.ACTIONS: self._numbers(episode.actions.data, self.action_space)},
                       {Columns.REWARDS: episode.rewards.data}):
            if self._nonfinite(values, where).any():
                return "nonfinite_episodes"
        if self._outside(observations, where).any():
            return "out_of_bounds_episodes"
        return None

    @staticmethod
    def _numbers(values: Any, space: gym.Space | None) -> np.ndarray:
        """``values`` as one array: as they are, or ``Dict``/``Tuple`` structures flattened."""
        return flat_values(values, space) if is_composite(space) else values

    def _bound_actions(self, actions: np.ndarray, where: str,
                       place: Callable[[int], str] = row_number) -> np.ndarray:
        """Checks the actions (unsquashed first with ``input_actions_normalized``); applies
        ``input_action_bounds`` to ``Box`` actions outside the space and counts them
        (``actions_out_of_bounds``)."""
        if self.unsquash:
            actions = unsquash_actions(actions, self.action_space)
        outside = check_actions(actions, self.action_space, where)
        if not outside.any():
            return actions
        self.ledger.count({"actions_out_of_bounds": int(outside.sum())})
        return bound_actions(actions, outside, self.action_space,
                             self.config.offline_data.input_action_bounds, where, place)

    def _nonfinite(self, values: Mapping[str, np.ndarray], where: str,
                   place: Callable[[int], str] = row_number) -> np.ndarray:
        """The rows where ``values`` (columns of equal length) hold NaN or inf, to drop; raises
        on the first under ``input_nonfinite="raise"``."""
        bad = nonfinite_rows(values)
        if bad.any() and self.config.offline_data.input_nonfinite == "raise":
            raise nonfinite_error(values, bad, where, place)
        return bad

    def _outside(self, observations: Mapping[str, np.ndarray], where: str,
                 place: Callable[[int], str] = row_number,
                 exempt: np.ndarray | None = None) -> np.ndarray:
        """The rows, other than ``exempt`` ones, where ``observations`` lie outside the
        observation space, to drop; raises on the first under ``input_obs_bounds="raise"``."""
        outside = observations_outside(observations, self.observation_space)
        if exempt is not None:
            outside &= ~exempt
        if outside.any() and self.config.offline_data.input_obs_bounds == "raise":
            raise obs_bounds_error(observations, outside, self.observation_space, where, place)
        return outside
