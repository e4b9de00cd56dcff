"""``MultiAgentEpisode``: recording turn-based and simultaneous multi-agent episodes, its state
(round trips, msgpack, refusals of malformed states) and interop with RLlib's
``MultiAgentEpisode`` both ways. Pure Python: RLlib's classes are used without starting Ray."""

from __future__ import annotations

from collections import defaultdict

import gymnasium as gym
import msgpack
import msgpack_numpy
import numpy as np
import pytest

from offline_rl.codec import pack_multi_agent_episode_state, unpack_episode_state
from offline_rl.episodes.episode_state import read_episode_state
from offline_rl.episodes.multi_agent_episode import MultiAgentEpisode
from offline_rl.episodes.multi_agent_episode_state import STATE_KEYS

OBSERVATION = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
ACTION = gym.spaces.Discrete(3)

#: Noughts and crosses: "x" and "o" alternate, each seeing the board only on its turn; "o"
#: wins at the fourth step, where both get the final board.
TURNS = (
    dict(observations={"o": 10}, actions={"x": 4}, rewards={"x": 0.0, "o": 0.0},
         extra_model_outputs={"x": {"action_logp": -1.0}}),
    dict(observations={"x": 1}, actions={"o": 0}, rewards={"x": 0.5, "o": 0.0},
         extra_model_outputs={"o": {"action_logp": -2.0}}),
    dict(observations={"o": 11}, actions={"x": 8}, rewards={"x": 0.0, "o": 0.0},
         extra_model_outputs={"x": {"action_logp": -3.0}}),
    dict(observations={"x": 2, "o": 12}, actions={"o": 2}, rewards={"x": -1.0, "o": 1.0},
         extra_model_outputs={"o": {"action_logp": -4.0}}, terminateds={"__all__": True}),
)
TURNS_RESET = {"x": 0}


def obs(value: float) -> np.ndarray:
    return np.full(2, value, np.float32)


#: "a" and "b" act together; "c" joins at env step 2, where "b" leaves (terminated); the env
#: truncates the episode at step 4.
TOGETHER = (
    dict(observations={"a": obs(1), "b": obs(-1)}, actions={"a": 0, "b": 1},
         rewards={"a": 1.0, "b": 0.5}, infos={"a": {"n": 1}}),
    dict(observations={"a": obs(2), "b": obs(-2), "c": obs(5)}, actions={"a": 1, "b": 2},
         rewards={"a": 1.0, "b": -1.0, "c": 0.25}, terminateds={"b": True}),
    dict(observations={"a": obs(3), "c": obs(6)}, actions={"a": 2, "c": 0},
         rewards={"a": 1.0, "c": 2.0}),
    dict(observations={"a": obs(4), "c": obs(7)}, actions={"a": 0, "c": 1},
         rewards={"a": 1.0, "c": 2.0}, truncateds={"__all__": True}),
)
TOGETHER_RESET = {"a": obs(0), "b": obs(0)}
#: Three players in turn; each gets rewards at the others' turns, while its action hangs.
ROUNDS = (
    dict(observations={"b": 0}, actions={"a": 1}, rewards={"a": 1.0}),
    dict(observations={"c": 0}, actions={"b": 0}, rewards={"a": 2.0, "b": 0.5}),
    dict(observations={"a": 1}, actions={"c": 1}, rewards={"a": 3.0, "c": 1.0}),
    dict(observations={"b": 1}, actions={"a": 0}, rewards={"b": 0.25, "c": 1.0}),
)
ROUNDS_RESET = {"a": 0}
SPACES = {"observation_space": dict.fromkeys("abc", OBSERVATION),
          "action_space": dict.fromkeys("abc", ACTION)}


def team(agent_id, episode):
    return "team_b" if agent_id == "b" else "team_ac"


def record(episode, reset: dict, steps: tuple, until: int | None = None):
    """Plays ``steps`` (up to ``until``) into ``episode``, ours or RLlib's (same API)."""
    episode.add_env_reset(observations=reset)
    for step in steps[:until]:
        episode.add_env_step(**step)
    return episode


def turns(until: int | None = None) -> MultiAgentEpisode:
    mapping = {"x": "crosses", "o": "noughts"}
    return record(MultiAgentEpisode("turns", agent_to_module_mapping_fn=lambda a, e: mapping[a]),
                  TURNS_RESET, TURNS, until)


def together(until: int | None = None) -> MultiAgentEpisode:
    return record(MultiAgentEpisode("together", agent_to_module_mapping_fn=team, **SPACES),
                  TOGETHER_RESET, TOGETHER, until)


def test_turn_based_episode():
    episode = turns()
    assert len(episode) == episode.env_t == 4 and episode.env_t_started == 0
    assert episode.is_terminated and not episode.is_truncated and episode.is_done
    x, o = episode.agent_episodes["x"], episode.agent_episodes["o"]
    assert (x.get_observations(), x.get_actions(), x.get_rewards()) == ([0, 1, 2], [4, 8],
                                                                          [0.5, -1.0])
    assert (o.get_observations(), o.get_actions(), o.get_rewards()) == ([10, 11, 12], [0, 2],
                                                                          [0.0, 1.0])
    assert x.get_extra_model_outputs("action_logp") == [-1.0, -3.0]
    assert o.get_extra_model_outputs("action_logp") == [-2.0, -4.0]
    assert len(x) == len(o) == 2 and episode.agent_steps() == episode.env_steps() == 4
    assert x.is_terminated and o.is_terminated
    assert episode.get_agent_returns() == {"x": -0.5, "o": 1.0} and episode.get_return() == 0.5
    assert episode.env_t_to_agent_t["x"].get() == [0, "S", 1, "S", 2]
    assert episode.env_t_to_agent_t["o"].get() == ["S", 0, "S", 1, 2]
    assert episode.module_for("x") == x.module_id == "crosses"
    assert episode.module_for("o") == o.module_id == "noughts"
    assert x.multi_agent_episode_id == o.multi_agent_episode_id == "turns"
    assert episode.get_observations(1) == {"o": 10} and episode.get_observations(2) == {"x": 1}
    assert episode.get_observations(-1) == {"x": 2, "o": 12}
    assert episode.get_agents_that_stepped() == {"x", "o"} and episode.get_agents_to_act() == set()
    assert not (episode._hanging_actions_end or episode._hanging_rewards_begin)


def test_turn_based_episode_midway_holds_the_hanging_action():
    episode = turns(until=3)
    assert episode.get_agents_to_act() == {"o"} and not episode.is_done
    assert episode._hanging_actions_end == {"x": 8}
    assert episode._hanging_extra_model_outputs_end == {"x": {"action_logp": -3.0}}
    assert episode._hanging_rewards_end == {"x": 0.0}
    assert episode._hanging_rewards_begin == {"o": 0.0}  # o's reward before its first turn
    assert episode.agent_episodes["x"].get_actions() == [4]  # 8 waits for x's next turn
    episode.add_env_step(observations={"x": 2, "o": 12}, actions={"o": 2},
                         rewards={"x": 3.0, "o": 1.0},
                         extra_model_outputs={"o": {"action_logp": -4.0}})
    assert episode.agent_episodes["x"].get_rewards() == [0.5, 3.0]


def test_simultaneous_episode_where_agents_join_and_leave():
    episode = together()
    assert len(episode) == 4 and episode.is_truncated and not episode.is_terminated
    a, b, c = (episode.agent_episodes[agent_id] for agent_id in "abc")
    assert (len(a), len(b), len(c)) == (4, 2, 2)
    assert episode.get_agent_returns() == {"a": 4.0, "b": -0.5, "c": 4.0}
    assert episode.get_return() == 7.5  # c's 0.25 before its first observation is no step's
    assert b.is_terminated and not b.is_truncated
    assert a.is_truncated and c.is_truncated and not (a.is_terminated or c.is_terminated)
    assert episode.env_t_to_agent_t["a"].get() == [0, 1, 2, 3, 4]
    assert episode.env_t_to_agent_t["b"].get() == [0, 1, 2, "S", "S"]
    assert episode.env_t_to_agent_t["c"].get() == ["S", "S", 0, 1, 2]
    np.testing.assert_array_equal(c.get_observations(), [obs(5), obs(6), obs(7)])
    assert c.observation_space == OBSERVATION and b.action_space == ACTION
    assert a.get_infos() == [{}, {"n": 1}, {}, {}, {}]
    assert set(episode.get_observations(2)) == {"a", "b", "c"}
    assert set(episode.get_observations(3)) == {"a", "c"}
    assert {module: [e.agent_id for e in episodes]
            for module, episodes in episode.episodes_by_module().items()} == {
        "team_ac": ["a", "c"], "team_b": ["b"]}
    assert episode.agent_ids == {"a", "b", "c"}
    with pytest.raises(ValueError, match="episode together is done; no steps can be added"):
        episode.add_env_step(observations={}, actions={}, rewards={})


def test_rewards_while_an_action_hangs_add_up_into_its_step():
    episode = record(MultiAgentEpisode(), ROUNDS_RESET, ROUNDS)
    assert episode.agent_episodes["a"].get_rewards() == [6.0]
    assert episode.agent_episodes["a"].get_actions() == [1]
    assert episode.agent_episodes["b"].get_rewards() == [0.75]
    assert episode._hanging_actions_end == {"c": 1, "a": 0}
    assert episode._hanging_rewards_end == {"c": 2.0, "a": 0.0}
    assert episode.get_return() == 6.75 and episode.get_return(include_hanging_rewards=True) == 8.75


def test_agent_terminated_while_its_action_hangs_repeats_its_last_observation():
    episode = record(MultiAgentEpisode(), {"a": 0, "b": 10}, (
        dict(observations={"a": 1}, actions={"a": 0, "b": 1}, rewards={"a": 1.0, "b": 2.0}),
        dict(observations={"a": 2}, actions={"a": 0}, rewards={"a": 1.0, "b": 3.0},
             terminateds={"b": True}),
    ))
    b = episode.agent_episodes["b"]
    assert b.get_observations() == [10, 10] and b.get_rewards() == [5.0] and b.is_terminated
    assert episode.env_t_to_agent_t["b"].get() == [0, "S", 1]
    assert not episode.is_done and episode.get_agents_to_act() == {"a"}


def test_episode_ends_when_all_its_agents_are_done():
    def play(terminateds: dict, truncateds: dict) -> MultiAgentEpisode:
        return record(MultiAgentEpisode(), {"a": 0, "b": 0}, (dict(
            observations={"a": 1, "b": 1}, actions={"a": 0, "b": 0},
            rewards={"a": 1.0, "b": 1.0}, terminateds=terminateds, truncateds=truncateds),))

    truncated = play({}, {"a": True, "b": True})
    assert truncated.is_truncated and not truncated.is_terminated
    mixed = play({"a": True}, {"b": True})
    assert mixed.is_terminated and not mixed.is_truncated
    assert mixed.agent_episodes["b"].is_truncated and not mixed.agent_episodes["b"].is_terminated
    assert not play({"a": True}, {}).is_done


def test_idle_agent_at_the_end_is_done_and_a_newcomer_there_is_dropped():
    episode = record(MultiAgentEpisode(), {"a": 0, "b": 0}, (
        dict(observations={"a": 1, "c": 5}, actions={"a": 0}, rewards={"a": 1.0, "b": -1.0},
             terminateds={"__all__": True}),))
    assert episode.agent_ids == {"a", "b"}  # c got its first observation as the episode ended
    assert episode.agent_episodes["b"].is_terminated and len(episode.agent_episodes["b"]) == 0


@pytest.mark.parametrize(("step", "message"), [
    (dict(observations={"x": 1}, actions={"x": 4}, rewards={"x": 0.0}),
     "agent 'x' acted again before getting the observation that follows its previous action"),
    (dict(observations={"o": 11}, actions={}, rewards={}),
     "agent 'o' got an observation without having acted on its previous one"),
    (dict(observations={"o": 11}, actions={"o": 0}, rewards={}),
     "agent 'o' acted and got its next observation but no reward"),
    (dict(observations={}, actions={"z": 0}, rewards={}),
     "agent 'z' acted before its first observation"),
    (dict(observations={}, actions={"o": 0}, rewards={}, truncateds={"__all__": True}),
     "agent 'o' was truncated after acting but got no last observation"),
    (dict(observations={"x": 1}, actions={}, rewards={}, infos={"o": {}}),
     r"infos for agents \['o'\] without an observation"),
    (dict(observations={"x": 1}, actions={}, rewards={}, extra_model_outputs={"x": {}}),
     r"extra_model_outputs for agents \['x'\] without an action"),
])
def test_a_step_that_cannot_be_recorded_raises_and_records_nothing(step, message):
    episode = turns(until=1)
    before = pack_multi_agent_episode_state(episode.get_state())
    with pytest.raises(ValueError, match=r"episode turns, env step 2: .*" + message):
        episode.add_env_step(**step)
    assert pack_multi_agent_episode_state(episode.get_state()) == before


def test_done_agents_get_no_more_data_and_episodes_reset_once():
    episode = together(until=2)
    with pytest.raises(ValueError, match="agent 'b' is done since an earlier step but got data"):
        episode.add_env_step(observations={"b": obs(0)}, actions={}, rewards={})
    with pytest.raises(ValueError, match="already has observations; cannot reset it"):
        episode.add_env_reset({"a": obs(0)})
    with pytest.raises(ValueError, match=r"reset infos for agents \['b'\], which got no obs"):
        MultiAgentEpisode().add_env_reset({"a": 0}, {"b": {}})


def test_constructor_takes_rllibs_per_step_lists():
    steps = TURNS
    lists = dict(observations=[TURNS_RESET] + [step["observations"] for step in steps],
                 actions=[step["actions"] for step in steps],
                 rewards=[step["rewards"] for step in steps],
                 extra_model_outputs=[step["extra_model_outputs"] for step in steps],
                 terminateds={"__all__": True})
    built = MultiAgentEpisode("turns", len_lookback_buffer=0,
                              agent_module_ids={"x": "crosses", "o": "noughts"}, **lists)
    recorded = turns()
    assert_same_episode(aligned(built, recorded), recorded)
    assert built._start_time is None and built._last_step_time is None

    chunk = MultiAgentEpisode(env_t_started=5, len_lookback_buffer=2,
                              agent_t_started={"x": 7}, **lists)
    assert (chunk.env_t_started, chunk.env_t, len(chunk)) == (5, 7, 2)
    x, o = chunk.agent_episodes["x"], chunk.agent_episodes["o"]
    assert (x.t_started, x.t, x.observations.lookback, x.get_observations()) == (7, 8, 1, [1, 2])
    assert x.get_actions(-1, neg_index_as_lookback=True) == 4
    assert (o.t_started, o.t, o.observations.lookback, o.get_observations()) == (0, 1, 1, [11, 12])
    assert chunk.env_t_to_agent_t["x"].get() == [7, "S", 8]
    assert chunk.env_t_to_agent_t["x"].get(slice(-2, 0), neg_index_as_lookback=True) == [6, "S"]
    assert chunk.env_t_to_agent_t["o"].get(slice(-2, None), neg_index_as_lookback=True) == [
        "S", -1, "S", 0, 1]
    assert chunk.get_observations(0) == {"x": 1} and chunk.get_observations(1) == {"o": 11}
    assert chunk.get_observations(2) == chunk.get_observations(-1) == {"x": 2, "o": 12}
    assert len(MultiAgentEpisode(**lists)) == 0  # "auto": all given steps are lookback

    with pytest.raises(ValueError, match=r"need 4 actions.*got \{'rewards': 3\}"):
        MultiAgentEpisode(**{**lists, "rewards": lists["rewards"][:3]})
    with pytest.raises(ValueError, match="only a reset observation was given"):
        MultiAgentEpisode(observations=[{"a": 0}], terminateds=True)
    with pytest.raises(ValueError, match="len_lookback_buffer must be 'auto' or an int"):
        MultiAgentEpisode(len_lookback_buffer=-1)


@pytest.mark.parametrize("build", [turns, together, lambda: turns(until=3)])
def test_state_round_trip_and_msgpack(build):
    episode = build()
    episode.custom_data["note"] = [1, "two"]
    state = episode.get_state()
    assert tuple(state) == STATE_KEYS and state["agent_to_module_mapping_fn"] is None
    data = pack_multi_agent_episode_state(state)
    unpacked = unpack_episode_state(data)
    for restored in (MultiAgentEpisode.from_state(state), MultiAgentEpisode.from_state(unpacked)):
        assert_same_episode(restored, episode)
        assert pack_multi_agent_episode_state(restored.get_state()) == data
    assert MultiAgentEpisode.from_state(unpacked).custom_data == {"note": [1, "two"]}


def test_a_restored_episode_goes_on_and_maps_newcomers_with_the_given_function():
    data = pack_multi_agent_episode_state(turns(3).get_state())
    restored = MultiAgentEpisode.from_state(unpack_episode_state(data),
                                            agent_to_module_mapping_fn=lambda a, e: "new")
    restored.add_env_step(**{**TURNS[3], "observations": {"x": 2, "o": 12, "p": 0},
                             "terminateds": {}})
    assert restored.module_for("x") == "crosses" and restored.module_for("p") == "new"
    assert restored.env_t_to_agent_t["p"].get() == ["S", "S", "S", "S", 0]
    assert restored.agent_episodes["x"].get_rewards() == [0.5, -1.0]
    default = MultiAgentEpisode.from_state(unpack_episode_state(data))
    assert default.module_for("p") == "default_policy"


def test_to_numpy_finalizes_every_agents_episode():
    episode = together().to_numpy()
    assert all(agent.is_finalized for agent in episode.agent_episodes.values())
    assert episode.agent_episodes["a"].get_observations().shape == (5, 2)
    data = pack_multi_agent_episode_state(episode.get_state())
    assert_same_episode(MultiAgentEpisode.from_state(unpack_episode_state(data)),
                        episode)


def test_int_agent_ids_round_trip():
    episode = record(MultiAgentEpisode(agent_module_ids={0: "m", 1: "m"}), {0: 0, 1: 0}, (
        dict(observations={0: 1, 1: 1}, actions={0: 1, 1: 0}, rewards={0: 1.0, 1: 0.0}),))
    data = pack_multi_agent_episode_state(episode.get_state())
    restored = MultiAgentEpisode.from_state(unpack_episode_state(data))
    assert restored.agent_ids == {0, 1} and restored.env_t_to_agent_t[1].get() == [0, 1]


def test_single_agent_reader_still_refuses_multi_agent_states():
    state = unpack_episode_state(pack_multi_agent_episode_state(turns().get_state()))
    with pytest.raises(ValueError, match=r"a MultiAgentEpisode state \(agents \['o', 'x'\]\), "
                                         "not a SingleAgentEpisode state: read it with "
                                         "MultiAgentEpisode.from_state"):
        read_episode_state(state)


def assert_same_episode(restored: MultiAgentEpisode, episode: MultiAgentEpisode) -> None:
    assert (restored.id_, restored.env_t_started, restored.env_t, restored.is_terminated,
            restored.is_truncated) == (episode.id_, episode.env_t_started, episode.env_t,
                                       episode.is_terminated, episode.is_truncated)
    assert restored._agent_to_module_mapping == episode._agent_to_module_mapping
    assert restored.observation_space == episode.observation_space
    assert restored.agent_t_started == episode.agent_t_started
    for name in ("_hanging_actions_end", "_hanging_extra_model_outputs_end",
                 "_hanging_rewards_end", "_hanging_rewards_begin"):
        assert getattr(restored, name) == getattr(episode, name), name
    assert {agent_id: (mapping.get(), mapping.lookback)
            for agent_id, mapping in restored.env_t_to_agent_t.items()} == {
        agent_id: (mapping.get(), mapping.lookback)
        for agent_id, mapping in episode.env_t_to_agent_t.items()}
    assert_same_agents(restored, episode)


def aligned(mine: MultiAgentEpisode, other) -> MultiAgentEpisode:
    """``mine`` with its agents' episodes given the (random) ids of ``other``'s."""
    for agent_id, episode in mine.agent_episodes.items():
        episode.id_ = other.agent_episodes[agent_id].id_
    return mine


def assert_same_agents(ours, theirs) -> None:
    """Each agent's episode in ``ours`` equals the one in ``theirs`` (ours or RLlib's)."""
    assert set(ours.agent_episodes) == set(theirs.agent_episodes)
    for agent_id, mine in ours.agent_episodes.items():
        other = theirs.agent_episodes[agent_id]
        for column in ("observations", "actions", "rewards", "infos"):
            np.testing.assert_equal(getattr(mine, column).data, getattr(other, column).data,
                                    err_msg=f"{agent_id} {column}")
            assert getattr(mine, column).lookback == getattr(other, column).lookback
        assert mine.extra_model_outputs.keys() == other.extra_model_outputs.keys()
        for key, buffer in mine.extra_model_outputs.items():
            np.testing.assert_equal(buffer.data, other.extra_model_outputs[key].data)
        assert (mine.id_, mine.agent_id, mine.module_id, mine.multi_agent_episode_id,
                mine.t_started, mine.t, bool(mine.is_terminated), bool(mine.is_truncated)) == (
            other.id_, other.agent_id, other.module_id, other.multi_agent_episode_id,
            other.t_started, other.t, bool(other.is_terminated), bool(other.is_truncated))
        assert mine.observation_space == other.observation_space
        assert mine.action_space == other.action_space
    assert len(ours) == len(theirs) and ours.env_t == theirs.env_t
    assert ours.get_return() == pytest.approx(theirs.get_return())
    assert (bool(ours.is_terminated), bool(ours.is_truncated)) == (
        bool(theirs.is_terminated), bool(theirs.is_truncated))


# -- malformed states ------------------------------------------------------------------------


def bad(state: dict, field: str, value) -> dict:
    return {**state, field: value}


def pickled_object_array() -> bytes:
    state = turns(3).get_state()
    state["_hanging_actions_end"] = {"x": np.array([print], dtype=object)}
    return msgpack.packb(state, default=msgpack_numpy.encode)


def test_malformed_states_raise_value_errors_naming_the_field():
    state = together().get_state()
    agents = dict(state["agent_episodes"])
    cases = [
        ({k: v for k, v in state.items() if k not in ("env_t", "agent_episodes")},
         r"multi-agent episode state is missing \['env_t', 'agent_episodes'\]"),
        (bad(state, "env_t", "4"), "field 'env_t' must be an int, got str '4'"),
        (bad(state, "env_t_started", 5), "field 'env_t' 4 is before env_t_started 5"),
        (bad(state, "env_t_started", -1), "field 'env_t_started' must be >= 0"),
        (bad(state, "is_terminated", "yes"), "field 'is_terminated' must be a bool, got str"),
        (bad(state, "id_", None), "field 'id_' must be a str"),
        (bad(state, "agent_t_started", [0]), "field 'agent_t_started' must be a dict by agent"),
        (bad(state, "_agent_to_module_mapping", {("a",): "m"}),
         "field '_agent_to_module_mapping' has a key that is not an agent id"),
        (bad(state, "_agent_to_module_mapping", {"a": 3}),
         r"field \"_agent_to_module_mapping\['a'\]\" must be a module id"),
        (bad(state, "agent_episodes", agents),
         "field 'agent_episodes' must be a list of \\(agent id, episode state\\) pairs"),
        (bad(state, "agent_episodes", [("a", agents["b"])]),
         r"field \"agent_episodes\['a'\]\" is the episode of agent 'b', not of 'a'"),
        (bad(state, "agent_episodes", [("a", agents["a"]), ("a", agents["a"])]),
         "field 'agent_episodes' lists agent 'a' twice"),
        (bad(state, "agent_episodes", [("a", {**agents["a"], "multi_agent_episode_id": "z"})]),
         r"belongs to multi-agent episode 'z', not to 'together'"),
        (bad(state, "agent_episodes", [("a", {**agents["a"], "rewards": [1.0]})]),
         r"field \"agent_episodes\['a'\]\" is not a valid episode state: episode state "
         r"field 'rewards' must be a buffer state dict, got list"),
        (bad(state, "agent_episodes", [("a", {**agents["a"], "module_id": "other"})]),
         r"has module 'other', but '_agent_to_module_mapping' maps agent 'a' to 'team_ac'"),
        (bad(state, "agent_to_module_mapping_fn", team),
         "field 'agent_to_module_mapping_fn' must be None .* got function"),
        (bad(state, "_hanging_actions_end", {"a": team}),
         r"field \"_hanging_actions_end\['a'\]\" must hold plain data .* got function"),
        (bad(state, "_hanging_extra_model_outputs_end", {"a": {"vf": [gym.spaces.Discrete(2)]}}),
         r"_hanging_extra_model_outputs_end\['a'\]\['vf'\]\[0\]\" must hold plain data"),
        (bad(state, "custom_data", {"x": np.array([print], dtype=object)}),
         r"field \"custom_data\['x'\]\" holds a numpy object value of Python objects"),
        (bad(state, "agent_episodes", [("a", {**agents["a"], "custom_data": {"f": print}})]),
         r"agent_episodes\['a'\].custom_data\['f'\]\" must hold plain data"),
        (bad(state, "_hanging_rewards_begin", {"c": "0.25"}),
         r"field \"_hanging_rewards_begin\['c'\]\" must be a number, got str"),
        (bad(state, "observation_space", {"a": OBSERVATION}),
         r"field \"observation_space\['a'\]\" is not a space dict: .*got Box"),
        (bad(state, "env_t_to_agent_t", {**state["env_t_to_agent_t"], "a": [0, 1]}),
         r"field \"env_t_to_agent_t\['a'\]\" must be a buffer state dict, got list"),
        (bad(state, "env_t_to_agent_t", {**state["env_t_to_agent_t"], "a": {"data": [0]}}),
         r"env_t_to_agent_t\['a'\]\" is not a buffer state: buffer state is missing"),
        (bad(state, "env_t_to_agent_t", {**state["env_t_to_agent_t"], "a": {
            "data": [0, "x"], "lookback": 0, "finalized": False, "space": None}}),
         r"env_t_to_agent_t\['a'\]\" must hold agent steps \(ints\) and 'S' tags, got str 'x'"),
        (bad(state, "env_t_to_agent_t", {"a": state["env_t_to_agent_t"]["a"]}),
         r"field 'env_t_to_agent_t' has agents \['a'\], 'agent_episodes' \['a', 'b', 'c'\]"),
        (bad(state, "env_t_to_agent_t", {**state["env_t_to_agent_t"], "c": {
            "data": ["S", 0, 1, 2, 3], "lookback": 0, "finalized": False, "space": None}}),
         r"env_t_to_agent_t\['c'\]\" ends at agent step 3, but the agent's episode is at t=2"),
        (bad(state, "env_t_to_agent_t", {**state["env_t_to_agent_t"], "c": {
            "data": ["S", 0, 2], "lookback": 0, "finalized": False, "space": None}}),
         r"env_t_to_agent_t\['c'\]\" has 3 entries after its lookback; expected one for the "
         r"chunk's start and each of its 4 env steps"),
        (bad(turns(3).get_state(), "_hanging_actions_end", {"x": 8, "q": 1}),
         r"field '_hanging_actions_end' holds actions of agents \['q'\], which have no episode"),
        ("not a state", "a multi-agent episode state must be a dict, got str"),
    ]
    for malformed, message in cases:
        with pytest.raises(ValueError, match=message):
            MultiAgentEpisode.from_state(malformed)


def test_unpacking_refuses_pickled_objects_and_garbage():
    with pytest.raises(ValueError, match="ep.bin: payload holds a pickled object array .* refused"):
        unpack_episode_state(pickled_object_array(), where="ep.bin")
    with pytest.raises(ValueError, match="episode payload is a list, not a map"):
        unpack_episode_state(msgpack.packb([1, 2]))


# -- interop with RLlib's MultiAgentEpisode --------------------------------------------------


def rllib_unpacked(data: bytes) -> dict:
    """Unpacked as RLlib's offline readers unpack episodes (OfflinePreLearner.__call__)."""
    return msgpack.unpackb(data, object_hook=msgpack_numpy.decode)


def rllib_state_as_data(episode) -> dict:
    """RLlib's ``get_state()`` with its objects (mapping function, spaces, buffers) turned into
    data as our layout has them: what writing RLlib's state with msgpack needs."""
    from ray.rllib.utils.serialization import gym_space_to_dict

    state = episode.get_state()
    return {
        **state,
        "agent_to_module_mapping_fn": None,
        "observation_space": {agent_id: gym_space_to_dict(space)
                              for agent_id, space in state["observation_space"].items()},
        "action_space": {agent_id: gym_space_to_dict(space)
                         for agent_id, space in state["action_space"].items()},
        "env_t_to_agent_t": {agent_id: buffer.get_state()
                             for agent_id, buffer in state["env_t_to_agent_t"].items()},
    }


@pytest.mark.parametrize("build", [turns, together, lambda: turns(until=3),
                                   lambda: together(until=2)])
def test_rllib_reads_the_states_we_write(build):
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode as RLlibEpisode
    from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer

    episode = build()
    state = rllib_unpacked(pack_multi_agent_episode_state(episode.get_state()))
    theirs = RLlibEpisode.from_state(state)
    assert_same_agents(episode, theirs)
    assert theirs.agent_to_module_mapping_fn is None  # RLlib takes the None as it is
    assert {agent_id: theirs.module_for(agent_id) for agent_id in theirs.agent_ids} == {
        agent_id: episode.module_for(agent_id) for agent_id in episode.agent_ids}
    assert theirs._hanging_actions_end == episode._hanging_actions_end
    assert theirs._hanging_rewards_end == episode._hanging_rewards_end
    # RLlib keeps the mappings as buffer state dicts; made buffers, its env-step getters agree.
    theirs.env_t_to_agent_t = defaultdict(InfiniteLookbackBuffer, {
        agent_id: InfiniteLookbackBuffer.from_state(mapping)
        for agent_id, mapping in state["env_t_to_agent_t"].items()})
    for index in range(-1, -len(episode) - 2, -1):
        np.testing.assert_equal(theirs.get_observations(index), episode.get_observations(index))
    assert theirs.get_agents_to_act() == episode.get_agents_to_act()


@pytest.mark.parametrize(("reset", "steps", "until"), [
    (TURNS_RESET, TURNS, None), (TURNS_RESET, TURNS, 3), (TOGETHER_RESET, TOGETHER, None),
    (TOGETHER_RESET, TOGETHER, 2), (ROUNDS_RESET, ROUNDS, None),
])
def test_we_read_rllibs_states_and_record_alike(reset, steps, until):
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode as RLlibEpisode

    spaces = SPACES if reset is TOGETHER_RESET else {}
    theirs = record(RLlibEpisode(agent_to_module_mapping_fn=team, **spaces), reset, steps, until)
    data = msgpack.packb(rllib_state_as_data(theirs), default=msgpack_numpy.encode)
    ours = MultiAgentEpisode.from_state(unpack_episode_state(data))
    assert_same_agents(ours, theirs)
    assert ours.id_ == theirs.id_ and ours._hanging_actions_end == theirs._hanging_actions_end
    assert ours._hanging_rewards_end == theirs._hanging_rewards_end
    assert {agent_id: mapping.get() for agent_id, mapping in ours.env_t_to_agent_t.items()} == {
        agent_id: mapping.get() for agent_id, mapping in theirs.env_t_to_agent_t.items()}
    np.testing.assert_equal(ours.get_observations(-1), theirs.get_observations(-1))
    # the same play recorded by us gives the same agents' episodes (ids aside)
    mine = record(MultiAgentEpisode(theirs.id_, agent_to_module_mapping_fn=team, **spaces),
                  reset, steps, until)
    assert_same_agents(aligned(mine, theirs), theirs)


def test_we_read_rllibs_lookback_chunks_and_its_terminal_step_quirk():
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode as RLlibEpisode

    lists = dict(observations=[TURNS_RESET] + [step["observations"] for step in TURNS],
                 actions=[step["actions"] for step in TURNS],
                 rewards=[step["rewards"] for step in TURNS],
                 extra_model_outputs=[step["extra_model_outputs"] for step in TURNS],
                 terminateds={"x": True, "o": True, "__all__": True})  # RLlib's constructor
    theirs = RLlibEpisode("chunk", len_lookback_buffer=1, **lists)
    data = msgpack.packb(rllib_state_as_data(theirs), default=msgpack_numpy.encode)
    ours = MultiAgentEpisode.from_state(unpack_episode_state(data))
    assert_same_agents(ours, theirs)
    assert ours.env_t_to_agent_t["x"].get(slice(-1, None), neg_index_as_lookback=True) == [
        -1, "S", 0, "S", 1]
    assert ours.agent_episodes["x"].get_observations() == [1, 2] and len(ours) == 3
    assert_same_agents(aligned(MultiAgentEpisode("chunk", len_lookback_buffer=1, **lists),
                               theirs), theirs)
    # An agent terminated without a last observation: RLlib's mapping gets an "S" and then
    # the agent's step at that env step; we read it (and write one entry per env step).
    theirs = record(RLlibEpisode(), {"a": 0, "b": 10}, (
        dict(observations={"a": 1}, actions={"a": 0, "b": 1}, rewards={"a": 1.0, "b": 2.0}),
        dict(observations={"a": 2}, actions={"a": 0}, rewards={"a": 1.0, "b": 3.0},
             terminateds={"b": True})))
    data = msgpack.packb(rllib_state_as_data(theirs), default=msgpack_numpy.encode)
    ours = MultiAgentEpisode.from_state(unpack_episode_state(data))
    assert_same_agents(ours, theirs)
    assert ours.env_t_to_agent_t["b"].get() == [0, "S", "S", 1]
    assert ours.get_agents_to_act() == theirs.get_agents_to_act() == {"a"}
