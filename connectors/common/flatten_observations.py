"""``FlattenObservations``: observations of any space as one float vector each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from connectors.connector_v2 import ConnectorV2
from offline_rl.columns import Columns
from offline_rl.errors import ConfigError, DataFormatError


def flattened_space(space: gym.Space) -> gym.spaces.Box:
    """The ``Box`` that ``flatten_observation`` maps ``space``'s values into: ``flatdim``
    unbounded float32 features (as RLlib's ``FlattenObservations`` declares it)."""
    return gym.spaces.Box(-np.inf, np.inf, (int(gym.spaces.flatdim(space)),), np.float32)


def flatten_observation(space: gym.Space, observation: Any) -> np.ndarray:
    """One observation of ``space`` as a float32 vector, by gymnasium's ``flatten``: a
    ``Box`` flattened, a ``Discrete`` one-hot, a ``MultiDiscrete`` one one-hot per component,
    ``Dict`` parts in the space's key order and ``Tuple`` parts in order, concatenated. A
    ``Tuple``'s value may be a list (as msgpack reads a tuple back).

    Examples:
        >>> space = gym.spaces.Dict(a=gym.spaces.Discrete(3), b=gym.spaces.Box(0, 1, (2,)))
        >>> flatten_observation(space, {"a": 1, "b": [0.5, 0.25]}).tolist()
        [0.0, 1.0, 0.0, 0.5, 0.25]
    """
    return np.asarray(gym.spaces.flatten(space, observation), np.float32)


class FlattenObservations(ConnectorV2):
    """Adds ``obs`` and ``new_obs`` with each observation flattened into one float vector
    (``flatten_observation``): for ``Dict``, ``Tuple`` (nested or not), ``MultiDiscrete`` or
    shaped ``Box`` observations the default module reads as a ``Box``. Place it before the
    default pieces (``config.training(learner_connector=FlattenObservations)``), which then
    keep its columns; the module's observation space is its ``observation_space``
    (``recompute_output_observation_space``), which the algorithm builds the module with.
    ``keys_to_remove`` drops top-level keys of a ``Dict`` observation first.

    Examples:
        >>> from offline_rl import SingleAgentEpisode
        >>> space = gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (1,))])
        >>> episode = SingleAgentEpisode(observations=[(0, [0.5]), (1, [1.0])], actions=[0],
        ...                              rewards=[1.0], len_lookback_buffer=0)
        >>> piece = FlattenObservations(space)
        >>> batch = piece(rl_module=None, batch={}, episodes=[episode])
        >>> batch["obs"][0].tolist(), batch["new_obs"][0].tolist()
        ([[1.0, 0.0, 0.5]], [[0.0, 1.0, 1.0]])
        >>> piece.observation_space
        Box(-inf, inf, (3,), float32)
    """

    needs_episodes = True

    def __init__(self, input_observation_space: gym.Space | None = None,
                 input_action_space: gym.Space | None = None, *,
                 as_learner_connector: bool = True, keys_to_remove: Sequence[str] | None = None,
                 **kwargs: Any):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        if not as_learner_connector:
            raise ConfigError("FlattenObservations(as_learner_connector=False): offline-rl "
                              "runs it in the learner pipeline only (evaluation flattens the "
                              "env's observations the same way by itself); leave it out")
        self.keys_to_remove = tuple(keys_to_remove or ())
        if self.keys_to_remove and not isinstance(input_observation_space, gym.spaces.Dict):
            raise ConfigError(f"FlattenObservations keys_to_remove={list(self.keys_to_remove)} "
                              "needs a Dict observation space; the observation space is "
                              f"{input_observation_space}")

    def _kept_space(self, space: gym.Space) -> gym.Space:
        """``space`` less ``keys_to_remove``."""
        if not self.keys_to_remove:
            return space
        return gym.spaces.Dict({key: part for key, part in space.spaces.items()
                                if key not in self.keys_to_remove})

    def recompute_output_observation_space(self, input_observation_space: gym.Space | None,
                                           input_action_space: gym.Space | None
                                           ) -> gym.Space | None:
        """The flat ``Box`` of the kept observation space (``None`` without one)."""
        if input_observation_space is None:
            return None
        return flattened_space(self._kept_space(input_observation_space))

    def _flatten_all(self, space: gym.Space, observations: list[Any],
                     episode_id: str) -> np.ndarray:
        if self.keys_to_remove:
            observations = [{key: value for key, value in observation.items()
                             if key not in self.keys_to_remove} for observation in observations]
        try:
            return np.stack([flatten_observation(space, observation)
                             for observation in observations])
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise DataFormatError(
                f"episode {episode_id}: an observation does not fit the observation space "
                f"{space} ({type(error).__name__}: {error}); set "
                "config.environment(observation_space=...) to the data's space") from None

    def __call__(self, *, rl_module, batch, episodes, **kwargs):
        for episode in self.single_agent_episode_iterator(episodes):
            space = self.input_observation_space or episode.observation_space
            if space is None:
                raise ConfigError("FlattenObservations needs the observation space: set "
                                  "config.environment(observation_space=...)")
            flat = self._flatten_all(self._kept_space(space),
                                     list(episode.get_observations(slice(0, len(episode) + 1))),
                                     episode.id_)
            self.add_n_batch_items(batch, Columns.OBS, flat[:-1], len(episode), episode)
            self.add_n_batch_items(batch, Columns.NEXT_OBS, flat[1:], len(episode), episode)
        return batch
