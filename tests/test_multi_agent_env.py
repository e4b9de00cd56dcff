"""The multi-agent env layer: every env form ``make_multi_agent_env`` takes (RLlib's
``MultiAgentEnv`` shape, PettingZoo's ``ParallelEnv`` and ``AECEnv``), our reference envs, and
``multi_agent_rollout`` recording ``MultiAgentEpisode``s with shared and separate modules. Pure
Python: no Ray."""

from __future__ import annotations

import sys
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest
from pettingzoo import AECEnv
from pettingzoo.classic.rps import rps
from pettingzoo.classic.tictactoe import tictactoe
from pettingzoo.test.example_envs import generated_agents_parallel_v0

from offline_rl.errors import ConfigError, EnvError
from offline_rl.evaluation.env_limits import EpisodeLimits
from offline_rl.evaluation.multi_agent_cartpole import AlternatingCartPole, MultiAgentCartPole
from offline_rl.evaluation.multi_agent_env import RLlibShapedEnv, make_multi_agent_env
from offline_rl.evaluation.multi_agent_rollout import (
    multi_agent_episode_statistics,
    multi_agent_rollout,
)
from offline_rl.evaluation.pettingzoo_envs import PettingZooParallelEnv, PettingZooTurnBasedEnv


class Relay:
    """An env in RLlib's shape, written here: "a" starts alone, "b" joins at step 1, "a"
    terminates at step 2, "b" is truncated at step 3 (``"__all__"``). The observation is the
    step; each agent's reward is its action (as the env got it: clipped). It leaves
    ``"__all__"`` out until the end, which the adapter fills in."""

    def __init__(self, env_config: dict | None = None):
        self.possible_agents = ["a", "b"]
        self.observation_spaces = dict.fromkeys("ab", gym.spaces.Box(0.0, 9.0, (1,)))
        self.action_spaces = dict.fromkeys("ab", gym.spaces.Box(-1.0, 1.0, (1,)))
        self.closed = False

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {"a": np.zeros(1)}, {"a": {"seed": seed}}

    def step(self, actions):
        self.t += 1
        rewards = {agent: np.float32(action[0]) for agent, action in actions.items()}
        observation = np.full(1, float(self.t))
        if self.t == 1:
            return dict.fromkeys("ab", observation), rewards, {}, {}, {}
        if self.t == 2:
            return dict.fromkeys("ab", observation), rewards, {"a": True}, {}, {}
        return ({"b": observation}, rewards, {"__all__": False}, {"b": True, "__all__": True},
                {"b": {"last": True}})

    def close(self):
        self.closed = True


class TakeTurns(AECEnv):
    """A PettingZoo AEC game written here: "a", "b", "c" move in turns; a move gives every
    other agent still in the game ``1 + action``; action 2 takes the mover out (terminated);
    after ``limit`` moves everyone left is truncated. The observation is the number of moves."""

    metadata: ClassVar[dict] = {"name": "take_turns_v0"}

    def __init__(self, limit: int = 5):
        super().__init__()
        self.possible_agents = ["a", "b", "c"]
        self.limit = limit

    def observation_space(self, agent):
        return gym.spaces.Discrete(10)

    def action_space(self, agent):
        return gym.spaces.Discrete(3)

    def observe(self, agent):
        return self.moves

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {agent: {} for agent in self.agents}
        self.agent_selection, self.moves = "a", 0

    def step(self, action):
        mover = self.agent_selection
        if self.terminations[mover] or self.truncations[mover]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[mover] = 0.0
        self._clear_rewards()
        for agent in self.agents:
            if agent != mover:
                self.rewards[agent] = 1.0 + action
        self.moves += 1
        self.terminations[mover] = action == 2
        if self.moves >= self.limit:
            self.truncations = dict.fromkeys(self.agents, True)
        self._accumulate_rewards()
        live = [agent for agent in self.agents if not self.terminations[agent]]
        after = [agent for agent in live if self.agents.index(agent) > self.agents.index(mover)]
        self.agent_selection = (after or live or [mover])[0]
        self._deads_step_first()


def scripted(actions_by_move: dict[int, int]):
    """A policy acting by the number of moves observed (TakeTurns)."""
    return lambda obs: (np.array([actions_by_move[int(t)] for t in obs]), {})


def push_left(obs):
    return np.zeros(len(obs), dtype=np.int64), {}


def balance(obs):
    """Near-perfect CartPole play (keeps the pole up to the step limit), deterministic."""
    return (obs[:, 2] + obs[:, 3] > 0).astype(np.int64), {"action_logp": np.zeros(len(obs))}


# The env forms.

def test_an_rllib_shaped_env_passes_through_with_all_added():
    env = make_multi_agent_env(Relay)
    assert isinstance(env, RLlibShapedEnv) and env.possible_agents == ["a", "b"]
    observations, infos = env.reset(seed=7)
    assert observations == {"a": [0.0]} and infos == {"a": {"seed": 7}}
    assert env.agents_to_act == ["a"]
    _, rewards, terminateds, truncateds, _ = env.step({"a": np.array([0.5])})
    assert rewards == {"a": 0.5} and type(rewards["a"]) is float
    assert terminateds == {"__all__": False} and truncateds == {"__all__": False}
    assert env.agents_to_act == ["a", "b"]  # "b" joined
    _, _, terminateds, _, _ = env.step({"a": np.array([0.0]), "b": np.array([0.0])})
    assert terminateds == {"a": True, "__all__": False} and env.agents_to_act == ["b"]
    observations, _, _, truncateds, infos = env.step({"b": np.array([1.0])})
    assert list(observations) == ["b"] and truncateds == {"b": True, "__all__": True}
    assert infos == {"b": {"last": True}} and env.agents_to_act == []
    with pytest.raises(ValueError, match=r"^the episode is over; call reset\(\) to start"):
        env.step({})
    env.close()
    assert env.env.closed


def test_rllibs_own_multi_agent_env_is_taken_though_it_is_a_gymnasium_env():
    from ray.rllib.env.multi_agent_env import make_multi_agent  # imported only; no Ray started

    env = make_multi_agent_env(make_multi_agent("CartPole-v1"), {"num_agents": 2})
    assert isinstance(env, RLlibShapedEnv) and isinstance(env.env, gym.Env)
    assert env.possible_agents == [0, 1] and env.action_spaces[1] == gym.spaces.Discrete(2)
    env.reset(seed=0)
    _, rewards, terminateds, _, _ = env.step({0: 0, 1: 1})
    assert rewards == {0: 1.0, 1: 1.0} and terminateds == {0: False, 1: False, "__all__": False}


def test_an_env_instance_is_taken_as_it_is():
    relay = Relay()
    env = make_multi_agent_env(relay)
    assert env.env is relay and make_multi_agent_env(env) is env
    with pytest.raises(ConfigError, match=r"^env_config=\{'x': 1\} was given with an env "
                                          r"instance \(Relay\); it applies to a name or "
                                          r"creator only$"):
        make_multi_agent_env(relay, {"x": 1})


def test_pettingzoo_envs_are_made_by_name_with_their_parallel_api_where_they_have_one():
    env = make_multi_agent_env("classic/rps_v2", {"max_cycles": 1})
    assert isinstance(env, PettingZooParallelEnv)
    env.reset(seed=0)
    assert env.step({"player_0": 0, "player_1": 0})[3]["__all__"]  # one cycle
    assert isinstance(make_multi_agent_env("classic/tictactoe_v3"), PettingZooTurnBasedEnv)


def test_a_pettingzoo_parallel_env_ends_when_no_agent_is_left():
    env = make_multi_agent_env(rps.parallel_env, {"max_cycles": 2})  # keyword creator
    assert isinstance(env, PettingZooParallelEnv)
    assert env.possible_agents == ["player_0", "player_1"]
    assert env.observation_spaces["player_0"] == gym.spaces.Discrete(4)
    assert env.action_spaces["player_1"] == gym.spaces.Discrete(3)
    observations, infos = env.reset(seed=0)
    assert observations == {"player_0": 3, "player_1": 3}  # no move seen yet
    assert infos == {"player_0": {}, "player_1": {}}
    paper, rock = 1, 0
    observations, rewards, terminateds, truncateds, _ = env.step(
        {"player_0": paper, "player_1": rock})
    assert observations == {"player_0": rock, "player_1": paper}
    assert rewards == {"player_0": 1.0, "player_1": -1.0}
    assert terminateds == truncateds == {"player_0": False, "player_1": False, "__all__": False}
    _, _, terminateds, truncateds, _ = env.step({"player_0": rock, "player_1": rock})
    assert terminateds == {"player_0": False, "player_1": False, "__all__": False}
    assert truncateds == {"player_0": True, "player_1": True, "__all__": True}
    assert env.agents_to_act == [] and env.env.agents == []


def test_pettingzoo_turn_based_env_steps_the_agent_whose_turn_it_is():
    env = make_multi_agent_env(tictactoe.env)
    assert isinstance(env, PettingZooTurnBasedEnv)
    observations, _ = env.reset(seed=0)
    assert list(observations) == ["player_1"] and env.agents_to_act == ["player_1"]
    assert isinstance(env.observation_spaces["player_1"], gym.spaces.Dict)
    for mover, square, other in (("player_1", 0, "player_2"), ("player_2", 3, "player_1"),
                                 ("player_1", 1, "player_2"), ("player_2", 4, "player_1")):
        observations, rewards, terminateds, truncateds, _ = env.step({mover: square})
        assert list(observations) == [other] and rewards == {other: 0.0}
        assert terminateds == {other: False, "__all__": False}
        assert observations[other]["action_mask"][square] == 0  # the mask passes through
        assert env.agents_to_act == [other]
    # player_1 completes a line: both players' last turns come in this step, the loser's
    # reward (given at the winner's move) with it; PettingZoo's None steps of the finished
    # players are done inside, and no agents are left.
    observations, rewards, terminateds, truncateds, _ = env.step({"player_1": 2})
    assert list(observations) == ["player_2", "player_1"]
    assert rewards == {"player_2": -1.0, "player_1": 1.0}
    assert terminateds == {"player_2": True, "player_1": True, "__all__": True}
    assert truncateds == {"player_2": False, "player_1": False, "__all__": False}
    assert env.env.agents == [] and env.agents_to_act == []


def test_a_turn_based_agent_gets_its_rewards_since_its_last_turn_and_leaves_when_done():
    env = make_multi_agent_env(TakeTurns())
    assert isinstance(env, PettingZooTurnBasedEnv)
    assert env.reset() == ({"a": 0}, {"a": {}})
    assert env.step({"a": 0})[:2] == ({"b": 1}, {"b": 1.0})
    assert env.step({"b": 0})[:2] == ({"c": 2}, {"c": 2.0})  # from a's and b's moves
    # c leaves: its last turn (terminated) comes first, then a's, with 1 + 3 since its move.
    observations, rewards, terminateds, _, _ = env.step({"c": 2})
    assert observations == {"c": 3, "a": 3} and rewards == {"c": 0.0, "a": 4.0}
    assert terminateds == {"c": True, "a": False, "__all__": False}
    assert env.agents_to_act == ["a"] and env.env.agents == ["a", "b"]
    assert env.step({"a": 1})[:2] == ({"b": 4}, {"b": 5.0})  # 3 from c's move, 2 from a's
    observations, rewards, terminateds, truncateds, _ = env.step({"b": 0})
    assert observations == {"a": 5, "b": 5} and rewards == {"a": 1.0, "b": 0.0}
    assert truncateds == {"a": True, "b": True, "__all__": True}
    assert terminateds == {"a": False, "b": False, "__all__": False}


def test_agents_of_a_pettingzoo_env_join_and_leave_with_their_spaces():
    env = make_multi_agent_env(generated_agents_parallel_v0.parallel_env())
    assert env.possible_agents == [] and env.observation_spaces == {}
    observations, _ = env.reset(seed=0)
    assert sorted(env.observation_spaces) == sorted(observations)
    joined, left = set(), set()
    for _ in range(300):
        acting = env.agents_to_act
        observations, _, terminateds, truncateds, _ = env.step(dict.fromkeys(acting, 0))
        joined |= set(observations) - set(acting)
        left |= {agent for agent in acting if terminateds[agent] or truncateds[agent]}
        assert set(env.agents_to_act) == set(observations) - left
    assert joined and left
    for agent in joined:
        assert env.get_observation_space(agent) == env.env.observation_space(agent)
        assert env.get_action_space(agent) == env.env.action_space(agent)
    env.reset(seed=1)  # the spaces of agents outside possible_agents are asked again
    assert sorted(env.observation_spaces) == sorted(env.agents_to_act)


# Our reference envs.

def test_multi_agent_cartpole_seeds_each_copy_differently_and_repeatably():
    env = make_multi_agent_env(MultiAgentCartPole, {"num_agents": 3})
    first, _ = env.reset(seed=5)
    again, _ = env.reset(seed=5)
    other, _ = env.reset(seed=6)
    assert list(first) == ["agent_0", "agent_1", "agent_2"]
    for agent in first:
        np.testing.assert_array_equal(first[agent], again[agent])
        assert not np.array_equal(first[agent], other[agent])
    assert not np.array_equal(first["agent_0"], first["agent_1"])
    assert not np.array_equal(first["agent_1"], first["agent_2"])


def test_multi_agent_cartpole_agents_leave_when_their_pole_falls():
    env = make_multi_agent_env(MultiAgentCartPole, {"num_agents": 2})
    env.reset(seed=0)
    left_at, step = {}, 0
    while env.agents_to_act:
        step += 1
        acting = env.agents_to_act
        actions = {agent: 0 if agent == "agent_0" else int(step % 2) for agent in acting}
        observations, rewards, terminateds, _, _ = env.step(actions)
        assert list(observations) == list(rewards) == acting
        left_at.update({agent: step for agent in acting if terminateds[agent]})
    assert terminateds["__all__"] and set(left_at) == {"agent_0", "agent_1"}
    assert left_at["agent_0"] < left_at["agent_1"]  # pushing left only fails first
    env.reset(seed=0)  # the same episode again, up to agent_0 leaving
    for step in range(1, left_at["agent_0"] + 1):
        env.step({agent: 0 if agent == "agent_0" else step % 2 for agent in env.agents_to_act})
    assert env.agents_to_act == ["agent_1"]
    with pytest.raises(ValueError, match=r"actions for agents \['agent_0'\], which were not "
                                         r"asked to act; the agents to act are \['agent_1'\]"):
        env.step({"agent_0": 0, "agent_1": 1})


def test_alternating_cartpole_passes_the_turn():
    env = make_multi_agent_env(AlternatingCartPole, {"max_episode_steps": 3})
    observations, _ = env.reset(seed=0)
    assert list(observations) == ["agent_0"]
    assert env.step({"agent_0": 1})[:2][1] == {"agent_0": 1.0}
    assert env.agents_to_act == ["agent_1"]
    env.step({"agent_1": 0})
    observations, rewards, terminateds, truncateds, _ = env.step({"agent_0": 1})
    assert list(observations) == ["agent_0", "agent_1"] and rewards == {"agent_0": 1.0}
    np.testing.assert_array_equal(observations["agent_0"], observations["agent_1"])
    assert truncateds == {"agent_0": True, "agent_1": True, "__all__": True}
    assert terminateds == {"agent_0": False, "agent_1": False, "__all__": False}


def test_our_envs_step_only_the_agents_to_act_when_used_directly():
    env = MultiAgentCartPole()
    with pytest.raises(ValueError, match=r"^no episode is running; call reset\(\)$"):
        env.step({})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"^actions for agents \['agent_0'\]; the agents to act "
                                         r"are \['agent_0', 'agent_1'\]$"):
        env.step({"agent_0": 0})
    turns = AlternatingCartPole()
    turns.reset(seed=0)
    with pytest.raises(ValueError, match=r"^actions for agents \['agent_1'\]; the agents to "
                                         r"act are \['agent_0'\]$"):
        turns.step({"agent_1": 0})


# Errors.

def test_forms_that_are_no_multi_agent_env_are_refused_saying_what_to_pass(monkeypatch):
    with pytest.raises(ConfigError, match=r"^env='classic/no_such_game_v1' is not an env "
                                          r"PettingZoo registers \(Environment 'classic/no_such"
                                          r"_game-v1' not found in registry.*\); pass the name "
                                          r"of one of offline-rl's envs \['AlternatingCartPole', "
                                          r"'MultiAgentCartPole'\] or of a PettingZoo env .*, a "
                                          r"creator of the env \(a "
                                          r"class or function: env_config -> env, .*\) or an env "
                                          r"instance, in RLlib's MultiAgentEnv shape or a "
                                          r"PettingZoo ParallelEnv or AECEnv$"):
        make_multi_agent_env("classic/no_such_game_v1")
    with pytest.raises(ConfigError, match=r"^CartPoleEnv is a single-agent gymnasium env; "
                                          r"pass the name .*\(offline_rl.evaluation.rollout "
                                          r"plays gymnasium envs\)$"):
        make_multi_agent_env(lambda config: gym.make("CartPole-v1").unwrapped)
    with pytest.raises(ConfigError, match=r"^dict is not a multi-agent env offline-rl can "
                                          r"step: pass the name"):
        make_multi_agent_env({"observation_spaces": {}})
    monkeypatch.setitem(sys.modules, "pettingzoo", None)  # not installed
    with pytest.raises(ConfigError, match=r"^env='classic/rps_v2': making a multi-agent env by "
                                          r"name needs PettingZoo's registry \(pip install "
                                          r"'pettingzoo>=1.27'\); or pass a creator of the env "
                                          r"or an env instance$"):
        make_multi_agent_env("classic/rps_v2")


def test_an_agent_without_spaces_in_an_rllib_shaped_env_is_named():
    relay = Relay()  # "b" joins at step 1, but the env has no spaces for it
    relay.possible_agents = ["a"]
    del relay.observation_spaces["b"], relay.action_spaces["b"]
    env = make_multi_agent_env(relay)
    env.reset()
    with pytest.raises(ValueError, match=r"^Relay has no observation or action space for agent "
                                         r"'b' in its observation_spaces/action_spaces$"):
        env.step({"a": np.array([0.0])})


def test_an_env_steps_only_the_agents_asked_to_act():
    env = make_multi_agent_env(tictactoe.env)
    with pytest.raises(ValueError, match=r"^call reset\(\) before step\(\)$"):
        env.step({"player_1": 0})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"^actions for agents \['player_2'\], which were not "
                                         r"asked to act; the agents to act are \['player_1'\]$"):
        env.step({"player_1": 0, "player_2": 1})
    with pytest.raises(ValueError, match=r"^no actions for agents \['player_1'\], which are to "
                                         r"act$"):
        env.step({})
    assert env.env.agent_selection == "player_1"  # nothing was stepped


def test_a_module_without_a_policy_is_named_with_its_agent():
    envs = [make_multi_agent_env(MultiAgentCartPole)]
    with pytest.raises(ConfigError, match=r"^agent 'agent_1' maps to module 'right', which has "
                                          r"no policy; policies are given for \['left'\]$"):
        list(multi_agent_rollout(envs, {"left": push_left},
                                 {"agent_0": "left", "agent_1": "right"}, 1))
    with pytest.raises(ConfigError, match=r"^agent 'agent_1' is in no module: agent_to_module "
                                          r"maps only \['agent_0'\]$"):
        list(multi_agent_rollout(envs, {"left": push_left}, {"agent_0": "left"}, 1))


# Rollouts.

def counting(policy, calls: list[int]):
    """``policy``, noting the batch size of each call in ``calls``."""
    def counted(obs):
        calls.append(len(obs["observation"] if isinstance(obs, dict) else obs))
        return policy(obs)
    return counted


def test_a_shared_module_acts_for_all_agents_of_all_envs_in_one_call():
    envs = [make_multi_agent_env(MultiAgentCartPole, {"num_agents": 2}) for _ in range(2)]
    calls: list[int] = []
    episodes = list(multi_agent_rollout(envs, {"shared": counting(push_left, calls)},
                                        lambda agent_id, episode: "shared", 3, seed=0))
    assert len(episodes) == 3 and all(episode.is_terminated for episode in episodes)
    assert calls[0] == 4 and max(calls) == 4
    assert sum(calls) == sum(episode.agent_steps() for episode in episodes)
    for episode in episodes:
        assert {episode.module_for(agent) for agent in episode.agent_ids} == {"shared"}
        assert episode.observation_space["agent_0"] == envs[0].observation_spaces["agent_0"]
        agent_0 = episode.agent_episodes["agent_0"]
        assert isinstance(agent_0.get_observations(), np.ndarray)  # to_numpy()'d
        assert (agent_0.get_actions() == 0).all() and agent_0.is_terminated


def test_separate_modules_and_episode_seeds():
    envs = [make_multi_agent_env(MultiAgentCartPole, {"max_episode_steps": 20})
            for _ in range(2)]
    left_calls: list[int] = []
    policies = {"left": counting(push_left, left_calls), "balance": balance}
    episodes = list(multi_agent_rollout(envs, policies, {"agent_0": "left",
                                                         "agent_1": "balance"}, 4, seed=10))
    assert max(left_calls) == 2
    starts = sorted(tuple(episode.agent_episodes["agent_1"].get_observations(0))
                    for episode in episodes)
    expected = sorted(tuple(MultiAgentCartPole().reset(seed=10 + i)[0]["agent_1"])
                      for i in range(4))
    assert starts == expected  # episode i is reset with seed + i
    for episode in episodes:
        balanced, pushed = episode.agent_episodes["agent_1"], episode.agent_episodes["agent_0"]
        assert balanced.is_truncated and len(balanced) == 20 == len(episode)
        assert pushed.is_terminated and len(pushed) < 20  # left before the episode ended
        assert list(episode.env_t_to_agent_t["agent_0"].get())[len(pushed) + 1:] == (
            ["S"] * (20 - len(pushed)))
        np.testing.assert_array_equal(balanced.get_extra_model_outputs("action_logp"),
                                      np.zeros(20))
    statistics = multi_agent_episode_statistics(episodes)
    assert statistics["agent_episode_returns_mean"] == {
        "agent_0": np.mean([len(e.agent_episodes["agent_0"]) for e in episodes]),
        "agent_1": 20.0}
    assert statistics["module_episode_returns_mean"] == {
        "left": statistics["agent_episode_returns_mean"]["agent_0"], "balance": 20.0}
    assert statistics["episode_return_mean"] == np.mean([e.get_return() for e in episodes])
    assert statistics["num_episodes"] == 4 and statistics["num_env_steps"] == 80


def test_rollouts_are_repeatable_given_a_seed():
    def play(seed):
        envs = [make_multi_agent_env(MultiAgentCartPole, {"max_episode_steps": 30})
                for _ in range(2)]
        policy = {"m": lambda obs: ((obs[:, 2] > 0).astype(np.int64), {})}
        return [(episode.get_agent_returns(), episode.get_observations(0))
                for episode in multi_agent_rollout(envs, policy, {"agent_0": "m",
                                                                  "agent_1": "m"}, 3, seed=seed)]

    first, again, other = play(3), play(3), play(4)
    for (returns, observations), (returns_again, observations_again) in zip(first, again):
        assert returns == returns_again
        for agent in observations:
            np.testing.assert_array_equal(observations[agent], observations_again[agent])
    assert not np.array_equal(first[0][1]["agent_0"], other[0][1]["agent_0"])


def test_a_turn_based_rollout_batches_one_agent_per_env():
    envs = [make_multi_agent_env(AlternatingCartPole) for _ in range(2)]
    first_calls, second_calls = [], []
    policies = {"first": counting(push_left, first_calls),
                "second": counting(push_left, second_calls)}
    episodes = list(multi_agent_rollout(envs, policies, {"agent_0": "first",
                                                         "agent_1": "second"}, 2, seed=0))
    for episode in episodes:
        steps = len(episode)
        assert episode.get_agent_returns() == {"agent_0": float((steps + 1) // 2),
                                               "agent_1": float(steps // 2)}
        assert episode.is_terminated and episode.get_return() == steps
    assert set(first_calls) | set(second_calls) <= {1, 2}
    assert sum(first_calls) + sum(second_calls) == sum(len(e) for e in episodes)


def test_a_rollout_records_agents_joining_and_leaving_with_their_actions():
    episode, = multi_agent_rollout([make_multi_agent_env(Relay)],
                                   {"m": lambda obs: (np.full((len(obs), 1), 5.0), {})},
                                   lambda agent_id, episode: "m", 1, seed=0)
    assert list(episode.env_t_to_agent_t["a"].get()) == [0, 1, 2, "S"]
    assert list(episode.env_t_to_agent_t["b"].get()) == ["S", 0, 1, 2]
    # The env got the action clipped into its space; the episode keeps the policy's own.
    assert episode.get_agent_returns() == {"a": 2.0, "b": 2.0}
    np.testing.assert_array_equal(episode.agent_episodes["b"].get_actions(),
                                  np.full((2, 1), 5.0))
    assert episode.agent_episodes["a"].is_terminated and episode.is_truncated


def test_a_rollout_of_a_pettingzoo_game_batches_observations_with_action_masks():
    masks: list[tuple[int, ...]] = []

    def first_free_square(obs):
        masks.append(obs["action_mask"].shape)
        return np.argmax(obs["action_mask"], axis=1), {}

    envs = [make_multi_agent_env(tictactoe.env) for _ in range(2)]
    episodes = list(multi_agent_rollout(envs, {"player": first_free_square},
                                        lambda agent_id, episode: "player", 2, seed=0))
    assert masks[0] == (2, 9)
    for episode in episodes:  # player_1 takes squares 0, 2, 4 and 6: a diagonal
        assert len(episode) == 7 and episode.is_terminated
        assert episode.get_agent_returns() == {"player_1": 1.0, "player_2": -1.0}
        assert list(episode.agent_episodes["player_1"].get_actions()) == [0, 2, 4, 6]
    statistics = multi_agent_episode_statistics(episodes)
    assert statistics["module_episode_returns_mean"] == {"player": 0.0}


def test_rewards_before_an_agents_first_turn_stay_out_of_its_return():
    episode, = multi_agent_rollout([make_multi_agent_env(lambda config: TakeTurns())],
                                   {"m": scripted({0: 0, 1: 0, 2: 2, 3: 1, 4: 0})},
                                   lambda agent_id, episode: "m", 1)
    # b got 1 and c got 2 before their first turns (RLlib's hanging rewards at the begin).
    assert episode.get_agent_returns() == {"a": 5.0, "b": 5.0, "c": 0.0}
    assert episode.agent_episodes["c"].is_terminated and episode.is_truncated


class NeverEndingPair(MultiAgentCartPole):
    """Two agents whose episode never ends."""

    def step(self, actions):
        flags = {agent: False for agent in self.agents}
        return ({agent: np.zeros(4, np.float32) for agent in self.agents},
                {agent: 1.0 for agent in self.agents}, {**flags, "__all__": False},
                {**flags, "__all__": False}, {agent: {} for agent in self.agents})


@pytest.mark.timeout(60)
def test_a_multi_agent_episode_that_never_ends_is_named_after_its_time():
    envs = [make_multi_agent_env(NeverEndingPair)]
    push_left = lambda obs: (np.zeros(len(obs), dtype=np.int64), {})  # noqa: E731
    limits = EpisodeLimits(timeout_s=0.3, timeout_option="evaluation(evaluation_sample_timeout_"
                           "s=...)", player="the multi-agent evaluation")
    expected = (r"the multi-agent evaluation: episode 0 of env '(tests\.)?test_multi_agent_env\."
                r"NeverEndingPair' ran 0\.3 s \(\d+ steps\) without ending, over the limit of 0\.3 "
                r"s \(evaluation\(evaluation_sample_timeout_s=\.\.\.\)\).*Make the env end them")
    with pytest.raises(EnvError, match=expected):
        list(multi_agent_rollout(envs, {"cart": push_left},
                                 {"agent_0": "cart", "agent_1": "cart"}, 1, limits=limits))
