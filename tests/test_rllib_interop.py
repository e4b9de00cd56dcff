"""Interop with the real RLlib, both ways: RLlib records data at test time with its own API and
we train on it; RLlib decodes and trains on everything we write.

``ray[rllib]`` is a test-only dependency; the last test checks that offline-rl never imports it.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import msgpack
import msgpack_numpy
import numpy as np
import pyarrow.parquet as pq
import pytest

from offline_rl import BCConfig, ExperienceLogger
from offline_rl.inspection import inspect_dataset
from offline_rl.settings.offline_data import OfflineDataConfig

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # runs the real RLlib

FIXTURES = Path(__file__).parent / "fixtures"
ENVS = ("CartPole-v1", "Pendulum-v1")
#: Output settings: (name, output_write_episodes, output_compress_columns). Compression applies
#: to tabular output only: RLlib (like us) writes episodes uncompressed whatever the setting.
FORMATS = (
    ("episodes", True, []),
    ("tabular", False, []),
    ("tabular-compress-obs", False, ["obs"]),
)
EPISODES_PER_RECORDING = 6


def rllib_record(env: str, output: Path, write_episodes: bool, compress: list[str]) -> Path:
    """Records episodes of an untrained PPO policy with RLlib's own recording env runner."""
    from ray.rllib.algorithms.ppo import PPOConfig

    from tests.rllib_experts import rllib_record as record_with_rllib

    config = (
        PPOConfig()
        .environment(env)
        .env_runners(batch_mode="complete_episodes")
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .offline_data(output=str(output), output_write_episodes=write_episodes,
                      output_compress_columns=compress)
        .debugging(seed=0)
    )
    return record_with_rllib(config, output, num_episodes=EPISODES_PER_RECORDING, explore=True)


@pytest.fixture(scope="module")
def rllib_recordings(ray_session, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rllib-recordings")
    return {f"{env}/{name}": rllib_record(env, root / env / name, episodes, compress)
            for env in ENVS for name, episodes, compress in FORMATS}


def bc_config(env: str, input_: str | list[str], *, episodes: bool = False,
              compress: list[str] = ()) -> BCConfig:
    return (
        BCConfig()
        .environment(env)
        .training(lr=1e-3, train_batch_size_per_learner=64)
        .offline_data(input_=input_, input_read_episodes=episodes,
                      input_compress_columns=list(compress), dataset_num_iters_per_learner=None)
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .debugging(seed=0)
    )


def actions_outside(folder: Path, low: float, high: float) -> int:
    """Counts the actions outside [low, high] in RLlib's tabular files, with pyarrow alone."""
    actions = np.concatenate([np.asarray(pq.read_table(file).column("actions").to_pylist(),
                                         dtype=np.float64).reshape(-1)
                              for file in sorted(folder.rglob("*.parquet"))])
    return int(((actions < low) | (actions > high)).sum())


@pytest.mark.parametrize("env", ENVS)
@pytest.mark.parametrize("name", [name for name, _, _ in FORMATS])
def test_bc_trains_on_what_rllib_recorded(rllib_recordings, env, name):
    path = rllib_recordings[f"{env}/{name}"]
    compress = ["obs"] if name.endswith("compress-obs") else []
    config = bc_config(env, str(path), episodes=name == "episodes", compress=compress)
    with config.build() as algo:
        result = algo.train()  # one epoch of the data
        counts = algo.offline_data.counts(wait=True)  # result["data"] holds those arrived so far
    losses = result["learners"]["default_policy"]
    assert np.isfinite(losses["total_loss"])
    assert result["data"]["rows_per_epoch"] > 0
    if env == "Pendulum-v1" and name == "tabular":
        # RLlib stores the sampled Gaussian action: some lie outside Box(-2, 2); kept and counted.
        outside = actions_outside(path, -2.0, 2.0)
        assert outside > 0
        assert counts == {"actions_out_of_bounds": outside}
        box = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
        assert inspect_dataset(str(path), action_space=box)["actions_out_of_bounds"] == outside


def test_pendulum_actions_outside_the_box_can_be_clipped_or_refused(rllib_recordings):
    from offline_rl.errors import DataFormatError

    path = str(rllib_recordings["Pendulum-v1/tabular"])
    refusing = bc_config("Pendulum-v1", path).offline_data(input_action_bounds="raise")
    with pytest.raises(DataFormatError, match=r"action \[-?\d.*outside the action space "
                                              r"Box\(-2\.0, 2\.0.*input_action_bounds"):
        with refusing.build() as algo:
            algo.train()
    clipped = bc_config("Pendulum-v1", path).offline_data(input_action_bounds="clip")
    with clipped.build() as algo:
        algo.train()
        batch = algo.offline_data.sample()
        assert algo.offline_data.counts(wait=True)["actions_out_of_bounds"] > 0
    assert np.abs(batch["actions"]).max() <= 2.0


# ------------------------------------------------------------------- what we write -> RLlib
@pytest.fixture(scope="module")
def our_writes(ray_session, rllib_recordings, tmp_path_factory) -> dict[str, Path]:
    """Every way offline-rl writes data, on CartPole: episodes and tabular folders."""
    from offline_rl.cli import main
    from offline_rl.recording.recorder import Recorder
    from tests.policies import alternating

    root = tmp_path_factory.mktemp("our-writes")
    writes = {}
    for name, episodes, compress in FORMATS:
        config = (BCConfig().environment("CartPole-v1")
                  .env_runners(num_env_runners=1)
                  .offline_data(output=str(root / f"recorder-{name}"),
                                output_write_episodes=episodes, output_compress_columns=compress))
        with Recorder(config.recorder_config(), alternating) as recorder:
            recorder.record(4, progress=False)
        writes[f"recorder-{name}"] = root / f"recorder-{name}"
    training = bc_config("CartPole-v1", str(rllib_recordings["CartPole-v1/tabular"]))
    with training.offline_data(output=str(root / "evaluate-output"),
                               output_write_episodes=True).evaluation(
            evaluation_duration=3).build() as algo:
        algo.evaluate()
    writes["evaluate-output"] = root / "evaluate-output"
    for name, extra in (("datasets-make-episodes", ["--episodes-format"]),
                        ("datasets-make-tabular", [])):
        assert main(["datasets", "make", "CartPole-v1", "medium", "--out", str(root / name),
                     "--episodes", "4", *extra]) == 0
        writes[name] = root / name
    assert main(["convert", str(writes["datasets-make-tabular"]),
                 str(root / "convert-tabular")]) == 0
    assert main(["convert", str(FIXTURES / "rllib_cartpole_sample_batch_json"),
                 str(root / "convert-json"), "--from", "json"]) == 0
    writes["convert-tabular"] = root / "convert-tabular"
    writes["convert-json"] = root / "convert-json"
    for name, options, sample_batches in (
            ("app-logger-episodes", {}, False),
            # RLlib 2.60's new-stack reader indexes a compressed new_obs column as if it held
            # one value per row (so fails on its own JsonWriter's default): obs only here.
            ("app-logger-sample-batches", {"output_write_episodes": False,
                                           "output_write_method": "write_json",
                                           "output_compress_columns": ["obs"]}, True)):
        with ExperienceLogger(OfflineDataConfig(output=str(root / name), **options),
                              sample_batches=sample_batches) as logger:
            app_plays_cartpole(logger, episodes=4)
        writes[name] = root / name
    return writes


def app_plays_cartpole(logger: ExperienceLogger, episodes: int) -> None:
    """An application logging CartPole sessions it serves, acting at random."""
    env = gym.make("CartPole-v1")
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        episode, done = logger.start_episode(obs, info), False
        while not done:
            action = int(env.action_space.sample())
            obs, reward, terminated, truncated, info = env.step(action)
            logger.log_step(episode, action, reward, obs, terminated=terminated,
                            truncated=truncated, info=info, action_prob=0.5)
            done = terminated or truncated


EPISODE_WRITES = ("recorder-episodes", "evaluate-output", "datasets-make-episodes",
                  "convert-tabular", "convert-json", "app-logger-episodes")


@pytest.mark.parametrize("name", EPISODE_WRITES)
def test_rllib_decodes_every_episode_we_write(our_writes, name):
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    files = sorted(our_writes[name].rglob("*.parquet"))
    items = [item for file in files for item in pq.read_table(file).column("item").to_pylist()]
    assert items
    for item in items:
        episode = SingleAgentEpisode.from_state(
            msgpack.unpackb(item, object_hook=msgpack_numpy.decode))
        episode.validate()
        assert episode.is_done and len(episode) > 0


def rllib_bc_trains(input_: list[str], **offline_data) -> dict:
    from ray.rllib.algorithms.bc import BCConfig as RLlibBCConfig

    spaces = gym.make("CartPole-v1")
    config = (
        RLlibBCConfig()
        .environment(observation_space=spaces.observation_space, action_space=spaces.action_space)
        .training(train_batch_size_per_learner=64)
        .learners(num_learners=0)
        .offline_data(input_=input_, dataset_num_iters_per_learner=2,
                      map_batches_kwargs={"concurrency": 1, "num_cpus": 1}, **offline_data)
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .debugging(seed=0)
    )
    algo = config.build()
    try:
        return [algo.train() for _ in range(2)][-1]
    finally:
        algo.stop()
        # RLlib's stop leaves its learner's Ray Data iterators to the garbage collector: collected
        # at exit, after Ray's shutdown, each printed a traceback ("Ray is not initialized").
        del algo
        gc.collect()


def test_rllib_bc_trains_on_our_episodes(our_writes):
    result = rllib_bc_trains([str(our_writes[name]) for name in EPISODE_WRITES],
                             input_read_episodes=True)
    assert np.isfinite(result["learners"]["default_policy"]["policy_loss"])


@pytest.mark.parametrize("compress", [[], ["obs"]])
def test_rllib_bc_trains_on_our_tabular_data(our_writes, compress):
    inputs = ([str(our_writes["recorder-tabular-compress-obs"])] if compress else
              [str(our_writes["recorder-tabular"]), str(our_writes["datasets-make-tabular"])])
    result = rllib_bc_trains(inputs, input_compress_columns=compress)
    assert np.isfinite(result["learners"]["default_policy"]["policy_loss"])


def test_rllib_json_reader_reads_our_sample_batches_as_written(our_writes, tmp_path):
    from ray.rllib.offline.json_reader import JsonReader

    from offline_rl import JsonWriter, SampleBatchBuilder

    builder, rng = SampleBatchBuilder(), np.random.default_rng(0)
    for t in range(5):
        builder.add_values(t=t, eps_id=3, agent_index=0, obs=rng.normal(size=4),
                           actions=t % 2, action_prob=0.5, action_logp=np.log(0.5),
                           rewards=1.0, terminateds=t == 4, truncateds=False, infos={"t": t},
                           new_obs=rng.normal(size=4))
    written = builder.build_and_reset()
    for compress in ([], ["obs", "new_obs"]):
        with JsonWriter(str(tmp_path / str(len(compress))), compress_columns=compress) as writer:
            writer.write(written)
        (read,) = JsonReader(str(tmp_path / str(len(compress)))).read_all_files()
        assert sorted(read) == sorted(written)
        for name, column in written.items():
            np.testing.assert_array_equal(read[name], column, err_msg=name)
    logged = list(JsonReader(str(our_writes["app-logger-sample-batches"])).read_all_files())
    assert len(logged) == 4
    for batch in logged:
        (episode,) = batch.split_by_episode()
        assert episode["terminateds"][-1] or episode["truncateds"][-1]
        np.testing.assert_array_equal(episode["obs"][1:], episode["new_obs"][:-1])
        np.testing.assert_allclose(episode["action_prob"], 0.5)


def test_rllib_bc_trains_on_our_sample_batches(our_writes):
    result = rllib_bc_trains([str(our_writes["app-logger-sample-batches"])],
                             input_read_sample_batches=True, input_read_method="read_json",
                             input_compress_columns=["obs"])
    assert np.isfinite(result["learners"]["default_policy"]["policy_loss"])


def test_offline_rl_never_imports_rllib():
    script = (
        "import importlib, json, pkgutil, sys\n"
        "import offline_rl, connectors\n"
        "for package in (offline_rl, connectors):\n"
        "    for module in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(module.name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('ray.rllib'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
