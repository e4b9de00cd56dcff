"""``OfflineSingleAgentEnvRunner``: RLlib's recording env runner, built from any algorithm's
config, writing RLlib's folders, read back by ``OfflineData(config)``."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from offline_rl import (
    BCConfig,
    Columns,
    DQNConfig,
    OfflineData,
    OfflineSingleAgentEnvRunner,
    SingleAgentEpisode,
)
from offline_rl.codec import unpack_episode_state
from offline_rl.compression import unpack_rllib
from offline_rl.errors import ConfigError


def rllib_config(config_class, output: str):
    """The env runner options of RLlib's own recording tests."""
    return (config_class()
            .api_stack(enable_rl_module_and_learner=True,
                       enable_env_runner_and_connector_v2=True)
            .env_runners(rollout_fragment_length=1000, num_env_runners=0,
                         batch_mode="truncate_episodes")
            .environment("CartPole-v1")
            .rl_module(model_config_dict={"fcnet_hiddens": [32], "fcnet_activation": "linear",
                                          "vf_share_layers": True})
            .offline_data(output=output)
            .debugging(seed=0))


def folders(path) -> list[str]:
    return sorted(entry.name for entry in path.iterdir())


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_episodes_go_to_one_rllib_folder_per_sample_call_and_read_back(ray_session, tmp_path):
    config = rllib_config(DQNConfig, str(tmp_path / "episodes")).offline_data(
        output_write_episodes=True)
    runner = OfflineSingleAgentEnvRunner(config=config, worker_index=1)
    episodes = runner.sample(num_episodes=6, random_actions=True)
    assert len(episodes) == 6 and all(episode.is_done for episode in episodes)
    data_path = tmp_path / "episodes" / "cartpole-v1"
    assert folders(data_path) == ["run-000001-00001"]
    runner.sample(num_episodes=2, random_actions=True)
    files = runner.stop()
    assert folders(data_path) == ["run-000001-00001", "run-000001-00002"]
    assert len(files) == 2 and all(file.startswith(str(data_path)) for file in files)

    config.offline_data(input_=[str(data_path)], input_read_episodes=True)
    data = OfflineData(config).data
    assert data.count() == 8
    state = unpack_episode_state(data.take(1)[0]["item"], where="the first row")
    assert isinstance(SingleAgentEpisode.from_state(state), SingleAgentEpisode)


@pytest.mark.timeout(180)
def test_truncate_episodes_writes_exactly_num_timesteps_rows_of_the_configs_module(
        ray_session, tmp_path):
    config = rllib_config(BCConfig, str(tmp_path / "columns")).offline_data(
        output_write_episodes=False, output_compress_columns=[Columns.OBS, Columns.ACTIONS])
    runner = OfflineSingleAgentEnvRunner(config, worker_index=1)
    episodes = runner.sample(num_timesteps=60)  # the module's actions, sampled
    assert sum(map(len, episodes)) == 60 and episodes[-1].is_truncated
    (file,) = runner.stop()
    assert file.rsplit("/", 3)[1:3] == ["cartpole-v1", "run-000001-00001"]
    table = pq.read_table(file)
    assert table.num_rows == 60 and table.column(Columns.TRUNCATEDS).to_pylist()[-1]
    assert Columns.ACTION_LOGP in table.column_names  # the module's, recorded

    config.offline_data(input_=[file.rsplit("/", 1)[0]], input_read_episodes=False,
                        input_compress_columns=[Columns.OBS, Columns.ACTIONS])
    data = OfflineData(config).data
    assert data.count() == 60
    obs = data.take_batch(60)[Columns.OBS]  # as read: packed (the PreLearners unpack them)
    assert len(obs) == 60 and unpack_rllib(obs[0], "row 0").shape == (4,)


@pytest.mark.timeout(60)
def test_complete_episodes_and_wrong_calls(tmp_path):
    with pytest.raises(ConfigError, match=r"recording needs config\.offline_data\(output="):
        OfflineSingleAgentEnvRunner(BCConfig().environment("CartPole-v1"), worker_index=1)
    config = rllib_config(BCConfig, str(tmp_path / "out")).env_runners(
        batch_mode="complete_episodes").offline_data(output_write_episodes=False)
    runner = OfflineSingleAgentEnvRunner(config, worker_index=2)
    episodes = runner.sample(num_timesteps=30, random_actions=True)
    assert sum(map(len, episodes)) >= 30 and all(episode.is_terminated for episode in episodes)
    with pytest.raises(ConfigError, match=r"give num_timesteps or num_episodes, not both"):
        runner.sample(num_timesteps=10, num_episodes=1)
    with pytest.raises(ConfigError, match=r"sample\(explore=False\): recording samples"):
        runner.sample(num_episodes=1, explore=False)
    with pytest.raises(ConfigError, match=r"sample\(num_episodes=0\): give a whole number"):
        runner.sample(num_episodes=0)
    (file,) = runner.stop()
    assert "/cartpole-v1/run-000002-00001/" in file
    assert pq.read_table(file).num_rows == sum(map(len, episodes))
