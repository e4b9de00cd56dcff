"""Episodes format and legacy SampleBatch JSON: decoding, buffer sampling, checks, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from connectors import default_learner_pipeline
from offline_rl import BCConfig, EpisodeReplayBuffer, OfflineData, OfflinePreLearner
from offline_rl.codec import pack_episode_state
from offline_rl.data.prelearner.call_output import train_columns
from offline_rl.episodes.episode import SingleAgentEpisode
from offline_rl.episodes.transitions import Transitions
from offline_rl.errors import ConfigError, DataFormatError
from offline_rl.formats.episode_input import decode_episode, sample_batch_to_episodes
from offline_rl.inspection import inspect_dataset

FIXTURES = Path(__file__).parent / "fixtures"
EPISODES = FIXTURES / "rllib_cartpole_episodes"
SAMPLE_BATCHES = FIXTURES / "rllib_cartpole_sample_batch_json"
SPACES = (gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))


def fixture_episodes() -> list[SingleAgentEpisode]:
    items = [item for file in sorted(EPISODES.rglob("*.parquet"))
             for item in pq.read_table(file).column("item").to_pylist()]
    return [decode_episode(item, "fixture") for item in items]


def make_episode(id_: str, steps: int, *, done: bool = True, reward: float = 1.0,
                 action: int = 0) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_, observations=np.zeros((steps + 1, 4), np.float32) + np.arange(steps + 1)[:, None],
        actions=np.full(steps, action), rewards=np.full(steps, reward), terminated=done,
        len_lookback_buffer=0).to_numpy()


def episodes_table(episodes: list[SingleAgentEpisode]) -> pa.Table:
    return pa.table({"item": [pack_episode_state(e.get_state()) for e in episodes]})


def episodes_config(path, **options) -> BCConfig:
    return (BCConfig().environment("CartPole-v1")
            .training(train_batch_size_per_learner=64)
            .offline_data(input_=str(path), input_read_episodes=True, **options)
            .debugging(seed=0))


@pytest.mark.parametrize("n_step", [1, 3])
def test_vectorized_sampling_equals_the_pipeline_on_buffer_slices(n_step):
    episodes = fixture_episodes()
    sliced_buffer, flat_buffer = (EpisodeReplayBuffer(capacity=10_000, seed=3) for _ in range(2))
    sliced_buffer.add(episodes)
    flat_buffer.add(episodes)
    expected = default_learner_pipeline()(
        rl_module=None, batch={},
        episodes=sliced_buffer.sample(num_items=300, n_step=n_step, gamma=0.9))
    flat = Transitions(flat_buffer.episodes).take(flat_buffer.sample_timesteps(300), n_step,
                                                  gamma=0.9)
    assert sorted(flat) == sorted(expected)
    for name in expected:
        assert flat[name].dtype == expected[name].dtype, name
        np.testing.assert_array_equal(flat[name], expected[name], err_msg=name)
    assert flat["terminateds"].any()


def test_sample_batches_split_by_episode_and_ordered_by_t():
    row = {"type": "SampleBatch", "eps_id": [5, 5, 8, 5, 8], "t": [2, 0, 0, 1, 1],
           "obs": [[2.0], [0.0], [10.0], [1.0], [11.0]],
           "new_obs": [[3.0], [1.0], [11.0], [2.0], [12.0]],
           "actions": [2, 0, 7, 1, 8], "rewards": [1.0, 1.0, 2.0, 1.0, 2.0],
           "terminateds": [True, False, False, False, False],
           "truncateds": [False, False, False, False, True],
           "action_logp": [-0.1, -0.2, -0.3, -0.4, -0.5]}
    first, second = sample_batch_to_episodes(row, "x.json")
    assert (first.id_, first.is_terminated, second.id_, second.is_truncated) == ("5", True,
                                                                                  "8", True)
    np.testing.assert_array_equal(first.get_observations()[:, 0], [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(first.get_actions(), [0, 1, 2])
    np.testing.assert_array_equal(first.get_extra_model_outputs("action_logp"), [-0.2, -0.4, -0.1])
    np.testing.assert_array_equal(second.get_observations()[:, 0], [10.0, 11.0, 12.0])


def test_every_legacy_json_line_becomes_its_episode():
    lines = [json.loads(line) for file in sorted(SAMPLE_BATCHES.glob("*.json"))
             for line in file.read_text().splitlines()]
    for number, line in enumerate(lines):
        (episode,) = sample_batch_to_episodes(line, f"line {number}")
        assert len(episode) == len(line["t"]) and episode.is_terminated
        assert episode.get_observations().shape == (len(line["t"]) + 1, 4)
        np.testing.assert_array_equal(episode.get_actions(), line["actions"])


def test_prelearner_samples_exact_batches_and_counts_duplicates(ray_session, tmp_path):
    from offline_rl.data.prelearner.data_ledger import open_book

    book = open_book()
    config = episodes_config(tmp_path)
    prelearner = OfflinePreLearner(config, SPACES, ledger=book)
    episodes = [make_episode(f"e{i}", 40) for i in range(5)]
    batch = train_columns(prelearner(episodes_table([*episodes, episodes[0]])))
    assert len(batch["obs"]) == 192  # 200 new timesteps -> 3 batches of 64
    again = train_columns(prelearner(episodes_table(episodes[1:2])))
    assert len(again["obs"]) == 64
    assert book.totals() == {"duplicate_episodes": 2}
    assert set(np.unique(batch["obs"][:, 1])) <= set(range(40))


@pytest.mark.parametrize("policy", ["raise", "drop"])
def test_nonfinite_rewards_raise_or_are_dropped_and_counted(ray_session, tmp_path, policy):
    from offline_rl.data.prelearner.data_ledger import open_book

    book = open_book()
    prelearner = OfflinePreLearner(episodes_config(tmp_path, input_nonfinite=policy), SPACES,
                                   ledger=book)
    table = episodes_table([make_episode("good", 70), make_episode("bad", 3, reward=np.nan)])
    if policy == "raise":
        with pytest.raises(DataFormatError, match=r"episode bad: column 'rewards' holds NaN.*"
                                                  r"input_nonfinite='drop'"):
            prelearner(table)
        return
    assert len(train_columns(prelearner(table))["obs"]) == 64
    assert book.totals() == {"nonfinite_episodes": 1}


def test_an_action_outside_the_space_is_named(tmp_path):
    episode = make_episode("far", 5, action=4)
    with pytest.raises(DataFormatError, match=r"episode far: action 4 in row 0 is outside the "
                                              r"action space Discrete\(2\)"):
        OfflinePreLearner(episodes_config(tmp_path), SPACES)(episodes_table([episode]))


def test_an_episode_recorded_with_another_space_is_named(tmp_path):
    """Issue 17: the space stored with an episode must agree with the configured env's."""
    episode = make_episode("pendulum", 5)
    episode.observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    with pytest.raises(DataFormatError, match=r"episode pendulum was recorded with the "
                                              r"observation space Box\(-1\.0, 1\.0, \(3,\), "
                                              r"float32\), but the config's is Box\(.*\(4,\)"):
        OfflinePreLearner(episodes_config(tmp_path), SPACES)(episodes_table([episode]))


def test_an_unfinished_episode_trains_as_a_chunk_and_is_counted(ray_session, tmp_path):
    """RLlib's recordings may end with a chunk that is neither terminated nor truncated."""
    from offline_rl.data.prelearner.data_ledger import open_book

    book = open_book()
    prelearner = OfflinePreLearner(episodes_config(tmp_path), SPACES, ledger=book)
    batch = train_columns(prelearner(episodes_table([make_episode("cut", 70, done=False)])))
    assert len(batch["obs"]) == 64 and not batch["terminateds"].any()
    assert book.totals() == {"unfinished_episodes": 1}


def test_inconsistent_lengths_and_corrupt_bytes_are_named(tmp_path):
    state = make_episode("short", 5).get_state()
    state["actions"]["data"] = state["actions"]["data"][:-1]
    prelearner = OfflinePreLearner(episodes_config(tmp_path), SPACES)
    table = pa.table({"item": [pack_episode_state(state)], "path": ["data/a.parquet"]})
    with pytest.raises(DataFormatError, match=r"data/a\.parquet \(column 'item'\).*4 actions "
                                              r"for 6 observations"):
        prelearner(table)
    corrupt = pa.table({"item": [b"\xc1\xff not msgpack"], "path": ["data/b.parquet"]})
    with pytest.raises(DataFormatError, match=r"data/b\.parquet \(column 'item'\).*corrupt"):
        prelearner(corrupt)
    tabular = pa.table({"obs": [[0.0] * 4], "path": ["data/c.parquet"]})
    with pytest.raises(DataFormatError, match=r"data/c\.parquet has no column 'item'.*unset "
                                              "input_read_episodes"):
        prelearner(tabular)


def test_both_episode_formats_is_a_config_error(tmp_path):
    config = episodes_config(tmp_path, input_read_sample_batches=True)
    with pytest.raises(ConfigError, match="input_read_episodes and input_read_sample_batches"):
        config.validate()


def test_json_read_as_parquet_says_to_read_json():
    config = (BCConfig().environment("CartPole-v1")
              .offline_data(input_=str(SAMPLE_BATCHES), input_read_sample_batches=True))
    with pytest.raises(DataFormatError, match=r"no Parquet files \(\*\.parquet\) under .*, but "
                                              r"JSON files \(output-.*\.json\): read them with "
                                              r"config\.offline_data\(input_read_method='read_json'"):
        OfflineData(config, SPACES)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("source", ["tabular", "episodes", "sample_batch_json"])
def test_bc_trains_on_rllib_recordings(ray_session, source):
    config = BCConfig().environment("CartPole-v1").training(train_batch_size_per_learner=128)
    if source == "tabular":
        config = config.offline_data(input_=str(FIXTURES / "rllib_cartpole_tabular"))
    elif source == "episodes":
        config = config.offline_data(input_=str(EPISODES), input_read_episodes=True)
    else:
        config = config.offline_data(input_=str(SAMPLE_BATCHES), input_read_method="read_json",
                                     input_read_sample_batches=True)
    config = config.offline_data(dataset_num_iters_per_learner=1)
    with config.debugging(seed=0).build() as algo:
        results = [algo.train() for _ in range(5)]
        counts = algo.offline_data.counts(wait=True)
    losses = [r["learners"]["default_policy"]["policy_loss"] for r in results]
    assert all(np.isfinite(losses))
    assert results[-1]["learners"]["__all_modules__"]["num_env_steps_trained_lifetime"] == 640
    assert all(result["data"]["dropped"] == {} for result in results)
    if source == "tabular":  # RLlib's recording stopped mid-episode, as inspect tells too
        unfinished = inspect_dataset(str(FIXTURES / "rllib_cartpole_tabular"))
        assert counts == {"unfinished_episodes": unfinished["incomplete_episodes"]} != {}
    else:
        assert counts == {}


@pytest.mark.timeout(240)
def test_duplicates_across_files_are_dropped_and_reported(ray_session, tmp_path):
    for part in range(2):  # the same episodes twice: the second copy is dropped
        pq.write_table(episodes_table([make_episode(f"e{i}", 30) for i in range(4)]),
                       tmp_path / f"part-{part}.parquet")
    config = episodes_config(tmp_path, input_read_batch_size=8)
    data = OfflineData(config, SPACES).start()
    try:
        assert len(data.sample()["obs"]) == 64
        assert data.counts(wait=True) == {"duplicate_episodes": 4}
    finally:
        data.stop()
