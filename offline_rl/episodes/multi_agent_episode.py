"""``MultiAgentEpisode``: one episode of a multi-agent env, kept as a ``SingleAgentEpisode`` per
agent, with RLlib's API and state."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from offline_rl.episodes.agent_steps import ALL, AgentStep, add_env_steps, step_kind
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.lookback import InfiniteLookbackBuffer
from offline_rl.episodes.multi_agent_episode_state import (
    PRIVATE_KEYS,
    SKIP_ENV_TS_TAG,
    multi_agent_episode_state,
    read_multi_agent_episode_state,
)
from offline_rl.names import DEFAULT_MODULE_ID, ModuleID

#: An agent's id; only str and int ids survive msgpack (RLlib's reader takes str only).
AgentID = str | int


def default_agent_to_module(agent_id: AgentID, episode: MultiAgentEpisode) -> ModuleID:
    """RLlib's default mapping: every agent to ``DEFAULT_MODULE_ID``."""
    return DEFAULT_MODULE_ID


class MultiAgentEpisode:
    """One episode (or chunk of one) of a multi-agent env: a ``SingleAgentEpisode`` per agent
    in ``agent_episodes`` and, per agent, ``env_t_to_agent_t``: the agent's step at each env
    step, or ``"S"`` where it did not step.

    Agents need not act at every env step (turn-based games) and may join or leave mid-episode.
    An agent's step runs from one observation of it to the next: the action it took, and the
    rewards it got until that next observation, summed. Until then its action (with its model
    outputs and rewards) is "hanging". An agent's episode starts at its first observation; its
    rewards before that stay in ``_hanging_rewards_begin``, out of its episode (as in RLlib).
    An agent terminated while its action hangs gets its last observation repeated; truncated
    so, it raises (a last observation is needed to bootstrap from). ``"__all__"`` in
    ``terminateds``/``truncateds`` ends the episode for every agent; it also ends once all its
    agents are done: terminated if any of them terminated, else truncated. Errors in a step
    raise ``ValueError`` before anything of the step is recorded.

    The constructor takes RLlib's per-env-step lists of dicts by agent (``observations[0]``
    from the reset, then one entry per step in each list, ``terminateds``/``truncateds`` for
    the last step) and records them as ``add_env_step`` does. The first ``len_lookback_buffer``
    env steps are lookback (all of them with ``"auto"``, RLlib's default).

    Examples:
        >>> episode = MultiAgentEpisode(agent_module_ids={"x": "player", "o": "player"})
        >>> episode.add_env_reset({"x": 0})
        >>> episode.add_env_step({"o": 1}, {"x": 4}, {"x": 0.0})
        >>> episode.add_env_step({"x": 2}, {"o": 0}, {"o": 0.0})
        >>> episode.add_env_step({"x": 3, "o": 3}, {"x": 8}, {"x": 1.0, "o": -1.0},
        ...                      terminateds={"__all__": True})
        >>> len(episode), episode.is_terminated, episode.get_agent_returns()
        (3, True, {'x': 1.0, 'o': -1.0})
        >>> episode.agent_episodes["x"].get_actions(), episode.agent_episodes["o"].get_actions()
        ([4, 8], [0])
        >>> episode.env_t_to_agent_t["o"].get(), episode.module_for("o")
        (['S', 0, 'S', 1], 'player')
        >>> restored = MultiAgentEpisode.from_state(episode.get_state())
        >>> restored.get_observations(-1), restored.agent_episodes["o"].is_terminated
        ({'x': 3, 'o': 3}, True)
    """

    SKIP_ENV_TS_TAG = SKIP_ENV_TS_TAG

    __slots__ = (
        "_agent_to_module_mapping", "_hanging_actions_end", "_hanging_extra_model_outputs_end",
        "_hanging_rewards_begin", "_hanging_rewards_end", "_last_step_time", "_len_lookback",
        "_start_time", "action_space", "agent_episodes", "agent_t_started",
        "agent_to_module_mapping_fn", "custom_data", "env_t", "env_t_started", "env_t_to_agent_t",
        "id_", "is_terminated", "is_truncated", "observation_space",
    )

    def __init__(
        self,
        id_: str | None = None,
        *,
        observations: list[dict] | None = None,
        observation_space: Mapping[AgentID, gym.Space] | None = None,
        infos: list[dict] | None = None,
        actions: list[dict] | None = None,
        action_space: Mapping[AgentID, gym.Space] | None = None,
        rewards: list[dict] | None = None,
        terminateds: dict | bool = False,
        truncateds: dict | bool = False,
        extra_model_outputs: list[dict] | None = None,
        env_t_started: int | None = None,
        agent_t_started: dict[AgentID, int] | None = None,
        len_lookback_buffer: int | str = "auto",
        agent_module_ids: dict[AgentID, ModuleID] | None = None,
        agent_to_module_mapping_fn: Callable[[AgentID, MultiAgentEpisode], ModuleID]
        | None = None,
    ):
        self.id_ = id_ or uuid.uuid4().hex
        self.agent_to_module_mapping_fn = agent_to_module_mapping_fn or default_agent_to_module
        self._agent_to_module_mapping: dict[AgentID, ModuleID] = dict(agent_module_ids or {})
        self.observation_space: dict[AgentID, gym.Space] = dict(observation_space or {})
        self.action_space: dict[AgentID, gym.Space] = dict(action_space or {})
        self.env_t_started = self.env_t = env_t_started or 0
        self.agent_t_started: dict[AgentID, int] = dict(agent_t_started or {})
        self.env_t_to_agent_t: dict[AgentID, InfiniteLookbackBuffer] = {}
        self.agent_episodes: dict[AgentID, SingleAgentEpisode] = {}
        self._hanging_actions_end: dict[AgentID, Any] = {}
        self._hanging_extra_model_outputs_end: dict[AgentID, dict | None] = {}
        self._hanging_rewards_end: dict[AgentID, float] = {}
        self._hanging_rewards_begin: dict[AgentID, float] = {}
        self.is_terminated = self.is_truncated = False
        self.custom_data: dict = {}
        self._start_time: float | None = None
        self._last_step_time: float | None = None
        self._len_lookback = 0
        steps = len(rewards or [])
        if len_lookback_buffer == "auto":
            lookback = steps
        elif isinstance(len_lookback_buffer, int) and len_lookback_buffer >= 0:
            lookback = min(len_lookback_buffer, steps)
        else:
            raise ValueError(
                f"len_lookback_buffer must be 'auto' or an int >= 0, got {len_lookback_buffer!r}"
            )
        if observations:
            add_env_steps(self, observations, infos, actions or [], rewards or [],
                          extra_model_outputs, terminateds, truncateds)
            self._start_at(lookback)
        elif actions or rewards or extra_model_outputs or infos:
            raise ValueError("actions, rewards, infos and extra_model_outputs need observations")

    def _start_at(self, lookback: int) -> None:
        """Makes the first ``lookback`` recorded env steps history before ``env_t_started``
        (and each agent's steps in them its episode's lookback, before its ``t_started``)."""
        self.env_t -= lookback
        self._len_lookback = lookback
        for agent_id, episode in self.agent_episodes.items():
            mapping = self.env_t_to_agent_t[agent_id]
            seen = sum(step != SKIP_ENV_TS_TAG for step in mapping.data[:lookback])
            agent_lookback = min(seen, len(episode.rewards))
            for buffer in (episode.observations, episode.infos, episode.actions, episode.rewards,
                           *episode.extra_model_outputs.values()):
                buffer.lookback = agent_lookback
            episode.t -= agent_lookback
            mapping.data = [step if step == SKIP_ENV_TS_TAG else step - agent_lookback
                            for step in mapping.data]
            mapping.lookback = lookback
        self._start_time = self._last_step_time = None

    @property
    def agent_ids(self) -> set[AgentID]:
        """The agents that have an episode here (got at least one observation)."""
        return set(self.agent_episodes)

    @property
    def is_done(self) -> bool:
        """Whether the episode terminated or was truncated (for all agents)."""
        return bool(self.is_terminated or self.is_truncated)

    def __len__(self) -> int:
        """Env steps in this chunk (lookback excluded)."""
        return self.env_t - self.env_t_started

    def env_steps(self) -> int:
        """Env steps in this chunk (lookback excluded), same as ``len(episode)``."""
        return len(self)

    def agent_steps(self) -> int:
        """Steps of all agents in this chunk together (one env step may hold several)."""
        return sum(len(episode) for episode in self.agent_episodes.values())

    def module_for(self, agent_id: AgentID) -> ModuleID:
        """The module that acts for ``agent_id``: mapped once (``agent_module_ids`` or
        ``agent_to_module_mapping_fn``), then the same for the whole episode."""
        if agent_id not in self._agent_to_module_mapping:
            module_id = self.agent_to_module_mapping_fn(agent_id, self)
            self._agent_to_module_mapping[agent_id] = module_id
        return self._agent_to_module_mapping[agent_id]

    def add_env_reset(self, observations: dict[AgentID, Any],
                      infos: dict[AgentID, dict] | None = None) -> None:
        """Starts the episode with the observations (and infos) by agent ``env.reset()``
        returned; agents without an observation yet may join at a later step."""
        if self.env_t_to_agent_t or len(self):
            raise ValueError(f"episode {self.id_} already has observations; cannot reset it")
        infos = infos or {}
        strays = [agent_id for agent_id in infos if agent_id not in observations]
        if strays:
            raise ValueError(f"episode {self.id_}: reset infos for agents {strays}, which got "
                             "no observation")
        for agent_id, observation in observations.items():
            episode = self._new_agent(agent_id)
            episode.add_env_reset(observation, infos.get(agent_id))
            self.env_t_to_agent_t[agent_id] = InfiniteLookbackBuffer([episode.t])
        self._start_time = time.perf_counter()

    def add_env_step(self, observations: dict[AgentID, Any], actions: dict[AgentID, Any],
                     rewards: dict[AgentID, float], infos: dict[AgentID, dict] | None = None, *,
                     terminateds: dict[AgentID, bool] | None = None,
                     truncateds: dict[AgentID, bool] | None = None,
                     extra_model_outputs: dict[AgentID, dict] | None = None) -> None:
        """Adds one ``env.step()``: the actions (and their model outputs) by agent that went
        in, and the observations, rewards, infos and done flags by agent that came out."""
        if self.is_done:
            raise ValueError(f"episode {self.id_} is done; no steps can be added")
        infos, extras = infos or {}, extra_model_outputs or {}
        terminateds, truncateds = dict(terminateds or {}), dict(truncateds or {})
        all_terminated = bool(terminateds.pop(ALL, False))
        all_truncated = bool(truncateds.pop(ALL, False))
        t = self.env_t + 1
        for name, given, needed, source in (("infos", infos, observations, "an observation"),
                                            ("extra_model_outputs", extras, actions, "an action")):
            strays = [agent_id for agent_id in given if agent_id not in needed]
            if strays:
                raise ValueError(f"episode {self.id_}, env step {t}: {name} for agents {strays} "
                                 f"without {source}")
        agent_ids = dict.fromkeys([*observations, *actions, *rewards, *terminateds, *truncateds])
        if all_terminated or all_truncated:
            agent_ids.update(dict.fromkeys(self.agent_episodes))
        steps = {agent_id: AgentStep(
            observations.get(agent_id), agent_id in observations, actions.get(agent_id),
            agent_id in actions, rewards.get(agent_id), infos.get(agent_id),
            extras.get(agent_id), bool(terminateds.get(agent_id)) or all_terminated,
            bool(truncateds.get(agent_id)) or all_truncated) for agent_id in agent_ids}
        kinds = {agent_id: step_kind(step, self.agent_episodes.get(agent_id),
                                     agent_id in self._hanging_actions_end,
                                     f"episode {self.id_}, env step {t}: agent {agent_id!r}")
                 for agent_id, step in steps.items()}
        self.env_t = t
        stepped = {agent_id for agent_id, kind in kinds.items()
                   if self._apply(agent_id, kind, steps[agent_id])}
        for agent_id, mapping in self.env_t_to_agent_t.items():
            mapping.append(self.agent_episodes[agent_id].t if agent_id in stepped
                           else SKIP_ENV_TS_TAG)
        for agent_id, step in steps.items():
            if step.terminated or step.truncated:
                for hanging in self._hanging():
                    hanging.pop(agent_id, None)
        self._end_if_all_done(all_terminated, all_truncated)
        self._last_step_time = time.perf_counter()
        if self._start_time is None:
            self._start_time = self._last_step_time

    def _apply(self, agent_id: AgentID, kind: str, step: AgentStep) -> bool:
        """Records ``step`` for ``agent_id`` as ``kind`` says; whether the agent got an
        observation (its first, or one that completes its step)."""
        reward = 0.0 if step.reward is None else step.reward
        episode = self.agent_episodes.get(agent_id)
        if kind == "end":
            episode.is_terminated, episode.is_truncated = step.terminated, step.truncated
        elif kind == "first":
            episode = self._new_agent(agent_id)
            episode.add_env_reset(step.observation, step.infos)
            prefix = self._len_lookback + self.env_t - self.env_t_started
            self.env_t_to_agent_t[agent_id] = InfiniteLookbackBuffer(
                [SKIP_ENV_TS_TAG] * prefix, lookback=self._len_lookback)
            self._hanging_rewards_begin[agent_id] = (
                self._hanging_rewards_begin.get(agent_id, 0.0) + reward)
        elif kind == "hang":
            self._hanging_actions_end[agent_id] = step.action
            self._hanging_extra_model_outputs_end[agent_id] = step.extra_model_outputs
            self._hanging_rewards_end[agent_id] = (
                self._hanging_rewards_end.get(agent_id, 0.0) + reward)
        elif kind == "pending" and step.reward is not None:
            pending = (self._hanging_rewards_end if episode is not None
                       else self._hanging_rewards_begin)
            pending[agent_id] = pending.get(agent_id, 0.0) + reward
        elif kind == "complete":
            self._complete(episode, step, reward)
        return kind in ("first", "complete")

    def _complete(self, episode: SingleAgentEpisode, step: AgentStep, reward: Any) -> None:
        """Ends the agent's step: its action (given now or hanging) with the rewards since,
        and its next observation (given now, or its last one again when it terminated)."""
        agent_id = episode.agent_id
        action, extras = step.action, step.extra_model_outputs
        if not step.has_action:
            action = self._hanging_actions_end.pop(agent_id)
            extras = self._hanging_extra_model_outputs_end.pop(agent_id, None)
        reward = self._hanging_rewards_end.pop(agent_id, 0.0) + reward
        observation, infos = step.observation, step.infos
        if not step.has_observation:
            observation, infos = episode.get_observations(-1), episode.get_infos(-1)
        episode.add_env_step(observation, action, reward, infos, terminated=step.terminated,
                             truncated=step.truncated, extra_model_outputs=extras)

    def _new_agent(self, agent_id: AgentID) -> SingleAgentEpisode:
        episode = SingleAgentEpisode(
            agent_id=agent_id,
            module_id=self.module_for(agent_id),
            multi_agent_episode_id=self.id_,
            observation_space=self.observation_space.get(agent_id),
            action_space=self.action_space.get(agent_id),
            t_started=self.agent_t_started.setdefault(agent_id, 0),
        )
        self.agent_episodes[agent_id] = episode
        return episode

    def _end_if_all_done(self, all_terminated: bool, all_truncated: bool) -> None:
        """Sets the episode's flags after a step; a done episode drops all that hangs."""
        self.is_terminated, self.is_truncated = all_terminated, all_truncated
        episodes = self.agent_episodes.values()
        if not self.is_done and episodes and all(episode.is_done for episode in episodes):
            if any(episode.is_terminated for episode in episodes):
                self.is_terminated = True
            else:
                self.is_truncated = True
        if self.is_done:
            for hanging in self._hanging():
                hanging.clear()

    def _hanging(self) -> tuple[dict, ...]:
        """What waits for agents' next observations (or, ``_hanging_rewards_begin``, first)."""
        return (self._hanging_actions_end, self._hanging_extra_model_outputs_end,
                self._hanging_rewards_end, self._hanging_rewards_begin)

    def get_observations(self, index: int = -1) -> dict[AgentID, Any]:
        """The observations by agent at env step ``index`` (0 is ``env_t_started``; negative
        counts from the last step) of the agents that got one then."""
        observations = {}
        for agent_id, mapping in self.env_t_to_agent_t.items():
            agent_t = mapping.get(index)
            if agent_t != SKIP_ENV_TS_TAG:
                episode = self.agent_episodes[agent_id]
                observations[agent_id] = episode.get_observations(
                    int(agent_t) - episode.t_started, neg_index_as_lookback=True)
        return observations

    def get_agents_that_stepped(self) -> set[AgentID]:
        """The agents that got an observation at the last env step (done ones included)."""
        return set(self.get_observations(-1))

    def get_agents_to_act(self) -> set[AgentID]:
        """The agents whose actions the next ``env.step()`` needs: those that got an
        observation at the last env step and are not done."""
        return {agent_id for agent_id in self.get_agents_that_stepped()
                if not self.agent_episodes[agent_id].is_done}

    def get_return(self, include_hanging_rewards: bool = False) -> float:
        """All agents' returns (after the lookback) summed; with ``include_hanging_rewards``,
        also the rewards not yet in any agent's episode."""
        total = sum(self.get_agent_returns().values())
        if include_hanging_rewards:
            total += sum(self._hanging_rewards_begin.values())
            total += sum(self._hanging_rewards_end.values())
        return float(total)

    def get_agent_returns(self) -> dict[AgentID, float]:
        """Each agent's return (after the lookback)."""
        return {agent_id: episode.get_return()
                for agent_id, episode in self.agent_episodes.items()}

    def episodes_by_module(self) -> dict[ModuleID, list[SingleAgentEpisode]]:
        """The agents' episodes grouped by the module that acts for them (what a learner of
        each module trains on)."""
        grouped: dict[ModuleID, list[SingleAgentEpisode]] = {}
        for episode in self.agent_episodes.values():
            grouped.setdefault(episode.module_id, []).append(episode)
        return grouped

    def to_numpy(self) -> MultiAgentEpisode:
        """Finalizes every agent's episode into numpy arrays (see
        ``SingleAgentEpisode.to_numpy``); returns ``self``."""
        for episode in self.agent_episodes.values():
            episode.to_numpy()
        return self

    def get_state(self) -> dict[str, Any]:
        """The episode in RLlib's state layout, as safe data (see ``multi_agent_episode_state``:
        ``agent_to_module_mapping_fn`` is ``None``)."""
        return multi_agent_episode_state(self, {key: getattr(self, key) for key in PRIVATE_KEYS})

    @classmethod
    def from_state(cls, state: dict[str, Any], *,
                   agent_to_module_mapping_fn: Callable[[AgentID, MultiAgentEpisode], ModuleID]
                   | None = None) -> MultiAgentEpisode:
        """Rebuilds an episode from ``get_state()`` output (or RLlib's state, its objects turned
        into data the same way). ``agent_to_module_mapping_fn`` maps agents that join later
        (default: ``default_agent_to_module``).

        Raises ``ValueError`` naming the field when the state is malformed.
        """
        fields = read_multi_agent_episode_state(state)
        episode = cls(fields.pop("id_"), agent_to_module_mapping_fn=agent_to_module_mapping_fn)
        for name, value in fields.items():  # every other slot but _len_lookback
            setattr(episode, name, value)
        mappings = episode.env_t_to_agent_t.values()
        episode._len_lookback = next(iter(mappings)).lookback if mappings else 0
        return episode

    def __repr__(self) -> str:
        return (f"MultiAgentEpisode(id_={self.id_!r}, env_t_started={self.env_t_started}, "
                f"len={len(self)}, agents={sorted(map(str, self.agent_episodes))}, "
                f"terminated={bool(self.is_terminated)}, truncated={bool(self.is_truncated)}, "
                f"return={self.get_return():g})")
