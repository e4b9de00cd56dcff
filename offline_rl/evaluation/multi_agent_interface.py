"""``MultiAgentEnv``: the one interface offline-rl steps multi-agent envs through, in the shape
of RLlib's ``MultiAgentEnv``; ``make_multi_agent_env`` adapts each supported env form to it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym

from offline_rl.episodes.agent_steps import ALL
from offline_rl.episodes.multi_agent_episode import AgentID

#: ``(observations, rewards, terminateds, truncateds, infos)``, each a dict by agent.
StepResult = tuple[dict[AgentID, Any], dict[AgentID, float], dict[AgentID, bool],
                   dict[AgentID, bool], dict[AgentID, dict]]


def set_episode_end(terminateds: dict[AgentID, bool], truncateds: dict[AgentID, bool],
                    over: bool) -> None:
    """Sets ``"__all__"`` in both dicts: both ``False`` while the episode goes on; once it is
    ``over``, ``terminateds["__all__"]`` if every agent that ended at this step terminated, else
    ``truncateds["__all__"]``, so that no truncated agent is marked terminated (and not
    bootstrapped from) by ``"__all__"``.

    Examples:
        >>> terminateds, truncateds = {"a": True, "b": False}, {"a": False, "b": True}
        >>> set_episode_end(terminateds, truncateds, over=True)
        >>> terminateds[ALL], truncateds[ALL]
        (False, True)
    """
    ended = [agent for agent in {**terminateds, **truncateds}
             if agent != ALL and (terminateds.get(agent) or truncateds.get(agent))]
    terminated = over and bool(ended) and all(terminateds.get(agent) for agent in ended)
    terminateds[ALL], truncateds[ALL] = terminated, over and not terminated


def reset_dict_env(env: Any, seed: int | None, options: dict | None
                   ) -> tuple[dict[AgentID, Any], dict[AgentID, dict]]:
    """Resets ``env``, whose ``reset`` returns observations and infos in dicts by agent (RLlib's
    shape, PettingZoo's parallel API); returns copies of them."""
    observations, infos = env.reset(seed=seed, options=options)
    return dict(observations), dict(infos)


class MultiAgentEnv(ABC):
    """A multi-agent env as RLlib shapes one: ``reset(seed=...) -> (observations, infos)`` and
    ``step(actions) -> (observations, rewards, terminateds, truncateds, infos)``, dicts by agent
    id, with ``"__all__"`` in ``terminateds``/``truncateds`` (``True`` in one of them when the
    episode is over); ``observation_spaces``/``action_spaces`` by agent and ``possible_agents``.

    The agents to act at a step (``agents_to_act``) are those that got an observation at the
    previous one and are not done; ``step`` takes exactly their actions and raises
    ``ValueError`` naming the agents otherwise, or when the episode is over (or not yet reset).
    An agent that first shows up mid-episode and is not in ``possible_agents`` gets its spaces
    from the env then (``get_observation_space``/``get_action_space``); those are asked again
    in every episode.

    Subclasses adapt one env form: ``_reset``, ``_step`` and ``_spaces_of`` (and ``close``).
    """

    def __init__(self, possible_agents: Iterable[AgentID]):
        self.possible_agents: list[AgentID] = list(possible_agents)
        self.observation_spaces: dict[AgentID, gym.Space] = {}
        self.action_spaces: dict[AgentID, gym.Space] = {}
        for agent_id in self.possible_agents:
            self._add_spaces(agent_id)
        self._to_act: list[AgentID] | None = None
        self._ended = False

    @property
    def agents_to_act(self) -> list[AgentID]:
        """The agents whose actions the next ``step`` takes (none before ``reset`` and after
        the episode is over)."""
        return list(self._to_act or ())

    def get_observation_space(self, agent_id: AgentID) -> gym.Space:
        """``agent_id``'s observation space."""
        if agent_id not in self.observation_spaces:
            self._add_spaces(agent_id)
        return self.observation_spaces[agent_id]

    def get_action_space(self, agent_id: AgentID) -> gym.Space:
        """``agent_id``'s action space."""
        if agent_id not in self.action_spaces:
            self._add_spaces(agent_id)
        return self.action_spaces[agent_id]

    def _add_spaces(self, agent_id: AgentID) -> None:
        observation_space, action_space = self._spaces_of(agent_id)
        self.observation_spaces[agent_id] = observation_space
        self.action_spaces[agent_id] = action_space

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[dict[AgentID, Any], dict[AgentID, dict]]:
        """Starts an episode; returns the observations and infos by agent."""
        for agent_id in set(self.observation_spaces) - set(self.possible_agents):
            del self.observation_spaces[agent_id], self.action_spaces[agent_id]
        observations, infos = self._reset(seed, options)
        self._ended = False
        self._take_turns(observations, {}, {})
        return observations, infos

    def step(self, actions: Mapping[AgentID, Any]) -> StepResult:
        """Applies the actions of ``agents_to_act``; returns what the env returned, by agent."""
        if self._to_act is None:
            raise ValueError("the episode is over; call reset() to start the next one"
                             if self._ended else "call reset() before step()")
        strays = [agent_id for agent_id in actions if agent_id not in self._to_act]
        if strays:
            raise ValueError(f"actions for agents {strays}, which were not asked to act; the "
                             f"agents to act are {self._to_act}")
        missing = [agent_id for agent_id in self._to_act if agent_id not in actions]
        if missing:
            raise ValueError(f"no actions for agents {missing}, which are to act")
        observations, rewards, terminateds, truncateds, infos = self._step(dict(actions))
        terminateds.setdefault(ALL, False)
        truncateds.setdefault(ALL, False)
        self._take_turns(observations, terminateds, truncateds)
        return observations, rewards, terminateds, truncateds, infos

    def _take_turns(self, observations: dict[AgentID, Any], terminateds: dict[AgentID, bool],
                    truncateds: dict[AgentID, bool]) -> None:
        """Notes the spaces of agents new to the episode and who acts next."""
        for agent_id in observations:
            self.get_observation_space(agent_id)
        self._ended = bool(terminateds.get(ALL) or truncateds.get(ALL))
        self._to_act = None if self._ended else [
            agent_id for agent_id in observations
            if not (terminateds.get(agent_id) or truncateds.get(agent_id))]

    @abstractmethod
    def _reset(self, seed: int | None, options: dict | None
               ) -> tuple[dict[AgentID, Any], dict[AgentID, dict]]:
        """Resets the adapted env: observations and infos by agent."""

    @abstractmethod
    def _step(self, actions: dict[AgentID, Any]) -> StepResult:
        """Steps the adapted env with checked actions; ``"__all__"`` may be left out while the
        episode goes on."""

    @abstractmethod
    def _spaces_of(self, agent_id: AgentID) -> tuple[gym.Space, gym.Space]:
        """``agent_id``'s observation and action spaces, as the adapted env gives them."""

    @abstractmethod
    def close(self) -> None:
        """Closes the adapted env."""
