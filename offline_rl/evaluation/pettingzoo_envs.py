"""PettingZoo's two env APIs as offline-rl's ``MultiAgentEnv``: ``ParallelEnv`` (all agents act
at once) and ``AECEnv`` (agents act in turns). Duck-typed: this module does not import pettingzoo.

Examples:
    >>> import pettingzoo
    >>> env = PettingZooParallelEnv(pettingzoo.make("parallel", "classic/rps_v2", max_cycles=1))
    >>> env.reset(seed=0)[0]
    {'player_0': array(3), 'player_1': array(3)}
    >>> _, rewards, _, truncateds, _ = env.step({"player_0": 1, "player_1": 0})  # paper, rock
    >>> rewards, truncateds
    ({'player_0': 1.0, 'player_1': -1.0}, {'player_0': True, 'player_1': True, '__all__': True})
    >>> game = PettingZooTurnBasedEnv(pettingzoo.make("aec", "classic/tictactoe_v3"))
    >>> observations, _ = game.reset(seed=0)
    >>> list(observations), sorted(observations["player_1"])
    (['player_1'], ['action_mask', 'observation'])
    >>> list(game.step({"player_1": 4})[0]), game.agents_to_act
    (['player_2'], ['player_2'])
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from offline_rl.episodes.multi_agent_episode import AgentID
from offline_rl.evaluation.multi_agent_interface import (
    MultiAgentEnv,
    StepResult,
    reset_dict_env,
    set_episode_end,
)


class _PettingZooEnv(MultiAgentEnv):
    """What both PettingZoo APIs share: spaces are methods of the agent, ``possible_agents``
    is optional (agents may be generated as the episode goes), ``reset`` takes a seed."""

    def __init__(self, env: Any):
        self.env = env
        super().__init__(getattr(env, "possible_agents", ()))

    def _spaces_of(self, agent_id: AgentID) -> tuple[gym.Space, gym.Space]:
        return self.env.observation_space(agent_id), self.env.action_space(agent_id)

    def close(self) -> None:
        self.env.close()


class PettingZooParallelEnv(_PettingZooEnv):
    """A PettingZoo ``ParallelEnv``: its dicts pass through with rewards as floats, and the
    episode is over (``"__all__"``, see ``set_episode_end``) when no agent is left that is not
    done: PettingZoo removes done agents from ``env.agents``."""

    def _reset(self, seed: int | None, options: dict | None
               ) -> tuple[dict[AgentID, Any], dict[AgentID, dict]]:
        return reset_dict_env(self.env, seed, options)

    def _step(self, actions: dict[AgentID, Any]) -> StepResult:
        observations, rewards, terminateds, truncateds, infos = self.env.step(actions)
        terminateds, truncateds = dict(terminateds), dict(truncateds)
        left = [agent_id for agent_id in self.env.agents
                if not (terminateds.get(agent_id) or truncateds.get(agent_id))]
        set_episode_end(terminateds, truncateds, over=not left)
        return (dict(observations), {agent_id: float(reward) for agent_id, reward in
                                     rewards.items()}, terminateds, truncateds, dict(infos))


class PettingZooTurnBasedEnv(_PettingZooEnv):
    """A PettingZoo ``AECEnv``: one agent acts per ``step``, the one whose turn it is
    (``env.agent_selection``).

    ``step`` applies its action, then returns the observation of the next agent to act, with
    that agent's reward: what it got since its own last turn (``env.last()``, PettingZoo's
    ``_cumulative_rewards``). An agent that is done gets its last observation, reward and flags
    when its turn comes, and is stepped with ``None`` here, as PettingZoo requires, so callers
    never act for done agents; the ``step`` returns those of every done agent on the way to the
    next live one. The episode is over (``"__all__"``, see ``set_episode_end``) when PettingZoo
    has no agents left. Observations pass through as they are (with their action masks, where
    the env puts them in the observation).
    """

    def _reset(self, seed: int | None, options: dict | None
               ) -> tuple[dict[AgentID, Any], dict[AgentID, dict]]:
        self.env.reset(seed=seed, options=options)
        observations, _, _, _, infos = self._next_turn()
        return observations, infos

    def _step(self, actions: dict[AgentID, Any]) -> StepResult:
        (action,) = actions.values()
        self.env.step(action)
        return self._next_turn()

    def _next_turn(self) -> StepResult:
        """Collects done agents (stepping each with ``None``) up to the next live agent."""
        observations, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        while self.env.agents:
            agent_id = self.env.agent_selection
            observation, reward, terminated, truncated, info = self.env.last()
            observations[agent_id], rewards[agent_id], infos[agent_id] = (
                observation, float(reward), info)
            terminateds[agent_id], truncateds[agent_id] = bool(terminated), bool(truncated)
            if not (terminated or truncated):
                break
            self.env.step(None)
        set_episode_end(terminateds, truncateds, over=not self.env.agents)
        return observations, rewards, terminateds, truncateds, infos
