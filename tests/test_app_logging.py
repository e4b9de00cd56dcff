"""An application logs its own experience (the env is not a simulator): the old-stack page's
``SampleBatchBuilder``/``JsonWriter`` example, ported, and ``ExperienceLogger``, under threads,
crashes and memory bounds; offline-rl trains, inspects and estimates on what they write, and
RLlib reads it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest

from offline_rl import BCConfig, ExperienceLogger, JsonWriter, SingleAgentEpisode
from offline_rl.episodes.sample_batch import SampleBatch
from offline_rl.errors import ConfigError, DataFormatError, OutputError
from offline_rl.formats.episode_input import decode_episode, sample_batch_to_episodes
from offline_rl.inspection import inspect_dataset
from offline_rl.recording.output_folder import owned_files
from offline_rl.settings.offline_data import OfflineDataConfig

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).parent.parent
EXAMPLE = Path(__file__).parent / "cartpole_app_logging_example.py"
#: The logger's layouts: the output options of each (and ``sample_batches``).
LAYOUTS = {
    "episodes": ({"output_write_episodes": True}, False),
    "tabular": ({"output_write_episodes": False}, False),
    "sample_batches": ({"output_write_episodes": False, "output_write_method": "write_json"},
                       True),
}
#: How offline-rl reads each layout.
READ_OPTIONS = {
    "episodes": {"input_read_episodes": True},
    "tabular": {"input_compress_columns": ["obs", "new_obs"]},
    "sample_batches": {"input_read_sample_batches": True, "input_read_method": "read_json"},
}


def make_logger(folder: Path, layout: str, overwrite: bool = False,
                **options) -> ExperienceLogger:
    output, sample_batches = LAYOUTS[layout]
    return ExperienceLogger(OfflineDataConfig(output=str(folder), **output, **options),
                            sample_batches=sample_batches, overwrite=overwrite)


def data_files(folder: Path) -> list[Path]:
    """The files a reader of ``folder`` sees (hidden names and folders skipped)."""
    return sorted(path for path in folder.rglob("*") if path.is_file() and not any(
        part.startswith(".") for part in path.relative_to(folder).parts))


def read_episodes(folder: Path) -> list[SingleAgentEpisode]:
    """Every episode in the episodes or SampleBatch JSON files of ``folder``."""
    episodes = []
    for file in data_files(folder):
        if file.suffix == ".json":
            for number, line in enumerate(file.read_text().splitlines()):
                episodes += sample_batch_to_episodes(json.loads(line), f"{file}:{number}")
        else:
            episodes += [decode_episode(item, str(file))
                         for item in pq.read_table(file).column("item").to_pylist()]
    return episodes


def play_cartpole(logger: ExperienceLogger, episodes: int, seed: int = 0) -> list[float]:
    """An app serving CartPole 'users' with a random policy (each action chosen with
    probability 0.5); returns the episodes' returns."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    returns = []
    for number in range(episodes):
        obs, info = env.reset(seed=seed + number)
        episode = logger.start_episode(obs, info)
        done, total = False, 0.0
        while not done:
            action = int(rng.integers(2))
            obs, reward, terminated, truncated, info = env.step(action)
            logger.log_step(episode, action, reward, obs, terminated=terminated,
                            truncated=truncated, info=info, action_prob=0.5)
            done, total = terminated or truncated, total + reward
        returns.append(total)
    return returns


# ------------------------------------------------------------------ the page's example, ported
def test_the_seed_example_writes_what_bc_trains_on_and_rllib_reads(ray_session, tmp_path,
                                                                   capsys):
    from ray.rllib.offline.json_reader import JsonReader

    from offline_rl.cli import main

    done = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "TMPDIR": str(tmp_path),
                                            "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "The preprocessor is" in done.stdout
    output = tmp_path / "demo-out"
    (file,) = data_files(output)  # never closed: completed when the script exited
    assert owned_files_of(output) == [file.name]
    summary = inspect_dataset(str(output))
    assert (summary["format"], summary["episodes"], summary["incomplete_episodes"]) == (
        "sample_batch_json", 100, 0)

    config = (BCConfig().environment("CartPole-v1")
              .training(train_batch_size_per_learner=256)
              .offline_data(input_=str(output), input_read_sample_batches=True,
                            input_read_method="read_json", dataset_num_iters_per_learner=2)
              .rl_module(model_config={"fcnet_hiddens": [16]}).debugging(seed=0))
    config.to_yaml(tmp_path / "bc.yaml")
    assert main(["train", str(tmp_path / "bc.yaml"), "--max-iterations", "3",
                 "--output-dir", str(tmp_path / "run")]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["iterations"] == 3

    batches = list(JsonReader(str(output)).read_all_files())
    assert len(batches) == 100 and sum(batch.count for batch in batches) == summary["steps"]
    first = batches[0]
    assert first["obs"].shape == (first.count, 4) and first["obs"].dtype == np.float32
    np.testing.assert_array_equal(first["obs"][1:], first["new_obs"][:-1])
    assert first["terminateds"][-1] or first["truncateds"][-1]


def owned_files_of(folder: Path) -> list[str]:
    import pyarrow.fs as pafs

    return sorted(owned_files(pafs.LocalFileSystem(), str(folder)))


# ------------------------------------------------------------------------ ExperienceLogger
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_threads_logging_interleaved_episodes_write_whole_episodes(tmp_path, layout):
    threads, episodes_per_thread = 4, 6
    logger = make_logger(tmp_path, layout, output_max_rows_per_file=17)
    start = threading.Barrier(threads)
    errors = []

    def serve(thread: int) -> None:
        try:
            start.wait()
            for number in range(episodes_per_thread):
                steps = 3 + (thread + number) % 5
                episode = logger.start_episode([thread, number, 0.0],
                                               episode_id=f"{thread}-{number}")
                for t in range(1, steps + 1):
                    logger.log_step(episode, t % 2, float(t), [thread, number, float(t)],
                                    terminated=t == steps, action_logp=math.log(0.25 * thread
                                                                                + 0.1))
        except Exception as error:  # reported by the assertion below
            errors.append(error)

    workers = [threading.Thread(target=serve, args=(thread,)) for thread in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    files = logger.close()
    assert not errors
    expected_steps = sum(3 + (thread + number) % 5 for thread in range(threads)
                         for number in range(episodes_per_thread))
    assert logger.counts() == {"episodes_open": 0, "episodes_written": 24,
                               "steps_written": expected_steps, "empty_episodes": 0}
    assert len(files) > 1 and sorted(files) == [str(path) for path in data_files(tmp_path)]
    assert owned_files_of(tmp_path) == sorted(str(path.relative_to(tmp_path))
                                              for path in data_files(tmp_path))
    summary = inspect_dataset(str(tmp_path))
    assert (summary["episodes"], summary["steps"], summary["incomplete_episodes"]) == (
        24, expected_steps, 0)
    if layout == "tabular":
        return
    episodes = read_episodes(tmp_path)
    assert sorted(episode.id_ for episode in episodes) == sorted(
        f"{thread}-{number}" for thread in range(threads) for number in range(episodes_per_thread))
    for episode in episodes:
        thread, number = (int(part) for part in episode.id_.split("-"))
        observations = np.asarray(episode.get_observations())
        assert len(episode) == 3 + (thread + number) % 5 and episode.is_terminated
        np.testing.assert_array_equal(observations[:, :2], [[thread, number]] * (len(episode) + 1))
        np.testing.assert_array_equal(observations[:, 2], np.arange(len(episode) + 1))
        np.testing.assert_allclose(episode.get_extra_model_outputs("action_prob"),
                                   0.25 * thread + 0.1, rtol=1e-6)


CRASHING_APP = """
import os, sys
from offline_rl import ExperienceLogger
from offline_rl.recording import staging
from offline_rl.settings.offline_data import OfflineDataConfig

folder, write_method = sys.argv[1:]
staged_files = []


class DiesMidWrite:
    def __init__(self, stream):
        self.stream = stream

    def write(self, data):
        self.stream.write(bytes(data)[: len(data) // 2])
        self.stream.flush()
        os._exit(3)

    def __getattr__(self, name):
        return getattr(self.stream, name)


opened = staging.StagedFile.__init__


def open_and_die_in_the_third(self, *args):
    opened(self, *args)
    staged_files.append(self)
    if len(staged_files) == 3:
        self.stream = DiesMidWrite(self.stream)


staging.StagedFile.__init__ = open_and_die_in_the_third
logger = ExperienceLogger(OfflineDataConfig(
    output=folder, output_write_episodes=write_method == "write_parquet",
    output_write_method=write_method,
    output_max_rows_per_file=2 if write_method == "write_parquet" else 6),  # 2 episodes a file
    sample_batches=write_method == "write_json")
for number in range(100):
    episode = logger.start_episode([0.0])
    for t in range(1, 4):
        logger.log_step(episode, 0, 1.0, [float(t)], terminated=t == 3, action_prob=1.0)
"""


@pytest.mark.parametrize("write_method", ["write_parquet", "write_json"])
def test_a_crash_mid_file_leaves_no_file_that_reads_as_complete(tmp_path, write_method):
    folder = tmp_path / "logs"
    done = subprocess.run([sys.executable, "-c", CRASHING_APP, str(folder), write_method],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 3, done.stderr  # died writing its third file
    files = data_files(folder)
    assert len(files) == 2  # the two completed files, whole; the third never got a name
    assert owned_files_of(folder) == sorted(str(path.relative_to(folder)) for path in files)
    assert list((folder / ".offline-rl" / "staging").iterdir())  # the part, never read
    episodes = read_episodes(folder)
    assert len(episodes) == 4 and all(len(e) == 3 and e.is_terminated for e in episodes)
    assert inspect_dataset(str(folder))["episodes"] == 4
    # Logging into the folder again: the crash's leftovers are offline-rl's, not the user's.
    with make_logger(folder, "sample_batches" if write_method == "write_json" else "episodes"
                     ) as logger:
        play_cartpole(logger, 1)
    assert len(read_episodes(folder)) == 5


@pytest.mark.parametrize("layout,limit", [("tabular", {"output_max_rows_per_file": 50}),
                                          ("episodes", {"output_max_file_size": 4000})])
def test_memory_is_bounded_by_flushing_files_while_logging(tmp_path, layout, limit):
    logger = make_logger(tmp_path, layout, output_compress_columns=[], **limit)
    steps, most_buffered = 0, 0
    for _ in range(30):
        episode = logger.start_episode(np.zeros(8))
        for t in range(1, 8):
            logger.log_step(episode, 1, 1.0, np.full(8, t, float), truncated=t == 7,
                            action_prob=1.0)
        steps += 7
        on_disk = sum(pq.read_metadata(file).num_rows for file in data_files(tmp_path))
        most_buffered = max(most_buffered, steps - on_disk * (1 if layout == "tabular" else 7))
    logger.close()
    rows = [pq.read_metadata(file).num_rows for file in data_files(tmp_path)]
    if layout == "tabular":
        assert max(rows) <= 50 and sum(rows) == 210
        assert most_buffered < 50 + 7
    else:  # one episode of 8 float64 observations is ~500 bytes: files of ~8 episodes
        assert sum(rows) == 30 and len(rows) >= 3
        assert most_buffered <= 10 * 7


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_offline_rl_inspects_and_trains_on_each_layout(ray_session, tmp_path, layout, capsys):
    from offline_rl.cli import main

    env = gym.make("CartPole-v1")
    with ExperienceLogger(
            OfflineDataConfig(output=str(tmp_path / "logs"), **LAYOUTS[layout][0]),
            sample_batches=LAYOUTS[layout][1], observation_space=env.observation_space,
            action_space=env.action_space) as logger:
        returns = play_cartpole(logger, 20)
    assert main(["inspect", str(tmp_path / "logs"), "--env", "CartPole-v1"]) == 0
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert report["episodes"] == 20 and report["incomplete_episodes"] == 0
    assert report["episode_return_mean"] == pytest.approx(np.mean(returns))
    assert report["steps"] == sum(returns)
    config = (BCConfig().environment("CartPole-v1")
              .training(train_batch_size_per_learner=64)
              .offline_data(input_=str(tmp_path / "logs"), dataset_num_iters_per_learner=2,
                            **READ_OPTIONS[layout])
              .rl_module(model_config={"fcnet_hiddens": [16]}).debugging(seed=0))
    with config.build() as algo:
        result = algo.train()
    assert np.isfinite(result["learners"]["default_policy"]["total_loss"])


def test_off_policy_estimation_reads_the_logged_propensities(tmp_path):
    from offline_rl.evaluation.off_policy import WeightedImportanceSampling
    from offline_rl.models.model_config import DefaultModelConfig
    from offline_rl.models.torch_rl_module import DefaultTorchRLModule

    env = gym.make("CartPole-v1")
    with make_logger(tmp_path, "episodes") as logger:
        play_cartpole(logger, 10)
    episodes = read_episodes(tmp_path)
    assert all(np.allclose(e.get_extra_model_outputs("action_logp"), math.log(0.5))
               for e in episodes)
    module = DefaultTorchRLModule(env.observation_space, env.action_space,
                                  DefaultModelConfig(fcnet_hiddens=[8]))
    estimate = WeightedImportanceSampling(module, gamma=1.0).estimate(episodes)
    assert estimate["v_behavior"] == pytest.approx(np.mean([e.get_return() for e in episodes]))
    assert np.isfinite(estimate["v_target"])


def test_episodes_ended_early_or_open_at_close_are_written_truncated(tmp_path):
    with make_logger(tmp_path, "episodes") as logger:
        left = logger.start_episode([0.0])
        logger.log_step(left, 1, 1.0, [1.0], action_prob=1.0)
        logger.end_episode(left)
        empty = logger.start_episode([0.0])
        logger.end_episode(empty)
        open_at_close = logger.start_episode([0.0], episode_id="open")
        logger.log_step(open_at_close, 0, 2.0, [2.0], action_prob=1.0)
    assert logger.counts() == {"episodes_open": 0, "episodes_written": 2, "steps_written": 2,
                               "empty_episodes": 1}
    episodes = read_episodes(tmp_path)
    assert [(e.is_terminated, e.is_truncated, len(e)) for e in episodes] == [(False, True, 1)] * 2
    with pytest.raises(OutputError, match="closed"):
        logger.start_episode([0.0])


def test_mistakes_are_refused_naming_the_fix(tmp_path):
    with pytest.raises(ConfigError, match="output_write_method='write_json'"):
        ExperienceLogger(OfflineDataConfig(output=str(tmp_path / "a")), sample_batches=True)
    with pytest.raises(ConfigError, match="output: set the folder"):
        ExperienceLogger(OfflineDataConfig())
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.json").write_text("{}")
    with pytest.raises(OutputError, match="holds 1 file offline-rl did not write"):
        make_logger(tmp_path / "mine", "sample_batches")
    with pytest.warns(UserWarning, match=r"keeps 1 file of data .*\(notes.json\)"):
        logger = make_logger(tmp_path / "mine", "sample_batches", overwrite=True)
    with logger:
        play_cartpole(logger, 1)
    assert (tmp_path / "mine" / "notes.json").read_text() == "{}"
    box = gym.spaces.Box(-1.0, 1.0, (2,))
    with ExperienceLogger(OfflineDataConfig(output=str(tmp_path / "b")),
                          observation_space=box, action_space=gym.spaces.Discrete(2),
                          max_open_episodes=1) as logger:
        with pytest.raises(DataFormatError, match=r"has shape \(3,\).*needs \(2,\)"):
            logger.start_episode([0.0, 0.0, 0.0])
        episode = logger.start_episode([0.0, 0.0])
        with pytest.raises(OutputError, match="max_open_episodes"):
            logger.start_episode([0.0, 0.0])
        with pytest.raises(DataFormatError, match="give action_prob or action_logp"):
            logger.log_step(episode, 1, 1.0, [0.0, 0.0])
        with pytest.raises(DataFormatError, match="above 0"):
            logger.log_step(episode, 1, 1.0, [0.0, 0.0], action_prob=0.0)
        with pytest.raises(DataFormatError, match="not finite"):
            logger.log_step(episode, 1, float("nan"), [0.0, 0.0], action_prob=1.0)
        with pytest.raises(DataFormatError, match="'nope' is not open"):
            logger.log_step("nope", 1, 1.0, [0.0, 0.0], action_prob=1.0)
        logger.log_step(episode, 1, 1.0, [0.0, 0.0], action_prob=1.0)
        with pytest.raises(DataFormatError, match="log the same ones every step"):
            logger.log_step(episode, 1, 1.0, [0.0, 0.0], action_prob=1.0,
                            extra_model_outputs={"vf_preds": 0.0})


def test_a_value_that_does_not_fit_is_refused_naming_it_and_nothing_is_taken(tmp_path):
    from offline_rl.recording.sample_batch_builder import SampleBatchBuilder

    with make_logger(tmp_path, "episodes") as logger:
        episode = logger.start_episode([0.0, 0.0], episode_id="s1")
        logger.log_step(episode, 1, 1.0, [0.1, 0.0], action_prob=0.9)
        before = logger.counts()
        with pytest.raises(DataFormatError, match=r"^episode 's1', step 1: next_obs \[0.1, 0.0, "
                                                  r"3.0\] has shape \(3,\), but the values "
                                                  r"logged before it have shape \(2,\)"):
            logger.log_step(episode, 1, 1.0, [0.1, 0.0, 3.0], action_prob=0.9, terminated=True)
        with pytest.raises(DataFormatError, match=r"^episode 's1', step 1: reward '1.0' is not "
                                                  r"a real number"):
            logger.log_step(episode, 1, "1.0", [0.2, 0.0], action_prob=0.9, terminated=True)
        with pytest.raises(DataFormatError, match=r"step 1: action \[0, 1\] has shape \(2,\)"):
            logger.log_step(episode, [0, 1], 1.0, [0.2, 0.0], action_prob=0.9)
        with pytest.raises(DataFormatError, match=r"step 1: terminated 'yes' is not True or "
                                                  r"False"):
            logger.log_step(episode, 1, 1.0, [0.2, 0.0], action_prob=0.9, terminated="yes")
        with pytest.raises(DataFormatError, match=r"step 1: extra_model_outputs\['vf_preds'\] "
                                                  r"\[\[0.0\], \[0.0, 1.0\]\] is ragged"):
            logger.log_step(episode, 1, 1.0, [0.2, 0.0], action_prob=0.9,
                            extra_model_outputs={"vf_preds": [[0.0], [0.0, 1.0]]})
        assert logger.counts() == before
        logger.log_step(episode, 0, 2.0, [0.2, 0.0], action_prob=0.9, terminated=True)
    assert logger.counts()["episodes_written"] == 1
    (written,) = read_episodes(tmp_path)
    assert written.get_rewards().tolist() == [1.0, 2.0] and len(written) == 2

    builder = SampleBatchBuilder()
    builder.add_values(obs=[0.0, 0.0], actions=1)
    with pytest.raises(DataFormatError, match=r"^add_values: row 1: obs \[0.0, 0.0, 1.0\] has "
                                              r"shape \(3,\), but .* \(2,\); refused"):
        builder.add_values(obs=[0.0, 0.0, 1.0], actions=1)
    with pytest.raises(DataFormatError, match=r"row 1: actions 'left' holds text, but .* "
                                              r"numbers"):
        builder.add_values(obs=[0.0, 1.0], actions="left")
    builder.add_values(obs=[0.0, 1.0], actions=0)
    assert builder.build_and_reset()["obs"].shape == (2, 2)


FAILING_DISK_APP = """
import resource, signal, sys
from offline_rl import ExperienceLogger
from offline_rl.settings.offline_data import OfflineDataConfig

folder, layout = sys.argv[1:]
sample_batches = layout == "sample_batches"
logger = ExperienceLogger(OfflineDataConfig(
    output=folder, output_write_episodes=not sample_batches,
    output_write_method="write_json" if sample_batches else "write_parquet",
    output_max_rows_per_file=6 if sample_batches else 2), sample_batches=sample_batches)


def play(episodes):
    for number in range(episodes):
        episode = logger.start_episode([0.0])
        for t in range(1, 4):
            logger.log_step(episode, 0, 1.0, [float(t)], terminated=t == 3, action_prob=1.0)


play(4)  # two files of two episodes
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    play(3)
except OSError as error:
    print(type(error).__name__, error)
print(logger.counts())
try:
    logger.start_episode([0.0])
except OSError as error:
    print(type(error).__name__, str(error)[:46])
logger.close()
"""


@pytest.mark.parametrize("layout", ["episodes", "sample_batches"])
def test_a_write_that_fails_says_how_many_episodes_are_safe_on_disk(tmp_path, layout):
    folder = tmp_path / "logs"
    done = subprocess.run([sys.executable, "-c", FAILING_DISK_APP, str(folder), layout],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    error, counts, after = done.stdout.splitlines()
    assert error.startswith("OutputError ExperienceLogger: writing into ")
    assert "File too large" in error
    lost = 2 if layout == "episodes" else 1  # a file of two episodes; the first line
    assert ("4 episode(s) (12 steps) are safe on disk, in the 2 file(s) written before (listed "
            f"in the folder's manifest); {lost} episode(s) finished after them were not "
            "written, nor 0 still open") in error
    assert counts == str({"episodes_open": 0, "episodes_written": 4, "steps_written": 12,
                          "empty_episodes": 0})
    assert after == "OutputError ExperienceLogger stopped logging: writing into"
    assert len(data_files(folder)) == 2 and len(read_episodes(folder)) == 4
    assert owned_files_of(folder) == sorted(str(path.relative_to(folder))
                                            for path in data_files(folder))


# ------------------------------------------------------------------------ JsonWriter on its own
def one_step_batch(t: int, **columns) -> SampleBatch:
    return SampleBatch({"t": [t], "eps_id": [t], "obs": np.zeros((1, 4)), "actions": [0],
                        "rewards": [1.0], "terminateds": [True], "truncateds": [False],
                        "new_obs": np.ones((1, 4)), **columns})


def test_a_batch_json_cannot_hold_is_refused_whole_and_the_file_keeps_whole_lines(tmp_path):
    writer = JsonWriter(str(tmp_path))
    writer.write(one_step_batch(0))
    with pytest.raises(DataFormatError, match=r"JsonWriter: column 'infos' cannot be written as "
                                              r"JSON \(JsonWriter cannot write a set.*the batch "
                                              r"was not written, and .*output-.*_worker-0_0\.json "
                                              r"holds the 1 whole batch\(es\) written before it"):
        writer.write(one_step_batch(1, infos=[{"seen": {1, 2}}]))
    writer.write(one_step_batch(2))
    (file,) = writer.close()
    assert [json.loads(line)["t"] for line in Path(file).read_text().splitlines()] == [[0], [2]]


FAILING_JSON_WRITER = """
import resource, signal, sys
import numpy as np
from offline_rl import JsonWriter
from offline_rl.episodes.sample_batch import SampleBatch

writer = JsonWriter(sys.argv[1], max_rows_per_file=2)
batch = lambda rows: SampleBatch({"t": list(range(rows)), "obs": np.zeros((rows, 64)),
                                  "actions": [0] * rows})
writer.write(batch(1))
writer.write(batch(1))  # the first file, complete
writer.write(batch(1))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
for attempt in range(2):
    try:
        writer.write(batch(400))
    except OSError as error:
        print(type(error).__name__, error)
print(len(writer.close()))
"""


def test_a_write_that_fails_drops_the_file_being_written_and_says_what_is_kept(tmp_path):
    folder = tmp_path / "logs"
    done = subprocess.run([sys.executable, "-c", FAILING_JSON_WRITER, str(folder)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    error, after, closed = done.stdout.splitlines()
    assert error.startswith(f"OutputError JsonWriter: writing into '{folder}' failed (")
    assert "File too large" in error
    assert ("the 1 file(s) it completed before are kept (listed in the folder's manifest); "
            f"{folder}/output-") in error
    assert "_worker-0_1.json, being written, was dropped with its 1 batch(es)" in error
    assert after.startswith("OutputError JsonWriter stopped writing: JsonWriter: writing into")
    assert closed == "1"
    (file,) = data_files(folder)
    assert [json.loads(line)["t"] for line in file.read_text().splitlines()] == [[0], [0]]
    assert owned_files_of(folder) == [file.name]
