"""The examples of RLlib's "Working with Offline Data" page (new API stack; the seed), each run
as written with ``from offline_rl import ...`` in place of the ``ray.rllib`` imports.

Deviations, each said where it happens:
- The first example trains a PPO expert online; offline-rl trains offline only, so the chain
  starts from the scripted CartPole expert's data (``cartpole_data``) and BC learns the
  expert through Tune instead; the recording example then loads that BC module.
- ``ray.train.RunConfig``/``CheckpointConfig`` became Ray Train v2's classes in Ray 2.60 and no
  longer take ``checkpoint_frequency``; Tune's own (``tune.RunConfig``, ``tune.CheckpointConfig``)
  are what the examples mean. Results go to a temporary ``storage_path``.
- Sizes: the test cluster has 2 CPUs and the tests a few minutes, so episode counts are small,
  and where an example's resources cannot fit, the test first checks the error that says so,
  then runs the example with resources that fit.
"""

from __future__ import annotations

from collections import defaultdict

import gymnasium as gym
import msgpack
import msgpack_numpy as mnp
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from ray import data, tune

from offline_rl import (
    COMPONENT_RL_MODULE,
    ENV_RUNNER_RESULTS,
    EPISODE_RETURN_MEAN,
    EVALUATION_RESULTS,
    Algorithm,
    BCConfig,
    Columns,
    DefaultModelConfig,
    OfflinePreLearner,
    SingleAgentEpisode,
)
from offline_rl.errors import ConfigError, ResourceError
from tests.session_fixtures import cpus_held_after
from tests.test_filesystems import s3_kwargs  # noqa: F401  (the loopback S3 server)

METRIC = f"{EVALUATION_RESULTS}/{ENV_RUNNER_RESULTS}/{EPISODE_RETURN_MEAN}"
#: Bounds each Tune run (the examples stop on the metric alone).
MAX_ITERATIONS = 400
SAMPLE_BATCHES = "tests/fixtures/rllib_cartpole_sample_batch_json"


def expert_model_config() -> DefaultModelConfig:
    """The examples' module: one linear layer of 32 units, encoder shared with the value head."""
    return DefaultModelConfig(fcnet_hiddens=[32], fcnet_activation="linear",
                              vf_share_layers=True)


@pytest.fixture(scope="module")
def best_checkpoint(ray_session, cartpole_data, tmp_path_factory) -> str:
    """Example 1, "pre-train an expert": BC on the scripted expert's data through Tune (see the
    module docstring), stopped on the evaluation return, checkpointed every iteration. A trial
    takes a CPU for itself, one for reading and one per PreLearner where they fit: 3, so on 2
    CPUs the trial's process and its PreLearner take half a CPU each, given here by hand
    (example 3's trial is left to size itself)."""
    config = (
        BCConfig()
        .environment("CartPole-v1")
        .training(lr=0.003)
        .rl_module(model_config=expert_model_config())
        .offline_data(input_=str(cartpole_data), dataset_num_iters_per_learner=25,
                      map_batches_kwargs={"num_cpus": 0.5})
        .resources(num_cpus_for_main_process=0.5)
        .evaluation(evaluation_interval=1, evaluation_duration=5)
        .debugging(seed=0)
    )
    tuner = tune.Tuner(
        "BC",
        param_space=config,
        run_config=tune.RunConfig(
            stop={METRIC: 450.0, "training_iteration": MAX_ITERATIONS},
            name="docs_rllib_offline_pretrain_bc",
            storage_path=str(tmp_path_factory.mktemp("ray_results")),
            verbose=0,
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1,
                                                    checkpoint_at_end=True),
        ),
    )
    results = tuner.fit()
    best = results.get_best_result(metric=METRIC, mode="max")
    assert best.error is None
    assert best.metrics[EVALUATION_RESULTS][ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN] >= 450
    return best.checkpoint.path


def recording_config(cartpole_data, output: str, **offline_data) -> BCConfig:
    """The recording examples' config (PPOConfig there; BC needs an ``input_`` to build)."""
    return (
        BCConfig()
        .environment(env="CartPole-v1")
        .env_runners(batch_mode="complete_episodes")
        .evaluation(evaluation_num_env_runners=5, evaluation_duration=50,
                    evaluation_duration_unit="episodes")
        .rl_module(model_config=expert_model_config())
        .offline_data(input_=str(cartpole_data), output=output, **offline_data)
    )


@pytest.fixture(scope="module")
def data_path(best_checkpoint, cartpole_data, tmp_path_factory) -> str:
    """Example 2, "record expert data to local disk": the expert module restored with
    ``component=COMPONENT_RL_MODULE``, recorded as episodes by evaluation env runners."""
    data_path = str(tmp_path_factory.mktemp("docs_rllib_offline_recording"))
    config = recording_config(cartpole_data, data_path, output_write_episodes=True,
                              output_max_rows_per_file=25)
    # A CPU for each of the example's 5 runners, asked for, cannot fit; left at "auto", the
    # runners share the CPUs, saying so.
    with pytest.raises(ResourceError, match=r"5 env runner\(s\) x 1 CPU need 5 CPU, but the "
                                            r"Ray cluster has 2; lower num_env_runners"):
        config.copy().env_runners(num_cpus_per_env_runner=1).build()
    # Sized to the test's time: 2 runners, 25 episodes per evaluate(), so that a runner
    # reaches the 25 rows of a file in the second.
    config.evaluation(evaluation_num_env_runners=2, evaluation_duration=25).debugging(seed=0)
    with pytest.warns(UserWarning, match=r"env runners share the CPUs \(num_cpus_per_env_runner"
                                         r"='auto'\): 2 x 1 CPU do not fit beside the 2"):
        algo = config.build()
    algo.restore_from_path(best_checkpoint, component=COMPONENT_RL_MODULE)
    for _ in range(2):
        eval_results = algo.evaluate()
        assert eval_results[ENV_RUNNER_RESULTS]["num_episodes"] == 25
    algo.stop()
    return data_path


@pytest.mark.slow
def test_expert_recording_holds_whole_episodes_per_runner_folder(data_path):
    files = sorted(pafs.LocalFileSystem().get_file_info(
        pafs.FileSelector(data_path, recursive=True)), key=lambda info: info.path)
    parquet = [info.path for info in files if info.path.endswith(".parquet")]
    assert {path.split("/")[-3] for path in parquet} == {"cartpole-v1"}
    rows = [pq.read_metadata(path).num_rows for path in parquet]
    assert sum(rows) == 50
    # 50 episodes over 2 runners: one of them buffers 25 and writes a file of 25 at once.
    assert max(rows) == 25


def bc_config(input_path: str, **map_batches_kwargs: float) -> BCConfig:
    """Example 3's config, with the PreLearner pool's ``map_batches_kwargs`` given."""
    return (
        BCConfig()
        .environment(env="CartPole-v1")
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=1024)
        .offline_data(
            input_=[input_path],
            input_read_episodes=True,
            input_read_batch_size=512,
            map_batches_kwargs=map_batches_kwargs,
            iter_batches_kwargs={"prefetch_batches": 2, "local_shuffle_buffer_size": None},
            dataset_num_iters_per_learner=1,
        )
        .evaluation(
            evaluation_interval=3,
            evaluation_num_env_runners=1,
            evaluation_duration=5,
            evaluation_parallel_to_training=True,
        )
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bc_on_saved_experiences_through_tune(data_path, tmp_path):
    """Example 3, "training on previously saved experiences": the trial reaches 450 and its
    checkpoint rebuilds the algorithm (a grid search is in test_tune.py)."""
    run_config = tune.RunConfig(
        name="docs_rllib_offline_bc",
        stop={METRIC: 450.0, "training_iteration": MAX_ITERATIONS},
        storage_path=str(tmp_path),
        checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=0, checkpoint_at_end=True),
        verbose=0,
    )
    exact = bc_config(data_path, concurrency=2, num_cpus=1)
    with pytest.raises(ResourceError, match=r"a BC trial needs 5 CPU \(\{'CPU': 1.0\} \+ "
                                            r"\{'CPU': 4.0\}\), but the Ray cluster has 2"):
        tune.Tuner("BC", param_space=exact, run_config=run_config).fit()

    # Without the hand-sized pool, the trial fits 2 CPUs by itself: half a CPU for its process
    # and for its one PreLearner, one for the read task, and the evaluation runner shares them.
    # lr=3e-3: at BC's default (1e-4, the example's) the small data needs more than
    # MAX_ITERATIONS updates to reach 450; 20 updates per iteration, where the example's 1 has
    # the trial evaluate every 3 updates.
    config = (bc_config(data_path).training(lr=3e-3)
              .offline_data(dataset_num_iters_per_learner=20).debugging(seed=0))
    with pytest.warns(UserWarning, match=r"a BC trial sized to the cluster's 2 CPUs \(options "
                                         r"left at 'auto'\): num_cpus_for_main_process=0.5, "
                                         r"num_cpus_per_env_runner=0, map_batches_kwargs\["
                                         r"'num_cpus'\]=0.5"):
        (result,) = tune.Tuner("BC", param_space=config, run_config=run_config).fit()

    assert result.error is None
    assert result.metrics[EVALUATION_RESULTS][ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN] >= 450
    # Starved of object store memory in the trial's placement group, Ray Data held each block
    # the read had output until its idle detector released one, every 10 s: the read's output
    # backpressure reached 20 s in the first iteration (which took 22-31 s, by the machine).
    # Fed, no operator's output waits (0 s), however slow the machine.
    first_iteration = result.metrics_dataframe.iloc[0]
    output_backpressure_s = first_iteration.filter(like="/output_backpressure_s")
    assert len(output_backpressure_s) >= 2 and (output_backpressure_s < 10).all()
    with Algorithm.from_checkpoint(result.checkpoint.path) as algo:
        assert algo.iteration == result.metrics["training_iteration"]
        assert algo.evaluate()[ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN] > 100


def test_external_expert_schema_with_a_done_column(ray_session, cartpole_data, tmp_path):
    """Example 4, "using external expert experiences": columns named (o_t, a_t, r_t, o_tp1,
    d_t, i_t, logprobs_t), mapped with ``input_read_schema``; ``done`` becomes terminated."""
    table = pq.read_table(next(cartpole_data.rglob("*.parquet")))
    renamed = {"obs": "o_t", "actions": "a_t", "rewards": "r_t", "new_obs": "o_tp1",
               "terminateds": "d_t", "infos": "i_t", "action_logp": "logprobs_t"}
    table = table.drop_columns([name for name in table.column_names
                                if name not in renamed and name != "eps_id"])
    pq.write_table(table.rename_columns([renamed.get(name, name)
                                         for name in table.column_names]),
                   tmp_path / "expert.parquet")
    config = (
        BCConfig()
        .environment("CartPole-v1")
        .offline_data(
            input_=[str(tmp_path)],
            input_read_schema={
                Columns.OBS: "o_t",
                Columns.ACTIONS: "a_t",
                Columns.REWARDS: "r_t",
                Columns.NEXT_OBS: "o_tp1",
                Columns.INFOS: "i_t",
                "done": "d_t",
            },
            dataset_num_iters_per_learner=2,
        )
    )
    with config.build() as algo:
        result = algo.train()
    assert result["learners"]["__all_modules__"]["num_env_steps_trained"] == 2 * 1024


@pytest.fixture(scope="module")
def tabular_data_path(best_checkpoint, cartpole_data, tmp_path_factory) -> str:
    """Example 5's recording, tabular (``output_write_episodes=False``). RLlib 2.60 packs
    ``obs``/``new_obs`` in tabular output by default (``output_compress_columns``), and so do
    we; the seed's printed schema and its row loop assume plain arrays, so compression is off
    here."""
    tabular_data_path = str(tmp_path_factory.mktemp("docs_rllib_offline_recording_tabular"))
    config = recording_config(cartpole_data, tabular_data_path, output_write_episodes=False,
                              output_compress_columns=[])
    config.evaluation(evaluation_num_env_runners=2, evaluation_duration=4).env_runners(
        num_cpus_per_env_runner=0)
    algo = config.build()
    algo.restore_from_path(best_checkpoint, component=COMPONENT_RL_MODULE)
    for _ in range(2):
        algo.evaluate()
    algo.stop()
    return tabular_data_path


@pytest.mark.slow
def test_tabular_recording_converted_to_episodes_as_the_seed_does(tabular_data_path, tmp_path):
    """Example 5, "converting tabular data to RLlib's episode format": its schema, then its
    row loop building ``SingleAgentEpisode``s, written with msgpack-numpy and read back."""
    ds = data.read_parquet(tabular_data_path)
    assert {"eps_id", "obs", "actions", "rewards", "new_obs", "terminateds", "truncateds",
            "action_dist_inputs", "action_logp"} <= set(ds.schema().names)

    env = gym.make("CartPole-v1")
    eps_obs, eps_actions, eps_rewards = [], [], []
    eps_extra_model_outputs = defaultdict(list)
    episodes = []
    for row in ds.iter_rows():  # Ray 2.60's iter_rows no longer takes prefetch_batches
        if not row["terminateds"] and not row["truncateds"]:
            eps_obs.append(row["obs"])
            eps_actions.append(row["actions"])
            eps_rewards.append(row["rewards"])
            eps_extra_model_outputs["action_dist_inputs"].append(row["action_dist_inputs"])
            eps_extra_model_outputs["action_logp"].append(row["action_logp"])
        else:
            # The seed's loop leaves the last step's action and reward out, so each of its
            # episodes would hold one observation too many; they are kept here.
            eps_obs.append(row["obs"])
            eps_actions.append(row["actions"])
            eps_rewards.append(row["rewards"])
            eps_extra_model_outputs["action_dist_inputs"].append(row["action_dist_inputs"])
            eps_extra_model_outputs["action_logp"].append(row["action_logp"])
            eps_obs.append(row["new_obs"])
            episode = SingleAgentEpisode(
                id_=row["eps_id"],
                agent_id=row["agent_id"],
                module_id=row["module_id"],
                observations=eps_obs,
                observation_space=env.observation_space,
                action_space=env.action_space,
                actions=eps_actions,
                rewards=eps_rewards,
                t_started=0,
                len_lookback_buffer=0,
                terminated=row["terminateds"],
                truncated=row["truncateds"],
                extra_model_outputs=eps_extra_model_outputs,
            )
            episodes.append(msgpack.packb(episode.get_state(), default=mnp.encode))
            eps_obs, eps_actions, eps_rewards = [], [], []
            eps_extra_model_outputs = defaultdict(list)
    assert len(episodes) == 8
    data.from_items(episodes).write_parquet(str(tmp_path / "converted"), compression="gzip")

    config = (BCConfig().environment("CartPole-v1")
              .offline_data(input_=str(tmp_path / "converted"), input_read_episodes=True,
                            dataset_num_iters_per_learner=1)
              .training(train_batch_size_per_learner=256))
    with config.build() as algo:
        assert algo.train()["learners"]["__all_modules__"]["num_env_steps_trained"] == 256


@pytest.mark.slow
def test_sample_batch_recordings_read_directly_and_converted(ray_session, tmp_path):
    """Example 6, "using old API stack SampleBatch recordings": ``input_read_sample_batches``,
    and the seed's conversion loop with ``OfflinePreLearner._map_sample_batch_to_episode``."""
    config = (BCConfig().environment("CartPole-v1")
              .offline_data(input_=SAMPLE_BATCHES, input_read_method="read_json",
                            input_read_sample_batches=True, dataset_num_iters_per_learner=1)
              .training(train_batch_size_per_learner=64))
    with config.build() as algo:
        assert algo.train()["learners"]["__all_modules__"]["num_env_steps_trained"] == 64

    output_data_path = str(tmp_path / "sample_batch_data")
    ds = data.read_json(SAMPLE_BATCHES)
    converted = 0
    for i, batch in enumerate(ds.iter_batches(batch_size=100, prefetch_batches=2)):
        episodes = OfflinePreLearner._map_sample_batch_to_episode(False, batch)["episodes"]
        converted += len(episodes)
        episode_ds = data.from_items([msgpack.packb(eps.get_state(), default=mnp.encode)
                                      for eps in episodes])
        episode_ds.write_parquet(output_data_path + f"/file-{i}".zfill(6), compression="gzip")
    assert converted > 0
    with pytest.raises(ConfigError, match="multi-agent"):
        OfflinePreLearner._map_sample_batch_to_episode(True, batch)

    config.offline_data(input_=output_data_path, input_read_method="read_parquet",
                        input_read_sample_batches=False, input_read_episodes=True)
    with config.build() as algo:
        assert algo.train()["learners"]["__all_modules__"]["num_env_steps_trained"] == 64


@pytest.mark.slow
def test_cloud_storage_input_and_recording(ray_session, s3_kwargs, cartpole_data):  # noqa: F811
    """Example 7, "using cloud storage": a pyarrow filesystem with a path relative to it, for
    reading and for recording; several output folders are refused."""
    s3 = pafs.S3FileSystem(allow_bucket_creation=True, **s3_kwargs)
    s3.create_dir("seed-bucket")
    pafs.copy_files(str(cartpole_data), "seed-bucket/dir1", destination_filesystem=s3)
    config = (BCConfig().environment("CartPole-v1")
              .offline_data(input_="seed-bucket/dir1", input_filesystem=s3,
                            dataset_num_iters_per_learner=1)
              .training(train_batch_size_per_learner=256))
    with config.build() as algo:
        assert algo.train()["learners"]["__all_modules__"]["num_env_steps_trained"] == 256

    config.offline_data(output="seed-bucket/recorded", output_filesystem=s3)
    config.evaluation(evaluation_duration=2)
    with config.build() as algo:
        assert algo.evaluate()[ENV_RUNNER_RESULTS]["num_episodes"] == 2
    recorded = s3.get_file_info(pafs.FileSelector("seed-bucket/recorded", recursive=True))
    assert any(info.path.endswith(".parquet") for info in recorded)

    with pytest.raises(ConfigError, match="output: must be one path or URI"):
        config.offline_data(output=["seed-bucket/dir1", "seed-bucket/dir2"]).build()


def test_scaling_examples_that_exceed_the_cluster_say_so(ray_session, cartpole_data):
    """The "scaling I/O throughput" examples: 10 PreLearners of 4 CPUs, 4 learners with a GPU
    each; on 2 CPUs and no GPU each fails at once with the numbers."""
    config = (BCConfig().environment("CartPole-v1")
              .offline_data(input_=str(cartpole_data),
                            map_batches_kwargs={"concurrency": 10, "num_cpus": 4}))
    with pytest.raises(ResourceError, match=r"10 actor\(s\) x 4 CPU .* but the Ray cluster "
                                            r"has 2"):
        config.build()
    config.offline_data(map_batches_kwargs={}).learners(num_learners=4, num_gpus_per_learner=1)
    with pytest.raises(ResourceError, match="GPU"):
        config.build()
    assert cpus_held_after(timeout_s=5) == 0  # the failed builds hold nothing
