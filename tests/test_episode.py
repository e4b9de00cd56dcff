"""SingleAgentEpisode: RLlib's constructor, getters, slice/concat/cut and state layout."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest

from offline_rl.codec import pack_episode_state, unpack_episode_state
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.episode_state import STATE_KEYS
from offline_rl.episodes.lookback import InfiniteLookbackBuffer

FIXTURES = Path(__file__).parent / "fixtures" / "rllib_cartpole_episodes"


def fixture_payloads() -> list[tuple[str, bytes]]:
    """(file name, item bytes) of every episode RLlib recorded in the fixture."""
    return [(path.name, item)
            for path in sorted(FIXTURES.rglob("*.parquet"))
            for item in pq.read_table(path).column("item").to_pylist()]


def make_episode(steps: int = 5, *, lookback: int | str = 0, terminated: bool = False,
                 t_started: int = 0, id_: str = "ep") -> SingleAgentEpisode:
    """Observations 0..steps (as float32 pairs), actions i % 2, rewards i, logp -i."""
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, i, np.float32) for i in range(steps + 1)],
        observation_space=gym.spaces.Box(-100, 100, (2,), np.float32),
        actions=[i % 2 for i in range(steps)],
        action_space=gym.spaces.Discrete(2),
        rewards=[float(i) for i in range(steps)],
        infos=[{"i": i} for i in range(steps + 1)],
        extra_model_outputs={"action_logp": [-float(i) for i in range(steps)]},
        terminated=terminated,
        t_started=t_started,
        len_lookback_buffer=lookback,
    )


def observation_ids(values) -> list[int]:
    return [int(v[0]) for v in values]


def test_auto_lookback_makes_all_given_steps_history():
    episode = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0])
    assert len(episode) == 0 and episode.t == episode.t_started == 0
    assert episode.observations.lookback == 2 and episode.get_observations() == [2]
    assert episode.get_rewards(-1, neg_index_as_lookback=True) == 1.0


def test_int_lookback_and_timesteps():
    episode = make_episode(5, lookback=2, t_started=10)
    assert len(episode) == episode.env_steps() == 3
    assert episode.t_started == 10 and episode.t == 13
    assert observation_ids(episode.get_observations()) == [2, 3, 4, 5]
    assert episode.get_actions() == [0, 1, 0]
    assert episode.get_return() == 2.0 + 3.0 + 4.0
    assert make_episode(2, lookback=9).observations.lookback == 2


def test_defaults():
    episode = SingleAgentEpisode(observations=[0, 1], actions=[1], rewards=[0.0],
                                 len_lookback_buffer=0)
    assert episode.get_infos() == [{}, {}]
    assert len(episode.id_) == 32 and episode.id_ != SingleAgentEpisode().id_
    assert episode.custom_data == {} and episode.extra_model_outputs == {}
    assert episode.agent_id is None and episode.module_id is None
    assert not episode.is_done and not episode.is_finalized
    with pytest.raises(ValueError, match="len_lookback_buffer"):
        SingleAgentEpisode(len_lookback_buffer=-1)


def test_spaces_are_set_on_the_buffers():
    episode = make_episode(2)
    assert episode.actions.space == gym.spaces.Discrete(2)
    episode.action_space = gym.spaces.Discrete(3)
    assert episode.actions.space == gym.spaces.Discrete(3) == episode.action_space
    episode.observation_space = None
    assert episode.observations.space is None
    assert episode.rewards.space == gym.spaces.Box(-np.inf, np.inf, (), np.float32)


def test_getters_with_all_index_kinds():
    episode = make_episode(5, lookback=1)
    assert int(episode.get_observations(0)[0]) == 1
    assert int(episode.get_observations(-1)[0]) == 5
    assert observation_ids(episode.get_observations([0, -1])) == [1, 5]
    assert observation_ids(episode.get_observations(slice(1, 3))) == [2, 3]
    assert observation_ids(episode.get_observations(slice(-2, None))) == [4, 5]
    assert int(episode.get_observations(-1, neg_index_as_lookback=True)[0]) == 0
    assert episode.get_rewards(slice(-3, 1), neg_index_as_lookback=True, fill=0.0) == [
        0.0, 0.0, 0.0, 1.0]
    assert episode.get_infos(0) == {"i": 1}
    assert episode.get_infos(slice(3, 7), fill={}) == [{"i": 4}, {"i": 5}, {}, {}]
    assert episode.get_extra_model_outputs("action_logp", slice(0, 2)) == [-1.0, -2.0]
    assert episode.get_extra_model_outputs("action_logp", 9, fill=0.0) == 0.0
    with pytest.raises(IndexError):
        episode.get_actions(4)
    with pytest.raises(KeyError, match="no extra model output 'vf'"):
        episode.get_extra_model_outputs("vf")


def test_one_hot_and_fill_on_a_finalized_episode():
    episode = make_episode(3).to_numpy()
    hot = episode.get_actions(slice(-1, 2), neg_index_as_lookback=True, fill=0.0,
                              one_hot_discrete=True)
    assert hot.dtype == np.float32
    np.testing.assert_array_equal(hot, [[0, 0], [1, 0], [0, 1]])
    padded = episode.get_observations(slice(2, 6), fill=-1.0)
    assert padded.shape == (4, 2) and padded.dtype == np.float32
    np.testing.assert_array_equal(padded[:, 0], [2, 3, -1, -1])


def test_to_numpy_finalizes_every_buffer_but_keeps_infos_a_list():
    episode = make_episode(3)
    assert episode.to_numpy() is episode and episode.is_finalized
    assert episode.get_observations(slice(0, 3)).shape == (3, 2)
    assert isinstance(episode.get_actions(), np.ndarray)
    assert isinstance(episode.get_rewards(), np.ndarray)
    assert isinstance(episode.get_extra_model_outputs("action_logp"), np.ndarray)
    assert episode.infos.finalized and episode.get_infos() == [{"i": i} for i in range(4)]


def test_validate_checks_lengths():
    make_episode(3).validate()
    with pytest.raises(ValueError, match="3 actions for 3 observations; expected 2"):
        SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1, 2], rewards=[0, 0],
                           len_lookback_buffer=0).validate()
    with pytest.raises(ValueError, match="2 infos for 3 observations"):
        SingleAgentEpisode(observations=[0, 1, 2], infos=[{}, {}], actions=[0, 1],
                           rewards=[0, 0], len_lookback_buffer=0).validate()
    with pytest.raises(ValueError, match=r"1 extra_model_outputs\['logp'\] for 3 observations"):
        SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[0, 0],
                           extra_model_outputs={"logp": [0.0]}, len_lookback_buffer=0).validate()
    episode = make_episode(3)
    episode.t += 1
    with pytest.raises(ValueError, match="t - t_started"):
        episode.validate()


def test_add_env_reset_and_steps():
    episode = SingleAgentEpisode(observation_space=gym.spaces.Discrete(9))
    with pytest.raises(ValueError, match="add_env_reset first"):
        episode.add_env_step(1, 0, 1.0)
    episode.add_env_reset(0, {"start": True})
    assert len(episode) == 0 and episode.get_infos(0) == {"start": True}
    with pytest.raises(ValueError, match="already has observations"):
        episode.add_env_reset(0)
    episode.add_env_step(1, 1, 0.5, extra_model_outputs={"action_logp": -0.1})
    episode.add_env_step(2, 0, 1.5, {"last": 1}, terminated=True,
                         extra_model_outputs={"action_logp": -0.2})
    episode.validate()
    assert len(episode) == 2 and episode.t == 2 and episode.is_terminated and episode.is_done
    assert episode.get_observations() == [0, 1, 2]
    assert episode.get_infos() == [{"start": True}, {}, {"last": 1}]
    assert episode.get_extra_model_outputs("action_logp") == [-0.1, -0.2]
    assert episode.get_return() == 2.0
    with pytest.raises(ValueError, match="is done"):
        episode.add_env_step(3, 0, 0.0)


def test_slice_like_rllib():
    episode = SingleAgentEpisode(observations=[0, 1, 2, 3, 4, 5], actions=[1, 2, 3, 4, 5],
                                 rewards=[0.1, 0.2, 0.3, 0.4, 0.5], terminated=True,
                                 len_lookback_buffer=0)
    head = episode.slice(slice(None, 1))
    assert head.get_observations() == [0, 1] and head.get_actions() == [1]
    assert not head.is_terminated and head.t_started == 0 and len(head) == 1
    tail = episode.slice(slice(-2, None))
    assert tail.get_observations() == [3, 4, 5] and tail.get_rewards() == [0.4, 0.5]
    assert tail.is_terminated and tail.t_started == 3 and tail.t == 5
    assert tail.id_ == episode.id_
    tail.validate()


def test_slice_lookback_is_capped_by_available_history():
    episode = make_episode(6, lookback=1)
    piece = episode.slice(slice(2, 4), len_lookback_buffer=5)
    assert piece.observations.lookback == 3 and piece.actions.lookback == 3
    assert observation_ids(piece.get_observations()) == [3, 4, 5]
    assert observation_ids(piece.get_observations(slice(-3, 0), neg_index_as_lookback=True)) == [
        0, 1, 2]
    assert piece.get_extra_model_outputs("action_logp") == [-3.0, -4.0]
    assert piece.get_infos() == [{"i": 3}, {"i": 4}, {"i": 5}]
    assert piece.t_started == 2
    piece.validate()
    default = episode.slice(slice(0, 2))
    assert default.observations.lookback == 1
    assert int(default.get_observations(-1, neg_index_as_lookback=True)[0]) == 0
    with pytest.raises(ValueError, match="step 1"):
        episode.slice(slice(0, 4, 2))


def test_slice_of_a_finalized_episode_stays_finalized():
    episode = make_episode(4, terminated=True).to_numpy()
    piece = episode.slice(slice(1, 2), len_lookback_buffer=1)
    assert piece.is_finalized and isinstance(piece.get_actions(), np.ndarray)
    assert piece.infos.finalized and isinstance(piece.get_infos(), list)
    np.testing.assert_array_equal(piece.get_observations(slice(-1, 2), neg_index_as_lookback=True),
                                  [[0, 0], [1, 1], [2, 2]])
    assert not piece.is_done
    assert episode.slice(slice(3, 4)).is_terminated


def test_cut_then_concat_rebuilds_the_episode():
    episode = make_episode(3)
    successor = episode.cut(len_lookback_buffer=2)
    assert successor.id_ == episode.id_ and len(successor) == 0
    assert successor.t_started == successor.t == 3
    assert successor.get_actions(slice(-2, 0), neg_index_as_lookback=True) == [1, 0]
    assert int(successor.get_observations(0)[0]) == 3
    successor.add_env_step(np.full(2, 4, np.float32), 1, 3.0, {"i": 4},
                           extra_model_outputs={"action_logp": -3.0})
    successor.add_env_step(np.full(2, 5, np.float32), 0, 4.0, {"i": 5}, truncated=True,
                           extra_model_outputs={"action_logp": -4.0})
    successor.validate()
    episode.concat_episode(successor)
    episode.validate()
    assert episode.t == 5 and len(episode) == 5 and episode.is_truncated
    assert observation_ids(episode.get_observations()) == [0, 1, 2, 3, 4, 5]
    assert episode.get_actions() == [0, 1, 0, 1, 0]
    assert episode.get_infos() == [{"i": i} for i in range(6)]
    assert episode.get_extra_model_outputs("action_logp") == [-0.0, -1.0, -2.0, -3.0, -4.0]


def test_cut_without_lookback_and_of_a_done_episode():
    successor = make_episode(3).cut()
    assert successor.observations.lookback == 0 and successor.get_actions() == []
    assert observation_ids(successor.get_observations()) == [3]
    with pytest.raises(ValueError, match="done"):
        make_episode(3, terminated=True).cut()


def test_concat_onto_a_finalized_episode():
    episode = make_episode(2).to_numpy()
    chunk = make_episode(2, t_started=2)
    chunk.observations.data = [np.full(2, i, np.float32) for i in (2, 3, 4)]
    episode.concat_episode(chunk)
    episode.validate()
    np.testing.assert_array_equal(episode.get_observations()[:, 0], [0, 1, 2, 3, 4])
    assert isinstance(episode.get_rewards(), np.ndarray) and len(episode) == 4


def test_concat_rejects_chunks_that_do_not_continue():
    with pytest.raises(ValueError, match="cannot concat episode other"):
        make_episode(2).concat_episode(make_episode(2, t_started=2, id_="other"))
    with pytest.raises(ValueError, match="ends at t=2, but the chunk .* starts at t=3"):
        make_episode(2).concat_episode(make_episode(2, t_started=3))
    with pytest.raises(ValueError, match="is done"):
        make_episode(2, terminated=True).concat_episode(make_episode(2, t_started=2))
    with pytest.raises(ValueError, match="first observation is not"):
        make_episode(2).concat_episode(make_episode(2, t_started=2))
    chunk = make_episode(2, t_started=2)
    chunk.extra_model_outputs.clear()
    with pytest.raises(ValueError, match="extra model outputs"):
        make_episode(2).concat_episode(chunk)


@pytest.mark.parametrize("finalized", [False, True])
def test_state_round_trip_through_msgpack(finalized):
    episode = make_episode(4, lookback=1, t_started=7, terminated=True)
    episode.agent_id, episode.module_id = "agent_0", "default_policy"
    episode.custom_data["note"] = [1, 2]
    if finalized:
        episode.to_numpy()
    state = episode.get_state()
    assert tuple(state) == STATE_KEYS
    restored = SingleAgentEpisode.from_state(unpack_episode_state(pack_episode_state(state)))
    assert restored.id_ == "ep" and restored.agent_id == "agent_0"
    assert restored.module_id == "default_policy" and restored.custom_data == {"note": [1, 2]}
    assert restored.t_started == 7 and restored.t == 10 and restored.is_terminated
    assert restored.observation_space == episode.observation_space
    assert restored.action_space == gym.spaces.Discrete(2) == restored.actions.space
    assert not restored.is_finalized  # packed as RLlib packs: columns as lists
    assert restored.observations.lookback == 1
    np.testing.assert_array_equal(np.asarray(restored.get_observations()),
                                  np.asarray(episode.get_observations()))
    assert list(restored.get_actions()) == list(episode.get_actions())
    assert list(restored.get_extra_model_outputs("action_logp")) == [-1.0, -2.0, -3.0]
    assert restored.get_infos() == episode.get_infos()
    assert pack_episode_state(restored.get_state()) == pack_episode_state(state)


def test_state_without_extra_model_outputs_is_none_like_rllib():
    episode = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0],
                                 len_lookback_buffer=0)
    state = episode.get_state()
    assert state["extra_model_outputs"] is None
    assert state["_observation_space"] is None and state["infos"]["space"] is None
    assert SingleAgentEpisode.from_state(state).extra_model_outputs == {}


def test_from_state_names_what_is_malformed():
    state = make_episode(2).get_state()
    with pytest.raises(ValueError, match=r"missing \['t'\]"):
        SingleAgentEpisode.from_state({k: v for k, v in state.items() if k != "t"})
    with pytest.raises(ValueError, match="field 'rewards' must be a buffer state dict"):
        SingleAgentEpisode.from_state({**state, "rewards": [1.0, 2.0]})
    with pytest.raises(ValueError, match=r"field 'actions': buffer state is missing \['data'\]"):
        SingleAgentEpisode.from_state({**state, "actions": {"lookback": 0, "finalized": False,
                                                            "space": None}})
    with pytest.raises(ValueError, match=r"field '_action_space': space\.space: unknown"):
        SingleAgentEpisode.from_state({**state, "_action_space": {"space": "weird"}})
    with pytest.raises(ValueError, match="t - t_started"):
        SingleAgentEpisode.from_state({**state, "t": 99})
    with pytest.raises(ValueError, match="1 actions for 3 observations"):
        SingleAgentEpisode.from_state({**state, "actions": InfiniteLookbackBuffer([0]).get_state()})


def test_every_fixture_episode_reads_and_writes_rllibs_layout():
    payloads = fixture_payloads()
    assert len(payloads) == 20
    cartpole = gym.make("CartPole-v1")
    for name, item in payloads:
        state = unpack_episode_state(item, where=name)
        episode = SingleAgentEpisode.from_state(state)
        episode.validate()
        assert episode.is_done and len(episode) > 0
        assert len(episode.get_observations()) == len(episode.get_actions()) + 1
        assert len(episode.get_infos()) == len(episode.get_observations())
        assert episode.observation_space == cartpole.observation_space
        assert episode.action_space == cartpole.action_space
        assert episode.get_return() == len(episode)  # CartPole pays 1 per step
        written = episode.get_state()
        assert written.keys() == state.keys()
        for key in state:
            assert type(written[key]) is type(state[key]), key
        for key in ("observations", "actions", "rewards", "infos"):
            assert written[key].keys() == state[key].keys()
            assert type(written[key]["data"]) is type(state[key]["data"])
        assert written["extra_model_outputs"].keys() == state["extra_model_outputs"].keys()
        assert pack_episode_state(written) == item


def test_fixture_episodes_feed_the_getters_after_to_numpy():
    _, item = fixture_payloads()[0]
    episode = SingleAgentEpisode.from_state(unpack_episode_state(item)).to_numpy()
    steps = len(episode)
    assert episode.get_observations(slice(0, steps)).shape == (steps, 4)
    assert episode.get_observations(slice(1, steps + 1)).dtype == np.float32
    assert episode.get_actions().dtype == np.int32
    assert episode.get_extra_model_outputs("action_dist_inputs").shape == (steps, 2)
    np.testing.assert_allclose(np.exp(episode.get_extra_model_outputs("action_logp")).max(), 1.0,
                               atol=0.5)


def test_repr():
    text = repr(make_episode(3, terminated=True))
    assert text == ("SingleAgentEpisode(id_='ep', t_started=0, len=3, terminated=True, "
                    "truncated=False, return=3)")
