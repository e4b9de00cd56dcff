"""EpisodeReplayBuffer: exact sample sizes, uniform sampling, FIFO eviction."""

from __future__ import annotations

import pytest

from offline_rl import EpisodeReplayBuffer, SingleAgentEpisode


def episode(id_: str, steps: int, first_obs: int = 0, t_started: int = 0,
            terminated: bool = True) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_=id_,
        observations=list(range(first_obs, first_obs + steps + 1)),
        actions=[0] * steps,
        rewards=[1.0] * steps,
        terminated=terminated,
        t_started=t_started,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("num_items", [1, 7, 64, 1000])
def test_samples_hold_exactly_num_items_timesteps(num_items):
    buffer = EpisodeReplayBuffer(capacity=1000, seed=0)
    buffer.add([episode("a", 5), episode("b", 30), episode("c", 2)])
    assert sum(len(e) for e in buffer.sample(num_items)) == num_items
    sequences = buffer.sample(num_items, batch_length_T=4)
    assert sum(len(e) for e in sequences) == num_items
    assert all(1 <= len(e) <= 4 for e in sequences)


def test_sampling_is_uniform_over_timesteps():
    buffer = EpisodeReplayBuffer(capacity=1000, seed=1)
    buffer.add([episode("short", 10), episode("long", 90)])
    ids = [e.id_ for e in buffer.sample(20_000)]
    assert ids.count("long") / len(ids) == pytest.approx(0.9, abs=0.01)


def test_seeded_buffers_sample_the_same_timesteps():
    samples = []
    for _ in range(2):
        buffer = EpisodeReplayBuffer(seed=7)
        buffer.add([episode("a", 50)])
        samples.append([int(e.get_observations(0)) for e in buffer.sample(32)])
    assert samples[0] == samples[1]


def test_fifo_eviction_of_whole_episodes():
    buffer = EpisodeReplayBuffer(capacity=10)
    buffer.add([episode("a", 4), episode("b", 4)])
    buffer.add(episode("c", 4))
    assert buffer.get_num_episodes() == 2
    assert buffer.get_num_timesteps() == 8
    assert {e.id_ for e in buffer.sample(100)} == {"b", "c"}
    buffer.add(episode("huge", 50))
    assert buffer.get_num_episodes() == 1 and buffer.get_num_timesteps() == 50


def test_chunks_of_an_ongoing_episode_are_joined():
    buffer = EpisodeReplayBuffer()
    buffer.add(episode("a", 3, terminated=False))
    buffer.add(episode("a", 2, first_obs=3, t_started=3))
    assert buffer.get_num_episodes() == 1 and buffer.get_num_timesteps() == 5
    with pytest.raises(ValueError, match="does not continue it"):
        buffer.add(episode("a", 2, first_obs=9, t_started=9))


def test_transitions_are_built_once_per_add_and_follow_it():
    # An online buffer is drawn from hundreds of times between two adds: one build serves them.
    buffer = EpisodeReplayBuffer(capacity=10)
    buffer.add([episode("a", 3, terminated=False).to_numpy(), episode("b", 4).to_numpy()])
    first = buffer.transitions()
    assert buffer.transitions() is first
    assert first.columns["obs"].tolist() == [0, 1, 2, 0, 1, 2, 3]
    buffer.add(episode("a", 2, first_obs=3, t_started=3).to_numpy())  # continues "a"
    assert buffer.transitions().columns["obs"].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3]
    buffer.add(episode("c", 4, first_obs=10).to_numpy())  # evicts "a"
    columns = buffer.transitions().columns
    assert columns["obs"].tolist() == [0, 1, 2, 3, 10, 11, 12, 13]
    assert columns["terminateds"].tolist() == [False, False, False, True] * 2
    assert first.columns["obs"].tolist() == [0, 1, 2, 0, 1, 2, 3]  # a build taken stays as it was


def test_sampled_slices_keep_lookback_and_data():
    buffer = EpisodeReplayBuffer(seed=3)
    buffer.add(episode("a", 20))
    for sample in buffer.sample(50, lookback=1):
        t = sample.t_started
        assert sample.get_observations(0) == t
        assert sample.get_observations(1) == t + 1
        if t > 0:
            assert sample.get_observations(-1, neg_index_as_lookback=True) == t - 1


def test_n_step_samples_discount_rewards_and_skip_ahead():
    buffer = EpisodeReplayBuffer(seed=0)
    buffer.add(episode("a", 10))
    for sample in buffer.sample(40, n_step=3, gamma=0.5):
        t = sample.t_started
        steps = min(3, 10 - t)
        assert int(sample.get_observations(1)) == t + steps
        assert sample.get_rewards(0) == pytest.approx(sum(0.5 ** k for k in range(steps)))
        assert sample.is_terminated == (t + steps == 10)
        assert sample.get_extra_model_outputs("n_step", 0) == steps


def test_empty_buffer_and_bad_arguments():
    buffer = EpisodeReplayBuffer()
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(1)
    buffer.add(episode("a", 3))
    with pytest.raises(ValueError, match=">= 1"):
        buffer.sample(0)
    with pytest.raises(ValueError, match="capacity"):
        EpisodeReplayBuffer(capacity=0)
