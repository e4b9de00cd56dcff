"""``SingleAgentEpisode``: one agent's episode (or chunk of one), with RLlib's API and state."""

from __future__ import annotations

import copy
import time
import uuid
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.episodes.episode_state import PRIVATE_KEYS, episode_state, read_episode_state
from offline_rl.episodes.lookback import Indices, InfiniteLookbackBuffer, as_lookback_buffer

#: The space RLlib gives every rewards buffer.
_REWARD_SPACE = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)

class SingleAgentEpisode:
    """Observations, infos, actions, rewards and extra model outputs of one agent's episode.

    There is always one more observation (and info) than actions and rewards: the reset
    observation comes first, each step adds the action taken, the reward received and the next
    observation. Each column is an ``InfiniteLookbackBuffer`` whose lookback holds steps from
    before ``t_started`` (history of an earlier chunk); ``len(episode)`` counts only the steps
    after it. ``len_lookback_buffer="auto"`` makes all given steps lookback (RLlib's default).
    Columns may also be given as ready buffers, which are used as they are. The constructor does
    not check lengths; ``validate()`` does.

    Examples:
        >>> episode = SingleAgentEpisode(observations=[0, 1, 2, 3], actions=[1, 0, 1],
        ...                              rewards=[1.0, 1.0, 0.5], terminated=True,
        ...                              len_lookback_buffer=0)
        >>> len(episode), episode.get_return(), episode.get_observations(-1)
        (3, 2.5, 3)
        >>> tail = episode.slice(slice(1, 3), len_lookback_buffer=1)
        >>> tail.t_started, tail.get_actions(), tail.get_actions(-1, neg_index_as_lookback=True)
        (1, [0, 1], 1)
        >>> tail.is_terminated
        True
    """

    __slots__ = (
        "_action_space",
        "_last_step_time",
        "_observation_space",
        "_start_time",
        "actions",
        "agent_id",
        "custom_data",
        "extra_model_outputs",
        "id_",
        "infos",
        "is_terminated",
        "is_truncated",
        "module_id",
        "multi_agent_episode_id",
        "observations",
        "rewards",
        "t",
        "t_started",
    )

    def __init__(
        self,
        id_: str | None = None,
        *,
        observations: list | np.ndarray | InfiniteLookbackBuffer | None = None,
        observation_space: gym.Space | None = None,
        infos: list | InfiniteLookbackBuffer | None = None,
        actions: list | np.ndarray | InfiniteLookbackBuffer | None = None,
        action_space: gym.Space | None = None,
        rewards: list | np.ndarray | InfiniteLookbackBuffer | None = None,
        terminated: bool = False,
        truncated: bool = False,
        extra_model_outputs: dict[str, Any] | None = None,
        t_started: int | None = None,
        len_lookback_buffer: int | str = "auto",
        agent_id: Any = None,
        module_id: str | None = None,
        multi_agent_episode_id: str | None = None,
    ):
        self.id_ = id_ or uuid.uuid4().hex
        self.agent_id = agent_id
        self.module_id = module_id
        self.multi_agent_episode_id = multi_agent_episode_id
        num_rewards = 0 if rewards is None else len(rewards)
        if len_lookback_buffer == "auto":
            lookback = num_rewards
        elif isinstance(len_lookback_buffer, (int, np.integer)) and len_lookback_buffer >= 0:
            lookback = min(len_lookback_buffer, num_rewards)
        else:
            raise ValueError(
                f"len_lookback_buffer must be 'auto' or an int >= 0, got {len_lookback_buffer!r}"
            )
        if infos is None:
            source = (observations.data if isinstance(observations, InfiniteLookbackBuffer)
                      else () if observations is None else observations)
            infos = [{} for _ in range(len(source))]
        self.observations = as_lookback_buffer(observations, lookback)
        self.infos = as_lookback_buffer(infos, lookback)
        self.actions = as_lookback_buffer(actions, lookback)
        self.rewards = as_lookback_buffer(rewards, lookback, _REWARD_SPACE)
        self.extra_model_outputs = {key: as_lookback_buffer(values, lookback)
                                    for key, values in (extra_model_outputs or {}).items()}
        self._observation_space = observation_space
        self._action_space = action_space
        if observation_space is not None:
            self.observations.space = observation_space
        if action_space is not None:
            self.actions.space = action_space
        self.is_terminated = terminated
        self.is_truncated = truncated
        self.t_started = t_started or 0
        self.t = self.t_started + len(self.rewards)
        self.custom_data: dict = {}
        self._start_time: float | None = None
        self._last_step_time: float | None = None

    @property
    def observation_space(self) -> gym.Space | None:
        """The observations' space; setting it also sets the observations buffer's space."""
        return self._observation_space

    @observation_space.setter
    def observation_space(self, space: gym.Space | None) -> None:
        self._observation_space = self.observations.space = space

    @property
    def action_space(self) -> gym.Space | None:
        """The actions' space; setting it also sets the actions buffer's space."""
        return self._action_space

    @action_space.setter
    def action_space(self, space: gym.Space | None) -> None:
        self._action_space = self.actions.space = space

    @property
    def is_done(self) -> bool:
        """Whether the episode terminated or was truncated (no more steps can follow)."""
        return bool(self.is_terminated or self.is_truncated)

    @property
    def is_finalized(self) -> bool:
        """Whether ``to_numpy()`` turned the columns into numpy arrays."""
        return self.rewards.finalized

    def __len__(self) -> int:
        """Steps in this chunk (lookback excluded)."""
        return self.t - self.t_started

    def env_steps(self) -> int:
        """Steps in this chunk (lookback excluded), same as ``len(episode)``."""
        return len(self)

    def add_env_reset(self, observation: Any, infos: dict | None = None) -> None:
        """Starts the episode with the observation (and infos) ``env.reset()`` returned."""
        if len(self.observations.data):
            raise ValueError(f"episode {self.id_} already has observations; cannot reset it")
        self.observations.append(observation)
        self.infos.append(infos or {})
        self._start_time = time.perf_counter()

    def add_env_step(self, observation: Any, action: Any, reward: float,
                     infos: dict | None = None, *, terminated: bool = False,
                     truncated: bool = False,
                     extra_model_outputs: dict[str, Any] | None = None) -> None:
        """Adds one ``env.step()``: the action taken, then the reward, next observation and
        infos it returned (and the model outputs that came with the action)."""
        if self.is_done:
            raise ValueError(f"episode {self.id_} is done; no steps can be added")
        if not len(self.observations.data):
            raise ValueError(f"episode {self.id_} has no observation; call add_env_reset first")
        self.observations.append(observation)
        self.actions.append(action)
        self.rewards.append(reward)
        self.infos.append(infos or {})
        for key, value in (extra_model_outputs or {}).items():
            self.extra_model_outputs.setdefault(key, InfiniteLookbackBuffer()).append(value)
        self.t += 1
        self.is_terminated = terminated
        self.is_truncated = truncated
        self._last_step_time = time.perf_counter()
        if self._start_time is None:
            self._start_time = self._last_step_time

    def validate(self) -> None:
        """Raises ``ValueError`` unless the columns have consistent lengths: one more
        observation than actions, as many infos as observations, as many rewards and extra model
        outputs as actions, and ``t - t_started`` steps."""
        num_observations = len(self.observations)
        if len(self.infos) != num_observations:
            raise ValueError(f"episode {self.id_}: {len(self.infos)} infos for "
                             f"{num_observations} observations; expected one per observation")
        steps = max(num_observations - 1, 0)
        columns = {"actions": self.actions, "rewards": self.rewards,
                   **{f"extra_model_outputs[{key!r}]": buffer
                      for key, buffer in self.extra_model_outputs.items()}}
        for name, buffer in columns.items():
            if len(buffer) != steps:
                raise ValueError(
                    f"episode {self.id_}: {len(buffer)} {name} for {num_observations} "
                    f"observations; expected {steps} (one observation more than steps)"
                )
        if len(self) != steps:
            raise ValueError(f"episode {self.id_}: t - t_started = {self.t} - {self.t_started} "
                             f"does not match its {steps} steps")

    def get_observations(self, indices: Indices = None, *, neg_index_as_lookback: bool = False,
                         fill: Any = None, one_hot_discrete: bool = False) -> Any:
        """Observations at ``indices`` (see ``InfiniteLookbackBuffer.get``); all by default."""
        return self.observations.get(indices, neg_index_as_lookback=neg_index_as_lookback,
                                     fill=fill, one_hot_discrete=one_hot_discrete)

    def get_infos(self, indices: Indices = None, *, neg_index_as_lookback: bool = False,
                  fill: Any = None) -> Any:
        """Info dicts at ``indices`` (see ``InfiniteLookbackBuffer.get``); all by default."""
        return self.infos.get(indices, neg_index_as_lookback=neg_index_as_lookback, fill=fill)

    def get_actions(self, indices: Indices = None, *, neg_index_as_lookback: bool = False,
                    fill: Any = None, one_hot_discrete: bool = False) -> Any:
        """Actions at ``indices`` (see ``InfiniteLookbackBuffer.get``); all by default."""
        return self.actions.get(indices, neg_index_as_lookback=neg_index_as_lookback,
                                fill=fill, one_hot_discrete=one_hot_discrete)

    def get_rewards(self, indices: Indices = None, *, neg_index_as_lookback: bool = False,
                    fill: Any = None, one_hot_discrete: bool = False) -> Any:
        """Rewards at ``indices`` (see ``InfiniteLookbackBuffer.get``); all by default."""
        return self.rewards.get(indices, neg_index_as_lookback=neg_index_as_lookback,
                                fill=fill, one_hot_discrete=one_hot_discrete)

    def get_extra_model_outputs(self, key: str, indices: Indices = None, *,
                                neg_index_as_lookback: bool = False, fill: Any = None) -> Any:
        """Extra model outputs named ``key`` at ``indices``; all by default."""
        if key not in self.extra_model_outputs:
            raise KeyError(f"episode {self.id_} has no extra model output {key!r}; it has "
                           f"{sorted(self.extra_model_outputs)}")
        return self.extra_model_outputs[key].get(
            indices, neg_index_as_lookback=neg_index_as_lookback, fill=fill)

    def get_return(self) -> float:
        """Sum of the rewards after the lookback (undiscounted)."""
        return float(np.sum(self.get_rewards()))

    def to_numpy(self) -> SingleAgentEpisode:
        """Finalizes every column into numpy arrays (info dicts stay lists); returns ``self``."""
        for buffer in (self.observations, self.infos, self.actions, self.rewards,
                       *self.extra_model_outputs.values()):
            buffer.finalize()
        return self

    def slice(self, slice_: slice, *, len_lookback_buffer: int | None = None
              ) -> SingleAgentEpisode:
        """A new episode (same ``id_``) of the steps in ``slice_`` (step 1 only).

        Its lookback holds up to ``len_lookback_buffer`` earlier steps (default: this episode's
        lookback), as many as there are. It starts at ``t_started + start`` and keeps the
        terminated/truncated flags only when the slice reaches the end of this episode.
        """
        if slice_.step not in (None, 1):
            raise ValueError(f"episode slices must have step 1, got {slice_.step}")
        if len_lookback_buffer is not None and len_lookback_buffer < 0:
            raise ValueError(f"len_lookback_buffer must be >= 0, got {len_lookback_buffer}")
        start, stop, _ = slice_.indices(len(self))
        stop = max(start, stop)

        def part(buffer: InfiniteLookbackBuffer, extra: int = 0) -> InfiniteLookbackBuffer:
            wanted = buffer.lookback if len_lookback_buffer is None else len_lookback_buffer
            lookback = min(wanted, buffer.lookback + start)
            data = buffer.get(slice(start - lookback, stop + extra), neg_index_as_lookback=True)
            sliced = InfiniteLookbackBuffer(data, lookback=lookback, space=buffer.space)
            sliced.finalized = buffer.finalized
            return sliced

        reaches_end = stop == len(self)
        return SingleAgentEpisode(
            self.id_,
            observations=part(self.observations, 1),
            observation_space=self.observation_space,
            infos=part(self.infos, 1),
            actions=part(self.actions),
            action_space=self.action_space,
            rewards=part(self.rewards),
            extra_model_outputs={key: part(buffer)
                                 for key, buffer in self.extra_model_outputs.items()},
            terminated=self.is_terminated if reaches_end else False,
            truncated=self.is_truncated if reaches_end else False,
            t_started=self.t_started + start,
            agent_id=self.agent_id,
            module_id=self.module_id,
            multi_agent_episode_id=self.multi_agent_episode_id,
        )

    def concat_episode(self, other: SingleAgentEpisode) -> None:
        """Appends the next chunk of this episode (``other``'s steps after its lookback).

        ``other`` must have the same ``id_``, start at ``self.t`` and begin with this episode's
        last observation; ``self`` must not be done. Takes over ``other``'s done flags and
        merges its ``custom_data``.
        """
        if other.id_ != self.id_:
            raise ValueError(f"cannot concat episode {other.id_} to episode {self.id_}")
        if self.is_done:
            raise ValueError(f"episode {self.id_} is done; nothing can be concatenated to it")
        if other.t_started != self.t:
            raise ValueError(f"episode {self.id_} ends at t={self.t}, but the chunk to concat "
                             f"starts at t={other.t_started}")
        if set(other.extra_model_outputs) != set(self.extra_model_outputs):
            raise ValueError(f"episode {self.id_}: chunk has extra model outputs "
                             f"{sorted(other.extra_model_outputs)}, this episode has "
                             f"{sorted(self.extra_model_outputs)}")
        self.validate()
        other.validate()
        if not np.array_equal(self.get_observations(-1), other.get_observations(0)):
            raise ValueError(f"episode {self.id_}: the chunk's first observation is not this "
                             "episode's last observation")
        self.observations.pop()
        self.infos.pop()
        self.observations.extend(other.get_observations())
        self.infos.extend(other.get_infos())
        self.actions.extend(other.get_actions())
        self.rewards.extend(other.get_rewards())
        for key, buffer in self.extra_model_outputs.items():
            buffer.extend(other.get_extra_model_outputs(key))
        self.t = other.t
        self.is_terminated = other.is_terminated
        self.is_truncated = other.is_truncated
        self.custom_data.update(other.custom_data)

    def cut(self, len_lookback_buffer: int = 0) -> SingleAgentEpisode:
        """A new, empty chunk (same ``id_``) continuing at ``self.t`` from the last observation,
        with up to ``len_lookback_buffer`` of this episode's last steps as its lookback."""
        if self.is_done:
            raise ValueError(f"episode {self.id_} is done; it cannot be continued")
        if len_lookback_buffer < 0:
            raise ValueError(f"len_lookback_buffer must be >= 0, got {len_lookback_buffer}")
        last_observations = slice(-len_lookback_buffer - 1, None)
        last_steps = slice(-len_lookback_buffer, None) if len_lookback_buffer else slice(0, 0)
        successor = SingleAgentEpisode(
            self.id_,
            observations=self.get_observations(last_observations),
            observation_space=self.observation_space,
            infos=self.get_infos(last_observations),
            actions=self.get_actions(last_steps),
            action_space=self.action_space,
            rewards=self.get_rewards(last_steps),
            extra_model_outputs={key: self.get_extra_model_outputs(key, last_steps)
                                 for key in self.extra_model_outputs},
            t_started=self.t,
            len_lookback_buffer="auto",
            agent_id=self.agent_id,
            module_id=self.module_id,
            multi_agent_episode_id=self.multi_agent_episode_id,
        )
        successor.custom_data = copy.deepcopy(self.custom_data)
        return successor

    def get_state(self) -> dict[str, Any]:
        """The episode in RLlib's state layout (what RLlib msgpacks into episode files)."""
        return episode_state(self, {key: getattr(self, key) for key in PRIVATE_KEYS})

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SingleAgentEpisode:
        """Rebuilds an episode from ``get_state()`` output or a state RLlib wrote; validates it.

        Raises ``ValueError`` naming the field when the state is malformed.
        """
        fields = read_episode_state(state)
        episode = cls(
            state["id_"],
            observations=fields["observations"],
            infos=fields["infos"],
            actions=fields["actions"],
            rewards=fields["rewards"],
            extra_model_outputs=fields["extra_model_outputs"],
            terminated=state["is_terminated"],
            truncated=state["is_truncated"],
            t_started=state["t_started"],
            agent_id=state["agent_id"],
            module_id=state["module_id"],
            multi_agent_episode_id=state["multi_agent_episode_id"],
        )
        episode._observation_space = fields["_observation_space"]
        episode._action_space = fields["_action_space"]
        episode.t = state["t"]
        episode._start_time = state["_start_time"]
        episode._last_step_time = state["_last_step_time"]
        episode.custom_data = state.get("custom_data") or {}
        episode.validate()
        return episode

    def __repr__(self) -> str:
        return (f"SingleAgentEpisode(id_={self.id_!r}, t_started={self.t_started}, "
                f"len={len(self)}, terminated={bool(self.is_terminated)}, "
                f"truncated={bool(self.is_truncated)}, return={self.get_return():g})")


#: RLlib's type of the episodes connectors and PreLearners handle
#: (``ray.rllib.utils.typing.EpisodeType``); offline-rl's are single-agent.
EpisodeType = SingleAgentEpisode
