"""Recording: writer round trips in both formats, the RLlib layout, Ray recorders, crash safety."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

from offline_rl import BCConfig
from offline_rl.codec import unpack_episode_state
from offline_rl.compression import decompress_column
from offline_rl.episodes.episode_state import STATE_KEYS
from offline_rl.episodes.transitions import Transitions
from offline_rl.evaluation.env_evaluation import EnvEvaluator
from offline_rl.evaluation.rollout import make_env, rollout
from offline_rl.formats.episode_input import decode_episode
from offline_rl.formats.tabular import table_to_numpy
from offline_rl.recording.manifests import MANIFEST_FOLDER
from offline_rl.recording.policies import as_batch_policy
from offline_rl.recording.recorder import Recorder, _EnvRunner
from offline_rl.recording.recorder_config import RecorderConfig
from offline_rl.recording.writer import EpisodeWriter
from offline_rl.settings.debugging import DebuggingConfig
from offline_rl.settings.environment import EnvironmentConfig
from offline_rl.settings.offline_data import OfflineDataConfig
from offline_rl.settings.resources import EnvRunnersConfig
from offline_rl.statistics import episode_statistics
from tests.policies import DiesAfter, alternating

FIXTURE_EPISODES = Path(__file__).parent / "fixtures" / "rllib_cartpole_episodes"
STATISTICS = ["num_episodes", "num_env_steps", "episode_return_mean", "episode_return_std",
              "episode_return_min", "episode_return_max", "episode_len_mean"]


def cartpole_episodes(count: int = 5):
    envs = [make_env("CartPole-v1") for _ in range(2)]
    return list(rollout(envs, as_batch_policy(alternating), count, seed=0))


class SeesActions(gym.Wrapper):
    """Keeps every action the env is stepped with."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.seen = []

    def step(self, action):
        self.seen.append(action)
        return super().step(action)


def test_envs_get_converted_actions_and_episodes_keep_the_policys():
    env = SeesActions(gym.make("Pendulum-v1", max_episode_steps=3))
    too_far = as_batch_policy(lambda obs: np.full((len(obs), 1), 5.0, np.float32))
    (episode,) = rollout([env], too_far, 1, seed=0)
    np.testing.assert_array_equal(episode.get_actions(), np.full((3, 1), 5.0, np.float32))
    np.testing.assert_array_equal(env.seen, np.full((3, 1), 2.0))  # clipped to the Box
    cartpole = SeesActions(gym.make("CartPole-v1", max_episode_steps=2))
    list(rollout([cartpole], as_batch_policy(alternating), 1, seed=0))
    assert [type(action) for action in cartpole.seen] == [int, int]


def test_rollout_seeds_episodes_in_order_and_its_envs_can_be_reused():
    envs = [make_env("CartPole-v1") for _ in range(2)]
    started = []
    episodes = list(rollout(envs, as_batch_policy(alternating), 3, seed=7,
                            on_episode_start=started.append))
    assert started == [0, 1, 2]
    assert sorted(e.get_observations(0).tolist() for e in episodes) == sorted(
        make_env("CartPole-v1").reset(seed=seed)[0].tolist() for seed in (7, 8, 9))
    assert [len(e) for e in rollout(envs, as_batch_policy(alternating), 3, seed=7)] == [
        len(e) for e in episodes]


def test_episode_statistics_use_rllibs_names():
    statistics = episode_statistics([1.0, 3.0], [2, 6])
    assert list(statistics) == STATISTICS
    assert statistics == {"num_episodes": 2, "num_env_steps": 8, "episode_return_mean": 2.0,
                          "episode_return_std": 1.0, "episode_return_min": 1.0,
                          "episode_return_max": 3.0, "episode_len_mean": 4.0}
    assert episode_statistics([], []) == {"num_episodes": 0, "num_env_steps": 0,
                                          **dict.fromkeys(STATISTICS[2:])}
    with pytest.raises(ValueError, match="2 returns but 1 lengths"):
        episode_statistics([1.0, 2.0], [3])


def test_evaluator_keeps_its_envs_and_repeats_seeded_evaluations():
    evaluator = EnvEvaluator("CartPole-v1", num_envs=2, seed=0)
    envs = list(evaluator.envs)
    first = evaluator.evaluate(lambda obs: (obs[:, 2] > 0).astype(np.int64), 3)
    assert list(first) == STATISTICS and first["num_episodes"] == 3
    assert evaluator.evaluate(lambda obs: (obs[:, 2] > 0).astype(np.int64), 3) == first
    assert evaluator.envs == envs
    evaluator.close()


def test_env_runner_keeps_its_envs_across_record_calls(tmp_path):
    config = RecorderConfig(EnvironmentConfig(env="CartPole-v1"),
                            EnvRunnersConfig(num_envs_per_env_runner=2),
                            OfflineDataConfig(output=str(tmp_path)), DebuggingConfig(seed=0))
    runner = _EnvRunner(config, alternating, 0, run_id="test")
    envs = list(runner.envs)
    returns, lengths, cut_notice = runner.record(3)
    assert len(returns) == len(lengths) == 3 and cut_notice is None
    runner.record(2)
    assert runner.envs == envs and runner.episodes_started == 5
    assert runner.stop()


def read_files(folder: Path) -> pa.Table:
    files = sorted(folder.rglob("*.parquet"))
    hidden = [f for f in folder.rglob("*") if f.name.startswith(".")]
    assert files and [f.name for f in hidden] in ([], [MANIFEST_FOLDER])  # no temporary file
    return pa.concat_tables(pq.read_table(file) for file in files)


@pytest.mark.parametrize("compress", [[], ["obs"]])
def test_tabular_round_trip_is_identical(tmp_path, compress):
    episodes = cartpole_episodes()
    writer = EpisodeWriter(str(tmp_path), env_name="CartPole-v1", write_episodes=False,
                           compress_columns=compress, max_rows_per_file=40)
    writer.add(episodes)
    writer.flush()
    table = read_files(tmp_path / "cartpole-v1")
    assert table.column_names[:3] == ["eps_id", "agent_id", "module_id"]  # RLlib's layout
    assert table.column("agent_id").null_count == table.column("module_id").null_count == len(
        table)
    plain = [name for name in table.column_names[3:]
             if name not in ("obs", "new_obs") or not compress]
    rows = table_to_numpy(table, ["eps_id", *plain])
    for name in ("obs", "new_obs"):
        if compress:
            assert pa.types.is_string(table.schema.field(name).type)  # RLlib's base64 text
            rows[name] = decompress_column(table.column(name).to_pylist(), name, "test")
    expected = Transitions(episodes).columns
    for name, values in expected.items():
        np.testing.assert_array_equal(rows[name], values, err_msg=name)
    assert len(np.unique(rows["eps_id"])) == len(episodes)


def test_episodes_round_trip_is_identical_and_matches_rllibs_layout(tmp_path):
    episodes = cartpole_episodes()
    writer = EpisodeWriter(str(tmp_path), env_name="CartPole-v1", max_rows_per_file=2)
    assert len(writer.add(episodes) + writer.flush()) == 3
    items = read_files(tmp_path).column("item").to_pylist()
    for original, item in zip(episodes, items, strict=True):
        restored = decode_episode(item, "test")
        for getter in ("get_observations", "get_actions", "get_rewards"):
            np.testing.assert_array_equal(getattr(restored, getter)(),
                                          getattr(original, getter)())
        assert (restored.is_terminated, restored.is_truncated) == (
            original.is_terminated, original.is_truncated)
    ours = unpack_episode_state(items[0])
    rllib_file = next(FIXTURE_EPISODES.rglob("*.parquet"))
    theirs = unpack_episode_state(pq.read_table(rllib_file).column("item")[0].as_py())
    assert set(ours) == set(theirs) == set(STATE_KEYS)
    for key in theirs:
        assert type(ours[key]) is type(theirs[key]) or theirs[key] is None, key
    for column in ("observations", "actions", "rewards", "infos"):
        assert set(ours[column]) == set(theirs[column]), column
    assert set(ours["extra_model_outputs"]) >= {"action_logp", "action_dist_inputs"}


def test_json_output_keeps_compressed_columns_readable(tmp_path):
    episodes = cartpole_episodes(2)
    writer = EpisodeWriter(str(tmp_path), env_name="CartPole-v1", write_episodes=False,
                           write_method="write_json", compress_columns=["obs"])
    (path,) = writer.add(episodes) + writer.flush()
    import pyarrow.json as pa_json

    table = pa_json.read_json(path)
    obs = decompress_column(table.column("obs").to_pylist(), "obs", path)
    np.testing.assert_array_equal(obs, Transitions(episodes).columns["obs"])


def test_interrupted_write_leaves_no_visible_file(tmp_path, monkeypatch):
    writer = EpisodeWriter(str(tmp_path), env_name="CartPole-v1")
    writer.add(cartpole_episodes(2))

    def torn_write(table, stream, **kwargs):
        stream.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", torn_write)
    with pytest.raises(OSError, match="disk full"):
        writer.flush()
    visible = [f for f in tmp_path.rglob("*") if f.is_file() and not f.name.startswith(".")]
    assert visible == []


@pytest.mark.timeout(180)
def test_recorder_actors_write_the_rllib_folder_layout_and_data_trains(ray_session, tmp_path):
    config = (BCConfig().environment("CartPole-v1")
              .training(train_batch_size_per_learner=64)
              .env_runners(num_env_runners=2, num_envs_per_env_runner=2, num_cpus_per_env_runner=0)
              .offline_data(output=str(tmp_path / "out"), output_write_episodes=False)
              .debugging(seed=0))
    with Recorder(config.recorder_config(), alternating) as recorder:
        stats = recorder.record(6, progress=False)
        files = recorder.stop()
    assert list(stats) == STATISTICS and stats["num_episodes"] == 6
    assert {Path(f).parent.name for f in files} == {"run-000000-00001", "run-000001-00001"}
    assert all(Path(f).name.startswith(f"{recorder.run_id}-part-") for f in files)
    assert all(Path(f).parent.parent.name == "cartpole-v1" for f in files)
    table = read_files(tmp_path / "out")
    assert table.num_rows == stats["num_env_steps"]
    trained = config.copy().offline_data(input_=str(tmp_path / "out"), output=None,
                                         dataset_num_iters_per_learner=1)
    with trained.build() as algo:
        assert algo.train()["learners"]["__all_modules__"]["num_env_steps_trained"] == 64


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_evaluate_records_to_output(ray_session, bc_config, tmp_path):
    config = bc_config.offline_data(output=str(tmp_path / "rec")).env_runners(
        num_cpus_per_env_runner=0).evaluation(evaluation_duration=3)
    with config.build() as algo:
        algo.train()
        result = algo.evaluate()
    assert result["env_runners"]["num_episodes"] == 3
    items = read_files(tmp_path / "rec").column("item").to_pylist()
    assert len(items) == 3 and all(decode_episode(i, "rec").is_done for i in items)


@pytest.mark.timeout(180)
def test_killed_recorder_leaves_only_whole_files(ray_session, tmp_path):
    config = (BCConfig().environment("CartPole-v1")
              .env_runners(num_cpus_per_env_runner=0)
              .offline_data(output=str(tmp_path), output_max_rows_per_file=2)
              .debugging(seed=0))
    recorder = Recorder(config.recorder_config(), DiesAfter(steps=150))
    with pytest.raises(ray.exceptions.RayActorError):
        recorder.record(50, progress=False)
    items = read_files(tmp_path).column("item").to_pylist()
    assert len(items) >= 2 and len(items) % 2 == 0
    assert all(decode_episode(item, "after crash").is_done for item in items)
