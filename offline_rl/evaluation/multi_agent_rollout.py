"""Playing a batch policy per module in multi-agent envs stepped side by side, episode by
episode, and the returns of the episodes by agent and by module (RLlib's metric names).

Examples:
    >>> import numpy as np
    >>> from offline_rl.evaluation.multi_agent_cartpole import MultiAgentCartPole
    >>> from offline_rl.evaluation.multi_agent_env import make_multi_agent_env
    >>> envs = [make_multi_agent_env(MultiAgentCartPole) for _ in range(2)]
    >>> push_left = lambda obs: (np.zeros(len(obs), dtype=np.int64), {})
    >>> episodes = list(multi_agent_rollout(envs, {"cart": push_left}, {"agent_0": "cart",
    ...                                    "agent_1": "cart"}, 3, seed=0))
    >>> len(episodes), all(episode.is_done for episode in episodes)
    (3, True)
    >>> statistics = multi_agent_episode_statistics(episodes)
    >>> sorted(statistics["agent_episode_returns_mean"]), list(
    ...     statistics["module_episode_returns_mean"])
    (['agent_0', 'agent_1'], ['cart'])
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from offline_rl.episodes.multi_agent_episode import AgentID, MultiAgentEpisode
from offline_rl.errors import ConfigError
from offline_rl.evaluation.env_limits import EpisodeLimits, env_reset, env_step
from offline_rl.evaluation.multi_agent_interface import MultiAgentEnv
from offline_rl.evaluation.rollout import BatchPolicy, env_action
from offline_rl.names import ModuleID
from offline_rl.statistics import episode_statistics

#: RLlib's ``policy_mapping_fn``: ``(agent_id, episode) -> module_id``.
AgentToModuleFn = Callable[[AgentID, MultiAgentEpisode], ModuleID]


def stack_observations(observations: Sequence[Any]) -> Any:
    """One batch of ``observations``: arrays stacked on a new first axis, dicts (observations
    with action masks) and tuples stacked part by part.

    Examples:
        >>> batch = stack_observations([{"obs": np.zeros(2), "action_mask": np.ones(3)}] * 4)
        >>> batch["obs"].shape, batch["action_mask"].shape
        ((4, 2), (4, 3))
    """
    first = observations[0]
    if isinstance(first, Mapping):
        return {key: stack_observations([observation[key] for observation in observations])
                for key in first}
    if isinstance(first, tuple):
        return tuple(stack_observations(parts) for parts in zip(*observations))
    return np.stack(observations)


def _mapping_fn(agent_to_module: AgentToModuleFn | Mapping[AgentID, ModuleID]
                ) -> AgentToModuleFn:
    """``agent_to_module`` as a mapping function (a dict maps by agent id)."""
    if not isinstance(agent_to_module, Mapping):
        return agent_to_module
    modules = dict(agent_to_module)

    def mapped(agent_id: AgentID, episode: MultiAgentEpisode) -> ModuleID:
        if agent_id not in modules:
            raise ConfigError(f"agent {agent_id!r} is in no module: agent_to_module maps only "
                              f"{list(modules)}")
        return modules[agent_id]

    return mapped


def multi_agent_rollout(envs: Sequence[MultiAgentEnv], policies: Mapping[ModuleID, BatchPolicy],
                        agent_to_module: AgentToModuleFn | Mapping[AgentID, ModuleID],
                        num_episodes: int, *, seed: int | None = None,
                        on_episode_start: Callable[[int], None] | None = None,
                        limits: EpisodeLimits | None = None) -> Iterator[MultiAgentEpisode]:
    """Yields ``num_episodes`` complete episodes (``to_numpy()``'d) as they finish, stepping
    ``envs`` (made by ``make_multi_agent_env``) side by side.

    Each step, the observations of all agents to act, in all envs, are batched per module
    (``agent_to_module(agent_id, episode)``, RLlib's ``policy_mapping_fn``, or a dict by agent;
    an agent is mapped once per episode) and each module's policy (``policies[module_id]``, a
    ``BatchPolicy``) is called once on its batch. Each env gets ``env_action`` of the agent's
    action for the agent's action space; the episode keeps the policy's own action and its
    extra model outputs. Episode ``i`` is reset with ``seed + i``; ``on_episode_start(i)`` runs
    first (e.g. to pick a behaviour policy per episode). The envs stay open: the caller owns
    them.

    Raises ``ConfigError`` naming the agent and the module when a module an agent maps to has
    no policy, or when a dict ``agent_to_module`` lacks an agent; ``EnvError`` naming the env,
    the episode and the step when the env raises, or when an episode runs past
    ``limits.timeout_s`` without ending (``evaluation.env_limits``; episodes are not cut: an
    agent may be waiting for its next observation).
    """
    mapping_fn = _mapping_fn(agent_to_module)
    limits = dataclasses.replace(limits or EpisodeLimits(player="a multi-agent env runner"),
                                 cuts_episodes=False)
    began: dict[int, float] = {}
    numbers: dict[int, int] = {}
    running: dict[int, MultiAgentEpisode] = {}
    last_observations: dict[int, dict[AgentID, Any]] = {}
    started = 0

    def start(slot: int) -> None:
        nonlocal started
        env = envs[slot]
        if on_episode_start is not None:
            on_episode_start(started)
        observations, infos = env_reset(env, None if seed is None else seed + started, limits,
                                        episode=started)
        episode = MultiAgentEpisode(observation_space=env.observation_spaces,
                                    action_space=env.action_spaces,
                                    agent_to_module_mapping_fn=mapping_fn)
        episode.add_env_reset(observations, infos)
        running[slot], last_observations[slot] = episode, observations
        numbers[slot], began[slot] = started, time.monotonic()
        started += 1

    for slot in range(min(len(envs), num_episodes)):
        start(slot)
    while running:
        actions, extras = _act(envs, running, last_observations, policies)
        for slot in list(running):
            episode, env = running[slot], envs[slot]
            observations, rewards, terminateds, truncateds, infos = env_step(
                env, {agent_id: env_action(action, env.get_action_space(agent_id))
                      for agent_id, action in actions[slot].items()}, limits,
                episode=numbers[slot], steps=len(episode))
            for agent_id in observations:
                episode.observation_space.setdefault(agent_id,
                                                     env.get_observation_space(agent_id))
                episode.action_space.setdefault(agent_id, env.get_action_space(agent_id))
            episode.add_env_step(observations, actions[slot], rewards, infos,
                                 terminateds=terminateds, truncateds=truncateds,
                                 extra_model_outputs=extras[slot])
            last_observations[slot] = observations
            if not episode.is_done:
                limits.check_time(env, began[slot], len(episode), numbers[slot])
            if episode.is_done:
                del running[slot]
                yield episode.to_numpy()
                if started < num_episodes:
                    start(slot)


def _act(envs: Sequence[MultiAgentEnv], running: dict[int, MultiAgentEpisode],
         last_observations: dict[int, dict[AgentID, Any]],
         policies: Mapping[ModuleID, BatchPolicy]
         ) -> tuple[dict[int, dict[AgentID, Any]], dict[int, dict[AgentID, dict]]]:
    """The actions and extra model outputs, by env slot and agent, of every agent to act: one
    policy call per module on the observations of its agents."""
    requests: dict[ModuleID, list[tuple[int, AgentID]]] = {}
    for slot, episode in running.items():
        for agent_id in envs[slot].agents_to_act:
            module_id = episode.module_for(agent_id)
            if module_id not in policies:
                raise ConfigError(f"agent {agent_id!r} maps to module {module_id!r}, which has "
                                  f"no policy; policies are given for {list(policies)}")
            requests.setdefault(module_id, []).append((slot, agent_id))
    actions: dict[int, dict[AgentID, Any]] = {slot: {} for slot in running}
    extras: dict[int, dict[AgentID, dict]] = {slot: {} for slot in running}
    for module_id, agents in requests.items():
        batch = stack_observations([last_observations[slot][agent_id]
                                    for slot, agent_id in agents])
        module_actions, module_extras = policies[module_id](batch)
        for row, (slot, agent_id) in enumerate(agents):
            actions[slot][agent_id] = module_actions[row]
            extras[slot][agent_id] = {key: value[row] for key, value in module_extras.items()}
    return actions, extras


def multi_agent_episode_statistics(episodes: Iterable[MultiAgentEpisode]
                                   ) -> dict[str, Any]:
    """``offline_rl.statistics.episode_statistics`` of the episodes' returns (all agents'
    summed) and env steps, with RLlib's per-agent and per-module means:
    ``agent_episode_returns_mean`` (``{agent_id: mean return}``, over the episodes the agent
    was in) and ``module_episode_returns_mean`` (``{module_id: mean}`` over the episodes the
    module acted in, of the returns of its agents in an episode summed).

    Examples:
        >>> episode = MultiAgentEpisode(agent_module_ids={"a": "m", "b": "m"})
        >>> episode.add_env_reset({"a": 0, "b": 0})
        >>> episode.add_env_step({"a": 1, "b": 1}, {"a": 0, "b": 0}, {"a": 1.0, "b": 2.0},
        ...                      terminateds={"__all__": True})
        >>> statistics = multi_agent_episode_statistics([episode])
        >>> (statistics["episode_return_mean"], statistics["agent_episode_returns_mean"],
        ...  statistics["module_episode_returns_mean"])
        (3.0, {'a': 1.0, 'b': 2.0}, {'m': 3.0})
    """
    returns, lengths = [], []
    by_agent: dict[AgentID, list[float]] = {}
    by_module: dict[ModuleID, list[float]] = {}
    for episode in episodes:
        module_returns: dict[ModuleID, float] = {}
        for agent_id, agent_return in episode.get_agent_returns().items():
            by_agent.setdefault(agent_id, []).append(agent_return)
            module_id = episode.module_for(agent_id)
            module_returns[module_id] = module_returns.get(module_id, 0.0) + agent_return
        for module_id, module_return in module_returns.items():
            by_module.setdefault(module_id, []).append(module_return)
        returns.append(episode.get_return())
        lengths.append(len(episode))
    return {**episode_statistics(returns, lengths),
            "agent_episode_returns_mean": {agent_id: float(np.mean(values))
                                           for agent_id, values in by_agent.items()},
            "module_episode_returns_mean": {module_id: float(np.mean(values))
                                            for module_id, values in by_module.items()}}
