"""Two small multi-agent envs of offline-rl's own, in RLlib's ``MultiAgentEnv`` shape, for tests
and reference datasets: ``MultiAgentCartPole`` (agents act at once, each in its own CartPole) and
``AlternatingCartPole`` (two agents take turns in one CartPole). Both are creators
``env_config -> env`` for ``make_multi_agent_env``; ``env_config`` is passed on to
``gymnasium.make("CartPole-v1", ...)`` (e.g. ``max_episode_steps``), less ``num_agents``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from offline_rl.episodes.agent_steps import ALL
from offline_rl.evaluation.multi_agent_interface import StepResult, set_episode_end

CARTPOLE = "CartPole-v1"


def _check_actors(actions: Mapping[str, Any], actors: list[str]) -> None:
    """Raises ``ValueError`` unless ``actions`` holds exactly the actions of ``actors`` (and an
    episode is running)."""
    if not actors:
        raise ValueError("no episode is running; call reset()")
    if set(actions) != set(actors):
        raise ValueError(f"actions for agents {sorted(actions)}; the agents to act are {actors}")


class MultiAgentCartPole:
    """``num_agents`` (default 2) independent CartPole-v1 copies stepped together, one per agent
    ``"agent_0"`` .. ``"agent_{N-1}"``. Each agent acts while its pole is up and leaves with its
    own ``terminated`` (the pole fell) or ``truncated`` (the step limit); the episode is over
    (``"__all__"``) when all have left. ``reset(seed=s)`` seeds the copies with distinct seeds
    drawn from ``numpy.random.SeedSequence(s)``, the same for the same ``s``.

    Examples:
        >>> env = MultiAgentCartPole({"num_agents": 2, "max_episode_steps": 2})
        >>> observations, _ = env.reset(seed=0)
        >>> bool((observations["agent_0"] != observations["agent_1"]).all())
        True
        >>> env.step({"agent_0": 0, "agent_1": 1})[3]
        {'agent_0': False, 'agent_1': False, '__all__': False}
        >>> env.step({"agent_0": 0, "agent_1": 1})[3]
        {'agent_0': True, 'agent_1': True, '__all__': True}
    """

    def __init__(self, env_config: Mapping[str, Any] | None = None):
        config = dict(env_config or {})
        num_agents = config.pop("num_agents", 2)
        self._envs = {f"agent_{i}": gym.make(CARTPOLE, **config) for i in range(num_agents)}
        self.possible_agents = list(self._envs)
        self.agents: list[str] = []
        self.observation_spaces = {agent: env.observation_space
                                   for agent, env in self._envs.items()}
        self.action_spaces = {agent: env.action_space for agent, env in self._envs.items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        """Resets every copy; all agents act first."""
        seeds = [None] * len(self._envs) if seed is None else [
            int(child.generate_state(1)[0])
            for child in np.random.SeedSequence(seed).spawn(len(self._envs))]
        observations, infos = {}, {}
        for (agent, env), agent_seed in zip(self._envs.items(), seeds):
            observations[agent], infos[agent] = env.reset(seed=agent_seed, options=options)
        self.agents = list(self.possible_agents)
        return observations, infos

    def step(self, actions: Mapping[str, int]) -> StepResult:
        """Steps the copy of every agent still in the episode with its action."""
        _check_actors(actions, self.agents)
        observations, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        for agent in self.agents:
            (observations[agent], reward, terminateds[agent], truncateds[agent],
             infos[agent]) = self._envs[agent].step(actions[agent])
            rewards[agent] = float(reward)
        self.agents = [agent for agent in self.agents
                       if not (terminateds[agent] or truncateds[agent])]
        set_episode_end(terminateds, truncateds, over=not self.agents)
        return observations, rewards, terminateds, truncateds, infos

    def close(self) -> None:
        """Closes the copies."""
        for env in self._envs.values():
            env.close()


class AlternatingCartPole:
    """Two agents, ``"agent_0"`` and ``"agent_1"``, take turns pushing one CartPole-v1 cart,
    ``"agent_0"`` first: a step takes the action of the agent whose turn it is, gives it the
    step's reward and the other agent the observation. When the pole falls (or the step limit
    is reached) both agents get the last observation and are done (``"__all__"``).

    Examples:
        >>> env = AlternatingCartPole()
        >>> list(env.reset(seed=0)[0])
        ['agent_0']
        >>> observations, rewards, terminateds, _, _ = env.step({"agent_0": 1})
        >>> list(observations), rewards, terminateds
        (['agent_1'], {'agent_0': 1.0}, {'__all__': False})
    """

    def __init__(self, env_config: Mapping[str, Any] | None = None):
        self._env = gym.make(CARTPOLE, **dict(env_config or {}))
        self.possible_agents = ["agent_0", "agent_1"]
        self.observation_spaces = dict.fromkeys(self.possible_agents, self._env.observation_space)
        self.action_spaces = dict.fromkeys(self.possible_agents, self._env.action_space)
        self.agents: list[str] = []
        self._turn = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        """Resets the cart; ``"agent_0"`` acts first."""
        observation, info = self._env.reset(seed=seed, options=options)
        self.agents, self._turn = list(self.possible_agents), 0
        return {self.agents[0]: observation}, {self.agents[0]: info}

    def step(self, actions: Mapping[str, int]) -> StepResult:
        """Pushes the cart as the agent whose turn it is says; the turn passes."""
        actor = self.possible_agents[self._turn]
        _check_actors(actions, [actor] if self.agents else [])
        observation, reward, terminated, truncated, info = self._env.step(actions[actor])
        rewards = {actor: float(reward)}
        if terminated or truncated:
            observations = dict.fromkeys(self.agents, observation)
            infos = {agent: dict(info) for agent in self.agents}
            terminateds = dict.fromkeys(self.agents, terminated)
            truncateds = dict.fromkeys(self.agents, truncated)
            self.agents = []
            set_episode_end(terminateds, truncateds, over=True)
            return observations, rewards, terminateds, truncateds, infos
        self._turn = 1 - self._turn
        other = self.possible_agents[self._turn]
        return {other: observation}, rewards, {ALL: False}, {ALL: False}, {other: info}

    def close(self) -> None:
        """Closes the cart's env."""
        self._env.close()
